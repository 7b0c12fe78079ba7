"""vipune's hybrid search: Reciprocal Rank Fusion with k = 25 and the id tie-break
(``src/rrf.rs``), the recency decay (``src/temporal.rs``) and ``MemoryStore::search_hybrid``'s
candidate pool and truncation (``src/memory/search.rs``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np

from .fts import fts_search
from .limits import SearchResult, candidate_pool, validate_limit, validate_query, validate_recency
from .schema import Connectable
from .semantic import semantic_search

__all__ = [
    "DECAY_LAMBDA",
    "RRF_K",
    "HybridParts",
    "fuse_lists",
    "parse_rfc3339",
    "recency_decay",
    "rrf_fuse",
    "rrf_fuse_many",
    "search_hybrid",
    "search_hybrid_parts",
]

#: ``src/rrf.rs``: ``RrfConfig::default().k``.
RRF_K = 25
#: ``src/temporal.rs``: exponential decay rate per second of age.
DECAY_LAMBDA = 1e-6


def rrf_fuse(
    semantic_ids: Sequence[str], fts_ids: Sequence[str], k: int = RRF_K
) -> list[SearchResult]:
    """``rrf_fusion``: each list adds ``1 / (k + rank)`` (rank from 1); sort by score, then id.

    Ties are broken by id ascending, byte-wise (Rust ``String`` order = UTF-8 byte order).
    """
    return rrf_fuse_many((semantic_ids, fts_ids), k)


def rrf_fuse_many(lists: Sequence[Sequence[str]], k: int = RRF_K) -> list[SearchResult]:
    """:func:`rrf_fuse` over any number of ranked lists, in the order given: each list adds
    ``1 / (k + rank)`` (rank from 1) to an id's sum, list by list (so two lists sum as
    ``rrf_fusion`` does); sorted by score, then id ascending byte-wise (``src/rrf.rs``).
    ``RRF`` (:mod:`pytest_retrieval_eval.retrievers.fusion`) fuses any stores with it."""
    scores: dict[str, float] = {}
    for ranked in lists:
        for rank, mem_id in enumerate(ranked, start=1):
            contribution = 1.0 / (float(k) + float(rank))
            scores[mem_id] = scores.get(mem_id, 0.0) + contribution
    fused = sorted(scores.items(), key=lambda item: (-item[1], item[0].encode("utf-8")))
    return [(mem_id, score) for mem_id, score in fused]


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})"
)


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with an offset (chrono ``DateTime<Utc>`` ``FromStr``).

    Any number of fractional digits (vipune writes nanoseconds); precision past microseconds
    is dropped, which cannot change a whole-second age.
    """
    match = _RFC3339.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"Invalid timestamp format: {text!r} is not RFC 3339")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    micro = int((match.group(7) or "0")[:6].ljust(6, "0"))
    zone = match.group(8)
    if zone in ("Z", "z"):
        tz = timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
        if offset >= timedelta(hours=24):
            raise ValueError(f"Invalid timestamp format: {text!r} has an impossible offset")
        tz = timezone(sign * offset)
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError:
        raise ValueError(f"Invalid timestamp format: {text!r} is not a real date") from None


def recency_decay(created_at: str, now: datetime) -> float:
    """``DecayConfig::calculate_decay`` (exponential, lambda 1e-6/s, whole seconds of age)."""
    created = parse_rfc3339(created_at)
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    age = now - created
    age_seconds = age.days * 86_400 + age.seconds  # whole seconds (age >= 0 is all that counts)
    exponent = -DECAY_LAMBDA * float(max(age_seconds, 0))
    if exponent < -700.0:
        return 0.0
    if exponent > 700.0:
        return 1.0
    return math.exp(exponent)


@dataclass(frozen=True)
class HybridParts:
    """One hybrid search: the fused result and the two lists that were fused."""

    fused: list[SearchResult]  # truncated to the limit
    semantic: list[SearchResult]  # the semantic candidate list, ``pool`` long at most
    fts: list[SearchResult]  # the FTS5 candidate list, ``pool`` long at most
    #: Every fused candidate, best first, before the truncation to the limit (``fused`` is its
    #: first ``limit``): the ranks and the equal scores past the cut, for the report only.
    candidates: list[SearchResult] = field(default_factory=list)


