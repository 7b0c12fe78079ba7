"""Tests written to kill the mutants that survived the first mutation run (docs/mutation.md).

Each test pins a behaviour of the vipune reference, ``metrics.py`` or ``store.py`` that the older
tests left open: the whole one-line message of each error (the fix included), float32
inputs given as float64, edge sizes (one row, no row, one dimension), time zones, the
named mutants (dedupe keeping the last occurrence, recall_all of partial gold, a non-zero
recency weight in the hybrid retriever) and the named mutant script's patches themselves.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sqlite3
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.errors import CacheError, DataError
from pytest_retrieval_eval.scoring import metrics
from pytest_retrieval_eval.vipune import VipuneInputError, VipuneOutputError, exports, store
from tests.support import ROOT

DIM = vipune.EMBEDDING_DIM


def unit(*coords: float, dim: int = DIM) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[: len(coords)] = coords
    return v


def message(exc_type: type[BaseException], fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    return str(info.value)


def make_store(path: Path, contents: list[str], vectors: np.ndarray | None = None,
               dates: list[str] | None = None) -> Path:
    ids = [f"s{i}" for i in range(len(contents))]
    if vectors is None:
        vectors = np.ones((len(contents), DIM), dtype=np.float32)
    rows = store.rows_from_arrays(ids, contents, vectors,
                                  dates or ["2024-01-01T00:00:00Z"] * len(ids))
    return store.build_store(path, rows)


# --------------------------------------------------------------------------- vipune: messages
def test_validate_messages_carry_the_whole_line_with_the_fix() -> None:
    assert message(VipuneInputError, vipune.validate_limit, 0) == (
        "vipune rejects the input: Limit must be greater than 0; ask for at least one result")
    assert message(VipuneInputError, vipune.validate_limit, 10_001) == (
        "vipune rejects the input: Limit 10001 exceeds maximum allowed (10000); "
        "ask for at most 10000 results per call")
    assert message(TypeError, vipune.validate_limit, True) == "limit must be an int, not bool"
    assert message(TypeError, vipune.validate_limit, 2.0) == "limit must be an int, not float"
    assert message(VipuneInputError, vipune.validate_query, " ") == (
        "vipune rejects the input: Input cannot be empty; give a non-blank query")
    assert message(VipuneInputError, vipune.validate_query, "a" * 100_001) == (
        "vipune rejects the input: Input too long: 100001 characters (max: 100000); "
        "shorten the query to at most 100000 UTF-8 bytes")
    assert message(VipuneInputError, vipune.validate_recency, 1.5) == (
        "vipune rejects the input: Invalid recency weight: 1.5 (must be between 0.0 and 1.0); "
        "use a recency weight between 0 and 1")


@pytest.mark.parametrize(("weight", "shown"), [(math.inf, "inf"), (-math.inf, "-inf")])
def test_recency_message_prints_infinities_as_rust_does(weight: float, shown: str) -> None:
    with pytest.raises(VipuneInputError) as info:
        vipune.validate_recency(weight)
    assert info.value.vipune_message == (
        f"Invalid recency weight: {shown} (must be between 0.0 and 1.0)")


def test_vector_and_blob_messages() -> None:
    assert message(ValueError, vipune.vector_to_blob, np.ones((2, 2), np.float32)) == (
        "an embedding is one vector, got shape (2, 2)")
    assert message(ValueError, vipune.blob_to_vector, b"\0" * 1500) == (
        "Invalid BLOB size: expected 1536 bytes, got 1500 bytes")
    assert message(ValueError, vipune.blob_to_vector, b"\0" * 6, dim=None) == (
        "Invalid BLOB size: 6 bytes is not a multiple of 4")
    assert message(ValueError, vipune.cosine_similarity, [1.0, math.nan], [1.0, 1.0]) == (
        "Invalid embedding: Vector contains NaN or infinite values")


def test_blobs_are_float32_whatever_the_input_type() -> None:
    v64 = np.array([0.1, 1 / 3, -2.5, 1e-8])
    blob = vipune.vector_to_blob(v64, dim=None)
    assert blob == np.array(v64, dtype="<f4").tobytes() and len(blob) == 16
    back = vipune.blob_to_vector(blob, dim=None)
    assert back.dtype == np.float32 and np.array_equal(back, v64.astype(np.float32))


def test_cosine_argument_checks_each_side() -> None:
    assert message(ValueError, vipune.cosine_similarity, [[1.0, 2.0]], [1.0, 2.0]) == (
        "cosine similarity takes two 1-d vectors")
    assert message(ValueError, vipune.cosine_similarity, [1.0, 2.0], [[1.0, 2.0]]) == (
        "cosine similarity takes two 1-d vectors")
    for a, b in (([], [1.0]), ([1.0], [])):
        assert message(ValueError, vipune.cosine_similarity, a, b) == (
            "Cannot compute similarity with empty vector")
    assert vipune.cosine_similarity([2.0], [3.0]) == 1.0  # one dimension is a vector too
    assert vipune.cosine_similarity([2.0], [-3.0]) == -1.0


def test_cosine_rounds_float64_inputs_to_float32_first() -> None:
    """vipune stores and embeds float32: a float64 input is that float32 value."""
    a, b = [0.1, 0.2, 0.7], [0.3, 0.4, 1e-3]
    a32, b32 = np.array(a, np.float32).astype(np.float64), np.array(b, np.float32).astype(
        np.float64)
    expected = float(a32 @ b32) / (math.sqrt(float(a32 @ a32)) * math.sqrt(float(b32 @ b32)))
    assert vipune.cosine_similarity(a, b) == expected
    assert vipune.cosine_similarity(np.array(a), np.array(b)) == expected


# --------------------------------------------------------------------------- semantic scan
def test_semantic_scan_rounds_float64_rows_and_query_to_float32() -> None:
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((20, 16))
    query = rng.standard_normal(16)
    ids = [f"r{i}" for i in range(20)]
    as32 = vipune.semantic_search(rows.astype(np.float32), ids, query.astype(np.float32), 20)
    assert vipune.semantic_search(rows, ids, query, 20) == as32
    assert vipune.semantic_search(rows.astype(np.float32), ids, query, 20) == as32
    assert vipune.semantic_search(rows, ids, query.astype(np.float32), 20) == as32


def test_semantic_one_row_and_one_dimension() -> None:
    assert vipune.semantic_search(np.ones((1, 4), np.float32), ["only"], np.ones(4), 5) == [
        ("only", 1.0)]
    got = vipune.semantic_search(np.array([[2.0], [-1.0]], np.float32), ["a", "b"],
                                 np.array([3.0], np.float32), 2)
    assert got == [("a", 1.0), ("b", -1.0)]


def test_semantic_scan_messages() -> None:
    assert message(ValueError, vipune.semantic_search, np.ones((2, 4)), ["a", "b", "c"],
                   np.ones(4), 3) == "3 ids for 2 vectors"
    assert message(ValueError, vipune.semantic_search, np.ones((2, 4)), ["a", "b"],
                   np.ones((1, 4)), 3) == "the query vector must be 1-d"
    assert message(ValueError, vipune.semantic_search, np.ones((2, 0)), ["a", "b"],
                   np.ones(0), 3) == "Cannot compute similarity with empty vector"
    assert message(ValueError, vipune.semantic_search, np.ones(3), ["a", "b", "c"],
                   np.ones(3), 3) == "the stored vectors must form a 2-d array, got shape (3,)"


def test_similarities_of_no_rows_is_an_empty_float64_array() -> None:
    # semantic_search returns early on no ids; the scan itself must still answer for any width
    got = vipune.semantic._similarities(np.zeros((0, 8), np.float32), unit(1, dim=DIM))
    assert got.shape == (0,) and got.dtype == np.float64


# --------------------------------------------------------------------------- schema, rows
def test_split_statements_keeps_multi_line_statements_whole() -> None:
    script = "CREATE TABLE a (\n    x\n);\n\nCREATE TRIGGER t AFTER INSERT ON a BEGIN\n" \
             "    SELECT 1;\nEND;\n"
    assert vipune.schema._split_statements(script) == (
        "CREATE TABLE a (\n    x\n);",
        "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n    SELECT 1;\nEND;",
    )
    assert vipune.schema._split_statements(vipune.SCHEMA_SQL) == vipune.DDL_STATEMENTS
    assert message(ValueError, vipune.schema._split_statements,
                   "CREATE TABLE a (x);\nCREATE TABLE b (") == (
        "incomplete SQL statement at the end of the schema script")


def test_read_only_connections_cannot_write(tmp_path: Path) -> None:
    path = make_store(tmp_path / "s.sqlite", ["alpha"])
    conn = vipune.schema._connect_ro(path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM memories")
    finally:
        conn.close()
    assert [i for i, _ in vipune.fts_search(path, "alpha", store.PROJECT_ID, 5)] == ["s0"]


def test_load_rows_reads_every_column_in_scan_order(tmp_path: Path) -> None:
    vectors = np.stack([unit(1, 2), unit(3, 4)])
    path = make_store(tmp_path / "s.sqlite", ["first text", "second text"], vectors,
                      ["2024-01-01T00:00:00Z", "2023-02-03T04:05:06+00:00"])
    rows = vipune.load_rows(path, store.PROJECT_ID)
    assert rows.ids == ("s0", "s1")
    assert rows.contents == ("first text", "second text")
    assert rows.created_at == ("2024-01-01T00:00:00Z", "2023-02-03T04:05:06+00:00")
    assert rows.vectors.dtype == np.float32 and np.array_equal(rows.vectors, vectors)
    one = vipune.load_rows(make_store(tmp_path / "one.sqlite", ["x"]), store.PROJECT_ID)
    assert one.ids == ("s0",) and one.vectors.shape == (1, DIM)


def test_load_rows_checks_the_width_it_is_given(tmp_path: Path) -> None:
    path = make_store(tmp_path / "s.sqlite", ["x"], np.ones((1, 8), np.float32))
    assert vipune.load_rows(path, store.PROJECT_ID, dim=None).vectors.shape == (1, 8)
    assert vipune.load_rows(path, store.PROJECT_ID, dim=8).vectors.shape == (1, 8)
    with pytest.raises(ValueError, match="expected 1536 bytes, got 32 bytes"):
        vipune.load_rows(path, store.PROJECT_ID)


@pytest.mark.parametrize(("dim", "width"), [(None, DIM), (DIM, DIM), (8, 8)])
def test_load_rows_of_an_empty_project(tmp_path: Path, dim: int | None, width: int) -> None:
    path = make_store(tmp_path / "s.sqlite", ["x"])
    rows = vipune.load_rows(path, "another-project", dim=dim)
    assert rows.ids == rows.contents == rows.created_at == ()
    assert rows.vectors.shape == (0, width) and rows.vectors.dtype == np.float32


def test_format_search_json_is_serde_pretty_text() -> None:
    assert vipune.format_search_json([("a", "é", 0.5, "t")]) == (
        '{\n  "results": [\n    {\n      "id": "a",\n      "content": "é",\n'
        '      "similarity": 0.5,\n      "created_at": "t"\n    }\n  ]\n}')


# --------------------------------------------------------------------------- JSON output
def test_parse_search_json_replaces_invalid_utf8() -> None:
    raw = b'{"results": [{"id": "a\xff", "content": "", "similarity": 0, "created_at": ""}]}'
    assert vipune.parse_search_json(raw) == ["a\ufffd"]


def test_parse_search_json_messages() -> None:
    parse = vipune.parse_search_json
    assert message(VipuneOutputError, parse, "x" * 500) == (
        "vipune printed output that is not JSON (Expecting value at char 0): "
        f"'{'x' * 117}...'; check the binary is vipune and supports --json")
    long_error = "e" * 400
    assert message(VipuneOutputError, parse, f'{{"error": "{long_error}"}}') == (
        f"vipune reported an error: {'e' * 297}...")
    assert message(VipuneOutputError, parse, "[]") == (
        "vipune --json search output must be an object with only 'results', got list; "
        "check the vipune version (the harness reads v0.1.8 output)")
    assert message(VipuneOutputError, parse, '{"results": [], "b": 1}') == (
        "vipune --json search output must be an object with only 'results', got "
        "['b', 'results']; check the vipune version (the harness reads v0.1.8 output)")
    assert message(VipuneOutputError, parse, '{"results": 1}') == (
        "vipune --json search output: 'results' is not a list; check the vipune version")
    assert message(VipuneOutputError, parse, '{"results": [1]}') == (
        "vipune --json search result 0 must have exactly id, content, similarity, "
        "created_at, got int; check the vipune version")
    assert message(VipuneOutputError, parse, '{"results": [{"id": "a", "x": 1}]}') == (
        "vipune --json search result 0 must have exactly id, content, similarity, "
        "created_at, got ['id', 'x']; check the vipune version")


@pytest.mark.parametrize("field", ["id", "content", "created_at"])
def test_parse_search_json_checks_each_string_field(field: str) -> None:
    item: dict[str, object] = {"id": "a", "content": "", "similarity": 0.5, "created_at": ""}
    item[field] = 1
    import json

    with pytest.raises(VipuneOutputError) as info:
        vipune.parse_search_json(json.dumps({"results": [item]}))
    assert str(info.value) == (
        "vipune --json search result 0 has a field of the wrong type "
        "(id/content/created_at must be strings, similarity a number)")


# --------------------------------------------------------------------------- time
def test_parse_rfc3339_fractions_and_offsets() -> None:
    utc = timezone.utc
    assert vipune.parse_rfc3339("2024-01-01T00:00:00.5Z") == datetime(2024, 1, 1, 0, 0, 0,
                                                                      500_000, tzinfo=utc)
    assert vipune.parse_rfc3339("2024-01-01T12:00:00+05:30") == datetime(2024, 1, 1, 6, 30,
                                                                         tzinfo=utc)
    assert vipune.parse_rfc3339("2024-01-01T12:00:00+11:45") == datetime(2024, 1, 1, 0, 15,
                                                                         tzinfo=utc)
    assert vipune.parse_rfc3339("2024-01-01T12:00:00-10:00") == datetime(2024, 1, 1, 22, 0,
                                                                         tzinfo=utc)
    assert vipune.parse_rfc3339("2024-01-01T12:00:00+23:59") == datetime(2023, 12, 31, 12, 1,
                                                                         tzinfo=utc)
    for offset in ("+24:00", "-24:00", "+25:00"):
        text = f"2024-01-01T12:00:00{offset}"
        assert message(ValueError, vipune.parse_rfc3339, text) == (
            f"Invalid timestamp format: {text!r} has an impossible offset")


def test_recency_decay_naive_now_is_utc_and_the_underflow_bound() -> None:
    now = datetime(2024, 1, 1, 12, 0, 0)
    aware = now.replace(tzinfo=timezone.utc)
    created = "2024-01-01T11:00:00+00:00"
    assert vipune.recency_decay(created, now) == vipune.recency_decay(created, aware)
    assert vipune.recency_decay(created, now) == math.exp(-1e-6 * 3600)
    other = aware.astimezone(timezone(timedelta(hours=2)))  # the same instant elsewhere
    assert vipune.recency_decay(created, other) == math.exp(-1e-6 * 3600)
    # exponent exactly -700 is still computed; past it the decay is 0.0
    at_bound = (aware - timedelta(seconds=700_000_000)).isoformat()
    assert vipune.recency_decay(at_bound, aware) == math.exp(-700.0) > 0.0
    past = (aware - timedelta(seconds=700_500_000)).isoformat()
    assert vipune.recency_decay(past, aware) == 0.0


@pytest.fixture
def india_time(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The process runs in UTC+05:30, so a local clock read as UTC is 5.5 hours off."""
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is Unix only")
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_hybrid_recency_now_defaults_to_the_utc_clock(tmp_path: Path, india_time: Any) -> None:
    path = make_store(tmp_path / "s.sqlite", ["alpha"])
    created = "2024-01-01T00:00:00Z"
    before = vipune.recency_decay(created, datetime.now(timezone.utc))
    got = vipune.search_hybrid(path, np.ones((1, DIM), np.float32), ["s0"], "alpha",
                               np.ones(DIM, np.float32), 1, 1.0, project_id=store.PROJECT_ID,
                               created_at={"s0": created})
    after = vipune.recency_decay(created, datetime.now(timezone.utc))
    assert after <= got[0][1] <= before


