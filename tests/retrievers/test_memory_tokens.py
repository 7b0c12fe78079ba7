"""A ranking's memories' tokens and the budget step (retrievers/memory_tokens.py) on a
hand-made persona, counted in words so that every number is checked by hand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_retrieval_eval.data.pairs import render_session, text_key
from pytest_retrieval_eval.errors import RetrieverError
from pytest_retrieval_eval.retrievers import Memory, Persona
from pytest_retrieval_eval.retrievers.memory_tokens import (
    as_memories,
    budget_step,
    covered_sessions,
    memory_tokens,
)
from pytest_retrieval_eval.vectors.token_counts import TokenCounter, TokenCounts

TURNS = {
    "s1": [{"role": "user", "content": "I adopted a cat"},          # 5 words rendered
           {"role": "assistant", "content": "lovely"}],             # 2
    "s2": [{"role": "user", "content": "my sister lives in Oslo now"}],  # 7
    "s3": [{"role": "user", "content": "rain"}, {"role": "assistant", "content": "so wet"},
           {"role": "user", "content": "yes it is very wet"}],      # 2, 3, 6
}


def _persona(keyed: bool = True) -> Persona:
    ids = tuple(TURNS)
    texts = [render_session(TURNS[s]) for s in ids]  # 7, 7 and 11 words
    return Persona(key="p", session_ids=ids, created_at=("",) * 3,
                   vectors=np.zeros((3, 0), np.float32), texts=texts,
                   store_path=lambda: Path("/nonexistent"),
                   text_keys=tuple(text_key(t) for t in texts) if keyed else (),
                   turns=[TURNS[s] for s in ids])


class Words:
    """A tokenizer that counts words, and remembers what it was asked to count."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> int:
        self.seen.append(text)
        return len(text.split())


def _counts() -> tuple[TokenCounts, Words]:
    words = Words()
    return TokenCounts(TokenCounter({"name": "words", "library": "test"}, words), None), words


def test_session_ids_are_one_session_memories() -> None:
    assert as_memories(["s2", Memory("m", sessions=("s1",))]) == [
        Memory("s2", sessions=("s2",)), Memory("m", sessions=("s1",))]


def test_covered_sessions_in_order() -> None:
    m = Memory("m", sessions=("s3",), turns=("s1_2", "s3_1", "s2_1"))
    assert covered_sessions(m) == ("s3", "s1", "s2")


@pytest.mark.parametrize("keyed", [True, False])
def test_text_then_turns_then_sessions(keyed: bool) -> None:
    counts, words = _counts()
    memories = [
        Memory("own", sessions=("s3",), turns=("s3_1",), text="a fact of five words"),  # text
        Memory("turns", sessions=("s2",), turns=("s1_1", "s3_3")),  # turns: 5 + 6
        Memory("sessions", sessions=("s1", "s3")),                  # sessions: 7 + 11
        Memory("s2", sessions=("s2",)),                             # a session id: 7
    ]
    assert memory_tokens(memories, _persona(keyed), counts) == [5, 11, 18, 7]
    # A turn is rendered as the turn granularity renders it.
    assert "user: yes it is very wet" in words.seen


def test_each_text_counted_once() -> None:
    counts, words = _counts()
    persona = _persona()
    memory_tokens([Memory("a", sessions=("s1",)), Memory("b", sessions=("s1", "s2"))],
                  persona, counts)
    memory_tokens([Memory("s1", sessions=("s1",))], persona, counts)
    assert sorted(words.seen) == sorted([persona.texts[0], persona.texts[1]])


def test_turn_granularity_rows_are_turns() -> None:
    # Under turn granularity the persona's rows are turns: a turn memory's text is its row.
    counts, _ = _counts()
    persona = Persona(key="t", session_ids=("s1_1", "s1_2"), created_at=("", ""),
                      vectors=np.zeros((2, 0), np.float32),
                      texts=["user: I adopted a cat", "assistant: lovely"],
                      store_path=lambda: Path("/nonexistent"))
    assert memory_tokens([Memory("m", turns=("s1_2", "s1_1"))], persona, counts) == [7]
    assert memory_tokens(as_memories(["s1_1"]), persona, counts) == [5]


@pytest.mark.parametrize("turn", ["s1_3", "s1_0", "s9_1", "s1_x"])
def test_a_turn_the_persona_lacks_is_one_line(turn: str) -> None:
    counts, _ = _counts()
    with pytest.raises(RetrieverError, match=f"turn {turn!r} is no turn") as caught:
        memory_tokens([Memory("m", turns=(turn,))], _persona(), counts)
    assert "\n" not in str(caught.value)


