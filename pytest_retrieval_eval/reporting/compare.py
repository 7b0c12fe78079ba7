"""Compare two JSON reports, or two retrievers of one report, pair by pair.

A comparison is plain data (it goes into the JSON report as ``"comparison"``):

* pairs are matched on ``(question_id, retriever)`` (two retrievers of one report: on
  ``question_id``); a pair present on one side only is counted and named, never dropped
  silently;
* for each metric (default: the table's first family, ``recall@k`` under the vipune protocol
  and ``recall_any@k`` under longmemeval, at every k both reports share) one row per retriever
  and question type, plus ``overall``: base and new means, ``delta`` (new - base), a 95% paired
  bootstrap interval of delta, the p-value of a two-sided paired randomization test and its
  Holm-Bonferroni adjustment across the rows of that metric (:mod:`.significance`), how many
  pairs differ and the least p they allow; the overall row also an estimate of the smallest
  delta its pairs could detect (``detectable_delta``);
* the pairs whose primary metric at k went up (gained) or down (lost), by question id;
* how alike the rankings are (``agreement``, :mod:`.agreement_lines`): identical top k's and
  the mean overlap@k of the matched pairs' ``ranked``.

:func:`load_report` and :func:`check_report` (:mod:`.report_file`, named here too) and
:func:`check_comparable` refuse what cannot be compared with one line (:class:`CompareError`):
an unreadable, irregular, oversized, too deep or truncated file, a value of the wrong kind
(named by pair and field), another schema_version, another dataset (unless
``allow_different_data``), another protocol or granularity, no common k. ``--retrievers``
(:func:`parse_retrievers`) names or maps the retrievers compared.

The comparison's text (header, tables, the rose/fell lines) is :mod:`.compare_lines`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..scoring import significance as sig
from ..scoring.budget import TOKENS, parse_budget_key
from ..scoring.memory_metrics import MEMORY_RECALL, with_memory_recall
from .agreement_lines import lane_agreement
from .config_lines import config_changes
from .report_file import MAX_REPORT_BYTES as MAX_REPORT_BYTES
from .report_file import PAIR_FIELDS as PAIR_FIELDS
from .report_file import CompareError as CompareError
from .report_file import check_report as check_report
from .report_file import load_report as load_report
from .run_header import tokenizer_text
from .summary_table import families_for, type_order

OVERALL = "overall"
#: Metric families a pair's ``metrics`` may hold at each k (metrics.score_ranking, and the
#: longmemeval protocol's and turn granularity's families).
METRIC_FAMILIES = ("recall", "recall_any", "recall_all", "ndcg_any", "session_recall",
                   "session_recall_any", "session_recall_all", "session_ndcg_any", TOKENS,
                   "memory_recall", "turn_recall")
#: Keys that, where a report has them (top level or under "dataset"), must match.
#: What two compared reports must share, and what a report written before these keys existed
#: means by its silence (those runs could only be vipune's protocol, session level).
SAME_KEYS = {"protocol": "vipune", "granularity": "session"}


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


def is_budget_metric(name: str) -> bool:
    """Whether ``name`` is counted in tokens: ``tokens@k`` or ``recall@<B>tok``."""
    return name.startswith(TOKENS + "@") or parse_budget_key(name) is not None


def tokenizer_of(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The tokenizer a report's budget counted with (None: no budget)."""
    tokenizer = (report.get("budget") or {}).get("tokenizer")
    return dict(tokenizer) if isinstance(tokenizer, Mapping) else None


