"""A memory store's ranking (issue 36): :class:`.Memory` items read, checked, and turned into
the session ranking the run's metrics score.

``rank`` may return :class:`.Memory` items in place of session ids (docs/memories.md). A plain
session id ``s`` is the memory ``Memory(id=s, sessions=(s,))`` and an ``(s, score)`` pair that
memory with its score; a ranking may mix the three. What the harness derives:

* :func:`read_memories`: the items as checked memories: every field of the right type, at
  least one session or turn, every session one of the persona's, every turn id
  ``<session_id>_<n>`` a turn of one of its sessions (``n`` 1-based, as the turn granularity
  numbers turns, ``data/protocol.py``); scores all given or none. Anything else fails the
  item in one line naming the store, the question and the memory.
* :func:`is_plain`: whether the memories say no more than session ids would (each one
  session, named by its own id, no turns, no text): such a ranking is scored and reported
  exactly as those ids (a session store returning ``Memory`` items reports as it did).
* :func:`session_ranking` and :func:`session_scores`: the derived session ranking (each
  session at its first memory, a memory's own sessions in the order it lists them) and each
  session's score (its first memory's: sessions of one memory tie).
* :func:`memories_from_json`: a ``cmd:`` store's ``{"memories": [...]}`` answer as memories.
* :func:`memory_record`: what the JSON report keeps of them, bounded like explain's facts.

How far a ranking is read (:mod:`.ranked_output`): a memory counts by the sessions it covers,
so memories are read until they cover ``limit`` distinct sessions, never cut at ``limit``
memories, and until they number ``limit`` (memories that each cover several sessions:
``memory_recall@k`` is over the first k memories, the session metrics over the first k
distinct sessions). One-session memories reach ``limit`` memories by ``limit`` sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..boundary.scores import is_number, parse_score
from ..boundary.turn_ids import GRAMMAR, parse_turn_id
from ..errors import RetrieverError, one_line
from .base import Memory, Persona, TurnLists

__all__ = ["MAX_RECORDED_TEXT", "covered", "has_memories", "is_plain", "memories_from_json",
           "memory_record", "pair_memory_metrics", "read_memories", "session_ranking",
           "session_scores"]

#: A recorded memory's text is cut to this many characters (the report stays small).
MAX_RECORDED_TEXT = 240


def covered(memory: Memory) -> tuple[str, ...]:
    """The sessions a memory covers, in order: its ``sessions``, then its turns' sessions.
    Tolerant of ill-typed fields (the reader counts with it before :func:`read_memories`
    checks them): what is not a string is skipped."""
    from ..scoring.memory_metrics import covered_sessions  # a memory store's only

    sessions = memory.sessions if isinstance(memory.sessions, (tuple, list)) else ()
    turns = memory.turns if isinstance(memory.turns, (tuple, list)) else ()
    return covered_sessions((s for s in sessions if isinstance(s, str)),
                            (t for t in turns if isinstance(t, str)))


def has_memories(items: Sequence[object]) -> bool:
    """Whether ``rank`` returned any :class:`.Memory` item (one type check per item)."""
    return any(isinstance(item, Memory) for item in items)


def _is_score(value: object) -> bool:
    return parse_score(value) is not None


def _is_pair(item: object) -> bool:
    return isinstance(item, tuple) and len(item) == 2 and is_number(item[1])


def _strings(value: object) -> tuple[str, ...] | None:
    if isinstance(value, (tuple, list)) and all(isinstance(x, str) for x in value):
        return tuple(value)
    return None


def _fail(name: str, question_id: str, what: str, fix: str) -> RetrieverError:
    return RetrieverError(f"{name}: question {question_id}: {what}; {fix}")


def _shown(memory_id: object) -> str:
    """A memory's id as its error line shows it (made only for an error line)."""
    return one_line(repr(memory_id), 60)


