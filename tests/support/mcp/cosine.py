"""An exact-cosine memory store, the same code in a server (:mod:`.cosine_server`) and in
process (:class:`CosineStore`): texts embedded as hashed word counts, ranked by cosine (ties
by insertion order), each memory an id ``m<n>`` in the order stored.

Stored in the history's time order (the order an ``mcp:`` ingest uses: a stable sort on the
date), so that the two number their memories alike."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from typing import Any

from pytest_retrieval_eval.retrievers.base import Memory, Persona, Query

WIDTH = 64
_WORD = re.compile(r"[a-z0-9]+")


def embed(text: str) -> list[float]:
    vec = [0.0] * WIDTH
    for word in _WORD.findall(text.lower()):
        vec[int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % WIDTH] += 1.0
    return vec


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


class Memories:
    """The store both sides share."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, list[float], Any]] = []

    def add(self, text: str, metadata: Any) -> str:
        mid = f"m{len(self.rows) + 1}"
        self.rows.append((mid, text, embed(text), metadata))
        return mid

    def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        q = embed(query)
        scored = sorted(((cosine(q, vec), i) for i, (_, _, vec, _) in enumerate(self.rows)),
                        key=lambda t: (-t[0], t[1]))
        return [{"id": self.rows[i][0], "score": s, "text": self.rows[i][1],
                 "metadata": self.rows[i][3]} for s, i in scored[:limit]]


class CosineStore:
    """The in-process twin of the server: the same memories, the same answers."""

    name = "cosine-inprocess"
    needs_vectors = False

    def __init__(self) -> None:
        self._stores: dict[str, Memories] = {}

    def index(self, persona: Persona) -> None:
        store = Memories()
        order = sorted(range(len(persona.session_ids)),
                       key=lambda i: persona.created_at[i] or "")
        for i in order:
            store.add(persona.texts[i], {"session_id": persona.session_ids[i]})
        self._stores[persona.key] = store

    def rank(self, persona: Persona, query: Query, limit: int) -> list[Memory]:
        if persona.key not in self._stores:
            self.index(persona)
        return [Memory(r["id"], r["score"], (r["metadata"]["session_id"],), (), r["text"])
                for r in self._stores[persona.key].search(query.question, limit)]
