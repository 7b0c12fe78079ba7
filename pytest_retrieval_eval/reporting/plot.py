"""Figures of a report or a comparison, drawn with matplotlib (the ``[plot]`` extra).

matplotlib is imported only inside :func:`require_matplotlib`, with the headless ``Agg``
backend, so nothing else of the package needs it; without it the one line of
:class:`PlotError` names the extra to install.

* :func:`plot_report`: recall@k (the table's first metric: recall_any@k under the longmemeval
  protocol) by question type, the retrievers side by side, one panel per k; each bar with
  the 95% bootstrap CI of its mean, n per type under the axis, ``0`` over a bar of 0.0.
* :func:`plot_comparison`: delta of each compared metric with its 95% CI, per question type
  (and overall), one panel per metric on one shared y scale, the retrievers side by side.
* :func:`plot_history`: the overall value of each metric over saved reports, oldest first
  (``retrieval-eval history --plot``), a line per retriever, one panel per metric, each
  report labelled by its commit and date.

Figures are written atomically (temp file + rename); the format follows the suffix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..boundary.outputs import MARKER, output_refusal
from ..errors import RetrievalEvalError
from ..io import user_files

if TYPE_CHECKING:
    from .history import Entry

FORMATS = ("png", "svg", "pdf")
#: Dots per inch of a figure (``--dpi``): 7.5 in wide, so 750 px at the default.
DEFAULT_DPI = 100
DPI_RANGE = (30, 1200)
EXTRA = "pip install matplotlib (the plugin's [plot] extra)"


class PlotError(RetrievalEvalError):
    """A figure cannot be drawn or written."""


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or one line naming the extra."""
    try:
        import matplotlib
    except ImportError:
        raise PlotError(f"plots need matplotlib, which is not installed; {EXTRA}") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def check_output(path: Path) -> str:
    """The format of ``path`` from its suffix, or one line naming the accepted ones."""
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise PlotError(f"figure {path}: unknown format {path.suffix or '(no suffix)'!r}; "
                        f"end the name in .png, .svg or .pdf")
    return fmt


def _type_order(summary: Mapping[str, Any], retrievers: list[str]) -> list[str]:
    from ..data.pairs import QUESTION_TYPES

    present = {t for name in retrievers for t in summary[name]["by_type"]}
    known = [t for t in QUESTION_TYPES if t in present]
    return [*known, *sorted(present - set(known))]


def _short(qtype: str) -> str:
    """Axis labels: ``single-session-preference`` -> ``single-session-\\npreference``."""
    head, sep, tail = qtype.rpartition("-")
    return f"{head}-\n{tail}" if sep and len(qtype) > 14 else qtype


def _title(report: Mapping[str, Any]) -> str:
    ds = report.get("dataset") or {}
    model = report.get("model") or {}
    name = model.get("name") if isinstance(model, dict) else None
    return (f"{ds.get('name', '?')} · lane {report.get('lane', '?')} · model "
            f"{name or 'none'}")


def _values(report: Mapping[str, Any], retriever: str, qtype: str, metric: str) -> list[float]:
    """The per-pair values of ``metric`` behind one bar (``overall``: every type)."""
    return [float(p["metrics"][metric]) for p in report.get("pairs", ())
            if p.get("retriever") == retriever and metric in p.get("metrics", {})
            and (qtype == "overall" or p.get("question_type") == qtype)]


def _ci(values: list[float]) -> tuple[float, float] | None:
    """95% bootstrap interval of the mean of ``values`` (the comparison's method), or None
    without pairs."""
    if not values:
        return None
    from ..scoring.significance import bootstrap_ci

    low, high = bootstrap_ci(values)
    return float(low), float(high)


