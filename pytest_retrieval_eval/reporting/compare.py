"""Compare two JSON reports, or two retrievers of one report, pair by pair.

A comparison is plain data (it goes into the JSON report as ``"comparison"``):

* pairs are matched on ``(question_id, retriever)`` (two retrievers of one report: on
  ``question_id``); a pair present on one side only is counted and named, never dropped
  silently;
* for each metric (default: the table's first family, ``recall@k`` under the vipune protocol
  and ``recall_any@k`` under longmemeval, at every k both reports share) one row per retriever
  and question type, plus ``overall``: base and new means, ``delta`` (new - base), a 95% paired
  bootstrap interval of delta, the p-value of a two-sided paired randomization test and its
  Holm-Bonferroni adjustment across the rows of that metric (:mod:`.significance`);
* the pairs whose primary metric at k went up (gained) or down (lost), by question id.

:func:`load_report` and :func:`check_comparable` refuse what cannot be compared with one line
(:class:`CompareError`): an unreadable or truncated file, another schema_version, another
dataset (unless ``allow_different_data``), another protocol or granularity, no common k.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import RetrievalEvalError, one_line
from ..scoring import significance as sig
from .report import SCHEMA_VERSION, families_for, fit_lines, type_order

OVERALL = "overall"
#: Metric families a pair's ``metrics`` may hold at each k (metrics.score_ranking, and the
#: longmemeval protocol's and turn granularity's families).
METRIC_FAMILIES = ("recall", "recall_any", "recall_all", "ndcg_any", "session_recall",
                   "session_recall_any", "session_recall_all", "session_ndcg_any")
#: Keys that, where a report has them (top level or under "dataset"), must match.
#: What two compared reports must share, and what a report written before these keys existed
#: means by its silence (those runs could only be vipune's protocol, session level).
SAME_KEYS = {"protocol": "vipune", "granularity": "session"}
#: Pairs named on one line of the terminal output before "... and N more" (without -v).
SHOWN_NAMES = 8


class CompareError(RetrievalEvalError):
    """Two reports (or two retrievers) cannot be compared; the message says why."""


# --------------------------------------------------------------------------- loading


def load_report(path: Path) -> dict[str, Any]:
    """Read a JSON report written by ``--retrieval-eval-json``; one line if it cannot be."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or one_line(exc, 80)
        raise CompareError(f"report {path}: cannot be read ({reason}); give the path of a "
                           "JSON report written by --retrieval-eval-json") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CompareError(
            f"report {path}: not valid JSON ({exc.msg}, line {exc.lineno} column "
            f"{exc.colno}: truncated or damaged); write it again with --retrieval-eval-json"
        ) from None
    problem = _shape_problem(data)
    if problem:
        raise CompareError(f"report {path}: not a retrieval-eval JSON report ({problem}); give "
                           "a file written by --retrieval-eval-json")
    version = data["schema_version"]
    if version != SCHEMA_VERSION:
        raise CompareError(
            f"report {path}: schema_version {version}, this pytest-retrieval-eval reads "
            f"{SCHEMA_VERSION}; write both reports with the same pytest-retrieval-eval version")
    return dict(data)


def _shape_problem(data: object) -> str:
    if not isinstance(data, dict):
        return "not a JSON object"
    for key, kind in (("schema_version", int), ("dataset", dict), ("ks", list),
                      ("retrievers", list), ("pairs", list)):
        if not isinstance(data.get(key), kind):
            return f"no {key!r} {kind.__name__}"
    if not isinstance(data["dataset"].get("sha256"), str):
        return "no dataset sha256"
    for pair in data["pairs"]:
        if not (isinstance(pair, dict) and isinstance(pair.get("question_id"), str)
                and isinstance(pair.get("retriever"), str)
                and isinstance(pair.get("metrics"), dict)):
            return "a pair without question_id, retriever or metrics"
    return ""


def _same_key(report: Mapping[str, Any], key: str) -> Any:
    return report.get(key) or SAME_KEYS[key]


