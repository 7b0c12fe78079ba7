"""``retrieval-eval history REPORT.json... | DIR``: saved reports in a row, oldest first, one
row per report (commit, date, lane, model) and its overall values per retriever
(:mod:`pytest_retrieval_eval.reporting.history`); ``--markdown`` for a job summary, ``--plot
PATH`` for a figure (the ``[plot]`` extra, imported only then)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from .args import file_path, terminal_width, write_fitted

__all__ = ["add_commands", "run"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """The ``history`` subcommand."""
    history = sub.add_parser(
        "history", help="saved reports across commits: one row per report, oldest first",
        description="One row per JSON report (its git commit and branch, date, lane, model) "
        "and the overall recall@k of each retriever, ordered by the date the report was "
        "written. A folder stands for the reports in it (*.json; other JSON files are "
        "skipped and named). Reads only the reports given: no baseline is kept.")
    history.add_argument("reports", nargs="+", metavar="REPORT.json|DIR",
                         help="reports written by --retrieval-eval-json, or folders of them")
    history.add_argument("--metric", default=None, metavar="NAME",
                         help="a family (recall, recall_any, recall_all, ndcg_any: at every "
                         "k the reports hold) or one family@k (default: the table's family, "
                         "recall, at every k)")
    history.add_argument("--retrievers", default=None, metavar="NAMES",
                         help="the retrievers shown, comma-separated (default: every one)")
    history.add_argument("--markdown", action="store_true",
                         help="print one GitHub-flavoured Markdown table instead (append it "
                         "to $GITHUB_STEP_SUMMARY)")
    history.add_argument("--plot", type=file_path, default=None, metavar="PATH",
                         help="also draw the values over the reports: PATH.png, .svg or .pdf "
                         "(the [plot] extra)")


def _not_a_file(path: Path) -> str | None:
    """Why a folder's ``*.json`` entry is no file to read, in words (None: a regular file,
    or a link to one)."""
    import errno
    import stat

    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if path.is_symlink():
            return "a dangling link"
        return f"cannot be read: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "not a regular file"


def _gather(names: list[str]) -> tuple[list[tuple[Path, dict[str, Any]]],
                                       list[tuple[Path, str]]]:
    """The reports named or in the folders named (each file once), and the folders'
    ``*.json`` entries left out, each with why (no report, a dangling link, a loop, a FIFO;
    a file named alone is refused instead)."""
    from ..reporting.compare import CompareError, load_report
    from ..reporting.history import HistoryError

    reports: list[tuple[Path, dict[str, Any]]] = []
    skipped: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for name in names:
        path = Path(name)
        if path.is_dir():
            members = sorted(path.glob("*.json"))
            if not members:
                raise HistoryError(f"history: folder {path} holds no *.json report; give "
                                   "reports written by --retrieval-eval-json, or their folder")
            for member in members:
                why = _not_a_file(member)
                if why is not None:  # never opened: a FIFO would block, a loop fail
                    skipped.append((member, why))
                    continue
                if member.resolve() in seen:
                    continue
                seen.add(member.resolve())
                try:
                    reports.append((member, load_report(member, slim=True)))
                except CompareError as exc:
                    if "not a retrieval-eval JSON report" not in str(exc):
                        raise
                    skipped.append((member, "not a report"))
            continue
        if path.exists() and path.resolve() in seen:
            continue
        report = load_report(path, slim=True)
        seen.add(path.resolve())
        reports.append((path, report))
    if not reports:
        left = "; left out: " + _left_out(skipped) if skipped else ""
        raise HistoryError(f"history: no report among {', '.join(names)} (only other JSON "
                           f"files){left}; give reports written by --retrieval-eval-json")
    return reports, skipped


def _left_out(skipped: list[tuple[Path, str]]) -> str:
    return ", ".join(f"{p} ({why})" for p, why in skipped)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``history``; returns the exit status."""
    from ..errors import printable
    from ..reporting import history as hist

    if args.plot is not None:
        from ..reporting import plot as plot_mod

        plot_mod.check_output(args.plot)
        plot_mod.require_matplotlib()  # the [plot] line before any report is read
    reports, skipped = _gather(list(args.reports))
    if args.plot is not None:
        from .reports import _check_apart

        _check_apart("--plot", args.plot, [p for p, _ in reports])
    entries = hist.entries(reports)
    newest = max(reports, key=lambda pr: hist.report_time(pr[1], pr[0]))[1]
    metrics, retrievers = hist.choose(entries, newest, args.metric, args.retrievers)
    width = terminal_width()
    if args.markdown:
        out.write(hist.history_markdown(entries, metrics, retrievers))
    else:
        for line in hist.history_lines(entries, metrics, retrievers, width):
            out.write(line + "\n")
    if skipped:  # beside the Markdown, on stderr: the table stays the job summary's alone
        write_fitted(err if args.markdown else out, [printable(
            f"skipped {len(skipped)} *.json that are not reports: {_left_out(skipped)}")],
            width)
    if args.plot is not None:
        from ..reporting import plot as plot_mod

        plot_mod.plot_history(entries, metrics, retrievers, args.plot)
        (err if args.markdown else out).write(f"figure: {args.plot}\n")
    return 0
