"""The JSON report records the host project's git commit and branch (issue 38, item 5), read
by running git in pytest's rootdir; a rootdir that is no checkout records ``null`` and the
run goes on."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.plugin_runs import run_with_report

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(pytester: pytest.Pytester, *args: str) -> str:
    return subprocess.run(["git", "-C", str(pytester.path), "-c", "user.name=t",
                           "-c", "user.email=t@example.invalid", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_a_checkout_s_commit_and_branch_are_in_the_report(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    _git(pytester, "init", "-q", "-b", "feature/x")
    _git(pytester, "add", "-A")
    _git(pytester, "commit", "-q", "-m", "one")
    _, report = run_with_report(pytester, "-k", "temporal-reasoning")
    assert report["run"]["git"] == {
        "commit": _git(pytester, "rev-parse", "HEAD"),
        "committed": _git(pytester, "show", "-s", "--format=%cI", "HEAD"),
        "branch": "feature/x"}


def test_no_checkout_records_null(pytester: pytest.Pytester,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(pytester.path.parent))
    _, report = run_with_report(pytester, "-k", "temporal-reasoning")
    assert report["run"]["git"] is None
    assert report["run"]["created"]
