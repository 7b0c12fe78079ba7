"""Recall against a reference retriever: ``ref_recall@k`` (issue 37, item 5).

An approximate index is judged against exact search by the share of the exact top k it also
returns in its own top k: ann-benchmarks' recall (erikbern/ann-benchmarks,
``ann_benchmarks/plotting/metrics.py``, ``get_recall_values``: the returned neighbours within
the true k-th distance, over k) and qdrant's "search quality" precision (qdrant/qdrant-web-ui,
``src/components/Collections/SearchQuality/check-index-precision.js``: the exact search's ids
the HNSW search also returned, over the exact search's count). Here the reference is any
retriever of the run (``--retrieval-eval-reference``, e.g. ``semantic``, vipune's exact
cosine scan), and per pair and cut-off k::

    ref_recall@k = |R_k ∩ A_k| / |R_k|

``R_k`` the set of the reference's first k ids, ``A_k`` the other retriever's. By ids, not by
distance: ann-benchmarks also counts a returned neighbour tied with the k-th true distance
(within 1e-3), which ids cannot see. A reference that returned fewer than k ids is divided by
what it returned; one that returned none leaves the pair out. When both return k ids or more
it is compare's overlap@k (:func:`.agreement.overlap_at`, ``|R_k ∩ A_k| / max(|R_k|,
|A_k|)``), so compare's "mean overlap@k" of a store against ``semantic`` is this recall.

Computed from the pairs' recorded ``ranked`` (each result's top max-k) at the end of the run,
where every result is (the xdist controller holds every worker's), never while ranking: the
reference's ranking of a pair may be on another worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["METRIC", "pair_ref_recall", "ref_recall_at", "reference_recall"]

#: The metric's name in the JSON (``ref_recall@10``).
METRIC = "ref_recall"


def ref_recall_at(reference: Sequence[str], other: Sequence[str], k: int) -> float | None:
    """``|R_k ∩ A_k| / |R_k|``; None when the reference's top k is empty."""
    top = set(reference[:k])
    if not top:
        return None
    return len(top & set(other[:k])) / len(top)


def pair_ref_recall(reference: Sequence[str], other: Sequence[str],
                    ks: Sequence[int]) -> dict[str, float] | None:
    """``{"<k>": ref_recall@k}`` of one pair (string keys, as the JSON's); None when the
    reference returned nothing."""
    if not reference:
        return None
    out: dict[str, float] = {}
    for k in ks:
        value = ref_recall_at(reference, other, k)
        if value is not None:
            out[str(k)] = value
    return out


def _means(rows: Sequence[Mapping[str, float]], ks: Sequence[int]) -> dict[str, Any]:
    return {"pairs": len(rows),
            **{f"{METRIC}@{k}": (sum(r[str(k)] for r in rows) / len(rows) if rows else None)
               for k in ks}}


def reference_recall(results: Iterable[Mapping[str, Any]], reference: str,
                     retrievers: Sequence[str], ks: Sequence[int],
                     type_order: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Over the run's results (``retriever``, ``question_id``, ``question_type``, ``ranked``):
    ``{"reference": name, "ks": [...], "pairs": {retriever: {question_id: {"<k>": value}}},
    "summary": {retriever: {"overall": {"pairs": n, "ref_recall@k": mean, ...}, "by_type":
    {type: {...}}}}}`` for every retriever but the reference, over the pairs both ranked."""
    rows = list(results)
    ref = {str(r["question_id"]): list(r.get("ranked") or []) for r in rows
           if r["retriever"] == reference}
    per_pair: dict[str, dict[str, dict[str, float]]] = {}
    summary: dict[str, Any] = {}
    for name in retrievers:
        if name == reference:
            continue
        mine: dict[str, dict[str, float]] = {}
        types: dict[str, list[Mapping[str, float]]] = {}
        for r in rows:
            if r["retriever"] != name or str(r["question_id"]) not in ref:
                continue
            got = pair_ref_recall(ref[str(r["question_id"])], list(r.get("ranked") or []), ks)
            if got is None:
                continue
            mine[str(r["question_id"])] = got
            types.setdefault(str(r.get("question_type", "?")), []).append(got)
        if not mine:
            continue
        per_pair[name] = mine
        order = sorted(types, key=type_order) if type_order is not None else sorted(types)
        summary[name] = {"overall": _means(list(mine.values()), ks),
                         "by_type": {t: _means(types[t], ks) for t in order}}
    return {"reference": reference, "ks": list(ks), "pairs": per_pair, "summary": summary}
