"""A pair's recorded explain facts read back in their long form, whichever form the report
holds them in.

This version records per shown row lists in the order of the rows shown (the pair's
``ranked``, then its gold not in it: :func:`..retrievers.ranking.compact_facts`), reports
written before issue 35 objects keyed by id. :func:`full_facts` gives the keyed form of
either, so :mod:`.explain` reads one form: ``rows`` ``{id: {"score", "facts"}}`` (a fused
row's score that the compact form left out is its RRF sum, which explain adds up from the
ranks), ``fusion.rows`` ``{id: {"semantic", "fts"}}``, ``matched`` ``{id: [words]}`` (rows
that matched none left out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["full_facts", "shown_rows"]


def shown_rows(pair: Mapping[str, Any]) -> list[str]:
    """The rows a pair's explain facts hold, in order: its ``ranked``, then its gold not in
    it."""
    return list(dict.fromkeys([*(str(x) for x in pair.get("ranked") or []),
                               *(str(g) for g in pair.get("gold") or [])]))


def full_facts(pair: Mapping[str, Any]) -> Any:
    """``pair["explain"]`` with its per-row lists keyed by id (as reports before issue 35
    held them); a report's keyed facts, or a missing or odd value, as they are."""
    facts = pair.get("explain")
    if not isinstance(facts, Mapping):
        return facts
    shown = shown_rows(pair)
    out = dict(facts)
    if isinstance(facts.get("rows"), list):
        out["rows"] = {mem_id: _row(value) for mem_id, value in zip(shown, facts["rows"],
                                                                     strict=False)
                       if value is not None}
    for key in ("fusion", "fts"):
        source = facts.get(key)
        if not isinstance(source, Mapping):
            continue
        source = out[key] = dict(source)
        if isinstance(source.get("rows"), list):
            source["rows"] = {mem_id: _ranks(value) for mem_id, value
                              in zip(shown, source["rows"], strict=False)}
        if isinstance(source.get("matched"), list):
            words = source.get("words") or []
            source["matched"] = {mem_id: _words(mask, words) for mem_id, mask
                                 in zip(shown, source["matched"], strict=False)
                                 if _words(mask, words)}
    return out


def _row(value: object) -> object:
    """A ``rows`` entry: a bare number is the row's score."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"score": value}
    return value


def _ranks(value: object) -> object:
    """``[semantic rank, FTS rank]`` as ``{"semantic", "fts"}``."""
    if isinstance(value, list) and len(value) == 2:
        return {"semantic": value[0], "fts": value[1]}
    return value


def _words(mask: object, words: Sequence[Any]) -> list[str]:
    """The words a bitmask over ``words`` names (bit n: ``words[n]``)."""
    if not isinstance(mask, int) or isinstance(mask, bool) or mask <= 0:
        return []
    return [str(w) for n, w in enumerate(words) if mask >> n & 1]
