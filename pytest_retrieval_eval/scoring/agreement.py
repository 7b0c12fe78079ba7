"""How alike two retrievers rank, pair by pair: pure functions over two rankings.

A summary that barely moves can hide rankings that changed a lot (a weakened HNSW graph gave
1 of 28 top-10 lists identical while recall barely moved). Per matched pair and cut-off k:

* **identical top k**: the first k ids of both rankings are the same ids in the same order
  (two rankings that both return fewer than k rows are compared on what they returned);
* **overlap@k**: ``|A_k ∩ B_k| / max(|A_k|, |B_k|)``, where ``A_k`` is the set of the first k
  ids of one ranking: ``|A_k ∩ B_k| / k`` when both return k rows or more; a short list is
  divided by the longer of the two top k's, so two identical short lists overlap fully and
  a ranking that returned nothing overlaps nothing with one that returned rows; two empty
  top k's overlap 1 (they agree).

:func:`agreement` gives, over matched pairs, per k the count of identical top k's and the
mean overlap@k, overall and per question type (JSON-able).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["agreement", "identical_top", "overlap_at", "ranked_of"]


def identical_top(a: Sequence[str], b: Sequence[str], k: int) -> bool:
    """Whether the top ``k`` of ``a`` and ``b`` are the same ids in the same order."""
    return list(a[:k]) == list(b[:k])


def overlap_at(a: Sequence[str], b: Sequence[str], k: int) -> float:
    """``|A_k ∩ B_k| / max(|A_k|, |B_k|)`` (1.0 when both top k's are empty)."""
    top_a, top_b = set(a[:k]), set(b[:k])
    size = max(len(top_a), len(top_b))
    return 1.0 if size == 0 else len(top_a & top_b) / size


def _figures(pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
             ks: Sequence[int]) -> dict[str, Any]:
    n = len(pairs)
    return {"pairs": n, **{str(k): {
        "identical": sum(identical_top(a, b, k) for a, b in pairs),
        "overlap": sum(overlap_at(a, b, k) for a, b in pairs) / n if n else 0.0,
    } for k in ks}}


def agreement(pairs: Iterable[tuple[str, Sequence[str], Sequence[str]]], ks: Sequence[int],
              type_order: Any = None) -> dict[str, Any]:
    """Over ``(question_type, ranking a, ranking b)`` of matched pairs: ``{"overall":
    {"pairs": n, "<k>": {"identical": count, "overlap": mean}}, "by_type": {type: ...}}``
    (``type_order``: the sort key of the question types, default alphabetical)."""
    rows = list(pairs)
    types: dict[str, list[tuple[Sequence[str], Sequence[str]]]] = {}
    for qtype, a, b in rows:
        types.setdefault(qtype, []).append((a, b))
    order = sorted(types, key=type_order) if type_order is not None else sorted(types)
    return {"overall": _figures([(a, b) for _, a, b in rows], ks),
            "by_type": {t: _figures(types[t], ks) for t in order}}


def ranked_of(pair: Mapping[str, Any]) -> list[str] | None:
    """A report pair's ``ranked`` when it is a list of ids, else None (an old or odd
    report: no agreement is computed for its retriever)."""
    ranked = pair.get("ranked")
    if isinstance(ranked, list) and all(isinstance(x, str) for x in ranked):
        return ranked
    return None