def test_hybrid_recency_needs_dates(tmp_path: Path) -> None:
    path = make_store(tmp_path / "s.sqlite", ["alpha"])
    assert message(ValueError, vipune.search_hybrid, path, np.ones((1, DIM), np.float32),
                   ["s0"], "alpha", unit(1), 1, 0.5, project_id=store.PROJECT_ID) == (
        "a recency weight above 0 needs created_at for every row")


# --------------------------------------------------------------------------- metrics
def test_dedupe_keeps_the_first_occurrence() -> None:
    assert metrics.dedupe(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    assert metrics.recall(["g", "x", "g"], ["g"], 1) == 1.0
    assert metrics.ndcg_any(["x", "g", "y", "x"], ["g"], 2) == 1.0  # g stays at rank 2


def test_recall_all_gives_nothing_for_partial_gold() -> None:
    ranked = ["g1", "x", "g2"]
    assert metrics.recall_all(ranked, ["g1", "g2"], 2) == 0.0
    assert metrics.recall_all(ranked, ["g1", "g2"], 3) == 1.0
    assert metrics.recall_all(ranked, ["g1", "g3"], 3) == 0.0
    assert metrics.recall_any(ranked, ["g1", "g3"], 1) == 1.0


def test_ndcg_any_no_ranking_no_gold_and_a_small_corpus() -> None:
    assert metrics.ndcg_any([], ["g"], 5) == 0.0
    assert metrics.ndcg_any(["a", "b"], [], 5) == 0.0
    # three gold ids but one row in the corpus: the ideal DCG has one relevant row
    assert metrics.ndcg_any(["x", "g1"], ["g1", "g2", "g3"], 2, corpus_size=1) == 1.0
    assert metrics.ndcg_any(["x", "g1"], ["g1", "g2", "g3"], 2) == pytest.approx(0.5)
    assert metrics.ndcg_any(["x", "g1"], ["g1"], 2, corpus_size=5) == 1.0


def test_ndcg_any_discount_is_log2_of_the_rank() -> None:
    # LongMemEval src/retrieval/eval_utils.py dcg(): rel_1 + sum_{i>=2} rel_i / log2(i)
    for rank in range(2, 9):
        ranked = [f"x{i}" for i in range(1, rank)] + ["g"]
        assert metrics.ndcg_any(ranked, ["g"], 10) == 1 / math.log2(rank)


def test_score_ranking_cuts_every_metric_at_its_k() -> None:
    scores = metrics.score_ranking(["x", "y", "g1", "g2"], ["g1", "g2"], (1, 3, 4),
                                   rankable={"x", "y", "g1", "g2"})
    assert scores == {
        "recall@1": 0.0, "recall_any@1": 0.0, "recall_all@1": 0.0, "ndcg_any@1": 0.0,
        "recall@3": 0.5, "recall_any@3": 1.0, "recall_all@3": 0.0,
        "ndcg_any@3": pytest.approx((1 / math.log2(3)) / 2.0),
        "recall@4": 1.0, "recall_any@4": 1.0, "recall_all@4": 1.0,
        "ndcg_any@4": pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / 2.0),
    }