def _checked(item: object, name: str, question_id: str) -> Memory:
    """One returned item as a well-typed memory (a session id or pair: its one-session
    memory)."""
    if isinstance(item, Memory):
        if not isinstance(item.id, str) or not item.id:
            raise _fail(name, question_id, f"a memory's id is {_shown(item.id)}",
                        "give each Memory a non-empty string id")
        sessions, turns = _strings(item.sessions), _strings(item.turns)
        if sessions is None or turns is None:
            field = "sessions" if sessions is None else "turns"
            raise _fail(name, question_id, f"memory {_shown(item.id)}: {field} is not a "
                        "tuple of strings", f"give {field} as a tuple of ids")
        if not sessions and not turns:
            raise _fail(name, question_id, f"memory {_shown(item.id)} names no session and "
                        "no turn",
                        "give each Memory its provenance: sessions=(...) or turns=(...)")
        score = None if item.score is None else parse_score(item.score)
        if item.score is not None and score is None:
            raise _fail(name, question_id, f"memory {_shown(item.id)}: score "
                        f"{one_line(repr(item.score), 40)} is not a finite number",
                        "give a number (higher is better) or None")
        if item.text is not None and not isinstance(item.text, str):
            raise _fail(name, question_id, f"memory {_shown(item.id)}: text is "
                        f"{type(item.text).__name__}, not a string", "give a str or None")
        return Memory(item.id, score, sessions, turns, item.text)
    if _is_pair(item):
        sid = str(item[0])  # type: ignore[index]
        score = parse_score(item[1])  # type: ignore[index]
        if score is None:
            raise _fail(name, question_id, f"rank returned the pair {one_line(repr(item), 80)}, "
                        "whose score is not a finite number", "give every (id, score) pair a "
                        "finite number as score, or return ids alone")
        return Memory(sid, score, (sid,))
    sid = str(item)
    return Memory(sid, None, (sid,))


def _provenance_fix() -> str:
    return ("a memory names only this question's sessions (persona.session_ids) and their "
            f"turns, {GRAMMAR}")


def _check_provenance(memory: Memory, persona: Persona, rows: Mapping[str, int],
                      name: str, question_id: str,
                      turn_count: Callable[[int], int] | None = None) -> None:
    """``memory`` names only the persona's sessions and their turns; ``turn_count``: each
    session row's turn count, where the persona knows its turns (:func:`_turn_counter`)."""
    for sid in memory.sessions:
        if sid not in rows:
            raise _fail(name, question_id, f"memory {_shown(memory.id)} names session "
                        f"{one_line(repr(sid), 60)}, not a session of this question's "
                        f"haystack ({len(rows)} sessions)", _provenance_fix())
    for tid in memory.turns:
        turn = parse_turn_id(tid)  # the one reading of a turn id (boundary/turn_ids.py)
        row = None if turn is None else rows.get(turn.session)
        if turn is not None and row is not None and tid in rows:
            raise _fail(name, question_id, f"memory {_shown(memory.id)} names turn "
                        f"{one_line(repr(tid), 60)}, which is also a session id of this "
                        f"question's haystack (turn {turn.number} of session "
                        f"{one_line(repr(turn.session), 40)}, or session "
                        f"{one_line(repr(tid), 40)})",
                        "name that session in sessions=(...), not turns=(...); a turn id "
                        "that is also a session id cannot be read one way")
        bad = turn is None or row is None or (
            turn_count is not None and turn.number > turn_count(row))
        if bad:
            raise _fail(name, question_id, f"memory {_shown(memory.id)} names turn "
                        f"{one_line(repr(tid), 60)}, not a turn of this question's "
                        "haystack", _provenance_fix())


def _turn_counter(persona: Persona) -> Callable[[int], int] | None:
    """Each session row's turn count (None: the persona does not know its sessions'
    turns); without reading its turns where the persona knows the count
    (:class:`.base.TurnLists`). Asked once a ranking, not once a memory."""
    if len(persona.turns) != len(persona.session_ids):
        return None
    turns = persona.turns
    count = getattr(turns, "count", None)
    if isinstance(turns, TurnLists) and callable(count):
        return lambda row: int(count(row))
    return lambda row: len(turns[row])


def read_memories(items: Iterable[object], persona: Persona, name: str,
                  question_id: str) -> list[Memory]:
    """``rank``'s items (memories, session ids, ``(id, score)`` pairs) as checked memories,
    in rank order; one :class:`RetrieverError` line for the first bad one. Scores are all
    given or none."""
    rows = {sid: i for i, sid in enumerate(persona.session_ids)}
    out = [_checked(item, name, question_id) for item in items]
    turn_count = _turn_counter(persona) if any(m.turns for m in out) else None
    for memory in out:
        _check_provenance(memory, persona, rows, name, question_id, turn_count)
    scored = [m.score is not None for m in out]
    if any(scored) and not all(scored):
        first = out[scored.index(False)]
        raise _fail(name, question_id, f"memory {one_line(repr(first.id), 60)} has no "
                    "score while others have one", "give every memory a score, or none")
    return out


def is_plain(memories: Sequence[Memory]) -> bool:
    """Whether each memory is a session id in disguise: one session, its own id, no turns,
    no text (the ranking then reports exactly as those ids would)."""
    return all(m.sessions == (m.id,) and not m.turns and m.text is None for m in memories)


