"""A model is what its files are; an option the user set is never overridden (issue 27,
"Reliability IV: models and recipes").

``--no-model`` serves cached vectors only of the model ``--retrieval-eval-model`` names by its
files (a local folder's, or the Hub id's snapshot in the local Hugging Face cache: hashed, never
loaded), and only of the recipe options (pooling, max length, query prefix) the user set on the
command line or in the ini file. Each refusal is one line naming what the cache holds and the
prep command that makes what was asked; the suggested command is run, and then the run scores.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.model_factory import make_model_dir
from tests.support.reliability_support import (
    BGE,
    SNAPSHOT,
    fake_hf_cache,
    joined_errors,
    no_traceback,
    run_plugin,
)
from tests.support.wrapped import unwrap

RETRIEVERS = ("--retrieval-eval-retriever", "semantic")


def instances() -> list[dict[str, Any]]:
    return [make_instance("ok1", question_type="single-session-user"),
            make_instance("ok2", question_type="temporal-reasoning", gold=(0, 2)),
            make_instance("ok3", question_type="multi-session", gold=(1,))]


INI = "[pytest]\nretrieval_eval_data = lme.json\n"


@pytest.fixture
def data(pytester: pytest.Pytester) -> Path:
    """The dataset, named by the run's ini file."""
    pytester.makeini(INI)
    return write_dataset(pytester.path / "lme.json", instances())


def prep(data: Path, model: Path | str, cache: Path, *extra: str) -> None:
    assert cli.main(["prep", "--data", str(data), "--model", str(model), "--cache", str(cache),
                     "--no-progress", "--offline", *extra]) == 0


def scored(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    """``--no-model ARGS``, exit 0: the JSON report's model."""
    out = pytester.path / "report.json"
    result = run_plugin(pytester, "--no-model", *RETRIEVERS, "--retrieval-eval-json", str(out),
                        *args)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    model: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))["model"]
    return model


