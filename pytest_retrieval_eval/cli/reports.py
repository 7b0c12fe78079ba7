"""``retrieval-eval compare`` and ``retrieval-eval plot``: read JSON reports and compare
them pair by pair (:mod:`pytest_retrieval_eval.reporting.compare`) or draw them as a figure
(:mod:`pytest_retrieval_eval.reporting.plot`, the ``[plot]`` extra, imported only when
asked)."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from ..reporting.plot import DEFAULT_DPI, DPI_RANGE  # matplotlib only when a figure is drawn
from .args import cache_clash, file_path, write_fitted

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
                         help="metric to compare: recall, recall_any, recall_all, ndcg_any, "
                         "memory_recall, turn_recall or tokens, optionally @k, or recall@"
                         "<B>tok (a budget); repeatable (default: recall at every shared k)")
    compare.add_argument("--allow-different-data", action="store_true",
                         help="compare reports on different datasets over the pairs both hold")
    compare.add_argument("--json", type=file_path, default=None, metavar="PATH",
                         help="also write the comparison as JSON here (default: none)")
    compare.add_argument("-v", "--verbose", action="store_true",
                         help="name every gained, lost and unmatched question")
    plot = sub.add_parser(
        "plot", help="draw a report (or its comparison with a base report) as a figure",
        description="REPORT.json alone: recall@k by question type with 95% CIs and n per "
        "type, retrievers side by side, one panel per k. BASE.json NEW.json (compare's "
        "order): delta of NEW against BASE with its 95% CI per question type. Needs the "
        "[plot] extra (matplotlib).")
    plot.add_argument("reports", nargs="+", metavar="REPORT.json",
                      help="REPORT.json, or BASE.json NEW.json as in compare")
    plot.add_argument("-o", "--output", type=file_path, required=True, metavar="FILE",
                      help="the figure: FILE.png, FILE.svg or FILE.pdf")
    plot.add_argument("--dpi", type=_dpi, default=None, metavar="N",
                      help=f"dots per inch, {DPI_RANGE[0]}..{DPI_RANGE[1]}; figures are 7.5 in "
                      f"wide (default: {DEFAULT_DPI})")
    plot.add_argument("--metric", action="append", default=None, metavar="NAME",
                      help="with BASE.json NEW.json: metrics to draw (default: recall at every "
                      "k)")
    plot.add_argument("--retrievers", default=None, metavar="NAMES",
                      help="with BASE.json NEW.json: as in compare (NAME or BASE_NAME=NEW_NAME)")
    plot.add_argument("--allow-different-data", action="store_true",
                      help="with BASE.json NEW.json: compare over the pairs both reports hold")
    plot.add_argument("--base-is-newer", action="store_true",
                      help="BASE.json was written after NEW.json on purpose: draw it anyway "
                      "(without it, that order is refused as the old NEW BASE order)")
    markdown = sub.add_parser(
        "markdown", help="render saved JSON reports as GitHub-flavoured Markdown",
        description="REPORT.json alone: its summary tables (and the comparison it holds, if "
        "the run made one), as --retrieval-eval-markdown writes them. BASE.json NEW.json "
        "(compare's order): NEW's summary and its comparison with BASE. Diagnostics and "
        "gained/lost lists fold into <details>. Written to stdout.")
    markdown.add_argument("reports", nargs="+", metavar="REPORT.json",
                          help="REPORT.json, or BASE.json NEW.json as in compare")
    markdown.add_argument("--metric", action="append", default=None, metavar="NAME",
                          help="with BASE.json NEW.json: metrics to compare (as in compare)")
    markdown.add_argument("--retrievers", default=None, metavar="NAMES",
                          help="with BASE.json NEW.json: as in compare")
    markdown.add_argument("--allow-different-data", action="store_true",
                          help="with BASE.json NEW.json: compare over the pairs both hold")


def _dpi(value: str) -> int:
    low, high = DPI_RANGE
    if not value.strip().isdigit() or not low <= int(value) <= high:
        raise argparse.ArgumentTypeError(f"{value!r}: give a whole number in {low}..{high}")
    return int(value)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``compare``, ``plot`` or ``markdown``; returns the exit status."""
    if args.command == "compare":
        return _cmd_compare(args, out, err)
    if args.command == "markdown":
        return _cmd_markdown(args, out, err)
    return _cmd_plot(args, out, err)


