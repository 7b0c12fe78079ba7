"""A turn store: one memory per turn, embedded by the store itself with ``persona.embed``.

``index`` names each turn of the history as the turn granularity does (``<session_id>_<n>``,
``n`` the turn's 1-based position in its session, blank turns left out), renders it
``role: content`` and asks the run's model for the vectors (``persona.embed``: read from the
run's vector cache; the model lane embeds what it lacks once). ``rank`` scores the turns by
float64 cosine, as vipune does, and returns turn memories, best first, until they cover
``limit`` sessions. So it ranks as the built-in ``semantic+unit:turn`` does (a test checks it).
Measured as: ``--retrieval-eval-retriever turn_store:TurnStore`` (docs/memories.md).
"""

from __future__ import annotations

import numpy as np

from pytest_retrieval_eval.retrievers import Memory, Persona, Query


class TurnStore:
    name = "turn-store"

    def __init__(self) -> None:
        self._turns: dict[str, tuple[list[str], list[str], np.ndarray]] = {}

    def index(self, persona: Persona) -> None:
        ids: list[str] = []
        sessions: list[str] = []
        texts: list[str] = []
        for sid, turns in zip(persona.session_ids, persona.turns, strict=True):
            for n, turn in enumerate(turns, start=1):
                if turn["content"].strip():
                    ids.append(f"{sid}_{n}")
                    sessions.append(sid)
                    texts.append(f"{turn['role']}: {turn['content']}")
        vectors = persona.embed(texts).astype(np.float64)  # the run's model, cached
        self._turns[persona.key] = (ids, sessions, vectors)

    def rank(self, persona: Persona, query: Query, limit: int) -> list[Memory]:
        ids, sessions, vectors = self._turns[persona.key]
        q = np.asarray(query.vector, dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(q)
        sims = np.divide(vectors @ q, norms, out=np.zeros(len(ids)), where=norms != 0)
        out: list[Memory] = []
        covered: set[str] = set()
        for i in np.argsort(-sims, kind="stable").tolist():
            if len(covered) >= limit:  # limit counts sessions, not memories
                break
            covered.add(sessions[i])
            out.append(Memory(ids[i], score=float(sims[i]), turns=(ids[i],)))
        return out

    def close(self) -> None:
        self._turns.clear()
