"""LongMemEval's BM25 baseline (``rank_bm25.BM25Okapi`` over ``text.split()``), vectorised.

Same floats and the same ranking as BM25Okapi, several times faster; per-text term counts are
cached across personas (:class:`DocTermCache`) or read from a corpus's saved table (:mod:`..terms`).
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .base import Persona, Query, _check_limit
from .terms import DocTerms, TermTable, count_terms

__all__ = ["BM25Index", "BM25Retriever", "DocTermCache", "LongMemEvalBM25Retriever"]


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
    texts: Sequence[str], split: Callable[[str], list[str]] = str.split,
) -> tuple[np.ndarray, np.ndarray, Callable[[Sequence[str]], list[int | None]]]:
    """Plain-Python twin of :func:`_tokenize_arrow` (``split`` per text, dict ids)."""
    vocab: dict[str, int] = {}
    gid_parts: list[np.ndarray] = []
    doc_parts: list[np.ndarray] = []
    for d, text in enumerate(texts):
        ids = [vocab.setdefault(tok, len(vocab)) for tok in split(text)]
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

    def __init__(self, cache_size: int = 4, terms: DocTermCache | None = None) -> None:
        self.cache_size = cache_size
        self._terms = terms
        self._table: Callable[[], TermTable] | None = None
        self._indexes = _IndexLRU(cache_size)
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
        return self._indexes.get(persona.key, lambda: self._build(persona))

    def _build(self, persona: Persona) -> BM25Index:
        keys = persona.text_keys
        if keys and len(keys) == len(persona.session_ids):
            terms = self.terms
            return BM25Index.from_doc_terms(terms.get(keys, lambda: persona.texts), terms.vocab)
        return BM25Index.build(list(persona.texts))

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _check_limit(limit)
        if not persona.session_ids:
            return []
        scores = self.index(persona).scores(query.question.split())
        order = np.argsort(-scores, kind="stable")[:lim]
        return [persona.session_ids[i] for i in order.tolist()]


def _split_single_space(text: str) -> list[str]:
    return text.split(" ")


def _tokenize_single_space(
    texts: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, Callable[[Sequence[str]], list[int | None]]]:
    """Tokens of ``t.split(" ")`` for every text: LongMemEval's tokenisation
    (``src/retrieval/run_retrieval.py`` lines 107 and 110). Unlike ``split()``, runs of spaces
    give empty tokens, an empty text is one empty token, and newlines stay inside tokens."""
    return _tokenize_python(texts, _split_single_space)


class LongMemEvalBM25Retriever:
    """``bm25`` under ``--retrieval-eval-protocol longmemeval``: LongMemEval's flat-bm25.

    ``BM25Okapi`` (k1 1.5, b 0.75, eps 0.25) over ``text.split(" ")``, the query split the same
    way (run_retrieval.py lines 107-110), and the order ``np.argsort(scores)[::-1]`` (line 111):
    numpy's default (unstable) sort, reversed, so tied items come out as upstream's do on the
    same numpy. Every corpus item is ranked (ids repeat when a session slot does).
    """

    name = "bm25"
    needs_vectors = False

    def __init__(self, cache_size: int = 4) -> None:
        self.cache_size = cache_size
        self._indexes = _IndexLRU(cache_size)

    def index(self, persona: Persona) -> BM25Index:
        return self._indexes.get(persona.key, lambda: self._build(persona))

    @staticmethod
    def _build(persona: Persona) -> BM25Index:
        texts = list(persona.texts)
        gids, doc_of_tok, lookup = _tokenize_single_space(texts)
        return BM25Index._from_tokens(len(texts), gids, doc_of_tok, lookup, 1.5, 0.75, 0.25)

    def scores(self, persona: Persona, query: Query) -> np.ndarray:
        """``BM25Okapi(corpus).get_scores(question.split(" "))`` of the persona's items."""
        return self.index(persona).scores(query.question.split(" "))

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _check_limit(limit)
        if not persona.session_ids:
            return []
        order = np.argsort(self.scores(persona, query))[::-1][:lim]
        return [persona.session_ids[i] for i in order.tolist()]