def plot_report(report: Mapping[str, Any], path: Path, *, dpi: int = DEFAULT_DPI) -> None:
    """recall@k by question type (plus overall), retrievers side by side, a panel per k; each
    bar with the 95% bootstrap CI of its mean (from the report's pairs), n per type under
    the axis, and a bar of 0.0 marked ``0`` (so it does not look missing)."""
    fmt = check_output(path)
    plt = require_matplotlib()
    retrievers = [r for r in report["retrievers"] if r in report.get("summary", {})]
    if not retrievers:
        raise PlotError("report holds no summary to plot (no pair was scored); plot a report "
                        "of a run that scored pairs")
    summary = report["summary"]
    ks = list(report["ks"])
    from .compare import primary_family

    family = primary_family(report)
    types = [*_type_order(summary, retrievers), "overall"]
    width = 0.8 / len(retrievers)
    fig, axes = plt.subplots(len(ks), 1, figsize=(7.5, 2.2 * len(ks) + 0.8), sharex=True,
                             squeeze=False)
    for panel, k in zip(axes[:, 0], ks, strict=True):
        metric = f"{family}@{k}"
        for i, name in enumerate(retrievers):
            values, lows, highs, xs = [], [], [], []
            for j, t in enumerate(types):
                cell = summary[name]["overall"] if t == "overall" else (
                    summary[name]["by_type"].get(t))
                value = float(cell.get(metric, 0.0)) if cell else 0.0
                x = j + (i - (len(retrievers) - 1) / 2) * width
                values.append(value)
                xs.append(x)
                ci = _ci(_values(report, name, t, metric)) if cell else None
                low, high = ci if ci is not None else (value, value)
                lows.append(max(0.0, value - low))
                highs.append(max(0.0, high - value))
                if cell and value == 0.0:
                    panel.text(x, 0.02, "0", ha="center", va="bottom", fontsize=6)
            panel.bar(xs, values, width=width, label=name, yerr=[lows, highs],
                      error_kw={"elinewidth": 0.7, "capsize": 1.5, "ecolor": "0.25"})
        panel.set_ylim(0, 1.05)
        panel.set_ylabel(metric)
        panel.grid(axis="y", alpha=0.3)
        panel.set_axisbelow(True)
    axes[0, 0].legend(ncol=min(len(retrievers), 5), fontsize=7, loc="lower center",
                      bbox_to_anchor=(0.5, 1.0), frameon=False)
    last = axes[-1, 0]
    last.set_xticks(range(len(types)))
    last.set_xticklabels([f"{_short(t)}\nn={_n(summary, retrievers, t)}" for t in types],
                         fontsize=7)
    fig.suptitle(_title(report) + " · bars: mean with 95% bootstrap CI", fontsize=8, y=0.995)
    fig.tight_layout()
    _save(fig, plt, path, fmt, dpi)


def _n(summary: Mapping[str, Any], retrievers: list[str], qtype: str) -> str:
    """Pairs per type (a range when the retrievers scored different numbers)."""
    ns = sorted({int((summary[r]["overall"] if qtype == "overall"
                      else summary[r]["by_type"].get(qtype) or {"n": 0})["n"])
                 for r in retrievers})
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


def comparison_title(cmp: Mapping[str, Any]) -> str:
    """The retrievers compared first, then the files (issue 48, item 7):
    ``hybrid+fts:or vs hybrid · Δ with 95% bootstrap CI · new.json vs base base.json``."""
    base, new = cmp["base"], cmp["new"]
    if cmp.get("mapped"):
        who = ", ".join(m["new"] if m["new"] == m["base"] else f"{m['new']} vs {m['base']}"
                        for m in cmp["mapped"])
    elif base.get("retriever") is not None:  # two retrievers of one report
        who = f"{new['retriever']} vs {base['retriever']}"
    else:
        who = ", ".join(cmp["changes"])
    return f"{who} · Δ with 95% bootstrap CI · {new['label']} vs base {base['label']}"


