"""Tie-aware metrics: what a metric at k is worth when equal scores may come in any order.

A retriever that gives two items the same score orders them by some rule of its own (row
order, id order, whatever a sort does); a metric at k that changes with that order is
*tie-sensitive*. Following McSherry & Najork (2008, "Computing information retrieval
performance measures efficiently in the presence of tied scores", ECIR), each metric gets its
expectation over every order of the tied items, each order equally likely, and here also its
worst and best case. Small pure functions over the ranked ids, their scores and the gold ids
(ranx-style), no I/O:

* :func:`tie_blocks`: runs of consecutive equal scores (a ranking is a list of blocks);
* :func:`expected_metrics`, :func:`extreme_orders`: the expectation in closed form, and the
  orders that give the worst and the best case;
* :func:`tie_ranges`: every metric of a protocol at one k, as ``(expected, worst, best)``;
* :func:`pair_ties`: one pair's tie-sensitive metrics (the JSON's per-pair ``ties``);
* :func:`summarize`: per retriever, the means over pairs (the JSON's ``ties`` section).

The closed forms. Only the block straddling the cut at k (positions ``s+1..e``, ``m = k - s``
of its ``n = e - s`` positions inside the top k) leaves set membership to chance: its top-k
part is a uniformly random ``m``-subset of its positions. A gold id with ``c`` positions in
that block is in the top k with probability ``1 - C(n-c, m) / C(n, m)`` (hypergeometric);
``recall_any`` uses the block's gold positions together, ``recall_all`` inclusion-exclusion
over the block's gold ids. DCG is linear: each position of a block of ``n`` positions, ``r``
of them gold, has expected gain ``r / n`` (McSherry & Najork, section 3), so the expected
nDCG is the expected DCG over the (order-free) ideal DCG. Positions repeat an id only under
``--retrieval-eval-protocol longmemeval`` (a repeated session slot); the formulas take that
into account, and ``tests/scoring/test_ties.py`` checks them against a brute-force average
over every order of the tied blocks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any, NamedTuple

from . import longmemeval_metrics as lme
from .metrics import _dcg, metric_key, ndcg_any, recall, recall_all, recall_any

__all__ = ["FAMILIES", "TieOrders", "TieRange", "expected_metrics", "extreme_orders",
           "orders_ranges", "pair_ties", "summarize", "tie_blocks", "tie_ranges"]

#: The metric families whose tie range is computed, per protocol. Session metrics of a turn
#: ranking (``session_*``) are left out: their k grows with the order itself.
FAMILIES: dict[str, tuple[str, ...]] = {
    "vipune": ("recall", "recall_any", "recall_all", "ndcg_any"),
    "longmemeval": ("recall_any", "recall_all", "ndcg_any"),
}
#: Two values closer than this are one (float sums of the closed forms).
EPS = 1e-12


class TieRange(NamedTuple):
    """A metric's expectation over every order of the tied items, its worst and best case."""

    expected: float
    worst: float
    best: float

    @property
    def sensitive(self) -> bool:
        """Whether the order of equal scores changes the metric."""
        return self.best - self.worst > EPS


class TieOrders(NamedTuple):
    """The rankings a cut-off is judged over when the ranking is itself one of several (a
    fused ranking whose input lists hold ties, :mod:`..retrievers.fused_ties`).

    ``orders``: ``(weight, ids, scores)``, each a ranking that one order of the inputs' ties
    gives, with its scores (running past the cut to the end of a tie cut by it); the
    expectation is their weighted mean. ``extremes``: more ``(ids, scores)`` rankings that
    count for the worst and best case only (the run's own, and constructed ones)."""

    orders: list[tuple[float, list[str], list[float]]]
    extremes: list[tuple[list[str], list[float]]]


