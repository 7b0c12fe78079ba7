"""Reliability V (issue 34, item 6, for the console script): ``export --out DIR`` and
``generate OUT`` never write inside a cache folder (the default cache root, the bundled
sample's read-only cache) nor over the bundled sample's dataset: one line, exit 4, before
anything is read, swept or written. The run's own outputs get the same line from the
settings' guard (tests/plugin/test_outputs_v_plugin.py), ``compare --json`` and ``plot -o``
too."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.data.dataset import SAMPLE_PATH
from pytest_retrieval_eval.io.checksums import owner_tag
from pytest_retrieval_eval.reporting.report import SCHEMA_VERSION
from pytest_retrieval_eval.vectors.cache import bundled_cache_dir


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default cache root, here: ``$RETRIEVAL_EVAL_CACHE_DIR``."""
    root = tmp_path / "cache"
    (root / "vectors").mkdir(parents=True)
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(root))
    return root


def _report(path: Path) -> Path:
    path.write_text(json.dumps({
        "schema_version": SCHEMA_VERSION, "dataset": {"sha256": "0" * 64}, "ks": [1],
        "retrievers": ["r"], "pairs": [{"question_id": "q", "retriever": "r",
                                        "question_type": "t", "ranked": ["x"], "gold": ["x"],
                                        "metrics": {"recall@1": 1.0}}]}))
    return path


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*"))


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert code == cli.EXIT_ERROR, captured.out + captured.err
    assert captured.out == "" and len(captured.err.splitlines()) == 1, captured.err
    line = captured.err.strip()
    for needle in needles:
        assert needle in line, line
    return line


def test_export_refuses_a_folder_inside_the_cache(tmp_path: Path, cache_root: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(tmp_path / "r.json")
    before = _files(cache_root)
    for out in (cache_root, cache_root / "vectors", cache_root / "vectors" / "new"):
        _refused(["export", str(report), "--out", str(out)], capsys,
                 f"export: --out {out} lies inside the cache {cache_root}",
                 "give --out a path outside that folder")
    assert _files(cache_root) == before  # nothing written, no folder made
    link = tmp_path / "link"  # a symlink into the cache is inside it too
    link.symlink_to(cache_root / "vectors")
    _refused(["export", str(report), "--out", str(link)], capsys, "lies inside the cache")
    assert _files(cache_root) == before
    assert cli.main(["export", str(report), "--out", str(tmp_path / "trec")]) == 0
    assert (tmp_path / "trec" / "r.run").exists()


def test_export_refuses_the_bundled_cache(tmp_path: Path, cache_root: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(tmp_path / "r.json")
    bundled = bundled_cache_dir()
    out = bundled / "trec-34"
    try:
        _refused(["export", str(report), "--out", str(out)], capsys,
                 f"lies inside the bundled sample's read-only cache {bundled}")
        assert not out.exists()
    finally:
        if out.exists():  # the old code wrote there: leave the package as it was
            for p in sorted(out.iterdir()):
                p.unlink()
            out.rmdir()


def test_generate_refuses_an_out_inside_a_cache(tmp_path: Path, cache_root: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    target = cache_root / "vectors" / "data.json"
    host = owner_tag().rsplit("-", 1)[0]  # a dead writer's temp there is not swept either
    dead = cache_root / "vectors" / f".x.json.{host}-{(1 << 22) + 7}-1.tmp"  # past pid_max
    dead.write_text("")
    before = _files(cache_root)
    _refused(["generate", str(target), "--no-progress"], capsys,
             f"generate: OUT {target} lies inside the cache {cache_root}",
             "give OUT a path outside that folder")
    assert _files(cache_root) == before
    bundled = bundled_cache_dir() / "data-34.json"
    try:
        _refused(["generate", str(bundled), "--no-progress"], capsys,
                 "lies inside the bundled sample's read-only cache")
        assert not bundled.exists()
    finally:
        bundled.unlink(missing_ok=True)  # the old code wrote there


def test_generate_refuses_the_bundled_sample_dataset(tmp_path: Path, cache_root: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    """Through a symlink too. (``--preset sample`` writes the sample's very bytes, so a
    code that let it through would change nothing but the file's times.)"""
    stat = SAMPLE_PATH.stat()
    link = tmp_path / "sample.json"
    link.symlink_to(SAMPLE_PATH)
    for out in (SAMPLE_PATH, link):
        _refused(["generate", str(out), "--preset", "sample", "--no-progress"], capsys,
                 f"generate: OUT {out} is the bundled sample's dataset",
                 "give OUT a path of its own")
    assert SAMPLE_PATH.stat().st_mtime_ns == stat.st_mtime_ns
    assert os.path.islink(link)
