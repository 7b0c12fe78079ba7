"""A new user's first hour (issue 48, items 1 to 4): the README's set-up commands chain in
one shell, the pairs run at the plugin's own root without the test extra, ``-n 2`` of the
everyday block is installed by set-up 1, and the headline's ``next:`` is not printed again by
running it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
from tests.support.processes import CHILD_ADDOPTS
from tests.test_readme import NETWORK, README, ROOT, SHELL, TEST_COMMAND

#: ``python3 -m venv DIR`` as a stand-in: DIR/bin/pip and DIR/bin/pytest that do nothing but
#: say where they ran, and DIR/bin/activate (the commands' chaining is what is tested).
FAKE_PYTHON = """#!/bin/sh
[ "$1 $2" = "-m venv" ] || exit 2
mkdir -p "$3/bin"
for tool in pip pytest; do
  printf '#!/bin/sh\\necho "%s in $(pwd)"\\n' "$tool" > "$3/bin/$tool"
  chmod +x "$3/bin/$tool"
done
echo 'PATH="$(pwd)/.venv/bin:$PATH"' > "$3/bin/activate"
"""


def _setup_commands() -> list[str]:
    return [c for b in SHELL if b.mark == NETWORK for c in b.commands
            if c.startswith("python3 -m venv")]


def test_the_two_set_ups_chain_in_one_shell_and_leave_you_at_the_root(tmp_path: Path) -> None:
    """Set-up 1 then set-up 2, as typed into one shell: one ``.venv``, at the root (not a
    second one in examples/vipune); the main job ran in examples/vipune."""
    setups = _setup_commands()
    assert len(setups) == 2 and setups[1] == TEST_COMMAND, setups
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(FAKE_PYTHON, encoding="utf-8")
    (bin_dir / "python3").chmod(0o755)
    clone = tmp_path / "clone"
    (clone / "examples" / "vipune").mkdir(parents=True)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    script = " && ".join([*setups, "pwd"])
    done = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == str(clone), lines  # where the everyday block starts
    assert f"pytest in {clone / 'examples' / 'vipune'}" in lines  # the main job
    assert f"pytest in {clone}" in lines  # the tests
    assert not (clone / "examples" / "vipune" / ".venv").exists()
    text = README.read_text(encoding="utf-8")
    everyday = text.split("## Everyday use", 1)[1]
    assert "From the clone's root, `. .venv/bin/activate`" in everyday.split("```", 1)[0]


def test_set_up_1_installs_pytest_xdist_for_the_everyday_n_2() -> None:
    """The everyday block's ``-n 2`` needs pytest-xdist: set-up 1 installs the extra that
    holds it (two small wheels)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = project["optional-dependencies"]["xdist"]
    assert [d.split(">")[0] for d in extra] == ["pytest-xdist"]
    assert ".venv/bin/pip install '.[xdist]' &&" in _setup_commands()[0]
    everyday = README.read_text(encoding="utf-8").split("## Everyday use", 1)[1]
    assert "pytest --retrieval-eval --no-model -n 2" in everyday


def test_the_pairs_run_at_the_plugins_root_without_the_test_extra(tmp_path: Path) -> None:
    """``pytest --retrieval-eval --no-model retrieval-eval`` at the plugin's root, in a venv
    without ``onnx`` (the test extra's): the pairs run, tests/conftest.py loads without it."""
    blocked = tmp_path / "blocked" / "onnx"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'onnx'\", name='onnx')\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "HF_", "RETRIEVAL_EVAL_"))}
    env.update(PYTHONPATH=f"{blocked.parent}{os.pathsep}{ROOT}", HF_HUB_OFFLINE="1",
               PYTEST_ADDOPTS=CHILD_ADDOPTS,
               HF_HOME=str(tmp_path / "hf"), RETRIEVAL_EVAL_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "pytest", "--retrieval-eval", "--no-model",
                           "retrieval-eval", "-p", "no:cacheprovider", "-n", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "15 passed" in output.splitlines()[-1], output[-3000:]
    assert "onnx" not in output


def test_running_the_next_command_does_not_print_it_again(pytester: pytest.Pytester,
                                                           isolated_cache: Path) -> None:
    """Issue 48, item 2: the headline's ``next:`` run as printed shows that item's
    explanation, and no ``next:`` naming it again."""
    first = pytester.runpytest_inprocess("--retrieval-eval", "--no-model",
                                         "-p", "no:randomly")
    line = next(x for x in first.outlines if x.startswith("next: "))
    argv = shlex.split(line.removeprefix("next: "))
    assert argv[0] == "pytest" and "-v" in argv, line
    again = pytester.runpytest_inprocess(*argv[1:], "-p", "no:randomly")
    assert again.ret == 0
    assert any(x.startswith("explain ") for x in again.outlines), again.outlines
    assert not any(x.startswith("next:") for x in again.outlines), again.outlines


def test_the_readme_defines_its_words_before_it_uses_them() -> None:
    """Issue 48, item 6: pair, persona, lane and model-free are defined where they first
    appear (model-free beside a MiniLM header too); the code's own word "wings" is not
    used."""
    text = README.read_text(encoding="utf-8")
    definitions = text.index("Words used below:")
    for word in ("pair", "persona", "lane", "model-free"):
        first = re.search(rf"\b{word}", text, flags=re.IGNORECASE)
        assert first is not None and first.start() > definitions, word
        assert f"**{word}**" in text.lower() or f"*{word}s*" in text.lower(), word
    assert "MiniLM" in text[definitions:definitions + 500]
    assert not re.search(r"\bwings?\b", text, flags=re.IGNORECASE)
