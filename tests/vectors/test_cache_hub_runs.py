"""``retrieval-eval cache push/pull`` and ``--retrieval-eval-cache-repo`` end to end, against
the local stand-in of the Hub (tests/support/hub_standin.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_retrieval_eval.cli import console as cli
from tests.support.hub_standin import HubStandIn, serve
from tests.support.lme_factory import small_dataset
from tests.support.model_factory import make_model_dir
from tests.support.reliability_support import joined_errors
from tests.support.wrapped import unwrap
from tests.vectors.test_cache_hub import REPO, tree

USAGE_ERROR = 4
PAIRS = 4


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    yield from serve(tmp_path, monkeypatch)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return small_dataset(tmp_path / "data.json", PAIRS)


@pytest.fixture
def published(hub: HubStandIn, tmp_path: Path, dataset: Path, tiny_model_dir: Path,
              capsys: pytest.CaptureFixture[str]) -> Path:
    """A prepped cache (tiny model) pushed to REPO with the CLI; its root."""
    source = tmp_path / "source-cache"
    assert cli.main(["prep", "--data", str(dataset), "--model", str(tiny_model_dir), "--cache",
                     str(source), "--no-progress"]) == 0
    assert cli.main(["cache", "push", "--repo", REPO, "--cache", str(source),
                     "--no-progress"]) == 0
    out = unwrap(capsys.readouterr().out).strip().splitlines()[-1]
    assert out.startswith("cache push: 4 files sent (") and f"dataset repo {REPO}" in out
    assert "model tiny-model" in out
    return source


def shards(root: Path) -> dict[str, bytes]:
    """The shards and sidecars (not the dense twins a run builds beside them: derived)."""
    return {k: v for k, v in tree(root / "vectors").items()
            if ".parquet" in k and "/dense/" not in k}


# --------------------------------------------------------------------------- the CLI


def test_cli_pull_then_nothing_more(published: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "copy"
    args = ["cache", "pull", "--repo", REPO, "--cache", str(target), "--no-progress"]
    assert cli.main(args) == 0
    out = unwrap(capsys.readouterr().out)
    assert out.startswith("cache pull: 1 shard fetched (") and "0 already here" in out
    assert out.count("\n") == 1
    assert tree(target / "vectors") == tree(published / "vectors")
    assert cli.main(args) == 0
    assert "cache pull: 0 shards fetched (0 B), 1 already here" in unwrap(capsys.readouterr().out)


def test_cli_errors_are_one_line_and_exit_4(hub: HubStandIn, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    code = cli.main(["cache", "pull", "--repo", "org/missing", "--cache", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == USAGE_ERROR and err.count("\n") == 0
    assert err.startswith("retrieval-eval: error: cache pull --repo org/missing: dataset repo")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = cli.main(["cache", "push", "--repo", REPO, "--cache", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == USAGE_ERROR and err.count("\n") == 0, err
    code = cli.main(["cache", "push", "--repo", REPO, "--include-corpus",
                     "--cache", str(tmp_path)])
    assert code == USAGE_ERROR and "needs --data" in capsys.readouterr().err


def test_cli_push_include_corpus(hub: HubStandIn, published: Path, dataset: Path,
                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cache", "push", "--repo", REPO, "--cache", str(published), "--data",
                     str(dataset), "--include-corpus", "--no-progress"]) == 0
    assert "2 files sent" in unwrap(capsys.readouterr().out)  # the corpus and its sidecar only
    target = tmp_path / "copy"
    assert cli.main(["cache", "pull", "--repo", REPO, "--cache", str(target),
                     "--include-corpus", "--no-progress"]) == 0
    assert tree(target / "corpus") == {k: v for k, v in tree(published / "corpus").items()
                                       if not k.endswith(".verified")} | {
        k: v for k, v in tree(target / "corpus").items() if k.endswith(".verified")}


# --------------------------------------------------------------------------- the plugin


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                              "-p", "no:cacheprovider", *args)


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "run-cache"
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(root))
    return root


def test_no_model_run_pulls_then_runs(published: Path, pytester: pytest.Pytester,
                                      dataset: Path, empty_cache: Path) -> None:
    base = ("--retrieval-eval", "--no-model", "--retrieval-eval-data", str(dataset))
    without = run(pytester, *base)
    assert without.ret == USAGE_ERROR  # nothing cached: the repo is what makes it work
    result = run(pytester, *base, "--retrieval-eval-cache-repo", REPO)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=PAIRS)
    result.stdout.fnmatch_lines(["lane: model-free  model: tiny-model*"])
    assert shards(empty_cache) == shards(published)


def test_ini_twin_and_a_complete_cache_needs_no_network(
        published: Path, pytester: pytest.Pytester, dataset: Path, empty_cache: Path,
        hub: HubStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(f"[pytest]\nretrieval_eval_cache_repo = {REPO}\n")
    # "=": a separate path argument would make pytest look for the ini file beside it.
    base = ("--retrieval-eval", "--no-model", f"--retrieval-eval-data={dataset}")
    assert run(pytester, *base).ret == 0
    calls = len(hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # everything is here now: no pull is tried
    again = run(pytester, *base)
    assert again.ret == 0 and len(hub.requests) == calls


def test_model_lane_pulls_before_it_would_embed(published: Path, pytester: pytest.Pytester,
                                                dataset: Path, tiny_model_dir: Path,
                                                empty_cache: Path) -> None:
    result = run(pytester, "--retrieval-eval", "--retrieval-eval-data", str(dataset),
                 "--retrieval-eval-model", str(tiny_model_dir), "--retrieval-eval-cache-repo", REPO)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=PAIRS)
    assert shards(empty_cache) == shards(published)  # pulled; prep embedded nothing


def test_a_repo_of_another_model_is_a_usage_error(published: Path, pytester: pytest.Pytester,
                                                  dataset: Path, tmp_path: Path,
                                                  empty_cache: Path) -> None:
    other = make_model_dir(tmp_path / "other", dim=8, seed=7).path
    result = run(pytester, "--retrieval-eval", "--retrieval-eval-data", str(dataset),
                 "--retrieval-eval-model", str(other), "--retrieval-eval-cache-repo", REPO)
    assert result.ret == USAGE_ERROR
    lines = [line for line in joined_errors(result.stderr.str()) if "ERROR" in line]
    assert len(lines) == 1 and "holds vectors of tiny-model" in lines[0], result.stderr.str()
    assert "--retrieval-eval-model=tiny-model" in lines[0]
    assert not list(empty_cache.glob("vectors/*/shard-*"))


@pytest.mark.parametrize(("repo", "needle"), [
    ("org/missing", "does not exist (HTTP 404"),
    ("no-slash", "not a Hub repo id; give ORG/NAME"),
])
def test_plugin_errors_are_usage_errors(hub: HubStandIn, pytester: pytest.Pytester,
                                        dataset: Path, empty_cache: Path, repo: str,
                                        needle: str) -> None:
    result = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-data",
                 str(dataset), "--retrieval-eval-cache-repo", repo)
    assert result.ret == USAGE_ERROR
    assert any(needle in line for line in joined_errors(result.stderr.str()))

