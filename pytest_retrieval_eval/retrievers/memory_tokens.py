"""The tokens of a ranking's memories, as a reader would be handed them (issue 36, section 3).

A memory's text is its own ``text``; else the texts of its turns, each rendered as the turn
granularity renders a turn (``role: content``, :func:`..data.pairs.render_session` of that
one turn); else the texts of its sessions, as the store was given them (the persona's rows).
A memory of several turns or sessions costs the sum of their counts: each part is counted
once per run under its content address (:class:`..vectors.token_counts.TokenCounts`), so a
session shared by many memories, pairs or retrievers is tokenized once. A session store's
ranking is a ranking of one-session memories (``Memory(id=sid, sessions=(sid,))``).

:func:`memory_tokens` gives the counts and :func:`covered_sessions` the sessions each memory
covers, in order (its ``sessions``, then its turns' sessions, de-duplicated), the inputs of
:func:`..scoring.budget.score_budget`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..boundary.turn_ids import GRAMMAR, parse_turn_id
from ..data.pairs import render_session, text_key
from ..errors import RetrieverError
from ..scoring.budget import budget_fit, gold_reach, score_budget
from ..scoring.longmemeval_metrics import strip_turn
from ..vectors.token_counts import TokenCounts
from .base import Memory, Persona, rows_by_id, texts_at

__all__ = ["RECORDED_EXCERPT", "as_memories", "budget_step", "covered_sessions",
           "describe_record", "memory_text", "memory_tokens"]

#: Characters kept of the text a memory without its own stands for (its turns', else its
#: sessions'), in the report's record of it (explain shows an excerpt).
RECORDED_EXCERPT = 100


def as_memories(ranked: Sequence[str | Memory]) -> list[Memory]:
    """Session ids as one-session memories; memories as they are."""
    return [m if isinstance(m, Memory) else Memory(id=str(m), sessions=(str(m),))
            for m in ranked]


def covered_sessions(memory: Memory) -> tuple[str, ...]:
    """The sessions a memory covers, in order: its ``sessions``, then its turns' sessions
    (a turn id less its ``_<n>``), each once."""
    sessions, turns = memory.sessions, memory.turns
    if not sessions and len(turns) == 1:  # a turn memory (a turn what-if's): its session
        return (strip_turn(turns[0]),)
    return tuple(dict.fromkeys([*sessions, *(strip_turn(t) for t in turns)]))


#: The last session ids' first row each (:func:`_first_rows`): the ids and the map.
_LAST_ROWS: tuple[Sequence[str], dict[str, int]] | None = None


def _first_rows(ids: Sequence[str]) -> dict[str, int]:
    """Each id's first row in ``ids``, for the last ``ids`` asked (a budget's growing read
    counts a pair's memories a chunk at a time, each chunk against the same persona). The
    map is never changed by its readers; only a tuple's is kept."""
    global _LAST_ROWS
    last = _LAST_ROWS
    if last is not None and last[0] is ids:
        return last[1]
    n = len(ids)
    rows = dict(zip(reversed(ids), range(n - 1, -1, -1), strict=True))
    if isinstance(ids, tuple):  # immutable: the map stays its
        _LAST_ROWS = (ids, rows)
    return rows


def _turn_row(rows: Mapping[str, int], turn_id: str) -> int | None:
    """The persona row that is turn ``turn_id`` itself (turn granularity: a row is a turn),
    else None. The provenance reading comes first (issue 43.3): an id that names turn ``n``
    of one of the persona's sessions is that turn, never a session row of the same name
    (:func:`.memories.read_memories` refuses such an ambiguous id before it gets here)."""
    turn = parse_turn_id(turn_id)
    if turn is not None and turn.session in rows:
        return None
    return rows.get(turn_id)


def _turn_text(persona: Persona, rows: Mapping[str, int], turn_id: str) -> str:
    """A turn's text: turn ``n`` of its session's row, rendered as the turn granularity
    renders it, else the persona's row of that id (turn granularity: a row is a turn)."""
    own = _turn_row(rows, turn_id)
    if own is not None:
        return persona.texts[own]
    turn = parse_turn_id(turn_id)
    row = None if turn is None else rows.get(turn.session)
    turns = persona.turns[row] if row is not None and len(persona.turns) > row else None
    if turn is None or turns is None or not turn.number <= len(turns):
        raise RetrieverError(f"turn {turn_id!r} is no turn of this persona's sessions; name "
                             f"turns {GRAMMAR} (docs/memories.md)")
    return render_session([turns[turn.number - 1]])