def test_score_ranking_recall_all_counts_gold_outside_the_haystack() -> None:
    scores = metrics.score_ranking(["g1"], ["g1", "gone"], (1,), rankable={"g1"})
    assert scores["recall_all@1"] == 0.0 and scores["recall@1"] == 0.5
    assert scores["ndcg_any@1"] == 1.0


# --------------------------------------------------------------------------- recency 0
def test_hybrid_retriever_asks_vipune_for_recency_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_retrieval_eval.retrievers import reference
    from pytest_retrieval_eval.retrievers.base import Persona, Query

    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def spy(*args: Any, **kwargs: Any) -> vipune.HybridParts:
        seen.append((args, kwargs))
        return vipune.HybridParts([("s0", 1.0)], [("s0", 1.0)], [])

    monkeypatch.setattr(reference.vipune, "search_hybrid_parts", spy)
    persona = Persona("k" * 16, ("s0",), ("2024-01-01T00:00:00Z",),
                      np.ones((1, DIM), np.float32), ("alpha",), lambda: Path(":memory:"))
    query = Query("q1", "single-session-user", "alpha", "2024-02-01T00:00:00Z",
                  np.ones(DIM, np.float32), ("s0",))
    assert reference.HybridRetriever().rank(persona, query, 5) == ["s0"]
    (args, kwargs), = seen
    weight = kwargs["recency_weight"] if "recency_weight" in kwargs else args[6]
    assert weight == 0.0
    assert kwargs.get("created_at") is None and kwargs.get("now") is None
    # ... and vipune's other rules: k 25, the clamped pool, FTS words ANDed
    assert kwargs.get("rrf_k", 25) == 25 and kwargs.get("pool") is None
    assert kwargs.get("fts_mode", "and") == "and"


