"""A deterministic turn store, as a Python store (:class:`TurnStore`) and over ``cmd:``
(``python memory_store.py``): the same memories either way, so their reports must agree.

Each turn of the persona is a memory, id ``<session_id>_<n>`` (``n`` 1-based), scored by the
question words its content holds plus a strictly falling tie-break (no two scores equal, so
a TREC run of them keeps the order). ``rank`` returns memories until they cover ``limit``
sessions; with ``MEMORY_STORE_LOG`` set, the Python store appends each question's whole
ranking there (``{"question_id", "memories": [[id, score], ...]}`` per line), from which a
test writes the same ranking as a run file of turn ids.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def words(text: str) -> set[str]:
    return {w.strip(".,?!:;'\"()").lower() for w in text.split()} - {""}


def scored_turns(sessions: Sequence[tuple[str, Sequence[Mapping[str, str]]]],
                 question: str) -> list[tuple[str, float]]:
    """Every turn id with its score, best first."""
    asked = words(question)
    out: list[tuple[str, float]] = []
    position = 0
    for sid, turns in sessions:
        for n, turn in enumerate(turns, start=1):
            position += 1
            overlap = len(asked & words(str(turn.get("content", ""))))
            out.append((f"{sid}_{n}", overlap + 1.0 / (1.0 + position)))
    out.sort(key=lambda pair: -pair[1])
    return out


def until_covered(ranking: Sequence[tuple[str, float]], limit: int) -> list[tuple[str, float]]:
    """The first memories that cover ``limit`` distinct sessions."""
    out: list[tuple[str, float]] = []
    seen: set[str] = set()
    for tid, score in ranking:
        if len(seen) >= limit:
            break
        out.append((tid, score))
        seen.add(tid.rsplit("_", 1)[0])
    return out


class TurnStore:
    name = "turnstore"
    needs_vectors = False

    def rank(self, persona: Any, query: Any, limit: int) -> list[Any]:
        from pytest_retrieval_eval.retrievers import Memory

        ranking = scored_turns(list(zip(persona.session_ids, persona.turns, strict=True)),
                               query.question)
        log = os.environ.get("MEMORY_STORE_LOG")
        if log:
            with Path(log).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"question_id": query.question_id,
                                         "memories": ranking}) + "\n")
        return [Memory(tid, score, turns=(tid,)) for tid, score in until_covered(ranking, limit)]


def scored_sessions(persona: Any, question: str) -> list[tuple[str, float]]:
    asked = words(question)
    out = [(sid, len(asked & words(text)) + 1.0 / (2.0 + i))
           for i, (sid, text) in enumerate(zip(persona.session_ids, persona.texts, strict=True))]
    out.sort(key=lambda pair: -pair[1])
    return out


class SessionIds:
    """A session store returning ``(id, score)`` pairs."""

    name = "session-ids"
    needs_vectors = False

    def rank(self, persona: Any, query: Any, limit: int) -> list[Any]:
        return scored_sessions(persona, query.question)[:limit]


class SessionMemories:
    """The same store returning one-session memories."""

    name = "session-memories"
    needs_vectors = False

    def rank(self, persona: Any, query: Any, limit: int) -> list[Any]:
        from pytest_retrieval_eval.retrievers import Memory

        return [Memory(sid, score, (sid,))
                for sid, score in scored_sessions(persona, query.question)[:limit]]


def main() -> int:
    personas: dict[str, list[tuple[str, list[dict[str, str]]]]] = {}
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        answer: dict[str, Any]
        if op == "hello":
            answer = {"name": "turnstore-cmd", "vectors": False}
        elif op == "index":
            personas[request["persona"]] = [(s["id"], s["turns"]) for s in request["sessions"]]
            answer = {"ok": True}
        else:
            ranking = scored_turns(personas[request["persona"]], request["question"])
            answer = {"memories": [{"id": tid, "score": score, "turns": [tid]}
                                   for tid, score in until_covered(ranking, request["limit"])]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


class HandMemories:
    """A fixed ranking of four memories on the hand-made history of
    tests/plugin/test_memory_numbers.py (sessions ``q1_s0`` .. ``q1_s3``): a fact with its
    own text from s3, the turn s0_1, a fact of s2 and of the turn s1_1, the turn s2_2.
    ``rank`` returns them until they cover ``limit`` sessions."""

    name = "hand-memories"
    needs_vectors = False

    def rank(self, persona: Any, query: Any, limit: int) -> list[Any]:
        from pytest_retrieval_eval.retrievers import Memory

        memories = [
            Memory("fact-weather", 0.9, sessions=("q1_s3",), text="We talked about weather."),
            Memory("q1_s0_1", 0.8, turns=("q1_s0_1",)),
            Memory("fact-cat", 0.7, sessions=("q1_s2",), turns=("q1_s1_1",)),
            Memory("q1_s2_2", 0.6, turns=("q1_s2_2",)),
        ]
        out, seen = [], set()
        for memory in memories:
            if len(seen) >= limit:
                break
            out.append(memory)
            seen.update(memory.sessions)
            seen.update(t.rsplit("_", 1)[0] for t in memory.turns)
        return out


class SeveralSessionMemories:
    """Memories that each cover several sessions (summaries, facts drawn from several
    conversations), on the history of tests/plugin/test_memory_numbers.py with five sessions
    ``q1_s0`` .. ``q1_s4``. ``rank`` returns all five, whatever the limit: the plugin reads
    them to its bound (``limit`` sessions and ``limit`` memories)."""

    name = "several-sessions"
    needs_vectors = False

    def rank(self, persona: Any, query: Any, limit: int) -> list[Any]:
        from pytest_retrieval_eval.retrievers import Memory

        return [
            Memory("summary-a", 0.9, sessions=("q1_s0", "q1_s2")),
            Memory("fact-b", 0.8, turns=("q1_s4_1",)),
            Memory("fact-c", 0.7, sessions=("q1_s3",), turns=("q1_s1_1",)),
            Memory("summary-d", 0.6, sessions=("q1_s2", "q1_s1")),
            Memory("fact-e", 0.5, sessions=("q1_s3",)),
        ]