def check_comparable(base: Mapping[str, Any], new: Mapping[str, Any], *,
                     base_name: str = "base", new_name: str = "new",
                     allow_different_data: bool = False) -> bool:
    """Refuse (one line) what cannot be compared; True when the data differ but
    ``allow_different_data`` lets the comparison go on over the pairs both hold."""
    both = f"reports {base_name} and {new_name}"
    if base["schema_version"] != new["schema_version"]:
        raise CompareError(f"{both}: schema_version {base['schema_version']} vs "
                           f"{new['schema_version']}; write both with the same "
                           "pytest-retrieval-eval version")
    for key in SAME_KEYS:
        a, b = _same_key(base, key), _same_key(new, key)
        if a != b:
            raise CompareError(f"{both} use another {key} ({a} vs {b}); compare runs made "
                               f"with the same {key}")
    if not set(base["ks"]) & set(new["ks"]):
        raise CompareError(f"{both} share no k ({_ks(base['ks'])} vs {_ks(new['ks'])}); run "
                           "both with a common --retrieval-eval-k")
    different = base["dataset"]["sha256"] != new["dataset"]["sha256"]
    if different and not allow_different_data:
        raise CompareError(
            f"{both} are on different data ({_data(base)} vs {_data(new)}); compare runs on "
            "the same dataset file, or pass --allow-different-data to compare the pairs both "
            "hold")
    return bool(different)


def _ks(ks: Sequence[int]) -> str:
    return ",".join(map(str, ks))


def _data(report: Mapping[str, Any]) -> str:
    ds = report["dataset"]
    return f"{ds.get('name', '?')} sha256 {str(ds['sha256'])[:12]}"


def primary_family(report: Mapping[str, Any]) -> str:
    """The family the report's table leads with: ``recall`` (vipune protocol) or
    ``recall_any`` (longmemeval); reports without a protocol are vipune's."""
    return families_for(str(report.get("protocol") or "vipune"),
                        str(report.get("granularity") or "session"))[0][0]


def resolve_metrics(specs: Sequence[str] | None, ks: Sequence[int],
                    primary: str = "recall") -> list[str]:
    """``None`` -> ``primary@k`` for each k; a family (``recall_any``) -> it at each k; a
    name with a k (``recall@5``) -> itself. One line for an unknown name or a k not shared."""
    if not specs:
        return [f"{primary}@{k}" for k in ks]
    out: list[str] = []
    for raw in specs:
        for spec in (s.strip() for s in raw.split(",") if s.strip()):
            family, _, k_text = spec.partition("@")
            if family not in METRIC_FAMILIES:
                raise CompareError(f"metric {spec!r} is unknown; choose from "
                                   f"{', '.join(METRIC_FAMILIES)}, optionally with @k")
            if not k_text:
                out.extend(f"{family}@{k}" for k in ks)
                continue
            if not k_text.isdigit() or int(k_text) not in ks:
                raise CompareError(f"metric {spec!r}: k {k_text} is not among the k both "
                                   f"reports hold ({_ks(ks)}); pick one of those")
            out.append(f"{family}@{int(k_text)}")
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------- comparing


def _side(report: Mapping[str, Any], label: str) -> dict[str, Any]:
    model = report.get("model") or {}
    run = report.get("run") or {}
    return {"label": label, "dataset": report["dataset"].get("name"),
            "sha256": report["dataset"]["sha256"], "lane": report.get("lane"),
            "model": model.get("name") if isinstance(model, dict) else None,
            "protocol": _same_key(report, "protocol"), "ks": list(report["ks"]),
            "retrievers": list(report["retrievers"]),
            "interrupted": bool(report.get("interrupted") or run.get("interrupted"))}