def memory_tokens(memories: Sequence[Memory], persona: Persona,
                  counts: TokenCounts) -> list[int]:
    """Each memory's tokens (see the module's docstring). A session row's count is looked up
    by its text key without reading its text when the run has counted it already."""
    rows = _first_rows(persona.session_ids)
    keyed = len(persona.text_keys) == len(persona.session_ids)
    texts: dict[str, str] = {}  # key -> text, of parts that are not persona rows
    row_of_key: dict[str, int] = {}
    parts: list[list[str]] = []
    turn_keys = _TurnKeys(persona) if any(m.text is None and m.turns for m in memories) \
        else None
    for memory in memories:
        mine: list[str] = []
        if memory.text is not None:
            mine.append(_keep(texts, memory.text))
        elif memory.turns:
            for turn in memory.turns:
                # one of the persona's turn rows (a built-in turn what-if's): its key at once
                key = turn_keys.key(turn) if turn_keys is not None else None
                row = None if key is not None else _turn_row(rows, turn)
                if row is not None:
                    mine.append(_row_key(persona, row, keyed, row_of_key))
                    continue
                if turn_keys is not None and key is not None:
                    mine.append(key)  # its text rendered only if not counted yet
                    turn_keys.wanted[key] = turn
                else:
                    mine.append(_keep(texts, _turn_text(persona, rows, turn)))
        else:
            for session in memory.sessions:
                row = rows.get(session)
                if row is None:
                    raise RetrieverError(f"memory {memory.id!r} names session {session!r}, "
                                         "not one of this persona's sessions")
                mine.append(_row_key(persona, row, keyed, row_of_key))
        parts.append(mine)

    def missing_texts(keys: Sequence[str]) -> list[str]:
        turned = turn_keys.texts([k for k in keys if k in turn_keys.wanted]) \
            if turn_keys is not None else {}
        return [turned[k] if k in turned
                else texts[k] if k in texts else persona.texts[row_of_key[k]] for k in keys]

    flat = [key for mine in parts for key in mine]
    counted = dict(zip(flat, counts.counts(flat, missing_texts), strict=True))
    return [sum(counted[key] for key in mine) for mine in parts]


class _TurnKeys:
    """The text keys of a session persona's turns, from its turn rows (:attr:`.Persona.
    turn_rows`: each turn text keyed once, when they were built), so that a turn memory's
    count is looked up without rendering or hashing its text; None where the persona has
    no turn rows. A turn id's row is found from its session's first row and its number
    (checked against the row's own id), the map of every id made only for an id that
    does not sit there (a session with a blank turn before it): a budget reads ~600 of a
    persona's ~9,400 turns (issue 44)."""

    def __init__(self, persona: Persona) -> None:
        self.turns: Persona | None = None
        self._rows: dict[str, int] | None = None
        self._first: list[int] = []
        self._sessions: Mapping[str, int] = {}
        self.wanted: dict[str, str] = {}  # key -> turn id, of the keys asked here
        make = persona.turn_rows
        if make is None:
            return
        try:
            turns = make(vectors=False)  # type: ignore[call-arg]
        except TypeError:  # a persona made elsewhere
            return
        self.turns = turns
        if turns.row_sessions is not None:
            self._sessions = _first_rows(persona.session_ids)
            self._first = np.searchsorted(
                turns.row_sessions, np.arange(len(persona.session_ids))).tolist()

    def row(self, turn_id: str) -> int | None:
        """The turn row whose id is ``turn_id``, or None."""
        if self.turns is None:
            return None
        ids = self.turns.session_ids
        turn = parse_turn_id(turn_id)  # the one turn-id grammar
        at = None if turn is None else self._sessions.get(turn.session)
        if turn is not None and at is not None:
            row = self._first[at] + turn.number - 1
            if 0 <= row < len(ids) and ids[row] == turn_id:
                return row
        if self._rows is None:
            self._rows = rows_by_id(ids)
        return self._rows.get(turn_id)

    def key(self, turn_id: str) -> str | None:
        row = self.row(turn_id)
        return None if row is None or self.turns is None else self.turns.text_keys[row]

    def texts(self, keys: Sequence[str]) -> dict[str, str]:
        """The texts of ``keys`` (asked here), made together: only those turns rendered
        where the turn persona can make a few (:meth:`.LazyTexts.of_rows`)."""
        if not keys:
            return {}
        assert self.turns is not None
        rows: list[int] = []
        for k in keys:
            row = self.row(self.wanted[k])
            assert row is not None  # a key is wanted only where its turn's row was found
            rows.append(row)
        return dict(zip(keys, texts_at(self.turns.texts, rows), strict=True))


