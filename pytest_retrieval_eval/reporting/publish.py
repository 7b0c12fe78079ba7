"""What a run publishes beyond its table: the in-run comparison, Markdown (a file and GitHub's
job summary) and the JUnit XML properties of each pair item.

Nothing here changes a run's exit status: a comparison that cannot be made is one line in the
summary (and ``{"refused": line}`` in the JSON report), a Markdown file that cannot be written
is one error line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..boundary.outputs import MARKDOWN_MARKER, output_refusal
from ..errors import RetrievalEvalError, one_line
from ..io import user_files

#: The name this run's side has in an in-run comparison.
THIS_RUN = "this run"
#: The step-summary file GitHub Actions reads after each step.
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def attach_comparison(report: dict[str, Any], base: Mapping[str, Any], base_path: Path,
                      retrievers: str | None = None) -> None:
    """Compare ``report`` (the run) against ``base`` and keep it as ``report["comparison"]``;
    ``retrievers``: ``--retrieval-eval-compare-retrievers`` (``BASE=NEW[,...]``).

    Never raises: the run's own report and summary come first, so a comparison that cannot
    be made, for whatever reason, is kept as ``{"refused": <one line>}``."""
    from . import compare

    try:
        mapping = None if retrievers is None else compare.parse_retrievers(
            retrievers, one_report=False)
        report["comparison"] = compare.compare_reports(base, report, base_name=str(base_path),
                                                       new_name=THIS_RUN, retrievers=mapping)
    except RetrievalEvalError as exc:  # advice names the run's option (= form), not compare's
        report["comparison"] = {"refused": str(exc).replace(
            "--retrievers ", "--retrieval-eval-compare-retrievers=")}
    except Exception as exc:  # a base that loads but trips the comparison itself
        report["comparison"] = {
            "refused": f"{base_path}: {type(exc).__name__}: {one_line(exc)}"}


def comparison_lines(report: Mapping[str, Any], verbose: bool,
                     width: int | None = None) -> list[str]:
    """The terminal lines of the run's comparison, if it has one (fitted to ``width``)."""
    cmp = report.get("comparison")
    if not isinstance(cmp, Mapping):
        return []
    from .text_width import fit_lines

    if "refused" in cmp:
        return fit_lines([f"comparison refused: {cmp['refused']}"], width)
    from .compare_lines import comparison_lines as lines

    return lines(cmp, verbose, width)


def publish_markdown(report: Mapping[str, Any], path: Path | None,
                     step_summary: bool) -> list[str]:
    """Write the Markdown to ``path`` and append it to ``$GITHUB_STEP_SUMMARY`` (when set and
    ``step_summary``); returns the terminal lines saying where it went (or why not).

    Both go through :mod:`io.user_files`: a symlink is written through, a FIFO, device,
    socket or directory is refused in one line (nothing blocks on a FIFO)."""
    summary_file = os.environ.get(STEP_SUMMARY_ENV, "").strip() if step_summary else ""
    if path is None and not summary_file:
        return []
    from .markdown import run_markdown

    text = run_markdown(report)
    if not text.endswith("\n"):
        text += "\n"
    lines = []
    for target, append, what, fix in (
            (path, False, "Markdown summary", "pass another --retrieval-eval-markdown"),
            (Path(summary_file) if summary_file else None, True,
             f"job summary (${STEP_SUMMARY_ENV})", f"point ${STEP_SUMMARY_ENV} at a file")):
        if target is None:
            continue
        refused = None if append else output_refusal(what, target, "markdown")
        if refused is not None:  # only where no file is, or over a Markdown file of ours
            lines.append(f"retrieval-eval: error: {refused}")
            continue
        try:
            if append:
                user_files.append_text(target, text)
            else:
                user_files.replace_text(target, f"{MARKDOWN_MARKER}\n{text}")
        except OSError as exc:
            lines.append(f"retrieval-eval: error: {what} {target} cannot be written "
                         f"({user_files.fault(exc, target)}); {fix}")
        else:
            lines.append(f"{what}: {target}")
    return lines


def publish_view(report: Mapping[str, Any], path: Path) -> list[str]:
    """Write the run's HTML view to ``path`` (:mod:`.view`, docs/view.md): the report as the
    JSON holds it (its ``info`` left out), with the run's comparison where it made one;
    returns the terminal line saying where it went, or the one-line error why not."""
    from ..errors import RetrievalEvalError
    from .view import write_view

    public = {key: value for key, value in report.items() if key != "info"}
    try:
        size = write_view([(path, public)], path, option="--retrieval-eval-html")
    except RetrievalEvalError as exc:
        return [f"retrieval-eval: error: {exc}"]
    return [f"HTML view: {path} ({size / 1024:.0f} KiB)"]


def pair_properties(result: Mapping[str, Any]) -> list[tuple[str, object]]:
    """A pair item's JUnit XML properties: every metric at every k, then its latencies."""
    props: list[tuple[str, object]] = [("retriever", result["retriever"]),
                                       ("question_type", result["question_type"])]
    props.extend((name, round(float(value), 6)) for name, value in result["metrics"].items())
    for name, value in (result.get("latency_ms") or {}).items():
        if isinstance(value, Mapping):  # a fused store's parts (RRF): each part's times
            props.extend((f"latency_ms.{name}.{part}.{what}", round(float(ms), 3))
                         for part, spent in value.items() if isinstance(spent, Mapping)
                         for what, ms in spent.items() if ms is not None)
        elif value is not None:
            props.append((f"latency_ms.{name}", round(float(value), 3)))
    return props