def test_fts_retriever_ands_the_words(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_retrieval_eval.retrievers import reference
    from pytest_retrieval_eval.retrievers.base import Persona, Query

    seen: list[dict[str, Any]] = []

    def spy(*args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        seen.append(kwargs)
        return []

    monkeypatch.setattr(reference.vipune, "fts_search", spy)
    persona = Persona("k" * 16, ("s0",), ("",), np.ones((1, DIM), np.float32), ("alpha",),
                      lambda: Path(":memory:"))
    query = Query("q1", "single-session-user", "alpha beta", "", None, ("s0",))
    assert reference.FtsRetriever().rank(persona, query, 5) == []
    assert seen[0].get("mode", "and") == "and"


def test_the_vipune_binary_is_asked_for_recency_zero(tmp_path: Path) -> None:
    from pytest_retrieval_eval.retrievers.vipune_binary import VipuneBinaryRetriever

    retriever = VipuneBinaryRetriever.__new__(VipuneBinaryRetriever)
    retriever.binary = tmp_path / "vipune"
    retriever.project_id = store.PROJECT_ID
    argv = retriever.command(tmp_path / "s.sqlite", "what?", 7)
    assert argv[argv.index("--recency") + 1] == "0"
    assert argv[argv.index("--limit") + 1] == "7" and argv[-2:] == ["--", "what?"]


# --------------------------------------------------------------------------- store
def test_store_row_messages(tmp_path: Path) -> None:
    def build(*rows: Any) -> Any:
        return store.build_store(tmp_path / "x.sqlite", list(rows))

    vec = np.ones(DIM, np.float32)
    assert message(ValueError, build, ("a", "b", vec)) == (
        "store row 0 must be (id, content, vector, created_at)")
    assert message(DataError, build, ("", "b", vec, "")) == (
        "store row 0: the session id must be a non-empty string")
    assert message(DataError, build, (1, "b", vec, "")) == (
        "store row 0: the session id must be a non-empty string")
    assert message(DataError, build, ("a", 1, vec, "")) == "session 'a': content must be a string"
    assert message(CacheError, build, ("a", "b", np.ones((2, 2)), "")) == (
        "session 'a': vector has shape (2, 2), expected one 1-d vector; re-run prep")
    assert message(CacheError, build, ("a", "b", np.full(DIM, np.nan), "")) == (
        "session 'a': vector holds NaN or infinite values (vipune would fail every search); "
        "clear the vector cache and re-run prep")
    assert message(DataError, build, ("a", "b", vec, "yesterday")) == (
        "session 'a': created_at 'yesterday' is not RFC 3339; pass dates like "
        "2023-05-30T23:40:00+00:00 (or '' when unknown)")
    assert message(CacheError, store.build_store, tmp_path / "y.sqlite",
                   [("a", "b", np.ones(8), "")], reference_only=False) == (
        "session 'a': vector has 8 values but vipune stores exactly 384; use a 384-d model "
        "(BAAI/bge-small-en-v1.5) for a vipune store")
    assert message(DataError, build, ("a", "b", vec, ""), ("a", "c", vec, "")) == (
        "store x.sqlite: two rows share a session id (UNIQUE constraint failed: memories.id); "
        "dedupe the persona's session ids")
    assert not list(tmp_path.glob("*.tmp-*"))  # nothing half-written left behind


def test_store_vectors_are_stored_as_float32(tmp_path: Path) -> None:
    v64 = np.linspace(0.1, 0.9, DIM)
    path = store.build_store(tmp_path / "s.sqlite", [("a", "b", v64, "")])
    conn = sqlite3.connect(path)
    blob, created, updated = conn.execute(
        "SELECT embedding, created_at, updated_at FROM memories").fetchone()
    conn.close()
    assert blob == v64.astype("<f4").tobytes()
    assert created == updated == store.EMPTY_DATE_PLACEHOLDER


def test_a_store_without_rows_is_a_vipune_store(tmp_path: Path) -> None:
    path = store.build_store(tmp_path / "s.sqlite", [])
    assert store.store_user_version(path) == store.VIPUNE_USER_VERSION
    assert store.is_valid_store(path, reference_only=False)
    assert store.store_ids(path) == ()


def test_store_ids_in_row_order(tmp_path: Path) -> None:
    rows = [(sid, f"text {sid}", np.ones(DIM, np.float32), "") for sid in ("z", "a", "m")]
    path = store.build_store(tmp_path / "s.sqlite", rows)
    assert store.store_ids(path) == ("z", "a", "m")
    assert store.store_ids(tmp_path / "missing.sqlite") is None
    (tmp_path / "junk.sqlite").write_bytes(b"not sqlite at all" * 100)
    assert store.store_ids(tmp_path / "junk.sqlite") is None
    assert store.store_user_version(tmp_path / "junk.sqlite") is None


def test_store_readers_open_read_only(tmp_path: Path) -> None:
    path = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(DIM), "")])
    path.chmod(0o444)
    try:
        before = path.read_bytes()
        assert store.store_ids(path) == ("a",)
        assert store.store_user_version(path) == store.VIPUNE_USER_VERSION
        assert store.is_valid_store(path)
        assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite"]  # no journal left
    finally:
        path.chmod(0o644)


