"""Persona stores: vipune's exact schema, row encoding, atomic builds, content-addressed reuse."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.errors import CacheError, DataError
from pytest_retrieval_eval.io import checksums
from pytest_retrieval_eval.vipune import store
from tests.support import concurrent_builds

DIM = vipune.EMBEDDING_DIM
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "running",
    "ran",
    "runs",
    "park",
    "cat",
    "dog",
    "budget",
    "garden",
    "report",
]


def sample_rows(n: int = 6, seed: int = 0, dim: int = DIM) -> list[store.StoreRow]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    contents = [
        " ".join(rng.choice(WORDS, size=int(rng.integers(3, 12))).tolist()) for _ in range(n)
    ]
    dates = [f"2023-05-{1 + i % 28:02d}T08:00:{i % 60:02d}+00:00" for i in range(n)]
    ids = [f"sess_{i}" for i in range(n)]
    return list(store.rows_from_arrays(ids, contents, vectors, dates))


def master(path: Path | str) -> list[tuple[str, str, str, str | None]]:
    return vipune.master_sql(path)


# --------------------------------------------------------------------------- schema


def test_schema_matches_vipune_statement_by_statement(tmp_path: Path) -> None:
    path = store.build_store(tmp_path / "p.sqlite", sample_rows())
    rows = master(path)
    by_name = {name: sql for _, name, _, sql in rows}
    expected_names = [
        "memories",
        "idx_memories_project",
        "memories_fts",
        "memories_fts_insert",
        "memories_fts_delete",
        "memories_fts_update",
    ]
    for name, stmt in zip(expected_names, vipune.DDL_STATEMENTS, strict=True):
        # SQLite stores the statement text verbatim, minus "IF NOT EXISTS" and the final ';'.
        assert stmt.endswith(";")
        assert by_name[name] == stmt.replace(" IF NOT EXISTS", "", 1)[:-1], name
    # ...and everything in sqlite_master (FTS5 shadow tables, autoindex, order) is what
    # vipune's own create_schema produces.
    fresh = sqlite3.connect(":memory:")
    fresh.executescript(vipune.SCHEMA_SQL)
    assert rows == vipune.master_sql(fresh)
    fresh.close()
    names = [name for _, name, _, _ in rows]
    assert names.index("memories_fts_update") == len(names) - 1  # triggers last, as vipune


def test_vipune_create_schema_is_a_no_op_on_a_built_store(tmp_path: Path) -> None:
    path = store.build_store(tmp_path / "p.sqlite", sample_rows())
    before = master(path)
    conn = sqlite3.connect(path)
    conn.executescript(vipune.SCHEMA_SQL)  # what Database::open runs
    conn.close()
    assert master(path) == before
    assert store.is_valid_store(path)


def test_rows_encoded_as_vipune_does(tmp_path: Path) -> None:
    rows = sample_rows(3)
    path = store.build_store(tmp_path / "p.sqlite", rows, project_id="proj-x")
    conn = sqlite3.connect(path)
    got = conn.execute(
        "SELECT rowid, id, project_id, content, embedding, metadata, created_at, updated_at"
        " FROM memories ORDER BY rowid"
    ).fetchall()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.VIPUNE_USER_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    for n, (row, db_row) in enumerate(zip(rows, got, strict=True)):
        rowid, sid, project, content, blob, metadata, created, updated = db_row
        assert rowid == n + 1
        assert (sid, project, content, metadata) == (row[0], "proj-x", row[1], None)
        assert blob == np.asarray(row[2], dtype="<f4").tobytes() and len(blob) == 1536
        assert created == updated == row[3]
    loaded = vipune.load_rows(path, "proj-x")
    assert loaded.ids == tuple(r[0] for r in rows)
    assert np.array_equal(loaded.vectors, np.stack([r[2] for r in rows]))
    assert not list(tmp_path.glob("*.tmp-*"))


def test_rebuilt_fts_index_equals_trigger_built(tmp_path: Path) -> None:
    rows = sample_rows(40, seed=5)
    built = store.build_store(tmp_path / "fast.sqlite", rows)
    slow = sqlite3.connect(tmp_path / "slow.sqlite")
    slow.executescript(vipune.SCHEMA_SQL)  # vipune's path: inserts fire the FTS trigger
    for sid, content, vec, created in rows:
        slow.execute(
            vipune.INSERT_SQL,
            (sid, store.PROJECT_ID, content, vipune.vector_to_blob(vec), None, created, created),
        )
    slow.commit()
    for query in ["alpha", "running park", "cat dog budget", "ran", "report garden alpha"]:
        a = vipune.fts_search(built, query, store.PROJECT_ID, 100)
        b = vipune.fts_search(slow, query, store.PROJECT_ID, 100)
        assert a == b and a, query
    assert (
        slow.execute("SELECT * FROM memories_fts_docsize").fetchall()
        == sqlite3.connect(built).execute("SELECT * FROM memories_fts_docsize").fetchall()
    )
    slow.close()


def _segments(conn: sqlite3.Connection) -> int:
    """The segments of a store's FTS5 index: its structure record (rowid 10) is a 4-byte
    cookie, then varints: levels, segments, ... (small counts: one byte each)."""
    record = conn.execute("SELECT block FROM memories_fts_data WHERE id = 10").fetchone()[0]
    assert record[4] < 0x80 and record[5] < 0x80
    return int(record[5])


def test_an_index_built_in_one_segment_searches_as_vipunes_own(tmp_path: Path) -> None:
    """A store's FTS5 index is built with a large in-memory hash: one segment, where FTS5's
    default 'rebuild' flushes a megabyte at a time (several), and the same entries, searches,
    doc sizes and config as the triggers' own index (vipune's path)."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(3000)]
    rows = [(f"s{i}", " ".join(rng.choice(words, 400)), np.zeros(0, np.float32),
             "2023-05-30T23:40:00+00:00") for i in range(1000)]
    records = [(sid, store.PROJECT_ID, text, b"", None, d, d) for sid, text, _, d in rows]
    built = store.build_store(tmp_path / "fast.sqlite", rows)
    slow = sqlite3.connect(tmp_path / "slow.sqlite")
    slow.executescript(vipune.SCHEMA_SQL)
    with slow:
        slow.executemany(vipune.INSERT_SQL, records)
    plain = sqlite3.connect(tmp_path / "plain.sqlite")
    with plain:
        for statement in vipune.DDL_STATEMENTS[:3]:
            plain.execute(statement)
        plain.executemany(vipune.INSERT_SQL, records)
        plain.execute("INSERT INTO memories_fts(memories_fts) VALUES('rebuild')")
    fast = sqlite3.connect(built)
    assert _segments(fast) == 1 < _segments(plain)
    for query in ["w1", "w17", "w5 w6", "w2999"]:
        a = vipune.fts_search(built, query, store.PROJECT_ID, 2000)
        b = vipune.fts_search(slow, query, store.PROJECT_ID, 2000)
        assert a == b and a, query
    for table in ("memories_fts_docsize", "memories_fts_config"):
        listing = f"SELECT * FROM {table} ORDER BY 1"
        assert fast.execute(listing).fetchall() == slow.execute(listing).fetchall()
    vocab = "CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, memories_fts, instance)"
    for conn in (fast, slow):
        conn.execute(vocab)
    entries = "SELECT * FROM temp.v ORDER BY term, doc, col, offset"
    assert fast.execute(entries).fetchall() == slow.execute(entries).fetchall()
    for conn in (fast, slow, plain):
        conn.close()


