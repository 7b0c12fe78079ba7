"""An exact cosine store in numpy, in-process: the same algorithm as the Node example
(examples/stores/node/store.js), so the two compare the cost of a store's language and
transport rather than of its search (docs/your-store.md, "Costs"). No packages beyond numpy.

    pytest --retrieval-eval --no-model \
      --retrieval-eval-retriever "numpy_store:NumpyCosine,cmd:node ../node/store.js"
"""

from __future__ import annotations

from typing import Any

import numpy as np


class NumpyCosine:
    """Cosine of float32 vectors in float64, a zero norm scoring 0, a stable sort (equal
    scores keep the rows' order); rows past the limit tied with the last are returned too."""

    name = "numpy-cosine"

    def __init__(self) -> None:
        self._personas: dict[str, tuple[tuple[str, ...], np.ndarray, np.ndarray]] = {}

    def index(self, persona: Any) -> None:
        vectors = np.asarray(persona.vectors, dtype=np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
        self._personas[persona.key] = (tuple(persona.session_ids), vectors, norms)

    def rank(self, persona: Any, query: Any, limit: int) -> list[tuple[str, float]]:
        ids, vectors, norms = self._personas[persona.key]
        q = np.asarray(query.vector, dtype=np.float64)
        qn = float(np.sqrt(q @ q))
        dots = vectors @ q
        scale = norms * qn
        scores = np.divide(dots, scale, out=np.zeros_like(dots), where=scale != 0)
        order = np.argsort(-scores, kind="stable")
        end = min(limit, len(order))
        while 0 < end < len(order) and scores[order[end]] == scores[order[end - 1]]:
            end += 1
        return [(ids[i], float(scores[i])) for i in order[:end]]

    def close(self) -> None:
        self._personas.clear()
