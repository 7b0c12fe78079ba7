"""The retriever protocol and the types every retriever sees: a persona and a query.

A retriever ranks a persona's memory rows (session ids) for one query, best first. The helpers
here (limits, the query vector, error wording) are shared by the built-in retrievers.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar, overload, runtime_checkable

import numpy as np

from .. import vipune
from ..data.pairs import render_session
from ..errors import RetrieverError, one_line

__all__ = ["MCP_PREFIX", "RUN_PREFIX", "CheckedScores", "LazySequence", "LazyTexts", "Memory",
           "Persona", "Query", "Retriever", "TurnLists", "path_option", "process_limits"]

T = TypeVar("T")


#: A TREC run file's selector prefix (``run:PATH``, :mod:`.trec_run`), here where every run
#: loads it: naming it loads no run-file code.
RUN_PREFIX = "run:"
#: The selector prefix of a memory server over MCP (mcp/): here, so that a run with no
#: ``mcp:`` store loads nothing of that wing.
MCP_PREFIX = "mcp:"


class CheckedScores(tuple[tuple[str, float], ...]):
    """``last_scores`` as the plugin's own retrievers set it: ``(id, score)`` pairs of a
    ``str`` and a ``float``, made by their own code, read as they are (any other value is
    checked pair by pair: ``ranking._last_scores``; three reads an item, ~500 pairs each on
    LongMemEval_M, were a tenth of a four-retriever run)."""

    __slots__ = ()


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
    #: Per row ``i``, session ``i``'s turns as ``{"role": ..., "content": ...}`` records in
    #: order (under turn granularity a row is one turn: its own single record). Lazily read.
    turns: Sequence[Sequence[Mapping[str, str]]] = ()
    #: A folder of this persona's own for the retriever ranking it, under the cache, keyed by
    #: the retriever's column and :attr:`key`, kept across runs (so a store may reuse an
    #: expensive ingest); made by the harness before ``index`` is called; None otherwise.
    workdir: Path | None = None
    #: The run's model for a store's own texts (:meth:`embed`); None where the run holds no
    #: vectors.
    text_vectors: Callable[[Sequence[str]], np.ndarray] | None = None
    #: This persona's turns as rows (the ``+unit:turn`` what-ifs rank them): ids
    #: ``<session_id>_<n>``, texts ``role: content``, their vectors and a store of turn rows,
    #: built on first call; None where the rows are not sessions (turn granularity, the
    #: longmemeval protocol).
    turn_rows: Callable[[], Persona] | None = None
    #: Turn rows (:attr:`turn_rows`) only: each row's session row in the persona they are
    #: the turns of. None otherwise.
    row_sessions: np.ndarray | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` by the run's model and recipe, ``(len(texts), dim)`` float32.

        Read from the run's content-addressed vector cache; in the model lane a text the
        cache lacks is embedded once and cached (a later ``--no-model`` run finds it), under
        ``--no-model`` it fails the item in one line. Embedded as passages (no query
        prefix). The time spent here is reported as ``latency_ms.store_embedding``, apart from
        the store's ingest and query times."""
        from ..boundary.texts import texts_problem

        if isinstance(texts, Iterable) and not isinstance(texts, (str, bytes, bytearray, Mapping)):
            texts = list(texts)  # read once: an iterator too
        problem = texts_problem(texts)  # one reading of a text (issue 43.7)
        if problem is not None:
            raise RetrieverError(f"persona.embed: {problem}; give a list of str, e.g. "
                                 "persona.embed([text])")
        if self.text_vectors is None:
            raise RetrieverError(
                "persona.embed: this run holds no vectors (no retriever of the run reads "
                "them); give the store needs_vectors = True (the default) to embed its texts")
        return self.text_vectors(list(texts))


@dataclass(frozen=True)
class Query:
    """One question; ``gold`` is for ``oracle`` only (user retrievers must not use it)."""

    question_id: str
    question_type: str
    question: str
    question_date: str
    vector: np.ndarray | None  # None only for retrievers that embed themselves (vipune)
    gold: tuple[str, ...]


@dataclass(frozen=True)
class Memory:
    """One item a memory store ranks: a turn, a chunk, an extracted fact, a summary.

    ``sessions`` and ``turns`` are its provenance: session ids of the persona, and turn ids
    named as the turn granularity names them, ``<session_id>_<n>`` with ``n`` LongMemEval's
    1-based turn number (``data/protocol.py``). A turn implies its session. ``text`` is what a
    reader would be handed (None: the text of its turns, else of its sessions). ``score``:
    higher is better (None: the order alone). A store's ``rank`` may return these in place of
    session ids; the harness derives the session ranking (docs/memories.md).
    """

    id: str
    score: float | None = None
    sessions: tuple[str, ...] = ()
    turns: tuple[str, ...] = ()
    text: str | None = None


#: The last few id lists' row maps (:func:`rows_by_id`), newest first.
_ROWS_BY_ID: list[tuple[Sequence[str], dict[str, int]]] = []


