"""vipune reference rules, each against a hand-worked case or an independent computation."""

from __future__ import annotations

import json
import math
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.errors import RetrievalEvalError
from pytest_retrieval_eval.vipune import VipuneInputError, VipuneOutputError, store

DIM = vipune.EMBEDDING_DIM


def unit(*coords: float, dim: int = DIM) -> np.ndarray:
    """A float32 vector with the given leading coordinates, zeros after."""
    v = np.zeros(dim, dtype=np.float32)
    v[: len(coords)] = coords
    return v


def make_store(tmp_path: Path, contents: list[str], vectors: np.ndarray | None = None) -> Path:
    ids = [f"s{i}" for i in range(len(contents))]
    if vectors is None:
        vectors = np.ones((len(contents), DIM), dtype=np.float32)
    rows = store.rows_from_arrays(ids, contents, vectors, ["2024-01-01T00:00:00Z"] * len(ids))
    return store.build_store(tmp_path / "s.sqlite", rows)


def fts_ids(path: Path, query: str, limit: int = 10) -> list[str]:
    return [i for i, _ in vipune.fts_search(path, query, store.PROJECT_ID, limit)]


def sequential_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The Rust loop, literally: f64 products summed left to right."""
    dot = na = nb = 0.0
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        dot += x * y
        na += x * x
        nb += y * y
    na, nb = math.sqrt(na), math.sqrt(nb)
    return 0.0 if na == 0.0 or nb == 0.0 else dot / (na * nb)


# --------------------------------------------------------------------------- constants


def test_constants_are_vipune_0_1_8() -> None:
    assert vipune.MAX_SEARCH_LIMIT == 10_000
    assert vipune.MAX_INPUT_LENGTH == 100_000
    assert vipune.RRF_K == 25
    assert vipune.EMBEDDING_DIM == 384
    assert vipune.EMBEDDING_BLOB_SIZE == 1536
    assert vipune.MODEL_ID == "BAAI/bge-small-en-v1.5"


def test_every_rrf_default_is_vipunes_k() -> None:
    """The bundled sample no longer holds a pair whose ranking depends on k (its vectors are
    MiniLM's own 256-token ones, issue 43.22): each default k is pinned here instead."""
    import inspect

    from pytest_retrieval_eval.vipune import hybrid

    for fn in (hybrid.rrf_fuse, hybrid.rrf_fuse_many):
        assert inspect.signature(fn).parameters["k"].default == 25, fn.__name__
    for fn in (hybrid.search_hybrid_parts, hybrid.fuse_lists):
        assert inspect.signature(fn).parameters["rrf_k"].default == 25, fn.__name__
    assert issubclass(VipuneInputError, RetrievalEvalError)


def test_ddl_statements_are_vipunes_six() -> None:
    first_lines = [s.splitlines()[0] for s in vipune.DDL_STATEMENTS]
    assert first_lines == [
        "CREATE TABLE IF NOT EXISTS memories (",
        "CREATE INDEX IF NOT EXISTS idx_memories_project ON memories(project_id);",
        "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(",
        "CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN",
        "CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN",
        "CREATE TRIGGER IF NOT EXISTS memories_fts_update AFTER UPDATE ON memories BEGIN",
    ]
    fts = vipune.DDL_STATEMENTS[2]
    for part in (
        "content,",
        "project_id UNINDEXED,",
        "tokenize='porter unicode61',",
        "content_rowid='rowid',",
        "content='memories'",
    ):
        assert part in fts
    names = ["memories_fts_insert", "memories_fts_delete", "memories_fts_update"]
    for stmt, name in zip(vipune.DDL_STATEMENTS[3:], names, strict=True):
        assert f"EXISTS {name} AFTER" in stmt
    assert "VALUES('delete', old.rowid, old.content, old.project_id)" in vipune.DDL_STATEMENTS[4]
    assert "VALUES (new.rowid, new.content, new.project_id)" in vipune.DDL_STATEMENTS[3]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        (0, "Limit must be greater than 0"),
        (-3, "Limit must be greater than 0"),
        (10_001, "Limit 10001 exceeds maximum allowed (10000)"),
        (100_000, "Limit 100000 exceeds maximum allowed (10000)"),
    ],
)
def test_validate_limit_rejects(limit: int, message: str) -> None:
    with pytest.raises(VipuneInputError) as info:
        vipune.validate_limit(limit)
    assert info.value.vipune_message == message
    assert "\n" not in str(info.value)