# --------------------------------------------------------------------------- validation


def test_dates_empty_gets_placeholder_bad_is_rejected(tmp_path: Path) -> None:
    rows = sample_rows(2)
    rows[0] = (rows[0][0], rows[0][1], rows[0][2], "")
    path = store.build_store(tmp_path / "p.sqlite", rows)
    assert vipune.load_rows(path, store.PROJECT_ID).created_at[0] == store.EMPTY_DATE_PLACEHOLDER
    rows[1] = (rows[1][0], rows[1][1], rows[1][2], "2023/05/30 (Tue) 23:40")
    with pytest.raises(DataError, match="not RFC 3339"):
        store.build_store(tmp_path / "q.sqlite", rows)
    assert not (tmp_path / "q.sqlite").exists()


def test_vector_checks(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match="exactly 384"):
        store.build_store(tmp_path / "a.sqlite", sample_rows(2, dim=768), reference_only=False)
    ref = store.build_store(tmp_path / "b.sqlite", sample_rows(2, dim=768), reference_only=True)
    assert store.store_user_version(ref) == store.REFERENCE_USER_VERSION
    assert store.is_valid_store(ref) and store.is_valid_store(ref, reference_only=True)
    assert not store.is_valid_store(ref, reference_only=False)
    mixed = sample_rows(1, dim=8) + sample_rows(1, dim=9)
    with pytest.raises(CacheError, match="different models"):
        store.build_store(tmp_path / "c.sqlite", mixed, reference_only=True)
    bad = sample_rows(2)
    bad[1][2][5] = np.nan
    with pytest.raises(CacheError, match="NaN"):
        store.build_store(tmp_path / "d.sqlite", bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.sqlite"]


def _written(path: Path) -> tuple[object, ...]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT rowid, *, typeof(embedding), typeof(metadata) FROM "
                            "memories ORDER BY rowid").fetchall()
        fts = conn.execute("SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE "
                           "memories_fts MATCH 'alpha OR run OR park' ORDER BY rowid").fetchall()
        marks = conn.execute("PRAGMA user_version").fetchone(), \
            conn.execute("PRAGMA application_id").fetchone()
    return rows, fts, marks


