"""The console and in-run text of a comparison (:mod:`.compare` computes it; this words it).

* :func:`header_lines`: what was compared with what (sides, data, pairing) and how (CI,
  randomization test, Holm);
* :func:`table_lines`: one 80-column table per metric and retriever, a row per question type
  and overall, with m (pairs that differ) and ``*`` (significant after Holm) or
  :data:`UNREACHABLE_MARK` (``†``: too few pairs differ to reach the level), and under it the
  least-p line (:func:`unreachable_lines`) and the overall row's smallest detectable Δ
  (:func:`detectable_lines`, :func:`detectable_words`, which Markdown words the same way);
* :func:`change_lines`: pairs on one side only, and the pairs whose primary metric rose or
  fell at each k (named under -v);
* :func:`comparison_lines`: all of it, with the agreement lines, fitted to the terminal.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import printable
from ..scoring import significance as sig
from ..scoring.budget import is_tokens_key
from .agreement_lines import agreement_lines
from .compare import OVERALL
from .config_lines import compare_config_lines
from .text_width import fit_lines

#: Pairs named on one line of the terminal output before "... and N more" (without -v).
SHOWN_NAMES = 8


def format_p(value: float) -> str:
    """A p-value as the tables print it (``<0.001``, three decimals, ``-`` for NaN)."""
    if value != value:  # NaN
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def header_lines(cmp: Mapping[str, Any]) -> list[str]:
    """What was compared with what, and how."""
    base, new, method = cmp["base"], cmp["new"], cmp["method"]

    def side(s: Mapping[str, Any]) -> str:
        bits = [f"lane {s['lane']}", f"model {s['model'] or 'none'}"]
        if s.get("protocol") is not None:
            bits.append(f"protocol {s['protocol']}")
        if s.get("interrupted"):
            bits.append("INTERRUPTED run: only what it scored")
        return f"{s['label']} ({', '.join(bits)})"

    lines = [f"compare: base {side(base)}", f"     vs new {side(new)}"]
    if cmp.get("different_data"):
        lines.append(f"different data (--allow-different-data): {base['dataset']} sha256 "
                     f"{base['sha256'][:12]} vs {new['dataset']} sha256 {new['sha256'][:12]}; "
                     f"only the {cmp['matched']} pair(s) both hold are compared")
    else:
        lines.append(f"dataset: {base['dataset']} (sha256 {base['sha256'][:16]}…)")
    lines.extend(compare_config_lines(cmp))  # the stores' configs, when recorded
    key = "question_id" if cmp["kind"] == "retrievers" else "question_id, retriever"
    if cmp.get("mapped"):
        key = "question_id; retrievers " + ", ".join(
            m["base"] if m["base"] == m["new"] else f"{m['base']}={m['new']}"
            for m in cmp["mapped"])
    lines.append(f"paired on ({key}): {cmp['matched']} matched, "
                 f"{len(cmp['only_in_base'])} only in base, "
                 f"{len(cmp['only_in_new'])} only in new")
    lines.append(f"Δ = new - base, {method['ci']} CI ({method['resamples']} resamples, "
                 f"seed {method['seed']})")
    lines.append(f"p: paired randomization test, two-sided, on the m pairs that differ; "
                 f"{method['permutations']} permutations (exact if m <= "
                 f"{method['exact_when_differing_at_most']})")
    lines.append(f"Holm: p adjusted across the rows of each metric; * = significant at "
                 f"{method['alpha']}")
    return lines


#: Marks a row whose test could not reach the significance level however the scores fell
#: (too few pairs differ); never on a significant row (its p is at least its least p).
UNREACHABLE_MARK = "†"


def table_lines(cmp: Mapping[str, Any], width: int | None = None) -> list[str]:
    """One block per metric and retriever: a row per question type, then overall; under it
    what the marks mean and what its n could detect (those lines fitted to ``width``).

    Columns: question type and n (one field: a long type name beside a short n), m (pairs
    that differ), base, new, Δ, its CI, p, Holm, then ``*`` (significant after Holm) or
    :data:`UNREACHABLE_MARK`. With 25-character types and three-digit n and m a row is 80
    columns wide at most."""
    lines: list[str] = []
    alpha = _alpha(cmp)
    for metric, rows in cmp["rows"].items():
        lead_w = max(len("question type n"),
                     *(len(r["question_type"]) + 1 + len(str(r["n"])) for r in rows))
        m_w = max(3, *(len(str(r.get("differing", ""))) for r in rows))
        head = (f"{'question type':<{lead_w - 1}}n {'m':>{m_w}} {'base':>5} {'new':>5} "
                f"{'Δ':>6} {'95% CI of Δ':^13} {'p':>6} {'Holm':>6}")
        for retriever, grouped in itertools.groupby(rows, key=lambda r: r["retriever"]):
            block = list(grouped)
            lines.extend(["", f"{metric} · {retriever}", head])
            lines.extend(
                f"{r['question_type']:<{lead_w - len(str(r['n']))}}{r['n']} "
                f"{r.get('differing', ''):>{m_w}} {_cells(r, is_tokens_key(metric))} "
                f"{format_p(r['p']):>6} {format_p(r['p_holm']):>6}{_mark(r, alpha)}".rstrip()
                for r in block)
            lines.extend(fit_lines(unreachable_lines(cmp, block), width))
            lines.extend(fit_lines(detectable_lines(cmp, block), width))
    return lines


def _cells(row: Mapping[str, Any], tokens: bool) -> str:
    """A row's base, new, Δ and CI: fractions to 3 (the CI 2) decimals; ``tokens@k``, a
    count of tokens, in whole tokens (``1709  344 -1365 [-1602,-1145]``)."""
    if tokens:
        return (f"{row['base']:>5.0f} {row['new']:>5.0f} {row['delta']:>+6.0f} "
                f"[{row['ci_low']:+.0f},{row['ci_high']:+.0f}]")
    return (f"{row['base']:>5.3f} {row['new']:>5.3f} {row['delta']:>+6.3f} "
            f"[{row['ci_low']:+.2f},{row['ci_high']:+.2f}]")


def _alpha(cmp: Mapping[str, Any]) -> float:
    return float(cmp.get("method", {}).get("alpha", sig.DEFAULT_ALPHA))


def unreachable(row: Mapping[str, Any], alpha: float) -> bool:
    """The row's test could not have reached ``alpha``, how few pairs differ being the cause
    (a saved comparison without ``least_p`` marks nothing)."""
    return float(row.get("least_p", 0.0)) > alpha


def _mark(row: Mapping[str, Any], alpha: float) -> str:
    if row["significant"]:
        return "*"
    return UNREACHABLE_MARK if unreachable(row, alpha) else ""


def unreachable_lines(cmp: Mapping[str, Any], block: Sequence[Mapping[str, Any]]
                       ) -> list[str]:
    """What the mark on a block's rows means, when one is marked: "no change" there means
    "this n could not tell"."""
    alpha = _alpha(cmp)
    if not any(unreachable(r, alpha) for r in block):
        return []
    return [f"{UNREACHABLE_MARK} too few pairs differ to reach p <= {alpha:g}: the least p "
            f"is 2/2^m (m >= {sig.fewest_differing(alpha)} can)"]


def detectable_words(row: Mapping[str, Any]) -> str | None:
    """What the overall row's ``detectable_delta`` says, in words (None: a saved comparison
    without it): the estimate of the smallest Δ its pairs could detect, or why none."""
    dd = row.get("detectable_delta")
    if not isinstance(dd, Mapping):
        return None
    alpha, power = float(dd["alpha"]), float(dd["power"])
    what = (f"smallest Δ these {row['n']} pairs could detect at p <= {alpha:g} with "
            f"{power:.0%} power")
    estimate, reason = dd.get("estimate"), dd.get("reason")
    if estimate is not None:
        return (f"{what} ≈ ±{float(estimate):.2f} (estimate: normal approximation from "
                "the paired differences)")
    if reason == sig.TOO_FEW_DIFFER:
        return (f"{what}: none, too few differ ({row.get('differing', '?')}; the test needs "
                f"{sig.fewest_differing(alpha)})")
    return f"{what}: cannot be estimated ({reason})"


def detectable_lines(cmp: Mapping[str, Any], block: Sequence[Mapping[str, Any]]
                     ) -> list[str]:
    """The overall row's smallest detectable Δ, one line (none for a saved comparison
    without it)."""
    words = [detectable_words(r) for r in block if r["question_type"] == OVERALL]
    return [f"{OVERALL}: {w}" for w in words if w is not None]


def _names(names: Sequence[str], verbose: bool) -> str:
    names = [printable(n) for n in names]  # question ids: dataset text
    if verbose or len(names) <= SHOWN_NAMES:
        return ", ".join(names)
    return (", ".join(names[:SHOWN_NAMES]) + f", ... and {len(names) - SHOWN_NAMES} more "
            "(-v or the JSON lists all)")


def change_lines(cmp: Mapping[str, Any], verbose: bool = False) -> list[str]:
    """Pairs only on one side (named), and pairs gained or lost at each k."""
    lines = [""]
    for side in ("base", "new"):
        names = cmp[f"only_in_{side}"]
        if names:
            lines.append(f"only in {side} ({len(names)}, not compared): "
                         f"{_names(names, verbose)}")
    for retriever, by_k in cmp["changes"].items():
        counts = ", ".join(f"@{k} +{len(v['gained'])}/-{len(v['lost'])}"
                           for k, v in by_k.items())
        lines.append(f"{retriever}: pairs whose {cmp.get('primary', 'recall')}@k rose (+) or "
                     f"fell (-): {counts}")
        if verbose:
            for k, v in by_k.items():
                for what in ("gained", "lost"):
                    if v[what]:
                        lines.append(f"  @{k} {what}: {_names(v[what], True)}")
    if not verbose and any(v["gained"] or v["lost"] for by_k in cmp["changes"].values()
                           for v in by_k.values()):
        lines.append("(-v names the gained and lost questions)")
    return lines


def unchanged_lines(cmp: Mapping[str, Any]) -> list[str]:
    """``no pair changed: ...`` when the comparison matched pairs and none of them differs
    in any metric compared (every row's ``m`` is 0); [] otherwise."""
    rows = [r for metric_rows in (cmp.get("rows") or {}).values() for r in metric_rows]
    if not cmp.get("matched") or not rows or any(int(r["differing"]) for r in rows):
        return []
    return [f"no pair changed: each of the {cmp['matched']} matched pairs scores the same "
            f"in both reports, at every k and metric compared"]


def comparison_lines(cmp: Mapping[str, Any], verbose: bool = False,
                     width: int | None = None) -> list[str]:
    """Everything the terminal shows of a comparison (``width``: the terminal's, which the
    header and the change lines are cut at spaces to fit; ``None`` leaves them whole). When
    no matched pair's value of any metric changed, the first line says so (issue 48)."""
    return [*fit_lines(unchanged_lines(cmp), width),
            *fit_lines(header_lines(cmp), width), *table_lines(cmp, width),
            *fit_lines(agreement_lines(cmp, verbose), width),
            *fit_lines(change_lines(cmp, verbose), width)]