def test_validate_limit_accepts_bounds() -> None:
    assert vipune.validate_limit(1) == 1
    assert vipune.validate_limit(10_000) == 10_000
    with pytest.raises(TypeError):
        vipune.validate_limit(True)


@pytest.mark.parametrize("query", ["", "   ", "\t\n", "\u3000\u00a0\u2028", "\x85"])
def test_validate_query_empty(query: str) -> None:
    with pytest.raises(VipuneInputError) as info:
        vipune.validate_query(query)
    assert info.value.vipune_message == "Input cannot be empty"


def test_validate_query_trims_with_rusts_white_space() -> None:
    assert vipune.validate_query("  what did I buy?\n") == "what did I buy?"
    # U+001C is white space to Python's str.strip but not to Rust's str::trim.
    assert vipune.validate_query("\x1c") == "\x1c"
    assert vipune.rust_trim("\x1c a \x1c") == "\x1c a \x1c"


def test_validate_query_length_in_utf8_bytes() -> None:
    assert vipune.validate_query("a" * 100_000) == "a" * 100_000
    assert vipune.validate_query("  " + "a" * 100_000 + "  ")  # trimmed before measuring
    with pytest.raises(VipuneInputError) as info:
        vipune.validate_query("a" * 100_001)
    assert info.value.vipune_message == "Input too long: 100001 characters (max: 100000)"
    # 99,999 ASCII + one 2-byte character: 100,000 characters but 100,001 bytes.
    over = "a" * 99_999 + "\u00e9"
    assert len(over) == 100_000
    with pytest.raises(VipuneInputError, match="100001"):
        vipune.validate_query(over)
    assert vipune.validate_query("a" * 99_998 + "\u00e9")  # exactly 100,000 bytes
    with pytest.raises(VipuneInputError, match="100002"):
        vipune.validate_query("a" * 99_999 + "\u20ac")  # 3-byte euro sign


@pytest.mark.parametrize(
    ("weight", "shown"), [(-0.1, "-0.1"), (1.5, "1.5"), (2.0, "2"), (float("nan"), "NaN")]
)
def test_validate_recency_rejects(weight: float, shown: str) -> None:
    with pytest.raises(VipuneInputError) as info:
        vipune.validate_recency(weight)
    assert info.value.vipune_message == (
        f"Invalid recency weight: {shown} (must be between 0.0 and 1.0)"
    )


def test_validate_recency_accepts() -> None:
    assert vipune.validate_recency(0) == 0.0
    assert vipune.validate_recency(1.0) == 1.0


@pytest.mark.parametrize(
    ("limit", "pool"),
    [
        (1, 50),
        (5, 50),
        (6, 60),
        (10, 100),
        (999, 9990),
        (1000, 10_000),
        (5000, 10_000),
        (10_000, 10_000),
    ],
)
def test_candidate_pool_clamp(limit: int, pool: int) -> None:
    assert vipune.candidate_pool(limit) == pool


# --------------------------------------------------------------------------- cosine


def test_cosine_hand_values() -> None:
    assert vipune.cosine_similarity([1, 0], [1, 0]) == 1.0
    assert vipune.cosine_similarity([1, 0], [0, 1]) == 0.0
    assert vipune.cosine_similarity([3, 4], [4, 3]) == pytest.approx(24 / 25, abs=0)
    assert vipune.cosine_similarity([1, 0], [-1, 0]) == -1.0


def test_cosine_zero_norm_is_zero() -> None:
    assert vipune.cosine_similarity([0, 0], [1, 2]) == 0.0
    assert vipune.cosine_similarity([1, 2], [0, 0]) == 0.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_cosine_rejects_non_finite(bad: float) -> None:
    with pytest.raises(ValueError, match="NaN or infinite"):
        vipune.cosine_similarity([1.0, bad], [1.0, 1.0])
    with pytest.raises(ValueError, match="NaN or infinite"):
        vipune.cosine_similarity([1.0, 1.0], [bad, 1.0])