def compare_reports(base: Mapping[str, Any], new: Mapping[str, Any], *,
                    base_name: str = "base", new_name: str = "new",
                    metrics: Sequence[str] | None = None,
                    allow_different_data: bool = False,
                    permutations: int = sig.DEFAULT_PERMUTATIONS,
                    resamples: int = sig.DEFAULT_RESAMPLES,
                    seed: int = sig.DEFAULT_SEED) -> dict[str, Any]:
    """Compare two reports pair by pair, matched on ``(question_id, retriever)``."""
    different = check_comparable(base, new, base_name=base_name, new_name=new_name,
                                 allow_different_data=allow_different_data)
    ks = sorted(set(base["ks"]) & set(new["ks"]))
    primary = primary_family(base)
    chosen = resolve_metrics(metrics, ks, primary)
    order = list(dict.fromkeys([*base["retrievers"], *new["retrievers"]]))
    out = _compare_pairs(
        base["pairs"], new["pairs"], order, ks, chosen, primary,
        key=lambda p: (p["question_id"], p["retriever"]), label=lambda p: p["retriever"],
        permutations=permutations, resamples=resamples, seed=seed)
    if not out["matched"]:
        raise CompareError(f"reports {base_name} and {new_name} have no pair in common "
                           "(matched on question_id and retriever); compare runs of the "
                           "same retrievers on the same questions")
    return {"kind": "reports", "base": _side(base, base_name), "new": _side(new, new_name),
            "different_data": different, **out}


def compare_retrievers(report: Mapping[str, Any], base_retriever: str, new_retriever: str, *,
                       name: str = "report", metrics: Sequence[str] | None = None,
                       permutations: int = sig.DEFAULT_PERMUTATIONS,
                       resamples: int = sig.DEFAULT_RESAMPLES,
                       seed: int = sig.DEFAULT_SEED) -> dict[str, Any]:
    """Compare two retrievers of one report, paired on the same questions."""
    for retriever in (base_retriever, new_retriever):
        if retriever not in report["retrievers"]:
            raise CompareError(f"retriever {retriever!r} is not in report {name} (it holds "
                               f"{', '.join(report['retrievers'])}); name two of those")
    if base_retriever == new_retriever:
        raise CompareError(f"--retrievers names {base_retriever!r} twice; name two "
                           "different retrievers, base first")
    ks = sorted(report["ks"])
    primary = primary_family(report)
    chosen = resolve_metrics(metrics, ks, primary)
    row_label = f"{new_retriever} vs {base_retriever}"
    base_pairs = [p for p in report["pairs"] if p["retriever"] == base_retriever]
    new_pairs = [p for p in report["pairs"] if p["retriever"] == new_retriever]
    out = _compare_pairs(base_pairs, new_pairs, [row_label], ks, chosen, primary,
                         key=lambda p: (p["question_id"], p["retriever"]),
                         label=lambda p: row_label, match=lambda p: p["question_id"],
                         permutations=permutations, resamples=resamples, seed=seed)
    if not out["matched"]:
        raise CompareError(f"retrievers {base_retriever} and {new_retriever} of report "
                           f"{name} scored no question in common")
    side = _side(report, name)
    return {"kind": "retrievers", "base": {**side, "label": f"{name} [{base_retriever}]",
                                            "retriever": base_retriever},
            "new": {**side, "label": f"{name} [{new_retriever}]", "retriever": new_retriever},
            "different_data": False, **out}