def _cmd_compare(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..reporting import compare as cmp_mod
    from ..reporting.compare_lines import comparison_lines
    from ..reporting.report import write_json

    paths = [Path(p) for p in args.reports]
    if len(paths) > 2 or (len(paths) == 1 and args.retrievers is None):
        raise cmp_mod.CompareError(
            "compare takes BASE.json NEW.json, or one REPORT.json with --retrievers BASE,NEW")
    _check_apart("--json", args.json, paths, "json")
    reports = [cmp_mod.load_report(p, slim=True) for p in paths]
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
    for line in comparison_lines(result, verbose=args.verbose, width=width):
        out.write(line + "\n")
    if args.json is not None:
        write_json({"comparison": result}, args.json, option="--json")
        write_fitted(out, [f"comparison JSON: {args.json}"], width)
    return 0


def _check_apart(option: str, output: Path | None, reports: list[Path],
                 kind: str | None = None) -> None:
    """Refuse, before any work, an output that names one of the command's reports (by
    resolved path or inode): writing it would replace the report it is made from; and,
    given its ``kind`` (:data:`..boundary.outputs.KINDS`), one over a file the plugin did
    not write."""
    from ..boundary.outputs import output_refusal
    from ..io.user_files import first_clash
    from ..reporting.compare import CompareError

    clash = first_clash([(option, output)], [(str(p), p) for p in reports])
    if clash is not None:
        raise CompareError(f"{option} {output} is the report {clash[2]}: writing it would "
                           f"replace that report; give {option} a path of its own")
    inside = cache_clash(option, output)
    if inside is not None:
        raise CompareError(inside)
    refused = None if output is None or kind is None else output_refusal(option, output, kind)
    if refused is not None:
        raise CompareError(refused)


def _compare_two(args: argparse.Namespace, paths: list[Path],
                 reports: list[dict[str, Any]]) -> dict[str, Any]:
    """BASE.json NEW.json compared as ``compare`` does, with the command's options."""
    from ..reporting import compare as cmp_mod

    chosen = (None if args.retrievers is None
              else cmp_mod.parse_retrievers(args.retrievers, one_report=False))
    return cmp_mod.compare_reports(reports[0], reports[1], base_name=str(paths[0]),
                                   new_name=str(paths[1]), metrics=args.metric,
                                   allow_different_data=args.allow_different_data,
                                   retrievers=chosen)


def written_at(report: Mapping[str, Any], path: Path) -> float:
    """When a report was written: its ``run.created`` (ISO 8601, where the report has one),
    else the file's modification time (``reporting.history.report_time``)."""
    from ..reporting.history import report_time

    return report_time(report, path)


def check_order(paths: list[Path], reports: list[dict[str, Any]]) -> None:
    """Refuse BASE.json NEW.json where BASE was written after NEW: the old ``plot NEW BASE``
    order, which would draw every delta with its sign flipped."""
    from ..reporting.compare import CompareError

    if written_at(reports[0], paths[0]) > written_at(reports[1], paths[1]):
        raise CompareError(
            f"plot takes BASE.json NEW.json, in compare's order (it once took NEW BASE): "
            f"{paths[0]} was written after {paths[1]}, so they look swapped; swap them, or "
            "pass --base-is-newer if the base really is the later run")


def _cmd_plot(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..reporting import compare as cmp_mod
    from ..reporting import plot as plot_mod

    paths = [Path(p) for p in args.reports]
    if len(paths) > 2:
        raise cmp_mod.CompareError("plot takes REPORT.json, or BASE.json NEW.json")
    _check_apart("-o", args.output, paths)
    plot_mod.check_output(args.output)
    plot_mod.require_matplotlib()
    reports = [cmp_mod.load_report(p, slim=True) for p in paths]
    dpi = plot_mod.DEFAULT_DPI if args.dpi is None else args.dpi
    if len(reports) == 1:
        plot_mod.plot_report(reports[0], args.output, dpi=dpi)
    else:
        if not args.base_is_newer:
            check_order(paths, reports)
        plot_mod.plot_comparison(_compare_two(args, paths, reports), args.output, dpi=dpi)
    write_fitted(out, [f"figure: {args.output}"])
    return 0


def _cmd_markdown(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..reporting import compare as cmp_mod
    from ..reporting.markdown import run_markdown

    paths = [Path(p) for p in args.reports]
    if len(paths) > 2:
        raise cmp_mod.CompareError("markdown takes REPORT.json, or BASE.json NEW.json")
    reports = [cmp_mod.load_report(p, slim=True) for p in paths]
    report = reports[-1]
    if len(reports) == 2:
        report = {**report, "comparison": _compare_two(args, paths, reports)}
    from ..boundary.outputs import MARKDOWN_MARKER

    out.write(f"{MARKDOWN_MARKER}\n{run_markdown(report)}")  # as the run writes its file
    return 0