def refused(pytester: pytest.Pytester, *args: str) -> str:
    """``--no-model ARGS``, a usage error: its one line."""
    result = run_plugin(pytester, "--no-model", *RETRIEVERS, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    no_traceback(result)
    (line,) = [x for x in joined_errors(result.stderr.str()) if x.startswith("ERROR: ")]
    return line


def run_suggested(line: str) -> None:
    """The prep command between the line's backticks, run as the user would."""
    words = shlex.split(line.split("`")[1])
    assert words[:2] == ["retrieval-eval", "prep"], line
    assert cli.main([*words[1:], "--no-progress", "--offline"]) == 0


def fingerprint(model: Path | str, **recipe: Any) -> str:
    return load_embedder(str(model), EmbedConfig(**recipe), offline=True).fingerprint


# --------------------------------------------------------------------------- 27.1 identity


def test_a_folder_of_the_same_name_with_other_files_is_refused_naming_both_fingerprints(
        pytester: pytest.Pytester, isolated_cache: Path, data: Path, tmp_path: Path) -> None:
    """The issue's case: prep runs/v1/model, then --retrieval-eval-model runs/v2/model scored
    v1's vectors at exit 0 (v2's recall@5 0.253 reported as 0.259)."""
    v1 = make_model_dir(tmp_path / "runs" / "v1", name="model", seed=0).path
    v2 = make_model_dir(tmp_path / "runs" / "v2", name="model", seed=1).path
    prep(data, v1, isolated_cache)
    line = refused(pytester, f"--retrieval-eval-model={v2}")
    assert f"the cached vectors of model model (fingerprint {fingerprint(v1)[:12]})" in line
    assert f"other files than folder {v2} holds (fingerprint {fingerprint(v2)[:12]})" in line
    assert f"--model {v2} " in line
    assert scored(pytester, f"--retrieval-eval-model={v1}")["fingerprint"] == fingerprint(v1)
    run_suggested(line)
    assert scored(pytester, f"--retrieval-eval-model={v2}")["fingerprint"] == fingerprint(v2)


def test_a_fine_tuned_copy_under_the_hub_models_folder_name_is_not_served_its_vectors(
        pytester: pytest.Pytester, isolated_cache: Path, data: Path, tmp_path: Path) -> None:
    base = make_model_dir(tmp_path / "hub", name="bge-small-en-v1.5", seed=0).path
    tuned = make_model_dir(tmp_path / "tuned", name="bge-small-en-v1.5", seed=2).path
    prep(data, base, isolated_cache)
    line = refused(pytester, f"--retrieval-eval-model={tuned}")
    assert fingerprint(base)[:12] in line and fingerprint(tuned)[:12] in line


def test_a_moved_folder_with_the_same_files_is_served_the_same_vectors(
        pytester: pytest.Pytester, isolated_cache: Path, data: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Content, not the folder's name, identifies a local model; its files are hashed, the
    model is never loaded."""
    import onnxruntime

    v1 = make_model_dir(tmp_path / "runs" / "v1", name="model").path
    prep(data, v1, isolated_cache)
    expected = fingerprint(v1)
    moved = shutil.copytree(v1, tmp_path / "kept" / "final-model")
    monkeypatch.setattr(onnxruntime, "InferenceSession", None)  # any load would fail
    assert scored(pytester, f"--retrieval-eval-model={moved}")["fingerprint"] == expected


def test_a_hub_model_whose_cached_snapshot_changed_is_refused(
        pytester: pytest.Pytester, isolated_cache: Path, data: Path, tmp_path: Path) -> None:
    hf_home = tmp_path / "hf-empty"  # isolated_cache's HF_HOME
    fake_hf_cache(hf_home, tmp_path / "models")
    prep(data, BGE, isolated_cache)
    before = fingerprint(BGE)
    assert scored(pytester, f"--retrieval-eval-model={BGE}")["fingerprint"] == before
    # The Hub's main moves to a new snapshot with other weights.
    newer = make_model_dir(tmp_path / "models2", dim=384, name="newer", seed=3).path
    repo = hf_home / "hub" / "models--BAAI--bge-small-en-v1.5"
    commit = "f" * 40
    shutil.copytree(newer, repo / "snapshots" / commit)
    (repo / "refs" / "main").write_text(commit, encoding="ascii")
    after = fingerprint(BGE)
    assert after != before
    line = refused(pytester, f"--retrieval-eval-model={BGE}")
    assert (f"the cached vectors of model {BGE} (fingerprint {before[:12]}) were made from "
            f"other files than the local Hugging Face cache's snapshot of {BGE} holds "
            f"(fingerprint {after[:12]})") in line
    assert f"--model {BGE} " in line
    # Not on this machine at all: only its name can identify it (as before).
    shutil.rmtree(hf_home / "hub")
    assert scored(pytester, f"--retrieval-eval-model={BGE}")["fingerprint"] == before
    assert SNAPSHOT  # the first snapshot's commit, from the support module


# --------------------------------------------------------------------------- 27.2 recipes


@pytest.mark.parametrize(("prep_flags", "run_flag", "run_value", "held"), [
    (("--pooling", "cls"), "--retrieval-eval-pooling", "mean", "pooling cls"),
    (("--max-length", "16"), "--retrieval-eval-max-length", "512", "max length 16"),
    (("--query-prefix", "query: "), "--retrieval-eval-query-prefix", "", "query prefix 'query: '"),
])
def test_a_recipe_option_set_on_the_command_line_is_never_overridden(
        pytester: pytest.Pytester, isolated_cache: Path, data: Path, tiny_model_dir: Path,
        prep_flags: tuple[str, str], run_flag: str, run_value: str, held: str) -> None:
    """The issue's case: prep --pooling cls, run --retrieval-eval-pooling mean scored the cls
    vectors and the JSON said "pooling": "cls"."""
    prep(data, tiny_model_dir, isolated_cache, *prep_flags)
    option = prep_flags[0].removeprefix("--").replace("-", "_")
    # Not set: the one cached recipe, as before.
    assert str(scored(pytester)[option]) == prep_flags[1]
    line = refused(pytester, f"{run_flag}={run_value}")
    assert held in line and f"{run_flag} {shlex.quote(run_value)} as asked" in line
    assert prep_flags[0] not in line.split("`")[1]  # the asked value is prep's default
    run_suggested(line)
    assert str(scored(pytester, f"{run_flag}={run_value}")[option]) == run_value


def test_a_recipe_option_set_in_the_ini_file_is_never_overridden(
        pytester: pytest.Pytester, isolated_cache: Path, data: Path,
        tiny_model_dir: Path) -> None:
    prep(data, tiny_model_dir, isolated_cache)  # mean
    pytester.makeini(INI + "retrieval_eval_pooling = cls\n")
    line = refused(pytester)
    assert "pooling mean" in line and "--retrieval-eval-pooling cls as asked" in line
    assert f"--model {tiny_model_dir} " in line and " --pooling cls" in line
    run_suggested(line)
    assert scored(pytester)["pooling"] == "cls"


def test_an_a_b_of_mean_against_cls_compares_mean_with_cls(
        pytester: pytest.Pytester, isolated_cache: Path, data: Path,
        tiny_model_dir: Path) -> None:
    prep(data, tiny_model_dir, isolated_cache)
    prep(data, tiny_model_dir, isolated_cache, "--pooling", "cls")
    mean = scored(pytester, "--retrieval-eval-pooling=mean")
    cls = scored(pytester, "--retrieval-eval-pooling=cls")
    assert (mean["pooling"], cls["pooling"]) == ("mean", "cls")
    assert mean["fingerprint"] == fingerprint(tiny_model_dir)
    assert cls["fingerprint"] == fingerprint(tiny_model_dir, pooling="cls")
    # Named model, an option unset: the default recipe is preferred, as before.
    assert scored(pytester, f"--retrieval-eval-model={tiny_model_dir}")["pooling"] == "mean"


# --------------------------------------------------------------------------- 27.13 messages


def test_a_missing_manifest_is_named_not_no_vectors_of_any_model(
        pytester: pytest.Pytester, isolated_cache: Path, data: Path, tiny_model_dir: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    prep(data, tiny_model_dir, isolated_cache)
    (manifest,) = isolated_cache.glob("vectors/*/manifest.json")
    manifest.unlink()
    line = refused(pytester)
    assert "any model" not in line
    assert (f"vector cache folder {manifest.parent} holds 1 shard(s) of model tiny-model but "
            f"no manifest.json") in line
    assert f"delete {manifest.parent} and run `" in line
    capsys.readouterr()
    assert cli.main(["models", "--cache", str(isolated_cache), "--no-bundled"]) == 0
    out = unwrap(capsys.readouterr().out)
    assert out.startswith(f"{manifest.parent}: 1 shard(s) of model tiny-model but no "
                          "manifest.json, so its vectors are never used")
    shutil.rmtree(manifest.parent)
    line = refused(pytester, f"--retrieval-eval-model={tiny_model_dir}")
    assert "holds no vectors of model" in line
    run_suggested(line)
    assert scored(pytester)["name"] == "tiny-model"
