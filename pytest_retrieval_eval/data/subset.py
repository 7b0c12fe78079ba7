"""Stratified subsets: score (and prep) N usable pairs instead of the whole dataset.

``--retrieval-eval-subset N`` (seed: ``--retrieval-eval-subset-seed S``, default 0) and
``retrieval-eval prep --subset N [--subset-seed S]`` pick the same pairs:

* The usable pairs (parsed, not abstention) are grouped by question type. Each type gets
  ``N * n_type / n_usable`` pairs rounded by the largest-remainder method (Hamilton), then at
  least one: a type raised to one takes its pair from the type rounded up the most.
* Inside a type the pairs are ordered by ``sha256(dataset sha256, seed, question_id)`` and the
  first ones are taken. The choice therefore depends only on the dataset's content hash, the
  seed and N, never on the machine, the file order or the Python hash seed.
* The chosen pairs keep file order. Prep under a subset embeds only their texts (their
  personas' sessions and their questions): :class:`SubsetCorpus` is the corpus view prep sees.

The run's header and JSON state the subset, its seed and how wide the 95% confidence interval
of overall recall@5 is at that N (:func:`ci95_width`): a normal approximation, from the
per-pair recall@5 values' standard deviation when the run scored them, and the worst case
(half the pairs at 0, half at 1: ``2 * 1.96 * 0.5 / sqrt(N - 1)``) always.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import DataError
from .pairs import QUESTION_TYPES

__all__ = [
    "Subset",
    "SubsetCorpus",
    "allocate",
    "choose",
    "ci95_width",
    "subset_info",
    "subset_lines",
    "worst_case_ci95_width",
]

#: z of a two-sided 95% normal interval.
Z95 = 1.959963984540054


class _Pair(Protocol):
    @property
    def question_id(self) -> str: ...
    @property
    def question_type(self) -> str: ...
    @property
    def abstention(self) -> bool: ...
    @property
    def question(self) -> str: ...
    @property
    def text_keys(self) -> tuple[str, ...]: ...


class _Corpus(Protocol):
    @property
    def pairs(self) -> Sequence[Any]: ...
    @property
    def dataset_sha256(self) -> str: ...


@dataclass(frozen=True)
class Subset:
    """The chosen pairs: positions into ``corpus.pairs``, in file order."""

    n: int  # asked for
    seed: int
    positions: tuple[int, ...]
    usable: int  # usable pairs of the whole dataset
    by_type: Mapping[str, int]  # chosen per question type (type order)

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "seed": self.seed, "chosen": len(self.positions),
                "of_usable": self.usable, "by_type": dict(self.by_type)}


def _type_order(qtype: str) -> tuple[int, str]:
    return (QUESTION_TYPES.index(qtype) if qtype in QUESTION_TYPES else len(QUESTION_TYPES),
            qtype)


def allocate(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """Pairs per type: proportional to ``sizes`` by largest remainder, at least one each.

    ``n`` must lie in ``len(sizes)..sum(sizes)``; ties go to the type earlier in card order.
    """
    total = sum(sizes.values())
    types = sorted((t for t, size in sizes.items() if size > 0), key=_type_order)
    if not len(types) <= n <= total:
        raise ValueError(f"n={n} outside {len(types)}..{total}")
    quota = {t: n * sizes[t] / total for t in types}
    alloc = {t: math.floor(quota[t]) for t in types}
    left = n - sum(alloc.values())
    # Largest remainder: the types whose quota lost the most to rounding get one more each.
    for t in sorted(types, key=lambda t: (-(quota[t] - alloc[t]), _type_order(t)))[:left]:
        alloc[t] += 1
    # At least one per type: each empty type takes one from the most over-served type.
    for t in types:
        if alloc[t] == 0:
            donor = max((d for d in types if alloc[d] > 1),
                        key=lambda d: (alloc[d] - quota[d], alloc[d], -types.index(d)))
            alloc[donor] -= 1
            alloc[t] = 1
    return alloc


def _order_key(dataset_sha256: str, seed: int, question_id: str) -> str:
    return hashlib.sha256(f"{dataset_sha256}\0{seed}\0{question_id}".encode()).hexdigest()


def choose(corpus: _Corpus, n: int, seed: int = 0, *,
           flag: str = "--retrieval-eval-subset") -> Subset:
    """The stratified subset of ``n`` usable pairs of ``corpus`` (all of them when ``n`` is
    at least their number). Raises :class:`DataError` (naming ``flag``) when ``n`` is below
    the number of question types present."""
    usable = [(pos, p) for pos, p in enumerate(corpus.pairs) if not p.abstention]
    groups: dict[str, list[tuple[int, Any]]] = {}
    for pos, pair in usable:
        groups.setdefault(pair.question_type, []).append((pos, pair))
    if n >= len(usable):
        chosen = [pos for pos, _ in usable]
        counts = {t: len(groups[t]) for t in sorted(groups, key=_type_order)}
        return Subset(n, seed, tuple(chosen), len(usable), counts)
    if n < len(groups):
        raise DataError(
            f"{flag} {n}: the dataset has {len(groups)} question types and a "
            f"subset holds at least one pair of each; give N of at least {len(groups)}"
        )
    alloc = allocate({t: len(g) for t, g in groups.items()}, n)
    picked: list[int] = []
    for qtype, group in groups.items():
        ranked = sorted(group, key=lambda item: _order_key(corpus.dataset_sha256, seed,
                                                           item[1].question_id))
        picked.extend(pos for pos, _ in ranked[: alloc[qtype]])
    by_type = {t: alloc[t] for t in sorted(alloc, key=_type_order)}
    return Subset(n, seed, tuple(sorted(picked)), len(usable), by_type)


class SubsetCorpus:
    """The corpus as prep (and the model-free lane's checks) see it under a subset: only the
    chosen pairs; texts, names and hashes are the whole corpus's."""

    def __init__(self, corpus: Any, subset: Subset) -> None:
        self.corpus = corpus
        self.subset = subset
        self.pairs = [corpus.pairs[i] for i in subset.positions]
        self.dataset_name: str = corpus.dataset_name
        self.dataset_sha256: str = corpus.dataset_sha256
        self.stats = {**corpus.stats, "slots": sum(len(p.text_keys) for p in self.pairs)}

    def texts(self, keys: Sequence[str]) -> list[str]:
        result: list[str] = self.corpus.texts(keys)
        return result

    def turns(self, keys: Sequence[str]) -> list[list[dict[str, str]]]:
        result: list[list[dict[str, str]]] = self.corpus.turns(keys)
        return result


def worst_case_ci95_width(n: int) -> float:
    """The widest :func:`ci95_width` of ``n`` values in 0..1 can be: half of them 0, half 1,
    whose sample standard deviation is ``0.5 * sqrt(n / (n - 1))``; so ``2 * 1.96 * 0.5 /
    sqrt(n - 1)``."""
    return 2 * Z95 * 0.5 / math.sqrt(n - 1) if n > 1 else math.inf


def ci95_width(values: Sequence[float]) -> float | None:
    """Full width of the 95% normal-approximation interval of the mean of ``values`` (the
    per-pair recall@5 of one retriever): ``2 * 1.96 * s / sqrt(n)``, ``s`` the sample
    standard deviation. None for fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return 2 * Z95 * math.sqrt(var) / math.sqrt(n)


def subset_info(subset: Mapping[str, Any], results: Sequence[Mapping[str, Any]],
                retriever: str | None) -> dict[str, Any]:
    """The report's ``subset`` entry: the choice, plus the 95% CI width of overall recall@5
    at that N (worst case, and from the scored pairs of the first retriever when it has
    recall@5)."""
    chosen = int(subset.get("chosen", 0))
    mine = [r.get("metrics", {}) for r in results if r.get("retriever") == retriever]
    # recall@5 (vipune protocol); under the LongMemEval protocol its recall_all@5.
    metric = next((m for m in ("recall@5", "recall_all@5") if mine and m in mine[0]),
                  "recall@5")
    values = [float(m[metric]) for m in mine if metric in m]
    width = ci95_width(values)
    return {
        **subset,
        "ci95_recall_at_5": {
            "method": f"normal approximation: 2*1.96*sd/sqrt(n) of per-pair {metric}; "
                      "worst case half the pairs at 0, half at 1",
            "metric": metric,
            "worst_case_width": round(worst_case_ci95_width(chosen), 4),
            "retriever": retriever if values else None,
            "width": None if width is None else round(width, 4),
        },
    }


def subset_lines(subset: Mapping[str, Any] | None) -> list[str]:
    """The header's subset lines (none without a subset)."""
    if not subset:
        return []
    lines = [f"subset: {subset['chosen']} of {subset['of_usable']} usable pairs (asked "
             f"{subset['n']}, seed {subset['seed']}), stratified by question type (n per "
             f"type: the table)"]
    ci = subset.get("ci95_recall_at_5")
    if ci:
        observed = (f"±{ci['width'] / 2:.3f} observed for {ci['retriever']}, "
                    if ci.get("width") is not None else "")
        metric = ci.get("metric", "recall@5")
        lines.append(f"subset: 95% CI of overall {metric} at n={subset['chosen']}: {observed}"
                     f"±{ci['worst_case_width'] / 2:.3f} at worst (normal approximation)")
    return lines