def test_cosine_rejects_mismatch_and_empty() -> None:
    with pytest.raises(ValueError, match="Mismatched dimensions"):
        vipune.cosine_similarity([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="empty vector"):
        vipune.cosine_similarity([], [])


def test_cosine_is_the_sequential_float64_sum() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        a = rng.standard_normal(DIM).astype(np.float32)
        b = rng.standard_normal(DIM).astype(np.float32)
        assert vipune.cosine_similarity(a, b) == sequential_cosine(a, b)


# --------------------------------------------------------------------------- semantic search


def test_semantic_stable_ties_keep_row_order() -> None:
    v, w = unit(1, 0), unit(0, 1)
    vectors = np.stack([v, v, w, v, 2 * v])
    ids = ["r0", "r1", "r2", "r3", "r4"]
    got = vipune.semantic_search(vectors, ids, v, 5)
    assert [i for i, _ in got] == ["r0", "r1", "r3", "r4", "r2"]
    assert [s for _, s in got] == [1.0, 1.0, 1.0, 1.0, 0.0]


def test_semantic_zero_norm_rows_score_zero_in_row_order() -> None:
    vectors = np.stack([unit(0, 0), unit(-1, 0), unit(0, 0), unit(1, 1), unit(0, 1)])
    got = vipune.semantic_search(vectors, ["z0", "neg", "z1", "diag", "orth"], unit(1, 0), 10)
    assert [i for i, _ in got] == ["diag", "z0", "z1", "orth", "neg"]
    assert got[1][1] == 0.0 and got[2][1] == 0.0


def test_semantic_zero_query_keeps_row_order() -> None:
    vectors = np.stack([unit(1, 0), unit(0, 1), unit(1, 1)])
    got = vipune.semantic_search(vectors, ["a", "b", "c"], unit(0, 0), 3)
    assert got == [("a", 0.0), ("b", 0.0), ("c", 0.0)]


def test_semantic_truncates_and_validates() -> None:
    vectors = np.stack([unit(1, i) for i in range(5)])
    ids = [f"r{i}" for i in range(5)]
    assert len(vipune.semantic_search(vectors, ids, unit(1, 0), 2)) == 2
    assert vipune.semantic_search(np.zeros((0, DIM), np.float32), [], unit(1, 0), 3) == []
    with pytest.raises(VipuneInputError):
        vipune.semantic_search(vectors, ids, unit(1, 0), 0)
    with pytest.raises(VipuneInputError):
        vipune.semantic_search(vectors, ids, unit(1, 0), 10_001)


def test_semantic_rejects_nan_rows_and_mismatch() -> None:
    vectors = np.stack([unit(1, 0), unit(float("nan"), 0)])
    with pytest.raises(ValueError, match="NaN or infinite"):
        vipune.semantic_search(vectors, ["a", "b"], unit(1, 0), 2)
    with pytest.raises(ValueError, match="Mismatched dimensions"):
        vipune.semantic_search(np.ones((2, 8), np.float32), ["a", "b"], unit(1, 0), 2)


def test_semantic_vectorised_equals_per_row_rule_bitwise() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((300, DIM)).astype(np.float32)
    vectors[10] = vectors[20]  # exact tie
    vectors[30] = 0.0  # zero norm
    query = rng.standard_normal(DIM).astype(np.float32)
    ids = [f"r{i}" for i in range(300)]
    got = vipune.semantic_search(vectors, ids, query, 300)
    per_row = [sequential_cosine(vectors[i], query) for i in range(300)]
    expected = sorted(range(300), key=lambda i: -per_row[i])  # Python's sort is stable
    assert [i for i, _ in got] == [ids[i] for i in expected]
    assert [s for _, s in got] == [per_row[i] for i in expected]


# --------------------------------------------------------------------------- FTS escaping


@pytest.mark.parametrize(
    ("query", "escaped"),
    [
        ("hello world", '"hello" "world"'),
        ("  spaced\t\nout  ", '"spaced" "out"'),
        ('say "hi"', '"say" """hi"""'),
        ("back\\slash", '"back\\\\slash"'),
        ("it's", '"it\'s"'),
        ("a AND b", '"a" "AND" "b"'),
        ("NEAR(a b)", '"NEAR(a" "b)"'),
        ("content:foo *", '"content:foo" "*"'),
        ("x\u3000y\u00a0z", '"x" "y" "z"'),
        ("x\x1cy", '"x\x1cy"'),  # not white space in Rust
        ("", ""),
        (" \t ", ""),
    ],
)
def test_escape_fts_query(query: str, escaped: str) -> None:
    assert vipune.escape_fts_query(query) == escaped


# --------------------------------------------------------------------------- FTS search

DOCS = [
    "I went running in the park yesterday",  # s0
    "we run a small shop",  # s1
    'she said "hello" to the cat',  # s2
    "path is C:\\temp\\new and it's fine",  # s3
    "AND OR NOT NEAR are words here",  # s4
    "content foo bar",  # s5
    "the cat sat on the mat with another cat",  # s6
]


@pytest.fixture
def docs_store(tmp_path: Path) -> Path:
    return make_store(tmp_path, DOCS)


def test_fts_and_semantics(docs_store: Path) -> None:
    assert set(fts_ids(docs_store, "cat")) == {"s2", "s6"}
    assert fts_ids(docs_store, "cat mat") == ["s6"]  # every word must be present
    assert fts_ids(docs_store, "cat park") == []


def test_fts_porter_stemming(docs_store: Path) -> None:
    assert set(fts_ids(docs_store, "run")) == {"s0", "s1"}
    assert set(fts_ids(docs_store, "running")) == {"s0", "s1"}


def test_fts_orders_by_bm25_ascending(docs_store: Path) -> None:
    got = vipune.fts_search(docs_store, "cat", store.PROJECT_ID, 10)
    assert [i for i, _ in got] == ["s6", "s2"]  # two "cat"s rank first
    assert got[0][1] <= got[1][1] < 0


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('"hello"', {"s2"}),
        ('said "hello"', {"s2"}),
        ('"unterminated', set()),
        ("C:\\temp\\new", {"s3"}),
        ("it's", {"s3"}),
        ("AND", {"s3", "s4"}),  # the word "and", case-folded
        ("OR NOT", {"s4"}),
        ("NEAR", {"s4"}),
        ("NEAR(are words)", {"s4"}),
        ("content:foo", {"s5"}),
        ("foo*", {"s5"}),
        ("*", set()),
        ("^cat", {"s2", "s6"}),
        ("cat -mat", {"s6"}),
        ("( ) : ^ + -", set()),
        ("cat ( )", {"s2", "s6"}),
    ],
)
def test_fts_special_syntax_is_plain_text(docs_store: Path, query: str, expected: set[str]) -> None:
    # Quoting makes every FTS5 operator a phrase of plain tokens: no SQL or syntax errors.
    # Words that tokenize to nothing (a lone '*', '(' ...) are empty phrases, which FTS5 drops.
    assert set(fts_ids(docs_store, query)) == expected


