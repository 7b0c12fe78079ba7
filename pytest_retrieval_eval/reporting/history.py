"""Saved reports in a row: the numbers of one project across its commits (issue 38, item 5).

``retrieval-eval history REPORT.json... | DIR`` reads the user's own reports (never a baseline
of the plugin's: it keeps none) and gives one row per report, oldest first:

* :func:`entries`: each report's date (``run.created``, else the file's modification time),
  its git commit and branch (``run.git``, recorded by ``io.git_facts`` when the run's rootdir
  was a checkout), lane, model, dataset and overall values per retriever;
* :func:`choose` the metrics (the table's family at every k the reports hold, a family, or
  one ``family@k``) and the retrievers (every one, or those named), refusing an unknown name
  in one line that names the known ones;
* :func:`history_lines` the console text (two tables: the reports, then their values, split
  to the width by retriever); :func:`history_markdown` one GitHub-flavoured table for a job
  summary. :func:`..reporting.plot.plot_history` draws the values over the reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import RetrievalEvalError, printable
from .compare import is_budget_metric, primary_family, tokenizer_of
from .run_header import tokenizer_text

__all__ = ["Entry", "HistoryError", "choose", "entries", "history_lines", "history_markdown",
           "report_time"]

#: Hex digits of a commit shown in the console (the Markdown too).
COMMIT_CHARS = 10
#: Characters of a value (``0.833``) and of its k's heading (``@10``).
VALUE_WIDTH = 5


class HistoryError(RetrievalEvalError):
    """Reports cannot be put in a history (none given, an unknown retriever or metric)."""


@dataclass(frozen=True)
class Entry:
    """One report of the history."""

    path: str
    when: float  # seconds since the epoch (UTC)
    commit: str | None
    branch: str | None
    lane: str
    model: str | None
    dataset: str
    sha256: str
    retrievers: tuple[str, ...]
    overall: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The tokenizer its budget counted with, in words (None: no budget).
    tokenizer: str | None = None

    @property
    def date(self) -> str:
        return datetime.fromtimestamp(self.when, timezone.utc).strftime("%Y-%m-%d %H:%M")

    @property
    def short_commit(self) -> str:
        return self.commit[:COMMIT_CHARS] if self.commit else "-"


def report_time(report: Mapping[str, Any], path: Path) -> float:
    """When a report was written: its ``run.created`` (ISO 8601, where the report has one),
    else the file's modification time."""
    run = report.get("run")
    created = run.get("created") if isinstance(run, Mapping) else None
    if isinstance(created, str):
        try:
            moment = datetime.fromisoformat(created)
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return moment.timestamp()
    return path.stat().st_mtime


def entries(reports: Sequence[tuple[Path, Mapping[str, Any]]]) -> list[Entry]:
    """The reports as history entries, oldest first (ties: by path)."""
    out = []
    for path, report in reports:
        run = report.get("run") if isinstance(report.get("run"), Mapping) else {}
        git = run.get("git") if isinstance(run, Mapping) else None
        git = git if isinstance(git, Mapping) else {}
        model = report.get("model")
        ds = report.get("dataset") or {}
        summary = report.get("summary") or {}
        out.append(Entry(
            path=str(path), when=report_time(report, path),
            commit=str(git["commit"]) if git.get("commit") else None,
            branch=str(git["branch"]) if git.get("branch") else None,
            lane=str(report.get("lane", "?")),
            model=str(model["name"]) if isinstance(model, Mapping) and model.get("name")
            else None,
            dataset=str(ds.get("name", "?")), sha256=str(ds.get("sha256", "")),
            retrievers=tuple(r for r in report["retrievers"] if r in summary),
            overall={r: dict(summary[r]["overall"]) for r in report["retrievers"]
                     if r in summary},
            tokenizer=None if (tok := tokenizer_of(report)) is None else tokenizer_text(tok)))
    return sorted(out, key=lambda e: (e.when, e.path))


def choose(history: Sequence[Entry], newest: Mapping[str, Any], metric: str | None,
           retrievers: str | None) -> tuple[list[str], list[str]]:
    """The metrics and retrievers shown: ``metric`` None -> the newest report's table family
    at every k the reports hold; a family -> it at those ks; ``family@k`` -> itself. One line
    naming the known ones when a metric or a retriever is in no report."""
    known_retrievers = list(dict.fromkeys(r for e in history for r in e.retrievers))
    held = {m for e in history for cell in e.overall.values() for m in cell if m != "n"}
    scores = sorted((m for m in held if "@" in m and m.split("@", 1)[1].isdigit()),
                    key=lambda m: (m.split("@")[0], int(m.split("@")[1])))
    families = list(dict.fromkeys(m.split("@")[0] for m in scores))
    family = metric or primary_family(newest)
    if metric is not None and "@" in metric:
        if metric not in held:
            raise HistoryError(f"--metric {metric}: no report holds it; the reports hold "
                               f"{printable(', '.join(scores)) or 'no metric'}")
        metrics = [metric]
    else:
        metrics = [m for m in scores if m.split("@")[0] == family]
        if not metrics:
            raise HistoryError(f"--metric {family}: no report holds it; give one of "
                               f"{printable(', '.join(families)) or 'none'}, or one of those "
                               "@k")
    counted = {e.tokenizer for e in history if e.tokenizer is not None}
    budget = [m for m in metrics if is_budget_metric(m)]
    if budget and len(counted) > 1:  # issue 43.9: tokens of two tokenizers are two units
        raise HistoryError(f"--metric {budget[0]}: the reports counted tokens with different "
                           f"tokenizers ({printable(', '.join(sorted(counted)))}); give "
                           "reports of one --retrieval-eval-budget-tokenizer, or a metric not "
                           "counted in tokens")
    if retrievers is None:
        return metrics, known_retrievers
    named = [n.strip() for n in retrievers.split(",") if n.strip()]
    unknown = next((n for n in named if n not in known_retrievers), None)
    if unknown is not None or not named:
        raise HistoryError(f"--retrievers: {printable(unknown or retrievers)!r} is a retriever "
                           "of no report given; the reports hold "
                           f"{printable(', '.join(known_retrievers))}")
    return metrics, list(dict.fromkeys(named))


