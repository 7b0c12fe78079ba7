"""The ``retrieval-eval`` console script: prep summary, one-line errors, exit codes, resume."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.data.dataset import DatasetSource
from pytest_retrieval_eval.data.ingest import load_corpus
from pytest_retrieval_eval.vectors import prep as prep_mod
from pytest_retrieval_eval.vectors.cache import VectorCache
from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder
from pytest_retrieval_eval.vectors.prep import WAIT_LABEL, PrepInterrupted, query_key
from tests.support import ROOT
from tests.support.lme_factory import make_instance, small_dataset, write_dataset
from tests.support.processes import default_sigint
from tests.support.wrapped import unwrap

pytest_plugins = ["pytester"]

SUMMARY = re.compile(
    r"^prep: (\d+) slots, (\d+) unique texts, (\d+) embedded now, (\d+) from cache, "
    r"\d+\.\ds \(model tiny-model, fingerprint [0-9a-f]{12}"
    r"(?:; not loaded: every vector needed was "
    r"cached)?\)$"
)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return small_dataset(tmp_path / "data.json", 4)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The command's exit status, stdout (its lines whole again, whatever the terminal's
    width cut them into: tests/cli/test_widths.py checks the cutting) and stderr."""
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, unwrap(captured.out), captured.err


def prep_args(dataset: Path, model: Path, cache: Path, *extra: str) -> list[str]:
    return ["prep", "--data", str(dataset), "--model", str(model), "--cache", str(cache),
            *extra]


