"""A persona's sessions' turns (``TurnLists``, issue 44): one session read alone where one is
asked, every session at once where all are; turn counts answered from the kept rows without
reading any turn."""

from __future__ import annotations

import numpy as np

from pytest_retrieval_eval.retrievers.base import TurnLists

TURNS = [[{"role": "user", "content": "a"}], [], [{"role": "user", "content": "b"},
                                                  {"role": "assistant", "content": "c"}]]


def _lists() -> tuple[TurnLists, list[str]]:
    calls: list[str] = []

    def every() -> list[list[dict[str, str]]]:
        calls.append("all")
        return TURNS

    def one(row: int) -> list[dict[str, str]]:
        calls.append(f"row {row}")
        return TURNS[row]

    return TurnLists(every, one, len(TURNS)), calls


def test_one_session_is_read_alone_and_kept() -> None:
    turns, calls = _lists()
    assert len(turns) == 3 and turns[2] == TURNS[2] and turns[-1] == TURNS[2]
    assert calls == ["row 2"]
    assert list(turns) == TURNS and calls == ["row 2", "all"]  # iterating reads all at once
    assert turns[0] == TURNS[0] and calls == ["row 2", "all"]


def test_counts_answer_without_reading() -> None:
    turns, calls = _lists()
    turns.counts = [1, 0, 2]
    assert [turns.count(i) for i in range(3)] == [1, 0, 2] and calls == []
    turns.counts = None
    assert turns.count(2) == 2 and calls == ["row 2"]


def test_of_keys_reads_the_sessions_asked_even_once_all_were_read() -> None:
    turns = TurnLists(lambda: TURNS, None, len(TURNS),
                      lambda keys: [TURNS[int(k)] for k in keys])
    assert list(turns) == TURNS  # every session read (a store iterating them)
    assert turns.of_keys(["2", "0"]) == [TURNS[2], TURNS[0]]


def test_prefetch_reads_the_sessions_asked_at_once() -> None:
    """The explain excerpts of a pair's memories: their sessions read in one go, then
    served one by one without another read; rows read already or out of range are not
    asked again."""
    calls: list[object] = []

    def some(rows: list[int]) -> list[list[dict[str, str]]]:
        calls.append(list(rows))
        return [TURNS[r] for r in rows]

    def every() -> list[list[dict[str, str]]]:
        calls.append("all")
        return TURNS

    def one(row: int) -> list[dict[str, str]]:
        calls.append(row)
        return TURNS[row]

    turns = TurnLists(every, one, len(TURNS), None, some)
    assert turns[2] == TURNS[2] and calls == [2]
    turns.prefetch([0, 2, 0, 7, 1])
    assert calls == [2, [0, 1]]
    assert [turns[i] for i in range(3)] == TURNS and calls == [2, [0, 1]]
    turns.prefetch([1])
    assert calls == [2, [0, 1]]


def test_a_pairs_excerpts_read_their_sessions_once(tmp_path: object) -> None:
    """describe_record reads the sessions its turn memories stand for in one read."""
    from pytest_retrieval_eval.retrievers.base import Memory, Persona
    from pytest_retrieval_eval.retrievers.memory_tokens import describe_record

    asked: list[list[int]] = []

    def some(rows: list[int]) -> list[list[dict[str, str]]]:
        asked.append(list(rows))
        return [TURNS[r] for r in rows]

    def one(row: int) -> list[dict[str, str]]:
        raise AssertionError("read one by one")

    persona = Persona(key="p", session_ids=("s0", "s1", "s2"), created_at=("", "", ""),
                      vectors=np.zeros((3, 0), dtype=np.float32), texts=["", "", ""],
                      store_path=lambda: tmp_path,  # type: ignore[arg-type,return-value]
                      turns=TurnLists(lambda: TURNS, one, len(TURNS), None, some))
    memories = [Memory(id="m1", turns=("s2_2",)), Memory(id="m2", turns=("s0_1", "s2_1"))]
    record: list[dict[str, object]] = [{"rank": 1}, {"rank": 2}]
    describe_record(record, memories, persona, None)
    assert asked == [[2, 0]]
    assert record[0]["excerpt"] == "assistant: c" and record[1]["excerpt"] == "user: a user: b"


def test_rendered_turns_come_from_the_store_until_the_turns_are_read() -> None:
    """``rendered(rows)``: each turn as ``render_session`` renders one, made by ``rendered``
    (the corpus's stored texts) while the turns are not read, from the read turns after; the
    same either way, for some sessions or all."""
    from pytest_retrieval_eval.data.pairs import render_session

    asked: list[list[int]] = []
    expected = [[render_session([t]) for t in turns] for turns in TURNS]

    def rendered(rows: list[int]) -> list[list[str]]:
        asked.append(rows)
        return [expected[r] for r in rows]

    turns = TurnLists(lambda: TURNS, size=len(TURNS), rendered=rendered)  # as a persona has
    assert turns.rendered([2, 0]) == [expected[2], expected[0]] and asked == [[2, 0]]
    assert turns.rendered() == expected and asked[1:] == [[0, 1, 2]]
    assert turns.rendered([]) == [] and len(asked) == 2
    turns.every()  # read: rendered from the turns themselves
    assert turns.rendered([2, 0]) == [expected[2], expected[0]] and len(asked) == 2
    assert TurnLists(lambda: TURNS).rendered() == expected  # no store to ask
