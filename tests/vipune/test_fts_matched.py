"""``fts_matched`` and ``fts_tokens`` (what ``retrieval-eval explain`` records of the FTS side):
the words a row matched are exactly those whose own FTS5 query, vipune's escaping and
statement, returns that row; the tokens are the table's tokenizer's; AND and OR lists agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.vipune import store

CONTENTS = [
    "I was running to the park with my cat",  # s0
    "Emergency fund: three to six months of expenses",  # s1
    'She said "hi" and it\'s fine; path C:\\temp\\new',  # s2
    "AND OR NOT NEAR are words here, months later",  # s3
    "nothing in common",  # s4
    "funds for the emergency room, cats and runners",  # s5
]
QUERIES = [
    "Emergency fund months?",
    "running cat? park",
    'it\'s "hi" C:\\temp\\new ?',
    "NEAR OR NOT months",
    "  \u3000 cat\u00a0cats  cat ",  # Rust's white space, repeats
]


def make_store(tmp_path: Path) -> Path:
    ids = [f"s{i}" for i in range(len(CONTENTS))]
    vectors = np.ones((len(ids), vipune.EMBEDDING_DIM), dtype=np.float32)
    rows = store.rows_from_arrays(ids, CONTENTS, vectors, ["2024-01-01T00:00:00Z"] * len(ids))
    return store.build_store(tmp_path / "s.sqlite", rows)


def _fts_rows(path: Path, query: str, mode: str = "and") -> list[str]:
    return [i for i, _ in vipune.fts_search(path, query, store.PROJECT_ID, 1000, mode=mode)]


@pytest.mark.parametrize("query", QUERIES)
def test_matched_words_are_what_fts5_match_per_word_says(tmp_path: Path, query: str) -> None:
    path = make_store(tmp_path)
    ids = [f"s{i}" for i in range(len(CONTENTS))]
    got = vipune.fts_matched(path, query, store.PROJECT_ID, [*ids, "not-a-row"])
    assert got.words == list(dict.fromkeys(vipune.fts_words(query)))
    assert got.total == len(got.words)
    for mem_id in ids:
        # vipune's own search of that one word (its escaping, its statement), unlimited
        expected = [w for w in got.words if mem_id in _fts_rows(path, w)]
        assert got.matched.get(mem_id, []) == expected, (mem_id, query)
    assert "not-a-row" not in got.matched
    live = [w for w, t in zip(got.words, got.tokens, strict=True) if t]
    # The AND query's rows matched every word FTS5 keeps a token of; the OR what-if's rows
    # matched at least one, and a row outside the OR list matched none.
    for mem_id in _fts_rows(path, query):
        assert got.matched[mem_id] == live
    ored = _fts_rows(path, query, "or")
    for mem_id in ids:
        assert (mem_id in ored) == bool(got.matched.get(mem_id)), mem_id


def test_tokens_are_the_tables_tokenizers() -> None:
    assert vipune.FTS_TOKENIZE in vipune.SCHEMA_SQL
    assert vipune.fts_tokens(["running", "months?", "?", "don't", "Emergency", "C:\\temp"]) == [
        ["run"], ["month"], [], ["don", "t"], ["emerg"], ["c", "temp"]]


def test_a_word_without_tokens_matches_nothing(tmp_path: Path) -> None:
    path = make_store(tmp_path)
    got = vipune.fts_matched(path, "cat ? -- park", store.PROJECT_ID, ["s0"])
    assert got.tokens == [["cat"], [], [], ["park"]]
    assert got.matched == {"s0": ["cat", "park"]}
    assert _fts_rows(path, "cat ? -- park") == ["s0"]  # FTS5 ignores them beside other words


def test_the_words_asked_about_are_bounded(tmp_path: Path) -> None:
    path = make_store(tmp_path)
    query = " ".join(f"w{i}" for i in range(200)) + " cat"
    got = vipune.fts_matched(path, query, store.PROJECT_ID, ["s0"])
    assert len(got.words) == vipune.MAX_MATCH_WORDS and got.total == 201
    assert got.matched == {}  # "cat" is past the bound: not asked about
    assert vipune.fts_matched(path, "cat", store.PROJECT_ID, []).matched == {}


@pytest.mark.parametrize("query", QUERIES)
def test_one_statement_per_call_and_the_and_lists_rows_answered_unasked(
        tmp_path: Path, query: str) -> None:
    """Issue 35, item 2: the words of every row come from ONE statement (only the rows asked
    about reach Python), and the rows of vipune's AND list, which matched every word with a
    token, are answered without asking FTS5: the same words as asking."""
    import sqlite3

    statements: list[str] = []

    class Counting(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            statements.append(sql)
            return super().execute(sql, *args)

    path = make_store(tmp_path)
    ids = [f"s{i}" for i in range(len(CONTENTS))]
    asked = vipune.fts_matched(path, query, store.PROJECT_ID, ids)
    db = sqlite3.connect(path, factory=Counting)
    try:
        hinted = vipune.fts_matched(db, query, store.PROJECT_ID, ids,
                                    matched_all=_fts_rows(path, query))
    finally:
        db.close()
    assert hinted == asked
    assert len(statements) <= 1, statements
    if set(_fts_rows(path, query)) >= set(ids):  # pragma: no cover - no query matches all
        assert statements == []