def check_tokenizers(base: Mapping[str, Any], new: Mapping[str, Any],
                     metrics: Sequence[str], both: str) -> None:
    """Refuse (one line) a metric counted in tokens across reports counted by different
    tokenizers (issue 43.9: the same store under o200k_base and cl100k_base read tokens@10
    +51, p < 0.001): their tokens are not the same unit."""
    budget = [m for m in metrics if is_budget_metric(m)]
    a, b = tokenizer_of(base), tokenizer_of(new)
    if budget and a is not None and b is not None and a != b:
        raise CompareError(
            f"{both} counted tokens with different tokenizers ({tokenizer_text(a)} vs "
            f"{tokenizer_text(b)}): {budget[0]} cannot be compared across them; compare "
            "runs made with the same --retrieval-eval-budget-tokenizer, or a metric that is "
            "not counted in tokens")


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
    name with a k (``recall@5``) -> itself; recall at a budget (``recall@500tok``) -> itself
    (both reports must hold it). One line for an unknown name or a k not shared."""
    if not specs:
        return [f"{primary}@{k}" for k in ks]
    out: list[str] = []
    for raw in specs:
        for spec in (s.strip() for s in raw.split(",") if s.strip()):
            family, _, k_text = spec.partition("@")
            budget = parse_budget_key(spec)
            if budget is not None:
                out.append(f"recall@{budget}tok")
                continue
            if family not in METRIC_FAMILIES:
                raise CompareError(f"metric {spec!r} is unknown; choose from "
                                   f"{', '.join(METRIC_FAMILIES)}, optionally with @k, or "
                                   "recall@<B>tok of a budget both reports hold")
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
            **({"config": dict(report["config"])} if isinstance(report.get("config"), Mapping)
               and report["config"] else {}),
            "interrupted": bool(report.get("interrupted") or run.get("interrupted"))}


def parse_retrievers(spec: str | Sequence[str], *, one_report: bool) -> list[tuple[str, str]]:
    """``--retrievers`` as ``(base name, new name)`` pairs, one line if it cannot be read.

    Comma-separated items; each is ``NAME`` (the same name on both sides) or
    ``BASE_NAME=NEW_NAME``. With two reports, ``hybrid=hybrid+fts:or,custom`` compares base's
    ``hybrid`` with new's ``hybrid+fts:or`` and ``custom`` with ``custom``. With one report,
    ``a,b`` (two names, base first) compares ``a`` with ``b``; ``a=b,c=b`` maps explicitly.
    Repeated items count once.
    """
    items = [p.strip() for raw in ([spec] if isinstance(spec, str) else spec)
             for p in raw.split(",") if p.strip()]
    if not items:
        raise CompareError("--retrievers names no retriever; give NAME[,NAME...] or "
                           "BASE_NAME=NEW_NAME[,...]")
    parsed: list[tuple[str, str | None]] = []
    for item in items:
        base, sep, new = (x.strip() for x in item.partition("="))
        if sep and (not base or not new or "=" in new):
            raise CompareError(f"--retrievers item {item!r} cannot be read; map a name as "
                               "BASE_NAME=NEW_NAME")
        parsed.append((base, new if sep else None))
    if one_report:
        plain = [b for b, n in parsed if n is None]
        if len(plain) == 2 and len(parsed) == 2:
            parsed = [(plain[0], plain[1])]
        elif plain:
            raise CompareError("--retrievers with one report: name two retrievers, base "
                               "first (semantic,hybrid), or map them (semantic=hybrid,"
                               "fts=hybrid)")
    out = list(dict.fromkeys((b, b if n is None else n) for b, n in parsed))
    if one_report:
        for base, new in out:
            if base == new:
                raise CompareError(f"--retrievers names {base!r} twice; name two "
                                   "different retrievers, base first")
    return out


def _lanes(base: Mapping[str, Any], new: Mapping[str, Any], base_name: str, new_name: str,
           retrievers: Sequence[tuple[str, str]] | None
           ) -> list[tuple[str, str, str]]:
    """``(base retriever, new retriever, row label)`` of each compared retriever."""
    if retrievers is None:
        order = list(dict.fromkeys([*base["retrievers"], *new["retrievers"],
                                    *(p["retriever"] for p in base["pairs"]),
                                    *(p["retriever"] for p in new["pairs"])]))
        return [(r, r, r) for r in order]
    for names, report, side in ((tuple(b for b, _ in retrievers), base, base_name),
                                (tuple(n for _, n in retrievers), new, new_name)):
        held = report["retrievers"]
        missing = next((n for n in names if n not in held), None)
        if missing is not None:
            raise CompareError(f"--retrievers: {missing!r} is not a retriever of {side} (it "
                               f"holds {', '.join(held) or 'none'}); name one of those")
    return [(b, n, b if b == n else f"{n} vs {b}") for b, n in retrievers]


def compare_reports(base: Mapping[str, Any], new: Mapping[str, Any], *,
                    base_name: str = "base", new_name: str = "new",
                    metrics: Sequence[str] | None = None,
                    allow_different_data: bool = False,
                    retrievers: Sequence[tuple[str, str]] | None = None,
                    permutations: int = sig.DEFAULT_PERMUTATIONS,
                    resamples: int = sig.DEFAULT_RESAMPLES,
                    seed: int = sig.DEFAULT_SEED) -> dict[str, Any]:
    """Compare two reports pair by pair.

    ``retrievers`` (:func:`parse_retrievers`): the ``(base name, new name)`` pairs to compare,
    each matched on ``question_id``; only those are compared, printed and counted in the Holm
    family. ``None``: every retriever, matched on ``(question_id, retriever)``.
    """
    check_report(base, base_name, version=False)
    check_report(new, new_name, version=False)
    different = check_comparable(base, new, base_name=base_name, new_name=new_name,
                                 allow_different_data=allow_different_data)
    ks = sorted(set(base["ks"]) & set(new["ks"]))
    primary = primary_family(base)
    chosen = resolve_metrics(metrics, ks, primary)
    check_tokenizers(base, new, chosen, f"reports {base_name} and {new_name}")
    lanes = _lanes(base, new, base_name, new_name, retrievers)
    out = _compare_pairs(base["pairs"], new["pairs"], lanes, ks, chosen, primary,
                         permutations=permutations, resamples=resamples, seed=seed)
    if not out["matched"]:
        held = (f"base holds {', '.join(base['retrievers']) or 'none'}; new holds "
                f"{', '.join(new['retrievers']) or 'none'}")
        raise CompareError(f"reports {base_name} and {new_name} have no pair in common "
                           f"(matched on question_id and retriever; {held}); "
                           + _no_pair_fix(base, new, retrievers))
    result = {"kind": "reports", "base": _side(base, base_name), "new": _side(new, new_name),
              "different_data": different, **out}
    changes = config_changes(base, new, lanes)  # the stores' configs, lane by lane
    if changes:
        result["config"] = changes
    if retrievers is not None:
        result["mapped"] = [{"base": b, "new": n, "label": label} for b, n, label in lanes]
    return _finite(result)


def _no_pair_fix(base: Mapping[str, Any], new: Mapping[str, Any],
                 retrievers: Sequence[tuple[str, str]] | None) -> str:
    """The fix of a refusal for want of a common pair: with one retriever on each side, of
    other names, over shared questions, the mapping itself (``--retrievers
    hybrid=hybrid+fts:or``, as docs/compare.md promises); else the generic advice."""
    one_each = len(base["retrievers"]) == 1 and len(new["retrievers"]) == 1
    if retrievers is None and one_each and base["retrievers"] != new["retrievers"]:
        shared = ({str(p["question_id"]) for p in base["pairs"]}
                  & {str(p["question_id"]) for p in new["pairs"]})
        if shared:
            return (f"each holds one retriever, so compare them with --retrievers "
                    f"{base['retrievers'][0]}={new['retrievers'][0]}")
    return ("compare runs of the same questions, and map renamed retrievers with "
            "--retrievers BASE_NAME=NEW_NAME")


def compare_retrievers(report: Mapping[str, Any], base_retriever: str, new_retriever: str, *,
                       name: str = "report", metrics: Sequence[str] | None = None,
                       permutations: int = sig.DEFAULT_PERMUTATIONS,
                       resamples: int = sig.DEFAULT_RESAMPLES,
                       seed: int = sig.DEFAULT_SEED,
                       more: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """Compare two retrievers of one report, paired on the same questions (``more``: further
    ``(base, new)`` pairs of the same report, in the same comparison and Holm family)."""
    check_report(report, name, version=False)
    mapping = list(dict.fromkeys([(base_retriever, new_retriever), *more]))
    for base_r, new_r in mapping:
        for retriever in (base_r, new_r):
            if retriever not in report["retrievers"]:
                raise CompareError(f"retriever {retriever!r} is not in report {name} (it "
                                   f"holds {', '.join(report['retrievers'])}); name two of "
                                   "those")
        if base_r == new_r:
            raise CompareError(f"--retrievers names {base_r!r} twice; name two "
                               "different retrievers, base first")
    ks = sorted(report["ks"])
    primary = primary_family(report)
    chosen = resolve_metrics(metrics, ks, primary)
    lanes = [(b, n, f"{n} vs {b}") for b, n in mapping]
    out = _compare_pairs(report["pairs"], report["pairs"], lanes, ks, chosen, primary,
                         permutations=permutations, resamples=resamples, seed=seed)
    if not out["matched"]:
        raise CompareError(f"retrievers {base_retriever} and {new_retriever} of report "
                           f"{name} scored no question in common")
    side = _side(report, name)
    bases = ", ".join(dict.fromkeys(b for b, _ in mapping))
    news = ", ".join(dict.fromkeys(n for _, n in mapping))
    result = {"kind": "retrievers",
              "base": {**side, "label": f"{name} [{bases}]", "retriever": base_retriever},
              "new": {**side, "label": f"{name} [{news}]", "retriever": new_retriever},
              "different_data": False, **out}
    changes = config_changes(report, report, lanes)
    if changes:
        result["config"] = changes
    if more:
        result["mapped"] = [{"base": b, "new": n, "label": label} for b, n, label in lanes]
    return _finite(result)


def _finite(result: dict[str, Any]) -> dict[str, Any]:
    """The comparison, checked to be JSON without NaN or infinities (what every writer of it
    writes with ``allow_nan=False``); a fault here is ours, said in one line."""
    try:
        json.dumps(result, allow_nan=False)
    except ValueError as exc:  # pragma: no cover - checked inputs give finite numbers
        raise CompareError(f"the comparison holds a number JSON cannot write ({exc}); "
                           "please report this") from None
    return result


def _compare_pairs(base_pairs: Sequence[Mapping[str, Any]],
                   new_pairs: Sequence[Mapping[str, Any]],
                   lanes: Sequence[tuple[str, str, str]], ks: Sequence[int],
                   metrics: Sequence[str], primary: str, *,
                   permutations: int, resamples: int, seed: int) -> dict[str, Any]:
    """Pairs matched on ``question_id`` within each lane ``(base retriever, new retriever,
    label)``; rows per label and question type."""
    if any(m.startswith(MEMORY_RECALL + "@") for m in [*metrics, f"{primary}@"]):
        # a session store's memory_recall@k is its recall@k (each memory one session)
        base_pairs, new_pairs = ([{**p, "metrics": with_memory_recall(p["metrics"])}
                                  for p in pairs] for pairs in (base_pairs, new_pairs))
    wanted_base = {b for b, _, _ in lanes}
    wanted_new = {n for _, n, _ in lanes}
    base_of: dict[str, dict[str, Mapping[str, Any]]] = {r: {} for r in wanted_base}
    new_of: dict[str, dict[str, Mapping[str, Any]]] = {r: {} for r in wanted_new}
    for pairs, into in ((base_pairs, base_of), (new_pairs, new_of)):
        for pair in pairs:
            bucket = into.get(pair["retriever"])
            if bucket is not None:
                bucket[pair["question_id"]] = pair
    # One entry per matched pair: (label, base pair, new pair).
    common: list[tuple[str, Mapping[str, Any], Mapping[str, Any]]] = []
    only_base: list[str] = []
    only_new: list[str] = []
    for b_name, n_name, label in lanes:
        b_by, n_by = base_of[b_name], new_of[n_name]
        common.extend((label, b_by[q], n_by[q]) for q in b_by if q in n_by)
        only_base.extend(f"{q}[{b_name}]" for q in b_by if q not in n_by)
        only_new.extend(f"{q}[{n_name}]" for q in n_by if q not in b_by)

    def scored(metric: str) -> bool:
        return all(bp["metrics"].get(metric) is not None
                   and np_["metrics"].get(metric) is not None for _, bp, np_ in common)

    if not all(scored(f"{primary}@{k}") for k in ks):  # gained/lost: of a chosen family
        primary = metrics[0].partition("@")[0]
    change_ks = [k for k in ks if scored(f"{primary}@{k}")]
    needed = list(dict.fromkeys([*metrics, *(f"{primary}@{k}" for k in change_ks)]))
    for metric in needed:
        lacking = next((bp for _, bp, np_ in common if bp["metrics"].get(metric) is None
                        or np_["metrics"].get(metric) is None), None)
        if lacking is not None:
            held = sorted({name if parse_budget_key(name) is not None
                           else name.partition("@")[0] for name in lacking["metrics"]})
            raise CompareError(f"metric {metric} is not scored in these reports (pair "
                               f"{lacking['question_id']}[{lacking['retriever']}] holds "
                               f"{', '.join(held)}); pick one of those with --metric")
    # Rows: (label, question type) -> indices into `common`.
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (label, bp, _) in enumerate(common):
        groups.setdefault((label, str(bp.get("question_type", "?"))), []).append(i)
        groups.setdefault((label, OVERALL), []).append(i)
    b = np.array([[float(bp["metrics"][x]) for x in needed] for _, bp, _ in common],
                 dtype=np.float64).reshape(len(common), len(needed))
    n_ = np.array([[float(np_["metrics"][x]) for x in needed] for _, _, np_ in common],
                  dtype=np.float64).reshape(len(common), len(needed))
    col = {x: j for j, x in enumerate(needed)}
    names = [label for _, _, label in lanes if (label, OVERALL) in groups]
    row_keys = [(r, t) for r in names for t in [*sorted(
        {t for g, t in groups if g == r and t != OVERALL}, key=type_order), OVERALL]]
    # Rows on the same questions (each retriever's rows of one type, in a comparison of
    # reports) share resamples and permutations: one call per question set, the rows' metrics
    # side by side as columns, pairs aligned by question id.
    qids = [str(bp["question_id"]) for _, bp, _ in common]
    for rk in row_keys:
        groups[rk].sort(key=lambda i: qids[i])
    stats: dict[tuple[str, str], tuple[Any, Any, Any, Any]] = {}
    by_set: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for rk in row_keys:
        by_set.setdefault(tuple(qids[i] for i in groups[rk]), []).append(rk)
    metric_cols = [col[x] for x in metrics]
    for members in by_set.values():
        d = np.hstack([n_[groups[rk]][:, metric_cols] - b[groups[rk]][:, metric_cols]
                       for rk in members])
        low, high = sig.bootstrap_ci(d, resamples=resamples, seed=seed)
        p = sig.randomization_test(d, permutations=permutations, seed=seed)
        differing = (d != 0).sum(axis=0)
        width = len(metric_cols)
        for i, rk in enumerate(members):
            part = slice(i * width, (i + 1) * width)
            stats[rk] = (low[part], high[part], p[part], differing[part])
    rows: dict[str, list[dict[str, Any]]] = {}
    for j, metric in enumerate(metrics):
        c = col[metric]
        metric_rows: list[dict[str, Any]] = []
        for rk in row_keys:
            idx = np.array(groups[rk])
            low, high, p, differing = stats[rk]
            base_mean = float(b[idx, c].mean())
            new_mean = float(n_[idx, c].mean())
            metric_rows.append({
                "retriever": rk[0], "question_type": rk[1], "n": len(idx),
                "base": base_mean, "new": new_mean, "delta": new_mean - base_mean,
                "ci_low": float(low[j]), "ci_high": float(high[j]), "p": float(p[j]),
                "differing": int(differing[j]), "least_p": sig.least_pvalue(int(differing[j])),
            })
        for r, rk in zip(metric_rows, row_keys, strict=True):
            if rk[1] == OVERALL:
                idx = np.array(groups[rk])
                r["detectable_delta"] = detectable(n_[idx, c] - b[idx, c])
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
            "changes": changes, "agreement": lane_agreement(common, names, ks),
            "method": {"ci": f"{int(sig.DEFAULT_LEVEL * 100)}% paired bootstrap",
                       "resamples": resamples, "test": "two-sided paired randomization",
                       "permutations": permutations,
                       "exact_when_differing_at_most": sig.EXACT_MAX_DIFFERING,
                       "correction": "holm", "alpha": sig.DEFAULT_ALPHA, "seed": seed}}


#: How the overall rows' ``detectable_delta`` is estimated (said in the JSON beside it).
DETECTABLE_METHOD = ("normal approximation: (z(1 - alpha/2) + z(power)) * sd(d) / sqrt(n), "
                     "sd of the paired differences with ddof 1, two-sided")


def detectable(d: np.ndarray[Any, np.dtype[np.float64]]) -> dict[str, Any]:
    """The overall row's ``detectable_delta``: an estimate of the smallest Δ its n pairs
    could detect (:func:`.significance.detectable_delta`), with how it was made; ``estimate``
    is None (and ``reason`` says why) where none can be given."""
    estimate, reason = sig.detectable_delta(d, alpha=sig.DEFAULT_ALPHA, power=sig.DEFAULT_POWER)
    return {"estimate": estimate, "reason": reason, "alpha": sig.DEFAULT_ALPHA,
            "power": sig.DEFAULT_POWER, "n": int(d.size),
            "sd": float(np.std(d, ddof=1)) if d.size >= 2 else None,
            "method": DETECTABLE_METHOD}
