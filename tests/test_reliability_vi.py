"""Issue 43 ("Reliability VI"), items 1-11: one reading of every value, and no output written
over a file that is not the plugin's own. Each test here failed on the code before its fix;
the doors' property test is tests/test_boundary_doors.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.boundary.turn_ids import parse_turn_id
from pytest_retrieval_eval.data.pairs import render_session
from pytest_retrieval_eval.errors import RetrieverError
from pytest_retrieval_eval.retrievers import Memory, Persona, Query
from pytest_retrieval_eval.retrievers.memories import read_memories
from pytest_retrieval_eval.retrievers.memory_tokens import memory_text
from pytest_retrieval_eval.reporting import report
from pytest_retrieval_eval.retrievers.ranked_output import REPEATS_READ
from pytest_retrieval_eval.retrievers.ranking import READ_CUT, rank_per_k


def persona(turns: dict[str, int]) -> Persona:
    ids = tuple(turns)
    rows = [[{"role": "user", "content": f"{sid} turn {n}"} for n in range(1, k + 1)]
            for sid, k in turns.items()]
    return Persona(key="p", session_ids=ids, created_at=("",) * len(ids),
                   vectors=np.zeros((len(ids), 2), dtype=np.float32),
                   texts=[render_session(r) for r in rows],
                   store_path=lambda: Path("/nonexistent"), turns=rows)


# 43.2: one grammar of a turn id, refused in one line wherever Python's int() reads more.
@pytest.mark.parametrize("number", ["01", "0", "\u0661", "\uff11", "\u00b2", "1" * 5000,
                                    "1_0", " 1", "+1", "1\n"])
def test_a_turn_number_outside_the_grammar_is_refused_in_one_line(number: str) -> None:
    tid = f"s_1_{number}"
    assert parse_turn_id(tid) is None
    with pytest.raises(RetrieverError) as err:
        read_memories([Memory("m", turns=(tid,))], persona({"s_1": 3}), "store", "q1")
    message = str(err.value)
    assert "\n" not in message and message.startswith("store: question q1: memory 'm' names")
    assert "ASCII digits without a leading zero" in message


def test_the_grammar_reads_the_session_up_to_the_last_underscore() -> None:
    assert parse_turn_id("a_b_12") == ("a_b", 12)
    assert parse_turn_id("s_" + "9" * 9) == ("s", 999_999_999)
    assert parse_turn_id("s_" + "1" * 10) is None and parse_turn_id("_1") is None
    got = read_memories([Memory("m", turns=("s_1_3",))], persona({"s_1": 3}), "store", "q1")
    assert got[0].turns == ("s_1_3",)


# 43.3: one reading of an id: turn a_1 of session a, never session a_1's text.
def test_a_turn_id_that_is_also_a_session_id_is_refused_in_one_line() -> None:
    with pytest.raises(RetrieverError, match=r"names turn 'a_1', which is also a session id"):
        read_memories([Memory("m", turns=("a_1",))], persona({"a": 2, "a_1": 40}), "store",
                      "q1")


def test_tokens_and_excerpts_read_a_turn_as_the_provenance_check_does() -> None:
    p = persona({"a": 2, "a_1": 40})
    assert memory_text(Memory("m", turns=("a_1",)), p) == render_session([p.turns[0][0]])
    assert memory_text(Memory("m", turns=("a_2",)), p) == render_session([p.turns[0][1]])


class Store:
    name = "store"

    def __init__(self, items: object) -> None:
        self.items = items

    def rank(self, persona: object, query: object, limit: int) -> object:
        return self.items


def query() -> Query:
    return Query("q1", "single-session-user", "what?", "", None, ("b",))


# 43.5: an (id, nan) pair from rank is refused in one line, as a Memory's NaN already was.
@pytest.mark.parametrize("score", [float("nan"), float("inf"), -float("inf"), 10**400],
                         ids=["nan", "inf", "-inf", "10**400"])
@pytest.mark.parametrize("memory", [False, True])
def test_a_pair_without_a_finite_score_is_refused_in_one_line(score: float,
                                                              memory: bool) -> None:
    items: list[object] = [("a", 1.0), ("b", score)]
    if memory:  # beside a memory: read as memories
        items.append(Memory("m", 0.5, ("c",), text="x"))
    with pytest.raises(RetrieverError) as err:
        rank_per_k(Store(items), persona({"a": 1, "b": 1, "c": 1}), query(), [2],  # type: ignore[arg-type]
                   {}, memories={})
    message = str(err.value)
    assert "\n" not in message and message.startswith("store: question q1: rank returned ")
    assert "whose score is not a finite number" in message


# 43.4: a finite list is read until it covers limit sessions, however long; an iterator's
# bound, where it cuts the read, is said in the JSON (read_cut) and under the summary.
def test_a_long_finite_memory_list_is_read_until_it_covers_limit_sessions() -> None:
    p = persona({f"s{i}": 1 for i in range(15)})
    items = [Memory(f"m{i}", None, ("s0",), text="x") for i in range(330)]
    items += [Memory(f"n{i}", None, (f"s{i}",), text="x") for i in range(1, 15)]
    counts: dict[str, int] = {}
    rankings, _ = rank_per_k(Store(items), p, query(), [10], {},  # type: ignore[arg-type]
                             memories={}, counts=counts)
    assert rankings[10] == [f"s{i}" for i in range(10)]
    assert READ_CUT not in counts
    counts.clear()
    rank_per_k(Store(iter(items)), p, query(), [10], {}, memories={},  # type: ignore[arg-type]
               counts=counts)
    assert counts[READ_CUT] == REPEATS_READ * 15
    line = report._cut_lines({"pairs": [{"retriever": "store", "read_cut": 120}]})
    assert line == ["read cut: store: 1 pair(s) ranked from the first 120 items of an "
                    "iterator, short of max-k sessions; return a list to be read to the end"]


# 43.10: a pytest usage error writes no report (it replaced an existing one with an empty one).
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("args", [("no_such_dir/",), ("-k", "a and (")],
                         ids=["missing-path", "bad-k"])
def test_a_usage_error_leaves_the_existing_report_alone(pytester: pytest.Pytester,
                                                       args: tuple[str, ...]) -> None:
    out = pytester.path / "report.json"
    out.write_text('{"schema_version": 1, "mine": true}\n')
    result = pytester.runpytest_inprocess("--retrieval-eval", "--no-model",
                                          f"--retrieval-eval-json={out}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert out.read_text() == '{"schema_version": 1, "mine": true}\n'
