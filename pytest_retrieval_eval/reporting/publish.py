"""What a run publishes beyond its table: the in-run comparison, Markdown (a file and GitHub's
job summary) and the JUnit XML properties of each pair item.

Nothing here changes a run's exit status: a comparison that cannot be made is one line in the
summary (and ``{"refused": line}`` in the JSON report), a Markdown file that cannot be written
is one error line.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import RetrievalEvalError, write_fault
from ..io.checksums import file_mode
from .markdown import STEP_SUMMARY_ENV, run_markdown

#: The name this run's side has in an in-run comparison.
THIS_RUN = "this run"


def attach_comparison(report: dict[str, Any], base: Mapping[str, Any], base_path: Path) -> None:
    """Compare ``report`` (the run) against ``base`` and keep it as ``report["comparison"]``."""
    from . import compare

    try:
        report["comparison"] = compare.compare_reports(base, report, base_name=str(base_path),
                                                       new_name=THIS_RUN)
    except RetrievalEvalError as exc:
        report["comparison"] = {"refused": str(exc)}


def comparison_lines(report: Mapping[str, Any], verbose: bool,
                     width: int | None = None) -> list[str]:
    """The terminal lines of the run's comparison, if it has one (fitted to ``width``)."""
    cmp = report.get("comparison")
    if not isinstance(cmp, Mapping):
        return []
    from .report import fit_lines

    if "refused" in cmp:
        return fit_lines([f"comparison refused: {cmp['refused']}"], width)
    from .compare import comparison_lines as lines

    return lines(cmp, verbose, width)


def _write(path: Path, text: str, *, append: bool) -> None:
    if append:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
        return
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, file_mode())  # the umask's mode, not mkstemp's 0600
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def publish_markdown(report: Mapping[str, Any], path: Path | None,
                     step_summary: bool) -> list[str]:
    """Write the Markdown to ``path`` and append it to ``$GITHUB_STEP_SUMMARY`` (when set and
    ``step_summary``); returns the terminal lines saying where it went (or why not)."""
    summary_file = os.environ.get(STEP_SUMMARY_ENV, "").strip() if step_summary else ""
    if path is None and not summary_file:
        return []
    text = run_markdown(report)
    lines = []
    for target, append, what in ((path, False, "Markdown summary"),
                                 (Path(summary_file) if summary_file else None, True,
                                  f"job summary (${STEP_SUMMARY_ENV})")):
        if target is None:
            continue
        try:
            _write(target, text, append=append)
        except OSError as exc:
            lines.append(f"retrieval-eval: error: {what} {target} cannot be written "
                         f"({write_fault(exc, target.parent)})")
        else:
            lines.append(f"{what}: {target}")
    return lines


def pair_properties(result: Mapping[str, Any]) -> list[tuple[str, object]]:
    """A pair item's JUnit XML properties: every metric at every k, then its latencies."""
    props: list[tuple[str, object]] = [("retriever", result["retriever"]),
                                       ("question_type", result["question_type"])]
    props.extend((name, round(float(value), 6)) for name, value in result["metrics"].items())
    for name, value in (result.get("latency_ms") or {}).items():
        if value is not None:
            props.append((f"latency_ms.{name}", round(float(value), 3)))
    return props
