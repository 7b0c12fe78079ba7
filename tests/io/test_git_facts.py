"""The host project's commit and branch, read by running git (issue 38, item 5): the
values git itself prints for the same checkout, and None (never a failure) without git, out
of a checkout, before the first commit; a detached HEAD has no branch."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_retrieval_eval.io.git_facts import git_facts

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t",
                           "-c", "user.email=t@example.invalid", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def checkout(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q", "-b", "trunk")
    (folder / "a.txt").write_text("a\n")
    git(folder, "add", "a.txt")
    git(folder, "commit", "-q", "-m", "first")
    return folder


def test_a_checkout_gives_git_s_own_commit_date_and_branch(tmp_path: Path) -> None:
    repo = checkout(tmp_path / "repo")
    (repo / "sub").mkdir()
    facts = git_facts(repo / "sub")  # pytest's rootdir may be a folder inside the checkout
    assert facts == {"commit": git(repo, "rev-parse", "HEAD"),
                     "committed": git(repo, "show", "-s", "--format=%cI", "HEAD"),
                     "branch": "trunk"}


def test_a_detached_head_has_a_commit_and_no_branch(tmp_path: Path) -> None:
    repo = checkout(tmp_path / "repo")
    git(repo, "checkout", "-q", "--detach")
    facts = git_facts(repo)
    assert facts is not None and facts["branch"] is None
    assert facts["commit"] == git(repo, "rev-parse", "HEAD")


def test_no_checkout_no_commit_and_no_git_give_none(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no checkout above it
    assert git_facts(plain) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert git_facts(empty) is None  # a repository without a commit yet
    assert git_facts(tmp_path / "missing") is None
    repo = checkout(tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # git is not found
    assert git_facts(repo) is None


def test_a_git_that_hangs_is_given_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert git_facts(tmp_path, timeout=0.2) is None