def _compare_pairs(base_pairs: Sequence[Mapping[str, Any]],
                   new_pairs: Sequence[Mapping[str, Any]], order: Sequence[str],
                   ks: Sequence[int], metrics: Sequence[str], primary: str, *, key: Any,
                   label: Any,
                   permutations: int, resamples: int, seed: int,
                   match: Any = None) -> dict[str, Any]:
    match = match or key
    base_by = {match(p): p for p in base_pairs}
    new_by = {match(p): p for p in new_pairs}
    common = [m for m in base_by if m in new_by]
    only_base = [_name(key(base_by[m])) for m in base_by if m not in new_by]
    only_new = [_name(key(new_by[m])) for m in new_by if m not in base_by]
    def scored(metric: str) -> bool:
        return all(metric in base_by[m]["metrics"] and metric in new_by[m]["metrics"]
                   for m in common)

    if not all(scored(f"{primary}@{k}") for k in ks):  # gained/lost: of a chosen family
        primary = metrics[0].partition("@")[0]
    change_ks = [k for k in ks if scored(f"{primary}@{k}")]
    needed = list(dict.fromkeys([*metrics, *(f"{primary}@{k}" for k in change_ks)]))
    for metric in needed:
        lacking = next((m for m in common if metric not in base_by[m]["metrics"]
                        or metric not in new_by[m]["metrics"]), None)
        if lacking is not None:
            held = sorted({name.partition("@")[0] for name in base_by[lacking]["metrics"]})
            raise CompareError(f"metric {metric} is not scored in these reports (pair "
                               f"{_name(key(base_by[lacking]))} holds {', '.join(held)}); "
                               "pick one of those with --metric")
    # Rows: (retriever label, question type) -> indices into `common`.
    groups: dict[tuple[str, str], list[int]] = {}
    for i, m in enumerate(common):
        pair = base_by[m]
        name = label(pair)
        groups.setdefault((name, str(pair.get("question_type", "?"))), []).append(i)
        groups.setdefault((name, OVERALL), []).append(i)
    b = np.array([[_score(base_by[m], x) for x in needed] for m in common], dtype=np.float64)
    n_ = np.array([[_score(new_by[m], x) for x in needed] for m in common], dtype=np.float64)
    b = b.reshape(len(common), len(needed))
    n_ = n_.reshape(len(common), len(needed))
    col = {x: j for j, x in enumerate(needed)}
    names = [r for r in order if any(g[0] == r for g in groups)]
    row_keys = [(r, t) for r in names for t in [*sorted(
        {t for g, t in groups if g == r and t != OVERALL}, key=type_order), OVERALL]]
    # Rows on the same questions (each retriever's rows of one type, in a comparison of
    # reports) share resamples and permutations: one call per question set, the rows' metrics
    # side by side as columns, pairs aligned by question id.
    qids = [str(base_by[m]["question_id"]) for m in common]
    for rk in row_keys:
        groups[rk].sort(key=lambda i: qids[i])
    stats: dict[tuple[str, str], tuple[Any, Any, Any]] = {}
    by_set: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for rk in row_keys:
        by_set.setdefault(tuple(qids[i] for i in groups[rk]), []).append(rk)
    metric_cols = [col[x] for x in metrics]
    for members in by_set.values():
        d = np.hstack([n_[groups[rk]][:, metric_cols] - b[groups[rk]][:, metric_cols]
                       for rk in members])
        low, high = sig.bootstrap_ci(d, resamples=resamples, seed=seed)
        p = sig.randomization_test(d, permutations=permutations, seed=seed)
        width = len(metric_cols)
        for i, rk in enumerate(members):
            part = slice(i * width, (i + 1) * width)
            stats[rk] = (low[part], high[part], p[part])
    rows: dict[str, list[dict[str, Any]]] = {}
    for j, metric in enumerate(metrics):
        c = col[metric]
        metric_rows: list[dict[str, Any]] = []
        for rk in row_keys:
            idx = np.array(groups[rk])
            low, high, p = stats[rk]
            base_mean = float(b[idx, c].mean())
            new_mean = float(n_[idx, c].mean())
            metric_rows.append({
                "retriever": rk[0], "question_type": rk[1], "n": len(idx),
                "base": base_mean, "new": new_mean, "delta": new_mean - base_mean,
                "ci_low": float(low[j]), "ci_high": float(high[j]), "p": float(p[j]),
            })
        adjusted = sig.holm([r["p"] for r in metric_rows])
        for r, q in zip(metric_rows, adjusted, strict=True):
            r["p_holm"] = float(q)
            r["significant"] = bool(q <= sig.DEFAULT_ALPHA)
        rows[metric] = metric_rows
    changes: dict[str, dict[str, dict[str, list[str]]]] = {}
    for name in names:
        mine = groups[(name, OVERALL)]
        changes[name] = {}
        for k in change_ks:
            c = col[f"{primary}@{k}"]
            changes[name][str(k)] = {"gained": [qids[i] for i in mine if n_[i, c] > b[i, c]],
                                  "lost": [qids[i] for i in mine if n_[i, c] < b[i, c]]}
    return {"ks": list(ks), "metrics": list(metrics), "primary": primary,
            "matched": len(common),
            "only_in_base": only_base, "only_in_new": only_new, "rows": rows,
            "changes": changes,
            "method": {"ci": f"{int(sig.DEFAULT_LEVEL * 100)}% paired bootstrap",
                       "resamples": resamples, "test": "two-sided paired randomization",
                       "permutations": permutations,
                       "exact_when_differing_at_most": sig.EXACT_MAX_DIFFERING,
                       "correction": "holm", "alpha": sig.DEFAULT_ALPHA, "seed": seed}}


