"""What-if retrievers: ``hybrid``, ``fts`` and ``semantic`` with one of vipune's rules changed.

Names and parameters are parsed in :mod:`.variants`; :func:`build` makes the retriever.
``hybrid`` and ``fts`` variants run vipune's reference (:mod:`pytest_retrieval_eval.vipune`)
with a knob turned; ``semantic+dtype:float32`` replaces vipune's float64 cosine by float32
arithmetic.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import numpy as np

from .. import vipune
from ..data.pairs import parse_date
from .base import Persona, Query, Retriever, _option, _query_vector, _vipune_limit
from .bm25 import BM25Retriever
from .reference import FtsRetriever, HybridRetriever, SemanticRetriever
from .units import TurnUnit
from .variants import ADAPTERS, VariantSpec, parse_variant

__all__ = ["FtsVariant", "HybridVariant", "SemanticFloat32", "build", "float32_search"]


class HybridVariant(HybridRetriever):
    """vipune's ``search_hybrid`` with ``rrf_k``, ``pool``, ``fts`` or ``recency`` changed.

    ``recency``: vipune decays by age from "now"; here now is the question's date (LongMemEval
    asks each question at a date), so the weight favours the sessions just before it.
    """

    def __init__(self, spec: VariantSpec) -> None:
        super().__init__()
        self.name = spec.name
        self.params = dict(spec.params)
        self.rrf_k = int(spec.params.get("rrf_k", vipune.RRF_K))
        self.pool = spec.params.get("pool")
        self.fts_mode = str(spec.params.get("fts", "and"))
        self.recency = float(spec.params.get("recency", 0.0))
        if self.pool is not None:
            self.limit_sensitive = False  # a fixed pool: one search serves every k

    def _recency_inputs(self, persona: Persona, query: Query) -> dict[str, Any]:
        if self.recency <= 0.0:
            return {}
        dates = dict(zip(persona.session_ids, persona.created_at, strict=True))
        return {"created_at": dates, "now": _question_now(query, dates.values())}


def _question_now(query: Query, dates: Any) -> datetime | None:
    """The question's date; else the newest row's; else None (the current time)."""
    when = parse_date(query.question_date) if query.question_date else None
    if when is None:
        when = max((d for d in dates if d), default=None)
    return vipune.parse_rfc3339(when) if when else None


class FtsVariant(FtsRetriever):
    """vipune's ``search_bm25`` with the quoted words joined by OR (``fts+mode:or``)."""

    def __init__(self, spec: VariantSpec) -> None:
        super().__init__()
        self.name = spec.name
        self.params = dict(spec.params)
        self.mode = str(spec.params.get("mode", "and"))


def float32_search(vectors: np.ndarray, ids: tuple[str, ...] | list[str],
                   query_vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
    """Cosine in float32 (norms, dot products and the quotient), stable sort, top ``limit``:
    what vipune would rank if ``cosine_similarity`` summed in ``f32``."""
    mat = np.asarray(vectors, dtype=np.float32)
    q = np.asarray(query_vector, dtype=np.float32)
    if len(ids) == 0:
        return []
    norms = np.sqrt(np.einsum("ij,ij->i", mat, mat, dtype=np.float32))
    qnorm = np.float32(np.sqrt(np.dot(q, q)))
    dots = (mat @ q).astype(np.float32)
    denom = (norms * qnorm).astype(np.float32)
    sims = np.zeros(len(ids), dtype=np.float32)
    nonzero = denom != 0
    sims[nonzero] = dots[nonzero] / denom[nonzero]
    order = np.argsort(-sims, kind="stable")[:limit]
    return [(ids[i], float(sims[i])) for i in order.tolist()]


class SemanticFloat32(SemanticRetriever):
    """``semantic+dtype:float32``: vipune's scan and stable ties, float32 arithmetic."""

    def __init__(self, spec: VariantSpec) -> None:
        self.name = spec.name
        self.params = dict(spec.params)
        if self.params.get("dtype") == "float32":
            self.top_rows = None  # type: ignore[assignment]  # not the rule's scan

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        if self.params.get("dtype") != "float32":
            return super().rank(persona, query, limit)
        lim = _vipune_limit(limit)
        qvec = _query_vector(self.name, persona, query)
        return [i for i, _ in float32_search(persona.vectors, list(persona.session_ids),
                                             qvec, lim)]


def build(spec: VariantSpec, options: object = None) -> Retriever:
    """The retriever of a parsed what-if name (``+unit:turn``: the base ranks the persona's
    turns, :class:`.units.TurnUnit`)."""
    if spec.base in ADAPTERS:  # a memory library's knobs (docs/memory-libraries.md)
        from ..adapters.registry import make_adapter

        return make_adapter(spec.base, {**spec.params, "name": spec.name}, options)
    if spec.params.get("unit") == "turn":
        inner = {k: v for k, v in spec.params.items() if k != "unit"}
        base = build(VariantSpec(spec.name, spec.base, inner))
        # the run's --retrieval-eval-verify (settings.Settings.verify): a kept turn index
        # rehashed under "full"
        full = _option(options, ("verify",), "stamp") == "full"
        unit = TurnUnit(spec.name, base, "full" if full else "stamp")
        unit.params = dict(spec.params)
        return cast("Retriever", unit)  # rank returns Memory items (docs/memories.md)
    if spec.base == "bm25":
        bm25 = BM25Retriever()
        bm25.name = spec.name
        return bm25
    if spec.base == "hybrid":
        return HybridVariant(spec)
    if spec.base == "fts":
        return FtsVariant(spec)
    return SemanticFloat32(spec)


def make_variant(name: str, options: object = None) -> Retriever:
    """The retriever a what-if name describes (:class:`VariantError` when it is bad);
    ``options``: the run's settings, for the memory libraries' adapters."""
    return build(parse_variant(name), options)