def assert_error_line(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("retrieval-eval: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- prep


def test_prep_summary_line_then_cached(
    dataset: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    code, out, err = run(prep_args(dataset, tiny_model_dir, cache, "--no-progress"), capsys)
    assert code == 0, err
    match = SUMMARY.match(out.strip())
    assert match and out.count("\n") == 1, out
    slots, unique, now, cached = map(int, match.groups())
    # q0 and q1 share their sessions and their question.
    assert (slots, unique, now, cached) == (20, 15 + 3, 18, 0)
    assert err == ""

    code, out, _ = run(prep_args(dataset, tiny_model_dir, cache, "--no-progress"), capsys)
    assert code == 0
    match = SUMMARY.match(out.strip())
    assert match and match.groups()[2:] == ("0", "18")


def test_prep_of_turns_embeds_each_distinct_turn_text_once(
    dataset: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_retrieval_eval.data.protocol import View

    cache = tmp_path / "cache"
    code, out, err = run(prep_args(dataset, tiny_model_dir, cache, "--no-progress",
                                   "--granularity", "turn"), capsys)
    assert code == 0, err
    match = SUMMARY.match(out.strip())
    assert match, out
    slots, unique, now, cached = map(int, match.groups())
    corpus = load_corpus(DatasetSource("data", dataset), cache, view=View("vipune", "turn"))
    turn_keys = {k for p in corpus.pairs for k in p.text_keys}
    questions = {query_key(p.question, "") for p in corpus.pairs}
    # q0 and q1 share sessions: their turns are stored once, embedded once.
    assert slots == sum(len(p.text_keys) for p in corpus.pairs) > len(turn_keys)
    assert (unique, now, cached) == (len(turn_keys | questions),) * 2 + (0,)
    assert all("_" in sid for p in corpus.pairs for sid in p.session_ids)


def test_prep_vectors_match_the_model(
    dataset: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    argv = prep_args(dataset, tiny_model_dir, cache, "--no-progress", "--pooling", "cls",
                     "--max-length", "64", "--query-prefix", "q: ", "--batch-size", "3",
                     "--threads", "1")
    assert run(argv, capsys)[0] == 0
    embedder = load_embedder(str(tiny_model_dir), EmbedConfig(pooling="cls", max_length=64,
                                                         query_prefix="q: "))
    corpus = load_corpus(DatasetSource("data", dataset), cache)
    vectors = VectorCache(cache, embedder.fingerprint, embedder.dim, embedder.info())
    for pair in corpus.pairs:
        np.testing.assert_allclose(vectors.get(list(pair.text_keys)),
                                   embedder.embed(corpus.texts(pair.text_keys)), atol=1e-6)
        np.testing.assert_allclose(vectors.get([query_key(pair.question, "q: ")])[0],
                                   embedder.embed_query(pair.question), atol=1e-6)
    manifest = json.loads((vectors.directory / "manifest.json").read_text())
    assert manifest["pooling"] == "cls" and manifest["query_prefix"] == "q: "


def test_progress_bar_on_stderr(
    dataset: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli.ProgressBar, "GRACE", 0.0)  # these steps end within a second
    code, out, err = run(prep_args(dataset, tiny_model_dir, tmp_path / "c"), capsys)
    assert code == 0 and SUMMARY.match(out.strip())
    assert "embed [" in err and "18/18" in err and "ETA" in err


def test_progress_bar_render() -> None:
    stream = io.StringIO()
    bar = cli.ProgressBar(stream, width=10)
    bar.GRACE = 0.0  # drawn from the start
    assert bar.render("embed", 5, 10, 2.0, 5) == "embed [#####.....] 5/10 2.5/s ETA 00:02"
    assert bar.render("embed", 0, 0, 0.0, 0) == "embed [##########] 0/0 0.0/s ETA --:--"
    assert bar.render("read", 7, None, 3.0, 6).startswith("read 7 2.0/s")
    assert bar.render(WAIT_LABEL, 0, None, 7.0, 0) == WAIT_LABEL  # nothing counted: label
    bar("embed", 0, 3)
    bar("embed", 3, 3)
    bar("embed", 3, 3)  # the same state is not drawn twice
    bar.finish()
    assert stream.getvalue().splitlines()[-1].startswith("embed [")
    assert len(stream.getvalue().splitlines()) == 2


# --------------------------------------------------------------------------- errors


def test_missing_model_is_one_line(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(prep_args(dataset, tmp_path / "no-model-here", tmp_path / "c",
                                   "--offline", "--no-progress"), capsys)
    assert code == cli.EXIT_ERROR == 4 and out == ""
    line = assert_error_line(err)
    # prep's advice names prep's own flag, never the pytest option (issue 10).
    assert "pass --model=DIR" in line and "--retrieval-eval-" not in line, line


def test_advice_names_the_flag_of_the_command_in_use() -> None:
    assert cli.for_cli("check --retrieval-eval-data-repo, or pass --retrieval-eval-model=DIR "
                       "(or --retrieval-eval-cache=DIR); --retrieval-eval-json stays") == (
        "check --data-repo, or pass --model=DIR (or --cache=DIR); --retrieval-eval-json stays")
    assert cli.for_cli("--retrieval-eval-max-length 9") == "--max-length 9"


def test_missing_dataset_is_one_line(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(prep_args(tmp_path / "nope.json", tiny_model_dir, tmp_path / "c"), capsys)
    assert code == cli.EXIT_ERROR == 4
    assert_error_line(err, "nope.json")


def test_cli_and_pytest_exit_alike_on_the_same_fault(
    tiny_model_dir: Path, tmp_path: Path, pytester: pytest.Pytester,
    capsys: pytest.CaptureFixture[str]
) -> None:
    # One rule (docs/errors.md): a RetrievalEvalError exits 4 in `retrieval-eval` as the
    # plugin's usage error does in `pytest --retrieval-eval`; 2 is argparse's alone.
    missing, cache = tmp_path / "nope.json", tmp_path / "c"
    code, _, err = run(prep_args(missing, tiny_model_dir, cache), capsys)
    assert_error_line(err, "nope.json")
    result = pytester.runpytest("-p", "no:cacheprovider", "--retrieval-eval",
                                "--retrieval-eval-data", str(missing), "--retrieval-eval-model",
                                str(tiny_model_dir), "--retrieval-eval-cache", str(cache))
    assert "nope.json" in result.stderr.str()
    assert code == result.ret == pytest.ExitCode.USAGE_ERROR == 4


def test_other_models_cache_is_one_line(
    dataset: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    assert run(prep_args(dataset, tiny_model_dir, cache, "--no-progress"), capsys)[0] == 0
    (manifest,) = (cache / "vectors").glob("*/manifest.json")
    data = json.loads(manifest.read_text())
    data["dim"] = 999
    manifest.write_text(json.dumps(data))
    code, _, err = run(prep_args(dataset, tiny_model_dir, cache, "--no-progress"), capsys)
    assert code == cli.EXIT_ERROR == 4
    assert_error_line(err, str(manifest.parent), "dim 999")


def test_corrupt_shard_warned_and_repaired(
    dataset: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    assert run(prep_args(dataset, tiny_model_dir, cache, "--no-progress"), capsys)[0] == 0
    (shard,) = (cache / "vectors").glob("*/shard-*.parquet")
    shard.write_bytes(shard.read_bytes()[:-1])
    code, out, err = run(prep_args(dataset, tiny_model_dir, cache, "--no-progress"), capsys)
    assert code == 0
    assert err.startswith("retrieval-eval: warning: ") and str(shard) in err
    assert err.count("\n") == 1
    match = SUMMARY.match(out.strip())
    assert match and match.groups()[2:] == ("18", "0")


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--batch-size", "0", "must be at least 1"), ("--max-length", "9999", "2..512"),
     ("--pooling", "max", "not one of"), ("--device", "tpu", "not one of"),
     ("--threads", "x", "not a whole number")],
)
def test_bad_option_values(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["prep", flag, value])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_ctrl_c_reports_saved_vectors(
    dataset: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise PrepInterrupted(7, 3)

    monkeypatch.setattr(prep_mod, "run_prep", interrupted)
    code, out, err = run(prep_args(dataset, tiny_model_dir, tmp_path / "c", "--no-progress"),
                         capsys)
    assert code == cli.EXIT_INTERRUPTED == 130 and out == ""
    assert err == ("retrieval-eval: interrupted; 7 vectors saved, run the same command to "
                   "resume\n")


# --------------------------------------------------------------------------- models


def test_models_lists_cache(
    dataset: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    code, out, _ = run(["models", "--cache", str(cache), "--no-bundled"], capsys)
    assert code == 0 and out.startswith("no model vectors in")
    assert run(prep_args(dataset, tiny_model_dir, cache, "--no-progress"), capsys)[0] == 0
    code, out, _ = run(["models", "--cache", str(cache), "--no-bundled"], capsys)
    assert code == 0
    (line,) = out.strip().splitlines()  # one entry (its fields joined by one space or two)
    assert re.match(r"^tiny-model +fingerprint [0-9a-f]{12} +dim 8 +18 vectors +pooling mean",
                    line)
    assert str(cache) in line


# --------------------------------------------------------------------------- real signals


def _start_prep(dataset: Path, model: Path, cache: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_retrieval_eval.cli",
         *prep_args(dataset, model, cache, "--chunk-size", "2", "--no-progress")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=default_sigint,
    )


def _wait_for_shards(cache: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(cache.glob("vectors/*/shard-*.parquet.sha256"))) >= count:
            return
        time.sleep(0.005)
    raise AssertionError("prep finished or stalled before it could be interrupted")


def test_sigint_then_sigkill_then_resume(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    instances = [make_instance(f"q{i}", n_sessions=15) for i in range(12)]
    dataset = write_dataset(tmp_path / "big.json", instances)
    cache = tmp_path / "cache"
    total = 12 * 15 + 12

    proc = _start_prep(dataset, tiny_model_dir, cache)
    _wait_for_shards(cache, 3, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    match = re.fullmatch(r"retrieval-eval: interrupted; (\d+) vectors saved, run the same "
                         r"command to resume\n", err)
    assert match, err
    saved = int(match.group(1))
    assert 6 <= saved < total and out == ""

    proc = _start_prep(dataset, tiny_model_dir, cache)
    _wait_for_shards(cache, saved // 2 + 3, proc)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    code, out, err = run(prep_args(dataset, tiny_model_dir, cache, "--no-progress"), capsys)
    assert code == 0, err
    match = SUMMARY.match(out.strip())
    assert match
    _, unique, now, cached = map(int, match.groups())
    assert unique == total and cached >= saved + 6 and now == total - cached

    embedder = load_embedder(str(tiny_model_dir), EmbedConfig())
    corpus = load_corpus(DatasetSource("big", dataset), cache)
    vectors = VectorCache(cache, embedder.fingerprint, embedder.dim, embedder.info())
    keys = corpus.all_text_keys()
    np.testing.assert_allclose(vectors.get(keys), embedder.embed(corpus.texts(keys)), atol=1e-6)
    leftovers = [p for p in cache.glob("vectors/*/.tmp-*")]
    assert leftovers == []


def test_bad_argument_is_one_line_without_the_usage_banner(
    capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["prep", "--batch-size", "0"])
    assert exit_info.value.code == cli.EXIT_USAGE == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["retrieval-eval prep: error: argument --batch-size: 0 must be "
                                "at least 1; see retrieval-eval prep --help"], err


@pytest.mark.parametrize(("args", "argument"), [
    (["generate", ""], "OUT.json"), (["compare", "a.json", "--json", ""], "--json"),
    (["explain", "", "q1"], "REPORT.json"), (["plot", "a.json", "-o", " "], "-o/--output"),
])
def test_an_empty_file_path_is_one_usage_line(args: list[str], argument: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27.13: ``Path("")`` is the working folder; an empty path is refused instead."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"retrieval-eval {args[0]}: error: argument {argument}: the path is empty; give a file "
        f"path; see retrieval-eval {args[0]} --help\n")


def test_help_opens_on_the_whole_tool_and_lists_every_command(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    description = out.split("positional arguments:")[0]
    assert "Prep phase" not in description
    assert "COMMAND --help" in description
    for command in ("prep", "models", "cache", "compare", "plot", "markdown", "explain",
                    "export", "generate"):
        assert re.search(rf"^    {command}\s", out, re.M), command