def test_budget_step_by_hand() -> None:
    counts, _ = _counts()
    # Session ranking s3 (11 words), s1 (7), s2 (7); gold s1 and s2.
    ranking = ["s3", "s1", "s2"]
    metrics, facts = budget_step(ranking, {1: ranking, 3: ranking}, _persona(), ["s1", "s2"],
                                 [10, 18, 24, 25], counts)
    assert metrics == {
        "recall@10tok": 0.0,   # s3 alone (11) passes 10: an empty context
        "recall@18tok": 0.5,   # 11 + 7 = 18: s3, s1
        "recall@24tok": 0.5,   # s2 would make 25
        "recall@25tok": 1.0,
        "tokens@1": 11.0, "tokens@3": 25.0,
    }
    assert facts == {"tokens": [11, 7, 7], "fit": {"10": 0, "18": 2, "24": 2, "25": 3},
                     "held": {"10": 0, "18": 18, "24": 18, "25": 25},
                     "ended": {"10": "budget", "18": "budget", "24": "budget",
                               "25": "ranking"}, "read": 3, "reread": False,
                     "reach": {"s1": 18, "s2": 25}, "read_tokens": 25}


def test_budget_step_per_k_rankings() -> None:
    # A limit-sensitive store ranks k=1 on its own: tokens@1 counts that ranking's first.
    counts, _ = _counts()
    metrics, _ = budget_step(["s3", "s1"], {1: ["s2"], 2: ["s3", "s1"]}, _persona(), ["s2"],
                             [100], counts)
    assert metrics == {"recall@100tok": 0.0, "tokens@1": 7.0, "tokens@2": 18.0}


def test_budget_step_ks_sharing_one_ranking() -> None:
    # Cut-offs of one call share its list (rank_per_k): each k still counts its own first k.
    counts, _ = _counts()
    pool = ["s1", "s3"]  # the k=1 and k=2 call (one pool of a limit-sensitive store)
    metrics, _ = budget_step(["s3", "s1", "s2"], {1: pool, 2: pool, 3: ["s3", "s1", "s2"]},
                             _persona(), ["s2"], [100], counts)
    assert (metrics["tokens@1"], metrics["tokens@2"], metrics["tokens@3"]) == (7.0, 18.0, 25.0)


def test_budget_step_reads_on_past_k() -> None:
    # k = 1 asked for one session (11 words); a budget of 25 wants more: the store is read
    # again to the persona's size, once, and the context takes s3, s1, s2.
    counts, _ = _counts()
    reads: list[int] = []

    def more() -> list[str]:
        reads.append(1)
        return ["s3", "s1", "s2"]

    metrics, facts = budget_step(["s3"], {1: ["s3"]}, _persona(), ["s2"], [11, 25], counts,
                                 more=more)
    assert reads == [1]
    assert metrics == {"recall@11tok": 0.0, "recall@25tok": 1.0, "tokens@1": 11.0}
    assert facts["read"] == 3 and facts["reread"] is True
    assert facts["fit"] == {"11": 1, "25": 3} and facts["tokens"] == [11]
    # Filled already (11 >= the largest budget), or the store ran out (fewer than k): no read.
    for ranking, ks, budgets in ((["s3"], [1], [11]), (["s3"], [2], [25])):
        budget_step(ranking, {k: ranking for k in ks}, _persona(), ["s2"], budgets, counts,
                    more=lambda: pytest.fail("read again"))


def _six_memories() -> tuple[list[Memory], list[int], Callable[[int], list[Memory]]]:
    """Six turn memories (6 5 7 2 2 3 tokens in :func:`_counts`), the sizes a ``first`` read
    was asked for, and that read."""
    ranking = [Memory(f"{s}_{n}", turns=(f"{s}_{n}",)) for s, n in
               (("s3", 3), ("s1", 1), ("s2", 1), ("s3", 1), ("s1", 2), ("s3", 2))]
    asked: list[int] = []

    def first(size: int) -> list[Memory]:
        asked.append(size)
        return ranking[:size]

    return ranking, asked, first


def _whole_and_first(ranking: Any, asked: list[int], first: Any, budgets: list[int],
                     cap: int) -> tuple[Any, Any, Any]:
    """The budget step of one memory's context read further two ways: the whole ranking
    (``more``) and ``first``'s growing reads up to ``cap`` (``asked`` records their sizes);
    and the counter of the second."""
    counts, _ = _counts()
    whole = budget_step(ranking[:1], {1: ranking[:1]}, _persona(), ["s2"], budgets, counts,
                        more=lambda: ranking)
    asked.clear()
    counts, words = _counts()
    grown = budget_step(ranking[:1], {1: ranking[:1]}, _persona(), ["s2"], budgets, counts,
                        first=first, cap=cap)
    return whole, grown, words


