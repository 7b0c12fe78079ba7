"""Every door reads a value one way (issue 43, "How"): one hypothesis generator of hostile
values (turn numbers written in other digits, with leading zeros, signs, spaces, thousands of
digits; scores that are NaN, infinite, too large for a float, or bools) is driven through the
Python store protocol, the same store's answer over ``cmd:`` (its JSON line, read as the
command retriever reads it) and the same ranking as a ``run:`` file. Each door either refuses
the value in one line, or scores exactly what its well-formed twin (the same ranking written
canonically) scores. In-process and small: a few seconds for the whole property."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_retrieval_eval.boundary.scores import parse_score
from pytest_retrieval_eval.boundary.turn_ids import parse_turn_id
from pytest_retrieval_eval.data.pairs import render_session
from pytest_retrieval_eval.errors import RetrievalEvalError
from pytest_retrieval_eval.retrievers import Memory, Persona, Query
from pytest_retrieval_eval.retrievers.command_answers import memories_answer
from pytest_retrieval_eval.retrievers.memories import pair_memory_metrics
from pytest_retrieval_eval.retrievers.ranking import rank_per_k
from pytest_retrieval_eval.retrievers.trec_run import TrecRunRetriever

SESSIONS = {"s1": 3, "s2": 2, "s3": 4}
GOLD, GOLD_TURNS, KS = ("s1",), ("s1_2",), (1, 3)


def persona() -> Persona:
    rows = [[{"role": "user", "content": f"{sid} turn {n}"} for n in range(1, k + 1)]
            for sid, k in SESSIONS.items()]
    return Persona(key="p", session_ids=tuple(SESSIONS), created_at=("",) * len(SESSIONS),
                   vectors=np.zeros((len(SESSIONS), 2), dtype=np.float32),
                   texts=[render_session(r) for r in rows],
                   store_path=lambda: Path("/nonexistent"), turns=rows)


QUERY = Query("q1", "single-session-user", "what?", "", None, GOLD)

#: Digits a turn number may be written in by a hostile store: ASCII, Arabic-Indic,
#: fullwidth, superscripts, Devanagari.
DIGITS = st.sampled_from(["0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667"
                          "\u0668\u0669", "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17"
                          "\uff18\uff19", "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077"
                          "\u2078\u2079", "\u0966\u0967\u0968\u0969\u096a\u096b\u096c\u096d"
                          "\u096e\u096f"])


@st.composite
def turn_numbers(draw: st.DrawFn) -> tuple[str, int]:
    """A turn number as text, and the number it means (1..3)."""
    n = draw(st.integers(1, 3))  # s1 has three turns
    digits = draw(DIGITS)
    zeros = draw(st.sampled_from([0, 0, 0, 1, 2, 5000]))
    text = digits[0] * zeros + "".join(digits[int(c)] for c in str(n))
    text = draw(st.sampled_from(["", "", "+", " ", "-"])) + text
    return text + draw(st.sampled_from(["", "", " ", "\n", "_0"])), n


SCORES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                   st.integers(-(10**400), 10**400), st.just(10**400))


def twin_metrics() -> dict[str, float]:
    memories = [Memory("m1", 2.0, turns=("s1_2",)), Memory("m2", 1.0, turns=("s3_1",)),
                Memory("m3", 0.5, turns=("s2_1",))]
    return score(memories)


def score(items: list[object] | object) -> dict[str, float]:
    class Store:
        name = "store"

        def rank(self, persona: object, query: object, limit: int) -> object:
            return items

    memories: dict[int, list[Memory]] = {}
    rankings, _ = rank_per_k(Store(), persona(), QUERY, KS, {},  # type: ignore[arg-type]
                             memories=memories)
    out = pair_memory_metrics(memories, GOLD, KS, GOLD_TURNS)
    out.update({f"ranked@{k}": float(len(rankings[k])) for k in KS})
    return out


TWIN = twin_metrics()


def door_python(turn: str, score_value: object) -> dict[str, float]:
    return score([Memory("m1", score_value, turns=(turn,)),  # type: ignore[arg-type]
                  Memory("m2", 1.0, turns=("s3_1",)), Memory("m3", 0.5, turns=("s2_1",))])


def door_cmd(turn: str, score_value: object) -> dict[str, float]:
    line = json.dumps({"memories": [  # NaN and Infinity as Python's json writes them
        {"id": "m1", "score": score_value, "turns": [turn]},
        {"id": "m2", "score": 1.0, "turns": ["s3_1"]},
        {"id": "m3", "score": 0.5, "turns": ["s2_1"]}]}, allow_nan=True)
    answer = json.loads(line)  # as command.py reads a line
    return score(memories_answer(answer, "cmd:store", "q1"))


def door_run(turn: str, score_value: object, folder: Path) -> dict[str, float] | None:
    """None where a run file cannot carry the value (a bool score; whitespace in a docno,
    which the format splits fields on): that door is not tried."""
    if isinstance(score_value, bool) or not isinstance(score_value, (int, float)) \
            or any(c.isspace() for c in turn):
        return None
    text = repr(float(score_value)) if isinstance(score_value, float) else str(score_value)
    path = folder / "run.trec"
    path.write_text(f"q1 Q0 {turn} 1 {text} t\nq1 Q0 s3_1 2 1.0 t\nq1 Q0 s2_1 3 0.5 t\n",
                    encoding="utf-8")
    return score(TrecRunRetriever(path).rank(persona(), QUERY, max(KS)))


def well_formed(turn: str, score_value: object) -> bool:
    return parse_turn_id(turn) is not None and parse_score(score_value) is not None


def through(door: str, turn: str, score_value: object,
            folder: Path) -> dict[str, float] | None:
    if door == "python":
        return door_python(turn, score_value)
    if door == "cmd":
        return door_cmd(turn, score_value)
    return door_run(turn, score_value, folder)


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(number=turn_numbers(), score_value=SCORES)
def test_every_door_refuses_in_one_line_or_scores_as_the_twin(
        tmp_path: Path, number: tuple[str, int], score_value: object) -> None:
    """The twin: the same ranking with turn ``s1_<n>`` written canonically and the score as
    the float it stands for. A run file orders its lines by score, so each door has its own
    twin; the Python and cmd: doors keep the list's order (:data:`TWIN` for turn 2)."""
    text, n = number
    turn = f"s1_{text}"
    for door in ("python", "cmd", "run"):
        try:
            got = through(door, turn, score_value, tmp_path)
        except RetrievalEvalError as exc:
            assert "\n" not in str(exc), (door, str(exc))
            assert not well_formed(turn, score_value), (door, turn, score_value, str(exc))
            continue
        if got is None:
            continue
        # accepted: the turn and the score were well formed, and score as the twin does
        assert parse_turn_id(turn) == ("s1", n), (door, turn, got)
        assert parse_score(score_value) is not None, (door, score_value, got)
        twin = through(door, f"s1_{n}", parse_score(score_value), tmp_path)
        assert got == twin, (door, turn, score_value, got, twin)
        if n == 2 and door != "run":
            assert got == TWIN, (door, turn, score_value, got)


def test_the_twin_finds_the_gold_turn() -> None:
    assert TWIN["turn_recall@1"] == 1.0 and TWIN["memory_recall@1"] == 1.0


pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
