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
    score_rankings,
    session_recall,
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


def test_score_rankings_scores_each_cut_off_on_its_own_ranking() -> None:
    """A limit-sensitive search ranks differently per limit: k 1 is scored on the ranking
    asked for 1 row, k 3 on the one asked for 3, never one ranking cut twice."""
    rankings = {1: ["s2"], 3: ["s1", "s9", "s2"]}
    got = score_rankings(rankings, ["s1"], (1, 3), {"s1", "s2", "s9"})
    assert got["recall@1"] == 0.0  # ["s2"]: s1 is not there (the k-3 ranking would say 1.0)
    assert got["recall@3"] == 1.0 and got["ndcg_any@3"] == 1.0
    assert set(got) == {f"{m}@{k}" for m in ("recall", "recall_any", "recall_all", "ndcg_any")
                        for k in (1, 3)}


def test_session_recall_counts_gold_sessions_with_a_turn_in_the_top_k() -> None:
    """Turn ids are ``<session>_<n>``; worked by hand: gold turns of sessions a_x and b_y, top
    3 turns hold two turns of a_x and one of c, so 1 of 2 gold sessions at k 3, both at 4."""
    turns = ["a_x_2", "c_1", "a_x_1", "b_y_4", "b_y_1"]
    gold = ["a_x_1", "b_y_1", "b_y_4"]
    got = session_recall({1: turns, 3: turns, 4: turns}, gold, (1, 3, 4))
    assert got == {"session_recall@1": 0.5, "session_recall@3": 0.5, "session_recall@4": 1.0}
    assert session_recall({2: ["c_1", "d_1"]}, gold, (2,)) == {"session_recall@2": 0.0}
    # the top k of each cut-off's own ranking, not of one shared list
    assert session_recall({1: ["c_1"], 2: ["b_y_9", "c_1"]}, ["b_y_1"], (1, 2)) == {
        "session_recall@1": 0.0, "session_recall@2": 1.0}
