"""vipune's own search paths, reproduced over a persona: ``hybrid``, ``semantic``, ``fts``.

The arithmetic lives in :mod:`pytest_retrieval_eval.vipune` (THE vipune reference); these
classes adapt it to the :class:`~.base.Retriever` protocol.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .. import vipune
from ..vipune import store as store_mod
from .base import (
    CheckedScores,
    Persona,
    Query,
    _query_vector,
    _store_error,
    _vipune_limit,
    _wrap_vipune_error,
)
from .fused_ties import FusionInputs

__all__ = ["FtsRetriever", "HybridRetriever", "SemanticRetriever"]

T = TypeVar("T")


class HybridRetriever:
    """vipune ``search_hybrid`` reference: recency 0, RRF k = 25, pool clamp, id tie-break."""

    name = "hybrid"
    #: The candidate pool grows with ``limit`` (``limit*10`` clamped to [50, 10000]), so the top
    #: 5 of a limit-10 search may differ from a limit-5 search: rank once per pool size.
    limit_sensitive = True
    #: ``rank`` searches the persona's store: it is built (once) before the query is timed.
    needs_store = True

    #: vipune's rules; the ``hybrid+...`` what-if retrievers (:mod:`.variants`) change them.
    rrf_k: int = vipune.RRF_K
    pool: int | None = None  # None: vipune's clamp(limit * 10, 50, 10000)
    fts_mode: str = "and"
    recency: float = 0.0

    def __init__(self, project_id: str = store_mod.PROJECT_ID) -> None:
        self.project_id = project_id
        #: The semantic and FTS lists the last ``rank`` fused (ids, best first), for the
        #: diagnostics ("fused top k equals semantic top k").
        self.last_components: dict[str, list[str]] | None = None
        #: Every fused candidate and its RRF score, best first (the returned ids are its first
        #: ``limit``): equal scores past the cut, for the tie-aware metrics.
        self.last_scores: Sequence[tuple[str, float]] | None = None
        #: Gives the lists the last ``rank`` fused and the fusion (the ties it inherits from
        #: them), when the tie report asks.
        self.last_fusion: Callable[[], FusionInputs] | None = None
        #: Gives, for the ids asked about, the query words each matched in the store's FTS5
        #: table (:func:`.vipune.fts_matched`), when ``retrieval-eval explain``'s facts ask.
        self.last_matched: Callable[[Sequence[str]], vipune.FtsMatch] | None = None
        #: The persona store the last ``rank`` searched: what a report records so that
        #: ``retrieval-eval explain`` asks it for the matched words (issue 48, item 11).
        self.last_store: Callable[[], Path] | None = None
        # The last query's full cosine ranking: asked again at another limit (another pool
        # size), the same query reuses it instead of scanning every row again.
        self._semantic: tuple[tuple[str, str, bytes], list[vipune.SearchResult]] | None = None
        #: The persona store's read-only connection and the FTS5 tokenizer, kept across
        #: calls (:func:`_kept`): shared by the searches and the facts read after them.
        self._conn = vipune.StoreConnection()
        self._tokenizer = vipune.FtsTokenizer()

    def _semantic_ranking(self, persona: Persona, query: Query,
                          qvec: np.ndarray) -> list[vipune.SearchResult] | None:
        if not persona.session_ids:
            return None  # nothing to scan
        key = (persona.key, query.question, np.asarray(qvec, dtype=np.float32).tobytes())
        if self._semantic is None or self._semantic[0] != key:
            # Every row, past vipune's 10,000 too: the pool takes its first rows (the same
            # as a capped search), the tie report reads a tie running past the pool's cut.
            ranking = vipune.semantic_ranking(persona.vectors, persona.session_ids, qvec)
            self._semantic = (key, ranking)
        return self._semantic[1]

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _vipune_limit(limit)
        qvec = _query_vector(self.name, persona, query)
        self.last_components = None
        self.last_scores = None
        self.last_fusion = None
        self.last_matched = None
        self.last_store = None
        recency = self._recency_inputs(persona, query)
        if self.recency > 0.0 and recency.get("now") is None:
            recency["now"] = datetime.now(timezone.utc)  # one "now" for the re-fusions too
        try:
            semantic = self._semantic_ranking(persona, query, qvec)
            parts = vipune.search_hybrid_parts(
                self._conn.get(persona.store_path()),
                persona.vectors,
                persona.session_ids,
                query.question,
                qvec,
                lim,
                self.recency,
                project_id=self.project_id,
                semantic_ranking=semantic,
                rrf_k=self.rrf_k,
                pool=self.pool,
                fts_mode=self.fts_mode,
                **recency,
            )
        except (vipune.VipuneInputError, ValueError) as exc:
            raise _wrap_vipune_error(self.name, query, exc) from None
        except sqlite3.Error as exc:
            raise _store_error(self.name, query, exc) from None
        self.last_components = {"semantic": [i for i, _ in parts.semantic],
                                "fts": [i for i, _ in parts.fts]}
        self.last_scores = CheckedScores(parts.candidates or parts.fused)
        self.last_fusion = partial(self._fusion_inputs, persona, query,
                                   semantic or parts.semantic, parts.fts, lim, recency)
        self.last_matched = partial(_matched, self, persona, query,
                                    [i for i, _ in parts.fts] if self.fts_mode == "and"
                                    else ())
        self.last_store = persona.store_path
        return [mem_id for mem_id, _ in parts.fused]

    def close(self) -> None:
        """End the kept store connection and tokenizer (the run's end; reopened if used)."""
        _close(self)

    def _fusion_inputs(self, persona: Persona, query: Query,
                       semantic: Sequence[vipune.SearchResult],
                       returned: list[vipune.SearchResult], lim: int,
                       recency: dict[str, Any]) -> FusionInputs:
        """The lists a search fused, each running to the end of the tie its cap cuts (for
        FTS one more query, when its LIMIT was reached), and the fusion itself: for the
        ties the fused ranking inherits (:mod:`.fused_ties`). Called by the tie report,
        after the search's timing."""
        size = vipune.candidate_pool(lim) if self.pool is None else self.pool
        try:
            past = vipune.fts_tied_past(self._conn.get(persona.store_path()), query.question,
                                        self.project_id, returned, size, mode=self.fts_mode)
        except sqlite3.Error as exc:
            raise _store_error(self.name, query, exc) from None
        fts = [*returned, *past]
        end = min(size, len(semantic))
        while 0 < end < len(semantic) and semantic[end][1] == semantic[end - 1][1]:
            end += 1
        rrf_k, weight = self.rrf_k, self.recency
        created_at, now = recency.get("created_at"), recency.get("now")

        def fuse(lists: Sequence[Sequence[str]]) -> list[vipune.SearchResult]:
            return vipune.fuse_lists(lists[0], lists[1], rrf_k, weight,
                                     created_at=created_at, now=now)

        return FusionInputs(
            lists=(([i for i, _ in semantic[:end]], [s for _, s in semantic[:end]]),
                   ([i for i, _ in fts], [s for _, s in fts])),
            caps=(size, size), fuse=fuse, fixed=created_at if weight > 0.0 else None)

    def _recency_inputs(self, persona: Persona, query: Query) -> dict[str, Any]:
        """Rows' dates and "now" for a recency weight above 0 (none at vipune's 0)."""
        return {}


class SemanticRetriever:
    """vipune ``Database::search`` reference: float64 cosine, stable ties, top ``limit``."""

    name = "semantic"
    last_scores: Sequence[tuple[str, float]] | None = None

    def __init__(self) -> None:
        #: Every row and its cosine, best first (the returned ids are its first ``limit``):
        #: the stable sort makes the top ``limit`` this list's prefix, so the equal scores
        #: past the cut come for free.
        self.last_scores: Sequence[tuple[str, float]] | None = None

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _vipune_limit(limit)
        qvec = _query_vector(self.name, persona, query)
        self.last_scores = None
        try:
            # Every row, past vipune's 10,000 too: the first ``lim`` are vipune's answer,
            # the rest lets a tie running past the cut (or past 10,000) be seen.
            results = vipune.semantic_ranking(persona.vectors, persona.session_ids, qvec)
        except ValueError as exc:
            raise _wrap_vipune_error(self.name, query, exc) from None
        self.last_scores = CheckedScores(results)
        return [mem_id for mem_id, _ in results[:lim]]

    def top_rows(self, persona: Persona, query: Query,
                 count: int) -> tuple[np.ndarray, np.ndarray]:
        """The first ``count`` rows (at most vipune's cap) of :meth:`rank`'s order and their
        cosines, bit for bit, without ranking every row (:func:`.vipune.semantic_top`):
        what a turn what-if reads (:class:`.units.TurnUnit`). ``last_scores`` is not set."""
        lim = _vipune_limit(count)
        return self._by_rule(persona, query, lambda m, q: vipune.semantic_top(m, q, lim))

    def group_order(self, persona: Persona, query: Query, groups: np.ndarray) -> np.ndarray:
        """The groups of the rows (``groups[i]``: row ``i``'s) in the order of their first
        row in :meth:`rank`'s order of every row (:func:`.vipune.semantic_group_order`): a
        turn what-if's sessions, best first, without ranking every turn by the rule."""
        return self._by_rule(persona, query,
                             lambda m, q: vipune.semantic_group_order(m, q, groups))

    def _by_rule(self, persona: Persona, query: Query,
                 answer: Callable[[np.ndarray, np.ndarray], T]) -> T:
        """``answer(vectors, query vector)`` of the persona's rows, its errors in the
        retriever's words; ``last_scores`` is not set."""
        qvec = _query_vector(self.name, persona, query)
        self.last_scores = None
        try:
            return answer(persona.vectors, qvec)
        except ValueError as exc:
            raise _wrap_vipune_error(self.name, query, exc) from None


class FtsRetriever:
    """vipune ``Database::search_bm25`` reference: escaped words ANDed, FTS5 ``bm25()``."""

    name = "fts"
    needs_store = True
    #: ``rank(limit)`` is the first ``limit`` rows of ``rank`` at any larger limit, ties
    #: included: FTS_SQL always has a ``LIMIT ?``, so SQLite sorts its rows into an
    #: ephemeral index whose keys end in a sequence number (select.c, ``pushOntoSorter``:
    #: ``bSeq`` is set unless the unlimited sorter is used), and when the index holds more
    #: than the limit it drops its last key: tied rows keep the scan's order, and a smaller
    #: limit drops only rows after the ones it keeps. What a turn what-if's budget read
    #: relies on (:meth:`.units.TurnUnit.first_memories`); tests/retrievers/test_units.py
    #: checks it on tied rows.
    limit_is_prefix = True
    needs_vectors = False  # ranks without embeddings: no model, no prep
    #: ``and``: vipune's quoted words ANDed; ``or`` is the ``fts+mode:or`` what-if.
    mode: str = "and"

    def __init__(self, project_id: str = store_mod.PROJECT_ID) -> None:
        self.project_id = project_id
        #: The returned rows and their scores (minus FTS5's ``bm25()``, so higher is better).
        self.last_scores: Sequence[tuple[str, float]] | None = None
        #: Gives the rows the LIMIT left out that tie with the last one, scored the same way
        #: (one more query, when the LIMIT was reached), when the tie report asks: a tie
        #: running past the cut is seen.
        self.last_tied_past: Callable[[], list[tuple[str, float]]] | None = None
        #: As :attr:`HybridRetriever.last_matched`: the query words each row matched.
        self.last_matched: Callable[[Sequence[str]], vipune.FtsMatch] | None = None
        #: As :attr:`HybridRetriever.last_store`: the store the last ``rank`` searched.
        self.last_store: Callable[[], Path] | None = None
        #: As :class:`HybridRetriever`'s: the store's connection and the tokenizer, kept.
        self._conn = vipune.StoreConnection()
        self._tokenizer = vipune.FtsTokenizer()

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _vipune_limit(limit)
        self.last_scores = None
        self.last_tied_past = None
        self.last_matched = None
        self.last_store = None
        try:
            results = vipune.fts_search(self._conn.get(persona.store_path()), query.question,
                                        self.project_id, lim, mode=self.mode)
        except vipune.VipuneInputError as exc:  # a NUL in the question, as vipune fails
            raise _wrap_vipune_error(self.name, query, exc) from None
        except sqlite3.Error as exc:
            raise _store_error(self.name, query, exc) from None
        self.last_scores = CheckedScores((mem_id, -score) for mem_id, score in results)
        self.last_tied_past = partial(self._tied_past, persona, query, results, lim)
        self.last_matched = partial(_matched, self, persona, query,
                                    [mem_id for mem_id, _ in results] if self.mode == "and"
                                    else ())
        self.last_store = persona.store_path
        return [mem_id for mem_id, _ in results]

    def close(self) -> None:
        """End the kept store connection and tokenizer (the run's end; reopened if used)."""
        _close(self)

    def _tied_past(self, persona: Persona, query: Query, results: list[vipune.SearchResult],
                   lim: int) -> list[tuple[str, float]]:
        try:
            past = vipune.fts_tied_past(self._conn.get(persona.store_path()), query.question,
                                        self.project_id, results, lim, mode=self.mode)
        except sqlite3.Error as exc:
            raise _store_error(self.name, query, exc) from None
        return [(mem_id, -score) for mem_id, score in past]


def _matched(retriever: HybridRetriever | FtsRetriever, persona: Persona, query: Query,
             matched_all: Sequence[str], ids: Sequence[str]) -> vipune.FtsMatch:
    """The query words each of ``ids`` matched in the persona's store, asked after the
    search's timing (``last_matched``) on the search's own connection; the rows of vipune's
    AND list (``matched_all``) matched every word, and FTS5 is asked only about the others."""
    try:
        return vipune.fts_matched(retriever._conn.get(persona.store_path()), query.question,
                                  retriever.project_id, ids, matched_all=matched_all,
                                  tokenizer=retriever._tokenizer)
    except sqlite3.Error as exc:
        raise _store_error(retriever.name, query, exc) from None


def _close(retriever: HybridRetriever | FtsRetriever) -> None:
    retriever._conn.close()
    retriever._tokenizer.close()