def test_a_growing_read_stops_where_the_largest_budget_is_spent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44: with ``first`` (a turn what-if's first memories), the longer read grows
    until it passes the largest budget and is counted only that far: the same metrics, fit,
    held and ended as the whole ranking read and counted, fewer memories read. The reads'
    sizes here: 2, then twice the last, up to ``cap`` (6)."""
    from pytest_retrieval_eval.retrievers import memory_tokens as mt

    monkeypatch.setattr(mt, "_first_size", lambda tokens, top, cap: 2)
    monkeypatch.setattr(mt, "_next_size",
                        lambda limit, held, top, cap: None if limit >= cap else min(cap, 2 * limit))
    ranking, asked, first = _six_memories()

    for budgets in ([6, 12], [6, 19], [6, 100]):
        whole, grown, words = _whole_and_first(ranking, asked, first, budgets, 6)
        assert grown[0] == whole[0]
        for fact in ("fit", "held", "ended", "tokens", "reread"):
            assert grown[1][fact] == whole[1][fact], fact
        spent = {12: 3, 19: 4, 100: 6}[budgets[-1]]  # memories up to the first past it
        assert grown[1]["read"] == spent
        assert asked == [2, 4, 6][:{12: 2, 19: 2, 100: 3}[budgets[-1]]]
        assert len(words.seen) == len(set(words.seen))  # each text counted once


def test_a_read_sized_from_the_tokens_a_memory_counts_the_same() -> None:
    """Issue 44: the longer read's sizes chosen as the reads go (``cap``): the first from
    the context's tokens a memory, the next from those read; the same metrics and facts as
    the whole ranking read, and no read past ``cap`` or after the ranking ran out."""
    from pytest_retrieval_eval.retrievers import memory_tokens as mt

    ranking, asked, first = _six_memories()

    for budgets, cap in (([6, 12], 6), ([6, 19], 6), ([6, 100], 6), ([6, 100], 40)):
        whole, sized, _ = _whole_and_first(ranking, asked, first, budgets, cap)
        assert sized[0] == whole[0]
        for fact in ("fit", "held", "ended", "tokens", "reread", "read"):
            assert sized[1][fact] == whole[1][fact], fact
        assert asked and all(size <= cap for size in asked)
        assert asked == sorted(set(asked))  # each read longer than the last
    # The sizes: from the tokens a memory, with slack, at least _MIN_READ, at most cap; each
    # next at least twice the last, None once cap was read.
    assert mt._first_size([10, 30], 8000, 10_000) == 500  # 20 a memory: 400, x 1.25
    assert mt._first_size([10, 30], 800, 10_000) == mt._MIN_READ
    assert mt._first_size([10, 30], 8000, 300) == 300
    assert mt._next_size(500, 7000, 8000, 10_000) == 1000  # 14 a memory: 715 < 2 x 500
    assert mt._next_size(500, 1000, 8000, 10_000) == 5000  # 2 a memory: 4000, x 1.25
    assert mt._next_size(500, 1000, 8000, 3000) == 3000
    assert mt._next_size(3000, 1000, 8000, 3000) is None


def test_a_turn_memory_made_fast_is_the_dataclasss_own() -> None:
    """units._turn_memory (a budget's longer read, issue 44) makes the Memory the dataclass
    makes: the same fields, equal, same hash, frozen."""
    import dataclasses

    from pytest_retrieval_eval.retrievers.units import _turn_memory

    fast, slow = _turn_memory("s1_2", 0.5), Memory(id="s1_2", score=0.5, turns=("s1_2",))
    assert set(vars(fast)) == {f.name for f in dataclasses.fields(Memory)}
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.id = "x"  # type: ignore[misc]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.booleans(), max_size=5), min_size=1, max_size=5),
       st.lists(st.text("s_129x", max_size=6), max_size=4))
def test_a_turn_ids_row_is_the_one_holding_that_id(blanks: list[list[bool]],
                                                   strangers: list[str]) -> None:
    """A budget finds a turn memory's row from its session's first row and its number
    (issue 44): for sessions with blank turns anywhere (no row of theirs), every turn id
    gets the row holding that id (rows_by_id's), and an id no row holds gets None."""
    from pytest_retrieval_eval.retrievers.base import rows_by_id
    from pytest_retrieval_eval.retrievers.memory_tokens import _TurnKeys

    sessions = tuple(f"s{i}" for i in range(len(blanks)))
    rows = [(s, n) for s, own in enumerate(blanks) for n, blank in enumerate(own, 1)
            if not blank]
    ids = tuple(f"{sessions[s]}_{n}" for s, n in rows)
    turns = Persona(key="t", session_ids=ids, created_at=("",) * len(ids),
                    vectors=np.zeros((len(ids), 0), np.float32), texts=list(ids),
                    store_path=lambda: Path("/nonexistent"), text_keys=ids,
                    row_sessions=np.asarray([s for s, _ in rows], dtype=np.int32))

    def turn_rows(vectors: bool = True) -> Persona:
        return turns

    persona = Persona(key="p", session_ids=sessions, created_at=("",) * len(sessions),
                      vectors=np.zeros((len(sessions), 0), np.float32),
                      texts=[""] * len(sessions), store_path=lambda: Path("/nonexistent"),
                      turn_rows=turn_rows)
    keys = _TurnKeys(persona)
    expected = rows_by_id(ids)
    for turn_id in ids:
        assert keys.row(turn_id) == expected[turn_id]
        assert keys.key(turn_id) == turn_id
    for name in [*strangers, "s0_0", "s0_9", "s9_1", "s0_01", "s0_x"]:
        if name not in expected:
            assert keys.row(name) is None
