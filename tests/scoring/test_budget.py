"""recall@<B>tok and tokens@k (scoring/budget.py), each number computed by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_retrieval_eval.scoring.budget import (
    budget_fit,
    budget_key,
    budget_recall,
    gold_reach,
    is_budget_key,
    is_tokens_key,
    parse_budget_key,
    score_budget,
    tokens_at_k,
    tokens_key,
)

# Memories m1..m5 with their tokens and the sessions each covers (m3 covers two sessions).
TOKENS = [100, 250, 400, 30, 50]
COVERED = [("s1",), ("s2",), ("s3", "s4"), ("s5",), ("s6",)]


@pytest.mark.parametrize(("budget", "fits"), [
    (99, 0),      # the first memory alone passes the budget: an empty context
    (100, 1),     # exactly full: the first fits
    (349, 1),     # 100 + 250 = 350 > 349
    (350, 2),
    (749, 2),     # 750 > 749: m3 does not fit, and ends the context ...
    (779, 3),     # ... so m4 (30 tokens, 779 - 750 = 29 short of fitting) is never taken
    (780, 4),
    (10_000, 5),  # everything fits: the ranking ran out first
])
def test_budget_fit_takes_a_prefix(budget: int, fits: int) -> None:
    assert budget_fit(TOKENS, budget) == fits


def test_the_first_memory_that_does_not_fit_ends_the_context() -> None:
    # 749 tokens: m1 + m2 = 350 fit; m3 (400) does not. m4 (30) and m5 (50) would fit in the
    # 399 left, but the context is a prefix of the ranking: they are not taken.
    gold = ["s2", "s5"]
    assert budget_recall(TOKENS, COVERED, gold, 749) == 0.5  # s2 only
    assert budget_recall(TOKENS, COVERED, gold, 780) == 1.0  # m4 (s5) in at 780


def test_a_memory_of_two_sessions_covers_both() -> None:
    gold = ["s3", "s4", "s9"]  # s9 is never ranked
    assert budget_recall(TOKENS, COVERED, gold, 749) == 0.0
    assert budget_recall(TOKENS, COVERED, gold, 750) == pytest.approx(2 / 3)


def test_empty_gold_and_empty_ranking() -> None:
    assert budget_recall(TOKENS, COVERED, [], 10_000) == 0.0
    assert budget_recall([], [], ["s1"], 10_000) == 0.0


def test_tokens_at_k() -> None:
    assert tokens_at_k(TOKENS, 1) == 100
    assert tokens_at_k(TOKENS, 3) == 750
    assert tokens_at_k(TOKENS, 50) == 830  # fewer ranked than k: all of them


def test_score_budget_names_and_values() -> None:
    per_k = {1: TOKENS, 3: [5, 5, 5, 5]}  # k=3's own ranking (a limit-sensitive store)
    got = score_budget(TOKENS, COVERED, ["s1", "s6"], [100, 830], per_k)
    assert got == {"recall@100tok": 0.5, "recall@830tok": 1.0,
                   "tokens@1": 100.0, "tokens@3": 15.0}


def test_keys() -> None:
    assert budget_key(500) == "recall@500tok" and tokens_key(10) == "tokens@10"
    assert parse_budget_key("recall@500tok") == 500
    assert [parse_budget_key(k) for k in ("recall@5", "recall@tok", "ndcg@5tok",
                                          "recall@٣tok")] == [None] * 4
    assert is_budget_key("recall@8000tok") and not is_budget_key("recall@10")
    assert is_tokens_key("tokens@10") and not is_tokens_key("tokens@10tok")


def test_gold_reach_by_hand() -> None:
    # s4 is covered by m3 (running total 750), s6 by m5 (830), s9 by nothing read.
    assert gold_reach(TOKENS, COVERED, ["s4", "s6", "s9"]) == {"s4": 750, "s6": 830,
                                                                "s9": None}
    # The first memory covering a session counts, not a later one.
    assert gold_reach([5, 7], [("a",), ("a",)], ["a"]) == {"a": 5}


@given(st.lists(st.tuples(st.integers(0, 60), st.sets(st.sampled_from("abcdef"), max_size=3)),
                max_size=12),
       st.sets(st.sampled_from("abcdefg"), min_size=1, max_size=4), st.integers(0, 800))
def test_gold_reach_gives_recall_at_every_budget(memories: list[tuple[int, set[str]]],
                                                 gold: set[str], budget: int) -> None:
    # The view's curve (docs/view.md) reads recall@B off the reach: the same number as
    # budget_recall for any budget, zero-token memories and repeated sessions included.
    tokens = [t for t, _ in memories]
    covered = [sorted(c) for _, c in memories]
    reach = gold_reach(tokens, covered, gold)
    from_reach = sum(1 for r in reach.values() if r is not None and r <= budget) / len(gold)
    assert from_reach == budget_recall(tokens, covered, gold, budget)
