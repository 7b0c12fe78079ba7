"""A store of extracted facts: one sentence per memory, each naming the turn it came from.

A stand-in for an LLM fact extractor that is deterministic, so its numbers can be checked:
``index`` splits every user turn into sentences (at ``.``, ``!`` or ``?`` followed by a space)
and keeps each sentence of at least three words as one memory,
``Memory(id="<turn_id>#<j>", turns=(turn_id,), text=sentence)``. ``rank`` scores a fact by
the question's distinct words (lower-cased, punctuation stripped) it contains, ties kept in
history order, and returns facts until they cover ``limit`` sessions. A fact is a few words,
so ten facts are far less context than ten sessions: compare them at a budget
(docs/memories.md). Measured as: ``--retrieval-eval-retriever facts_store:FactStore``.
"""

from __future__ import annotations

import re

from pytest_retrieval_eval.retrievers import Memory, Persona, Query

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def facts(session_id: str, turns: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    """(fact id, turn id, sentence) of each fact of one session's user turns."""
    out: list[tuple[str, str, str]] = []
    for n, turn in enumerate(turns, start=1):
        if turn["role"] != "user" or not turn["content"].strip():
            continue
        turn_id = f"{session_id}_{n}"
        sentences = [s.strip() for s in _SENTENCE_END.split(turn["content"])]
        for j, sentence in enumerate(s for s in sentences if len(s.split()) >= 3):
            out.append((f"{turn_id}#{j + 1}", turn_id, sentence))
    return out


class FactStore:
    name = "facts"
    needs_vectors = False  # word overlap: no model needed

    def __init__(self) -> None:
        self._facts: dict[str, list[tuple[str, str, str, str]]] = {}

    def index(self, persona: Persona) -> None:
        self._facts[persona.key] = [
            (fact_id, turn_id, sid, sentence)
            for sid, turns in zip(persona.session_ids, persona.turns, strict=True)
            for fact_id, turn_id, sentence in facts(sid, [dict(t) for t in turns])]

    def rank(self, persona: Persona, query: Query, limit: int) -> list[Memory]:
        asked = words(query.question)
        held = self._facts[persona.key]
        scores = [len(asked & words(sentence)) for _, _, _, sentence in held]
        order = sorted(range(len(held)), key=lambda i: -scores[i])  # stable: history order
        out: list[Memory] = []
        covered: set[str] = set()
        for i in order:
            if len(covered) >= limit:
                break
            fact_id, turn_id, sid, sentence = held[i]
            covered.add(sid)
            out.append(Memory(fact_id, score=float(scores[i]), turns=(turn_id,), text=sentence))
        return out

    def close(self) -> None:
        self._facts.clear()
