"""The Retriever protocol and the built-in retrievers.

A retriever ranks a persona's memory rows (session ids) for one query. Built-ins:

``hybrid``    vipune's ``search_hybrid`` (reference: semantic in numpy + FTS5 on the persona's
              store, RRF k = 25, recency 0) - the measured path, model-free lane.
``semantic``  vipune's ``Database::search`` (cosine scan, stable ties).
``fts``       vipune's ``Database::search_bm25`` (FTS5 bm25 on the persona's store).
``bm25``      LongMemEval's own baseline, ``rank_bm25.BM25Okapi`` over ``text.split()``,
              re-implemented vectorised (same floats, same ranking, several times faster).
``oracle``    gold first, then the rest: a pipeline self-check (recall 1 when gold is present).
``vipune``    the real vipune binary, driven through its command line on the persona's store.

User retrievers are loaded from ``"package.module:attr"`` (:func:`load_dotted`). Built-ins
never return duplicates; a user retriever's duplicates are left to ``metrics``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, overload, runtime_checkable

import numpy as np

from . import store as store_mod
from . import vipune
from .errors import RetrievalEvalError, RetrieverError, one_line
from .terms import DocTerms, TermTable, count_terms

__all__ = [
    "REGISTRY",
    "BM25Index",
    "BM25Retriever",
    "DocTermCache",
    "DocTerms",
    "FtsRetriever",
    "FunctionRetriever",
    "HybridRetriever",
    "LazyTexts",
    "OracleRetriever",
    "Persona",
    "Query",
    "Retriever",
    "SemanticRetriever",
    "VipuneBinaryRetriever",
    "check_compatible",
    "get_retriever",
    "load_dotted",
    "resolve_vipune_binary",
]


# --------------------------------------------------------------------------- shared types


@dataclass
class Persona:
    """One question's memory: rows in store order, row ``i`` <-> ``session_ids[i]``."""

    key: str  # content address of the persona (ids, text keys, dates, model fingerprint)
    session_ids: tuple[str, ...]
    created_at: tuple[str, ...]
    vectors: np.ndarray  # (n, dim) float32
    texts: Sequence[str]  # row contents (lazily loaded where possible)
    store_path: Callable[[], Path]  # builds (or reuses) the vipune store, returns its path
    #: ``text_key(texts[i])`` per row (``pairs.text_key``), or empty when unknown. When given,
    #: retrievers may cache per-text work under these keys across personas (``bm25`` does).
    text_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Query:
    """One question; ``gold`` is for ``oracle`` only (user retrievers must not use it)."""

    question_id: str
    question_type: str
    question: str
    question_date: str
    vector: np.ndarray | None  # None only for retrievers that embed themselves (vipune)
    gold: tuple[str, ...]


class LazyTexts(Sequence[str]):
    """A persona's row texts, loaded by ``loader`` on first use (then kept)."""

    def __init__(self, loader: Callable[[], Sequence[str]]) -> None:
        self._loader = loader
        self._texts: Sequence[str] | None = None
        self._lock = threading.Lock()

    def _load(self) -> Sequence[str]:
        if self._texts is None:
            with self._lock:
                if self._texts is None:
                    self._texts = self._loader()
        return self._texts

    @property
    def loaded(self) -> bool:
        """Whether the texts have been read."""
        return self._texts is not None

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._load()[index]

    def __len__(self) -> int:
        return len(self._load())


@runtime_checkable
class Retriever(Protocol):
    """Ranks a persona's session ids for a query, best first, at most ``limit`` of them.

    Optional attributes the harness reads: ``needs_store = True`` when ``rank`` calls
    ``persona.store_path()`` (the store is then built before the query is timed, so a
    one-time build never counts as query latency); ``limit_sensitive = True`` when the top
    results depend on ``limit`` beyond a cut (each cut-off k is then ranked on its own);
    ``needs_vectors = False`` when ``rank`` never reads ``persona.vectors`` or
    ``query.vector`` (when no retriever of a run needs them, no model is loaded).
    """

    name: str

    def rank(self, persona: Persona, query: Query, limit: int) -> Sequence[str]: ...


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise ValueError(f"limit must be a positive int, got {limit!r}")
    return int(limit)


def _vipune_limit(limit: int) -> int:
    """vipune's paths never ask for more than MAX_SEARCH_LIMIT rows in one call."""
    return min(_check_limit(limit), vipune.MAX_SEARCH_LIMIT)


def _query_vector(name: str, persona: Persona, query: Query) -> np.ndarray:
    if query.vector is None:
        raise RetrieverError(
            f"{name}: question {query.question_id} has no query vector; "
            "run prep (model-free lane) or enable the model lane"
        )
    vec = np.asarray(query.vector, dtype=np.float32)
    width = np.asarray(persona.vectors).shape[1] if np.asarray(persona.vectors).ndim == 2 else -1
    if vec.ndim != 1 or (len(persona.session_ids) and vec.shape[0] != width):
        raise RetrieverError(
            f"{name}: question {query.question_id}: query vector shape {vec.shape} does not "
            f"match the persona's vectors (width {width}); query and rows need the same model"
        )
    return vec


