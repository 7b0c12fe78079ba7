"""Why a number is what it is: the figures behind the per-retriever diagnostics.

Per pair (:func:`pair_facts`, kept in the pair's result so it rides to the xdist controller
with it): how many ids the retriever returned at each k and, for a fused retriever (``hybrid``
and its what-ifs, which expose the two lists they fused as ``last_components``), whether the
fused top k equals the semantic top k and the FTS top k.

Per retriever (:func:`summarize`, the JSON report's ``diagnostics``, overall and per question
type under ``by_type``): pairs that returned fewer
than k ids, and none; the mean rank of the first gold session within the top max(k), and the
share of pairs whose gold is not there at all; for a fused retriever, per k, the pairs where
fusion changed nothing (fused top k = semantic top k) and where it equals the FTS top k.
:mod:`pytest_retrieval_eval.reporting.diagnostic_lines` words them under the tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["fused_lists", "pair_facts", "summarize"]


def pair_facts(components: Mapping[int, Mapping[str, Sequence[str]]],
               rankings: Mapping[int, Sequence[str]], ks: Sequence[int]) -> dict[str, Any]:
    """What one pair's rankings say beyond its metrics: ``returned`` (ids returned, per k)
    and, when the retriever fused lists (``components[k]``: the semantic and FTS lists, ids
    best first, of the very call that ranking ``k`` came from), ``fusion`` (per k: fused top
    k equals semantic's / FTS's) and ``component_sizes`` (those of the largest k's call).

    Keys are strings (``"10"``): the facts cross xdist's wire and JSON unchanged."""
    facts: dict[str, Any] = {"returned": {str(k): len(rankings[k]) for k in ks}}
    if ks and all(k in components for k in ks):
        facts["fusion"] = {
            str(k): {"semantic": list(rankings[k][:k]) == list(components[k]["semantic"])[:k],
                     "fts": list(rankings[k][:k]) == list(components[k]["fts"])[:k]}
            for k in ks}
        largest = components[max(ks)]
        facts["component_sizes"] = {"semantic": len(largest["semantic"]),
                                    "fts": len(largest["fts"])}
    return facts


def fused_lists(retriever: object) -> Mapping[str, Sequence[str]] | None:
    """The semantic and FTS lists ``retriever``'s last ``rank`` fused (``last_components`` of
    ``hybrid`` and its what-ifs), else None."""
    components = getattr(retriever, "last_components", None)
    if isinstance(components, Mapping) and {"semantic", "fts"} <= set(components):
        return components
    return None


def _first_gold_rank(ranked: Sequence[str], gold: Iterable[str]) -> int | None:
    wanted = set(gold)
    return next((rank for rank, mem_id in enumerate(ranked, start=1) if mem_id in wanted),
                None)


def _figures(mine: Sequence[Mapping[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """The figures of one retriever's results (all of them, or one question type's)."""
    top = max(ks)
    returned = [r.get("returned") or {} for r in mine]
    ranks = [_first_gold_rank(list(r["ranked"])[:top], r["gold"])
             for r in mine if r.get("gold")]
    found = [x for x in ranks if x is not None]
    entry: dict[str, Any] = {
        "pairs": len(mine),
        "no_results": sum(1 for r in mine if not r["ranked"]),
        "fewer_than_k": {str(k): sum(1 for got, r in zip(returned, mine, strict=True)
                                     if int(got.get(str(k), len(r["ranked"]))) < k)
                         for k in ks},
        "first_gold": {
            "top": top,
            "pairs_with_gold": len(ranks),
            "mean_rank": sum(found) / len(found) if found else None,
            "not_found": len(ranks) - len(found),
            "share_not_found": (len(ranks) - len(found)) / len(ranks) if ranks else None,
        },
    }
    fused = [r for r in mine if r.get("fusion")]
    if fused:
        entry["fusion"] = {str(k): {
            "pairs": len(fused),
            "equals_semantic": sum(1 for r in fused if r["fusion"][str(k)]["semantic"]),
            "equals_fts": sum(1 for r in fused if r["fusion"][str(k)]["fts"]),
        } for k in ks}
        entry["fts_list_empty"] = sum(
            1 for r in fused if not (r.get("component_sizes") or {}).get("fts"))
    return entry


def summarize(results: Sequence[Mapping[str, Any]], retrievers: Sequence[str],
              ks: Sequence[int], type_order: Callable[[str], Any] | None = None,
              ) -> dict[str, Any]:
    """Per retriever: the figures :func:`lines` words (plain data, JSON-able), over all its
    pairs and, under ``by_type``, over each question type's (``type_order`` sorts them)."""
    out: dict[str, Any] = {}
    for name in retrievers:
        mine = [r for r in results if r["retriever"] == name]
        if not mine:
            continue
        types = sorted({str(r.get("question_type", "")) for r in mine}, key=type_order)
        out[name] = {**_figures(mine, ks), "by_type": {
            qtype: _figures([r for r in mine if str(r.get("question_type", "")) == qtype], ks)
            for qtype in types}}
    return out
