"""A faiss-cpu store: exact cosine search (a flat inner-product index over unit vectors).

``index`` builds one index per persona and saves it in the persona's work folder, so a later
run reads it back instead of rebuilding; ``rank`` only searches. Scores are returned, so the
plugin sees ties. Measured as: ``--retrieval-eval-retriever faiss_store:FaissFlat``.
"""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np

from pytest_retrieval_eval.retrievers import Persona, Query


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0.0, 1.0, norms)


class FaissFlat:
    name = "faiss-flat"

    def __init__(self) -> None:
        self._indexes: dict[str, faiss.Index] = {}

    def index(self, persona: Persona) -> None:
        saved = persona.workdir / "flat.faiss" if persona.workdir is not None else None
        if saved is not None and saved.exists():  # the same history: its content address
            self._indexes[persona.key] = faiss.read_index(str(saved))
            return
        index = faiss.IndexFlatIP(persona.vectors.shape[1])
        index.add(_unit(persona.vectors))
        if saved is not None:
            partial = saved.with_suffix(".partial")
            faiss.write_index(index, str(partial))
            Path(partial).replace(saved)  # a killed run leaves no half-written index
        self._indexes[persona.key] = index

    def rank(self, persona: Persona, query: Query, limit: int) -> list[tuple[str, float]]:
        index = self._indexes[persona.key]
        k = min(limit, index.ntotal)
        scores, rows = index.search(_unit(np.asarray(query.vector)[None, :]), k)
        return [(persona.session_ids[r], float(s))
                for r, s in zip(rows[0], scores[0], strict=True) if r >= 0]

    def close(self) -> None:
        self._indexes.clear()
