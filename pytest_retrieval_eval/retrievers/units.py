"""Built-in references at another unit: ``semantic+unit:turn``, ``bm25+unit:turn``,
``fts+unit:turn`` rank the persona's turns and return turn memories.

The base retriever ranks the persona's turns as rows (:attr:`.Persona.turn_rows`: ids
``<session_id>_<n>`` as the turn granularity names them, texts ``role: content``, their
vectors through ``persona.embed``, a vipune store of turn rows for FTS5), exactly as it ranks
sessions: cosine over turn vectors, BM25Okapi over turn texts, vipune's FTS5 over turn rows.
Each ranked turn becomes ``Memory(id=turn_id, score=..., turns=(turn_id,))``, read until the
turns cover ``limit`` distinct sessions (``limit`` keeps its meaning in sessions,
docs/memories.md); the harness derives the session ranking from them, as LongMemEval's
``evaluate_retrieval_turn2session`` does (src/retrieval/eval_utils.py lines 32-46).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..boundary.turn_ids import parse_turn_id
from ..errors import RetrieverError
from ..vipune.semantic import first_groups
from .base import Memory, Persona, Query, _check_limit, rows_by_id

__all__ = ["TurnUnit", "turn_memories"]

#: Bumped whenever what a kept turn index holds changes (its file's name carries it).
_KEPT_FORMAT = 2
#: A ranking's first read of turn rows: this many a session asked for, at least
#: ``_FIRST_READ``; each next read four times the last, until the sessions are covered.
_READ_PER_SESSION = 8
_FIRST_READ = 64


def _read_sizes(size: int, lim: int) -> Iterator[int]:
    """The growing reads of a turn ranking that must cover ``lim`` sessions of a persona of
    ``size`` turn rows: ``_READ_PER_SESSION`` rows a session, at least ``_FIRST_READ``, then
    four times the last, the last read ``size``."""
    count = min(size, max(_READ_PER_SESSION * lim, _FIRST_READ))
    while True:
        yield count
        if count >= size:
            return
        count = min(size, count * 4)


def turn_memories(ranked: list[tuple[str, float | None]], session_of: dict[str, str],
                  limit: int) -> list[Memory]:
    """Turn memories in rank order until they cover ``limit`` distinct sessions."""
    out: list[Memory] = []
    covered: set[str] = set()
    for turn_id, score in ranked:
        if len(covered) >= limit:
            break
        covered.add(session_of[turn_id])
        out.append(Memory(id=turn_id, score=score, turns=(turn_id,)))
    return out


class TurnUnit:
    """A built-in retriever ranking the persona's turns (see the module's docstring)."""

    unit = "turn"
    #: The turn rows (vectors read, store built) are made in ``index``, timed as ingest.
    needs_store = False
    #: It ranks the turns' own vectors, never the persona's session vectors: a run whose
    #: every vector reader is a turn what-if reads no session matrix (issue 44).
    reads_session_vectors = False

    def __init__(self, name: str, base: Any, verify: str = "stamp") -> None:
        self.name = name
        self.base = base
        #: ``--retrieval-eval-verify``: how far a kept turn index is trusted (bm25's:
        #: :func:`..io.checksums.read_committed`; ``full`` rehashes it, as the session
        #: stores and the kept turn rows are rehashed).
        self.verify = verify
        self.params = dict(getattr(base, "params", {}))
        self.needs_vectors = bool(getattr(base, "needs_vectors", True))
        #: The bytes of the turn store the last ``index`` built or found (FTS5 bases).
        self.held_bytes = 0
        #: The last turn persona's session row per turn row.
        self._sessions: tuple[Persona, np.ndarray] | None = None
        #: The last (turn persona, query)'s memories made by :meth:`first_memories`.
        self._first: tuple[Persona, Query, list[Memory]] | None = None

    def _turns(self, persona: Persona) -> Persona:
        if persona.turn_rows is None:
            raise RetrieverError(
                f"{self.name}: this persona's rows are not sessions, so it has no turns to "
                f"rank; drop +unit:turn, or score the vipune protocol's sessions")
        try:
            return persona.turn_rows(vectors=self.needs_vectors)  # type: ignore[call-arg]
        except TypeError:  # a persona made elsewhere: its turn_rows takes no argument
            return persona.turn_rows()

    def index(self, persona: Persona) -> None:
        """The persona's turn rows: kept rows read (or built), vectors read (or embedded),
        the turn store built when FTS5 searches it; once per persona, before its first
        query."""
        turns = self._turns(persona)
        self.held_bytes = 0
        if getattr(self.base, "needs_store", False):
            # the turn store lives with the session stores, not in the workdir: its size is
            # this persona's footprint on disk (store_costs)
            with contextlib.suppress(OSError):
                self.held_bytes = turns.store_path().stat().st_size
        kept = getattr(self.base, "kept_index", None)
        if callable(kept) and persona.workdir is not None:
            # bm25's index of the turn rows, kept in the persona's workdir across runs
            kept(turns, persona.workdir / f"turns-{_KEPT_FORMAT}.bm25", self.verify)

    def rank(self, persona: Persona, query: Query, limit: int) -> list[Memory]:
        lim = _check_limit(limit)
        turns = self._turns(persona)
        if not turns.session_ids:
            return []
        session_of = self._session_of(persona, turns)
        size = len(turns.session_ids)
        top = getattr(self.base, "top_rows", None)
        if callable(top):
            # the exact ranking's first rows only, as many as cover ``lim`` sessions
            for count in _read_sizes(size, lim):
                rows, scores = top(turns, query, count)
                cut = _covering(session_of, rows, lim)
                if cut is not None or len(rows) < count:
                    break
            ids = turns.session_ids
            return [Memory(id=ids[r], score=s, turns=(ids[r],)) for r, s in
                    zip(rows[:cut].tolist(), scores[:cut].tolist(), strict=True)]
        if not getattr(self.base, "limit_is_prefix", False):
            return self._base_memories(persona, turns, query, size, lim)[0]
        # a LIMIT of n rows gives the first n rows of any larger LIMIT (FtsRetriever.
        # limit_is_prefix): rows read until their memories cover ``lim`` sessions, not the
        # persona's every matching turn fetched
        for count in _read_sizes(size, lim):
            memories, read, covered = self._base_memories(persona, turns, query, count, lim)
            if covered >= lim or read < count:
                break
        return memories

    def _base_memories(self, persona: Persona, turns: Persona, query: Query, rows: int,
                       lim: int) -> tuple[list[Memory], int, int]:
        """The base's ranking of the first ``rows`` turn rows as turn memories covering
        ``lim`` sessions, how many rows it ranked and how many sessions they cover; each
        ranked turn's session looked up, not every turn's."""
        got = self.base.rank(turns, query, rows)
        scores = {i: s for i, s in (getattr(self.base, "last_scores", None) or [])}
        ranked = [(str(i), scores.get(str(i))) for i in got]
        session_of = self._session_of(persona, turns)
        row_of = self._row_of(turns)
        ids = persona.session_ids
        sessions = {t: ids[int(session_of[row_of[t]])] for t, _ in ranked}
        return turn_memories(ranked, sessions, lim), len(got), len(set(sessions.values()))

    def _row_of(self, turns: Persona) -> dict[str, int]:
        """Each turn id's row in ``turns``, once per persona (:func:`.base.rows_by_id`)."""
        return rows_by_id(turns.session_ids)

    def first_memories(self, persona: Persona, query: Query, count: int) -> list[Memory]:
        """The first ``count`` memories of the ranking a budget's longer read takes
        (``rank`` at the persona's size, read as :func:`.ranked_output.read_distinct` reads
        a list: to the end, issue 43.4), without ranking more turns than those: the same
        memories, in the same order, with the same scores."""
        lim = len(persona.session_ids)
        turns = self._turns(persona)
        top = getattr(self.base, "top_rows", None)
        if turns.session_ids and not callable(top) and getattr(self.base, "limit_is_prefix",
                                                               False):
            # a LIMIT of ``count`` rows gives the first ``count`` rows of any larger LIMIT
            # (FtsRetriever.limit_is_prefix): as many turns ranked as are read
            rows = min(max(count, 1), len(turns.session_ids))
            return self._base_memories(persona, turns, query, rows, lim)[0][:count]
        if not turns.session_ids or not callable(top):
            return self.rank(persona, query, max(lim, 1))[:count]
        session_of = self._session_of(persona, turns)
        rows, scores = top(turns, query, min(count, len(turns.session_ids)))
        cut = _covering(session_of, rows, lim)
        ids = turns.session_ids
        # a growing read asks again for more: the memories made for the last read of the
        # same (turns, query) are its first ones (this ranking's prefix), made once
        last = self._first
        made = last[2] if last is not None and last[0] is turns and last[1] is query else []
        take = len(rows) if cut is None else cut
        made = made[:take]
        more = [_turn_memory(ids[r], s) for r, s in
                zip(rows[len(made):take].tolist(), scores[len(made):take].tolist(),
                    strict=True)]
        out = made + more
        self._first = (turns, query, out)
        return list(out)

    def session_order(self, persona: Persona, query: Query) -> list[str]:
        """The persona's sessions in the order of their first turn in this what-if's whole
        turn ranking (what explain reads past the top, :meth:`.PairRun.longer_sessions`):
        the sessions of :meth:`first_memories` at every turn, without a memory made per
        turn; a semantic base does not rank every turn by the rule either
        (``group_order``)."""
        turns = self._turns(persona)
        if not turns.session_ids:
            return []
        order = getattr(self.base, "group_order", None)
        top = getattr(self.base, "top_rows", None)
        session_of = self._session_of(persona, turns)
        n = len(turns.session_ids)
        if callable(order):
            firsts = order(turns, query, session_of)
        elif callable(top):
            rows, _ = top(turns, query, n)
            firsts = first_groups(session_of[rows])
        else:  # what first_memories reads at every turn: the base's ranking of them all
            row_of = self._row_of(turns)
            got = self.base.rank(turns, query, n)
            rows = np.fromiter((row_of[str(i)] for i in got), dtype=np.int64, count=len(got))
            firsts = first_groups(session_of[rows])
        ids = persona.session_ids
        return [ids[s] for s in firsts.tolist()]

    def _session_of(self, persona: Persona, turns: Persona) -> np.ndarray:
        """Each turn row's session row in ``persona``, once per persona."""
        if self._sessions is not None and self._sessions[0] is turns:
            return self._sessions[1]
        if turns.row_sessions is not None:
            out = np.asarray(turns.row_sessions, dtype=np.int64)
            self._sessions = (turns, out)
            return out
        rows = {sid: i for i, sid in enumerate(persona.session_ids)}
        out = np.fromiter((rows[s] for s in _sessions(persona, turns)), dtype=np.int64,
                          count=len(turns.session_ids))
        self._sessions = (turns, out)
        return out

    def close(self) -> None:
        """The base's ``close`` (its kept store connection), when it has one."""
        close = getattr(self.base, "close", None)
        if callable(close):
            close()


