"""scoring/memory_metrics.py against hand computations, and the derived session ranking's
metrics against LongMemEval's turn2session rule (``evaluate_retrieval_turn2session``,
``src/retrieval/eval_utils.py`` lines 32-46 of xiaowu0162/LongMemEval at 9e0b455)."""

from __future__ import annotations

import math

import pytest

from pytest_retrieval_eval.scoring import longmemeval_metrics as lme
from pytest_retrieval_eval.scoring.memory_metrics import (
    covered_sessions,
    memory_metrics,
    memory_recall,
    session_ranking,
    turn_recall,
)
from pytest_retrieval_eval.scoring.metrics import score_ranking

# A hand-made ranking of four memories over sessions s_1 .. s_4 (ids with "_" in them, as
# LongMemEval's are); gold sessions s_2 and s_4, whose has_answer turns are s_2_3 and s_4_1.
MEMORIES = [
    ((), ("s_3_1",)),               # m1: a turn of s_3
    (("s_1",), ("s_2_3",)),         # m2: a fact from s_1 and a turn of s_2 (gold turn)
    ((), ("s_3_2",)),               # m3: s_3 again
    (("s_4", "s_1"), ()),           # m4: a summary of s_4 and s_1
]
GOLD = ("s_2", "s_4")
GOLD_TURNS = ("s_2_3", "s_4_1")


def test_covered_sessions_lists_sessions_then_turns_once() -> None:
    assert covered_sessions(("s_1",), ("s_2_3", "s_1_2", "s_2_1")) == ("s_1", "s_2")
    assert covered_sessions((), ("a_b_c_7",)) == ("a_b_c",)


def test_the_derived_ranking_and_its_metrics_by_hand() -> None:
    covered = [covered_sessions(s, t) for s, t in MEMORIES]
    ranking = session_ranking(covered)
    assert ranking == ["s_3", "s_1", "s_2", "s_4"]  # each at its first memory
    got = score_ranking(ranking, GOLD, (1, 2, 3, 4), rankable=set(ranking))
    # recall@k on the first k distinct sessions: {s_3}, {s_3,s_1}, {+s_2}, {+s_4}
    assert [got[f"recall@{k}"] for k in (1, 2, 3, 4)] == [0.0, 0.0, 0.5, 1.0]
    assert [got[f"recall_any@{k}"] for k in (1, 2, 3, 4)] == [0.0, 0.0, 1.0, 1.0]
    assert [got[f"recall_all@{k}"] for k in (1, 2, 3, 4)] == [0.0, 0.0, 0.0, 1.0]
    # ndcg_any@3: DCG = 1/log2(3) (s_2 at rank 3); ideal of 2 gold = 1 + 1/log2(2) = 2
    assert got["ndcg_any@3"] == pytest.approx((1 / math.log2(3)) / 2.0)
    assert got["ndcg_any@4"] == pytest.approx((1 / math.log2(3) + 1 / 2.0) / 2.0)


def test_memory_and_turn_recall_by_hand() -> None:
    covered = [covered_sessions(s, t) for s, t in MEMORIES]
    # first k memories cover: {s_3}, {s_3,s_1,s_2}, same, {+s_4}
    assert [memory_recall(covered, GOLD, k) for k in (1, 2, 3, 4)] == [0.0, 0.5, 0.5, 1.0]
    turns = [t for _, t in MEMORIES]
    # turns of the first k memories: {s_3_1}, {+s_2_3}, {+s_3_2}, same (m4 holds none)
    assert [turn_recall(turns, GOLD_TURNS, k) for k in (1, 2, 3, 4)] == [0.0, 0.5, 0.5, 0.5]
    assert memory_metrics(MEMORIES, GOLD, (2, 4), GOLD_TURNS) == {
        "memory_recall@2": 0.5, "turn_recall@2": 0.5,
        "memory_recall@4": 1.0, "turn_recall@4": 0.5}
    # memories without turns (or no known gold turns) give no turn_recall
    assert memory_metrics([(("s_2",), ())], GOLD, (1,), GOLD_TURNS) == {"memory_recall@1": 0.5}
    assert memory_metrics(MEMORIES, GOLD, (1,), ()) == {"memory_recall@1": 0.0}
    assert memory_recall(covered, (), 4) == 0.0 and turn_recall(turns, (), 4) == 0.0


def test_one_session_memories_give_recall() -> None:
    ranked = ["a", "b", "c", "d"]
    covered = [(s,) for s in ranked]
    got = score_ranking(ranked, ("b", "d"), (1, 2, 3), rankable=set(ranked))
    for k in (1, 2, 3):
        assert memory_recall(covered, ("b", "d"), k) == got[f"recall@{k}"]


# Turn ids in rank order: the corpus of the turn granularity is every turn, and LongMemEval's
# turn2session grows k until the first k' positions hold k distinct sessions.
TURN_CORPUS = ["s_1_1", "s_1_2", "s_2_1", "s_2_2", "s_2_3", "s_3_1", "s_3_2", "s_4_1"]
TURN_RANKING = ["s_3_1", "s_3_2", "s_1_2", "s_3_1x", "s_2_3", "s_1_1", "s_4_1", "s_2_1"]


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_recall_any_and_all_of_turn_memories_are_turn2sessions(k: int) -> None:
    ranking = [t for t in TURN_RANKING if t in TURN_CORPUS]  # every position a corpus turn
    ranking += [t for t in TURN_CORPUS if t not in ranking]
    derived = session_ranking([covered_sessions((), (t,)) for t in ranking])
    ours = score_ranking(derived, GOLD, (k,), rankable=set(derived))
    upstream = lme.evaluate_turn2session(ranking, GOLD_TURNS, TURN_CORPUS, k)
    assert (ours[f"recall_any@{k}"], ours[f"recall_all@{k}"]) == upstream[:2]
    # and by hand: the first k distinct sessions of s_3, s_3, s_1, s_2, s_1, s_4, s_2 ...
    first_k = ["s_3", "s_1", "s_2", "s_4"][:k]
    assert ours[f"recall@{k}"] == len(set(GOLD) & set(first_k)) / 2


def test_a_metric_some_pairs_lack_is_averaged_over_those_holding_it() -> None:
    from pytest_retrieval_eval.scoring.metrics import mean_metrics

    rows = [{"recall@1": 1.0, "turn_recall@1": 0.5}, {"recall@1": 0.0}]
    assert mean_metrics(rows) == {"recall@1": 0.5, "turn_recall@1": 0.5}
