"""Messages that fit the terminal (issue 38, item 3), at 80 columns, with the four long errors
the issue names: the model lane's offline error, the --no-model cache error, the custom
fixture's error and a cmd: item's failure. Each line fits (a word, or a marked command, wider
than the room stays whole), the first still names the thing and what is wrong, the fix
command stands whole on a line of its own, and joined back the lines are the message."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.errors import fit_error
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.reliability_support import BGE, run_plugin

WIDTH = 80
FAKE = Path(__file__).resolve().parents[1] / "support" / "fake_store.py"


@pytest.fixture(autouse=True)
def eighty(isolated_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    return isolated_cache


def error_block(text: str, head: str = "ERROR: ") -> list[str]:
    """The lines of the one message starting with ``head``: it and its continuations."""
    lines = text.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith(head)]
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return block


def check_fitted(block: list[str], first: str, command: str | None) -> str:
    """Each line fits, or is one unsplittable word or the command; the first line starts as
    ``first``; ``command`` (between backticks) has a line of its own. The joined message."""
    assert len(block) > 1, block  # long enough to be cut at 80 columns
    assert block[0].startswith(first), block
    for line in block:
        assert len(line) <= WIDTH or len(line.split()) == 1 or "`" in line, block
    if command is not None:
        (own,) = [line for line in block if "`" in line]
        assert own.strip().startswith(f"`{command}"), block
    return " ".join([block[0], *(line[2:] for line in block[1:])])


def test_the_model_lanes_offline_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "lme.json", [make_instance("ok1")])
    result = run_plugin(pytester, "--retrieval-eval-data", str(data))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    block = error_block(result.stderr.str())
    message = check_fitted(block, f"ERROR: model '{BGE}': not in the local", None)
    assert "--retrieval-eval-model=DIR" in message


def test_the_model_lanes_hint_keeps_its_command_whole(pytester: pytest.Pytester) -> None:
    """On the bundled sample the lane's error ends in the --no-model command to run."""
    result = run_plugin(pytester, "--retrieval-eval-retriever=hybrid")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    block = error_block(result.stderr.str())
    message = check_fitted(block, "ERROR: model ", "pytest --retrieval-eval --no-model")
    assert message.endswith("`pytest --retrieval-eval --no-model`")


def test_the_no_model_cache_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "lme.json", [make_instance("ok1")])
    result = run_plugin(pytester, "--no-model", f"--retrieval-eval-data={data}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    block = error_block(result.stderr.str())
    message = check_fitted(block, "ERROR: --no-model: the cache at", "retrieval-eval prep")
    words = shlex.split(message.split("`")[1])  # the command, whole
    assert words[:4] == ["retrieval-eval", "prep", "--data", str(data)]


def test_the_custom_fixtures_error(pytester: pytest.Pytester) -> None:
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever=bm25,custom")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    block = error_block(result.stderr.str())
    message = check_fitted(block, "ERROR: retriever 'custom' needs a session fixture", None)
    assert message.endswith('(README, "Retrievers and your own store")')


def test_a_cmd_items_failure(pytester: pytest.Pytester) -> None:
    selector = f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} exit"
    result = run_plugin(pytester, "--no-model", f"--retrieval-eval-retriever={selector}",
                        "-p", "no:randomly", "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    failures = out.split("= FAILURES =", 1)[1].split("= retrieval-eval =", 1)[0]
    block = error_block(failures, head="cmd:")
    message = check_fitted(block, "cmd:", None)
    assert message.startswith(f"{selector}: command `")
    assert "exited with status 3 while answering rank of question" in message


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_fit_error_joins_back_and_keeps_the_command_whole(width: int) -> None:
    message = ("--no-model: the cache at /tmp/some/cache holds no vectors of any model for "
               "every session of dataset sample; run `retrieval-eval prep --data sample "
               "--cache /tmp/some/cache` first")
    lines = fit_error(message, width, prefix="ERROR: ").split("\n")
    assert " ".join([lines[0], *(line[2:] for line in lines[1:])]) == message
    assert "  `retrieval-eval prep --data sample --cache /tmp/some/cache`" in lines
    assert lines[0].startswith("--no-model: the cache at")
    assert len("ERROR: " + lines[0]) <= width
    assert all(len(line) <= width for line in lines if "`" not in line)


def test_a_message_that_fits_is_left_alone_and_quoting_is_no_command() -> None:
    assert fit_error("short; run `x y` first", 80) == "short; run `x y` first"
    quoted = "command `" + "a " * 30 + "` does not start (No such file); check the PATH"
    lines = fit_error(quoted, 40).split("\n")
    assert all(len(line) <= 40 for line in lines)  # cut at its spaces like text
