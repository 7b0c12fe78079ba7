"""``retrieval-eval explain REPORT QUESTION_ID [--retriever R]``: one question of a saved JSON
report explained (:mod:`pytest_retrieval_eval.reporting.explain`): its gold, each retriever's
top k with the gold marked, where each gold session landed, and for fused retrievers the
semantic and FTS ranks, the RRF arithmetic and the FTS5 MATCH string."""

from __future__ import annotations

import argparse
import shutil
from typing import Any, TextIO

from .args import file_path

__all__ = ["add_commands", "run"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """The ``explain`` subcommand."""
    explain = sub.add_parser(
        "explain", help="explain one question of a JSON report: ranks, gold, RRF, FTS query",
        description="Show one question of REPORT.json (written by --retrieval-eval-json): the "
        "question, its type, date and gold sessions; each retriever's top k with the gold "
        "marked and the rank where each gold session landed; for hybrid and its what-ifs "
        "each gold session's semantic and FTS rank, the RRF contributions 1/(k+rank), and "
        "the FTS5 MATCH string vipune sends.")
    explain.add_argument("report", type=file_path, metavar="REPORT.json")
    explain.add_argument("question_id", metavar="QUESTION_ID")
    explain.add_argument("--retriever", default=None, metavar="NAME",
                         help="only this retriever (default: every retriever of the report)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the explanation; a missing question or retriever is one error line (exit 4)."""
    from ..reporting.compare import load_report
    from ..reporting.explain import explain_lines

    report = load_report(args.report)
    width = shutil.get_terminal_size((80, 24)).columns
    for line in explain_lines(report, args.question_id, args.retriever, width,
                              source=f"report {args.report}"):
        out.write(line + "\n")
    return 0
