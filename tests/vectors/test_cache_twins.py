"""A run's vector cache (issue 44, full scale): shards trusted by the memo of their version,
each own shard read through a dense twin built once, and prep writing session vectors before
turn vectors. Each test pins one convention of pytest_retrieval_eval/vectors/cache.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.io.checksums import MEMO_DIR
from pytest_retrieval_eval.vectors import cache as cache_mod
from pytest_retrieval_eval.vectors.cache import VectorCache
from tests.vectors.test_cache import FP_A, fill, open_cache, shards, vecs


def run_cache(root: Path, verify: str = "stamp") -> VectorCache:
    """The cache as a run opens it (run/lanes.vector_cache)."""
    return open_cache(root, memo_dir=root / MEMO_DIR, verify=verify, twins=True)


def twins(root: Path) -> list[Path]:
    return sorted((root / "vectors" / FP_A / "dense").glob("*.f32"))


def _texts(n: int, tag: str = "t") -> list[str]:
    return [f"{tag} {i}" for i in range(n)]


def _built_twin(tmp_path: Path, texts: list[str]) -> tuple[list[str], Path]:
    """A cache of ``texts`` in one shard, read once by a run: the keys and the twin built."""
    keys = fill(open_cache(tmp_path), texts)
    run_cache(tmp_path).get(keys)
    (twin,) = twins(tmp_path)
    return keys, twin


def _flip(path: Path, at: int) -> bytes:
    """``path`` with the byte at ``at`` flipped, written back; the new bytes."""
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    return bytes(data)


def test_a_run_reads_its_vectors_through_twins_built_once(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    texts = _texts(300)
    keys = fill(open_cache(tmp_path), texts[:200]) + fill(open_cache(tmp_path), texts[200:])
    wanted = [keys[i] for i in (250, 3, 199, 200, 42, 3)]
    expected = vecs([texts[i] for i in (250, 3, 199, 200, 42, 3)])
    assert twins(tmp_path) == []
    first = run_cache(tmp_path)
    assert np.array_equal(first.get(wanted), expected)
    built = twins(tmp_path)
    assert [p.name for p in built] == [f"{s.name}.f32" for s in shards(tmp_path)]
    assert all(p.stat().st_size == n * 8 * 4 for p, n in zip(built, (200, 100), strict=True))
    # A later run reads the twins: no shard row group is decoded, no twin built again.
    later = run_cache(tmp_path)
    monkeypatch.setattr(VectorCache, "_decode", lambda self, grg: pytest.fail("decoded"))
    stamps = [p.stat().st_mtime_ns for p in built]
    assert np.array_equal(later.get(wanted), expected)
    assert [p.stat().st_mtime_ns for p in twins(tmp_path)] == stamps


def test_a_damaged_twin_is_never_read_and_is_built_again(tmp_path: Path) -> None:
    texts = _texts(50)
    keys, twin = _built_twin(tmp_path, texts)
    st = twin.stat()
    data = _flip(twin, 100)
    os.utime(twin, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: the ctime moves
    assert np.array_equal(run_cache(tmp_path).get(keys), vecs(texts))
    assert twin.read_bytes() != data  # rebuilt
    # A twin of the wrong size is refused the same way.
    twin.write_bytes(twin.read_bytes()[:-4])
    assert np.array_equal(run_cache(tmp_path).get(keys), vecs(texts))
    assert twin.stat().st_size == 50 * 8 * 4


def test_under_verify_full_a_twin_is_rehashed(tmp_path: Path) -> None:
    from pytest_retrieval_eval.io.checksums import read_sidecar, write_stamp

    texts = _texts(20)
    keys, twin = _built_twin(tmp_path, texts)
    # Bit rot beneath the filesystem: the bytes change under a stamp that still vouches.
    _flip(twin, 0)
    write_stamp(twin, twin.stat(), read_sidecar(twin))
    rotted = run_cache(tmp_path, "stamp").get(keys)
    assert not np.array_equal(rotted, vecs(texts))  # the stamp is trusted, as stores' are
    assert np.array_equal(run_cache(tmp_path, "full").get(keys), vecs(texts))  # rebuilt
    assert np.array_equal(run_cache(tmp_path, "stamp").get(keys), vecs(texts))


def test_shards_are_trusted_by_the_memo_and_rehashed_under_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = fill(open_cache(tmp_path), _texts(30))
    from pytest_retrieval_eval.io import checksums

    hashed: list[str] = []
    real = checksums.sha256_file

    def counting(path: Path, progress: Any = None) -> str:
        if Path(path).suffix == ".parquet":
            hashed.append(Path(path).name)
        return real(path, progress)

    monkeypatch.setattr(checksums, "sha256_file", counting)
    run_cache(tmp_path).verify(keys)
    assert len(hashed) == 1  # the first run hashes the shard, and the memo records it
    run_cache(tmp_path).verify(keys)
    assert len(hashed) == 1  # trusted: no byte of it read again
    run_cache(tmp_path, "full").verify(keys)
    assert len(hashed) == 2
    # A changed shard is a new version: the memo does not vouch for it, the hash fails.
    (shard,) = shards(tmp_path)
    _flip(shard, shard.stat().st_size // 2)
    with pytest.raises(Exception, match="does not match"):
        run_cache(tmp_path).verify(keys)


def test_compaction_removes_the_twins_of_merged_shards(tmp_path: Path) -> None:
    texts = _texts(40)
    keys = []
    for i in range(4):
        keys += fill(open_cache(tmp_path), texts[i * 10:(i + 1) * 10])
    run_cache(tmp_path).get(keys)
    assert len(twins(tmp_path)) == 4
    assert open_cache(tmp_path).compact(target_rows=100) == 4
    assert twins(tmp_path) == []  # their shards are gone
    assert np.array_equal(run_cache(tmp_path).get(keys), vecs(texts))
    assert len(twins(tmp_path)) == 1


def test_a_read_only_run_builds_no_twin(tmp_path: Path) -> None:
    keys = fill(open_cache(tmp_path), _texts(10))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    from pytest_retrieval_eval.run.lanes import vector_cache

    cache = vector_cache(tmp_path, open_cache(tmp_path).model_info, writes=False)
    assert np.array_equal(cache.get(keys), vecs(_texts(10)))
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_prep_writes_session_vectors_before_turn_vectors(tmp_path: Path) -> None:
    """A +unit:turn prep from an empty cache: every session (and query) vector lies in rows
    before every turn vector, so a run that reads sessions only reads their shards."""
    from pytest_retrieval_eval.data import ingest
    from pytest_retrieval_eval.data.dataset import resolve_dataset
    from pytest_retrieval_eval.data.turn_texts import WithTurnTexts
    from pytest_retrieval_eval.vectors.embedding import load_embedder
    from pytest_retrieval_eval.vectors.prep import needed_keys
    from tests.support.model_factory import make_model_dir

    corpus = ingest.load_corpus(resolve_dataset("sample"), tmp_path / "c")
    turned = WithTurnTexts(corpus)
    embedder = load_embedder(str(make_model_dir(tmp_path / "m", dim=8).path))
    order = needed_keys(turned, embedder)
    sessions = {k for p in corpus.pairs for k in p.text_keys}
    turns = {k for p in turned.pairs for k in p.text_keys} - sessions
    last_session = max(i for i, k in enumerate(order) if k in sessions)
    first_turn = min(i for i, k in enumerate(order) if k in turns)
    assert last_session < first_turn
    assert set(order) >= sessions | turns


def test_shards_are_indexed_only_as_far_as_the_keys_asked_for_need(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session vectors first, turn vectors after (prep's order): a run asking for session
    keys never reads the turn shards' key columns; a key no shard listed so far holds makes
    every shard indexed, and a shard committed since is looked at before it is missing."""
    sessions = fill(open_cache(tmp_path), _texts(20, "session"))
    turns = fill(open_cache(tmp_path), _texts(20, "turn"))
    read: list[str] = []
    real = getattr(cache_mod, "_read_keys")  # noqa: B009 - not exported: patched here

    def counting(path: Path, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("keys_too", True):
            read.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(cache_mod, "_read_keys", counting)
    first, second = (p.name for p in shards(tmp_path))
    cache = run_cache(tmp_path)
    assert np.array_equal(cache.get(sessions[:3]), vecs(_texts(20, "session"))[:3])
    assert cache.missing(sessions) == [] and read == [first]
    cache.verify()  # every shard checked, the second's key column still not read
    assert read == [first]
    assert np.array_equal(cache.get(turns[-2:]), vecs(_texts(20, "turn"))[-2:])
    assert read == [first, second]
    later = fill(open_cache(tmp_path), ["written since"])
    assert cache.missing(["absent", *later]) == ["absent"]
    assert len(read) == 3