def test_fts_empty_query_runs_no_sql() -> None:
    closed = sqlite3.connect(":memory:")
    closed.close()  # any execute() would raise ProgrammingError
    assert vipune.fts_search(closed, "   ", "p", 10) == []
    assert vipune.fts_search(closed, "", "p", 10) == []


def test_fts_limit_and_validation(docs_store: Path) -> None:
    assert len(fts_ids(docs_store, "the", limit=1)) == 1
    with pytest.raises(VipuneInputError):
        vipune.fts_search(docs_store, "cat", store.PROJECT_ID, 0)
    with pytest.raises(VipuneInputError):
        vipune.fts_search(docs_store, "cat", store.PROJECT_ID, 10_001)


def test_fts_filters_by_project(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "two.sqlite")
    conn.executescript(vipune.SCHEMA_SQL)
    blob = vipune.vector_to_blob(unit(1))
    for i, (project, text) in enumerate([("a", "apple pie"), ("b", "apple tart")]):
        conn.execute(vipune.INSERT_SQL, (f"m{i}", project, text, blob, None, "t", "t"))
    conn.commit()
    assert vipune.fts_search(conn, "apple", "a", 10)[0][0] == "m0"
    assert [i for i, _ in vipune.fts_search(conn, "apple", "b", 10)] == ["m1"]
    conn.close()


