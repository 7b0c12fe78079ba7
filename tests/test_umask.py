"""Files the plugin writes respect the umask (issue 10): the JSON report, the store copies
and every cache file (corpus, stores, bm25 term counts, vector shards, sidecars), not
``mkstemp``'s 0600 nor SQLite's 0644."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.io import checksums
from pytest_retrieval_eval.vectors.cache import VectorCache

pytest_plugins = ["pytester"]

UMASKS = [0o022, 0o002]


@pytest.fixture(params=UMASKS, ids=["umask022", "umask002"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    mask: int = request.param
    old = os.umask(mask)
    try:
        yield mask
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _files(root: Path) -> list[Path]:
    # Lock files belong to filelock, not to the plugin's data.
    return [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")
            and p.name != ".lock"]


def test_file_mode_follows_the_umask(umask: int) -> None:
    assert checksums.file_mode() == 0o666 & ~umask


def test_report_store_copies_and_cache_follow_the_umask(pytester: pytest.Pytester,
                                                        umask: int) -> None:
    cache = pytester.path / "cache"
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest(
        "--retrieval-eval", "--no-model", "--retrieval-eval-retriever", "hybrid,bm25",
        "--retrieval-eval-json", "out/report.json", "--retrieval-eval-store-dir", "stores",
        "--retrieval-eval-cache", str(cache), "-k", "temporal-reasoning")
    assert result.ret == 0, result.stdout.str()
    want = 0o666 & ~umask
    written = [pytester.path / "out" / "report.json", *_files(pytester.path / "stores"),
               *_files(cache)]
    kinds = {p.suffix for p in written}
    assert {".json", ".sqlite", ".npz", ".sha256"} <= kinds, kinds
    wrong = {str(p.relative_to(pytester.path)): oct(_mode(p)) for p in written
             if _mode(p) != want}
    assert not wrong, (oct(want), wrong)


def test_vector_shards_follow_the_umask(tmp_path: Path, umask: int) -> None:
    fp = "f" * 64
    cache = VectorCache(tmp_path, fp, 4, {"name": "m", "fingerprint": fp, "dim": 4})
    cache.add(["a" * 64, "b" * 64], np.ones((2, 4), dtype=np.float32))
    files = _files(tmp_path / "vectors")
    assert any(p.suffix == ".parquet" for p in files), files
    assert {p.name: oct(_mode(p)) for p in files if _mode(p) != 0o666 & ~umask} == {}
