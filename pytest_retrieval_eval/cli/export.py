"""``retrieval-eval export REPORT --format trec --out DIR``: a saved JSON report's rankings
as TREC files (:mod:`pytest_retrieval_eval.reporting.trec_files`): one run file per
retriever and ``qrels``, for trec_eval, ranx, ir_measures and pyserini (docs/trec.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from ..errors import RetrievalEvalError
from .args import PROG, cache_clash, write_fitted

__all__ = ["FORMATS", "add_commands", "run"]

#: The formats ``export`` writes.
FORMATS = ("trec",)


def _folder(value: str) -> Path:
    if not value.strip():
        raise argparse.ArgumentTypeError("the output folder is empty; give a folder path")
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} exists and is not a folder")
    return path


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """The ``export`` subcommand."""
    export = sub.add_parser(
        "export", help="write a JSON report's rankings as TREC run and qrels files",
        description="Write REPORT.json (from --retrieval-eval-json) as TREC files in DIR: "
        "one run file per retriever (RETRIEVER.run: qid Q0 docid rank score tag, the "
        "report's top max(k) per question, strictly decreasing synthetic scores) and qrels "
        "(qid 0 docid 1 per gold id of each scored question), for trec_eval, ranx, "
        "ir_measures and pyserini. Files of the same names are replaced; DIR is created "
        "when missing. docs/trec.md names the measures that give the report's numbers.")
    export.add_argument("report", type=Path, metavar="REPORT.json")
    export.add_argument("--format", choices=FORMATS, default="trec",
                        help="the files' format (default: trec)")
    export.add_argument("--out", type=_folder, required=True, metavar="DIR",
                        help="the folder the files go to (created when missing; required)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Write the files; a line on stdout saying what and where (fitted to the terminal), a
    line on stderr per thing the files cannot give as the report did (failed items,
    another answer per k: notes, one line each as errors are)."""
    from ..reporting.report_file import load_report
    from ..reporting.trec_files import trec_export, write_trec_files

    inside = cache_clash("--out", args.out)  # before the report is read: nothing written
    if inside is not None:
        raise RetrievalEvalError(f"export: {inside}")
    report = load_report(args.report)
    export = trec_export(report, str(args.report))
    written = write_trec_files(export, args.out, inputs=[args.report])
    runs = len(written) - 1
    write_fitted(out, [f"wrote {runs} run file{'s' if runs != 1 else ''} and qrels "
                       f"({export.rankings} rankings of {export.questions} questions) to "
                       f"{args.out}"])
    if export.failed:
        err.write(f"{PROG}: note: {export.failed} failed item{'s' if export.failed != 1 else ''}"
                  f" of the report (its errors) are in no file: the report scored them not at "
                  f"all\n")
    for name, n in export.other_answer.items():
        err.write(f"{PROG}: note: {name}: {n} question{'s' if n != 1 else ''} scored some k on "
                  f"the answer to limit k, not the first k of its top {max(report['ks'])} "
                  f"the run file holds; TREC tools differ there (docs/trec.md)\n")
    return 0
