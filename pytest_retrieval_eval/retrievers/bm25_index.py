"""BM25Okapi's statistics of one corpus as arrays: ``rank_bm25.BM25Okapi``'s floats,
vectorised, and the tokenisations that feed it (``text.split()`` through Arrow or plain
Python, and LongMemEval's ``text.split(" ")``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .terms import _SPACE_RE, _WHITE_SPACE_RE, DocTerms, split_pieces

__all__ = ["BM25Index"]


def stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for non-negative int64 ``keys``, as a radix sort:
    one stable sort of 16-bit digits a pass (numpy sorts those by counting), the least
    significant first; about 3x faster than a comparison sort on a persona's ~770,000 turn
    postings. Keys past 48 bits take the comparison sort."""
    if keys.size == 0:
        return np.zeros(0, dtype=np.intp)
    top = int(keys.max())
    if int(keys.min()) < 0 or top >= 1 << 48:
        return np.argsort(keys, kind="stable")
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while top >> shift:
        digit = ((keys[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        shift += 16
    return order


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
    #: :meth:`from_doc_terms` only: each term's id in the shared vocabulary it was given.
    vocab_ids: np.ndarray | None = None

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
    def build_single_space(
        cls, texts: Sequence[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> BM25Index:
        """Index ``[t.split(" ") for t in texts]``: LongMemEval's own tokenisation
        (:func:`_tokenize_single_space`)."""
        gids, doc_of_tok, lookup = _tokenize_single_space(texts)
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
        # Term-major postings, documents ascending within a term: the postings come in
        # document order, so a stable sort by term id alone gives that order.
        order = stable_order(ids)
        sorted_ids = ids[order]
        docs = doc_of[order]
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

        built = cls._from_postings(
            n_docs, doc_len, indptr, docs, tfs, appearance, lookup, k1, b, epsilon
        )
        object.__setattr__(built, "vocab_ids", terms)
        return built

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
    texts: Sequence[str], single_space: bool = False,
) -> tuple[np.ndarray, np.ndarray, Callable[[Sequence[str]], list[int | None]]]:
    """Plain-Python twin of :func:`_tokenize_arrow` (``split()`` per text, or ``split(" ")``
    with ``single_space``; dict ids). A text is split a piece at a time
    (:func:`.terms.split_pieces`), so a huge one never holds all its tokens as strings."""
    vocab: dict[str, int] = {}
    gid_parts: list[np.ndarray] = []
    doc_parts: list[np.ndarray] = []
    separator = _SPACE_RE if single_space else _WHITE_SPACE_RE
    for d, text in enumerate(texts):
        for part in split_pieces(text, separator):
            tokens = part.split(" ") if single_space else part.split()
            ids = np.fromiter((vocab.setdefault(tok, len(vocab)) for tok in tokens),
                              dtype=np.int64, count=len(tokens))
            del tokens
            gid_parts.append(ids)
            doc_parts.append(np.full(len(ids), d, dtype=np.int64))
    gids = np.concatenate(gid_parts) if gid_parts else np.zeros(0, dtype=np.int64)
    docs = np.concatenate(doc_parts) if doc_parts else np.zeros(0, dtype=np.int64)

    def lookup(tokens: Sequence[str]) -> list[int | None]:
        return [vocab.get(tok) for tok in tokens]

    return gids, docs, lookup


def _tokenize_single_space(
    texts: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, Callable[[Sequence[str]], list[int | None]]]:
    """Tokens of ``t.split(" ")`` for every text: LongMemEval's tokenisation
    (``src/retrieval/run_retrieval.py`` lines 107 and 110). Unlike ``split()``, runs of spaces
    give empty tokens, an empty text is one empty token, and newlines stay inside tokens."""
    return _tokenize_python(texts, single_space=True)


# --------------------------------------------------------------------------- kept indexes

#: The format of :func:`dump_index`'s bytes.
_KEPT_MAGIC = b"PRE-BM25INDEX\x00\x00\x01"


def dump_index(index: BM25Index, tokens: Sequence[str], ident: str = "") -> bytes:
    """An index as bytes, to be read back by :func:`load_index` (the turn what-ifs keep
    their turn rows' index so: issue 44); ``tokens[g]``: term ``g``'s token (a token holds
    no white space, so they are kept joined by newlines); ``ident``: what the index is of
    (a persona's key), checked when it is read back."""
    import json

    blob = ("\n" + "\n".join(tokens) + "\n").encode("utf-8", "surrogatepass")
    n_post = int(index.docs.size)
    # postings in the narrowest unsigned type that holds them (most of the file)
    docs_type = _narrow(index.n_docs - 1)
    tfs_type = _narrow(int(index.tfs.max()) if n_post else 0)
    header = json.dumps({"docs": index.n_docs, "terms": int(index.idf.size),
                         "postings": n_post, "k1": index.k1,
                         "average_idf": index.average_idf, "blob": len(blob),
                         "docs_type": docs_type, "tfs_type": tfs_type, "ident": ident},
                        sort_keys=True).encode("ascii")
    return b"".join([_KEPT_MAGIC, len(header).to_bytes(4, "little"), header,
                     index.idf.astype("<f8").tobytes(), index.base.astype("<f8").tobytes(),
                     index.indptr.astype("<i8").tobytes(), index.docs.astype(docs_type).tobytes(),
                     index.tfs.astype(tfs_type).tobytes(), blob])


def _narrow(largest: int) -> str:
    return next(t for t in ("<u1", "<u2", "<u4", "<i8")
                if largest <= np.iinfo(np.dtype(t)).max)


def load_index(data: bytes, ident: str = "") -> BM25Index | None:
    """:func:`dump_index`'s index, or None when ``data`` is not a whole one, or one of
    something else than ``ident``."""
    import json

    try:
        if not data.startswith(_KEPT_MAGIC):
            return None
        at = len(_KEPT_MAGIC)
        size = int.from_bytes(data[at:at + 4], "little")
        head = json.loads(data[at + 4:at + 4 + size].decode("ascii"))
        n, t, p, n_blob = (int(head[k]) for k in ("docs", "terms", "postings", "blob"))
        k1, average_idf = float(head["k1"]), float(head["average_idf"])
        types = (str(head["docs_type"]), str(head["tfs_type"]))
        if head.get("ident") != ident or \
                any(kind not in ("<u1", "<u2", "<u4", "<i8") for kind in types):
            return None
        d_size, t_size = (np.dtype(kind).itemsize for kind in types)
        at += 4 + size
        if min(n, t, p, n_blob) < 0 or len(data) != (
                at + 8 * (t + n + t + 1) + (d_size + t_size) * p + n_blob):
            return None
        idf = np.frombuffer(data, "<f8", t, at).astype(np.float64)
        base = np.frombuffer(data, "<f8", n, at + 8 * t).astype(np.float64)
        indptr = np.frombuffer(data, "<i8", t + 1, at + 8 * (t + n)).astype(np.int64)
        at += 8 * (2 * t + n + 1)
        docs = np.frombuffer(data, types[0], p, at).astype(np.int64)
        tfs = np.frombuffer(data, types[1], p, at + d_size * p).astype(np.int64)
        text = data[at + (d_size + t_size) * p:].decode("utf-8", "surrogatepass")
    except (ValueError, KeyError, TypeError, UnicodeError):
        return None
    if (indptr[0] != 0 or indptr[-1] != p or (np.diff(indptr) < 0).any()
            or (p and (docs.min() < 0 or docs.max() >= n)) or text.count("\n") != t + 1
            or not text.startswith("\n") or not text.endswith("\n")):
        return None

    def lookup(tokens: Sequence[str]) -> list[int | None]:
        out: list[int | None] = []
        for token in tokens:
            at = text.find(f"\n{token}\n") if token and "\n" not in token else -1
            out.append(None if at < 0 else text.count("\n", 0, at))
        return out

    return BM25Index(n, lookup, idf, base, indptr, docs, tfs, k1, average_idf)