_new_memory = object.__new__


def _turn_memory(turn_id: str, score: float) -> Memory:
    """``Memory(id=turn_id, score=score, turns=(turn_id,))``, made without the frozen
    dataclass's field-by-field ``__init__`` (a budget's longer read makes ~600 a pair:
    half the cost; a test compares them field for field)."""
    memory: Memory = _new_memory(Memory)
    memory.__dict__.update(id=turn_id, score=score, sessions=(), turns=(turn_id,), text=None)
    return memory


def _covering(session_of: np.ndarray, rows: np.ndarray, limit: int) -> int | None:
    """How many of ``rows`` (best first) :func:`turn_memories` takes for ``limit`` sessions:
    up to the first turn of the ``limit``-th distinct session; None: they cover fewer."""
    sessions = session_of[rows]
    _, first = np.unique(sessions, return_index=True)
    if len(first) < limit:
        return None
    return int(np.sort(first)[limit - 1]) + 1


def _sessions(persona: Persona, turns: Persona) -> list[str]:
    """The session of each turn row, in row order (a turn id is ``<session_id>_<n>``)."""
    known = set(persona.session_ids)
    out: list[str] = []
    for turn_id in turns.session_ids:
        turn = parse_turn_id(turn_id)  # the one turn-id grammar (boundary/turn_ids.py)
        session = turn.session if turn is not None else ""
        if session not in known:  # pragma: no cover - turn rows are made from the sessions
            raise RetrieverError(f"turn {turn_id!r} names no session of the persona")
        out.append(session)
    return out
