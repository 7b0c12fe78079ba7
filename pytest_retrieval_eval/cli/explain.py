"""``retrieval-eval explain REPORT QUESTION_ID [--retriever R] [--diff OTHER [--retrievers
BASE=NEW]]``: one question of a saved JSON report explained
(:mod:`pytest_retrieval_eval.reporting.explain`): its gold, each retriever's top k with the
gold marked and every row's recorded parts (for fused retrievers its semantic and FTS ranks
and their RRF sum, the query words it matched in FTS5, its score), where each gold session
landed, the RRF arithmetic and the FTS5 MATCH string; with ``--diff`` the same question in two
reports, aligned."""

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
        "marked, each row with what the run recorded of it (for hybrid and its what-ifs its "
        "semantic and FTS rank and the RRF sum of 1/(k+rank); for fts and hybrid the query "
        "words it matched in FTS5; its score), the rank where each gold session landed, and "
        "the FTS5 MATCH string vipune sends. With --diff OTHER.json: the question in both "
        "reports, per retriever of both, rows that entered (+) or left (-) the top k and "
        "the gold's moves. Nothing is rerun: the report holds it, but the words each row matched, "
        "which are asked of the store the run searched (in its cache).")
    explain.add_argument("report", type=file_path, metavar="REPORT.json")
    explain.add_argument("question_id", metavar="QUESTION_ID")
    explain.add_argument("--retriever", default=None, metavar="NAME",
                         help="only this retriever (default: every retriever of the report)")
    explain.add_argument("--diff", type=file_path, default=None, metavar="OTHER.json",
                         help="show the question in REPORT.json (base) and OTHER.json (new), "
                         "the rows of both aligned in one table, per retriever present in both")
    explain.add_argument("--retrievers", default=None, metavar="NAMES",
                         help="with --diff: the retrievers to pair, NAME or BASE_NAME="
                         "NEW_NAME, comma-separated (e.g. hybrid=hybrid+fts:or), as compare "
                         "--retrievers")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the explanation (or, with ``--diff``, the two reports' aligned); a missing
    question or retriever is one error line (exit 4)."""
    from ..reporting.compare import load_report, parse_retrievers
    from ..reporting.explain import ExplainError, explain_lines
    from ..reporting.explain_diff import diff_lines

    width = shutil.get_terminal_size((80, 24)).columns
    if args.diff is None:
        if args.retrievers is not None:
            raise ExplainError("--retrievers pairs the retrievers of two reports; give the "
                               "other report with --diff OTHER.json, or name one retriever "
                               "with --retriever")
        lines = explain_lines(load_report(args.report), args.question_id, args.retriever,
                              width, source=f"report {args.report}")
    else:
        if args.retriever is not None and args.retrievers is not None:
            raise ExplainError("--retriever and --retrievers both name the retrievers to "
                               "diff; give one of them")
        chosen = (None if args.retrievers is None
                  else parse_retrievers(args.retrievers, one_report=False))
        lines = diff_lines(load_report(args.report), load_report(args.diff), args.question_id,
                           args.retriever, chosen, width, base_source=f"report {args.report}",
                           new_source=f"report {args.diff}")
    for line in lines:
        out.write(line + "\n")
    return 0
