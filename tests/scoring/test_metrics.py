"""Metrics against rankings worked out by hand."""

from __future__ import annotations

import math

import pytest

from pytest_retrieval_eval.scoring.metrics import (
    dedupe,
    mean_metrics,
    ndcg_any,
    recall,
    recall_all,
    recall_any,
    score_ranking,
)

RANKED = ["s3", "s1", "s7", "s2", "s9"]


@pytest.mark.parametrize(
    ("gold", "k", "expected"),
    [
        (["s1"], 1, 0.0),
        (["s1"], 2, 1.0),
        (["s1", "s2"], 2, 0.5),
        (["s1", "s2"], 4, 1.0),
        (["s1", "s2", "s4"], 5, 2 / 3),  # s4 never ranked
        (["s3"], 10, 1.0),  # k beyond the ranking
    ],
)
def test_recall_is_fraction_of_gold_in_top_k(gold: list[str], k: int, expected: float) -> None:
    assert recall(RANKED, gold, k) == pytest.approx(expected)


def test_recall_any_and_all_indicators() -> None:
    gold = ["s1", "s2"]
    assert [recall_any(RANKED, gold, k) for k in (1, 2, 4)] == [0.0, 1.0, 1.0]
    assert [recall_all(RANKED, gold, k) for k in (1, 2, 4)] == [0.0, 0.0, 1.0]


def test_empty_gold_scores_zero_not_one() -> None:
    assert recall(RANKED, [], 5) == 0.0
    assert recall_all(RANKED, [], 5) == 0.0
    assert recall_any(RANKED, [], 5) == 0.0


def test_ndcg_any_hand_worked() -> None:
    # gold s1 at rank 2, s2 at rank 4; k=5.
    # DCG = 0 + 1/log2(2) + 0 + 1/log2(4) + 0 = 1 + 0.5 = 1.5
    # ideal: rel 1,1 -> 1 + 1/log2(2) = 2
    assert ndcg_any(RANKED, ["s1", "s2"], 5) == pytest.approx(1.5 / 2.0)
    # rank 1 counts fully (LongMemEval's DCG has no discount at rank 1)
    assert ndcg_any(RANKED, ["s3"], 1) == pytest.approx(1.0)
    # gold at rank 3 alone: 1/log2(3) over ideal 1
    assert ndcg_any(RANKED, ["s7"], 5) == pytest.approx(1 / math.log2(3))
    assert ndcg_any(RANKED, ["zz"], 5) == 0.0


def test_ndcg_ideal_is_cut_at_k() -> None:
    # three gold, k=2: ideal = 1 + 1/log2(2) = 2; actual: s3 at 1 (gold), s1 at 2 (gold) -> 2
    assert ndcg_any(RANKED, ["s3", "s1", "s9"], 2) == pytest.approx(1.0)


def test_rankings_are_deduplicated_before_the_cut() -> None:
    ranked = ["a", "a", "a", "b", "c"]
    assert dedupe(ranked) == ["a", "b", "c"]
    assert recall(ranked, ["b"], 2) == 1.0  # without dedup b would sit at rank 4
    assert recall_all(ranked, ["a", "c"], 3) == 1.0


def test_score_ranking_keys_and_unrankable_gold() -> None:
    scores = score_ranking(["x", "g1"], ["g1", "gone"], (1, 2), rankable={"x", "g1"})
    assert set(scores) == {f"{m}@{k}" for m in ("recall", "recall_any", "recall_all",
                                                  "ndcg_any") for k in (1, 2)}
    assert scores["recall@2"] == 0.5  # the gold id outside the haystack counts against recall
    assert scores["recall_all@2"] == 0.0
    # ...but not against nDCG's ideal: one rankable gold at rank 2 -> (1/log2 2) / 1
    assert scores["ndcg_any@2"] == pytest.approx(1.0)


def test_mean_metrics_is_macro_average() -> None:
    assert mean_metrics([{"recall@1": 1.0}, {"recall@1": 0.0}, {"recall@1": 0.5}]) == {
        "recall@1": pytest.approx(0.5)
    }
    assert mean_metrics([]) == {}