def _outcome(path: Path, rows: object, reference_only: bool | None) -> object:
    try:
        return _written(store.build_store(path, rows, reference_only=reference_only))  # type: ignore[arg-type]
    except (DataError, CacheError) as exc:
        assert not path.exists()
        return type(exc), str(exc)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 6), dim=st.sampled_from([0, 3, DIM]),
       reference_only=st.sampled_from([None, True, False]),
       flaw=st.sampled_from(["none", "nan", "date", "id", "content", "dup", "date-type"]),
       at=st.integers(0, 5), seed=st.integers(0, 3))
def test_columns_write_what_rows_write(tmp_path: Path, n: int, dim: int,
                                       reference_only: bool | None, flaw: str, at: int,
                                       seed: int) -> None:
    """A store built from columns (rows_from_arrays: checked and written a column at a
    time) is the store the same rows give one by one, and a flawed row fails with the same
    line (the first flawed row named), nothing left behind."""
    rows = sample_rows(n, seed=seed, dim=dim)
    ids, contents, vectors, dates = (list(c) for c in zip(*rows, strict=True))
    at %= n
    if flaw == "nan" and dim:
        vectors[at] = vectors[at].copy()
        vectors[at][0] = np.inf
    elif flaw == "date":
        dates[at] = "2023/05/30 (Tue) 23:40"
    elif flaw == "date-type":
        dates[at] = 20230530  # type: ignore[call-overload]
    elif flaw == "id":
        ids[at] = ""
    elif flaw == "content":
        contents[at] = None  # type: ignore[call-overload]
    elif flaw == "dup" and n > 1:
        ids[at] = ids[(at + 1) % n]
    matrix = np.stack(vectors) if dim else np.zeros((n, 0), np.float32)
    columns = store.rows_from_arrays(ids, contents, matrix, dates)
    one_by_one = list(zip(ids, contents, list(matrix), dates, strict=True))
    by_columns, by_rows = (Path(tempfile.mkdtemp(dir=tmp_path)) / "s.sqlite" for _ in "cr")
    assert _outcome(by_columns, columns, reference_only) == \
        _outcome(by_rows, one_by_one, reference_only)
    if dim and by_columns.exists():  # same page size: the very same file
        assert by_columns.read_bytes() == by_rows.read_bytes()