def _wrap_vipune_error(name: str, query: Query, exc: Exception) -> RetrieverError:
    return RetrieverError(f"{name}: question {query.question_id}: {one_line(exc)}")


def _store_error(name: str, query: Query, exc: Exception) -> RetrieverError:
    return RetrieverError(
        f"{name}: question {query.question_id}: the persona store cannot be searched "
        f"({type(exc).__name__}: {one_line(exc)}); delete the store cache directory to rebuild it"
    )


# --------------------------------------------------------------------------- vipune reference


class HybridRetriever:
    """vipune ``search_hybrid`` reference: recency 0, RRF k = 25, pool clamp, id tie-break."""

    name = "hybrid"
    #: The candidate pool grows with ``limit`` (``limit*10`` clamped to [50, 10000]), so the top
    #: 5 of a limit-10 search may differ from a limit-5 search: rank once per pool size.
    limit_sensitive = True
    #: ``rank`` searches the persona's store: it is built (once) before the query is timed.
    needs_store = True

    def __init__(self, project_id: str = store_mod.PROJECT_ID) -> None:
        self.project_id = project_id
        # The last query's full cosine ranking: asked again at another limit (another pool
        # size), the same query reuses it instead of scanning every row again.
        self._semantic: tuple[tuple[str, str, bytes], list[vipune.SearchResult]] | None = None

    def _semantic_ranking(self, persona: Persona, query: Query,
                          qvec: np.ndarray) -> list[vipune.SearchResult] | None:
        n_rows = len(persona.session_ids)
        if n_rows == 0 or n_rows > vipune.MAX_SEARCH_LIMIT:
            return None  # nothing to scan, or more rows than one vipune call may ask for
        key = (persona.key, query.question, np.asarray(qvec, dtype=np.float32).tobytes())
        if self._semantic is None or self._semantic[0] != key:
            ranking = vipune.semantic_search(persona.vectors, persona.session_ids, qvec, n_rows)
            self._semantic = (key, ranking)
        return self._semantic[1]

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _vipune_limit(limit)
        qvec = _query_vector(self.name, persona, query)
        try:
            results = vipune.search_hybrid(
                persona.store_path(),
                persona.vectors,
                persona.session_ids,
                query.question,
                qvec,
                lim,
                0.0,
                project_id=self.project_id,
                semantic_ranking=self._semantic_ranking(persona, query, qvec),
            )
        except (vipune.VipuneInputError, ValueError) as exc:
            raise _wrap_vipune_error(self.name, query, exc) from None
        except sqlite3.Error as exc:
            raise _store_error(self.name, query, exc) from None
        return [mem_id for mem_id, _ in results]


class SemanticRetriever:
    """vipune ``Database::search`` reference: float64 cosine, stable ties, top ``limit``."""

    name = "semantic"

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _vipune_limit(limit)
        qvec = _query_vector(self.name, persona, query)
        try:
            results = vipune.semantic_search(persona.vectors, persona.session_ids, qvec, lim)
        except ValueError as exc:
            raise _wrap_vipune_error(self.name, query, exc) from None
        return [mem_id for mem_id, _ in results]


class FtsRetriever:
    """vipune ``Database::search_bm25`` reference: escaped words ANDed, FTS5 ``bm25()``."""

    name = "fts"
    needs_store = True
    needs_vectors = False  # ranks without embeddings: no model, no prep

    def __init__(self, project_id: str = store_mod.PROJECT_ID) -> None:
        self.project_id = project_id

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _vipune_limit(limit)
        try:
            results = vipune.fts_search(persona.store_path(), query.question, self.project_id, lim)
        except sqlite3.Error as exc:
            raise _store_error(self.name, query, exc) from None
        return [mem_id for mem_id, _ in results]


# --------------------------------------------------------------------------- BM25 (LongMemEval)