def _name(key: tuple[str, str]) -> str:
    return f"{key[0]}[{key[1]}]"


def _score(pair: Mapping[str, Any], metric: str) -> float:
    value = pair["metrics"].get(metric)
    return float("nan") if value is None else float(value)


# --------------------------------------------------------------------------- terminal text


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
    key = "question_id" if cmp["kind"] == "retrievers" else "question_id, retriever"
    lines.append(f"paired on ({key}): {cmp['matched']} matched, "
                 f"{len(cmp['only_in_base'])} only in base, "
                 f"{len(cmp['only_in_new'])} only in new")
    lines.append(f"Δ = new - base, {method['ci']} CI ({method['resamples']} resamples, "
                 f"seed {method['seed']})")
    lines.append(f"p: paired randomization test, two-sided, {method['permutations']} "
                 f"permutations (exact if <= {method['exact_when_differing_at_most']} differ)")
    lines.append(f"Holm: p adjusted across the rows of each metric; * = significant at "
                 f"{method['alpha']}")
    return lines


def table_lines(cmp: Mapping[str, Any]) -> list[str]:
    """One block per metric and retriever: a row per question type, then overall."""
    lines: list[str] = []
    for metric, rows in cmp["rows"].items():
        label_w = max(len("question type"), *(len(r["question_type"]) for r in rows))
        n_w = max(3, *(len(str(r["n"])) for r in rows))
        head = (f"{'question type':<{label_w}} {'n':>{n_w}} {'base':>6} {'new':>6} "
                f"{'Δ':>7} {'95% CI of Δ':^14} {'p':>6} {'Holm':>6}")
        current = None
        for r in rows:
            if r["retriever"] != current:
                current = r["retriever"]
                lines.extend(["", f"{metric} · {current}", head])
            lines.append(
                f"{r['question_type']:<{label_w}} {r['n']:>{n_w}} {r['base']:>6.3f} "
                f"{r['new']:>6.3f} {r['delta']:>+7.3f} "
                f"[{r['ci_low']:+.2f}, {r['ci_high']:+.2f}] {format_p(r['p']):>6} "
                f"{format_p(r['p_holm']):>6}{'*' if r['significant'] else ''}".rstrip())
    return lines


def _names(names: Sequence[str], verbose: bool) -> str:
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
                        lines.append(f"  @{k} {what}: {', '.join(v[what])}")
    if not verbose and any(v["gained"] or v["lost"] for by_k in cmp["changes"].values()
                           for v in by_k.values()):
        lines.append("(-v names the gained and lost questions)")
    return lines


def comparison_lines(cmp: Mapping[str, Any], verbose: bool = False,
                     width: int | None = None) -> list[str]:
    """Everything the terminal shows of a comparison (``width``: the terminal's, which the
    header and the change lines are cut at spaces to fit; ``None`` leaves them whole)."""
    return [*fit_lines(header_lines(cmp), width), *table_lines(cmp),
            *fit_lines(change_lines(cmp, verbose), width)]