def rows_by_id(ids: Sequence[str]) -> dict[str, int]:
    """Each id's row in ``ids`` (an id given twice: its last row), kept for the last few
    tuples asked: a turn what-if ranking a persona's turn rows and a budget counting their
    tokens ask for the same persona's map. Its readers never change it."""
    for known, rows in _ROWS_BY_ID:
        if known is ids:
            return rows
    rows = dict(zip(ids, range(len(ids)), strict=True))
    if isinstance(ids, tuple):  # immutable: the map stays its
        _ROWS_BY_ID.insert(0, (ids, rows))
        del _ROWS_BY_ID[4:]
    return rows


class LazySequence(Sequence[T]):
    """A persona's per-row values, loaded by ``loader`` on first use (then kept)."""

    def __init__(self, loader: Callable[[], Sequence[T]]) -> None:
        self._loader = loader
        self._texts: Sequence[T] | None = None
        self._lock = threading.Lock()

    def _load(self) -> Sequence[T]:
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
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        return self._load()[index]

    def __len__(self) -> int:
        return len(self._load())

    def __iter__(self) -> Iterator[T]:
        return iter(self._load())  # the loaded list's own iterator, not one index at a time


class LazyTexts(LazySequence[str]):
    """A persona's row texts, loaded by ``loader`` on first use (then kept). ``some(rows)``,
    when given, makes the texts of a few rows alone (:meth:`of_rows`), without loading the
    persona's every text."""

    def __init__(self, loader: Callable[[], Sequence[str]],
                 some: Callable[[list[int]], Sequence[str]] | None = None) -> None:
        super().__init__(loader)
        self._some = some

    def of_rows(self, rows: list[int]) -> list[str]:
        """The texts of ``rows`` in order: from the loaded texts, else by ``some`` (nothing
        kept), else all are loaded."""
        if self._some is not None and not self.loaded:
            got = list(self._some(rows))
            if len(got) != len(rows):
                raise ValueError(f"{len(got)} texts for {len(rows)} rows")
            return got
        texts = self._load()
        return [texts[r] for r in rows]


def texts_at(texts: Sequence[str], rows: list[int]) -> list[str]:
    """The texts of ``rows`` of a persona's ``texts``: a few made alone where the texts can
    make them (:meth:`LazyTexts.of_rows`), else read from the sequence."""
    if isinstance(texts, LazyTexts):
        return texts.of_rows(rows)
    return [texts[r] for r in rows]


class TurnLists(LazySequence[Sequence[Mapping[str, str]]]):
    """A persona's sessions' turns, loaded on first use. ``one(row)``, when given, reads one
    session's turns alone (an explain excerpt, a memory's tokens: a few sessions, not the
    persona's every turn decoded); once the persona's turn rows are known
    (:mod:`..data.turn_rows`), ``counts`` holds each session's turn count, so that a turn id
    is checked (:meth:`count`) without reading any turn. ``some(rows)``, when given, reads
    several sessions' turns at once (:meth:`prefetch`)."""

    def __init__(self, loader: Callable[[], Sequence[Sequence[Mapping[str, str]]]],
                 one: Callable[[int], Sequence[Mapping[str, str]]] | None = None,
                 size: int | None = None,
                 by_keys: Callable[[list[str]], Sequence[Sequence[Mapping[str, str]]]]
                 | None = None,
                 some: Callable[[list[int]], Sequence[Sequence[Mapping[str, str]]]]
                 | None = None,
                 rendered: Callable[[list[int]], Sequence[Sequence[str]]] | None = None
                 ) -> None:
        super().__init__(loader)
        self._by_keys = by_keys
        self._some = some
        self._rendered = rendered
        self.counts: Sequence[int] | np.ndarray | None = None
        self._one = one
        self._size = size
        self._rows: dict[int, Sequence[Mapping[str, str]]] = {}

    def every(self) -> Sequence[Sequence[Mapping[str, str]]]:
        """Every session's turns, read at once."""
        return self._load()

    def of_keys(self, keys: list[str]) -> Sequence[Sequence[Mapping[str, str]]]:
        """The turns of the sessions whose text keys are ``keys`` (``by_keys``; without
        it, every session is read and ``keys`` must be the persona's, in order)."""
        if self._by_keys is not None:
            return self._by_keys(keys)
        return self._load()

    def rendered(self, rows: Sequence[int] | None = None) -> Sequence[Sequence[str]]:
        """The turns of the sessions ``rows`` (None: every session), each rendered as the
        turn granularity renders one turn (:func:`..data.pairs.render_session`): by
        ``rendered`` straight from the stored texts (no record made a turn, nothing kept)
        when the turns are not read yet, else from them."""
        wanted = range(len(self)) if rows is None else rows
        if self._rendered is not None and not self.loaded:
            return self._rendered(list(wanted)) if len(wanted) else []
        every = self._load()
        return [[render_session([turn]) for turn in every[r]] for r in wanted]

    def prefetch(self, rows: Iterable[int]) -> None:
        """Read the turns of the sessions ``rows`` not read yet in one go (``some``), for
        the one-by-one reads that follow (the explain excerpts of a pair's memories)."""
        if self._some is None or self.loaded:
            return
        wanted = [r for r in dict.fromkeys(rows) if r not in self._rows and 0 <= r < len(self)]
        if wanted:
            self._rows.update(zip(wanted, self._some(wanted), strict=True))

    def count(self, row: int) -> int:
        """How many turns session ``row`` has (blank ones included)."""
        if self.counts is not None and not self.loaded:
            return int(self.counts[row])
        return len(self[row])

    def __len__(self) -> int:
        if self._size is not None:
            return self._size
        if self.counts is not None and not self.loaded:
            return len(self.counts)
        return super().__len__()

    def __iter__(self) -> Iterator[Sequence[Mapping[str, str]]]:
        return iter(self._load())  # every session: read at once, not one by one

    @overload
    def __getitem__(self, index: int) -> Sequence[Mapping[str, str]]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Sequence[Mapping[str, str]]]: ...

    def __getitem__(self, index: int | slice
                    ) -> Sequence[Mapping[str, str]] | Sequence[Sequence[Mapping[str, str]]]:
        if isinstance(index, slice) or self._one is None or self.loaded:
            return super().__getitem__(index)
        row = index if index >= 0 else index + len(self)
        got = self._rows.get(row)
        if got is None:
            if not 0 <= row < len(self):
                raise IndexError(index)
            got = self._rows[row] = self._one(row)
        return got


