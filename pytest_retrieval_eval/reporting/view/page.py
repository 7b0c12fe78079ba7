"""The HTML view's data and page: :func:`page_data` gathers what the page shows from JSON
reports, :func:`render_html` fills the template (package data beside this module), and
:func:`write_view` writes it atomically.

Safety (docs/view.md): the data goes into one ``<script type="application/json">`` element as
JSON in which ``<``, ``>``, ``&``, U+2028 and U+2029 are written as ``\\uXXXX`` escapes, so no
dataset text can close that element or open another; the page's script reads it with
``JSON.parse`` and renders every value through text nodes. A Content-Security-Policy meta
element forbids every request (``default-src 'none'``): the page loads nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ...errors import RetrievalEvalError

__all__ = ["CSP", "PAIR_FIELDS", "ViewError", "page_data", "render_html", "script_json",
           "write_view"]

#: The page's Content-Security-Policy: inline script and style only, images from data: URLs
#: only, no request of any kind (no fetch, no font, no frame, no form target).
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:; base-uri 'none'; form-action 'none'")

#: A pair's fields the page reads (the rest, latencies and diagnostics' raw facts, is left
#: out: the file stays within a few times the report's size).
PAIR_FIELDS = ("retriever", "index", "question_id", "question_type", "question",
               "question_date", "gold", "gold_turns", "gold_source", "ranked", "memories",
               "metrics", "budget", "explain", "ties", "returned")

#: The report's sections the page reads beside its pairs.
REPORT_FIELDS = ("run", "schema_version", "dataset", "protocol", "granularity", "lane", "model",
                 "ks", "retrievers", "config", "summary", "skipped", "budget", "headline",
                 "timing", "latency_ms", "variants", "subset", "interrupted", "errors")

_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
            0x2028: "\\u2028", 0x2029: "\\u2029"}


class ViewError(RetrievalEvalError):
    """The view cannot be made (no report, an output that would replace one); one line."""


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside ``<script type="application/json">``: no ``<``,
    ``>`` or ``&`` (so no ``</script>`` or ``<!--``), and no U+2028/U+2029 (line breaks to
    older JavaScript parsers); each is its ``\\uXXXX`` escape, the same string to
    ``JSON.parse``. ``ValueError`` for NaN or an infinite number."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.translate(_ESCAPES)


def _slim_pair(pair: Mapping[str, Any]) -> dict[str, Any]:
    return {key: pair[key] for key in PAIR_FIELDS if key in pair}


def _run_part(report: Mapping[str, Any], label: str) -> dict[str, Any]:
    """What the page shows of one report: its sections, its pairs slimmed, and the terminal's
    headline and diagnostics lines (made by the same code the terminal uses)."""
    from .. import diagnostic_lines

    part: dict[str, Any] = {key: report[key] for key in REPORT_FIELDS if key in report}
    part["label"] = label
    part["pairs"] = [_slim_pair(p) for p in report.get("pairs") or []
                     if isinstance(p, Mapping)]
    retrievers = list(report.get("retrievers") or [])
    lines: list[str] = []
    try:
        ties = diagnostic_lines.tie_line(report.get("ties") or {}, retrievers)
        lines.extend([ties] if ties else [])
        lines.extend(diagnostic_lines.misses_line(report.get("diagnostics") or {}, retrievers))
    except (KeyError, TypeError, ValueError, AttributeError):  # an older report's sections
        pass
    part["diagnostic_lines"] = lines
    headline = report.get("headline")
    part["headline_lines"] = list(headline.get("lines") or []) if isinstance(
        headline, Mapping) else []
    return part


def _history_part(reports: Sequence[tuple[Path, Mapping[str, Any]]]) -> dict[str, Any]:
    """History's rows (:mod:`..history`): oldest first, each report's overall values."""
    from .. import history as hist

    entries = hist.entries(reports)
    newest = max(reports, key=lambda pr: hist.report_time(pr[1], pr[0]))[1]
    metrics, retrievers = hist.choose(entries, newest, None, None)
    families = sorted({key for e in entries for values in e.overall.values()
                       for key in values if key != "n" and "@" in key})
    return {"metrics": metrics, "families": families, "retrievers": retrievers,
            "rows": [{"label": Path(e.path).name, "when": e.when, "commit": e.commit,
                      "branch": e.branch, "lane": e.lane, "model": e.model,
                      "dataset": e.dataset, "overall": e.overall} for e in entries]}


def page_data(reports: Sequence[tuple[Path, Mapping[str, Any]]], *,
              comparison: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The page's data. One report: its run. Two: the newer's run and ``comparison`` (as
    ``compare`` makes it; computed here when not given). Three or more: the newest's run and
    the history of all of them."""
    if not reports:
        raise ViewError("view: no report given; give a JSON report written by "
                        "--retrieval-eval-json")
    data: dict[str, Any] = {"mode": "run", "generator": "pytest-retrieval-eval"}
    if len(reports) == 1:
        data["run"] = _run_part(reports[0][1], reports[0][0].name)
        made = reports[0][1].get("comparison")  # the run's own --retrieval-eval-compare
        if comparison is None and isinstance(made, Mapping) and "rows" in made:
            comparison = made
        if comparison is not None:
            data["mode"] = "compare"
            data["comparison"] = comparison
        return data
    if len(reports) == 2:
        (base_path, base), (new_path, new) = reports
        if comparison is None:
            from ..compare import compare_reports

            comparison = compare_reports(base, new, base_name=base_path.name,
                                         new_name=new_path.name)
        data["mode"] = "compare"
        data["run"] = _run_part(new, new_path.name)
        data["base"] = {key: base[key] for key in ("summary", "retrievers", "ks", "run")
                        if key in base} | {"label": base_path.name}
        data["comparison"] = comparison
        return data
    from .. import history as hist

    ordered = sorted(reports, key=lambda pr: hist.report_time(pr[1], pr[0]))
    newest = max(reports, key=lambda pr: hist.report_time(pr[1], pr[0]))  # the first, on a tie
    data["mode"] = "history"
    data["run"] = _run_part(newest[1], newest[0].name)
    data["history"] = _history_part(ordered)
    return data


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def render_html(data: Mapping[str, Any]) -> str:
    """The page: the template with its style, script and data put in. The data is the only
    part that comes from reports, and it is :func:`script_json`'s text."""
    run = data.get("run") or {}
    dataset = run.get("dataset") if isinstance(run, Mapping) else None
    name = str(dataset.get("name")) if isinstance(dataset, Mapping) else "report"
    title = "retrieval-eval: " + "".join(c for c in name if c.isalnum() or c in "-_. ")[:80]
    page = _asset("template.html")
    # Each slot is filled once, in this order; the data comes last, so no text put in
    # earlier can hold a slot's name that is then replaced.
    for slot, text in (("@@CSP@@", CSP), ("@@TITLE@@", title), ("@@CSS@@", _asset("view.css")),
                       ("@@JS@@", _asset("view.js")), ("@@DATA@@", script_json(data))):
        before, found, after = page.partition(slot)
        if not found:  # pragma: no cover - the template ships with every slot
            raise ViewError(f"view: the page template lacks {slot}; reinstall the plugin")
        page = before + text + after
    return page


def write_view(reports: Sequence[tuple[Path, Mapping[str, Any]]], path: Path, *,
               option: str = "-o", comparison: Mapping[str, Any] | None = None) -> int:
    """Write the page for ``reports`` to ``path`` atomically (temp file and rename, as the
    JSON report is written); returns its size in bytes. One-line :class:`ViewError` naming
    ``option`` when it cannot be written."""
    from ...boundary.outputs import output_refusal
    from ...io import user_files

    refused = output_refusal(option, path, "html")
    if refused is not None:  # only where no file is, or over a view of ours (issue 43.11)
        raise ViewError(refused)
    try:
        text = render_html(page_data(reports, comparison=comparison))
    except ValueError:
        raise ViewError(f"view {path} not written: a report holds a NaN or infinite number, "
                        "which JSON cannot hold; report this as a bug") from None
    try:
        user_files.replace_text(path, text)
    except OSError as exc:
        raise ViewError(f"HTML view {path} cannot be written ({user_files.fault(exc, path)}); "
                        f"pass another {option}") from None
    return len(text.encode("utf-8"))
