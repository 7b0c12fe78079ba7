"""A session as one document with each turn's span: a chunk's turns are exactly those whose
characters it holds (hypothesis over turns and chunk bounds), and memories are read until
they cover ``limit`` sessions and number ``limit``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_retrieval_eval.adapters.sessions import _document, until_covered
from pytest_retrieval_eval.data.pairs import render_session
from pytest_retrieval_eval.retrievers.base import Memory

TURNS = st.lists(st.fixed_dictionaries({
    "role": st.sampled_from(["user", "assistant"]),
    "content": st.text(st.sampled_from("ab \n."), max_size=12)}), min_size=1, max_size=6)


@given(TURNS, st.data())
def test_a_chunks_turns_are_those_whose_characters_it_holds(turns: list[dict[str, str]],
                                                             data: st.DataObject) -> None:
    doc = _document("s", "", turns)
    assert doc.text == render_session(turns)
    for n, (a, b) in enumerate(doc.spans):
        assert doc.text[a:b] == f"{turns[n]['role']}: {turns[n]['content']}"
    start = data.draw(st.integers(0, len(doc.text) - 1))
    end = data.draw(st.integers(start + 1, len(doc.text)))
    held = [n for n, (a, b) in enumerate(doc.spans, start=1)
            if any(a <= i < b for i in range(start, end))]
    if not held:  # separators only (a newline): the turn it begins after
        held = [max([n for n, (a, _) in enumerate(doc.spans, start=1) if a <= start],
                    default=1)]
    assert doc.turns(start, end) == tuple(f"s_{n}" for n in held)


def test_memories_are_read_until_limit_sessions_and_limit_memories() -> None:
    ms = [Memory("a1", 1.0, ("a",)), Memory("a2", 0.9, ("a",)), Memory("b1", 0.8, ("b",)),
          Memory("c1", 0.7, ("c",)), Memory("b2", 0.6, ("b",))]
    assert [m.id for m in until_covered(ms, 2)] == ["a1", "a2", "b1"]
    assert [m.id for m in until_covered(ms, 1)] == ["a1"]
    assert [m.id for m in until_covered(ms, 9)] == [m.id for m in ms]