def memory_text(memory: Memory, persona: Persona) -> str:
    """The text a memory hands a reader: its ``text``; else its turns' texts, each rendered
    as the turn granularity renders a turn, one a line; else its sessions' rows."""
    if memory.text is not None:
        return memory.text
    rows = _first_rows(persona.session_ids)
    if memory.turns:
        return "\n".join(_turn_text(persona, rows, t) for t in memory.turns)
    return "\n".join(persona.texts[rows[s]] for s in memory.sessions if s in rows)


def _prefetch_turns(memories: Sequence[Memory], persona: Persona) -> None:
    """Read the sessions whose turns ``memories`` stand for at once (one corpus read a
    pair, not one a memory), where the persona's turns can be read so."""
    prefetch = getattr(persona.turns, "prefetch", None)
    if not callable(prefetch):
        return
    rows = _first_rows(persona.session_ids)
    wanted: list[int] = []
    for memory in memories:
        for turn_id in memory.turns:
            if _turn_row(rows, turn_id) is None:
                turn = parse_turn_id(turn_id)
                row = None if turn is None else rows.get(turn.session)
                if row is not None:
                    wanted.append(row)
    prefetch(wanted)


def describe_record(record: Sequence[dict[str, Any]], memories: Sequence[Memory],
                    persona: Persona, counts: TokenCounts | None) -> None:
    """What explain shows of the recorded memories (:func:`.memories.memory_record`, whose
    ``rank`` points into ``memories``), added in place: each one's ``tokens`` (a run with a
    budget: ``counts``) and, for a memory the store gave no text, an ``excerpt`` of the
    text it stands for (:func:`memory_text`, at most :data:`RECORDED_EXCERPT` characters)."""
    chosen = [memories[int(entry["rank"]) - 1] for entry in record]
    if counts is not None:
        for entry, n in zip(record, memory_tokens(chosen, persona, counts), strict=True):
            entry["tokens"] = n
    _prefetch_turns([m for m in chosen if m.text is None], persona)
    for entry, memory in zip(record, chosen, strict=True):
        if memory.text is None:
            text = " ".join(memory_text(memory, persona).split())
            entry["excerpt"] = (text if len(text) <= RECORDED_EXCERPT
                                else text[:RECORDED_EXCERPT - 1] + "…")


def _keep(texts: dict[str, str], text: str) -> str:
    key = text_key(text)
    texts[key] = text
    return key


def _row_key(persona: Persona, row: int, keyed: bool, row_of_key: dict[str, int]) -> str:
    key = persona.text_keys[row] if keyed else text_key(persona.texts[row])
    row_of_key.setdefault(key, row)
    return key


