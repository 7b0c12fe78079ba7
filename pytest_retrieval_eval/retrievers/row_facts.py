"""Per-row facts for ``retrieval-eval explain``: each shown row's score and what the retriever
says it matched, bounded so that no store can blow up the report.

A retriever may set, after ``rank``, ``last_facts``: a mapping of session id -> a small
mapping of JSON-able facts about that row (``{"score": 0.83, "matched": ["paris", "trip"]}``);
set it on every call (or to None), since the harness cannot tell a stale one. The harness
keeps, for the rows ``explain`` shows (the top max-k and the gold sessions), the row's score
where the retriever gave scores (``(id, score)`` returns or ``last_scores``) and its facts,
cut to size: at most :data:`MAX_KEYS` facts a row, names cut to :data:`MAX_NAME`
characters, strings to :data:`MAX_TEXT`, lists to :data:`MAX_ITEMS` items; a value that is
not a number, string, bool, null or a list of those is kept as its text, cut the same way;
a number that is not finite is dropped.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["MAX_ITEMS", "MAX_KEYS", "MAX_NAME", "MAX_TEXT", "row_facts"]

MAX_KEYS = 8
MAX_NAME = 40
MAX_TEXT = 200
MAX_ITEMS = 10
_DROP = object()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _scalar(value: object) -> object:
    """A JSON scalar as kept, or ``_DROP``."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else _DROP
    if isinstance(value, str):
        return _cut(value, MAX_TEXT)
    return _DROP


def _value(value: object) -> object:
    kept = _scalar(value)
    if kept is not _DROP:
        return kept
    if isinstance(value, numbers.Real):  # NaN, infinities
        return _DROP
    if isinstance(value, (list, tuple)):
        items = [_scalar(x) for x in value[:MAX_ITEMS]]
        out = [x if x is not _DROP else _cut(str(v), MAX_TEXT)
               for x, v in zip(items, value[:MAX_ITEMS], strict=True)]
        if len(value) > MAX_ITEMS:
            out.append(f"... {len(value) - MAX_ITEMS} more")
        return out
    return _cut(str(value), MAX_TEXT)


def clean_facts(facts: object) -> dict[str, Any]:
    """One row's facts, JSON-able and cut to size ({} for anything but a mapping)."""
    if not isinstance(facts, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, value in list(facts.items())[:MAX_KEYS]:
        kept = _value(value)
        if kept is not _DROP:
            out[_cut(str(key), MAX_NAME)] = kept
    return out


def row_facts(retriever: object, shown: Iterable[str],
              scores: Iterable[tuple[Sequence[str], Sequence[float]] | None],
              ) -> dict[str, dict[str, Any]]:
    """Per shown id (top rows, then gold): ``{"score": s, "facts": {...}}``, each part only
    where the retriever gave it; rows with neither are left out. ``scores``: (ids, scores)
    lists, the first holding an id giving its score."""
    score_of: dict[str, float] = {}
    for given in scores:
        if given is None:
            continue
        for mem_id, score in zip(*given, strict=False):
            if mem_id not in score_of and math.isfinite(float(score)):
                score_of[mem_id] = float(score)
    given_facts = getattr(retriever, "last_facts", None)
    if not isinstance(given_facts, Mapping):
        given_facts = {}
    out: dict[str, dict[str, Any]] = {}
    for mem_id in dict.fromkeys(shown):
        row: dict[str, Any] = {}
        if mem_id in score_of:
            row["score"] = score_of[mem_id]
        facts = clean_facts(given_facts.get(mem_id))
        if facts:
            row["facts"] = facts
        if row:
            out[mem_id] = row
    return out