# --------------------------------------------------------------------------- RRF


def test_rrf_hand_computed_sums_and_id_ties() -> None:
    fused = vipune.rrf_fuse(["a", "b", "c"], ["c", "d"])
    assert [i for i, _ in fused] == ["c", "a", "b", "d"]
    scores = dict(fused)
    assert scores["c"] == 1 / 28 + 1 / 26
    assert scores["a"] == 1 / 26
    assert scores["b"] == scores["d"] == 1 / 27  # tie -> id ascending


def test_rrf_vipune_ranking_priority_case() -> None:
    # vipune's test_rrf_fusion_ranking_priority: ranks 1&3 and 3&1 tie above 2&2.
    fused = vipune.rrf_fuse(["mem-1", "mem-3", "mem-2"], ["mem-2", "mem-3", "mem-1"])
    assert [i for i, _ in fused] == ["mem-1", "mem-2", "mem-3"]
    assert fused[0][1] == fused[1][1] > fused[2][1]


def test_rrf_id_ties_are_byte_wise() -> None:
    fused = vipune.rrf_fuse(["\u00e9", "z", "B", "a"], ["a", "B", "z", "\u00e9"])
    # a and \u00e9 sum 1/26 + 1/29, B and z 1/27 + 1/28 (smaller): two tie groups, each
    # ordered by UTF-8 bytes ("B" 0x42 < "a" 0x61 < "z" 0x7a < "\u00e9" 0xc3 0xa9).
    assert [i for i, _ in fused] == ["a", "\u00e9", "B", "z"]
    s = dict(fused)
    assert s["a"] == s["\u00e9"] == 1 / 26 + 1 / 29
    assert s["B"] == s["z"] == 1 / 27 + 1 / 28
    assert [i for i, _ in vipune.rrf_fuse(["\U0001f600", "\uffff"], ["\uffff", "\U0001f600"])] == [
        "\uffff",
        "\U0001f600",
    ]


def test_rrf_single_list_keeps_order_and_k() -> None:
    assert [i for i, _ in vipune.rrf_fuse(["x", "y"], [])] == ["x", "y"]
    assert vipune.rrf_fuse(["x"], ["x"], k=10)[0][1] == 2 * (1 / 11)


# --------------------------------------------------------------------------- hybrid


def test_search_hybrid_hand_worked(tmp_path: Path) -> None:
    contents = [
        "the quarterly budget report",  # s0
        "budget for the garden party",  # s1
        "a note about cats",  # s2
        "unrelated shopping list",  # s3
    ]
    vectors = np.stack([unit(0, 1), unit(1, 1), unit(1, 0), unit(1, 0.5)])
    path = make_store(tmp_path, contents, vectors)
    ids = [f"s{i}" for i in range(4)]
    query_vec = unit(1, 0)
    # semantic: s2 (1.0), s3 (0.894), s1 (0.707), s0 (0.0)
    sem = vipune.semantic_search(vectors, ids, query_vec, 50)
    assert [i for i, _ in sem] == ["s2", "s3", "s1", "s0"]
    # FTS "budget": s0 and s1 (s0 is shorter -> better bm25)
    assert fts_ids(path, "budget") == ["s0", "s1"]
    got = vipune.search_hybrid(
        path, vectors, ids, "  budget ", query_vec, 3, project_id=store.PROJECT_ID
    )
    # s0: 1/29 + 1/26 = 0.07294, s1: 1/28 + 1/27 = 0.07275, s2: 1/26, s3: 1/27
    assert [i for i, _ in got] == ["s0", "s1", "s2"]
    assert got[0][1] == 1 / 29 + 1 / 26
    assert got[1][1] == 1 / 28 + 1 / 27
    assert got[2][1] == 1 / 26


