"""One LongMemEval instance -> an :class:`Instance` (memory rows + gold) or a :class:`Rejection`.

The rules (scope document, Section 2):

* **Pair** = the question plus the gold session ids. Gold is ``answer_session_ids``
  (duplicates removed, order kept). When that field is absent (or ``null``), gold falls back
  to the sessions holding at least one turn with ``"has_answer": true``;
  ``gold_source == "has_answer"`` and the note ``turn_level_gold`` record it. A present but
  empty list, or no gold from either source, rejects the instance.
* **Abstention** = ``question_id`` ends with ``_abs``. Such instances parse like any other,
  flagged ``abstention=True``; the plugin skips them when scoring.
* **Memory rows**: one per unique haystack session id, first occurrence wins. Content is
  :func:`render_session` (``"role: content"`` per turn, joined with ``"\\n"``); ``created_at``
  is the haystack date as RFC 3339 (``2023/05/30 (Tue) 23:40`` ->
  ``2023-05-30T23:40:00+00:00``; dates carry no zone, UTC is assumed). A session with no
  turns, or whose turns all have blank content, is *dropped* (vipune refuses empty content)
  and counted as ``empty_sessions``; if it was gold, that gold id counts as not in the
  haystack. ``question_date`` is converted to RFC 3339 the same way.
* **Notes** (the pair is kept, the anomaly counted): ``repeated_session_ids`` (extra slots
  of an id already seen), ``conflicting_repeats`` (those whose content differs from the first),
  ``gold_not_in_haystack`` (gold ids with no row), ``oversize_sessions`` (content over
  :data:`VIPUNE_MAX_INPUT_BYTES` UTF-8 bytes; kept, vipune's add path would refuse it),
  ``empty_sessions``, ``undated_sessions`` (a ``null`` haystack date: ``created_at == ""``),
  ``turn_level_gold``. Only non-zero notes are present.
* **Rejections** (one line each): not an object; a missing field; a wrong type; haystack lists
  of different lengths; an unknown ``question_type``; an empty or over-long question; a date
  that does not parse; an empty gold list.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import cast, overload

from ..errors import one_line
from ..vipune.limits import MAX_INPUT_LENGTH, rust_trim

__all__ = [
    "ABSTENTION",
    "QUESTION_TYPES",
    "VIPUNE_MAX_INPUT_BYTES",
    "DuplicateKeys",
    "Instance",
    "PairFacts",
    "Rejection",
    "Row",
    "SessionTurns",
    "parse_date",
    "parse_instance",
    "render_session",
    "text_key",
]

QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)
ABSTENTION = "abstention"
ABSTENTION_SUFFIX = "_abs"
GOLD_FROM_IDS = "answer_session_ids"
GOLD_FROM_HAS_ANSWER = "has_answer"


VIPUNE_MAX_INPUT_BYTES: int = MAX_INPUT_LENGTH  # vipune refuses longer input (UTF-8 bytes)

_QUESTION_TYPE_SET = frozenset(QUESTION_TYPES)
_REQUIRED: tuple[tuple[str, type, str], ...] = (
    ("question_id", str, "a string"),
    ("question_type", str, "a string"),
    ("question", str, "a string"),
    ("question_date", str, "a string"),
    ("haystack_session_ids", list, "a list"),
    ("haystack_dates", list, "a list"),
    ("haystack_sessions", list, "a list"),
)
_DATE_RE = re.compile(
    r"\s*(\d{4})[/-](\d{1,2})[/-](\d{1,2})"  # 2023/05/30 or 2023-05-30
    r"(?:\s*\([A-Za-z]{2,9}\.?\))?"  # (Tue)
    r"(?:(?:\s+|T)(\d{1,2}):(\d{2})(?::(\d{2}))?)?"  # 23:40[:00]
    r"\s*(?:Z|[+-]00:?00|UTC)?\s*"
)


@dataclass(frozen=True)
class Row:
    """One memory row = one unique haystack session id."""

    session_id: str
    content: str
    created_at: str
    #: The (role, content) turns the row holds, in order: the session's, or under turn
    #: granularity the row's own one (LongMemEval's views: the user turns its text joins).
    turns: Sequence[tuple[str, str]] = field(default=(), compare=False)


@dataclass(frozen=True, kw_only=True)
class PairFacts:
    """What identifies and scores one pair: the question, its gold, and counted anomalies.

    Shared by the parsed :class:`Instance` (with its memory rows) and the corpus's
    ``PairRecord`` (with the rows' ids and text keys only).
    """

    index: int
    question_id: str
    question_type: str
    question: str
    question_date: str
    gold: tuple[str, ...]
    gold_source: str
    abstention: bool
    notes: Mapping[str, int] = field(default_factory=dict)
    #: The turns holding the evidence: ``<session_id>_<n>`` (``n`` 1-based among the
    #: session's turns, as the turn granularity names them) of each gold session's turns with
    #: ``has_answer: true``, gold order; what ``turn_recall@k`` of a memory store is scored on.
    gold_turns: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Instance(PairFacts):
    """A parsed LongMemEval instance: the memory rows to store and the gold to find."""

    rows: tuple[Row, ...]

    @property
    def slots(self) -> int:
        """Haystack slots the instance had (rows + repeated ids + dropped empty sessions)."""
        return (
            len(self.rows)
            + self.notes.get("repeated_session_ids", 0)
            + self.notes.get("empty_sessions", 0)
        )


@dataclass(frozen=True)
class DuplicateKeys:
    """An item of the dataset whose JSON repeats a key inside one object (the reader's
    finding, :func:`dataset.iter_instances`): ``item`` as parsed (last value kept), ``keys``
    the repeated names in order of their second appearance."""

    item: object
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Rejection:
    """An instance that cannot be scored, with a one-line reason."""

    index: int
    question_id: str | None
    reason: str


def text_key(text: str) -> str:
    """Content address of a text: sha256 hex of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SessionTurns(Sequence[tuple[str, str]]):
    """A checked session's turns as (role, content) pairs, in order, made on reading: only a
    text the corpus build has not stored yet is read (most sessions of LongMemEval's
    haystacks repeat across questions). The row holding them has :func:`render_session`'s
    text of these very turns as its content (the corpus relies on it:
    :func:`.corpus.encode_turns`)."""

    __slots__ = ("_turns",)

    def __init__(self, turns: Sequence[Mapping[str, object]]) -> None:
        self._turns = turns

    def __len__(self) -> int:
        return len(self._turns)

    @overload
    def __getitem__(self, index: int) -> tuple[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[str, str]]: ...

    def __getitem__(self, index: int | slice) -> tuple[str, str] | Sequence[tuple[str, str]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        turn = self._turns[index]
        return str(turn["role"]), str(turn["content"])

    def __iter__(self) -> Iterator[tuple[str, str]]:  # not the mixin's index loop
        for turn in self._turns:
            yield str(turn["role"]), str(turn["content"])

    def __repr__(self) -> str:
        return f"SessionTurns({list(self)!r})"

    def roles_within(self, roles: frozenset[str]) -> bool:
        """Whether every turn's role is one of ``roles``."""
        return all(turn["role"] in roles for turn in self._turns)


def render_session(turns: Sequence[Mapping[str, object]]) -> str:
    """A session's memory text: each turn as ``"role: content"``, joined with ``"\\n"``."""
    return "\n".join([f"{turn['role']}: {turn['content']}" for turn in turns])


@lru_cache(maxsize=65536)
def parse_date(value: str) -> str | None:
    """A LongMemEval date (``2023/05/30 (Tue) 23:40``) as RFC 3339 UTC, or None if invalid."""
    m = _DATE_RE.fullmatch(value)
    if m is None:
        return None
    year, month, day, hour, minute, second = m.groups()
    try:
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
        )
    except ValueError:
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S+00:00")


def _show(value: object, limit: int = 60) -> str:
    """A short one-line repr of a value for a rejection reason."""
    return one_line(repr(value), limit)


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _Reject(Exception):
    """Internal: carries a rejection reason out of the validation helpers."""


def _session_text(turns: object, position: int, sid: str) -> tuple[str, bool, bool]:
    """Validate one session; return (rendered content, is_blank, has_answer).

    One pass over a session whose turns are all well formed (the cold build's hot loop:
    LongMemEval_M holds 250,000 session slots), rendering as :func:`render_session` does;
    anything else goes to :func:`_checked_session_text`, which names the fault."""
    if type(turns) is list:
        parts: list[str] = []
        blank = True
        has_answer = False
        for turn in turns:
            if not isinstance(turn, dict):
                break
            role = turn.get("role")
            content = turn.get("content")
            if type(role) is not str or type(content) is not str:
                break
            parts.append(f"{role}: {content}")
            if blank and content and not content.isspace():
                blank = False
            if not has_answer and turn.get("has_answer") is True:
                has_answer = True
        else:
            return "\n".join(parts), blank, has_answer
    return _checked_session_text(turns, position, sid)


def _checked_session_text(turns: object, position: int,
                          sid: str) -> tuple[str, bool, bool]:
    """:func:`_session_text`, each turn checked in turn: the first fault is a rejection."""
    if not isinstance(turns, list):
        raise _Reject(
            f"haystack_sessions[{position}] (session {_show(sid)}) is {_type_name(turns)}, "
            f"not a list of turns"
        )
    blank = True
    has_answer = False
    for t, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise _Reject(
                f"haystack_sessions[{position}][{t}] (session {_show(sid)}) is "
                f"{_type_name(turn)}, not a turn object"
            )
        try:
            role = turn["role"]
            content = turn["content"]
        except KeyError as exc:
            raise _Reject(
                f"haystack_sessions[{position}][{t}] (session {_show(sid)}) has no {exc.args[0]!r}"
            ) from None
        if not isinstance(content, str):
            raise _Reject(
                f"haystack_sessions[{position}][{t}] (session {_show(sid)}): content is "
                f"{_type_name(content)}, not a string"
            )
        if not isinstance(role, str):
            raise _Reject(
                f"haystack_sessions[{position}][{t}] (session {_show(sid)}): role is "
                f"{_type_name(role)}, not a string"
            )
        if blank and content and not content.isspace():
            blank = False
        if turn.get("has_answer") is True:
            has_answer = True
    return render_session(turns), blank, has_answer  # every turn checked above


def _parse(index: int, raw: dict[str, object]) -> Instance:
    for name, kind, label in _REQUIRED:
        if name not in raw:
            raise _Reject(f"missing field {name!r}")
        value = raw[name]
        if not isinstance(value, kind):
            raise _Reject(f"field {name!r} is {_type_name(value)}, not {label}")
    question_id: str = raw["question_id"]  # type: ignore[assignment]
    question_type: str = raw["question_type"]  # type: ignore[assignment]
    question: str = raw["question"]  # type: ignore[assignment]
    raw_qdate: str = raw["question_date"]  # type: ignore[assignment]
    ids: list[object] = raw["haystack_session_ids"]  # type: ignore[assignment]
    dates: list[object] = raw["haystack_dates"]  # type: ignore[assignment]
    sessions: list[object] = raw["haystack_sessions"]  # type: ignore[assignment]

    if not question_id.strip():
        raise _Reject("field 'question_id' is empty")
    if question_type not in _QUESTION_TYPE_SET:
        raise _Reject(
            f"unknown question_type {_show(question_type)} (expected one of: "
            f"{', '.join(QUESTION_TYPES)})"
        )
    stripped = rust_trim(question)  # vipune trims the query this way before it searches
    if not stripped:
        raise _Reject("question is empty")
    size = len(stripped.encode("utf-8", "surrogatepass"))
    if size > VIPUNE_MAX_INPUT_BYTES:
        raise _Reject(
            f"question is {size} bytes, over vipune's {VIPUNE_MAX_INPUT_BYTES}-byte input limit"
        )
    question_date = parse_date(raw_qdate)
    if question_date is None:
        raise _Reject(
            f"question_date {_show(raw_qdate)} is not a date like '2023/05/30 (Tue) 23:40'"
        )
    if not len(ids) == len(dates) == len(sessions):
        raise _Reject(
            f"haystack lists differ in length: {len(ids)} session ids, {len(dates)} dates, "
            f"{len(sessions)} sessions"
        )

    gold_field = raw.get("answer_session_ids")
    gold_ids: list[str] | None = None
    if gold_field is not None:
        if not isinstance(gold_field, list):
            raise _Reject(f"field 'answer_session_ids' is {_type_name(gold_field)}, not a list")
        for g, gid in enumerate(gold_field):
            if not isinstance(gid, str):
                raise _Reject(f"answer_session_ids[{g}] is {_type_name(gid)}, not a string")
        gold_ids = list(dict.fromkeys(gold_field))

    rows: list[Row] = []
    first_content: dict[str, str | None] = {}  # session id -> content (None when dropped)
    evidence: dict[str, None] = {}
    answer_turns: dict[str, tuple[str, ...]] = {}  # per kept session, its has_answer turns
    repeated = conflicting = oversize = empty = undated = 0
    for position, sid in enumerate(ids):
        if not isinstance(sid, str):
            raise _Reject(f"haystack_session_ids[{position}] is {_type_name(sid)}, not a string")
        if not sid:  # a store row needs an id (vipune's memories.id is its primary key)
            raise _Reject(f"haystack_session_ids[{position}] is an empty string; give every "
                          f"session an id")
        raw_date = dates[position]
        if raw_date is None:
            created_at = ""
        elif isinstance(raw_date, str):
            parsed = parse_date(raw_date)
            if parsed is None:
                raise _Reject(
                    f"haystack_dates[{position}] {_show(raw_date)} is not a date like "
                    f"'2023/05/30 (Tue) 23:40'"
                )
            created_at = parsed
        else:
            raise _Reject(f"haystack_dates[{position}] is {_type_name(raw_date)}, not a string")
        content, blank, has_answer = _session_text(sessions[position], position, sid)
        if has_answer:
            evidence[sid] = None
        if sid in first_content:
            repeated += 1
            first = first_content[sid]
            if (first if first is not None else "") != content and not (first is None and blank):
                conflicting += 1
            continue
        if blank:
            first_content[sid] = None
            empty += 1
            continue
        first_content[sid] = content
        if raw_date is None:
            undated += 1
        if len(content) > VIPUNE_MAX_INPUT_BYTES // 4 and (
            len(content.encode("utf-8")) > VIPUNE_MAX_INPUT_BYTES
        ):
            oversize += 1
        checked = cast("Sequence[Mapping[str, object]]", sessions[position])  # _session_text
        rows.append(Row(sid, content, created_at, SessionTurns(checked)))
        answer_turns[sid] = tuple(f"{sid}_{n}" for n, turn in enumerate(checked, start=1)
                                  if turn.get("has_answer") is True) if has_answer else ()

    notes: dict[str, int] = {}
    # Gold rejections come after the haystack's checks: LongMemEval's protocol scores an
    # instance whose only fault is its gold (protocol.parse_for_view), so the rest is checked.
    if gold_ids == []:
        raise _Reject("empty gold list: answer_session_ids is []")
    if gold_ids is not None:
        gold = tuple(gold_ids)
        gold_source = GOLD_FROM_IDS
    else:
        if not evidence:
            raise _Reject(
                "no gold: answer_session_ids is absent and no turn carries has_answer: true"
            )
        gold = tuple(evidence)
        gold_source = GOLD_FROM_HAS_ANSWER
        notes["turn_level_gold"] = 1
    missing = sum(1 for gid in gold if first_content.get(gid) is None)
    for name, count in (
        ("gold_not_in_haystack", missing),
        ("repeated_session_ids", repeated),
        ("conflicting_repeats", conflicting),
        ("oversize_sessions", oversize),
        ("empty_sessions", empty),
        ("undated_sessions", undated),
    ):
        if count:
            notes[name] = count
    return Instance(
        index=index,
        question_id=question_id,
        question_type=question_type,
        question=stripped,  # vipune trims the query before it embeds or searches
        question_date=question_date,
        gold=gold,
        gold_source=gold_source,
        abstention=question_id.endswith(ABSTENTION_SUFFIX),
        rows=tuple(rows),
        notes=notes,
        gold_turns=tuple(t for gid in dict.fromkeys(gold) for t in answer_turns.get(gid, ())),
    )


