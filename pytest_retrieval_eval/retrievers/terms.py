"""Term counts of every text in a corpus, saved once per corpus for the ``bm25`` retriever.

LongMemEval's BM25 baseline ranks over ``text.split()``: an index needs each text's distinct
tokens and their counts. LongMemEval_M holds ~35,000 distinct session texts, about ten
seconds of Python to split and count. Kept in memory only, every run paid that again, and
every xdist worker paid it for the texts its pairs touched (most of them, since personas
share sessions). So the counts are saved next to the corpus, by the first run that ranks
with ``bm25``, and every later process only reads them::

    <cache>/terms/<dataset sha256>.npz           the arrays below (numpy .npz, no pickle)
    <cache>/terms/<dataset sha256>.npz.sha256    commit mark (checksums.commit_file)
    <cache>/terms/<dataset sha256>.npz.lock      builders only (filelock)

Arrays: ``format``; ``corpus`` (the corpus file's sha256, so a rebuilt corpus never pairs
with old counts); ``sizes`` (how many keys and tokens); ``keys`` and ``tokens`` (text keys,
and the vocabulary in id order, each ``"\\n"``-joined UTF-8: a token never holds white
space); ``indptr`` (int64, texts + 1);
``terms`` and ``counts`` (int32: each text's distinct tokens, in first-appearance order, and
their counts); ``lengths`` (int64 tokens per text). A text's counts are exactly
:func:`count_terms`' result, so rankings are bit-identical whichever way they were made.
"""

from __future__ import annotations

import contextlib
import os
import re
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from ..errors import CacheError, write_fault
from ..io.checksums import (
    commit_file,
    matches_sidecar,
    read_sidecar,
    remove_partials,
    sidecar_path,
    temp_path,
)

if TYPE_CHECKING:
    from ..data.corpus import Corpus

__all__ = [
    "FORMAT_VERSION",
    "DocTerms",
    "TermTable",
    "corpus_file_sha256",
    "count_terms",
    "ensure_table",
    "open_table",
    "split_pieces",
    "table_path",
]

#: Version of the saved arrays' layout.
FORMAT_VERSION = 1
#: Texts read from the corpus per query while building.
_CHUNK = 512
_LABEL = "bm25 term counts"

Progress = Callable[[str, int, "int | None"], None]
_T = TypeVar("_T")
#: What reading a damaged .npz can raise (np.load and the zip reader under it).
_UNREADABLE = (OSError, EOFError, ValueError, KeyError, IndexError, UnicodeError,
               zipfile.BadZipFile)


class DocTerms(NamedTuple):
    """One text's ``text.split()`` counts: ``terms[0]`` vocabulary ids of its distinct tokens
    in first-appearance order, ``terms[1]`` their counts (int32, shape ``(2, distinct)``);
    ``length`` is the token count."""

    terms: np.ndarray
    length: int


#: Characters of a text split at a time: ``text.split()`` of a whole 100 MB session held every
#: token as a Python string at once (~60 bytes each: ~10x the text, issue 23.9).
PIECE_CHARS = 1 << 20
#: ``str.split()``'s white space: ``\s`` of a ``str`` pattern is ``Py_UNICODE_ISSPACE``, the
#: test ``str.split`` uses (checked over every code point in tests/retrievers/test_terms.py).
_WHITE_SPACE_RE = re.compile(r"\s")
_SPACE_RE = re.compile(" ")