@pytest.mark.parametrize("project", ["longmemeval", "it's", "tab\there"])
def test_a_store_from_columns_holds_its_project_as_rows_do(tmp_path: Path, project: str
                                                           ) -> None:
    """The columns' insert writes the project as a literal (quoted; a project that cannot be
    one is bound as the rows' insert binds it): the same file either way."""
    rows = sample_rows(3)
    ids, contents, vectors, dates = (list(c) for c in zip(*rows, strict=True))
    columns = store.rows_from_arrays(ids, contents, np.stack(vectors), dates)
    a = store.build_store(tmp_path / "c.sqlite", columns, project_id=project)
    b = store.build_store(tmp_path / "r.sqlite", rows, project_id=project)
    assert a.read_bytes() == b.read_bytes()
    with sqlite3.connect(a) as conn:
        assert {r[0] for r in conn.execute("SELECT project_id FROM memories")} == {project}


def test_a_store_without_vectors_is_written_in_larger_pages(tmp_path: Path) -> None:
    """A turn store (no vectors, built from columns) uses 16 KiB pages, is a valid store and
    searches as the default page size does (the hypothesis test above compares them)."""
    from pytest_retrieval_eval.vipune.store_build import NO_VECTORS_PAGE_SIZE

    ids, contents, _, dates = (list(c) for c in zip(*sample_rows(5), strict=True))
    columns = store.rows_from_arrays(ids, contents, np.zeros((5, 0), np.float32), dates)
    path = store.build_store(tmp_path / "t.sqlite", columns)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == NO_VECTORS_PAGE_SIZE
    assert store.is_valid_store(path, reference_only=True)
    vectors = store.rows_from_arrays(ids, contents, np.ones((5, DIM), np.float32), dates)
    with sqlite3.connect(store.build_store(tmp_path / "v.sqlite", vectors)) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096  # SQLite's default


@pytest.mark.parametrize(("dim", "kind"), [(384, "vipune"), (768, "ref"), (0, "ref")])
def test_store_kind_follows_the_vectors_by_default(tmp_path: Path, dim: int, kind: str) -> None:
    path = store.build_store(tmp_path / "p.sqlite", sample_rows(3, dim=dim))
    expected = store.VIPUNE_USER_VERSION if kind == "vipune" else store.REFERENCE_USER_VERSION
    assert store.store_user_version(path) == expected
    assert vipune.fts_search(path, "alpha beta gamma", store.PROJECT_ID, 10) is not None
    assert len(vipune.load_rows(path, store.PROJECT_ID, dim=None).ids) == 3


def test_export_store(tmp_path: Path) -> None:
    path = store.build_store(tmp_path / "p.sqlite", sample_rows(3))
    out = store.export_store(path, tmp_path / "out" / "q1.sqlite")
    assert out.read_bytes() == path.read_bytes() and store.is_valid_store(out)
    assert [p.name for p in out.parent.iterdir()] == ["q1.sqlite"]


def test_duplicate_ids_rejected_and_nothing_left(tmp_path: Path) -> None:
    rows = sample_rows(3)
    rows[2] = (rows[0][0], *rows[2][1:])
    with pytest.raises(DataError, match="share a session id"):
        store.build_store(tmp_path / "p.sqlite", rows)
    assert list(tmp_path.iterdir()) == []


def test_failed_build_keeps_the_previous_file(tmp_path: Path) -> None:
    target = store.build_store(tmp_path / "p.sqlite", sample_rows(3))
    before = target.read_bytes()

    def exploding() -> Iterator[store.StoreRow]:
        yield from sample_rows(2, seed=9)
        raise KeyboardInterrupt  # a kill mid-build

    with pytest.raises(KeyboardInterrupt):
        store.build_store(target, exploding())
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["p.sqlite"]


# --------------------------------------------------------------------------- keys