def tie_blocks(scores: Sequence[float], stop: int | None = None) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of consecutive equal scores, in ranking order (a run of
    one is a block too); with ``stop``, only the blocks starting before it (a fused ranking
    reads its input lists to a cap: the rest of a long list is never scanned)."""
    out: list[tuple[int, int]] = []
    n = len(scores)
    end = n if stop is None else min(n, stop)
    start = 0
    while start < end:
        i = start + 1
        first = scores[start]
        while i < n and scores[i] == first:
            i += 1
        out.append((start, i))
        start = i
    return out


def _straddling(blocks: Sequence[tuple[int, int]], k: int) -> tuple[int, int]:
    """The block cut by k, as ``[s, e)``; ``(k, k)`` when no block is (the cut is clean)."""
    for s, e in blocks:
        if s < k < e:
            return s, e
    return k, k


def _p_in(n: int, m: int, copies: int) -> float:
    """P(at least one of ``copies`` marked positions among a random ``m`` of ``n``)."""
    if copies <= 0 or m <= 0:
        return 0.0
    return 1.0 - math.comb(n - copies, m) / math.comb(n, m)


def _p_all(n: int, m: int, copies: Sequence[int]) -> float:
    """P(each id, ``copies[j]`` positions each, has a position among a random ``m`` of ``n``):
    inclusion-exclusion over the ids that could miss."""
    total = math.comb(n, m)
    acc = 0
    for size in range(len(copies) + 1):
        for chosen in combinations(copies, size):
            acc += (-1) ** size * math.comb(n - sum(chosen), m)
    return acc / total


def expected_metrics(ranked: Sequence[str], scores: Sequence[float], gold: Collection[str],
                     k: int, *, protocol: str = "vipune", rankable: Collection[str] = (),
                     corpus_ids: Sequence[str] = ()) -> dict[str, float]:
    """Each family of ``protocol`` at ``k``, expected over every order of the tied items.

    ``ranked`` must be what the metric reads (deduplicated under the vipune protocol, every
    position under LongMemEval's); ``scores[i]`` is ``ranked[i]``'s. ``rankable`` (vipune)
    the persona's ids, ``corpus_ids`` (LongMemEval) every corpus position: what the ideal DCG
    is made of, as :mod:`.metrics` and :mod:`.longmemeval_metrics` make it.
    """
    if len(scores) != len(ranked):
        raise ValueError(f"{len(scores)} scores for {len(ranked)} ranked ids")
    gold_ids = list(dict.fromkeys(gold))
    gold_set = set(gold_ids)
    blocks = tie_blocks(scores)
    s, e = _straddling(blocks, k)
    n, m = e - s, k - s
    above = set(ranked[:s])
    in_block = Counter(x for x in ranked[s:e] if x in gold_set)
    p_each = {g: 1.0 if g in above else _p_in(n, m, in_block[g]) for g in gold_ids}
    waiting = [g for g in gold_ids if g not in above]
    out: dict[str, float] = {}
    if protocol == "vipune":
        out["recall"] = sum(p_each.values()) / len(gold_ids) if gold_ids else 0.0
    if any(g in above for g in gold_ids):
        out["recall_any"] = 1.0
    else:
        out["recall_any"] = _p_in(n, m, sum(in_block.values()))
    if not gold_ids:
        out["recall_all"] = 1.0 if protocol == "longmemeval" else 0.0
    elif any(in_block[g] == 0 for g in waiting):
        out["recall_all"] = 0.0
    else:
        out["recall_all"] = _p_all(n, m, [in_block[g] for g in waiting]) if waiting else 1.0
    # Expected DCG: each position of a block gets the block's mean gain.
    gains = [0.0] * min(k, len(ranked))
    for bs, be in blocks:
        if bs >= k:
            break
        mean = sum(1 for x in ranked[bs:be] if x in gold_set) / (be - bs)
        for i in range(bs, min(be, k)):
            gains[i] = mean
    if protocol == "longmemeval":
        ideal = lme.dcg(sorted((1 if c in gold_set else 0 for c in corpus_ids),
                               reverse=True), k)
        out["ndcg_any"] = lme.dcg(gains, k) / ideal if ideal != 0 else 0.0
    else:
        rankable_set = _as_set(rankable)
        present = [g for g in gold_ids if g in rankable_set]
        ideal = _dcg([1.0] * len(present), k)
        out["ndcg_any"] = _dcg(gains, k) / ideal if ideal > 0 else 0.0
    return out


def extreme_orders(ranked: Sequence[str], scores: Sequence[float],
                   gold: Collection[str]) -> tuple[list[str], list[str]]:
    """The (worst, best) orders of ``ranked`` among those that keep the scores' order.

    Best: in each block, one position of each gold id first, then the other gold positions,
    then the rest. Worst: the rest first, then the gold positions grouped by id, the id with
    the most positions first (so a cut through them reaches as few ids as possible). Every
    metric here is monotone in those choices: the best order maximises each, the worst
    minimises each."""
    gold_set = set(gold)
    worst: list[str] = []
    best: list[str] = []
    for s, e in tie_blocks(scores):
        block = list(ranked[s:e])
        hits = [x for x in block if x in gold_set]
        rest = [x for x in block if x not in gold_set]
        first = list(dict.fromkeys(hits))
        repeats = list((Counter(hits) - Counter(first)).elements())
        best.extend([*first, *repeats, *rest])
        counts = Counter(hits)
        grouped = sorted(counts, key=lambda g: (-counts[g], hits.index(g)))
        worst.extend([*rest, *(g for g in grouped for _ in range(counts[g]))])
    return worst, best


def order_matters(ranked: Sequence[str], scores: Sequence[float], gold: Collection[str],
                  k: int) -> bool:
    """Whether some order of the ties of ``ranked`` could change a metric at ``k``: a tie
    block starting in the top k that mixes gold and other ids, or repeats a gold id. When
    none does, :func:`extreme_orders` gives one order for worst and best (a block of other
    ids, or of distinct gold ids, stays as it is in both), so :func:`tie_ranges` finds no
    metric sensitive: the tie report skips it (most cut-offs, at a fraction of its cost)."""
    gold_set = _as_set(gold)
    for s, e in tie_blocks(scores):
        if s >= k:
            break
        if e - s < 2:
            continue
        block = ranked[s:e]
        hits = sum(1 for x in block if x in gold_set)
        if hits and (hits < len(block) or len(set(block)) < len(block)):
            return True
    return False


def _as_set(ids: Collection[str]) -> Collection[str]:
    """``ids`` as a set, without copying one (:func:`orders_ranges` judges many rankings
    against one haystack)."""
    return ids if isinstance(ids, (set, frozenset)) else set(ids)


def _metrics(ranked: Sequence[str], gold: Collection[str], k: int, protocol: str,
             rankable: Collection[str], corpus_ids: Sequence[str]) -> dict[str, float]:
    """The plain metrics of one order (the run's own functions)."""
    if protocol == "longmemeval":
        any_, all_, ndcg = lme.evaluate(ranked, gold, corpus_ids, k)
        return {"recall_any": any_, "recall_all": all_, "ndcg_any": ndcg}
    rankable_set = _as_set(rankable)
    present = [g for g in gold if g in rankable_set]
    return {"recall": recall(ranked, gold, k), "recall_any": recall_any(ranked, gold, k),
            "recall_all": recall_all(ranked, gold, k),
            "ndcg_any": ndcg_any(ranked, present, k)}


def tie_ranges(ranked: Sequence[str], scores: Sequence[float], gold: Collection[str], k: int,
               *, protocol: str = "vipune", rankable: Collection[str] = (),
               corpus_ids: Sequence[str] = ()) -> dict[str, TieRange]:
    """Every family of ``protocol`` at ``k``: (expected, worst, best) over the tie orders."""
    expected = expected_metrics(ranked, scores, gold, k, protocol=protocol,
                                rankable=rankable, corpus_ids=corpus_ids)
    worst_order, best_order = extreme_orders(ranked, scores, gold)
    worst = _metrics(worst_order, gold, k, protocol, rankable, corpus_ids)
    best = _metrics(best_order, gold, k, protocol, rankable, corpus_ids)
    return {name: TieRange(expected[name], worst[name], best[name])
            for name in FAMILIES[protocol]}


def orders_ranges(orders: TieOrders, gold: Collection[str], k: int, *,
                  protocol: str = "vipune", rankable: Collection[str] = (),
                  corpus_ids: Sequence[str] = ()) -> dict[str, TieRange]:
    """:func:`tie_ranges` over several rankings: the weighted mean of their expectations,
    the least of their worst cases and the greatest of their best (``extremes`` too)."""
    total = sum(w for w, _, _ in orders.orders)
    rankable = _as_set(rankable)
    means = dict.fromkeys(FAMILIES[protocol], 0.0)
    worst = dict.fromkeys(FAMILIES[protocol], math.inf)
    best = dict.fromkeys(FAMILIES[protocol], -math.inf)
    cases = [(w, ids, sc) for w, ids, sc in orders.orders]
    cases += [(0.0, ids, sc) for ids, sc in orders.extremes]
    for weight, ids, sc in cases:
        got = tie_ranges(ids, sc, gold, k, protocol=protocol, rankable=rankable,
                         corpus_ids=corpus_ids)
        for name, r in got.items():
            means[name] += weight * r.expected
            worst[name] = min(worst[name], r.worst)
            best[name] = max(best[name], r.best)
    out: dict[str, TieRange] = {}
    for name in FAMILIES[protocol]:
        mean = means[name] / total if total > 0 else worst[name]
        out[name] = TieRange(min(max(mean, worst[name]), best[name]), worst[name], best[name])
    return out


Judged = tuple[Sequence[str], Sequence[float]] | TieOrders


def pair_ties(scored: Mapping[int, Judged | Callable[[], Judged | None]] | None,
              gold: Collection[str], ks: Sequence[int], *, protocol: str = "vipune",
              rankable: Collection[str] = (),
              corpus_ids: Sequence[str] = ()) -> dict[str, Any] | None:
    """One pair's ``ties`` (JSON-able): ``{"sensitive": {"ndcg_any@10": {"expected", "worst",
    "best"}, ...}}`` holding only the metrics the order of equal scores changes, or None when
    the retriever gave no scores. ``scored[k]``: the ids cut-off k was scored on and their
    scores (running past k to the end of a tie cut by k), or the :class:`TieOrders` it is
    judged over, or a zero-argument callable giving either (None: no scores; called once
    however many k share it)."""
    if not scored or any(k not in scored for k in ks):
        return None
    done: dict[int, Judged | None] = {}
    cases: dict[int, Judged] = {}
    for k in ks:
        value = scored[k]
        if callable(value):
            if id(value) not in done:
                done[id(value)] = value()
            got = done[id(value)]
            if got is None:
                return None
            cases[k] = got
        else:
            cases[k] = value
    sensitive: dict[str, dict[str, float]] = {}
    for k in ks:
        case = cases[k]
        if isinstance(case, TieOrders):
            ranges = orders_ranges(case, gold, k, protocol=protocol, rankable=rankable,
                                   corpus_ids=corpus_ids)
        else:
            ranked, scores = case
            if not order_matters(ranked, scores, gold, k):
                continue  # every order of its ties scores alike: nothing sensitive at k
            ranges = tie_ranges(ranked, scores, gold, k, protocol=protocol,
                                rankable=rankable, corpus_ids=corpus_ids)
        for name, r in ranges.items():
            if r.sensitive:
                sensitive[metric_key(name, k)] = r._asdict()
    return {"sensitive": sensitive}


def summarize(results: Iterable[Mapping[str, Any]],
              retrievers: Sequence[str]) -> dict[str, Any]:
    """Per retriever (JSON-able): pairs with scores, pairs without, tie-sensitive pairs, and
    per tie-sensitive metric the mean over every scored pair of the value as run, its
    expectation over tie orders, worst and best case (an insensitive pair adds its value to
    all four) and how many pairs it moved in."""
    rows = list(results)
    out: dict[str, Any] = {}
    for name in retrievers:
        mine = [r for r in rows if r["retriever"] == name]
        if not mine:
            continue
        scored = [r for r in mine if r.get("ties") is not None]
        keys = sorted({key for r in scored for key in r["ties"]["sensitive"]},
                      key=_key_order)
        metrics: dict[str, Any] = {}
        for key in keys:
            n = len(scored)
            sums = {"as_run": 0.0, "expected": 0.0, "worst": 0.0, "best": 0.0}
            moved = 0
            for r in scored:
                value = float(r["metrics"].get(key, 0.0))
                hit = r["ties"]["sensitive"].get(key)
                moved += hit is not None
                sums["as_run"] += value
                for part in ("expected", "worst", "best"):
                    sums[part] += float(hit[part]) if hit is not None else value
            metrics[key] = {**{part: v / n for part, v in sums.items()}, "pairs": moved}
        out[name] = {
            "pairs_with_scores": len(scored),
            "pairs_without_scores": len(mine) - len(scored),
            "sensitive_pairs": sum(1 for r in scored if r["ties"]["sensitive"]),
            "metrics": metrics,
        }
    return out


def _key_order(key: str) -> tuple[int, str, int]:
    name, _, k = key.rpartition("@")
    families = FAMILIES["vipune"]
    return (families.index(name) if name in families else len(families), name, int(k))