def split_pieces(text: str, separator: re.Pattern[str] = _WHITE_SPACE_RE,
                 piece: int = PIECE_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of about ``piece`` characters, each cut at (and
    without) one ``separator`` character, so the tokens of the pieces, in order, are the
    text's: ``split()`` for white space, ``split(" ")`` for the single space (cutting a
    ``" "``-separated text at one of its spaces splits it there too)."""
    start, n = 0, len(text)
    while n - start > piece:
        found = separator.search(text, start + piece)
        if found is None:
            break
        yield text[start:found.start()]
        start = found.start() + 1
    yield text[start:] if start else text


def count_terms(text: str, vocab: MutableMapping[str, int]) -> DocTerms:
    """Split and count ``text`` as BM25Okapi does; new tokens get the next vocabulary ids.

    Split a piece at a time (:func:`split_pieces`): memory is the distinct tokens, not
    every token of a huge text at once; the counts are the same (first appearance kept)."""
    counts: Counter[str] = Counter()  # insertion order: first appearance
    length = 0
    for part in split_pieces(text):
        tokens = part.split()
        length += len(tokens)
        counts.update(tokens)
        del tokens
    # new tokens get the next ids in order of first appearance, as setdefault per token
    # would give them; the rest are looked up at C speed (a turn path's first run counts
    # ~100 tokens in each of ~900,000 texts)
    fresh = [token for token in counts if token not in vocab]
    if fresh:
        vocab.update(zip(fresh, range(len(vocab), len(vocab) + len(fresh)), strict=True))
    ids = list(map(vocab.__getitem__, counts))
    terms = np.empty((2, len(ids)), dtype=np.int32)
    terms[0] = ids
    terms[1] = list(counts.values())
    return DocTerms(terms, length)


def _join(words: Sequence[str]) -> np.ndarray:
    return np.frombuffer("\n".join(words).encode("utf-8", "surrogatepass"), dtype=np.uint8)


def _split(blob: np.ndarray, count: int) -> list[str]:
    if count == 0:
        return []
    words = blob.tobytes().decode("utf-8", "surrogatepass").split("\n")
    if len(words) != count:
        raise ValueError(f"{len(words)} words where {count} were recorded")
    return words


class TermTable:
    """The saved counts of one corpus, read back (:func:`open_table`)."""

    def __init__(self, keys: Sequence[str], tokens: Sequence[str], indptr: np.ndarray,
                 terms: np.ndarray, counts: np.ndarray, lengths: np.ndarray) -> None:
        self.tokens = list(tokens)
        self.rows = {key: row for row, key in enumerate(keys)}
        self.indptr = indptr
        # Both rows in one (2, N) array, made once: a text's counts are then a view of it,
        # not a stack of two slices per text and item (233,658 of them in a full-M bm25 run).
        self.pairs = np.stack((terms, counts))
        self.terms = self.pairs[0]
        self.counts = self.pairs[1]
        self.lengths = lengths

    def __len__(self) -> int:
        return len(self.rows)

    def vocab(self) -> dict[str, int]:
        """A fresh token -> id mapping (a caller may extend it with ids past the table's)."""
        return {token: gid for gid, token in enumerate(self.tokens)}

    def doc_terms(self, key: str) -> DocTerms | None:
        """The counts of the text with this key, or None when the corpus has no such text."""
        row = self.rows.get(key)
        if row is None:
            return None
        lo, hi = int(self.indptr[row]), int(self.indptr[row + 1])
        return DocTerms(self.pairs[:, lo:hi], int(self.lengths[row]))


def table_path(cache_dir: Path, dataset_sha256: str) -> Path:
    """Where the counts of the corpus of the dataset with this sha256 live."""
    return Path(cache_dir) / "terms" / f"{dataset_sha256}.npz"


def _damaged(path: Path, why: str) -> CacheError:
    return CacheError(
        f"bm25 term counts {path} are damaged ({why}); delete the file, and the next run that "
        f"ranks with bm25 rebuilds it"
    )


def _read(path: Path, corpus_sha256: str | None, read: Callable[[Any], _T], *,
          rehash: bool = False) -> _T:
    """Check ``path`` (present, matching its sidecar, this format, this corpus when
    ``corpus_sha256`` is given), then ``read`` the open .npz; one-line CacheError otherwise.
    ``rehash`` hashes the file even when its ``.verified`` stamp vouches for it."""
    path = Path(path)
    if not path.is_file() or not sidecar_path(path).is_file():
        raise CacheError(
            f"bm25 term counts {path} are missing; run again: a run ranking with bm25 builds "
            f"them before any item"
        )
    if not matches_sidecar(path, trust_stamp=not rehash):
        raise _damaged(path, "its sha256 does not match its .sha256 sidecar")
    try:
        with np.load(path, allow_pickle=False) as z:
            fmt = int(z["format"][0])
            if fmt != FORMAT_VERSION:
                raise _damaged(path, f"format {fmt}, this version reads {FORMAT_VERSION}")
            if (corpus_sha256 is not None
                    and z["corpus"].tobytes().decode("ascii") != corpus_sha256):
                raise _damaged(path, "made from another corpus file")
            return read(z)
    except CacheError:
        raise
    except _UNREADABLE as exc:
        raise _damaged(path, f"unreadable: {type(exc).__name__}") from None


def open_table(path: Path, corpus_sha256: str | None = None) -> TermTable:
    """Read a saved table; :class:`CacheError` (one line) if it is missing, damaged, of
    another format or (when ``corpus_sha256`` is given) of another corpus file."""

    def arrays(z: Any) -> tuple[list[str], list[str], np.ndarray, np.ndarray, np.ndarray,
                                np.ndarray]:
        sizes = z["sizes"]
        return (_split(z["keys"], int(sizes[0])), _split(z["tokens"], int(sizes[1])),
                z["indptr"], z["terms"], z["counts"], z["lengths"])

    keys, tokens, indptr, terms, counts, lengths = _read(path, corpus_sha256, arrays)
    n = len(keys)
    if (indptr.shape != (n + 1,) or lengths.shape != (n,) or terms.shape != counts.shape
            or int(indptr[-1]) != terms.size or (n and int(indptr[0]) != 0)
            or (terms.size and int(terms.max()) >= len(tokens))):
        raise _damaged(Path(path), "inconsistent arrays")
    return TermTable(keys, tokens, indptr, terms, counts, lengths)


def corpus_file_sha256(corpus: Corpus) -> str:
    """The corpus file's sha256 from its sidecar: the counts are tied to it."""
    try:
        return read_sidecar(corpus.path)
    except (OSError, ValueError):
        raise CacheError(
            f"corpus file {corpus.path} has no readable .sha256 sidecar; delete it and run "
            f"again to rebuild it"
        ) from None


def ensure_table(corpus: Corpus, cache_dir: Path, progress: Progress | None = None, *,
                 rehash: bool = False) -> Path:
    """Build the table of ``corpus`` unless a valid one is saved; return its path.

    One builder at a time (a file lock); a killed build leaves only a temp file, removed by
    the next builder. ``rehash`` (``--retrieval-eval-verify full``) hashes a saved table even
    when its ``.verified`` stamp vouches for it, so bit rot beneath an unchanged stamp is
    caught here and the table rebuilt; under the default stamp, such rot is caught when an
    array is read (each .npz member's CRC-32), as a one-line CacheError naming the file.
    """
    target = table_path(cache_dir, corpus.dataset_sha256)
    corpus_sha = corpus_file_sha256(corpus)
    if _valid(target, corpus_sha, rehash):
        return target
    from filelock import FileLock

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{target}.lock"):
            if _valid(target, corpus_sha, rehash):
                return target
            remove_partials(target)
            _build(corpus, corpus_sha, target, progress)
    except OSError as exc:
        raise CacheError(
            f"bm25 term counts {target} cannot be written ({exc.strerror or exc}); "
            f"{write_fault(exc, target.parent)}, or choose another --retrieval-eval-cache"
        ) from None
    return target


def _valid(target: Path, corpus_sha: str, rehash: bool) -> bool:
    """A committed, intact table of this format and corpus (its arrays are not loaded).

    Called by the controller once per run; ``rehash`` hashes the whole file (104 MB for
    LongMemEval_M, about 0.2 s) whatever its stamp says."""
    try:
        _read(target, corpus_sha, lambda z: None, rehash=rehash)
    except CacheError:
        return False
    return True


def _build(corpus: Corpus, corpus_sha: str, target: Path, progress: Progress | None) -> None:
    keys = corpus.all_text_keys()
    n = len(keys)
    vocab: dict[str, int] = {}
    indptr = np.zeros(n + 1, dtype=np.int64)
    lengths = np.zeros(n, dtype=np.int64)
    parts: list[np.ndarray] = []
    if progress is not None:
        progress(_LABEL, 0, n)
    for start in range(0, n, _CHUNK):
        chunk = keys[start : start + _CHUNK]
        for offset, text in enumerate(corpus.texts(chunk)):
            row = start + offset
            doc = count_terms(text, vocab)
            parts.append(doc.terms)
            lengths[row] = doc.length
            indptr[row + 1] = indptr[row] + doc.terms.shape[1]
        if progress is not None:
            progress(_LABEL, start + len(chunk), n)
    both = np.concatenate(parts, axis=1) if parts else np.zeros((2, 0), dtype=np.int32)
    tmp = temp_path(target)
    try:
        with open(tmp, "wb") as f:
            np.savez(
                f, format=np.array([FORMAT_VERSION], dtype=np.int64),
                corpus=np.frombuffer(corpus_sha.encode("ascii"), dtype=np.uint8),
                sizes=np.array([n, len(vocab)], dtype=np.int64),
                keys=_join(keys), tokens=_join(list(vocab)), indptr=indptr,
                terms=np.ascontiguousarray(both[0]), counts=np.ascontiguousarray(both[1]),
                lengths=lengths)
        commit_file(tmp, target)
    finally:
        for leftover in (tmp, sidecar_path(tmp)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)


def use_term_table(bm25: Any, cache_root: Path, corpus: Corpus) -> None:
    """Point the run's ``bm25`` retriever at the corpus's saved term counts (the table under
    ``cache_root``, made on first use, of this very corpus file)."""
    table = table_path(cache_root, corpus.dataset_sha256)
    corpus_sha = corpus_file_sha256(corpus)
    bm25.use_table(lambda: open_table(table, corpus_sha))