def test_store_keys_fold_in_every_part() -> None:
    base = store.persona_key(["a"], ["k"], [""])
    assert base == store.persona_key(("a",), ("k",), ("",))
    assert base != store.persona_key(["b"], ["k"], [""])
    assert base != store.persona_key(["a"], ["k2"], [""])
    assert base != store.persona_key(["a"], ["k"], ["2024-01-01T00:00:00Z"])
    assert store.persona_key(["a"], ["k"], [""], "fp") == store.store_key(base, "fp")
    assert store.store_key(base, "fp") != store.store_key(base, "fp2")
    assert store.store_key(base, "fp") != store.store_key(base, "fp", "other-project")
    assert message(ValueError, store.persona_key, ["a"], [], [""]) == (
        "session_ids, text_keys and created_at must have the same length")
    assert message(ValueError, store.rows_from_arrays, ["a"], ["b"], np.ones((2, 3)), [""]) == (
        "1 ids, 1 contents, 2 vectors and 1 dates: one of each per row")


def test_export_store_into_a_new_folder_tree_and_over_an_old_copy(tmp_path: Path) -> None:
    src = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(DIM), "")])
    dest = tmp_path / "deep" / "er" / "q1.sqlite"
    assert store.export_store(src, dest) == dest and dest.read_bytes() == src.read_bytes()
    assert store.export_store(src, dest) == dest  # again: the folder exists, the file too
    assert sorted(p.name for p in dest.parent.iterdir()) == ["q1.sqlite"]