@pytest.mark.parametrize("limit", [1, 5, 10, 60])
def test_search_hybrid_matches_an_independent_recomputation(tmp_path: Path, limit: int) -> None:
    rng = np.random.default_rng(11)
    words = ["cat", "cats", "dog", "run", "running", "garden", "budget", "party", "bike", "the"]
    contents = [
        " ".join(rng.choice(words, size=int(rng.integers(2, 9))).tolist()) for _ in range(90)
    ]
    vectors = rng.standard_normal((90, DIM)).astype(np.float32)
    vectors[7] = vectors[3]  # a semantic tie
    path = make_store(tmp_path, contents, vectors)
    ids = [f"s{i}" for i in range(90)]
    query, qvec = "the running cat", rng.standard_normal(DIM).astype(np.float32)
    pool = max(50, min(limit * 10, 10_000))
    sims = [sequential_cosine(vectors[i], qvec) for i in range(90)]
    semantic = sorted(range(90), key=lambda i: -sims[i])[:pool]
    conn = sqlite3.connect(path)
    fts = conn.execute(
        "SELECT m.id FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid "
        "WHERE memories_fts MATCH ? AND m.project_id = ? ORDER BY bm25(memories_fts) LIMIT ?",
        ('"the" "running" "cat"', store.PROJECT_ID, pool),
    ).fetchall()
    conn.close()
    assert fts  # the FTS list takes part
    fused: dict[str, float] = {}
    for ranked in ([ids[i] for i in semantic], [row[0] for row in fts]):
        for rank, mem_id in enumerate(ranked, start=1):
            fused[mem_id] = fused.get(mem_id, 0.0) + 1.0 / (25 + rank)
    expected = sorted(fused, key=lambda m: (-fused[m], m))[:limit]
    got = vipune.search_hybrid(path, vectors, ids, query, qvec, limit, project_id=store.PROJECT_ID)
    assert [i for i, _ in got] == expected


def test_search_hybrid_pool_clamp_both_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int]] = []

    def fake_sem(vectors: object, ids: object, q: object, limit: int) -> list[tuple[str, float]]:
        seen.append(("semantic", limit))
        return []

    def fake_fts(conn: object, query: str, project: str, limit: int,
                 mode: str = "and") -> list[tuple[str, float]]:
        seen.append(("fts", limit))
        return []

    monkeypatch.setattr(vipune.hybrid, "semantic_search", fake_sem)
    monkeypatch.setattr(vipune.hybrid, "fts_search", fake_fts)
    for limit in (1, 5000):
        vipune.search_hybrid(":memory:", np.zeros((0, 2)), [], "q", unit(1), limit, project_id="p")
    assert seen == [("semantic", 50), ("fts", 50), ("semantic", 10_000), ("fts", 10_000)]


def test_search_hybrid_validation_order() -> None:
    # vipune checks the query, then the recency weight, then the limit.
    with pytest.raises(VipuneInputError, match="Input cannot be empty"):
        vipune.search_hybrid(":memory:", np.zeros((0, 2)), [], " ", unit(1), 0, 5.0, project_id="p")
    with pytest.raises(VipuneInputError, match="recency"):
        vipune.search_hybrid(":memory:", np.zeros((0, 2)), [], "q", unit(1), 0, 5.0, project_id="p")
    with pytest.raises(VipuneInputError, match="Limit"):
        vipune.search_hybrid(":memory:", np.zeros((0, 2)), [], "q", unit(1), 0, project_id="p")


def test_search_hybrid_recency(tmp_path: Path) -> None:
    contents = ["alpha one", "alpha two"]
    vectors = np.stack([unit(1, 0), unit(1, 0)])
    path = make_store(tmp_path, contents, vectors)
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    created = {"s0": "2023-12-01T00:00:00Z", "s1": "2023-12-31T23:59:59+00:00"}
    plain = vipune.search_hybrid(
        path, vectors, ["s0", "s1"], "alpha", unit(1, 0), 2, 0.0, project_id=store.PROJECT_ID
    )
    assert [i for i, _ in plain] == ["s0", "s1"]  # semantic tie -> row order, bm25 tie
    weighted = vipune.search_hybrid(
        path,
        vectors,
        ["s0", "s1"],
        "alpha",
        unit(1, 0),
        2,
        0.5,
        project_id=store.PROJECT_ID,
        created_at=created,
        now=now,
    )
    assert [i for i, _ in weighted] == ["s1", "s0"]  # the newer row wins
    s1_score = dict(plain)["s1"]
    assert dict(weighted)["s1"] == 0.5 * s1_score + 0.5 * math.exp(-1e-6 * 1)


