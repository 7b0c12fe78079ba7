"""A pair's recorded explain facts read back in their long form, whichever form the report
holds them in.

This version records per shown row lists in the order of the rows shown (the pair's
``ranked``, then its gold not in it: :func:`..retrievers.ranking.compact_facts`), reports
written before issue 35 objects keyed by id. :func:`full_facts` gives the keyed form of
either, so :mod:`.explain` reads one form: ``rows`` ``{id: {"score", "facts"}}`` (a fused
row's score that the compact form left out is its RRF sum, which explain adds up from the
ranks), ``fusion.rows`` ``{id: {"semantic", "fts"}}``, ``matched`` ``{id: [words]}`` (rows
that matched none left out).

Since issue 48 (item 11) a run records, under ``fusion`` or ``fts``, only the ``store`` its
search read: the query words each shown row matched are asked of that store's FTS5 table
here, when explain shows them (:func:`.vipune.fts_matched`, one statement), not by the run
for every pair. Reports written before record ``words``, ``tokens``, ``words_total`` and
``matched`` (bitmasks, or before issue 35 word lists), read as they are. A store no longer
there (a cleared cache, another machine) leaves ``matched`` out and names the store
(``store_gone``); the words and FTS5's tokens of them need no store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import vipune
from ..vipune.store import PROJECT_ID

__all__ = ["MAX_TOKENS", "MAX_WORD", "full_facts", "shown_rows"]

#: A word (or token) explain shows is cut to this many characters, a word to this many
#: tokens (one "word" of a question may be thousands of characters).
MAX_WORD = 40
MAX_TOKENS = 8


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
        if "store" in source and "matched" not in source:
            source.update(_asked(source, pair.get("question"), shown))
    return out


def _asked(source: dict[str, Any], question: object, shown: Sequence[str]) -> dict[str, Any]:
    """The query words each shown row matched, asked of the store the run recorded: the
    long form's ``words``, ``tokens``, ``words_total`` and ``matched``; without the store
    (gone, or not a store now), the words and tokens and ``store_gone``. ``store`` and
    ``project_id`` are taken out: the facts read back are what older reports held."""
    store = source.pop("store")
    project = source.pop("project_id", PROJECT_ID)
    text = question if isinstance(question, str) else ""
    words = list(dict.fromkeys(vipune.fts_words(vipune.rust_trim(text))))
    cut = words[:vipune.MAX_MATCH_WORDS]
    out: dict[str, Any] = {"words": [_cut(w) for w in cut],
                           "tokens": [[_cut(t) for t in tokens[:MAX_TOKENS]]
                                      for tokens in vipune.fts_tokens(cut)],
                           "words_total": len(words)}
    path = Path(str(store))
    try:
        if not path.is_file():
            raise FileNotFoundError(store)
        got = vipune.fts_matched(path, text, str(project), shown)
    except (OSError, sqlite3.Error):
        return {**out, "store_gone": str(store)}
    out["matched"] = {mem_id: [_cut(w) for w in matched]
                      for mem_id, matched in got.matched.items() if matched}
    return out


def _cut(word: str) -> str:
    return word if len(word) <= MAX_WORD else word[:MAX_WORD - 1] + "…"


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