def parse_instance(index: int, raw: object) -> Instance | Rejection:
    """Validate one raw instance (an item of the dataset's top-level array).

    Never raises for bad data: every fault becomes a :class:`Rejection` with a one-line reason.
    An instance the reader found holding a repeated key (:class:`DuplicateKeys`) is rejected
    naming the key: which of its values LongMemEval meant cannot be known.
    """
    if isinstance(raw, DuplicateKeys):
        item = raw.item
        qid = item.get("question_id") if isinstance(item, dict) else None
        names = ", ".join(repr(k) for k in raw.keys[:3])
        more = f" and {len(raw.keys) - 3} more" if len(raw.keys) > 3 else ""
        return Rejection(index, qid if isinstance(qid, str) else None, one_line(
            f"key {names}{more} appears twice in one JSON object of the instance (a JSON "
            f"reader keeps only the last value); remove the duplicate"))
    if not isinstance(raw, dict):
        return Rejection(index, None, f"instance is {_type_name(raw)}, not an object")
    qid = raw.get("question_id")
    question_id = qid if isinstance(qid, str) else None
    try:
        return _parse(index, raw)
    except _Reject as exc:
        reason = str(exc)
    except Exception as exc:  # defensive: bad data must never crash the run
        reason = f"unreadable instance ({type(exc).__name__}: {_show(str(exc))})"
    return Rejection(index, question_id, one_line(reason))
