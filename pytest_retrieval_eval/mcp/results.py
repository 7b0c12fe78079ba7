"""A tool's answer read once, at the door: its JSON (or its texts), a store answer's new id or
refusal, and a search answer's results as :class:`Memory` items with their provenance.

Provenance is found, in this order: the result's metadata (``session_id``, ``turn_id``); the id
the store answer gave when that session was stored; the result's id when it is itself a
session or turn id of the persona (a server that names memories by the id it was given); else
the result's text, matched back to the stored texts that contain it. A result matched by none
stays in the ranking with no session (it takes its place, covers nothing) and is counted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import RetrieverError, one_line
from ..retrievers.base import Memory
from .mapping import ToolMapping

__all__ = ["Answer", "Provenance", "Unit", "read_results", "refused", "stored_id"]


@dataclass(frozen=True)
class Answer:
    """A tool call's answer as plain values: its text blocks, its structured content, whether
    it is an error result, and the count of blocks that are neither text nor read."""

    texts: tuple[str, ...] = ()
    structured: Any = None
    is_error: bool = False
    other: int = 0

    def value(self) -> tuple[Any, bool]:
        """The answer's JSON value and True; or its texts and False when they are not JSON.
        One text block is parsed as one value; several, each a JSON object, are a list of
        them (a tool that returned a list of records); structured content is read when the
        texts are not JSON."""
        if len(self.texts) == 1:
            try:
                return json.loads(self.texts[0]), True
            except ValueError:
                pass
        elif self.texts:
            try:
                parsed = [json.loads(t) for t in self.texts]
            except ValueError:
                parsed = []
            if parsed and all(isinstance(p, dict) for p in parsed):
                return parsed, True
        if self.structured is not None:
            if isinstance(self.structured, dict) and set(self.structured) == {"result"}:
                return self.structured["result"], True  # a wrapped list or scalar
            return self.structured, True
        return list(self.texts), False

    def error_text(self) -> str:
        """An error result's message, on one line."""
        return one_line(" ".join(self.texts) or "(no message)", 300)


@dataclass(frozen=True)
class Unit:
    """One thing stored: a session or one of its turns, with its text."""

    id: str
    session: str
    turn: str | None
    text: str
    date: str


@dataclass
class Provenance:
    """What a persona's ingest stored, to trace results back to it."""

    units: list[Unit] = field(default_factory=list)
    #: The server's own ids of stored units (from the store answers).
    by_server_id: dict[str, Unit] = field(default_factory=dict)

    def by_unit_id(self) -> dict[str, Unit]:
        return {u.id: u for u in self.units}


def _path(value: Any, path: str) -> Any:
    for part in path.split(".") if path else []:
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(part)
        value = value[part]
    return value


def _id_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int):
        return str(value)
    return None


def stored_id(answer: Answer, mapping: ToolMapping) -> str | None:
    """The new memory's id a store answer gives (None: the mapping reads none, or it is
    not there)."""
    if not mapping.stored_id:
        return None
    value, is_json = answer.value()
    if not is_json:
        return None
    try:
        return _id_text(_path(value, mapping.stored_id))
    except KeyError:
        return None


def refused(answer: Answer, mapping: ToolMapping) -> bool:
    """Whether a store answer says the memory was refused (its ``status`` is the mapping's
    ``conflict`` value)."""
    if not mapping.refusals:
        return False
    value, is_json = answer.value()
    return is_json and isinstance(value, Mapping) and value.get("status") in mapping.refusals


