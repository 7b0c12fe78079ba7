"""A persona's sessions' turns (``TurnLists``, issue 44): one session read alone where one is
asked, every session at once where all are; turn counts answered from the kept rows without
reading any turn."""

from __future__ import annotations

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