@dataclass(frozen=True)
class BM25Index:
    """``rank_bm25.BM25Okapi`` statistics of one corpus, as arrays.

    ``lookup`` maps query tokens to term ids (None for a token not in the corpus). Term ids
    follow first appearance (the order of BM25Okapi's ``idf`` dict) for :meth:`build`, and the
    shared vocabulary's order for :meth:`from_doc_terms`; either way the idf sum is taken in
    first-appearance order, so the floats are BM25Okapi's. Postings of term ``g`` are
    ``docs[indptr[g]:indptr[g+1]]`` (ascending) with term frequencies ``tfs[...]``. ``idf``
    already has the epsilon floor applied.
    """

    n_docs: int
    lookup: Callable[[Sequence[str]], list[int | None]]
    idf: np.ndarray  # (n_terms,) float64
    base: np.ndarray  # (n_docs,) float64: k1 * (1 - b + b * doc_len / avgdl)
    indptr: np.ndarray  # (n_terms + 1,) int64
    docs: np.ndarray  # postings: doc index
    tfs: np.ndarray  # postings: term frequency (int64)
    k1: float
    average_idf: float

    @classmethod
    def build(
        cls, texts: Sequence[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> BM25Index:
        """Index ``[t.split() for t in texts]`` exactly as BM25Okapi would (vectorised)."""
        try:
            gids, doc_of_tok, lookup = _tokenize_arrow(texts)
        except (ImportError, UnicodeError, ValueError, TypeError):
            gids, doc_of_tok, lookup = _tokenize_python(texts)
        return cls._from_tokens(len(texts), gids, doc_of_tok, lookup, k1, b, epsilon)

    @classmethod
    def build_reference(
        cls, texts: Sequence[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> BM25Index:
        """Same index through a plain-Python tokenizer (no Arrow): the fallback and a check."""
        gids, doc_of_tok, lookup = _tokenize_python(texts)
        return cls._from_tokens(len(texts), gids, doc_of_tok, lookup, k1, b, epsilon)

    @classmethod
    def _from_tokens(
        cls,
        n_docs: int,
        gids: np.ndarray,
        doc_of_tok: np.ndarray,
        lookup: Callable[[Sequence[str]], list[int | None]],
        k1: float,
        b: float,
        epsilon: float,
    ) -> BM25Index:
        n_terms = int(gids.max()) + 1 if gids.size else 0
        n_tok = int(gids.size)
        doc_len = np.bincount(doc_of_tok, minlength=n_docs).astype(np.int64)
        # One posting per (term, doc): sort term-major keys (int32 when they fit), count runs.
        scale = max(n_docs, 1)
        if n_tok:
            key_type = np.int32 if n_terms * scale < 2**31 else np.int64
            keys = gids.astype(key_type, copy=False) * key_type(scale)
            keys += doc_of_tok.astype(key_type, copy=False)
            keys.sort()
            new_run = np.empty(n_tok, dtype=bool)
            new_run[0] = True
            np.not_equal(keys[1:], keys[:-1], out=new_run[1:])
            starts = np.flatnonzero(new_run)
            uniq = keys[starts]
            post_terms = uniq // key_type(scale)
            docs = (uniq - post_terms * key_type(scale)).astype(np.int64)
            tfs = np.diff(starts, append=n_tok).astype(np.int64)
        else:
            post_terms = docs = tfs = np.zeros(0, dtype=np.int64)
        df = np.bincount(post_terms, minlength=n_terms)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        return cls._from_postings(
            n_docs, doc_len, indptr, docs, tfs, None, lookup, k1, b, epsilon
        )

    @classmethod
    def from_doc_terms(
        cls,
        doc_terms: Sequence[DocTerms],
        vocab: Mapping[str, int],
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
    ) -> BM25Index:
        """The index of documents given by their cached term counts (:class:`DocTermCache`).

        Same floats as :meth:`build` over the documents' texts: a term's first appearance is
        (first document holding it, its rank among that document's distinct tokens).
        """
        n_docs = len(doc_terms)
        doc_len = np.fromiter((d.length for d in doc_terms), dtype=np.int64, count=n_docs)
        sizes = np.fromiter((d.terms.shape[1] for d in doc_terms), dtype=np.int64, count=n_docs)
        n_post = int(sizes.sum())
        if n_post == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls._from_postings(n_docs, doc_len, np.zeros(1, dtype=np.int64), empty,
                                      empty, None, lambda tokens: [None] * len(tokens),
                                      k1, b, epsilon)
        cat = np.concatenate([d.terms for d in doc_terms], axis=1)
        ids = cat[0].astype(np.int64)
        doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), sizes)
        starts_of_doc = np.zeros(n_docs, dtype=np.int64)
        np.cumsum(sizes[:-1], out=starts_of_doc[1:])
        rank_in_doc = np.arange(n_post, dtype=np.int64) - np.repeat(starts_of_doc, sizes)
        # Term-major postings, documents ascending within a term: (term, doc) pairs are
        # unique (a document lists each of its tokens once), so any sort of this key will do.
        # Fast path: the posting's position rides in the low bits of one int64 sort key.
        pair_key = ids * n_docs + doc_of
        bits = max(n_post - 1, 1).bit_length()
        if (int(pair_key.max()) + 1).bit_length() + bits <= 62:
            packed = (pair_key << bits) | np.arange(n_post, dtype=np.int64)
            packed.sort()
            order = packed & ((1 << bits) - 1)
            sorted_pairs = packed >> bits
        else:  # pragma: no cover - needs a vocabulary of billions
            order = np.argsort(pair_key)
            sorted_pairs = pair_key[order]
        sorted_ids = sorted_pairs // n_docs
        docs = sorted_pairs - sorted_ids * n_docs
        tfs = cat[1][order].astype(np.int64)
        new_term = np.empty(n_post, dtype=bool)
        new_term[0] = True
        np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=new_term[1:])
        starts = np.flatnonzero(new_term)
        terms = sorted_ids[starts]  # ascending vocabulary ids: term g of this index
        indptr = np.append(starts, n_post).astype(np.int64)
        # First appearance: the first posting of a term is its first document; there, the
        # token's rank among the document's distinct tokens (kept in first-appearance order).
        first_rank = rank_in_doc[order][starts]
        appearance = np.argsort(docs[starts] * (int(sizes.max()) + 1) + first_rank)
        n_terms = int(terms.size)

        def lookup(tokens: Sequence[str]) -> list[int | None]:
            out: list[int | None] = []
            for token in tokens:
                gid = vocab.get(token)
                if gid is None:
                    out.append(None)
                    continue
                pos = int(np.searchsorted(terms, gid))
                out.append(pos if pos < n_terms and int(terms[pos]) == gid else None)
            return out

        return cls._from_postings(
            n_docs, doc_len, indptr, docs, tfs, appearance, lookup, k1, b, epsilon
        )

    @classmethod
    def _from_postings(
        cls,
        n_docs: int,
        doc_len: np.ndarray,
        indptr: np.ndarray,
        docs: np.ndarray,
        tfs: np.ndarray,
        appearance: np.ndarray | None,
        lookup: Callable[[Sequence[str]], list[int | None]],
        k1: float,
        b: float,
        epsilon: float,
    ) -> BM25Index:
        """idf and length norms from postings; ``appearance`` lists term ids in
        first-appearance order (None: the ids are already in that order)."""
        n_terms = int(indptr.size) - 1
        df = np.diff(indptr)
        total = int(doc_len.sum())
        if n_docs == 0 or total == 0 or n_terms == 0:
            # rank_bm25 divides by zero here; every score is 0 and the ranking is row order.
            return cls(
                n_docs, lookup, np.zeros(n_terms), np.ones(n_docs), indptr, docs, tfs, k1, 0.0
            )
        # idf per distinct document frequency, with math.log as BM25Okapi does.
        table = np.array(
            [math.log(n_docs - f + 0.5) - math.log(f + 0.5) for f in range(n_docs + 1)]
        )
        raw = table[df]
        in_order = raw if appearance is None else raw[appearance]
        idf_sum = float(np.add.accumulate(in_order)[-1])  # left to right, first appearance
        average_idf = idf_sum / n_terms
        eps = epsilon * average_idf
        idf = np.where(raw < 0, eps, raw)
        avgdl = total / n_docs
        base = k1 * (1 - b + b * doc_len / avgdl)
        return cls(n_docs, lookup, idf, base, indptr, docs, tfs, k1, average_idf)

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """``BM25Okapi.get_scores(query_tokens)``: same float64 operations in the same order."""
        score = np.zeros(self.n_docs)
        if not query_tokens or self.n_docs == 0:
            return score
        for gid in self.lookup(query_tokens):
            if gid is None:
                continue  # BM25Okapi adds 0 * (...) for an unknown word
            weight = float(self.idf[gid])
            if weight == 0.0:
                continue  # ``idf or 0`` -> adds zeros
            lo, hi = int(self.indptr[gid]), int(self.indptr[gid + 1])
            docs = self.docs[lo:hi]
            tf = self.tfs[lo:hi]
            score[docs] += weight * (tf * (self.k1 + 1) / (tf + self.base[docs]))
        return score


#: Characters a white-space splitter might disagree on: C0/C1 controls, the Unicode spaces,
#: separators and zero-width characters.
_WS_PROBES = "".join(
    chr(c)
    for lo, hi in (
        (0x00, 0x20),
        (0x7F, 0xA0),
        (0x1680, 0x1680),
        (0x180E, 0x180E),
        (0x2000, 0x200F),
        (0x2028, 0x202F),
        (0x205F, 0x2064),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    )
    for c in range(lo, hi + 1)
)


#: ``str.split`` white space that Arrow's ``ascii_split_whitespace`` does not split on.
_NON_ASCII_SPLIT_WS = "[\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


@functools.lru_cache(maxsize=1)
def _arrow_split_checks() -> tuple[bool, bool]:
    """Probe Arrow once: (ascii splitter = ASCII-6 set, utf8 splitter = ``str.isspace`` set)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    probe = "a" + "a".join(_WS_PROBES) + "a"
    arr = pa.array([probe], type=pa.large_string())
    ascii_tokens = [t for t in pc.ascii_split_whitespace(arr).to_pylist()[0] if t]
    expected_ascii = [t for t in probe.translate(_ASCII6_TO_SPACE).split(" ") if t]
    utf8_tokens = [t for t in pc.utf8_split_whitespace(arr).to_pylist()[0] if t]
    return ascii_tokens == expected_ascii, utf8_tokens == probe.split()


_ASCII6_TO_SPACE = {ord(c): " " for c in "\t\n\x0b\x0c\r"}


def _tokenize_arrow(
    texts: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, Callable[[Sequence[str]], list[int | None]]]:
    """Tokens of ``t.split()`` for every text, as (token id, doc index) arrays, with Arrow.

    Token ids follow first appearance (documents in order, tokens in order), like the
    insertion order of BM25Okapi's dicts. Fast path: split on the six ASCII white-space
    characters; if any token still holds a character ``str.split`` also splits on (U+001C..1F,
    NBSP, the Unicode spaces), redo with the Unicode splitter. Raises ValueError when Arrow
    cannot be trusted to split as Python does (the caller falls back to Python).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    ascii_ok, utf8_ok = _arrow_split_checks()
    arr = pa.array(texts, type=pa.large_string())
    if not ascii_ok:
        raise ValueError("Arrow's ASCII white-space splitting is not the expected one")
    split = pc.ascii_split_whitespace(arr)
    encoded = pc.dictionary_encode(split.flatten())  # ids in first-appearance order
    dictionary = encoded.dictionary
    if pc.any(pc.match_substring_regex(dictionary, _NON_ASCII_SPLIT_WS)).as_py():
        if not utf8_ok:
            raise ValueError("Arrow's Unicode white-space splitting differs from str.split")
        split = pc.utf8_split_whitespace(arr)
        encoded = pc.dictionary_encode(split.flatten())
        dictionary = encoded.dictionary
    gids = np.asarray(encoded.indices.to_numpy(zero_copy_only=False))  # int32
    offsets = np.asarray(split.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    per_doc = offsets[1:] - offsets[:-1]
    doc_type = np.int32 if len(texts) < 2**31 else np.int64
    doc_of_tok = np.repeat(np.arange(len(texts), dtype=doc_type), per_doc)
    # Arrow keeps '' for leading/trailing white space (and for an empty text); split() does
    # not. Drop that token and close the gap in the ids.
    empty_at = pc.index(dictionary, pa.scalar("", type=dictionary.type)).as_py()
    empty = -1 if empty_at is None or empty_at < 0 else int(empty_at)
    if empty >= 0:
        keep = gids != empty
        gids = gids[keep]
        doc_of_tok = doc_of_tok[keep]
        gids[gids > empty] -= 1  # a fresh array (boolean indexing copies)

    def lookup(tokens: Sequence[str]) -> list[int | None]:
        found = pc.index_in(pa.array(list(tokens), type=pa.large_string()), value_set=dictionary)
        out: list[int | None] = []
        for v in found.to_pylist():
            if v is None or v == empty:
                out.append(None)
            else:
                out.append(int(v) - 1 if 0 <= empty < v else int(v))
        return out

    return gids, doc_of_tok, lookup


def _tokenize_python(
    texts: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, Callable[[Sequence[str]], list[int | None]]]:
    """Plain-Python twin of :func:`_tokenize_arrow` (``str.split``, dict ids)."""
    vocab: dict[str, int] = {}
    gid_parts: list[np.ndarray] = []
    doc_parts: list[np.ndarray] = []
    for d, text in enumerate(texts):
        tokens = text.split()
        ids = [vocab.setdefault(tok, len(vocab)) for tok in tokens]
        gid_parts.append(np.asarray(ids, dtype=np.int64))
        doc_parts.append(np.full(len(ids), d, dtype=np.int64))
    gids = np.concatenate(gid_parts) if gid_parts else np.zeros(0, dtype=np.int64)
    docs = np.concatenate(doc_parts) if doc_parts else np.zeros(0, dtype=np.int64)

    def lookup(tokens: Sequence[str]) -> list[int | None]:
        return [vocab.get(tok) for tok in tokens]

    return gids, docs, lookup


class DocTermCache:
    """Term counts of each distinct text, by text key, over one growing vocabulary.

    LongMemEval's personas share most sessions (LongMemEval_M: ~35,000 distinct texts in
    ~250,000 slots), so each text is split and counted once and a new persona's BM25 index is
    put together from cached counts (:meth:`BM25Index.from_doc_terms`). An LRU bounded by
    ``max_postings`` (distinct tokens summed over texts; 8 bytes each) keeps memory in check;
    vocabulary ids never change. With a ``table`` (a corpus's saved counts, :mod:`.terms`)
    its texts are never split at all; only texts outside it are counted. Thread-safe.
    """

    def __init__(self, max_postings: int = 24_000_000, table: TermTable | None = None) -> None:
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

    def get(self, keys: Sequence[str], texts: Callable[[], Sequence[str]]) -> list[DocTerms]:
        """Counts for ``keys`` in order; ``texts()`` (``texts()[i]`` has key ``keys[i]``) is
        called only when some key is not cached yet."""
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
                rows = texts()
                if len(rows) != len(keys):
                    raise ValueError(f"{len(keys)} text keys for {len(rows)} texts")
                for i in missing:
                    hit = docs.get(keys[i])  # a key twice in one persona: counted once
                    if hit is None:
                        hit = count_terms(rows[i], self.vocab)
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

    def __init__(self, cache_size: int = 4, terms: DocTermCache | None = None) -> None:
        self.cache_size = cache_size
        self._terms = terms
        self._table: Callable[[], TermTable] | None = None
        self._cache: OrderedDict[str, BM25Index] = OrderedDict()
        self._lock = threading.Lock()
        self._terms_lock = threading.Lock()  # only for making ``terms`` (may read a file)

    def use_table(self, load: Callable[[], TermTable]) -> None:
        """Serve text counts from a corpus's saved table, read by ``load()`` on first use; it
        replaces any counts kept so far (the table brings its own vocabulary)."""
        with self._terms_lock:
            self._table, self._terms = load, None

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
        with self._lock:
            hit = self._cache.get(persona.key)
            if hit is not None:
                self._cache.move_to_end(persona.key)
                return hit
        keys = persona.text_keys
        if keys and len(keys) == len(persona.session_ids):
            terms = self.terms
            built = BM25Index.from_doc_terms(terms.get(keys, lambda: persona.texts), terms.vocab)
        else:
            built = BM25Index.build(list(persona.texts))
        with self._lock:
            self._cache[persona.key] = built
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return built

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _check_limit(limit)
        if not persona.session_ids:
            return []
        scores = self.index(persona).scores(query.question.split())
        order = np.argsort(-scores, kind="stable")[:lim]
        return [persona.session_ids[i] for i in order.tolist()]


# --------------------------------------------------------------------------- oracle


class OracleRetriever:
    """Gold ids first (gold order, those in the persona), then the other rows in row order."""

    name = "oracle"
    needs_vectors = False  # ranks without embeddings: no model, no prep

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _check_limit(limit)
        present = set(persona.session_ids)
        first = list(dict.fromkeys(g for g in query.gold if g in present))
        chosen = set(first)
        rest = [s for s in persona.session_ids if s not in chosen]
        return list(dict.fromkeys(first + rest))[:lim]


# --------------------------------------------------------------------------- vipune binary

#: vipune environment variables that would change what is measured (model, recency, paths).
_SCRUBBED_ENV = (
    "VIPUNE_EMBEDDING_MODEL",
    "VIPUNE_RECENCY_WEIGHT",
    "VIPUNE_DATABASE_PATH",
    "VIPUNE_PROJECT",
    "VIPUNE_SIMILARITY_THRESHOLD",
)


def resolve_vipune_binary(binary: str | os.PathLike[str] = "vipune") -> Path:
    """An executable path for ``binary`` (a path, or a name on PATH); usage error if none."""
    text = os.fspath(binary)
    candidate = Path(text).expanduser()
    if os.sep in text or (os.altsep and os.altsep in text) or candidate.is_file():
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.resolve()
        what = ("is not executable (chmod +x it)" if candidate.is_file()
                else "is a directory" if candidate.is_dir() else "does not exist")
        raise RetrievalEvalError(
            f"vipune binary '{text}' {what}; install vipune or pass "
            "--retrieval-eval-vipune PATH to the vipune executable"
        )
    else:
        found = shutil.which(text)
        if found:
            return Path(found).resolve()
    raise RetrievalEvalError(
        f"vipune binary '{text}' not found on PATH; "
        "install vipune or pass --retrieval-eval-vipune PATH"
    )


def check_compatible(model_info: object) -> None:
    """Usage error unless the stored vectors are vipune's: bge-small-en-v1.5, mean, no prefix, 384.

    ``model_info`` is the vector cache's model description (a mapping, or an object with the
    same attributes): ``model``/``name``/``model_id``, ``pooling``, ``query_prefix``, ``dim``.
    Missing pooling/prefix/dim mean the harness defaults (mean, "", the model's 384).
    """
    name = _option(model_info, ("model", "model_id", "name", "repo_id"), None)
    pooling = _option(model_info, ("pooling",), None)
    prefix = _option(model_info, ("query_prefix", "prefix"), None)
    dim = _option(model_info, ("dim", "dimension"), None)
    config = _option(model_info, ("config",), None)
    if config is not None:
        pooling = pooling if pooling is not None else _option(config, ("pooling",), None)
        prefix = prefix if prefix is not None else _option(config, ("query_prefix",), None)
    problems = []
    if name != vipune.MODEL_ID:
        problems.append(f"model {name!r} (vipune embeds with {vipune.MODEL_ID})")
    if pooling not in (None, "mean"):
        problems.append(f"pooling {pooling!r} (vipune mean-pools)")
    if prefix not in (None, ""):
        problems.append(f"query prefix {prefix!r} (vipune adds none)")
    if dim is not None and dim != vipune.EMBEDDING_DIM:
        problems.append(f"dim {dim!r} (vipune stores {vipune.EMBEDDING_DIM})")
    if problems:
        raise RetrievalEvalError(
            "the vipune retriever cannot use these vectors: "
            + ", ".join(problems)
            + f"; prep with --retrieval-eval-model {vipune.MODEL_ID}, mean pooling, no prefix"
        )


def _tail(data: bytes | str | None, limit: int = 600) -> str:
    if not data:
        return ""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    flat = one_line(text)
    return flat if len(flat) <= limit else "..." + flat[-limit:]


class VipuneBinaryRetriever:
    """The real vipune binary: ``vipune --json ... search --hybrid --recency 0`` per question.

    Runs ``[binary, "--json", "--db-path", DB, "--project", ID, "search", "--hybrid",
    "--recency", "0", "--limit", L, "--", QUESTION]`` (``--`` so a question starting with '-'
    stays the query) with a timeout; the store's ``id`` is the session id. A crash, a timeout
    or output that is not the documented JSON raises :class:`RetrieverError` (that item fails).
    vipune embeds the question itself: check the vectors with :func:`check_compatible`.
    """

    name = "vipune"
    limit_sensitive = True  # search_hybrid's candidate pool depends on --limit
    needs_store = True

    def __init__(
        self,
        binary: str | os.PathLike[str] = "vipune",
        timeout: float = 60.0,
        project_id: str = store_mod.PROJECT_ID,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.binary = resolve_vipune_binary(binary)
        if not timeout > 0:
            raise RetrievalEvalError(f"vipune timeout {timeout!r} must be a positive number")
        self.timeout = float(timeout)
        self.project_id = project_id
        base = dict(os.environ if env is None else env)
        for name in _SCRUBBED_ENV:
            base.pop(name, None)
        self._env = base

    check_compatible = staticmethod(check_compatible)

    def command(self, db_path: Path, question: str, limit: int) -> list[str]:
        """The argv for one search."""
        return [
            str(self.binary),
            "--json",
            "--db-path",
            str(db_path),
            "--project",
            self.project_id,
            "search",
            "--hybrid",
            "--recency",
            "0",
            "--limit",
            str(limit),
            "--",
            question,
        ]

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _vipune_limit(limit)
        db_path = Path(persona.store_path()).resolve()  # vipune rejects paths with '..'
        where = f"vipune ({self.binary}) on question {query.question_id}"
        if store_mod.store_user_version(db_path) != store_mod.VIPUNE_USER_VERSION:
            raise RetrieverError(
                f"{where}: the persona store {db_path.name} is not a vipune store (its vectors "
                f"are not {vipune.EMBEDDING_DIM}-d); prep with {vipune.MODEL_ID}"
            )
        cmd = self.command(db_path, query.question, lim)
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                start_new_session=True,
            )
        except OSError as exc:  # not a program this system runs, or gone since the check
            raise RetrieverError(
                f"{where}: cannot run it ({exc.strerror or exc}); pass a vipune binary built "
                f"for this machine with --retrieval-eval-vipune"
            ) from None
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise RetrieverError(
                f"{where}: no answer within {self.timeout:g} s (killed); stderr: "
                f"{_tail(err) or '(empty)'}; raise --retrieval-eval-vipune-timeout if the first "
                "call downloads the model"
            ) from None
        if proc.returncode != 0:
            detail = f"stderr: {_tail(err) or '(empty)'}"
            json_error = _json_error(out)
            if json_error:
                detail = f"{json_error}; {detail}"
            raise RetrieverError(f"{where}: exit status {proc.returncode}: {detail}")
        try:
            ids = vipune.parse_search_json(out)
        except vipune.VipuneOutputError as exc:
            raise RetrieverError(f"{where}: {exc}; stderr: {_tail(err) or '(empty)'}") from None
        known = set(persona.session_ids)
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise RetrieverError(
                f"{where}: returned ids that are not rows of this store "
                f"({', '.join(repr(u) for u in unknown[:3])}); is --db-path honoured?"
            )
        if len(set(ids)) != len(ids) or len(ids) > lim:
            raise RetrieverError(
                f"{where}: returned {len(ids)} results with {len(ids) - len(set(ids))} repeats "
                f"for --limit {lim}; that is not vipune's search output"
            )
        return ids


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
    with contextlib.suppress(ProcessLookupError, OSError):
        proc.kill()


def _json_error(out: bytes | None) -> str:
    """vipune --json prints errors as {"error": "..."} on stdout; that text, or ''."""
    if not out:
        return ""
    try:
        payload = json.loads(out.decode("utf-8", "replace"))
    except ValueError:
        return _tail(out, 300)
    if isinstance(payload, dict) and isinstance(payload.get("error"), str):
        return one_line(payload["error"])
    return _tail(out, 300)


# --------------------------------------------------------------------------- user retrievers


class FunctionRetriever:
    """Wraps a plain function ``(persona, query, limit) -> ids`` as a Retriever."""

    def __init__(self, name: str, fn: Callable[[Persona, Query, int], Sequence[str]]) -> None:
        self.name = name
        self._fn = fn

    def rank(self, persona: Persona, query: Query, limit: int) -> Sequence[str]:
        return self._fn(persona, query, limit)


def _has_rank(obj: object) -> bool:
    return callable(getattr(obj, "rank", None))


def _positional_arity(fn: Callable[..., object]) -> tuple[int, int] | None:
    """(required, maximum) positional parameters; max -1 for *args; None if unknown."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    required = 0
    maximum = 0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            maximum += 1
            if p.default is p.empty:
                required += 1
        elif p.kind is p.VAR_POSITIONAL:
            maximum = -1
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
            return (99, 99)  # a required keyword-only parameter fits neither form
    return required, maximum


def _named(obj: object, default: str) -> Any:
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name:
        with contextlib.suppress(AttributeError, TypeError):
            obj.name = default  # type: ignore[attr-defined]
    return obj


def load_dotted(path: str) -> Retriever:
    """Load a user retriever from ``"package.module:attr"`` (attr may be dotted).

    The attribute may be a class (instantiated with no arguments), an object with ``rank``, a
    no-argument factory returning such an object, or a plain function
    ``(persona, query, limit) -> ids``. Errors are one-line :class:`RetrievalEvalError`.
    """
    module_name, sep, attr_path = path.partition(":")
    if not sep or not module_name or not attr_path:
        raise RetrievalEvalError(
            f"retriever '{path}' is not 'package.module:attr'; "
            "name a module and an attribute, e.g. mypkg.search:MyRetriever"
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is the user's to fix
        msg = one_line(f"{type(exc).__name__}: {exc}")
        raise RetrievalEvalError(
            f"retriever '{path}': cannot import module '{module_name}' ({msg}); "
            "check the module is installed or on sys.path"
        ) from None
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RetrievalEvalError(
                f"retriever '{path}': '{module_name}' has no attribute '{attr_path}'; "
                "check the name after ':'"
            ) from None
    default_name = attr_path.rsplit(".", 1)[-1]
    bad = RetrievalEvalError(
        f"retriever '{path}' is not a Retriever: give a class or object with "
        "rank(persona, query, limit), a no-argument factory, or a function "
        "(persona, query, limit) -> ids"
    )
    try:
        if isinstance(obj, type):
            instance = obj()
            if not _has_rank(instance):
                raise bad
            return _named(instance, default_name)  # type: ignore[no-any-return]
        if _has_rank(obj):
            return _named(obj, default_name)  # type: ignore[no-any-return]
        if callable(obj):
            arity = _positional_arity(obj)
            if arity is not None and arity[0] == 0 and arity[1] in (0,):
                made = obj()
                if not _has_rank(made):
                    raise bad
                return _named(made, default_name)  # type: ignore[no-any-return]
            if arity is None or (arity[0] <= 3 and (arity[1] == -1 or arity[1] >= 3)):
                return FunctionRetriever(default_name, obj)
        raise bad
    except RetrievalEvalError:
        raise
    except Exception as exc:  # a failing constructor or factory is user code
        msg = one_line(f"{type(exc).__name__}: {exc}")
        raise RetrievalEvalError(
            f"retriever '{path}': creating it failed ({msg}); fix its constructor or factory"
        ) from None


# --------------------------------------------------------------------------- registry


def _option(options: object, names: Sequence[str], default: object) -> object:
    """The first of ``names`` in a mapping or as an attribute (``options.Settings``, a model
    description), else ``default``."""
    for name in names:
        if isinstance(options, Mapping):
            if name in options:
                return options[name]
        elif hasattr(options, name):
            return getattr(options, name)
    return default


def _make_vipune(options: object) -> Retriever:
    binary = _option(options, ("binary", "vipune"), "vipune")
    timeout = _option(options, ("timeout", "vipune_timeout"), 60.0)
    if not isinstance(binary, (str, os.PathLike)):
        raise RetrievalEvalError(f"vipune binary option {binary!r} must be a path or a name")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise RetrievalEvalError(f"vipune timeout option {timeout!r} must be a number")
    return VipuneBinaryRetriever(binary=binary, timeout=float(timeout))


REGISTRY: dict[str, Callable[[object], Retriever]] = {
    "hybrid": lambda options: HybridRetriever(),
    "semantic": lambda options: SemanticRetriever(),
    "fts": lambda options: FtsRetriever(),
    "bm25": lambda options: BM25Retriever(),
    "oracle": lambda options: OracleRetriever(),
    "vipune": _make_vipune,
}
"""Built-in retriever factories by name; each takes the run's options (mapping or object)."""


def get_retriever(name: str, options: object = None) -> Retriever:
    """A built-in retriever by name, or a user one by ``"package.module:attr"``.

    ``options``: a mapping or an object (``options.Settings``); the vipune retriever reads
    ``binary``/``vipune`` and ``timeout``/``vipune_timeout`` from it.
    """
    opts: object = {} if options is None else options
    factory = REGISTRY.get(name)
    if factory is not None:
        return factory(opts)
    if ":" in name:
        return load_dotted(name)
    raise RetrievalEvalError(
        f"retriever '{name}' is unknown; choose from {', '.join(sorted(REGISTRY))} "
        "or give 'package.module:attr'"
    )
