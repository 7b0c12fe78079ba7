"""A space-form path option must not silently move pytest's rootdir (rootdir_guard.py):
pytest picks the rootdir before it knows the plugin's options, so ``--retrieval-eval-cache
../cache`` reads ``../cache`` as a test path and misses the project's ini file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.rootdir_guard import (
    invocation_config_file,
    moved_rootdir_value,
)
from tests.support.processes import CHILD_ADDOPTS
from tests.support.reliability_support import joined_errors

FLAGS = ["--retrieval-eval-cache", "--retrieval-eval-json"]


def host(tmp_path: Path) -> Path:
    project = tmp_path / "host"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nretrieval_eval_retriever = bm25\n")
    (tmp_path / "cache").mkdir()
    return project


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTEST_ADDOPTS"] = CHILD_ADDOPTS
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "-q", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_space_form_value_outside_the_project_is_refused_with_the_equals_form(
        tmp_path: Path) -> None:
    project = host(tmp_path)
    moved = pytest_in(project, "--retrieval-eval", "--no-model", "--retrieval-eval-cache",
                      "../cache", "--co")
    assert moved.returncode == pytest.ExitCode.USAGE_ERROR, moved.stdout + moved.stderr
    lines = joined_errors(moved.stderr.strip())  # one message, cut to the terminal
    assert len(lines) == 1, moved.stderr
    assert lines[0].startswith("ERROR: --retrieval-eval-cache ../cache: pytest read "
                               "'../cache' as a test path")
    assert f"did not read {project / 'pytest.ini'}" in lines[0]
    assert lines[0].endswith("write --retrieval-eval-cache=../cache")
    fine = pytest_in(project, "--retrieval-eval", "--no-model", "--retrieval-eval-cache=../cache",
                     "--co")
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert "::bm25" in fine.stdout  # the project's ini was read


def test_what_counts_as_a_moving_value(tmp_path: Path) -> None:
    project = host(tmp_path)
    (project / "inside").mkdir()
    outside = str(tmp_path / "cache")
    assert moved_rootdir_value(["--retrieval-eval-cache", "../cache"], FLAGS, project) == (
        "--retrieval-eval-cache", "../cache")
    assert moved_rootdir_value(["--retrieval-eval-json", outside], FLAGS, project) == (
        "--retrieval-eval-json", outside)
    assert moved_rootdir_value(["--retrieval-eval-cache=../cache"], FLAGS, project) is None
    assert moved_rootdir_value(["--retrieval-eval-cache", "inside"], FLAGS, project) is None
    assert moved_rootdir_value(["--retrieval-eval-cache", "../absent"], FLAGS, project) is None
    assert moved_rootdir_value(["--retrieval-eval-k", "../cache"], FLAGS, project) is None
    for pin in (["--rootdir", "."], ["--rootdir=."], ["-c", "pytest.ini"], ["-cpytest.ini"]):
        assert moved_rootdir_value([*pin, "--retrieval-eval-cache", "../cache"], FLAGS,
                                   project) is None, pin
    assert invocation_config_file(project / "inside") == (project / "pytest.ini").resolve()
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    found = invocation_config_file(tmp_path / "plain")  # no [tool.pytest]: not a config
    assert found != (tmp_path / "plain" / "pyproject.toml").resolve()