def test_export_store_failure_is_one_line(tmp_path: Path) -> None:
    src = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(DIM), "")])
    blocker = tmp_path / "file"
    blocker.write_text("x")
    dest = blocker / "q1.sqlite"
    text = message(CacheError, store.export_store, src, dest)
    # mkdir(exist_ok=True) on a path that is a file: FileExistsError, said in words
    assert text == (f"store copy {dest} cannot be written (a file stands where one of its "
                    f"folders should be); make {blocker} a writable folder or pass another "
                    "--retrieval-eval-store-dir")


def test_export_store_writes_through_a_symlink_and_refuses_a_fifo(tmp_path: Path) -> None:
    src = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(DIM), "")])
    real = tmp_path / "real.sqlite"
    other = store.build_store(tmp_path / "o.sqlite", [("c", "d", np.ones(DIM), "")])
    real.write_bytes(other.read_bytes())  # an earlier copy of the plugin's, another store
    assert real.read_bytes() != src.read_bytes()
    link = tmp_path / "q1.sqlite"
    link.symlink_to(real)
    store.export_store(src, link)
    assert link.is_symlink() and real.read_bytes() == src.read_bytes()
    fifo = tmp_path / "q2.sqlite"
    os.mkfifo(fifo)
    text = message(CacheError, store.export_store, src, fifo)
    assert "(it is a FIFO (named pipe), not a regular file)" in text


# --------------------------------------------------------------------------- named mutants
def _mutation_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_script",
                                                  ROOT / "scripts" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_named_mutant_still_applies_to_the_source(tmp_path: Path) -> None:
    """scripts/mutation.py patches the source text; a refactor must not make a patch vanish."""
    script = _mutation_script()
    names = [m.name for m in script.NAMED_MUTANTS]
    assert len(names) == len(set(names))
    for mutant in script.NAMED_MUTANTS:
        for patch in mutant.patches:
            text = (ROOT / patch.path).read_text(encoding="utf-8")
            assert text.count(patch.old) == 1, (mutant.name, patch.old)
            assert script.patched_text(text, patch) != text
    with pytest.raises(ValueError, match="occurs 0 times"):
        script.patched_text("nothing here", script.Patch("x.py", "absent", "y"))


def test_a_named_mutant_changes_what_it_names(tmp_path: Path) -> None:
    """Applied to a copy, the RRF-k mutant changes the fused ranking of a hand-made case."""
    script = _mutation_script()
    src = ROOT / "pytest_retrieval_eval" / "vipune" / "hybrid.py"
    (tmp_path / "pytest_retrieval_eval" / "vipune").mkdir(parents=True)
    (tmp_path / "pytest_retrieval_eval" / "vipune" / "hybrid.py").write_text(
        src.read_text("utf-8"), encoding="utf-8")
    mutant = next(m for m in script.NAMED_MUTANTS if m.name == "rrf-k-60")
    script.apply_mutant(tmp_path, mutant)
    text = (tmp_path / "pytest_retrieval_eval" / "vipune" / "hybrid.py").read_text("utf-8")
    assert "RRF_K = 60\n" in text and "RRF_K = 25\n" not in text


def test_concurrent_fts_searches_share_nothing(tmp_path: Path) -> None:
    """Each FTS call opens and closes its own read-only connection (threads may search)."""
    path = make_store(tmp_path / "s.sqlite", ["alpha beta", "beta gamma"])
    results: list[list[str]] = []

    def search() -> None:
        results.append([i for i, _ in vipune.fts_search(path, "beta", store.PROJECT_ID, 5)])

    threads = [threading.Thread(target=search) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(sorted(r) == ["s0", "s1"] for r in results)


# --------------------------------------------------------------------------- store: more
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_store_rejects_a_vector_that_overflows_float32(tmp_path: Path) -> None:
    vec = np.ones(DIM)
    vec[3] = 1e39  # finite as float64, inf as the float32 vipune stores
    with pytest.raises(CacheError, match="NaN or infinite"):
        store.build_store(tmp_path / "s.sqlite", [("a", "b", vec, "")])


def test_store_keys_are_sha256_of_their_json(tmp_path: Path) -> None:
    """Cache addresses must not drift between versions: pin their exact recipe."""
    import hashlib
    import json

    def sha(payload: object) -> str:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    assert store.persona_key(["é1"], ["k"], [""]) == hashlib.sha256(
        '["persona",["é1"],["k"],[""]]'.encode()).hexdigest()
    base = store.persona_key(["é1"], ["k"], [""])
    ddl = hashlib.sha256(vipune.SCHEMA_SQL.encode("utf-8")).hexdigest()
    assert store.store_key(base, "fp") == sha(["store", store.STORE_FORMAT, ddl,
                                               store.PROJECT_ID, base, "fp"])


def test_expected_master_is_the_schema_of_a_built_store(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(DIM), "")])
    monkeypatch.chdir(tmp_path)
    expected = store._expected_master()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite"]  # in memory, no file
    assert expected == vipune.master_sql(path)
    assert [(kind, name) for kind, name, _, _ in expected][:3] == [
        ("table", "memories"), ("index", "sqlite_autoindex_memories_1"),
        ("index", "idx_memories_project")]
    monkeypatch.setattr(store, "_EXPECTED_MASTER", None)  # first use in a process
    assert store.is_valid_store(path)
    assert expected == store._EXPECTED_MASTER


