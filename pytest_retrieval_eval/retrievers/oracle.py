"""``oracle``: gold first, then the rest - a pipeline self-check (recall 1 when gold is present)."""

from __future__ import annotations

from .base import Persona, Query, _check_limit

__all__ = ["OracleRetriever"]


class OracleRetriever:
    """Gold ids first (gold order, those in the persona), then the other rows in row order."""

    name = "oracle"
    needs_vectors = False  # ranks without embeddings: no model, no prep
    last_scores: list[tuple[str, float]] | None = None

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _check_limit(limit)
        present = set(persona.session_ids)
        first = list(dict.fromkeys(g for g in query.gold if g in present))
        chosen = set(first)
        rest = [s for s in persona.session_ids if s not in chosen]
        ranked = list(dict.fromkeys(first + rest))[:lim]
        #: A strict order by construction: no two scores equal, nothing tie-sensitive.
        self.last_scores = [(mem_id, float(-rank)) for rank, mem_id in enumerate(ranked)]
        return ranked