def _value(entry: Entry, retriever: str, metric: str) -> str:
    value = (entry.overall.get(retriever) or {}).get(metric)
    return "-" if value is None else f"{float(value):.3f}"


def _model(entry: Entry) -> str:
    """The model's name past its organisation (``all-MiniLM-L6-v2``), or ``none``."""
    return printable(entry.model.rsplit("/", 1)[-1]) if entry.model else "none"


def _pairs(entry: Entry) -> int:
    return max((int(cell.get("n", 0)) for cell in entry.overall.values()), default=0)


def _caption(history: Sequence[Entry], metrics: Sequence[str]) -> tuple[str, bool]:
    """The first line's words, and whether the reports are of more than one dataset."""
    datasets = {(e.dataset, e.sha256) for e in history}
    family = metrics[0].split("@")[0]
    what = (f"overall {family}@k" if len(metrics) > 1 or "@" not in metrics[0]
            else f"overall {metrics[0]}")
    if len(datasets) == 1:
        name, sha = next(iter(datasets))
        where = f"dataset {printable(name)} (sha256 {sha[:16]}…)"
    else:
        where = f"{len(datasets)} datasets (a value compares only within its dataset)"
    count = f"{len(history)} report{'s' if len(history) != 1 else ''}, oldest first"
    return f"history: {count}; {where}; {what}", len(datasets) > 1


def history_lines(history: Sequence[Entry], metrics: Sequence[str],
                  retrievers: Sequence[str], width: int = 80) -> list[str]:
    """Two tables: one row per report (date, commit, branch, lane, model, pairs), then the
    reports' values, the retrievers side by side while they fit ``width``."""
    caption, several = _caption(history, metrics)
    head = ["#", "date (UTC)", "commit", "branch", "lane", "model", "pairs",
            *(["dataset"] if several else [])]
    rows = [[str(i), e.date, e.short_commit, printable(e.branch or "-"), printable(e.lane),
             _model(e),
             str(_pairs(e)), *([printable(e.dataset)] if several else [])]
            for i, e in enumerate(history, 1)]
    from .text_width import fit_lines

    lines = [*fit_lines([caption], width), *_columns(head, rows, right=(0, 6))]
    lead = len(str(len(history))) + 2 + COMMIT_CHARS  # "#  commit"
    group = len(metrics) * (VALUE_WIDTH + 2) - 2  # one retriever's values
    # Each retriever's head is its whole name (never cut: `semantic` and
    # `semantic+unit:turn` cut to five characters both read `seman`); its values are
    # right-aligned under it.
    named = [(r, printable(r)) for r in retrievers]
    widths = [max(group, len(shown)) for _, shown in named]
    for part in _chunks(widths, width - lead):
        names = "".join(f"    {named[j][1]:<{widths[j]}}" for j in part)
        heads = "".join("    " + ("  ".join(f"@{m.split('@', 1)[1]}".rjust(VALUE_WIDTH)
                                            for m in metrics)).rjust(widths[j]) for j in part)
        lines.extend(["", (" " * lead + names).rstrip(), " " * lead + heads])
        for i, e in enumerate(history, 1):
            values = "".join("    " + ("  ".join(_value(e, named[j][0], m).rjust(VALUE_WIDTH)
                                                 for m in metrics)).rjust(widths[j])
                             for j in part)
            lines.append(f"{i:>{len(str(len(history)))}}  {e.short_commit:<{COMMIT_CHARS}}"
                         + values)
    return lines


def _chunks(widths: Sequence[int], room: int) -> list[list[int]]:
    """The retrievers' places in groups whose columns (each 4 spaces and its width) fit
    ``room``; at least one a group."""
    out: list[list[int]] = []
    used = room + 1
    for j, w in enumerate(widths):
        if used + 4 + w > room or not out:
            out.append([])
            used = 0
        out[-1].append(j)
        used += 4 + w
    return out


def _columns(head: Sequence[str], rows: Sequence[Sequence[str]], *,
             right: Sequence[int] = ()) -> list[str]:
    """Rows aligned in columns two spaces apart (``right``: the right-aligned ones)."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    out = []
    for row in [head, *rows]:
        cells = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        out.append("  ".join(cells).rstrip())
    return out


def history_markdown(history: Sequence[Entry], metrics: Sequence[str],
                     retrievers: Sequence[str]) -> str:
    """The history as one GitHub-flavoured Markdown table (a job summary's)."""
    from .markdown import code, inert

    caption, several = _caption(history, metrics)
    head = ["#", "date (UTC)", "commit", "branch", "lane", "model",
            *(["dataset"] if several else []),
            *(f"{inert(r)} @{m.split('@', 1)[1]}" for r in retrievers for m in metrics)]
    lines = [f"**retrieval-eval {inert(caption)}**", "",
             "| " + " | ".join(head) + " |",
             "| " + " | ".join("--:" if i == 0 or i >= 6 + several else ":--"
                               for i in range(len(head))) + " |"]
    for i, e in enumerate(history, 1):
        cells = [str(i), e.date, code(e.short_commit, in_table=True) if e.commit else "-",
                 code(e.branch, in_table=True) if e.branch else "-", inert(e.lane),
                 code(e.model or "none", in_table=True),
                 *([code(e.dataset, in_table=True)] if several else []),
                 *(_value(e, r, m) for r in retrievers for m in metrics)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
