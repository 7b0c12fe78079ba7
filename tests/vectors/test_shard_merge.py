"""``retrieval-eval prep --shard I/N`` and ``retrieval-eval cache merge``: N slices embed every
missing text once, a merge verifies before it copies, and nothing is left half-written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.data.pairs import text_key
from pytest_retrieval_eval.errors import CacheError
from pytest_retrieval_eval.vectors.cache import VectorCache
from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder
from pytest_retrieval_eval.vectors.merge import merge_caches
from pytest_retrieval_eval.vectors.prep import shard_of
from tests.support.lme_factory import small_dataset
from tests.support.wrapped import unwrap

MERGE = ["cache", "merge", "--no-progress"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("data") / "data.json", 6)


def prep(dataset: Path, model: Path, cache: Path, *extra: str) -> list[str]:
    return ["prep", "--data", str(dataset), "--model", str(model), "--cache", str(cache),
            "--no-progress", *extra]


def cache_of(root: Path, model: Path) -> VectorCache:
    embedder = load_embedder(str(model), EmbedConfig())
    return VectorCache(root, embedder.fingerprint, embedder.dim, embedder.info())


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "vectors" in p.parts}


def test_shard_of_is_the_key_modulo_n() -> None:
    key = text_key("some session")
    assert shard_of(key, 1) == 1
    assert shard_of(key, 3) == int(key, 16) % 3 + 1  # the definition, for the docs' recipe
    keys = [text_key(f"text {i}") for i in range(3000)]
    counts = np.bincount([shard_of(k, 4) for k in keys], minlength=5)[1:]
    assert counts.sum() == 3000 and counts.min() > 600  # about a quarter each


def test_two_shards_merged_equal_one_unsharded_prep(
        dataset: Path, tiny_model_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "whole")) == 0
    whole_out = unwrap(capsys.readouterr().out)
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "s1", "--shard", "1/2")) == 0
    out1 = unwrap(capsys.readouterr().out)
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "s2", "--shard", "2/2")) == 0
    out2 = unwrap(capsys.readouterr().out)
    whole = cache_of(tmp_path / "whole", tiny_model_dir)
    one, two = cache_of(tmp_path / "s1", tiny_model_dir), cache_of(tmp_path / "s2", tiny_model_dir)
    keys = sorted(whole.keys())
    assert not set(one.keys()) & set(two.keys())
    assert sorted([*one.keys(), *two.keys()]) == keys
    first = one.keys()
    assert all(shard_of(k, 2) == 1 for k in first)
    assert f"shard 1/2: {len(two.keys())} missing texts left to the other slices" in out1
    assert "shard 2/2" in out2 and "shard" not in whole_out
    code = cli.main([*MERGE, str(tmp_path / "s1"), str(tmp_path / "s2"), "--into",
                     str(tmp_path / "merged")])
    out = unwrap(capsys.readouterr().out)
    assert code == 0
    assert out.startswith("merge: model tiny-model (fingerprint ")
    assert f"{len(keys)} vectors copied, 0 already present, from 2 verified shard(s)" in out
    merged = cache_of(tmp_path / "merged", tiny_model_dir)
    assert sorted(merged.keys()) == keys
    np.testing.assert_allclose(merged.get(keys), whole.get(keys), rtol=0, atol=1e-6)
    # Copied bit for bit from the slices.
    assert merged.get(sorted(one.keys())).tobytes() == one.get(sorted(one.keys())).tobytes()
    # A model-free run on the merged cache needs nothing more: prep finds nothing missing.
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "merged")) == 0
    assert " 0 embedded now" in unwrap(capsys.readouterr().out)
    # Merging again copies nothing.
    assert cli.main([*MERGE, str(tmp_path / "s1"), "--into",
                     str(tmp_path / "merged")]) == 0
    assert "0 vectors copied" in unwrap(capsys.readouterr().out)


def test_a_corrupt_source_is_one_line_and_nothing_is_written(
        dataset: Path, tiny_model_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "s1", "--shard", "1/2")) == 0
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "s2", "--shard", "2/2")) == 0
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "target", "--shard", "1/3")) == 0
    capsys.readouterr()
    shard = next((tmp_path / "s2" / "vectors").glob("*/shard-*.parquet"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    before = snapshot(tmp_path / "target")
    code = cli.main([*MERGE, str(tmp_path / "s1"), str(tmp_path / "s2"), "--into",
                     str(tmp_path / "target")])
    err = capsys.readouterr().err
    assert code == 4  # a RetrievalEvalError; 2 is left to argparse
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"retrieval-eval: error: vector cache shard {shard} is corrupt")
    assert snapshot(tmp_path / "target") == before  # s1 was fine, yet nothing was copied


def test_merge_refuses_other_models_and_non_caches(
        dataset: Path, tiny_model_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "src")) == 0
    # A manifest that names another fingerprint than its directory's.
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "src", bad)
    manifest = next((bad / "vectors").glob("*/manifest.json"))
    info = json.loads(manifest.read_text())
    info["fingerprint"] = "0" * 64
    manifest.write_text(json.dumps(info))
    with pytest.raises(CacheError, match="names fingerprint 000000000000, not its directory"):
        merge_caches([bad], tmp_path / "into")
    assert not (tmp_path / "into").exists()
    # The target holds the same fingerprint at another dimension.
    fp = manifest.parent.name
    other = tmp_path / "other"
    VectorCache(other, fp, 3, {"name": "x"}).add(["k"], np.ones((1, 3), dtype=np.float32))
    with pytest.raises(CacheError, match="dim 3"):
        merge_caches([tmp_path / "src"], other)
    # A folder that is no cache.
    (tmp_path / "empty").mkdir()
    code = cli.main([*MERGE, str(tmp_path / "empty"), "--into", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 4 and err.count("\n") == 1
    assert "holds no vectors/ folder, so it is not a prepared cache" in err


@pytest.mark.parametrize("value", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_bad_shard_spellings_are_usage_errors(value: str, dataset: Path, tiny_model_dir: Path,
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(prep(dataset, tiny_model_dir, tmp_path / "c", "--shard", value))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --shard" in err
    assert "I/N" in err or "1..N" in err


def _fake_cache(root: Path, fp: str, name: str, texts: list[str]) -> Path:
    cache = VectorCache(root, fp, 4, {"name": name})
    cache.add([text_key(t) for t in texts], np.ones((len(texts), 4), dtype=np.float32))
    [shard] = cache.own_shards()
    return shard


def test_merge_refuses_another_models_shard_copied_in(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23.4: merge checked only sidecars, so it passed such a shard on."""
    fp_a, fp_b = "a" * 64, "b" * 64
    _fake_cache(tmp_path / "src", fp_a, "model-a", ["a1"])
    foreign = _fake_cache(tmp_path / "other", fp_b, "model-b", ["b1"])
    copied = tmp_path / "src" / "vectors" / fp_a / foreign.name
    shutil.copy(foreign, copied)
    shutil.copy(f"{foreign}.sha256", f"{copied}.sha256")
    code = cli.main([*MERGE, str(tmp_path / "src"), "--into", str(tmp_path / "into")])
    err = capsys.readouterr().err
    assert code == 4 and err.count("\n") == 1
    assert f"vector cache shard {copied} holds vectors of model model-b" in err
    assert not (tmp_path / "into").exists()