def test_recency_decay_rules() -> None:
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert vipune.recency_decay("2024-01-01T00:00:00Z", now) == 1.0
    assert vipune.recency_decay("2024-01-02T00:00:00Z", now) == 1.0  # future: age 0
    past = (now - timedelta(seconds=1_000_000)).isoformat()
    assert vipune.recency_decay(past, now) == math.exp(-1.0)
    assert vipune.recency_decay("1990-01-01T00:00:00Z", now) == 0.0  # exponent < -700
    half = (now - timedelta(seconds=10, microseconds=900_000)).isoformat()
    assert vipune.recency_decay(half, now) == math.exp(-1e-6 * 10)  # whole seconds
    with pytest.raises(ValueError):
        vipune.recency_decay("2024/01/01", now)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01T00:00:00Z", datetime(2024, 1, 1, tzinfo=timezone.utc)),
        ("2024-01-01t00:00:00z", datetime(2024, 1, 1, tzinfo=timezone.utc)),
        (
            "2024-01-01T12:34:56.123456789+00:00",  # vipune's own to_rfc3339(): nanoseconds
            datetime(2024, 1, 1, 12, 34, 56, 123456, tzinfo=timezone.utc),
        ),
        (
            "2023-05-30T23:40:00-05:30",
            datetime(2023, 5, 31, 5, 10, tzinfo=timezone.utc),
        ),
    ],
)
def test_parse_rfc3339(text: str, expected: datetime) -> None:
    assert vipune.parse_rfc3339(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "2024-01-01", "2024-01-01T00:00:00", "2024-02-30T00:00:00Z", "2023/05/30 (Tue) 23:40"],
)
def test_parse_rfc3339_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid timestamp"):
        vipune.parse_rfc3339(text)


# --------------------------------------------------------------------------- blobs, rows


def test_blob_round_trip_little_endian() -> None:
    v = np.arange(DIM, dtype=np.float32) / 7
    blob = vipune.vector_to_blob(v)
    assert len(blob) == 1536
    assert blob[:8] == np.array([0, 1 / 7], dtype="<f4").tobytes()
    assert np.array_equal(vipune.blob_to_vector(blob), v)
    with pytest.raises(ValueError, match="expected 384"):
        vipune.vector_to_blob(np.ones(256, np.float32))
    with pytest.raises(ValueError, match="Invalid BLOB size"):
        vipune.blob_to_vector(b"\0" * 1500)


# --------------------------------------------------------------------------- JSON output


def test_parse_search_json_round_trip() -> None:
    text = vipune.format_search_json(
        [("s2", "caf\u00e9", 0.5, "2024-01-01T00:00:00Z"), ("s1", "x", 1, "t")]
    )
    assert '  "results": [' in text and "caf\u00e9" in text  # serde pretty, UTF-8 kept
    assert vipune.parse_search_json(text) == ["s2", "s1"]
    assert vipune.parse_search_json(text.encode()) == ["s2", "s1"]
    assert vipune.parse_search_json('{"results": []}') == []


@pytest.mark.parametrize(
    ("stdout", "match"),
    [
        ("not json", "not JSON"),
        ("", "not JSON"),
        ('{"error": "Input cannot be empty"}', "Input cannot be empty"),
        ("[]", "only 'results'"),
        ('{"results": [], "extra": 1}', "only 'results'"),
        ('{"results": {}}', "not a list"),
        ('{"results": [{"id": "a"}]}', "exactly id"),
        (
            '{"results": [{"id": 1, "content": "", "similarity": 0, "created_at": ""}]}',
            "wrong type",
        ),
        (
            '{"results": [{"id": "a", "content": "", "similarity": true, "created_at": ""}]}',
            "wrong type",
        ),
        (
            '{"results": [{"id": "a", "content": "", "similarity": 0, "created_at": "", "x": 1}]}',
            "exactly id",
        ),
    ],
)
def test_parse_search_json_is_strict(stdout: str, match: str) -> None:
    with pytest.raises(VipuneOutputError, match=match) as info:
        vipune.parse_search_json(stdout)
    assert "\n" not in str(info.value)


