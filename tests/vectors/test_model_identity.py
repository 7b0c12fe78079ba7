"""A model's identity from its files, without loading it (issue 27): the hashes of a local
folder's or a cached Hub snapshot's files, the folder a cache's hash memo last saw them in,
and the model folders that lost their manifest."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pytest_retrieval_eval.errors import ModelError
from pytest_retrieval_eval.io import checksums
from pytest_retrieval_eval.io.checksums import memoised_paths, memoised_sha256, sha256_file
from pytest_retrieval_eval.vectors.cache import unlisted_folders
from pytest_retrieval_eval.vectors.model_files import files_here, folder_holding
from tests.support.model_factory import make_model_dir
from tests.support.reliability_support import BGE, fake_hf_cache


@pytest.fixture(autouse=True)
def fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checksums, "_memo", {})  # a new process: nothing hashed in memory


@pytest.fixture
def no_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building an onnxruntime session fails the test: identity never loads a model."""
    import onnxruntime

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)


def test_a_folders_files_are_hashed_not_loaded(tmp_path: Path, no_session: None) -> None:
    model = make_model_dir(tmp_path, name="model").path
    files = files_here(str(model), memo_dir=tmp_path / "memo")
    assert files is not None and files.name == "model"
    assert files.model_sha256 == sha256_file(model / "onnx" / "model.onnx")
    assert files.tokenizer_sha256 == sha256_file(model / "tokenizer.json")


def test_a_hub_id_is_its_local_snapshots_files_or_unknown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_session: None) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    assert files_here(BGE) is None  # not on this machine: only its name can identify it
    model = fake_hf_cache(tmp_path / "hf", tmp_path / "models")
    files = files_here(BGE)
    assert files is not None and files.name == BGE
    assert files.model_sha256 == sha256_file(model.path / "onnx" / "model.onnx")


def test_a_missing_folder_is_unknown_and_a_folder_that_is_no_model_is_one_line(
        tmp_path: Path) -> None:
    assert files_here(str(tmp_path / "gone" / "model")) is None
    broken = make_model_dir(tmp_path, name="broken").path
    (broken / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match=r"no tokenizer\.json"):
        files_here(str(broken))


@pytest.mark.parametrize("layout", ["onnx/model.onnx", "model.onnx"])
def test_the_folder_a_caches_memo_last_saw_a_models_files_in(tmp_path: Path,
                                                               layout: str) -> None:
    model = make_model_dir(tmp_path / "runs", name="model", layout=layout).path
    memo = tmp_path / "cache" / "sha256"
    files = files_here(str(model), memo_dir=memo)
    assert files is not None
    found = folder_holding("model", files.model_sha256, files.tokenizer_sha256, memo)
    assert found == model.resolve()
    assert folder_holding("other", files.model_sha256, files.tokenizer_sha256, memo) is None
    assert folder_holding("model", files.model_sha256, "0" * 64, memo) is None
    # The folder moved away: its memo records a version that no longer exists.
    shutil.move(model, tmp_path / "elsewhere")
    assert folder_holding("model", files.model_sha256, files.tokenizer_sha256, memo) is None


def test_memoised_paths_skip_a_file_changed_since(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"one")
    digest = memoised_sha256(path, memo_dir=tmp_path / "memo")
    assert memoised_paths(tmp_path / "memo", digest) == [path.resolve()]
    assert memoised_paths(tmp_path / "memo", "0" * 64) == []
    path.write_bytes(b"two")
    os.utime(path, ns=(1, 1))
    assert memoised_paths(tmp_path / "memo", digest) == []
    assert memoised_paths(tmp_path / "no-memo", digest) == []


def test_a_digest_known_in_process_is_recorded_in_each_caches_memo(tmp_path: Path) -> None:
    """Hashed for one cache, then asked for another: the second cache's memo records it too,
    so its messages can name where the file is."""
    path = tmp_path / "f.bin"
    path.write_bytes(b"data")
    digest = memoised_sha256(path, memo_dir=tmp_path / "a")
    assert memoised_paths(tmp_path / "b", digest) == []
    assert memoised_sha256(path, memo_dir=tmp_path / "b") == digest
    assert memoised_paths(tmp_path / "b", digest) == [path.resolve()]


def test_a_model_folder_without_its_manifest_is_listed_with_its_shards(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    from pytest_retrieval_eval.vectors.cache import VectorCache
    from pytest_retrieval_eval.vectors.embedding import load_embedder

    embedder = load_embedder(str(tiny_model_dir))
    cache = VectorCache(tmp_path, embedder.fingerprint, embedder.dim, embedder.info())
    cache.add(["k1", "k2"], embedder.embed(["hello", "world"]))
    cache.add(["k3"], embedder.embed(["thanks"]))
    directory = tmp_path / "vectors" / embedder.fingerprint
    assert unlisted_folders([tmp_path]) == []
    (directory / "manifest.json").unlink()
    assert unlisted_folders([tmp_path]) == [(directory, 2, "tiny-model")]


def test_cache_push_and_pull_tell_two_folders_of_one_name_apart(tmp_path: Path) -> None:
    """27.1 for the Hub sync: `cache push --model runs/v2/model` must not pick v1's vectors
    because both folders are named `model`; a folder is matched by its files' hashes."""
    from pytest_retrieval_eval.vectors import hub_sync
    from pytest_retrieval_eval.vectors.model_files import resolve_model
    from tests.support.model_factory import make_model_dir

    v1 = make_model_dir(tmp_path / "v1" / "model", dim=8).path
    v2 = make_model_dir(tmp_path / "v2" / "model", dim=16).path
    assert v1.name == v2.name
    files = resolve_model(str(v1), offline=True)
    info = {"name": v1.name, "fingerprint": "627066fc5224abcd",
            "model_sha256": files.model_sha256, "tokenizer_sha256": files.tokenizer_sha256}
    assert hub_sync._is_named(info, str(v1))
    assert not hub_sync._is_named(info, str(v2))  # same folder name, other files
    assert hub_sync._is_named(info, "627066fc")  # a fingerprint prefix still names it
    assert not hub_sync._is_named({"name": "other"}, str(v2))
