"""The ``retrieval-eval`` console script: the prep phase outside pytest, cache sharing,
report comparison and data generation. This module assembles the parser and runs
:func:`main`; each group of subcommands lives in its own module:

* :mod:`.prep`: ``retrieval-eval prep --data SPEC --model SPEC --cache DIR [...]`` builds
  the corpus and embeds every text the cache lacks (resumable: run the same command again
  after Ctrl-C or a crash), drawing a progress bar on stderr, and ends with one summary line
  on stdout; ``--subset N`` / ``--shard I/N`` / ``--ray [ADDRESS]`` scale it out
  (docs/scaling.md). ``retrieval-eval models --cache DIR`` lists the models whose vectors a
  cache holds.
* :mod:`.cache`: ``retrieval-eval cache merge DIR... [--into DIR]`` combines caches;
  ``cache push --repo ORG/NAME`` / ``cache pull --repo ORG/NAME`` share one model's vectors
  through a Hugging Face Hub dataset repo (:mod:`pytest_retrieval_eval.vectors.hub_sync`).
* :mod:`.reports`: ``retrieval-eval compare``, ``plot`` and ``markdown``.
* :mod:`.history`: ``retrieval-eval history REPORT.json... | DIR [--markdown] [--plot PATH]``:
  saved reports across commits, one row per report, oldest first.
* :mod:`.badge`: ``retrieval-eval badge REPORT.json --retriever NAME --metric recall@10 --out
  FILE [--svg]``: one number as shields.io's endpoint JSON or an SVG badge.
* :mod:`.explain`: ``retrieval-eval explain REPORT QUESTION_ID [--retriever R] [--diff
  OTHER]``: one question of a saved report, every top row's ranks, gold, RRF arithmetic,
  matched words and FTS query; with ``--diff`` two reports' rows aligned.
* :mod:`.export`: ``retrieval-eval export REPORT --format trec --out DIR`` writes a report's
  rankings as TREC run files and qrels (docs/trec.md).
* :mod:`.generate`: ``retrieval-eval generate --preset sample OUT.json`` writes
  deterministic LongMemEval-shaped data (the bundled sample, a synthetic LongMemEval_M).
* :mod:`.view`: ``retrieval-eval view REPORT.json [MORE.json ...] -o view.html`` writes one
  self-contained HTML page of reports (docs/view.md).
* :mod:`.args` holds what they share (program name, exit statuses, the one-line parser,
  argument types); :mod:`.progress_bar` the progress bar.

Option names and defaults match the pytest options (without the ``--retrieval-eval-`` prefix).
Exit statuses are in :func:`main`'s docstring.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from ..errors import RetrievalEvalError, fit_error, one_line
from . import badge as cli_badge
from . import cache as cli_cache
from . import explain as cli_explain
from . import export as cli_export
from . import generate as cli_generate
from . import history as cli_history
from . import prep as cli_prep
from . import reports as cli_reports
from . import view as cli_view
from .args import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE, PROG, OneLineParser
from .progress_bar import ProgressBar

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "PROG",
    "ProgressBar",
    "build_parser",
    "for_cli",
    "main",
]


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``retrieval-eval``."""
    from ..vectors.cache import default_cache_dir

    parser = OneLineParser(
        prog=PROG,
        description="The command line of pytest-retrieval-eval, beside `pytest "
        "--retrieval-eval`: prepare and share the vector cache, read and compare saved "
        "reports (compare, history, badges), export their rankings, and generate data. "
        "`retrieval-eval COMMAND --help` gives each command's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    default_cache = default_cache_dir()
    cli_prep.add_commands(sub, default_cache)
    cli_cache.add_commands(sub, default_cache)
    cli_reports.add_commands(sub)
    cli_history.add_commands(sub)
    cli_badge.add_commands(sub)
    cli_explain.add_commands(sub)
    cli_export.add_commands(sub)
    cli_generate.add_commands(sub)
    cli_view.add_commands(sub)
    return parser


#: The pytest options whose advice ``prep`` gives with its own flag. Messages are worded once,
#: for pytest (``--retrieval-eval-model DIR``); the CLI rewrites the flag it shares, longest
#: name first (``--retrieval-eval-data-repo`` before ``--retrieval-eval-data``).
_PREP_FLAGS = {
    f"--retrieval-eval-{name}": f"--{name}"
    for name in sorted(("data", "data-repo", "data-file", "model", "cache", "pooling",
                        "max-length", "query-prefix", "device", "threads", "batch-size"),
                       key=len, reverse=True)
}
_PYTEST_FLAG = re.compile("|".join(re.escape(flag) + r"(?![\w-])" for flag in _PREP_FLAGS))


def for_cli(message: str) -> str:
    """``message`` with each pytest flag that ``prep`` shares named as ``prep`` spells it:
    advice always names the flag of the command in use."""
    return _PYTEST_FLAG.sub(lambda m: _PREP_FLAGS[m.group(0)], message)


def error_line(text: str, err: TextIO) -> str:
    """``retrieval-eval: error: <text>``: on a terminal cut at spaces to its width, the fix
    command kept whole on a line of its own (:func:`~pytest_retrieval_eval.errors.fit_error`);
    into a pipe, a file or a CI log one line, so that ``grep`` and log annotations get it
    whole."""
    head = f"{PROG}: error: "
    try:
        terminal = err.isatty()
    except (AttributeError, ValueError):  # a stand-in stream, or one already closed
        terminal = False
    return f"{head}{fit_error(text, prefix=head) if terminal else text}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``retrieval-eval``; returns the exit status, one rule for every
    subcommand (docs/errors.md):

    * 0: done (``compare`` exits 0 whatever the numbers).
    * 2 (:data:`EXIT_USAGE`): a bad flag or value, e.g. ``--batch-size 0`` or ``--shard 5/4``;
      argparse's status, raised as ``SystemExit`` by :meth:`parse_args`, one line, no banner.
    * 4 (:data:`EXIT_ERROR`): any :class:`~pytest_retrieval_eval.errors.RetrievalEvalError`,
      a run that cannot go on (bad data, missing model or vectors, a refused merge, a Hub
      failure, a refused comparison or figure): ``retrieval-eval: error: <its line>`` (cut
      at spaces to the terminal's width when stderr is a terminal, :func:`error_line`). It is
      the status pytest gives its usage errors, so ``retrieval-eval`` and
      ``pytest --retrieval-eval`` exit alike on the same fault.
    * 130 (:data:`EXIT_INTERRUPTED`): Ctrl-C; ``prep`` keeps what it embedded.
    * 1: stdout closed early (``retrieval-eval models | head``).
    """
    out, err = sys.stdout, sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        err.write(f"{PROG}: warning: {for_cli(one_line(message))}\n")

    previous = warnings.showwarning
    warnings.showwarning = show
    try:
        if args.command == "cache":
            return cli_cache.run(args, out, err)
        if args.command in ("compare", "plot", "markdown"):
            return cli_reports.run(args, out, err)
        if args.command == "history":
            return cli_history.run(args, out, err)
        if args.command == "badge":
            return cli_badge.run(args, out, err)
        if args.command == "explain":
            return cli_explain.run(args, out, err)
        if args.command == "export":
            return cli_export.run(args, out, err)
        if args.command == "generate":
            return cli_generate.run(args, out, err)
        if args.command == "view":
            return cli_view.run(args, out, err)
        return cli_prep.run(args, out, err)
    except RetrievalEvalError as exc:
        err.write(error_line(for_cli(one_line(exc)), err))
        return EXIT_ERROR
    except KeyboardInterrupt:
        err.write(f"{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `retrieval-eval models | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    finally:
        warnings.showwarning = previous