def session_ranking(memories: Sequence[Memory]) -> list[str]:
    """Sessions in the order of their first memory (a memory's own in the order it lists
    them)."""
    return list(dict.fromkeys(s for m in memories for s in covered(m)))


def session_scores(memories: Sequence[Memory]) -> list[float] | None:
    """Per session of :func:`session_ranking`, its first memory's score (None: the
    memories carry no scores)."""
    if not memories or memories[0].score is None:
        return None
    seen: dict[str, float] = {}
    for m in memories:
        for s in covered(m):
            seen.setdefault(s, float(m.score))  # type: ignore[arg-type]
    return list(seen.values())


def memories_from_json(values: object, where: str) -> list[Memory]:
    """A ``cmd:`` answer's ``"memories"`` list (objects with ``id`` and optional ``score``,
    ``sessions``, ``turns``, ``text``) as memories; provenance is checked later, with any
    store's (:func:`read_memories`). One line for a malformed entry."""
    shape = ('answer {"memories": [{"id": "m1", "score"?: 0.9, "sessions"?: ["s1"], '
             '"turns"?: ["s1_2"], "text"?: "..."}, ...]}')
    if not isinstance(values, list):
        raise RetrieverError(f"{where}: \"memories\" is not a list; {shape}")
    out: list[Memory] = []
    for i, value in enumerate(values):
        if not isinstance(value, dict) or not isinstance(value.get("id"), str):
            raise RetrieverError(f"{where}: memories[{i}] is not an object with a string "
                                 f"\"id\"; {shape}")
        unknown = sorted(set(value) - {"id", "score", "sessions", "turns", "text"})
        if unknown:
            raise RetrieverError(f"{where}: memories[{i}] has the unknown key "
                                 f"{one_line(repr(unknown[0]), 40)}; {shape}")
        sessions, turns = _strings(value.get("sessions", [])), _strings(value.get("turns", []))
        if sessions is None or turns is None:
            field = "sessions" if sessions is None else "turns"
            raise RetrieverError(f"{where}: memories[{i}].{field} is not a list of "
                                 f"strings; {shape}")
        score = value.get("score")
        if score is not None and not _is_score(score):
            raise RetrieverError(f"{where}: memories[{i}].score is not a finite number; "
                                 f"{shape}")
        text = value.get("text")
        if text is not None and not isinstance(text, str):
            raise RetrieverError(f"{where}: memories[{i}].text is not a string; {shape}")
        out.append(Memory(value["id"], parse_score(score), sessions, turns, text))
    return out


def _excerpt(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_RECORDED_TEXT:
        return text
    return text[:MAX_RECORDED_TEXT - 1] + "…"


def memory_record(memories: Sequence[Memory], gold: Sequence[str],
                  top: int) -> list[dict[str, Any]]:
    """The memories the JSON report keeps: the first ones up to ``top`` distinct sessions
    and at least ``top`` of them (the memories ``memory_recall@top`` counts), plus the first
    memory covering each gold session past them; each with its 1-based
    ``rank``, ``id``, ``score``, ``sessions``, ``turns`` and ``text`` (an excerpt of at
    most :data:`MAX_RECORDED_TEXT` characters, None where the store gave none)."""
    kept: list[int] = []
    seen: set[str] = set()
    for i, memory in enumerate(memories):
        if len(seen) >= top and len(kept) >= top:
            break
        kept.append(i)
        seen.update(covered(memory))
    missing = [g for g in dict.fromkeys(gold) if g not in seen]
    for g in missing:
        first = next((i for i, m in enumerate(memories) if g in covered(m)), None)
        if first is not None and first not in kept:
            kept.append(first)
    return [{"rank": i + 1, "id": memories[i].id, "score": memories[i].score,
             "sessions": list(memories[i].sessions), "turns": list(memories[i].turns),
             "text": _excerpt(memories[i].text)} for i in sorted(kept)]


def pair_memory_metrics(memories: Mapping[int, Sequence[Memory]], gold: Sequence[str],
                        ks: Sequence[int],
                        gold_turns: Sequence[str] | None = None) -> dict[str, float]:
    """``memory_recall@k`` (and ``turn_recall@k``) of each k, on the memories of k's own
    call (:func:`.scoring.memory_metrics.memory_metrics`)."""
    from ..scoring.memory_metrics import memory_metrics  # a memory store's only

    out: dict[str, float] = {}
    for k in ks:
        out.update(memory_metrics([(m.sessions, m.turns) for m in memories[k]], gold, (k,),
                                  gold_turns))
    return out