def test_a_store_with_a_readable_header_but_a_broken_schema_is_invalid(tmp_path: Path) -> None:
    path = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(DIM), "")])
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xab" * (4096 - 100)  # page 1 (sqlite_master) after the file header
    path.write_bytes(bytes(data))
    assert store.store_user_version(path) == store.VIPUNE_USER_VERSION
    with pytest.raises(sqlite3.DatabaseError):
        vipune.master_sql(path)
    assert store.is_valid_store(path) is False


def test_export_name_keeps_letters_of_both_cases() -> None:
    sha = lambda text: hashlib.sha256(text.encode()).hexdigest()[:12]  # noqa: E731
    assert store.export_name("Q1_abs") == f"Q1_abs-{sha('Q1_abs')}.sqlite"
    assert store.export_name("../a b") == f"_._a_b-{sha('../a b')}.sqlite"


def test_export_store_interrupted_before_the_copy_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(DIM), "")])

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(exports.shutil, "copyfileobj", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.export_store(src, tmp_path / "out" / "q.sqlite")
    assert list((tmp_path / "out").iterdir()) == []


def test_store_cache_checks_the_session_ids_and_builds_as_asked(tmp_path: Path) -> None:
    cache = store.StoreCache(tmp_path / "stores")
    built: list[int] = []

    def rows() -> list[store.StoreRow]:
        built.append(1)
        return [("a", "alpha", np.ones(DIM), ""), ("b", "beta", np.ones(DIM), "")]

    key = "ab" * 8
    path = cache.get_or_build(key, rows, session_ids=("a", "b"))
    assert cache.get_or_build(key, rows, session_ids=["a", "b"]) == path and len(built) == 1
    cache.get_or_build(key, rows, session_ids=("b", "a"))  # another persona's order: rebuilt
    assert len(built) == 2
    other = cache.get_or_build("cd" * 8, rows, project_id="elsewhere", reference_only=True)
    assert store.store_user_version(other) == store.REFERENCE_USER_VERSION
    conn = sqlite3.connect(other)
    assert {r[0] for r in conn.execute("SELECT project_id FROM memories")} == {"elsewhere"}
    conn.close()


def test_store_cache_messages(tmp_path: Path) -> None:
    blocker = tmp_path / "blk"
    blocker.write_text("x")
    cache = store.StoreCache(blocker)
    target = blocker / "ab" / f"{'ab' * 8}.sqlite"
    assert message(CacheError, cache.get_or_build, "ab" * 8, lambda: []) == (
        f"persona store {target} cannot be built (NotADirectoryError: [Errno 20] Not a "
        f"directory: '{blocker / 'ab'}'); check free disk space and permissions in {blocker}, "
        "or pass another --retrieval-eval-cache")
    assert message(ValueError, cache.path_for, "XYZ") == (
        "store key 'XYZ' must be 16-128 lower-case hex digits")


def test_remove_stale_partials_age_rule_and_vanishing_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = store.StoreCache(tmp_path / "stores")
    assert cache.remove_stale_partials() == 0  # no folder yet
    folder = tmp_path / "stores" / "ab"
    folder.mkdir(parents=True)
    now = time.time()
    old = folder / "x.sqlite.tmp-otherhost-1-0"     # another host: the age rule decides
    young = folder / "y.sqlite.tmp-otherhost-1-1"
    for path, age in ((old, 3600.5), (young, 3599.5)):
        path.write_bytes(b"")
        os.utime(path, (now - age, now - age))
    assert cache.remove_stale_partials() == 1
    assert not old.exists() and young.exists()
    # a file that vanishes under the sweep (another sweeper) is skipped, the others go on
    first, second = folder / "a.sqlite.tmp-h-1-0", folder / "b.sqlite.tmp-h-1-1"
    first.write_bytes(b"")
    second.write_bytes(b"")

    def gone_first(name: str) -> bool:
        if name == first.name:
            first.unlink()
        return name in (first.name, second.name)

    monkeypatch.setattr(store, "left_by_dead_builder", gone_first)
    assert cache.remove_stale_partials() == 1
    assert not second.exists()


def test_load_rows_reads_created_at_not_updated_at(tmp_path: Path) -> None:
    """A store vipune itself updated has updated_at != created_at; recency reads created_at."""
    conn = sqlite3.connect(tmp_path / "v.sqlite")
    conn.executescript(vipune.SCHEMA_SQL)
    conn.execute(vipune.INSERT_SQL, ("m1", "p", "text", vipune.vector_to_blob(unit(1)), None,
                                     "2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z"))
    conn.commit()
    rows = vipune.load_rows(conn, "p")
    conn.close()
    assert rows.created_at == ("2024-01-01T00:00:00Z",)


# --------------------------------------------------------------------------- after main's merge
def test_fts_or_mode_is_the_what_if_not_vipune(tmp_path: Path) -> None:
    assert vipune.escape_fts_query("a  b", mode="or") == '"a" OR "b"'
    assert vipune.escape_fts_query("a b") == vipune.escape_fts_query("a b", mode="and") == (
        '"a" "b"')
    assert message(ValueError, vipune.escape_fts_query, "a", mode="xor") == (
        "FTS mode 'xor' is not one of and, or")
    path = make_store(tmp_path / "s.sqlite", ["cat sat", "dog ran", "cat and dog"])
    assert fts_set(path, "cat dog") == {"s2"}
    assert fts_set(path, "cat dog", mode="or") == {"s0", "s1", "s2"}


def fts_set(path: Path, query: str, **kwargs: Any) -> set[str]:
    return {i for i, _ in vipune.fts_search(path, query, store.PROJECT_ID, 10, **kwargs)}


@pytest.fixture
def hybrid_case(tmp_path: Path) -> tuple[Path, np.ndarray, list[str]]:
    contents = ["cat sat", "dog ran", "cat and dog", "bird flew", "cat nap"]
    vectors = np.stack([unit(1, 0), unit(0.9, 0.1), unit(0.5, 0.5), unit(0, 1), unit(0.2, 0.8)])
    return make_store(tmp_path / "s.sqlite", contents, vectors), vectors, [
        f"s{i}" for i in range(5)]


def test_hybrid_parts_defaults_are_vipunes(hybrid_case: tuple[Path, np.ndarray, list[str]]
                                           ) -> None:
    path, vectors, ids = hybrid_case
    parts = vipune.search_hybrid_parts(path, vectors, ids, "cat dog", unit(1, 0), 3,
                                       project_id=store.PROJECT_ID)
    assert parts.fused == vipune.search_hybrid(path, vectors, ids, "cat dog", unit(1, 0), 3,
                                               project_id=store.PROJECT_ID)
    assert [i for i, _ in parts.semantic] == ["s0", "s1", "s2", "s4", "s3"]
    assert [i for i, _ in parts.fts] == ["s2"]


def test_hybrid_parts_knobs_reach_their_rule(hybrid_case: tuple[Path, np.ndarray, list[str]]
                                             ) -> None:
    path, vectors, ids = hybrid_case

    def parts(**kwargs: Any) -> vipune.HybridParts:
        return vipune.search_hybrid_parts(path, vectors, ids, "cat dog", unit(1, 0), 5,
                                          project_id=store.PROJECT_ID, **kwargs)

    small = parts(pool=2)
    assert [i for i, _ in small.semantic] == ["s0", "s1"] and len(small.fts) == 1
    assert {i for i, _ in small.fused} == {"s0", "s1", "s2"}
    with pytest.raises(VipuneInputError, match="Limit must be greater than 0"):
        parts(pool=0)
    assert {i for i, _ in parts(fts_mode="or").fts} == {"s0", "s1", "s2", "s4"}
    fused60 = dict(parts(rrf_k=60).fused)
    assert fused60["s0"] == 1 / 61 and fused60["s2"] == 1 / 63 + 1 / 61


def test_hybrid_recency_of_an_undated_row_is_zero(
        hybrid_case: tuple[Path, np.ndarray, list[str]]) -> None:
    path, vectors, ids = hybrid_case
    now = datetime(2024, 1, 2, tzinfo=timezone.utc)
    dated = {"s0": "", "s1": "2024-01-01T00:00:00Z"}
    got = dict(vipune.search_hybrid_parts(path, vectors, ids, "zebra", unit(1, 0), 2, 0.5,
                                          project_id=store.PROJECT_ID, created_at=dated,
                                          now=now).fused)
    assert got["s0"] == 0.5 * (1 / 26) + 0.5 * 0.0
    assert got["s1"] == 0.5 * (1 / 27) + 0.5 * math.exp(-1e-6 * 86_400)


def test_search_hybrid_uses_the_semantic_ranking_it_is_given(
        hybrid_case: tuple[Path, np.ndarray, list[str]]) -> None:
    """The retriever passes its one full scan; the hybrid search must fuse that list."""
    path, vectors, ids = hybrid_case
    given = [("s3", 0.9), ("s4", 0.8), ("s2", 0.7), ("s1", 0.6), ("s0", 0.5)]
    got = vipune.search_hybrid(path, vectors, ids, "zebra", unit(1, 0), 2,
                               project_id=store.PROJECT_ID, semantic_ranking=given)
    assert [i for i, _ in got] == ["s3", "s4"]


def test_get_or_build_names_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "build_store", full)
    cache = store.StoreCache(tmp_path / "stores")
    text = message(CacheError, cache.get_or_build, "ab" * 8, lambda: [])
    assert text.endswith(f"); the disk is full; free disk space in {tmp_path / 'stores'}, or "
                         "pass another --retrieval-eval-cache")
    assert "(OSError: [Errno 28] No space left on device)" in text


def test_a_built_store_is_stamped_with_its_digest(tmp_path: Path) -> None:
    import json

    from pytest_retrieval_eval.io import checksums

    cache = store.StoreCache(tmp_path / "stores")
    path = cache.get_or_build("ab" * 8, lambda: [("a", "b", np.ones(DIM), "")])
    stamp = json.loads(path.with_name(path.name + checksums.VERIFIED_SUFFIX).read_text())
    assert stamp["sha256"] == checksums.read_sidecar(path) == checksums.memoised_sha256(path)


def test_remove_stale_partials_at_exactly_the_age_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = store.StoreCache(tmp_path / "stores")
    folder = tmp_path / "stores" / "ab"
    folder.mkdir(parents=True)
    tmp = folder / "x.sqlite.tmp-otherhost-1-0"
    tmp.write_bytes(b"")
    os.utime(tmp, (1_000_000.0, 1_000_000.0))
    monkeypatch.setattr(store.time, "time", lambda: 1_000_000.0 + 3600.0)
    assert cache.remove_stale_partials() == 0 and tmp.exists()  # exactly max_age old: kept
