"""Ties a fused ranking inherits from the lists it fuses (vipune's hybrid: semantic + FTS).

Reciprocal Rank Fusion reads ranks, not scores: two sessions with equal cosines get
consecutive semantic ranks by row order, and so different fused scores. An order of a fused
ranking is therefore an order of every tie block of every input list, within the part the
fusion reads (a block cut by the candidate pool's cap included: which of its members get in
is part of the order), then an order of the ties among the fused scores. Each is taken
equally likely, every list's blocks independently; :func:`tie_orders` gives the fused
rankings a cut-off is judged over (:class:`~..scoring.ties.TieOrders`), and
:func:`~..scoring.ties.orders_ranges` the expectation, worst and best case over them.

Exact when few: the orders of the first list's blocks are enumerated up to sessions that
nothing tells apart (same gold-ness, same place in every other list, same ``fixed`` value:
swapping two such sessions in every list at once changes no metric), each weighted by how
many orders it stands for; the other lists' blocks by every ordered choice of the members
the cap lets in. Beyond :data:`EXACT_ORDERS` rankings (or :data:`WORK` fused candidates in
all), the expectation is the mean over :data:`SAMPLED_ORDERS` orders drawn uniformly (a seed
from the question and the cut, so a rerun gives the same numbers), and the worst and best
case are the least and greatest over those, the run's own order, and the two constructed
ones (every gold session first, and last, in each of its blocks of every list).
"""

from __future__ import annotations

import itertools
import math
import random
import zlib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..scoring.ties import TieOrders, tie_blocks

__all__ = ["EXACT_ORDERS", "SAMPLED_ORDERS", "WORK", "FusionInputs", "tie_orders"]

#: At most this many fused rankings are enumerated exactly.
EXACT_ORDERS = 1000
#: Orders drawn when there are more.
SAMPLED_ORDERS = 200
#: At most this many fused candidates over all the rankings fused (a pool of 10,000 makes
#: each fusion 100 times dearer than one of 100): fewer orders beyond it, at least 16.
WORK = 400_000
#: Label sequences are enumerated up to this many members let in by one block.
_DEEPEST = 400

Ranked = tuple[list[str], list[float]]


@dataclass(frozen=True)
class FusionInputs:
    """What one fused search read: each input list (ids and scores best first, running past
    its cap at least to the end of the tie block the cap cuts), how many of each the fusion
    reads, the fusion itself (the lists' read parts -> every candidate and score, best
    first), and per id a value the fusion reads besides the ranks (a row's date under a
    recency weight; None: nothing)."""

    lists: tuple[Ranked, ...]
    caps: tuple[int, ...]
    fuse: Callable[[Sequence[Sequence[str]]], list[tuple[str, float]]]
    fixed: Mapping[str, object] | None = None


@dataclass(frozen=True)
class _Block:
    list_index: int
    start: int
    members: tuple[str, ...]
    let_in: int  # how many of its members the cap lets into the read part


def _blocks(inputs: FusionInputs) -> list[_Block]:
    out: list[_Block] = []
    for j, ((ids, scores), cap) in enumerate(zip(inputs.lists, inputs.caps, strict=True)):
        for s, e in tie_blocks(scores, stop=cap):
            if e - s >= 2:
                out.append(_Block(j, s, tuple(ids[s:e]), min(e, cap) - s))
    return out


def _cut(fused: Sequence[tuple[str, float]], limit: int) -> Ranked:
    """The first ``limit`` fused ids and scores, then those past it tied with the last."""
    ids = [i for i, _ in fused[:limit]]
    scores = [s for _, s in fused[:limit]]
    for mem_id, score in fused[limit:]:
        if not scores or score != scores[-1]:
            break
        ids.append(mem_id)
        scores.append(score)
    return ids, scores


def _count_sequences(counts: Sequence[int], m: int, cap: int) -> int:
    """Distinct label sequences of length ``m`` using label c at most ``counts[c]`` times
    (saturating at ``cap + 1``)."""
    ways = [1] + [0] * m  # ways[length], over the labels seen so far
    for c in counts:
        new = [0] * (m + 1)
        for length in range(m + 1):
            if not ways[length]:
                continue
            for j in range(min(c, m - length) + 1):
                new[length + j] = min(cap + 1,
                                      new[length + j] + ways[length] * math.comb(length + j, j))
        ways = new
        if ways[m] > cap:
            return cap + 1
    return ways[m]


def _sequences(counts: list[int], m: int) -> Iterator[list[int]]:
    seq: list[int] = []

    def rec() -> Iterator[list[int]]:
        if len(seq) == m:
            yield list(seq)
            return
        for c, left in enumerate(counts):
            if left:
                counts[c] -= 1
                seq.append(c)
                yield from rec()
                seq.pop()
                counts[c] += 1

    yield from rec()


def _lgamma_weight(n_rest: int, rest: Sequence[int]) -> float:
    """log of the multinomial (n_rest; rest): the orders of the block past the cap."""
    return math.lgamma(n_rest + 1) - sum(math.lgamma(r + 1) for r in rest)