def plot_comparison(cmp: Mapping[str, Any], path: Path, *, dpi: int = DEFAULT_DPI) -> None:
    """Delta (new - base) with its 95% CI per question type, a panel per compared metric, all
    panels on one y scale."""
    fmt = check_output(path)
    plt = require_matplotlib()
    metrics = list(cmp["metrics"])
    retrievers = list(cmp["changes"])
    fig, axes = plt.subplots(len(metrics), 1, figsize=(7.5, 2.2 * len(metrics) + 0.6),
                             sharex=True, sharey=True, squeeze=False)
    types: list[str] = []
    for rows in cmp["rows"].values():
        for r in rows:
            if r["question_type"] not in types:
                types.append(r["question_type"])
    types = [t for t in types if t != "overall"] + ["overall"]
    width = 0.8 / max(1, len(retrievers))
    for panel, metric in zip(axes[:, 0], metrics, strict=True):
        rows = {(r["retriever"], r["question_type"]): r for r in cmp["rows"][metric]}
        for i, name in enumerate(retrievers):
            xs, ys, lo, hi = [], [], [], []
            for j, t in enumerate(types):
                r = rows.get((name, t))
                if r is None:
                    continue
                xs.append(j + (i - (len(retrievers) - 1) / 2) * width)
                ys.append(r["delta"])
                lo.append(r["delta"] - r["ci_low"])
                hi.append(r["ci_high"] - r["delta"])
            panel.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3, markersize=4,
                           label=name)
        panel.axhline(0.0, color="grey", linewidth=0.8)
        panel.set_ylabel(f"Δ {metric}")
        panel.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(ncol=min(len(retrievers), 5), fontsize=7, loc="lower center",
                      bbox_to_anchor=(0.5, 1.0), frameon=False)
    last = axes[-1, 0]
    last.set_xticks(range(len(types)))
    last.set_xticklabels([_short(t) for t in types], fontsize=7)
    fig.suptitle(comparison_title(cmp), fontsize=8, y=0.995)
    fig.tight_layout()
    _save(fig, plt, path, fmt, dpi)


def plot_history(history: Sequence[Entry], metrics: Sequence[str],
                 retrievers: Sequence[str], path: Path, *, dpi: int = DEFAULT_DPI) -> None:
    """The overall value of each metric across the reports (``history.entries``, oldest
    first): a panel per metric, a line per retriever (a report without it leaves a gap)."""
    fmt = check_output(path)
    plt = require_matplotlib()
    fig, axes = plt.subplots(len(metrics), 1, figsize=(7.5, 1.9 * len(metrics) + 1.0),
                             sharex=True, squeeze=False)
    xs = list(range(len(history)))
    for panel, metric in zip(axes[:, 0], metrics, strict=True):
        for name in retrievers:
            ys = [float(v) if (v := (e.overall.get(name) or {}).get(metric)) is not None
                  else float("nan") for e in history]
            panel.plot(xs, ys, marker="o", markersize=3, linewidth=1, label=name)
        panel.set_ylim(0, 1.05)
        panel.set_ylabel(metric)
        panel.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(ncol=min(len(retrievers), 5), fontsize=7, loc="lower center",
                      bbox_to_anchor=(0.5, 1.0), frameon=False)
    last = axes[-1, 0]
    last.set_xticks(xs)
    last.set_xticklabels([f"{e.short_commit[:7]}\n{e.date[:10]}" for e in history],
                         fontsize=6, rotation=45 if len(history) > 8 else 0)
    fig.suptitle(f"retrieval-eval history · {len(history)} reports, oldest first",
                 fontsize=8, y=0.995)
    fig.tight_layout()
    _save(fig, plt, path, fmt, dpi)


def _save(fig: Any, plt: Any, path: Path, fmt: str, dpi: int) -> None:
    """Write the figure through the one writer of user-named files (``io.user_files``): at a
    symlink's target, atomically; a FIFO, device or folder refused in one line."""
    # A fixed date keeps pdf/svg output reproducible for the same report.
    meta = ({"Date": None, "Creator": MARKER} if fmt in ("svg", "pdf")
            else {"Software": MARKER})
    refused = output_refusal("figure", path, fmt if fmt in ("svg", "pdf") else "png")
    if refused is not None:  # only where no file is, or over a figure of ours (issue 43.11)
        plt.close(fig)
        raise PlotError(refused)
    try:
        user_files.replace_file(path, lambda fh: fig.savefig(fh, format=fmt, dpi=dpi,
                                                             metadata=meta))
    except OSError as exc:
        raise PlotError(f"figure {path} cannot be written ({user_files.fault(exc, path)})"
                        ) from None
    finally:
        plt.close(fig)
