"""Readers never fail because of a concurrent prep's compaction (issue 11, "Reliability II").

A reader pins each shard it indexes (memory-mapped, sidecar read): what it indexed stays
readable whatever a compaction deletes, so it serves one consistent generation; a shard
deleted between a listing and its opening sends the reader back to a fresh listing (the
compaction commits the merged shard before it deletes the small ones).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.vectors import cache as cache_mod
from pytest_retrieval_eval.vectors import cached_models as cache_models
from pytest_retrieval_eval.vectors.cache import models_holding
from tests.support import ROOT
from tests.support.reliability_support import subprocess_env
from tests.vectors.test_cache import FP_A, fill, open_cache, shards, vecs


def small_shards(root: Path, n: int = 4) -> list[str]:
    cache = open_cache(root)
    keys: list[str] = []
    for i in range(n):
        keys += fill(cache, [f"text {i} {j}" for j in range(5)])
    assert len(shards(root)) == n
    return keys


def texts(n: int = 4) -> list[str]:
    return [f"text {i} {j}" for i in range(n) for j in range(5)]


def test_an_indexed_reader_keeps_its_generation_through_a_compaction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = small_shards(tmp_path)
    reader = open_cache(tmp_path)
    assert len(reader) == len(keys)  # indexed: every shard pinned
    assert open_cache(tmp_path).compact() == 4  # another process merges them away
    assert all(not p.exists() for p in reader._known)

    def no_listing(directory: Path) -> list[Path]:
        raise AssertionError("the reader went back to the directory")

    monkeypatch.setattr(cache_mod, "_committed_shards", no_listing)
    got = reader.get(keys)  # served from the pinned (deleted) shards, checked first
    np.testing.assert_array_equal(got, vecs(texts()))
    assert reader.verify() == 4


def test_counting_a_models_keys_survives_a_compaction_mid_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """'holds no vectors of any model': the count skipped the shards a compaction removed
    after the listing, and so missed their keys."""
    keys = small_shards(tmp_path)
    real = cache_models._read_keys
    compacted: list[int] = []

    def compacting_read(path: Path, *args: object, **kwargs: object) -> object:
        if not compacted:
            compacted.append(open_cache(tmp_path).compact())
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cache_models, "_read_keys", compacting_read)
    (model,) = models_holding([tmp_path], keys)
    assert compacted == [4] and model["fingerprint"] == FP_A


COMPACTOR = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from tests.vectors.test_cache import fill, open_cache
root, rounds = Path(sys.argv[1]), int(sys.argv[2])
for r in range(rounds):
    cache = open_cache(root)
    fill(cache, [f"text {r % 4} {j}" for j in range(5)])  # keys already held: a new shard
    fill(cache, [f"extra {r} {j}" for j in range(3)])
    cache.compact(target_rows=10_000)
print("done", rounds)
"""


def test_stress_readers_beside_a_compacting_prep(tmp_path: Path) -> None:
    """The issue's stress loop, bounded: a child process adds and compacts shards 60 times
    while this one keeps opening fresh readers, checking vectors and model coverage."""
    keys = small_shards(tmp_path)
    expected = vecs(texts())
    root = ROOT
    writer = subprocess.Popen([sys.executable, "-c", COMPACTOR, str(tmp_path), "60", str(root)],
                              env=subprocess_env(), stdout=subprocess.PIPE, text=True)
    reads = 0
    deadline = time.monotonic() + 240
    try:
        while writer.poll() is None and time.monotonic() < deadline:
            reader = open_cache(tmp_path)
            np.testing.assert_array_equal(reader.get(keys), expected)
            reader.verify()
            assert [m["fingerprint"] for m in models_holding([tmp_path], keys)] == [FP_A]
            reads += 1
    finally:
        out, _ = writer.communicate(timeout=240)
    assert writer.returncode == 0 and "done 60" in out
    assert reads >= 3  # the loop really overlapped the compactions
    np.testing.assert_array_equal(open_cache(tmp_path).get(keys), expected)