def test_format_matches_serde_shape() -> None:
    payload = json.loads(vipune.format_search_json([("a", "b", 0.25, "c")]))
    assert payload == {
        "results": [{"id": "a", "content": "b", "similarity": 0.25, "created_at": "c"}]
    }


def test_hybrid_reusing_one_full_semantic_ranking_equals_fresh_scans(tmp_path: Path) -> None:
    """The retriever scans once per query and slices per pool; the result must not change."""
    rng = np.random.default_rng(7)
    words = ["alpha", "beta", "gamma", "delta", "query", "memory", "store"]
    n = 130  # more rows than the smallest pool (50), fewer than the pool at limit 20 (200)
    contents = [" ".join(rng.choice(words, size=6)) for _ in range(n)]
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    vectors[10] = vectors[3]  # exact cosine ties: stable row order must survive the slicing
    path = make_store(tmp_path, contents, vectors)
    ids = [f"s{i}" for i in range(n)]  # make_store's ids
    query_vec = rng.normal(size=DIM).astype(np.float32)
    full = vipune.semantic_search(vectors, ids, query_vec, n)
    for limit in (1, 5, 10, 20):
        fresh = vipune.search_hybrid(path, vectors, ids, "alpha memory", query_vec, limit,
                                     project_id=store.PROJECT_ID)
        reused = vipune.search_hybrid(path, vectors, ids, "alpha memory", query_vec, limit,
                                      project_id=store.PROJECT_ID, semantic_ranking=full)
        assert reused == fresh


def test_a_nul_in_the_query_fails_as_vipunes_fts_search_does(docs_store: Path) -> None:
    """Issue 23: a NUL in a question said 'delete the store cache directory'. vipune's
    escape keeps the NUL inside a quoted word and SQLite's FTS5 parser stops there; the
    reference says so before running SQL, and names the question, not the store."""
    escaped = vipune.escape_fts_query("cat\x00dog mat")
    assert escaped == '"cat\x00dog" "mat"'  # U+0000 is not Rust white space: kept in the word
    conn = sqlite3.connect(docs_store)
    try:  # what vipune's search_bm25 runs: SQLite itself refuses the query
        with pytest.raises(sqlite3.OperationalError, match="unterminated string"):
            conn.execute(vipune.FTS_SQL, (escaped, store.PROJECT_ID, 10)).fetchall()
    finally:
        conn.close()
    for mode in vipune.FTS_MODES:
        with pytest.raises(vipune.VipuneInputError) as info:
            vipune.fts_search(docs_store, "cat\x00dog mat", store.PROJECT_ID, 10, mode=mode)
        line = str(info.value)
        assert line.startswith("vipune rejects the input: Database error: unterminated string")
        assert "NUL" in line and "delete" not in line and "\n" not in line


def test_every_rows_cosine_adds_its_products_left_to_right_at_any_shape() -> None:
    """Issue 35: the matrix cosine reduces a column-major copy in four vector operations.
    Its sums must still take each row's products in order (Rust's ``sum``), so that it equals
    the one-row rule bit for bit: plain normal values, and magnitudes spread over
    1e-17..1e17, make any other order (pairwise, blocked) differ in the last bits, at every
    row count and width tried (a single row is where numpy would sum pairwise)."""
    rng = np.random.default_rng(35)
    for n in (*range(1, 18), 64, 500, 2049):
        for d, spread in [(d, s) for d in (1, 2, 3, 5, 8, 17, 384, 1024) for s in (0, 40)]:
            if n * d > 600_000:
                continue
            mat = (rng.standard_normal((n, d)) * np.exp(rng.uniform(-spread, spread, (n, d)))
                   ).astype(np.float32)
            query = (rng.standard_normal(d) * np.exp(rng.uniform(-spread, spread, d))
                     ).astype(np.float32)
            mat[rng.random((n, d)) < 0.01] = 0.0
            got = vipune.semantic._similarities(mat, query)
            rows = range(n) if n <= 64 else rng.choice(n, 64, replace=False)
            want = [vipune.cosine_similarity(mat[i], query) for i in rows]
            assert got.dtype == np.float64 and got.shape == (n,)
            assert [float(got[i]) for i in rows] == want, (n, d)
