"""retrievers/memories.py and the memory path of ranking.rank_per_k: reading to ``limit``
covered sessions, provenance checks in one line, the derived ranking and its scores, the
cmd: JSON form, and the bounded record."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.errors import RetrieverError
from pytest_retrieval_eval.retrievers import Memory, Persona, Query
from pytest_retrieval_eval.retrievers.memories import (
    MAX_RECORDED_TEXT,
    memories_from_json,
    memory_record,
    pair_memory_metrics,
    read_memories,
    session_ranking,
    session_scores,
)
from pytest_retrieval_eval.retrievers.ranked_output import read_distinct
from pytest_retrieval_eval.retrievers.ranking import rank_all, rank_per_k

SESSIONS = ("s_1", "s_2", "s_3", "s_4")
TURNS = {"s_1": 4, "s_2": 3, "s_3": 2, "s_4": 1}


def persona() -> Persona:
    turns = [[{"role": "user", "content": f"{sid} turn {n}"} for n in range(1, TURNS[sid] + 1)]
             for sid in SESSIONS]
    return Persona(key="p", session_ids=SESSIONS, created_at=("",) * 4,
                   vectors=np.zeros((4, 2), dtype=np.float32), texts=["t"] * 4,
                   store_path=lambda: Path("/nonexistent"), turns=turns)


def query() -> Query:
    return Query("q1", "single-session-user", "what?", "", None, ("s_2", "s_4"))


class Store:
    name = "store"

    def __init__(self, items: object) -> None:
        self.items = items
        self.limits: list[int] = []

    def rank(self, persona: object, query: object, limit: int) -> object:
        self.limits.append(limit)
        return self.items


def test_memories_are_read_until_they_cover_limit_sessions_never_limit_memories() -> None:
    consumed: list[str] = []

    def endless() -> Iterator[Memory]:
        for n in itertools.count(1):
            sid = SESSIONS[min(n // 3, 3)]  # three memories of s_1, then s_2, ...
            tid = f"{sid}_1"
            consumed.append(tid)
            yield Memory(f"m{n}", turns=(tid,))

    memories: dict[int, list[Memory]] = {}
    rankings, _ = rank_per_k(Store(endless()), persona(), query(), [2], {},  # type: ignore[arg-type]
                             memories=memories)
    # m1, m2 cover s_1; m3..m5 s_2: read stops at the 2nd session, not at 2 memories
    assert rankings[2] == ["s_1", "s_2"]
    assert [m.id for m in memories[2]] == ["m1", "m2", "m3"]
    assert len(consumed) == 3


def test_memories_of_several_sessions_are_read_until_they_number_limit_too() -> None:
    # m1 covers s_1 and s_3, m2 s_4, m3 s_2; gold s_2 and s_4. m1 and m2 cover 3 sessions,
    # but memory_recall@3 is over the first 3 memories: m3 is read too, and nothing past it.
    consumed: list[str] = []

    def items() -> Iterator[Memory]:
        for memory in [Memory("m1", sessions=("s_1", "s_3")), Memory("m2", sessions=("s_4",)),
                       Memory("m3", sessions=("s_2",)), Memory("m4", sessions=("s_2",))]:
            consumed.append(memory.id)
            yield memory

    memories: dict[int, list[Memory]] = {}
    rankings, _ = rank_per_k(Store(items()), persona(), query(), [2, 3], {},  # type: ignore[arg-type]
                             memories=memories)
    assert consumed == ["m1", "m2", "m3"]
    assert [m.id for m in memories[3]] == ["m1", "m2", "m3"]
    # the session metrics read the first 3 distinct sessions of s_1, s_3, s_4, s_2
    assert rankings[3] == rankings[2] == ["s_1", "s_3", "s_4"]
    # by hand: gold covered by [m1, m2] = {s_4}; by [m1, m2, m3] = {s_4, s_2}
    assert pair_memory_metrics(memories, ("s_2", "s_4"), [2, 3]) == {
        "memory_recall@2": 0.5, "memory_recall@3": 1.0}
    # session ids (and pairs) are read to the limit-th distinct id, as before
    ids = ["s_1", "s_1", "s_2", "s_3", "s_4"]
    assert read_distinct(iter(ids), "store", "q1", 2, 4) == ["s_1", "s_1", "s_2"]
    assert read_distinct(iter([("s_1", 1.0), ("s_2", 0.5), ("s_3", 0.1)]), "store", "q1", 2,
                         4) == [("s_1", 1.0), ("s_2", 0.5)]


def test_the_derived_ranking_and_its_scores() -> None:
    items = [Memory("a", 0.9, turns=("s_3_1",)), Memory("b", 0.8, ("s_1",), ("s_2_3",)),
             Memory("c", 0.7, turns=("s_3_2",)), Memory("d", 0.5, ("s_4", "s_1"))]
    got = read_memories(items, persona(), "store", "q1")
    assert session_ranking(got) == ["s_3", "s_1", "s_2", "s_4"]
    assert session_scores(got) == [0.9, 0.8, 0.8, 0.5]  # s_1 and s_2 tie: one memory
    memories: dict[int, list[Memory]] = {}
    scored: dict[int, object] = {}
    rankings, _ = rank_per_k(Store(items), persona(), query(), [1, 3], scored,  # type: ignore[arg-type]
                             memories=memories)
    # one call at the largest k: a and b cover its 3 sessions, c makes 3 memories (the
    # first 3 memories are memory_recall@3's), so d is never read
    assert rankings[3] == rankings[1] == ["s_3", "s_1", "s_2"]
    assert memories[3] == memories[1] == got[:3]
    assert scored[3] == (["s_3", "s_1", "s_2"], [0.9, 0.8, 0.8])


def test_ids_pairs_and_plain_memories_mix_and_stay_session_rankings() -> None:
    got = read_memories(["s_2", Memory("s_1", None, ("s_1",)), Memory("m", turns=("s_4_1",))],
                        persona(),
                        "store", "q1")
    assert [(m.id, m.sessions, m.turns) for m in got] == [
        ("s_2", ("s_2",), ()), ("s_1", ("s_1",), ()), ("m", (), ("s_4_1",))]
    memories: dict[int, list[Memory]] = {}
    rankings, _ = rank_per_k(Store([Memory("s_2", 1.0, ("s_2",)), ("s_1", 0.5)]),  # type: ignore[arg-type]
                             persona(), query(), [2], {}, memories=memories)
    assert rankings[2] == ["s_2", "s_1"] and memories == {}  # ids in disguise: no memories


@pytest.mark.parametrize(("item", "words"), [
    (Memory("m"), "memory 'm' names no session and no turn"),
    (Memory("m", sessions=("s_9",)), "memory 'm' names session 's_9', not a session"),
    (Memory("m", turns=("s_9_1",)), "memory 'm' names turn 's_9_1', not a turn"),
    (Memory("m", turns=("s_4_2",)), "memory 'm' names turn 's_4_2', not a turn"),
    (Memory("m", turns=("s_1_0",)), "memory 'm' names turn 's_1_0', not a turn"),
    (Memory("m", turns=("s_1",)), "memory 'm' names turn 's_1', not a turn"),
    (Memory("m", sessions="s_1"), "memory 'm': sessions is not a tuple of strings"),  # type: ignore[arg-type]
    (Memory("", sessions=("s_1",)), "a memory's id is ''"),
    (Memory("m", float("nan"), ("s_1",)), "memory 'm': score nan is not a finite number"),
    (Memory("m", None, ("s_1",), text=3), "memory 'm': text is int"),  # type: ignore[arg-type]
])
def test_a_bad_memory_fails_in_one_line(item: Memory, words: str) -> None:
    with pytest.raises(RetrieverError) as err:
        read_memories([Memory("ok", None, ("s_1",)), item], persona(), "store", "q1")
    message = str(err.value)
    assert "\n" not in message and message.startswith("store: question q1: ")
    assert words in message


def test_scores_are_all_or_none() -> None:
    with pytest.raises(RetrieverError, match="memory 'b' has no score while others"):
        read_memories([Memory("a", 1.0, ("s_1",)), Memory("b", None, ("s_2",))], persona(),
                      "store", "q1")


def test_memories_are_refused_in_one_line_where_the_view_scores_none() -> None:
    items = [Memory("m", turns=("s_1_1",))]
    with pytest.raises(RetrieverError, match="scored at session granularity under the vipune"):
        rank_per_k(Store(items), persona(), query(), [2], {}, memories=None)  # type: ignore[arg-type]
    with pytest.raises(RetrieverError, match="scored at session granularity"):
        rank_all(Store(items), persona(), query(), [2], 4)  # type: ignore[arg-type]


def test_cmd_memories_json() -> None:
    got = memories_from_json([{"id": "m1", "score": 2, "turns": ["s_1_2"]},
                              {"id": "m2", "sessions": ["s_2"], "text": "fact"}], "w")
    assert got == [Memory("m1", 2.0, (), ("s_1_2",)), Memory("m2", None, ("s_2",), (), "fact")]
    for bad, words in [({"memories": 1}, None), ([{"score": 1}], "memories[0] is not an object"),
                       ([{"id": "m", "turns": "s_1_2"}], "memories[0].turns is not a list"),
                       ([{"id": "m", "score": True}], "memories[0].score is not a finite"),
                       ([{"id": "m", "weight": 1}], "unknown key 'weight'")]:
        with pytest.raises(RetrieverError) as err:
            memories_from_json(bad, "w")
        assert "\n" not in str(err.value) and str(err.value).startswith("w: ")
        assert words is None or words in str(err.value)


def test_the_record_keeps_the_top_sessions_memories_and_those_covering_gold() -> None:
    long = "x" * (MAX_RECORDED_TEXT + 50)
    items = [Memory("a", None, turns=("s_3_1",), text=long), Memory("b", None, ("s_1",)),
             Memory("c", None, ("s_3",)), Memory("d", None, ("s_2",)),
             Memory("e", None, ("s_4",)), Memory("f", None, ("s_2",))]
    record = memory_record(items, ("s_4", "s_2"), top=2)
    # a, b cover the top 2 sessions; e is the first covering gold s_4, d gold s_2
    assert [(m["rank"], m["id"]) for m in record] == [(1, "a"), (2, "b"), (4, "d"), (5, "e")]
    assert len(record[0]["text"]) == MAX_RECORDED_TEXT and record[0]["text"].endswith("…")
    assert record[1] == {"rank": 2, "id": "b", "score": None, "sessions": ["s_1"],
                         "turns": [], "text": None}
    # memories of several sessions: the first top of them are kept (memory_recall@top's)
    items = [Memory("a", None, ("s_1", "s_3")), Memory("b", None, ("s_3", "s_4")),
             Memory("c", None, ("s_1",)), Memory("d", None, ("s_2",))]
    assert [m["id"] for m in memory_record(items, ("s_1",), top=3)] == ["a", "b", "c"]


def test_a_run_file_of_turn_docnos_is_a_memory_ranking(tmp_path: Path) -> None:
    from pytest_retrieval_eval.retrievers.trec_run import TrecRunRetriever

    run = tmp_path / "turns.trec"
    run.write_text("q1 Q0 s_3_1 1 9 t\nq1 Q0 s_3_2 2 8 t\nq1 Q0 s_2 3 7 t\n"
                   "q1 Q0 s_1_4 4 6 t\nq1 Q0 s_4_1 5 5 t\n")
    memories: dict[int, list[Memory]] = {}
    rankings, _ = rank_per_k(TrecRunRetriever(run), persona(), query(), [3], {},
                             memories=memories)
    assert rankings[3] == ["s_3", "s_2", "s_1"]  # sessions at their first turn
    assert [(m.id, m.sessions, m.turns) for m in memories[3]] == [
        ("s_3_1", (), ("s_3_1",)), ("s_3_2", (), ("s_3_2",)), ("s_2", ("s_2",), ()),
        ("s_1_4", (), ("s_1_4",))]
    run.write_text("q1 Q0 s_1_5 1 9 t\n")  # s_1 has four turns
    with pytest.raises(RetrieverError, match="memory 's_1_5' names turn 's_1_5', not a turn"):
        rank_per_k(TrecRunRetriever(run), persona(), query(), [3], {}, memories={})
    run.write_text("q1 Q0 s_1 1 9 t\nq1 Q0 s_2 1 8 t\n")  # sessions only: as before
    memories = {}
    rankings, _ = rank_per_k(TrecRunRetriever(run), persona(), query(), [3], {},
                             memories=memories)
    assert rankings[3] == ["s_1", "s_2"] and memories == {}


MEMORY_CMD = """
import json, sys
for line in sys.stdin:
    op = json.loads(line)["op"]
    if op == "hello":
        answer = {"name": "m", "vectors": False}
    elif op == "index":
        answer = {"ok": True}
    else:
        memories = [{"id": f"m{i}", "score": 1.0 - i / 10, "turns": [f"s_1_{i}"]}
                    for i in range(1, 5)] + [{"id": "m9", "score": 0.1, "sessions": ["s_2"]}]
        answer = {"memories": memories, **({"ids": []} if "both" in sys.argv else {})}
    print(json.dumps(answer), flush=True)
"""


@pytest.mark.parametrize("mode", ["memories", "both"])
def test_a_cmd_memory_answer_is_read_whole_and_checked(tmp_path: Path, mode: str) -> None:
    import shlex
    import sys

    from pytest_retrieval_eval.retrievers.command import CommandRetriever

    script = tmp_path / "store.py"
    script.write_text(MEMORY_CMD)
    store = CommandRetriever(f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(script))} "
                             f"{mode}")
    try:
        memories: dict[int, list[Memory]] = {}
        if mode == "both":
            with pytest.raises(RetrieverError, match='holds both "ids" and "memories"'):
                rank_per_k(store, persona(), query(), [2], {}, memories=memories)
            return
        rankings, _ = rank_per_k(store, persona(), query(), [2], {}, memories=memories)
        # limit 2: four memories of s_1 are read (never cut at 2 memories), then s_2's
        assert rankings[2] == ["s_1", "s_2"]
        assert [m.id for m in memories[2]] == ["m1", "m2", "m3", "m4", "m9"]
    finally:
        store.close()