def budget_step(context: Sequence[str | Memory], per_k: Mapping[int, Sequence[str | Memory]],
                persona: Persona, gold: Sequence[str], budgets: Sequence[int],
                counts: TokenCounts,
                more: Callable[[], Sequence[str | Memory]] | None = None,
                first: Callable[[int], Sequence[str | Memory]] | None = None,
                cap: int = 0,
                ) -> tuple[dict[str, float], dict[str, Any]]:
    """A pair's budget metrics and facts: ``recall@<B>tok`` on ``context`` (the memories of
    the ranking read for the largest k), ``tokens@k`` on ``per_k[k]`` (the ranking k is
    scored on, its first k memories).

    ``more()``: the store's ranking read to the persona's size, asked for only when
    ``context`` holds fewer tokens than the largest budget and was cut by its limit (it
    covers as many sessions as the largest k asked for, and fewer than the persona holds):
    the budget's context then goes on past k, as a reader's context of B tokens would.
    ``first(size)``, in its place when given with a ``cap``: that ranking's first ``size``
    memories (a built-in turn what-if's), the first size estimated from the context's tokens
    a memory (:func:`_first_size`), each next from those read (:func:`_next_size`), at most
    ``cap``, until a read holds more tokens than the largest budget, is ``cap`` long, or
    holds fewer memories (the ranking ran out).
    A longer read is counted only as far as the largest budget is spent: up to the first
    memory that passes it (the tokens past it can end no budget's context).

    The facts (the pair's ``budget`` record): ``tokens``, each of the first memories'
    tokens (as many as the largest k), ``fit``, how many memories each budget's context
    holds, ``held``, the tokens of that context, ``ended``: "budget" when a memory did not
    fit, "ranking" when the ranking ran out first (recall@<B>tok then counts fewer tokens
    than B), and ``read``: the memories counted for the contexts (``reread``: whether that
    took the second, longer read), ``reach`` (:func:`..scoring.budget.gold_reach`) and
    ``read_tokens``, the tokens of the memories read: recall at any budget up to it (beyond
    it, where ``ended`` is "ranking")."""
    memories = as_memories(context)
    tokens = memory_tokens(memories, persona, counts)
    covered = [covered_sessions(m) for m in memories]
    # Each distinct list counted once, to the largest k cut from it (cut-offs of one call
    # share its list); each k then sums its own first k.
    own = {id(context): tokens}
    deepest: dict[int, int] = {}
    for k, ranked in per_k.items():
        deepest[id(ranked)] = max(k, deepest.get(id(ranked), 0))
    k_tokens: dict[int, Sequence[int]] = {}
    for k, ranked in per_k.items():
        if id(ranked) not in own:
            own[id(ranked)] = memory_tokens(as_memories(ranked[:deepest[id(ranked)]]),
                                            persona, counts)
        k_tokens[k] = own[id(ranked)]
    distinct = len({s for c in covered for s in c})
    top = max(budgets, default=0)
    size = len(set(persona.session_ids))
    reread = ((more is not None or (first is not None and cap > 0))
              and sum(tokens) < top
              and distinct >= max(per_k, default=0) and distinct < size)
    if reread:
        longer: list[Memory] = []
        counted: list[int] = []
        if first is not None and cap > 0:
            limit = _first_size(tokens, top, cap)
            while True:
                longer = as_memories(first(limit))
                counted = _tokens_until(longer, persona, counts, top)
                following = _next_size(limit, sum(counted), top, cap)
                if sum(counted) > top or following is None or len(longer) < limit:
                    break  # spent, the last read, or the whole ranking read
                limit = following
        elif more is not None:
            longer = as_memories(more())
            counted = _tokens_until(longer, persona, counts, top)
        if len(longer) > len(memories):
            memories = longer[:len(counted)]
            tokens = counted
            covered = [covered_sessions(m) for m in memories]
    metrics = score_budget(tokens, covered, gold, budgets, k_tokens)
    fit = {str(b): budget_fit(tokens, b) for b in budgets}
    facts = {"tokens": tokens[:max(per_k, default=len(tokens))],
             "fit": fit,
             "held": {b: sum(tokens[:n]) for b, n in fit.items()},
             "ended": {b: "ranking" if n == len(tokens) else "budget" for b, n in fit.items()},
             "read": len(tokens), "reread": bool(reread),
             # per gold session, the tokens of the shortest context covering it (bounded
             # by the gold's size): recall at every budget, for the HTML view's curve
             "reach": gold_reach(tokens, covered, gold), "read_tokens": sum(tokens)}
    return metrics, facts


#: A growing read (:func:`budget_step`'s ``cap``) asks for this many memories past its
#: estimate (:func:`_first_size`, :func:`_next_size`), and at least :data:`_MIN_READ`.
_SLACK = 1.25
_MIN_READ = 64


def _first_size(tokens: Sequence[int], top: int, cap: int) -> int:
    """The first longer read's size: as many memories as the largest budget holds at the
    context's tokens a memory, with :data:`_SLACK`; at most ``cap``."""
    each = max(sum(tokens) / max(len(tokens), 1), 1.0)
    return max(1, min(cap, max(_MIN_READ, math.ceil(_SLACK * top / each))))


def _next_size(limit: int, held: int, top: int, cap: int) -> int | None:
    """The next read's size after ``limit`` memories held ``held`` tokens, short of ``top``:
    as many as the tokens a memory read so far says ``top`` takes, with :data:`_SLACK`, and
    at least twice ``limit`` (so the reads end); None when ``limit`` was ``cap`` already."""
    if limit >= cap:
        return None
    each = max(held / max(limit, 1), 1.0)
    return min(cap, max(2 * limit, math.ceil(_SLACK * top / each)))


#: Memories counted at a time by a longer read (:func:`_tokens_until`).
_CHUNK = 64


def _tokens_until(memories: Sequence[Memory], persona: Persona, counts: TokenCounts,
                  top: int) -> list[int]:
    """The tokens of the first memories, up to and with the first whose running total
    passes ``top`` (all of them when none does)."""
    out: list[int] = []
    total = 0
    for start in range(0, len(memories), _CHUNK):
        for n in memory_tokens(memories[start:start + _CHUNK], persona, counts):
            out.append(n)
            total += n
            if total > top:
                return out
    return out