def test_merge_into_itself_and_a_model_folder_without_manifest_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: 'the sources hold no model vectors' at exit 0, vectors silently left out."""
    shard = _fake_cache(tmp_path / "x", "a" * 64, "model-a", ["a1", "a2"])
    code = cli.main([*MERGE, str(tmp_path / "x"), "--into", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 4 and err.count("\n") == 1
    assert "and the target" in err and "are the same folder" in err
    (shard.parent / "manifest.json").unlink()
    code = cli.main([*MERGE, str(tmp_path / "x"), "--into", str(tmp_path / "into")])
    out, err = capsys.readouterr()
    assert code == 4 and err.count("\n") == 1 and "no model vectors" not in out
    assert f"{shard.parent} holds 1 shard(s) but no manifest.json" in err
    assert not (tmp_path / "into").exists()


@pytest.mark.parametrize("kind", ["fifo", "huge", "deep"])
def test_a_hostile_manifest_is_one_line_and_never_hangs(tmp_path: Path, kind: str) -> None:
    """Issue 23.6 (cache side): manifests are read as bounded regular files."""
    import os
    import signal

    shard = _fake_cache(tmp_path / "x", "a" * 64, "model-a", ["a1"])
    manifest = shard.parent / "manifest.json"
    manifest.unlink()
    if kind == "fifo":
        os.mkfifo(manifest)
    elif kind == "huge":
        manifest.write_text('{"pad": "' + "x" * 300_000 + '"}')
    else:
        manifest.write_text("[" * 100_000 + "]" * 100_000)
    signal.alarm(20)  # a blocking open fails the test instead of hanging the suite
    try:
        with pytest.raises(CacheError) as info:
            merge_caches([tmp_path / "x"], tmp_path / "into")
    finally:
        signal.alarm(0)
    line = str(info.value)
    assert "\n" not in line and str(manifest) in line
    assert {"fifo": "it is a FIFO", "huge": "more than the 262,144 bytes",
            "deep": "not a JSON object"}[kind] in line


def test_the_readme_merge_on_the_bundled_sample_makes_its_target_and_says_why_it_is_empty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """README "Scaling out": each slice's vectors are all served by the package's bundled
    sample, so c1 and c2 hold none; the merge still makes ``merged`` (a cache with the
    model's manifest) and says why nothing was copied, instead of a bare "0 copied"."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = "sentence-transformers/all-MiniLM-L6-v2"
    for i, cache in ((1, "c1"), (2, "c2")):
        assert cli.main(["prep", "--model", model, "--cache", cache, "--shard", f"{i}/2",
                         "--offline", "--no-progress"]) == 0
    capsys.readouterr()
    assert cli.main([*MERGE, "c1", "c2", "--into", "merged"]) == 0
    out = unwrap(capsys.readouterr().out).splitlines()
    assert out[0].startswith(f"merge: model {model} (fingerprint ")
    assert "0 vectors copied" in out[0]
    assert "bundled sample" in out[1]
    manifests = list((tmp_path / "merged" / "vectors").glob("*/manifest.json"))
    assert len(manifests) == 1
    assert json.loads(manifests[0].read_text())["name"] == model
