"""``retrieval-eval view REPORT.json [MORE.json ...] -o view.html``: one self-contained HTML
page (:mod:`pytest_retrieval_eval.reporting.view`, docs/view.md). One report: its run; two
(BASE.json NEW.json, compare's order): NEW's run and the comparison; three or more: the
newest's run and the history of all of them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from .args import file_path, write_fitted

__all__ = ["add_commands", "run"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """The ``view`` subcommand."""
    view = sub.add_parser(
        "view", help="write one self-contained HTML page of JSON reports",
        description="One HTML file, opened from disk, that makes no network request: the "
        "run's facts and tables, recall by question type, recall against context tokens, "
        "latency and ingest cost, and every question's rankings. REPORT.json alone: its run; "
        "BASE.json NEW.json (compare's order): NEW's run and the comparison; three or more: "
        "the newest's run and the history of all of them (docs/view.md).")
    view.add_argument("reports", nargs="+", metavar="REPORT.json",
                      help="reports written by --retrieval-eval-json")
    view.add_argument("-o", "--output", type=file_path, required=True, metavar="FILE",
                      help="the page to write (FILE.html)")
    view.add_argument("--allow-different-data", action="store_true",
                      help="with BASE.json NEW.json: compare over the pairs both reports hold")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``view``; returns the exit status."""
    from ..reporting.compare import compare_reports, load_report
    from ..reporting.view import write_view
    from .reports import _check_apart

    paths = [Path(p) for p in args.reports]
    _check_apart("-o", args.output, paths)
    # Only the run shown needs its pairs' rankings, memories and explain facts: the base of a
    # comparison and the older reports of a history are read slim (what compare reads).
    if len(paths) == 1:
        reports = [(paths[0], load_report(paths[0]))]
    else:
        from ..reporting.history import report_time

        reports = [(p, load_report(p, slim=True)) for p in paths]
        shown = (len(reports) - 1 if len(reports) == 2
                 else max(range(len(reports)), key=lambda i: report_time(reports[i][1],
                                                                        reports[i][0])))
        reports[shown] = (paths[shown], load_report(paths[shown]))
    comparison = None
    if len(reports) == 2:
        # the page's labels: the files' names, or their paths where the names are the same
        names = ([p.name for p in paths] if paths[0].name != paths[1].name
                 else [str(p) for p in paths])
        comparison = compare_reports(reports[0][1], reports[1][1], base_name=names[0],
                                     new_name=names[1],
                                     allow_different_data=args.allow_different_data)
    size = write_view(reports, args.output, option="-o", comparison=comparison)
    write_fitted(out, [f"view: {args.output} ({size / 1024:.0f} KiB)"])
    return 0
