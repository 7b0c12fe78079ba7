"""Tie-aware metrics against brute force: every order of every tied block, averaged."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pytest

from pytest_retrieval_eval.scoring import ties
from pytest_retrieval_eval.scoring.ties import tie_blocks, tie_ranges


def _all_orders(ranked: Sequence[str], scores: Sequence[float]) -> list[list[str]]:
    """Every order of ``ranked`` that permutes items only within runs of equal scores."""
    pieces = [list(itertools.permutations(ranked[s:e])) for s, e in tie_blocks(scores)]
    return [[x for piece in combo for x in piece] for combo in itertools.product(*pieces)]


def _brute(ranked: Sequence[str], scores: Sequence[float], gold: Sequence[str], k: int,
           protocol: str, rankable: Sequence[str], corpus: Sequence[str]
           ) -> dict[str, tuple[float, float, float]]:
    values: dict[str, list[float]] = {}
    for order in _all_orders(ranked, scores):
        for name, v in ties._metrics(order, gold, k, protocol, rankable, corpus).items():
            values.setdefault(name, []).append(v)
    return {name: (sum(v) / len(v), min(v), max(v)) for name, v in values.items()}


# (ranked, scores, gold, k): hand-made, each with a tie that matters.
CASES = [
    # gold inside a tied block wholly in the top 3: recall fixed, ndcg moves.
    (["a", "b", "c", "d"], [3.0, 2.0, 2.0, 1.0], ["c"], 3),
    # a tie straddling the cut at 2: gold in or out.
    (["a", "b", "c", "d", "e"], [5.0, 1.0, 1.0, 1.0, 0.5], ["d"], 2),
    # two gold in a straddling block of five, two positions inside.
    (["a", "b", "c", "d", "e", "f"], [9.0, 0.0, 0.0, 0.0, 0.0, 0.0], ["c", "f"], 3),
    # gold above the block and in it; a second block below the cut.
    (["g", "x", "h", "y", "z", "w"], [4.0, 3.0, 3.0, 3.0, 1.0, 1.0], ["g", "h", "w"], 3),
    # every score equal.
    (["p", "q", "r", "s"], [0.0, 0.0, 0.0, 0.0], ["q", "s"], 1),
    # no tie at all: a single order, expected = worst = best = the plain metric.
    (["a", "b", "c"], [3.0, 2.0, 1.0], ["b"], 2),
    # gold not ranked at all (absent from the list).
    (["a", "b", "c"], [1.0, 1.0, 1.0], ["z", "b"], 2),
]


@pytest.mark.parametrize(("ranked", "scores", "gold", "k"), CASES)
def test_expected_worst_best_equal_brute_force_vipune(
        ranked: list[str], scores: list[float], gold: list[str], k: int) -> None:
    rankable = [*ranked, "z"]
    got = tie_ranges(ranked, scores, gold, k, protocol="vipune", rankable=rankable)
    want = _brute(ranked, scores, gold, k, "vipune", rankable, ())
    assert set(got) == {"recall", "recall_any", "recall_all", "ndcg_any"}
    for name, (mean, low, high) in want.items():
        assert got[name].expected == pytest.approx(mean, abs=1e-12), name
        assert got[name].worst == pytest.approx(low, abs=1e-12), name
        assert got[name].best == pytest.approx(high, abs=1e-12), name


# LongMemEval's protocol: positions, ids may repeat (a repeated session slot).
LME_CASES = [
    (["a", "b", "b", "c", "d"], [2.0, 1.0, 1.0, 1.0, 1.0], ["b", "d"], 3),
    (["s1", "s2", "s1", "s3", "s2", "s4"], [0.0] * 6, ["s1", "s2"], 2),
    (["a", "b", "c", "d"], [1.0, 1.0, 0.0, 0.0], [], 3),
    (["a", "b", "c", "c", "d"], [3.0, 0.0, 0.0, 0.0, 0.0], ["c"], 2),
]


@pytest.mark.parametrize(("ranked", "scores", "gold", "k"), LME_CASES)
def test_expected_worst_best_equal_brute_force_longmemeval(
        ranked: list[str], scores: list[float], gold: list[str], k: int) -> None:
    got = tie_ranges(ranked, scores, gold, k, protocol="longmemeval", corpus_ids=ranked)
    want = _brute(ranked, scores, gold, k, "longmemeval", (), ranked)
    assert set(got) == {"recall_any", "recall_all", "ndcg_any"}
    for name, (mean, low, high) in want.items():
        assert got[name].expected == pytest.approx(mean, abs=1e-12), name
        assert got[name].worst == pytest.approx(low, abs=1e-12), name
        assert got[name].best == pytest.approx(high, abs=1e-12), name


@pytest.mark.parametrize("protocol", ["vipune", "longmemeval"])
@pytest.mark.parametrize("seed", range(60))
def test_random_small_cases_equal_brute_force(protocol: str, seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 7)
    pool = [f"s{i}" for i in range(n + 2)]
    ranked = (rng.sample(pool, n) if protocol == "vipune"
              else [rng.choice(pool[:n]) for _ in range(n)])
    scores = sorted((float(rng.randint(0, 2)) for _ in range(n)), reverse=True)
    gold = rng.sample(pool, rng.randint(0 if protocol == "longmemeval" else 1, 3))
    k = rng.randint(1, n + 1)
    rankable = pool[:n + 1]  # one gold id may be outside the haystack
    ranked = [x for x in ranked if x in rankable] if protocol == "vipune" else ranked
    scores = scores[:len(ranked)]
    got = tie_ranges(ranked, scores, gold, k, protocol=protocol, rankable=rankable,
                     corpus_ids=ranked)
    want = _brute(ranked, scores, gold, k, protocol, rankable, ranked)
    for name, (mean, low, high) in want.items():
        assert got[name] == pytest.approx((mean, low, high), abs=1e-12), (name, ranked, scores,
                                                                         gold, k)


def test_hand_worked_values() -> None:
    # Gold "d" in a block of three (positions 2-4) with one of them inside the top 2:
    # recall@2 expected 1/3, worst 0, best 1. nDCG@2: gain 1/3 at position 2 (discount 1),
    # ideal 1: 1/3.
    got = tie_ranges(["a", "b", "c", "d", "e"], [5.0, 1.0, 1.0, 1.0, 0.5], ["d"], 2,
                     rankable=["a", "b", "c", "d", "e"])
    assert got["recall"] == (pytest.approx(1 / 3), 0.0, 1.0)
    assert got["ndcg_any"] == (pytest.approx(1 / 3), 0.0, 1.0)
    assert got["recall"].sensitive and got["ndcg_any"].sensitive


def test_pair_ties_keeps_only_sensitive_metrics_and_none_without_scores() -> None:
    ranked = ["a", "b", "c", "d"]
    scores = [3.0, 2.0, 2.0, 1.0]
    facts = ties.pair_ties({1: (ranked, scores), 3: (ranked, scores)}, ["c"], [1, 3],
                           rankable=ranked)
    assert facts is not None
    # @1: "a" alone on top, no tie matters; @3: gold inside the tied block, only nDCG moves.
    assert list(facts["sensitive"]) == ["ndcg_any@3"]
    assert ties.pair_ties(None, ["c"], [1]) is None


def test_summarize_means_over_scored_pairs() -> None:
    results = [
        {"retriever": "bm25", "metrics": {"recall@2": 0.0},
         "ties": {"sensitive": {"recall@2": {"expected": 0.5, "worst": 0.0, "best": 1.0}}}},
        {"retriever": "bm25", "metrics": {"recall@2": 1.0}, "ties": {"sensitive": {}}},
        {"retriever": "bm25", "metrics": {"recall@2": 1.0}, "ties": None},
    ]
    got = ties.summarize(results, ["bm25"])["bm25"]
    assert got["pairs_with_scores"] == 2 and got["pairs_without_scores"] == 1
    assert got["sensitive_pairs"] == 1
    assert got["metrics"]["recall@2"] == {"as_run": 0.5, "expected": 0.75, "worst": 0.5,
                                          "best": 1.0, "pairs": 1}


@pytest.mark.parametrize("protocol", ["vipune", "longmemeval"])
def test_a_cut_whose_ties_cannot_matter_is_skipped_and_only_such_a_cut(protocol: str) -> None:
    """order_matters (the tie report's shortcut, issue 35): where it says no order of the
    ties can change a metric at k, every order scores alike (brute force); pair_ties then
    equals the full computation on random cases, gold repeated in a block included."""
    rng = random.Random(7)
    skipped = kept = 0
    for _ in range(400):
        n = rng.randint(1, 7)
        pool = [f"s{i}" for i in range(n + 2)]
        ranked = (rng.sample(pool, n) if protocol == "vipune"
                  else [rng.choice(pool[:n]) for _ in range(n)])
        scores = sorted((float(rng.randint(0, 2)) for _ in range(n)), reverse=True)
        gold = rng.sample(pool, rng.randint(1, 3))
        k = rng.randint(1, n + 1)
        want = _brute(ranked, scores, gold, k, protocol, pool, ranked)
        if not ties.order_matters(ranked, scores, gold, k):
            skipped += 1
            assert all(high - low <= ties.EPS for _, low, high in want.values()), (
                ranked, scores, gold, k)
        else:
            kept += 1
        full = {ties.metric_key(name, k): r._asdict() for name, r in tie_ranges(
            ranked, scores, gold, k, protocol=protocol, rankable=pool,
            corpus_ids=ranked).items() if r.sensitive}
        got = ties.pair_ties({k: (ranked, scores)}, gold, [k], protocol=protocol,
                             rankable=pool, corpus_ids=ranked)
        assert got == {"sensitive": full}
    assert skipped > 100 and kept > 50, (skipped, kept)
    # a block of gold alone matters when it repeats an id: a cut at 2 holds 1 or 2 of them
    ranked, scores, gold = ["a", "a", "b", "c"], [1.0, 1.0, 1.0, 0.0], ["a", "b"]
    want = _brute(ranked, scores, gold, 2, "longmemeval", ranked, ranked)
    assert any(high - low > ties.EPS for _, low, high in want.values())
    assert ties.order_matters(ranked, scores, gold, 2)
    assert not ties.order_matters(["a", "b", "c"], [1.0, 1.0, 0.0], ["a", "b"], 1)


def test_tie_blocks_stop_keeps_the_blocks_starting_before_it() -> None:
    rng = random.Random(3)
    for _ in range(300):
        scores = sorted((float(rng.randint(0, 3)) for _ in range(rng.randint(0, 12))),
                        reverse=True)
        whole = tie_blocks(scores)
        assert [e for _, e in whole][-1:] == ([len(scores)] if scores else [])
        assert all(scores[s] == scores[e - 1] for s, e in whole)
        for stop in range(len(scores) + 2):
            assert tie_blocks(scores, stop=stop) == [(s, e) for s, e in whole if s < stop]