def test_persona_and_store_keys() -> None:
    ids, keys, dates = ["a", "b"], ["k1", "k2"], ["d1", "d2"]
    base = store.persona_key(ids, keys, dates)
    assert len(base) == 64 and base == store.persona_key(tuple(ids), tuple(keys), tuple(dates))
    variants = [
        store.persona_key(["b", "a"], keys, dates),
        store.persona_key(ids, ["k1", "k3"], dates),
        store.persona_key(ids, keys, ["d1", "d3"]),
        store.persona_key(["a", "b", "c"], ["k1", "k2", "k3"], ["d1", "d2", "d3"]),
        store.persona_key(["a,b"], ["k1k2"], ["d1d2"]),
    ]
    assert len({base, *variants}) == 6
    with pytest.raises(ValueError):
        store.persona_key(ids, keys, ["d1"])
    s1 = store.store_key(base, "model-a")
    assert s1 != store.store_key(base, "model-b") != store.store_key(base, "model-a", "other")
    assert s1 == store.store_key(base, "model-a") and s1 != base
    assert store.persona_key(ids, keys, dates, "model-a") == s1  # the session's one-step form


# --------------------------------------------------------------------------- cache


def test_cache_builds_once_then_reuses(tmp_path: Path) -> None:
    cache = store.StoreCache(tmp_path / "stores")
    key = store.store_key(store.persona_key(["a"], ["k"], [""]), "fp")
    calls: list[int] = []

    def rows_fn() -> list[store.StoreRow]:
        calls.append(1)
        return sample_rows(4)

    first = cache.get_or_build(key, rows_fn)
    assert first == (tmp_path / "stores" / key[:2] / f"{key}.sqlite").resolve()
    mtime = first.stat().st_mtime_ns
    second = cache.get_or_build(key, rows_fn)
    assert second == first and calls == [1] and first.stat().st_mtime_ns == mtime


def _count_hashes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    hashed: list[Path] = []
    real = checksums.sha256_file
    monkeypatch.setattr(checksums, "sha256_file", lambda p, *a: hashed.append(p) or real(p, *a))
    return hashed


def test_a_stamped_store_is_reused_without_reading_it_under_verify_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35.1: every warm run re-hashed every store (3.5 GB for LongMemEval_M). Under
    the default ``stamp`` level a store whose stamp (size, times, inode, change counter, ids)
    is unchanged is trusted as git trusts its index; a write to it is still caught."""
    cache = store.StoreCache(tmp_path)
    key = "9a" * 32
    ids = [row[0] for row in sample_rows()]
    path = cache.get_or_build(key, sample_rows, session_ids=ids)
    checksums._memo.clear()  # a later process: only what is on disk is left
    hashed = _count_hashes(monkeypatch)
    calls: list[int] = []
    assert cache.get_or_build(key, lambda: calls.append(1) or sample_rows(),
                              session_ids=ids) == path
    assert calls == [] and hashed == []  # trusted by its stamp: not one byte hashed
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, any write moves mtime and ctime
    path.write_bytes(bytes(data))
    cache.get_or_build(key, lambda: calls.append(1) or sample_rows(), session_ids=ids)
    assert hashed[:1] == [path] and calls == [1]  # the stamp differs: rehashed, rebuilt


def test_a_stamp_records_sqlites_change_counter_and_the_ids_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stamp whose times match but whose change counter (a write through SQLite) or ids
    differ does not vouch for the store: it is rehashed (and its ids checked)."""
    cache = store.StoreCache(tmp_path)
    key = "9b" * 32
    ids = [row[0] for row in sample_rows()]
    path = cache.get_or_build(key, sample_rows, session_ids=ids)
    stamp_file = path.with_name(path.name + checksums.VERIFIED_SUFFIX)
    stamp = json.loads(stamp_file.read_text())
    assert stamp["stat"][-1] == checksums.sqlite_change_counter(path) is not None
    stamp["stat"][-1] += 1  # another transaction's counter, times the same
    stamp_file.write_text(json.dumps(stamp))
    checksums._memo.clear()
    hashed = _count_hashes(monkeypatch)
    assert cache.get_or_build(key, sample_rows, session_ids=ids) == path
    assert hashed == [path]  # rehashed (it matches: reused and stamped again)
    checksums._memo.clear()
    hashed.clear()
    assert cache.get_or_build(key, sample_rows, session_ids=ids) == path and hashed == []
    calls: list[int] = []
    cache.get_or_build(key, lambda: calls.append(1) or sample_rows(), session_ids=ids[::-1])
    assert hashed[:1] == [path] and calls == [1]  # other ids than the stamp's: rebuilt


