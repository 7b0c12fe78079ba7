"""Issue 35 (fast again): what a warm item opens. A hybrid or fts item's search, the tie
report's extra FTS5 query and the explain facts share ONE read-only connection to the
persona's store (:class:`.vipune.StoreConnection`, kept by the retriever); the FTS5 tokens of
the explain facts come from one in-memory table kept by the retriever
(:class:`.vipune.FtsTokenizer`), the same tokens as :func:`.vipune.fts_tokens`; and a warm
store check opens the store once, not once per header field."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.retrievers import Persona
from pytest_retrieval_eval.retrievers.reference import FtsRetriever, HybridRetriever
from pytest_retrieval_eval.vipune import store
from tests.retrievers.test_retrievers import TOPICS, make_persona, make_query
from tests.vipune.test_fts_matched import QUERIES


def _count_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``sqlite3.connect`` from now on, by its first argument."""
    opened: list[str] = []
    real = sqlite3.connect

    def counting(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(database))
        return real(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counting)
    return opened


def _checked(persona: Persona) -> Persona:
    """The persona with its store built and checked once, as a run's persona is (the
    ``retrieval_eval_store`` fixture, before the item's timing)."""
    path = persona.store_path()
    return dataclasses.replace(persona, store_path=lambda: path)


def _store_opens(opened: list[str]) -> list[str]:
    return [name for name in opened if name.endswith(".sqlite?mode=ro")
            or name.endswith(".sqlite")]


def test_a_hybrid_items_search_ties_and_facts_open_the_store_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    persona = _checked(make_persona(tmp_path))
    query = make_query("cat running Paris budget bike", persona.vectors[0] * 0.5)
    retriever = HybridRetriever()
    opened = _count_opens(monkeypatch)
    for limit in (5, 10):  # limit-sensitive: one search per pool size
        retriever.rank(persona, query, limit)
    assert retriever.last_fusion is not None and retriever.last_matched is not None
    retriever.last_fusion()
    matched = retriever.last_matched(list(persona.session_ids))
    assert len(_store_opens(opened)) == 1, opened
    retriever.close()  # the run's end: closed, and reopened when used again
    retriever.rank(persona, query, 5)
    assert len(_store_opens(opened)) == 2, opened
    assert retriever.last_matched is not None
    assert retriever.last_matched(list(persona.session_ids)) == matched
    retriever.close()


def test_an_fts_items_search_and_facts_open_the_store_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    persona = _checked(make_persona(tmp_path))
    query = make_query("user assistant", None)
    retriever = FtsRetriever()
    opened = _count_opens(monkeypatch)
    got = retriever.rank(persona, query, 3)
    assert len(got) == 3  # the LIMIT was reached: the tie report asks once more
    assert retriever.last_tied_past is not None and retriever.last_matched is not None
    retriever.last_tied_past()
    retriever.last_matched(list(persona.session_ids))
    assert len(_store_opens(opened)) == 1, opened
    retriever.close()


def test_a_replaced_or_missing_store_is_opened_afresh(tmp_path: Path) -> None:
    path = make_persona(tmp_path).store_path()
    kept = vipune.StoreConnection()
    first = kept.get(path)
    assert isinstance(first, sqlite3.Connection) and kept.get(path) is first
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(path, copy)
    os.replace(copy, path)  # another file at the same path (a rebuild, a swap)
    second = kept.get(path)
    assert second is not first and kept.get(path) is second
    with pytest.raises(sqlite3.ProgrammingError):  # the first was closed
        first.execute("SELECT 1")
    gone = tmp_path / "gone.sqlite"
    assert kept.get(gone) == gone  # opening it fails as a path's open does
    with pytest.raises(sqlite3.Error):
        vipune.fts_search(kept.get(gone), "cat", store.PROJECT_ID, 5)
    kept.close()


def test_the_kept_tokenizer_gives_fts_tokens_answer_from_one_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    questions = [vipune.fts_words(q) for q in QUERIES] + [
        ["running", "months?", "?", "don't", "Emergency", "C:\\temp"],
        ["naïve", "Straße", "日本語", "a\x00b", "--", "x" * 300],
        TOPICS[0].split(),
    ]
    expected = [vipune.fts_tokens(words) for words in questions]
    opened = _count_opens(monkeypatch)
    tokenizer = vipune.FtsTokenizer(keep=2)
    for _ in range(2):  # answered again after the memo dropped them: the same tokens
        assert [tokenizer.tokens(words) for words in questions] == expected
    assert opened == [":memory:"]
    tokenizer.close()
    assert tokenizer.tokens(questions[0]) == expected[0]
    assert opened == [":memory:", ":memory:"]
    tokenizer.close()


def test_a_warm_store_check_opens_no_connection_under_its_stamp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``stamp`` a verified store's version (stamp, ids, page 1's user_version and
    model mark) needs no SQLite connection (issue 35.1: one open a persona and item before);
    ``full`` reads its header and ids on a connection each (and hashes it once per
    process)."""
    cache = store.StoreCache(tmp_path / "stores")
    ids = ("a", "b")
    vectors = np.ones((2, vipune.EMBEDDING_DIM), dtype=np.float32)

    def rows() -> list[store.StoreRow]:
        return list(store.rows_from_arrays(ids, ["cat", "dog"], vectors, ["", ""]))

    key = store.store_key("ab" * 32, "model")
    built = cache.get_or_build(key, rows, session_ids=ids, fingerprint="model")
    opened = _count_opens(monkeypatch)
    assert cache.get_or_build(key, rows, session_ids=ids, fingerprint="model") == built
    assert _store_opens(opened) == [], opened
    full = store.StoreCache(tmp_path / "stores", verify="full")
    assert full.get_or_build(key, rows, session_ids=ids, fingerprint="model") == built
    assert len(_store_opens(opened)) == 2, opened  # the header, then the ids after the hash
    assert full.get_or_build(key, rows, session_ids=ids, fingerprint="model") == built
    assert len(_store_opens(opened)) == 4, opened  # again (the hash itself is memoised)
