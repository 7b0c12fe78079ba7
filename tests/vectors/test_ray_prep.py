"""``retrieval-eval prep --ray``: Ray Data prep on a local 2-CPU Ray (127.0.0.1 only) gives the
very vectors local prep gives, committed through the cache's atomic path; without Ray, one line.
"""

from __future__ import annotations

import builtins
import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.vectors import ray_prep
from pytest_retrieval_eval.vectors.cache import VectorCache
from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder
from tests.support.lme_factory import small_dataset
from tests.support.wrapped import unwrap

HAS_RAY = importlib.util.find_spec("ray") is not None


MERGE = ["cache", "merge", "--no-progress"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("data") / "data.json", 8, sessions=6,
                         shared=0)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A Ray of 2 CPUs on 127.0.0.1, started once for this module, stopped after it."""
    if not HAS_RAY:  # part of the [test] extra: a missing Ray fails, it never skips
        pytest.fail("ray[data] is in the [test] extra; pip install -e '.[test]'")
    import ray

    # Ray's socket paths must stay under 107 bytes: a short folder of its own, not tmp_path.
    temp = tempfile.mkdtemp(prefix="rre-ray-")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False, _temp_dir=temp)
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def vectors_of(cache: Path, model: Path) -> tuple[list[str], np.ndarray, int]:
    embedder = load_embedder(str(model), EmbedConfig())
    vc = VectorCache(cache, embedder.fingerprint, embedder.dim, embedder.info())
    keys = sorted(vc.keys())
    return keys, vc.get(keys), len(vc.own_shards())


def prep(dataset: Path, model: Path, cache: Path, *extra: str) -> list[str]:
    return ["prep", "--data", str(dataset), "--model", str(model), "--cache", str(cache),
            "--no-progress", *extra]


def test_ray_prep_is_bit_identical_to_local_prep_and_a_shard_embeds_its_slice(
        local_ray: Any, dataset: Path, tiny_model_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """One test for the two Ray preps, so that a run under pytest-xdist starts one local Ray
    (a module fixture is set up again on each worker that runs one of the module's tests)."""
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "local", "--chunk-size", "8")) == 0
    capsys.readouterr()
    code = cli.main(prep(dataset, tiny_model_dir, tmp_path / "ray", "--chunk-size", "8", "--ray"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "embedded now" in out
    local_keys, local_vectors, _ = vectors_of(tmp_path / "local", tiny_model_dir)
    ray_keys, ray_vectors, shards = vectors_of(tmp_path / "ray", tiny_model_dir)
    assert ray_keys == local_keys and len(local_keys) == 8 * 6 + 8
    assert ray_vectors.tobytes() == local_vectors.tobytes()  # bit for bit
    assert shards == -(-len(local_keys) // 8)  # one committed shard per chunk
    # Every shard committed by its sidecar; no temp file left behind.
    directory = next((tmp_path / "ray" / "vectors").iterdir())
    assert not [p for p in directory.iterdir() if p.name.startswith(".tmp-")]
    # A second Ray prep finds nothing missing and embeds nothing.
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "ray", "--ray")) == 0
    assert " 0 embedded now" in unwrap(capsys.readouterr().out)

    # With a shard, Ray embeds that slice: merged with a local prep of the other shard, the
    # keys are the whole local prep's (the one above; its chunk size changes no key).
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "a", "--ray", "--shard", "1/2")) == 0
    assert cli.main(prep(dataset, tiny_model_dir, tmp_path / "b", "--shard", "2/2")) == 0
    assert cli.main([*MERGE, str(tmp_path / "a"), str(tmp_path / "b"), "--into",
                     str(tmp_path / "merged")]) == 0
    capsys.readouterr()
    shard_keys = vectors_of(tmp_path / "a", tiny_model_dir)[0]
    assert 0 < len(shard_keys) < len(local_keys)
    assert vectors_of(tmp_path / "merged", tiny_model_dir)[0] == local_keys


def test_without_ray_it_is_one_line_naming_the_extra(
        dataset: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    real_import = builtins.__import__
    real_import_module = importlib.import_module

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray" or name.startswith("ray."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    def no_ray_module(name: str, package: str | None = None) -> Any:
        # importlib.import_module is the one every module calls: any other name gets the
        # real one, which returns the submodule (ijson picks its backend with it, and a
        # first import of ijson can happen under this patch)
        if name == "ray" or name.startswith("ray."):
            raise ImportError(f"No module named {name!r}")
        return real_import_module(name, package)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    monkeypatch.setattr(ray_prep.importlib, "import_module", no_ray_module)
    code = cli.main(prep(dataset, tiny_model_dir, tmp_path / "cache", "--ray"))
    err = capsys.readouterr().err
    assert code == 4  # a RetrievalEvalError; 2 is left to argparse
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("retrieval-eval: error: prep --ray needs Ray Data")
    assert lines[0].endswith("pip install 'ray[data]>=2.9' (the plugin's [ray] extra)")
    assert not (tmp_path / "cache" / "vectors").exists() or not any(
        p.name.startswith("shard-") for d in (tmp_path / "cache" / "vectors").iterdir()
        for p in d.iterdir())


def test_an_unreachable_cluster_is_one_line(
        dataset: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    class FakeRay:
        def is_initialized(self) -> bool:
            return False

        def init(self, **kwargs: Any) -> None:
            raise ConnectionError(f"could not connect to {kwargs['address']}\nretrying...")

    monkeypatch.setattr(ray_prep, "import_ray", lambda: (FakeRay(), object()))
    code = cli.main(prep(dataset, tiny_model_dir, tmp_path / "cache", "--ray", "10.9.9.9:6379"))
    err = capsys.readouterr().err
    assert code == 4 and err.count("\n") == 1, err
    assert err.startswith(
        "retrieval-eval: error: prep --ray: no Ray cluster at 10.9.9.9:6379 could be used "
        "(ConnectionError: could not connect to 10.9.9.9:6379 retrying...); check the address")
    # The corpus is built, no vector was committed: the next prep (any kind) embeds it all.
    assert not list((tmp_path / "cache").glob("vectors/*/shard-*"))