def test_verify_full_rehashes_a_store_once_per_process_whatever_its_stamp_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-verification policy (docs/reliability.md): a stamp cannot see bit rot beneath the
    filesystem, so under ``--retrieval-eval-verify full`` each process hashes a store it
    reuses once (per file version)."""
    cache = store.StoreCache(tmp_path, verify="full")
    key = "9a" * 32
    path = cache.get_or_build(key, sample_rows)
    checksums._memo.clear()  # a later process: only what is on disk is left
    hashed = _count_hashes(monkeypatch)
    calls: list[int] = []
    assert cache.get_or_build(key, lambda: calls.append(1) or sample_rows()) == path
    assert calls == [] and hashed == [path]  # hashed once in this process, not rebuilt
    assert cache.get_or_build(key, lambda: calls.append(1) or sample_rows()) == path
    assert hashed == [path]  # the same version is not hashed twice in one process


def test_a_store_cache_refuses_an_unknown_verify_level(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'some' is not one of stamp, full"):
        store.StoreCache(tmp_path, verify="some")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "user_version", "schema", "empty"])
def test_cache_rebuilds_an_untrusted_file(tmp_path: Path, damage: str) -> None:
    cache = store.StoreCache(tmp_path)
    key = "ab" * 32
    path = cache.get_or_build(key, sample_rows)
    if damage == "garbage":
        path.write_bytes(b"not a database at all" * 100)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:4096])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        conn = sqlite3.connect(path)
        if damage == "user_version":
            conn.execute("PRAGMA user_version = 0")  # e.g. a store vipune itself wrote
        else:
            conn.execute("DROP TRIGGER memories_fts_update")
        conn.commit()
        conn.close()
    assert not store.is_valid_store(path)
    calls: list[int] = []
    rebuilt = cache.get_or_build(key, lambda: calls.append(1) or sample_rows())
    assert calls == [1] and store.is_valid_store(rebuilt)


def test_cache_reference_only_is_a_different_kind(tmp_path: Path) -> None:
    cache = store.StoreCache(tmp_path)
    key = "cd" * 32
    cache.get_or_build(key, lambda: sample_rows(2, dim=16), reference_only=True)
    calls: list[int] = []
    assert cache.get_or_build(key, lambda: calls.append(1) or sample_rows(2))  # any kind: reuse
    assert calls == []
    path = cache.get_or_build(key, lambda: calls.append(1) or sample_rows(2), reference_only=False)
    assert calls == [1] and store.store_user_version(path) == store.VIPUNE_USER_VERSION


def test_cache_rejects_bad_keys(tmp_path: Path) -> None:
    cache = store.StoreCache(tmp_path)
    for key in ["../etc/passwd", "ABCDEF0123456789", "short", ""]:
        with pytest.raises(ValueError):
            cache.path_for(key)


def test_stale_partials_are_ignored_and_cleaned(tmp_path: Path) -> None:
    cache = store.StoreCache(tmp_path)
    key = "ef" * 32
    target = cache.path_for(key)
    target.parent.mkdir(parents=True)
    partial = target.with_name(target.name + ".tmp-99999-0")
    partial.write_bytes(b"half a database")  # a killed build
    path = cache.get_or_build(key, sample_rows)
    assert store.is_valid_store(path) and partial.exists()
    assert cache.remove_stale_partials() == 0  # young: maybe still being written
    old = time.time() - 7200
    os.utime(partial, (old, old))
    assert cache.remove_stale_partials() == 1 and not partial.exists()
    assert path.exists()


def test_partials_of_dead_builders_are_swept_at_once_live_ones_kept(tmp_path: Path) -> None:
    """'<key>.sqlite.tmp-PID-0 files (5 MB) remain after a complete rerun': the name now
    holds the builder's host and pid, and a dead builder's file goes whatever its age."""
    import subprocess
    import sys

    from pytest_retrieval_eval.io.checksums import owner_tag

    cache = store.StoreCache(tmp_path)
    folder = cache.path_for("ab" * 32).parent
    folder.mkdir(parents=True)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # its pid is no longer alive
    host = owner_tag().rsplit("-", 1)[0]
    dead = folder / f"{'ab' * 32}.sqlite.tmp-{host}-{child.pid}-0"
    dead_sidecar = folder / f"{'ab' * 32}.sqlite.sha256.tmp-{host}-{child.pid}-3"
    mine = folder / f"{'cd' * 32}.sqlite.tmp-{owner_tag()}-0"  # this live process
    elsewhere = folder / f"{'ef' * 32}.sqlite.tmp-otherhost-{child.pid}-0"  # can't tell
    for path in (dead, dead_sidecar, mine, elsewhere):
        path.write_bytes(b"half a database")
    assert cache.remove_stale_partials() == 2
    assert not dead.exists() and not dead_sidecar.exists()
    assert mine.exists() and elsewhere.exists()


def test_a_build_names_its_temp_file_after_its_host_and_pid(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_retrieval_eval.io.checksums import owner_tag

    seen: list[str] = []
    real = store.sqlite3.connect

    def spy(path: object, *args: object, **kwargs: object) -> object:
        seen.append(str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store.sqlite3, "connect", spy)
    store.StoreCache(tmp_path).get_or_build("ab" * 32, sample_rows)
    assert any(f".sqlite.tmp-{owner_tag()}-" in name for name in seen), seen


def test_concurrent_builds_of_one_key_both_succeed(tmp_path: Path) -> None:
    key = "12" * 32
    barrier = tmp_path / "go"
    outs = [tmp_path / f"out{i}" for i in range(3)]
    racers = [(str(tmp_path / "c"), key, str(barrier), str(out)) for out in outs]
    assert concurrent_builds.race(concurrent_builds.build_store, racers, barrier) == [0, 0, 0]
    paths = {out.read_text() for out in outs}
    assert len(paths) == 1
    path = Path(paths.pop())
    assert store.is_valid_store(path)
    assert len(vipune.load_rows(path, store.PROJECT_ID).ids) == 30
    assert not list(path.parent.glob("*.tmp-*"))


def test_export_name_stays_inside_the_folder() -> None:
    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    assert store.export_name("0a1b_abs") == f"0a1b_abs-{sha('0a1b_abs')}.sqlite"
    assert store.export_name("../up/x") == f"_._up_x-{sha('../up/x')}.sqlite"  # no separator
    assert store.export_name(".hidden") == f"_hidden-{sha('.hidden')}.sqlite"
    assert store.export_name("a b\u00e9") == f"a_b_-{sha('a b' + chr(0xe9))}.sqlite"


def test_a_store_that_cannot_be_built_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "stores"
    blocker.write_text("a file where the folder should be", encoding="utf-8")
    rows = [("s1", "hello there", np.ones(4, dtype=np.float32), "2023-05-01T10:00:00Z")]
    with pytest.raises(CacheError) as info:
        store.StoreCache(blocker).get_or_build("ab" * 32, lambda: rows)
    assert "\n" not in str(info.value)
    assert "persona store" in str(info.value) and "cannot be built" in str(info.value)


def test_a_store_records_its_model_and_another_models_store_is_set_aside(
        tmp_path: Path) -> None:
    """Issue 23.4: a store copied (with its sidecar) from the same persona under another
    model was served, so exports and searches carried the wrong embeddings."""
    cache = store.StoreCache(tmp_path)
    fp_a, fp_b = "a" * 64, "b" * 64
    key_a, key_b = "ab" * 32, "cd" * 32
    path_a = cache.get_or_build(key_a, lambda: sample_rows(seed=1), fingerprint=fp_a)
    path_b = cache.get_or_build(key_b, lambda: sample_rows(seed=2), fingerprint=fp_b)
    assert store.store_model_mark(path_a) == store.model_mark(fp_a) != store.model_mark(fp_b)
    assert store.is_valid_store(path_a)  # the mark lies in the header: vipune's schema intact
    for suffix in ("", ".sha256"):  # B's store and sidecar over A's
        Path(f"{path_a}{suffix}").write_bytes(Path(f"{path_b}{suffix}").read_bytes())
    Path(f"{path_a}.verified").unlink(missing_ok=True)
    calls: list[int] = []
    with pytest.warns(store.StoreWarning) as record:
        rebuilt = cache.get_or_build(key_a, lambda: calls.append(1) or sample_rows(seed=1),
                                     fingerprint=fp_a)
    [warning] = record
    line = str(warning.message)
    assert "\n" not in line and str(path_a) in line and f"not of model {fp_a[:12]}" in line
    assert f"{store.model_mark(fp_b) & 0xFFFFFFFF:08x}" in line
    assert calls == [1] and store.store_model_mark(rebuilt) == store.model_mark(fp_a)
    assert Path(f"{path_a}.foreign").exists()
    again: list[int] = []
    cache.get_or_build(key_a, lambda: again.append(1) or sample_rows(seed=1), fingerprint=fp_a)
    assert again == []  # the rebuilt store is reused


def test_model_mark_is_a_signed_32_bit_sqlite_application_id() -> None:
    marks = {store.model_mark(f"{i:064x}") for i in range(200)}
    assert len(marks) == 200 and all(-(1 << 31) <= m < (1 << 31) for m in marks)
    assert any(m < 0 for m in marks)


@settings(max_examples=400, deadline=None)
@given(st.tuples(st.integers(0, 9999), st.integers(0, 19), st.integers(0, 39),
                 st.sampled_from("Tt x"), st.integers(0, 29), st.integers(0, 69),
                 st.integers(0, 69), st.sampled_from(["", ".5", ".123456789"]),
                 st.sampled_from(["+", "-", "Z", ""]), st.integers(0, 30), st.integers(0, 99),
                 st.sampled_from(["", " ", "\n"])))
def test_a_date_is_valid_as_vipune_parses_it(parts: tuple[object, ...]) -> None:
    """The store's date check (a plain date at C speed, issue 44) gives the rule's verdict
    (vipune.parse_rfc3339) for any date-like text: impossible days, hours, offsets past a
    day or minutes past 59, fractions, other separators, whitespace."""
    from pytest_retrieval_eval.vipune.store_build import _valid_date

    y, mo, d, sep, h, mi, s, frac, sign, oh, om, pad = parts
    zone = sign if sign in ("Z", "") else f"{sign}{oh:02d}:{om:02d}"
    text = f"{pad}{y:04d}-{mo:02d}-{d:02d}{sep}{h:02d}:{mi:02d}:{s:02d}{frac}{zone}{pad}"
    try:
        vipune.parse_rfc3339(text)
        expected = True
    except ValueError:
        expected = False
    assert _valid_date(text) is expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=6), st.sampled_from(['a"b', "c\\d", "e\nf", "g\x00",
                                                                  "é", "\x7f", "\u2028"])),
                max_size=6))
def test_an_ids_note_is_the_sha256_of_their_json(ids: list[str]) -> None:
    """A stamp's ids note (joined at C speed where no id needs an escape) is the sha256 of
    json.dumps of the ids, as it was: stamps written before still vouch."""
    expected = hashlib.sha256(json.dumps(ids, ensure_ascii=False, separators=(",", ":"),
                                         allow_nan=False).encode("utf-8")).hexdigest()
    assert store.ids_note(ids) == "ids:" + expected
    assert store.ids_note(None) == ""