@runtime_checkable
class Retriever(Protocol):
    """Ranks a persona's session ids for a query, best first, at most ``limit`` of them.

    Optional attributes the harness reads: ``needs_store = True`` when ``rank`` calls
    ``persona.store_path()`` (the store is then built before the query is timed, so a
    one-time build never counts as query latency); ``limit_sensitive = True`` when the top
    results depend on ``limit`` beyond a cut (each cut-off k is then ranked on its own);
    ``needs_vectors = False`` when ``rank`` never reads ``persona.vectors`` or
    ``query.vector`` (when no retriever of a run needs them, no model is loaded).

    Scores (optional, for the tie-aware metrics of :mod:`pytest_retrieval_eval.scoring.ties`):
    ``rank`` may return ``(id, score)`` pairs instead of plain ids (higher is better; plain
    ids still work, and are then taken as a strict order), or set ``last_scores`` to the
    ``(id, score)`` list it ranked, best first, of which the returned ids are the first (the
    built-in retrievers do, so that a tie running past the cut is seen).

    Memories (issue 36, docs/memories.md): ``rank`` may return :class:`Memory` items (a
    turn, a chunk, a fact, with the sessions and turns it came from) until they cover
    ``limit`` distinct sessions and number at least ``limit`` (or it runs out); the
    harness reads to that bound and derives the session ranking from them.

    Lifecycle (optional, docs/design.md "A store's lifecycle"): ``index(persona)`` is called
    once per persona (by :attr:`Persona.key`), before that persona's first ``rank``, in the
    process that ranks it, with ``persona.workdir`` made; its time is reported as ingest,
    never as query latency. ``close()`` is called once at the session's end in each process
    that ranked with the retriever.
    """

    name: str

    def rank(self, persona: Persona, query: Query,
             limit: int) -> Sequence[str] | Sequence[Memory]: ...


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


def _option(options: object, names: Sequence[str], default: object) -> object:
    """The first of ``names`` in a mapping or as an attribute (``settings.Settings``, a model
    description), else ``default``."""
    for name in names:
        if isinstance(options, Mapping):
            if name in options:
                return options[name]
        elif hasattr(options, name):
            return getattr(options, name)
    return default


def path_option(options: object, name: str) -> str | os.PathLike[str] | None:
    """``name`` of ``options`` (:func:`_option`) when it is a path, else None."""
    value = _option(options, (name,), None)
    return value if isinstance(value, (str, os.PathLike)) else None


def process_limits(options: object) -> tuple[float, float, str | os.PathLike[str] | None]:
    """What a store run as a process (``cmd:``, ``mcp:``) takes from the run: the deadline
    of one request (``--retrieval-eval-cmd-timeout``), of one persona's ingest
    (``--retrieval-eval-cmd-index-timeout``), and the folder to start it in (the rootdir)."""
    timeout = _option(options, ("cmd_timeout",), 60.0)
    index_timeout = _option(options, ("cmd_index_timeout",), 600.0)
    return float(timeout), float(index_timeout), path_option(options, "rootdir")  # type: ignore[arg-type]


def part_times(retriever: object) -> dict[str, dict[str, float]] | None:
    """A fused store's parts' times for the item that just ranked (None: not a fused store,
    or nothing spent): its ``take_part_times`` (:class:`.fusion.RRF`), here so that the
    harness asks every store without importing :mod:`.fusion`."""
    take = getattr(retriever, "take_part_times", None)
    if not callable(take):
        return None
    got = take()
    return dict(got) if isinstance(got, Mapping) and got else None