def _text_of(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return None


def _from_metadata(meta: Any, units: Mapping[str, Unit], sessions: set[str]
                   ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    if not isinstance(meta, Mapping):
        return None
    turn, session = _id_text(meta.get("turn_id")), _id_text(meta.get("session_id"))
    if turn is not None:
        unit = units.get(turn)
        if unit is not None:
            return (unit.session,), (turn,)
    if session is not None and session in sessions:
        return (session,), ()
    return None


def _matched(text: str, units: Sequence[Unit]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    needle = text.strip()
    if not needle:
        return (), ()
    hits = [u for u in units if needle in u.text]
    sessions = tuple(dict.fromkeys(u.session for u in hits))
    turns = tuple(u.turn for u in hits if u.turn is not None)
    return sessions, turns


def read_results(answer: Answer, mapping: ToolMapping, stored: Provenance,
                 where: str) -> tuple[list[Memory], int]:
    """A search answer's results as memories, best first, and how many matched nothing.
    ``where`` names the call in the one line a malformed answer gets."""
    value, is_json = answer.value()
    units = stored.by_unit_id()
    sessions = {u.session for u in stored.units}
    memories: list[Memory] = []
    unmatched = 0
    if not is_json:  # text only: each block a result, matched back by its text
        for i, text in enumerate(value):
            found, turns = _matched(text, stored.units)
            unmatched += not found
            memories.append(Memory(f"text-{i + 1}", None, found, turns, text))
        return memories, unmatched
    try:
        results = _path(value, mapping.results)
    except KeyError as exc:
        raise RetrieverError(
            f"{where}: the answer has no {exc.args[0]!r} (mapping results = "
            f"{mapping.results!r}): {one_line(json.dumps(value)[:160], 160)}; fix the "
            "mapping's results path") from None
    if not isinstance(results, list):
        raise RetrieverError(
            f"{where}: the results ({mapping.results or 'the answer'}) are a JSON "
            f"{type(results).__name__}, not a list; fix the mapping's results path")
    scores: list[float | None] = []
    for i, item in enumerate(results):
        shown = f"result {i + 1}"
        if isinstance(item, str):  # a list of texts
            found, turns = _matched(item, stored.units)
            unmatched += not found
            memories.append(Memory(f"text-{i + 1}", None, found, turns, item))
            scores.append(None)
            continue
        if not isinstance(item, Mapping):
            raise RetrieverError(f"{where}: {shown} is a JSON {type(item).__name__}, not an "
                                 "object or a text; answer a list of records")
        rid = _id_text(item.get(mapping.result_id)) if mapping.result_id else None
        score: float | None = None
        if mapping.result_score and mapping.result_score in item:
            raw = item[mapping.result_score]
            if isinstance(raw, bool) or not isinstance(raw, (int, float)) or \
                    not math.isfinite(raw):
                raise RetrieverError(f"{where}: {shown}: score {one_line(repr(raw), 40)} is "
                                     "not a finite number")
            score = float(raw)
        text = _text_of(item.get(mapping.result_text)) if mapping.result_text else None
        prov = _from_metadata(item.get(mapping.result_metadata), units, sessions) \
            if mapping.result_metadata else None
        if prov is None and rid is not None and rid in stored.by_server_id:
            unit = stored.by_server_id[rid]
            prov = (unit.session,), (() if unit.turn is None else (unit.turn,))
        if prov is None and rid is not None and rid in units:
            unit = units[rid]
            prov = (unit.session,), (() if unit.turn is None else (unit.turn,))
        if prov is None and text is not None:
            prov = _matched(text, stored.units)
        if prov is None or not prov[0]:
            unmatched += 1
            prov = (), ()
        memories.append(Memory(rid or f"result-{i + 1}", score, prov[0], prov[1], text))
        scores.append(score)
    if any(s is None for s in scores) and any(s is not None for s in scores):
        raise RetrieverError(f"{where}: some results have a score "
                             f"({mapping.result_score!r}) and some none; give every result "
                             "a score, or none (result_score = \"\")")
    return _unique(memories), unmatched


def _unique(memories: list[Memory]) -> list[Memory]:
    """Memories with their ids made unique (a server may give one id twice)."""
    seen: dict[str, int] = {}
    out = []
    for m in memories:
        n = seen.get(m.id, 0)
        seen[m.id] = n + 1
        out.append(m if n == 0 else Memory(f"{m.id}#{n + 1}", m.score, m.sessions, m.turns,
                                           m.text))
    return out