def _classes(block: _Block, places: Sequence[Mapping[str, object]],
             gold: Collection[str], fixed: Mapping[str, object] | None) -> list[list[str]]:
    """The block's members grouped by what tells them apart (block order kept): a gold
    session is its own; so is one that sits in a tie block of an earlier list (its orders
    are reduced there); the others by their places in every other list and ``fixed``."""
    j = block.list_index
    earlier = places[:j]
    others = [p for i, p in enumerate(places) if i != j]
    classes: dict[object, list[str]] = {}
    for x in block.members:
        if x in gold:
            sig: object = ("gold", x)
        elif any(_in_block(p.get(x)) for p in earlier):
            sig = ("own", x)
        else:
            sig = ("other", tuple([p.get(x) for p in others]),
                   None if fixed is None else fixed.get(x))
        classes.setdefault(sig, []).append(x)
    return list(classes.values())


def _in_block(place: object) -> bool:
    return isinstance(place, tuple) and place[0] == "block"


def _choices(block: _Block, places: Sequence[Mapping[str, object]],
             gold: Collection[str], fixed: Mapping[str, object] | None,
             ) -> list[tuple[float, tuple[str, ...]]]:
    """Every distinct prefix the block can give, up to members nothing tells apart
    (log-weight: how many orders of the whole block it stands for, members let in)."""
    groups = _classes(block, places, gold, fixed)
    counts = [len(g) for g in groups]
    n, m = len(block.members), block.let_in
    out: list[tuple[float, tuple[str, ...]]] = []
    for seq in _sequences(list(counts), m):
        used = [0] * len(groups)
        prefix = []
        for c in seq:
            prefix.append(groups[c][used[c]])
            used[c] += 1
        out.append((_lgamma_weight(n - m, [cnt - u for cnt, u in zip(counts, used,
                                                                         strict=True)]),
                    tuple(prefix)))
    return out


def _count(block: _Block, places: Sequence[Mapping[str, object]],
           gold: Collection[str], fixed: Mapping[str, object] | None) -> int:
    if block.let_in > _DEEPEST:
        return EXACT_ORDERS + 1
    counts = [len(g) for g in _classes(block, places, gold, fixed)]
    return _count_sequences(counts, block.let_in, EXACT_ORDERS)


def _places(inputs: FusionInputs, blocks: Sequence[_Block]) -> list[dict[str, object]]:
    """Per list: where each id sits in its read part (its tie block, or its fixed
    position); an id the list does not read has no entry."""
    out: list[dict[str, object]] = []
    for j, ((ids, _), cap) in enumerate(zip(inputs.lists, inputs.caps, strict=True)):
        where: dict[str, object] = {x: ("at", i) for i, x in enumerate(ids[:cap])}
        for b, block in enumerate(blocks):
            if block.list_index == j:
                for x in block.members:
                    where[x] = ("block", b)
        out.append(where)
    return out


def _fused(inputs: FusionInputs, blocks: Sequence[_Block],
           prefixes: Sequence[Sequence[str]], limit: int) -> Ranked:
    lists = [list(ids[:cap]) for (ids, _), cap in zip(inputs.lists, inputs.caps, strict=True)]
    for block, prefix in zip(blocks, prefixes, strict=True):
        lists[block.list_index][block.start:block.start + block.let_in] = prefix
    return _cut(inputs.fuse(lists), limit)


def tie_orders(inputs: FusionInputs, gold: Collection[str], limit: int,
               seed: str) -> TieOrders | None:
    """The fused rankings (cut at ``limit``, with the tie past it) a cut-off in ``limit``'s
    call is judged over; None when no input list holds a tie the fusion reads."""
    blocks = _blocks(inputs)
    if not blocks:
        return None
    gold_set = set(gold)
    places = _places(inputs, blocks)
    run_order = _fused(inputs, blocks, [b.members[:b.let_in] for b in blocks], limit)
    extremes = [run_order]
    for gold_first in (True, False):
        prefixes = [sorted(b.members, key=lambda x: (x in gold_set) != gold_first)[:b.let_in]
                    for b in blocks]
        extremes.append(_fused(inputs, blocks, prefixes, limit))
    candidates = sum(min(len(ids), cap) for (ids, _), cap in
                     zip(inputs.lists, inputs.caps, strict=True)) or 1
    budget = max(16, WORK // candidates)
    total = 1
    for block in blocks:
        total *= _count(block, places, gold_set, inputs.fixed)
        if total > min(EXACT_ORDERS, budget):
            break
    orders: list[tuple[float, list[str], list[float]]] = []
    if total <= min(EXACT_ORDERS, budget):
        options = [_choices(b, places, gold_set, inputs.fixed) for b in blocks]
        combos = [(sum(w for w, _ in combo), [p for _, p in combo])
                  for combo in itertools.product(*options)]
        top = max(w for w, _ in combos)
        for logw, chosen in combos:
            ids, scores = _fused(inputs, blocks, chosen, limit)
            orders.append((math.exp(logw - top), ids, scores))
    else:
        rng = random.Random(zlib.crc32(f"{seed}\x00{limit}".encode()))
        for _ in range(min(SAMPLED_ORDERS, budget)):
            prefixes = [rng.sample(b.members, b.let_in) for b in blocks]
            ids, scores = _fused(inputs, blocks, prefixes, limit)
            orders.append((1.0, ids, scores))
    return TieOrders(orders, extremes)