def search_hybrid(
    conn: Connectable,
    vectors: np.ndarray,
    ids: Sequence[str],
    query: str,
    query_vector: np.ndarray,
    limit: int,
    recency_weight: float = 0.0,
    *,
    project_id: str,
    created_at: Mapping[str, str] | None = None,
    now: datetime | None = None,
    semantic_ranking: Sequence[SearchResult] | None = None,
) -> list[SearchResult]:
    """``MemoryStore::search_hybrid`` with a precomputed query vector.

    ``semantic_ranking``, when given, is this query's full :func:`semantic_search` ranking
    (every row): the stable sort makes its first ``pool`` entries exactly the semantic list,
    so a caller searching one query at several limits computes the cosine scan once.

    1. trim + validate the query, then the recency weight, then the limit (vipune's order);
    3. pool = clamp(limit * 10, 50, 10,000);
    4. semantic list over ``vectors``/``ids`` (the project's rows, scan order) and the BM25 list
       from the store's FTS5 index, each ``pool`` long;
    5. RRF (k = 25, id tie-break); 6. recency decay only when the weight is > 0
       (``created_at`` maps id -> RFC 3339, ``now`` defaults to the current time; the re-sort is
       stable, by score only); 7. truncate to ``limit``.
    """
    return search_hybrid_parts(
        conn, vectors, ids, query, query_vector, limit, recency_weight, project_id=project_id,
        created_at=created_at, now=now, semantic_ranking=semantic_ranking).fused


def search_hybrid_parts(
    conn: Connectable,
    vectors: np.ndarray,
    ids: Sequence[str],
    query: str,
    query_vector: np.ndarray,
    limit: int,
    recency_weight: float = 0.0,
    *,
    project_id: str,
    created_at: Mapping[str, str] | None = None,
    now: datetime | None = None,
    semantic_ranking: Sequence[SearchResult] | None = None,
    rrf_k: int = RRF_K,
    pool: int | None = None,
    fts_mode: str = "and",
) -> HybridParts:
    """:func:`search_hybrid`, keeping the two fused lists (for diagnostics).

    The defaults are vipune's. The what-if knobs (``hybrid+...`` retrievers) change one rule
    each: ``rrf_k`` the RRF constant (vipune: 25, ``src/rrf.rs``), ``pool`` a fixed candidate
    pool instead of ``clamp(limit * 10, 50, 10000)`` (``src/memory/search.rs``), ``fts_mode``
    ``"or"`` the FTS5 query's operator (:func:`escape_fts_query`). With a recency weight, a row
    whose ``created_at`` is missing or empty decays to 0 (the oldest possible).
    """
    trimmed = validate_query(query)
    weight = validate_recency(recency_weight)
    validate_limit(limit)
    size = candidate_pool(limit) if pool is None else validate_limit(pool)
    if semantic_ranking is not None:
        semantic = list(semantic_ranking[:size])
    else:
        semantic = semantic_search(vectors, ids, query_vector, size)
    bm25 = fts_search(conn, trimmed, project_id, size, mode=fts_mode)
    if weight > 0.0:
        if created_at is None:
            raise ValueError("a recency weight above 0 needs created_at for every row")
        if now is None:
            now = datetime.now(timezone.utc)
    fused = fuse_lists([i for i, _ in semantic], [i for i, _ in bm25], rrf_k, weight,
                       created_at=created_at, now=now)
    return HybridParts(fused[:limit], semantic, bm25, fused)


def fuse_lists(semantic_ids: Sequence[str], fts_ids: Sequence[str], rrf_k: int = RRF_K,
               recency_weight: float = 0.0, *, created_at: Mapping[str, str] | None = None,
               now: datetime | None = None) -> list[SearchResult]:
    """Steps 5 and 6 of :func:`search_hybrid_parts`: RRF of the two lists, then (weight
    above 0) the recency re-sort, stable by score. Every fused candidate, best first."""
    fused = rrf_fuse(semantic_ids, fts_ids, rrf_k)
    if recency_weight > 0.0:
        dates = created_at if created_at is not None else {}
        when = now if now is not None else datetime.now(timezone.utc)
        rescored = [
            (mem_id, (1.0 - recency_weight) * score + recency_weight * (
                recency_decay(dates[mem_id], when) if dates.get(mem_id) else 0.0))
            for mem_id, score in fused
        ]
        fused = sorted(rescored, key=lambda item: -item[1])
    return fused
