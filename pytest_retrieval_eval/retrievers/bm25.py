"""LongMemEval's BM25 baseline (``rank_bm25.BM25Okapi`` over ``text.split()``), vectorised.

Same floats and the same ranking as BM25Okapi, several times faster (the index:
:mod:`.bm25_index`); per-text term counts are cached across personas (:class:`DocTermCache`)
or read from a corpus's saved table (:mod:`.terms`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from ..io.checksums import read_committed, write_committed
from .base import CheckedScores, Persona, Query, _check_limit, texts_at
from .bm25_index import BM25Index, dump_index, load_index
from .terms import DocTerms, TermTable, count_terms

__all__ = ["BM25Index", "BM25Retriever", "DocTermCache", "LongMemEvalBM25Retriever"]


class DocTermCache:
    """Term counts of each distinct text, by text key, over one growing vocabulary.

    LongMemEval's personas share most sessions (LongMemEval_M: ~35,000 distinct texts in
    ~250,000 slots), so each text is split and counted once and a new persona's BM25 index is
    put together from cached counts (:meth:`BM25Index.from_doc_terms`). An LRU bounded by
    ``max_postings`` (distinct tokens summed over texts; 8 bytes each) keeps memory in check;
    vocabulary ids never change. The bound holds the turn texts of the full M
    (``bm25+unit:turn``'s first run: ~435,000 texts, ~43 million postings); at 24 million, a
    text pushed out was counted again for a later persona, 919,000 counts for 435,000 texts
    (benchmarks/RESULTS.md). With a ``table`` (a corpus's saved counts, :mod:`.terms`)
    its texts are never split at all; only texts outside it are counted. Thread-safe.
    """

    def __init__(self, max_postings: int = 64_000_000, table: TermTable | None = None) -> None:
        self.max_postings = max_postings
        #: Saved counts of a whole corpus (:mod:`.terms`): served as they are, never split.
        self.table = table
        self.vocab: dict[str, int] = table.vocab() if table is not None else {}
        self._docs: OrderedDict[str, DocTerms] = OrderedDict()
        self._postings = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, key: object) -> bool:
        return key in self._docs

    def get(self, keys: Sequence[str], texts: Callable[[], Sequence[str]],
            some: Callable[[list[int]], Sequence[str]] | None = None) -> list[DocTerms]:
        """Counts for ``keys`` in order; ``texts()`` (``texts()[i]`` has key ``keys[i]``) is
        called only when some key is not cached yet, and ``some(rows)`` (the texts of those
        rows alone), when given, in its place: only the texts not counted yet are made."""
        with self._lock:
            docs, table = self._docs, self.table
            found: list[DocTerms | None] = []
            for key in keys:
                hit = docs.get(key)
                if hit is not None:
                    docs.move_to_end(key)
                elif table is not None:
                    hit = table.doc_terms(key)
                found.append(hit)
            missing = [i for i, hit in enumerate(found) if hit is None]
            if missing:
                if some is not None:
                    made = some(missing)
                    if len(made) != len(missing):
                        raise ValueError(f"{len(missing)} rows asked, {len(made)} texts made")
                    text_of = dict(zip(missing, made, strict=True))
                else:
                    rows = texts()
                    if len(rows) != len(keys):
                        raise ValueError(f"{len(keys)} text keys for {len(rows)} texts")
                    text_of = {i: rows[i] for i in missing}
                for i in missing:
                    hit = docs.get(keys[i])  # a key twice in one persona: counted once
                    if hit is None:
                        hit = count_terms(text_of[i], self.vocab)
                        docs[keys[i]] = hit
                        self._postings += hit.terms.shape[1]
                    found[i] = hit
                keep = set(keys)
                while self._postings > self.max_postings and len(docs) > 1:
                    oldest = next(iter(docs))
                    if oldest in keep:
                        break  # the persona in hand stays whole
                    self._postings -= docs.pop(oldest).terms.shape[1]
            return [hit for hit in found if hit is not None]


class _IndexLRU:
    """Persona key -> BM25 index, the ``size`` most recently used; thread-safe (a build runs
    outside the lock: two threads may build one persona's index, and the last one is kept)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, BM25Index] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, build: Callable[[], BM25Index]) -> BM25Index:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
        built = build()
        with self._lock:
            self._items[key] = built
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return built


class BM25Retriever:
    """LongMemEval's BM25 baseline: BM25Okapi(k1 1.5, b 0.75, eps 0.25) over ``text.split()``.

    Ranking: scores descending, ties in row order (``argsort(-scores, kind="stable")``).
    Indexes are cached per persona key (an LRU of ``cache_size``). A persona that carries
    ``text_keys`` is indexed from per-text counts cached across personas (:class:`DocTermCache`),
    so only texts never seen before are split; with :meth:`use_table` (what the plugin does)
    the counts come from the corpus's saved table and no corpus text is split at all. The
    scores stay BM25Okapi's, bit for bit.
    """

    name = "bm25"
    needs_vectors = False  # ranks without embeddings: no model, no prep
    #: Every row and its BM25 score after the last ``rank`` (the tie-aware metrics).
    last_scores: Sequence[tuple[str, float]] | None = None

    def __init__(self, cache_size: int = 4, terms: DocTermCache | None = None) -> None:
        self.cache_size = cache_size
        self._terms = terms
        self._table: Callable[[], TermTable] | None = None
        self._indexes = _IndexLRU(cache_size)
        #: The last (persona key, question)'s rows best first and scores (:meth:`_ordered`).
        self._last_order: tuple[str, str, np.ndarray, np.ndarray] | None = None
        self._terms_lock = threading.Lock()  # only for making ``terms`` (may read a file)

    def use_table(self, load: Callable[[], TermTable]) -> None:
        """Serve text counts from a corpus's saved table, read by ``load()`` on first use; it
        replaces any counts kept so far (the table brings its own vocabulary)."""
        with self._terms_lock:
            self._table, self._terms = load, None
            self._last_order = None

    @property
    def terms(self) -> DocTermCache:
        """The text counts in use (the saved table is read here, once)."""
        with self._terms_lock:
            if self._terms is None:
                table = self._table() if self._table is not None else None
                self._terms = DocTermCache(table=table)
            return self._terms

    def index(self, persona: Persona) -> BM25Index:
        """The persona's index, built on first use."""
        return self._indexes.get(persona.key, lambda: self._build(persona))

    def _build(self, persona: Persona) -> BM25Index:
        keys = persona.text_keys
        if keys and len(keys) == len(persona.session_ids):
            terms, texts = self.terms, persona.texts
            return BM25Index.from_doc_terms(
                terms.get(keys, lambda: texts, partial(texts_at, texts)), terms.vocab)
        return BM25Index.build(list(persona.texts))

    def kept_index(self, persona: Persona, path: Path, verify: str = "stamp") -> BM25Index:
        """The persona's index as :meth:`index` gives it, kept in ``path`` across runs
        (a turn what-if's turn rows: :class:`.units.TurnUnit`): read back when the file
        matches its sidecar (:func:`..io.checksums.read_committed`), else built and written."""

        def build() -> BM25Index:
            data = read_committed(path, verify)
            kept = None if data is None else load_index(data, persona.key)
            if kept is not None and kept.n_docs == len(persona.session_ids):
                return kept
            built = self._build(persona)
            if built.vocab_ids is not None:
                vocab = list(self.terms.vocab)
                write_committed(path, dump_index(
                    built, [vocab[g] for g in built.vocab_ids.tolist()], persona.key))
            return built

        return self._indexes.get(persona.key, build)

    def top_rows(self, persona: Persona, query: Query,
                 count: int) -> tuple[np.ndarray, np.ndarray]:
        """The first ``count`` rows of :meth:`rank`'s order and their scores (what a turn
        what-if reads, :class:`.units.TurnUnit`); ``last_scores`` is not set."""
        _check_limit(count)
        self.last_scores = None
        order, scores = self._ordered(persona, query)
        return order[:count], scores[order[:count]]

    def _ordered(self, persona: Persona, query: Query) -> tuple[np.ndarray, np.ndarray]:
        """Every row's score and the rows best first (ties in row order), for the last
        (persona, question) asked: a turn what-if reads its top, reads it further when the
        top covers too few sessions, and explain reads its whole order, from one scoring."""
        last = self._last_order
        if last is not None and last[0] == persona.key and last[1] == query.question:
            return last[2], last[3]
        scores = self.index(persona).scores(query.question.split())
        order = np.argsort(-scores, kind="stable")
        self._last_order = (persona.key, query.question, order, scores)
        return order, scores

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _check_limit(limit)
        if not persona.session_ids:
            return []
        scores = self.index(persona).scores(query.question.split())
        order = np.argsort(-scores, kind="stable")
        # Every row and its score, best first: the tie-aware metrics read the equal scores.
        self.last_scores = CheckedScores((persona.session_ids[i], float(scores[i]))
                                         for i in order.tolist())
        return [persona.session_ids[i] for i in order[:lim].tolist()]


class LongMemEvalBM25Retriever:
    """``bm25`` under ``--retrieval-eval-protocol longmemeval``: LongMemEval's flat-bm25.

    ``BM25Okapi`` (k1 1.5, b 0.75, eps 0.25) over ``text.split(" ")``, the query split the same
    way (run_retrieval.py lines 107-110), and the order ``np.argsort(scores)[::-1]`` (line 111):
    numpy's default (unstable) sort, reversed, so tied items come out as upstream's do on the
    same numpy. Every corpus item is ranked (ids repeat when a session slot does).
    """

    name = "bm25"
    needs_vectors = False
    last_scores: Sequence[tuple[str, float]] | None = None

    def __init__(self, cache_size: int = 4) -> None:
        self.cache_size = cache_size
        self._indexes = _IndexLRU(cache_size)

    def index(self, persona: Persona) -> BM25Index:
        return self._indexes.get(persona.key, lambda: self._build(persona))

    @staticmethod
    def _build(persona: Persona) -> BM25Index:
        return BM25Index.build_single_space(list(persona.texts))

    def scores(self, persona: Persona, query: Query) -> np.ndarray:
        """``BM25Okapi(corpus).get_scores(question.split(" "))`` of the persona's items."""
        return self.index(persona).scores(query.question.split(" "))

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _check_limit(limit)
        if not persona.session_ids:
            return []
        scores = self.scores(persona, query)
        order = np.argsort(scores)[::-1]
        # Every item and its score, best first: the tie-aware metrics read the equal scores.
        self.last_scores = CheckedScores((persona.session_ids[i], float(scores[i]))
                                         for i in order.tolist())
        return [persona.session_ids[i] for i in order[:lim].tolist()]
