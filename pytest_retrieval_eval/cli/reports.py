"""``retrieval-eval compare`` and ``retrieval-eval plot``: read JSON reports and compare
them pair by pair (:mod:`pytest_retrieval_eval.reporting.compare`) or draw them as a figure
(:mod:`pytest_retrieval_eval.reporting.plot`, the ``[plot]`` extra, imported only when
asked)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any, TextIO

__all__ = ["add_commands", "run"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """The ``compare`` and ``plot`` subcommands."""
    compare = sub.add_parser(
        "compare", help="compare two JSON reports (or two retrievers of one) pair by pair",
        description="Compare BASE.json with NEW.json pair by pair (matched on question_id and "
        "retriever; --retrievers names or maps the retrievers to compare), or retrievers of "
        "one report (--retrievers BASE,NEW): delta, 95% paired bootstrap CI, paired "
        "randomization p-value, Holm-Bonferroni across the compared rows. Reports only: the "
        "exit status is 0 whatever the numbers.")
    compare.add_argument("reports", nargs="+", metavar="REPORT.json",
                         help="BASE.json NEW.json, or one report with --retrievers")
    compare.add_argument("--retrievers", default=None, metavar="NAMES",
                         help="two reports: the retrievers to compare, NAME or "
                         "BASE_NAME=NEW_NAME, comma-separated (hybrid=hybrid+fts:or,custom); "
                         "only those are printed and counted in the Holm family (default: "
                         "every retriever, by name). One report: BASE,NEW (two names, base "
                         "first) or BASE=NEW[,...]")
    compare.add_argument("--metric", action="append", default=None, metavar="NAME",
                         help="metric to compare: recall, recall_any, recall_all or ndcg_any, "
                         "optionally @k; repeatable (default: recall at every shared k)")
    compare.add_argument("--allow-different-data", action="store_true",
                         help="compare reports on different datasets over the pairs both hold")
    compare.add_argument("--json", type=Path, default=None, metavar="PATH",
                         help="also write the comparison as JSON here (default: none)")
    compare.add_argument("-v", "--verbose", action="store_true",
                         help="name every gained, lost and unmatched question")
    plot = sub.add_parser(
        "plot", help="draw a report (or its comparison with a base report) as a figure",
        description="R.json alone: recall@k by question type, retrievers side by side, one "
        "panel per k. R.json BASE.json: delta of R against BASE with its 95% CI per question "
        "type. Needs the [plot] extra (matplotlib).")
    plot.add_argument("reports", nargs="+", metavar="REPORT.json", help="R.json [BASE.json]")
    plot.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                      help="the figure: FILE.png, FILE.svg or FILE.pdf")
    plot.add_argument("--metric", action="append", default=None, metavar="NAME",
                      help="with BASE.json: metrics to draw (default: recall at every k)")
    plot.add_argument("--allow-different-data", action="store_true",
                      help="with BASE.json: compare over the pairs both reports hold")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``compare`` or ``plot``; returns the exit status."""
    if args.command == "compare":
        return _cmd_compare(args, out, err)
    return _cmd_plot(args, out, err)


def _cmd_compare(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..reporting import compare as cmp_mod
    from ..reporting.report import write_json

    paths = [Path(p) for p in args.reports]
    if len(paths) > 2 or (len(paths) == 1 and args.retrievers is None):
        raise cmp_mod.CompareError(
            "compare takes BASE.json NEW.json, or one REPORT.json with --retrievers BASE,NEW")
    reports = [cmp_mod.load_report(p) for p in paths]
    if len(paths) == 1:
        mapping = cmp_mod.parse_retrievers(args.retrievers, one_report=True)
        result = cmp_mod.compare_retrievers(reports[0], *mapping[0], name=str(paths[0]),
                                            metrics=args.metric, more=mapping[1:])
    else:
        chosen = (None if args.retrievers is None
                  else cmp_mod.parse_retrievers(args.retrievers, one_report=False))
        result = cmp_mod.compare_reports(reports[0], reports[1], base_name=str(paths[0]),
                                         new_name=str(paths[1]), metrics=args.metric,
                                         allow_different_data=args.allow_different_data,
                                         retrievers=chosen)
    width = shutil.get_terminal_size().columns
    for line in cmp_mod.comparison_lines(result, verbose=args.verbose, width=width):
        out.write(line + "\n")
    if args.json is not None:
        write_json({"comparison": result}, args.json, option="--json")
        out.write(f"comparison JSON: {args.json}\n")
    return 0


def _cmd_plot(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..reporting import compare as cmp_mod
    from ..reporting import plot as plot_mod

    paths = [Path(p) for p in args.reports]
    if len(paths) > 2:
        raise cmp_mod.CompareError("plot takes R.json, or R.json BASE.json")
    plot_mod.check_output(args.output)
    plot_mod.require_matplotlib()
    reports = [cmp_mod.load_report(p) for p in paths]
    if len(reports) == 1:
        plot_mod.plot_report(reports[0], args.output)
    else:
        result = cmp_mod.compare_reports(reports[1], reports[0], base_name=str(paths[1]),
                                         new_name=str(paths[0]), metrics=args.metric,
                                         allow_different_data=args.allow_different_data)
        plot_mod.plot_comparison(result, args.output)
    out.write(f"figure: {args.output}\n")
    return 0
