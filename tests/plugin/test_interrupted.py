"""An interrupted run says so (issue 11, "Reliability II").

Ctrl-C used to leave a report that looked complete: the pairs that never ran were counted
as ``skipped.not_selected`` (the field for ``-k``/``-m``), and under ``-n 2`` the report held
no pair at all. Now the report has ``interrupted: true``, ``run.items_run`` of
``run.items_selected``, ``skipped.not_run`` (pairs selected but not run) apart from
``skipped.not_selected``, and the summary's first line says "interrupted after N of M items".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.processes import default_sigint
from tests.support.reliability_support import run_plugin, subprocess_env

STOP_AFTER = """
import os, signal
import pytest

_done = []

def pytest_runtest_teardown(item):
    _done.append(item.nodeid)
    if len(_done) == {after}:
        {how}
"""


def five(pytester: pytest.Pytester) -> Path:
    return write_dataset(pytester.path / "lme.json",
                         [make_instance(f"q{i}", n_sessions=3) for i in range(5)])


def run_apart(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The plugin in a child process: a signal sent to it must not reach this one."""
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--retrieval-eval", *args)


def run_interrupted(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The plugin in this process, where a KeyboardInterrupt raised in the run ends the run
    alone (pytester re-raises it here unless told not to)."""
    return pytester.runpytest("-p", "no:cacheprovider", "-W",
                              "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval",
                              *args, no_reraise_ctrlc=True)


def without_created(run: dict[str, Any]) -> dict[str, Any]:
    """The run's counts; its ``created`` stamp is checked to be a time and dropped, and so is
    ``git`` (the rootdir's checkout: none in pytester's folder, tests/plugin/test_report_git.py)."""
    from datetime import datetime

    assert datetime.fromisoformat(run["created"]).tzinfo is not None
    assert run["git"] is None or isinstance(run["git"], dict)
    return {k: v for k, v in run.items() if k not in ("created", "git")}


def report_of(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_ctrl_c_mid_run_is_reported_as_interrupted(pytester: pytest.Pytester,
                                                   isolated_cache: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # whole summary lines (test_fit_lines: the wrapping)
    data = five(pytester)
    pytester.makeconftest(STOP_AFTER.format(after=3, how="raise KeyboardInterrupt"))
    out = pytester.path / "r.json"
    result = run_interrupted(pytester, "--no-model", "--retrieval-eval-retriever", "bm25",
                             f"--retrieval-eval-data={data}", f"--retrieval-eval-json={out}")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    report = report_of(out)
    assert report["interrupted"] is True
    counts = without_created(report["run"])
    assert counts == {"interrupted": True, "items_run": 3, "items_selected": 5}
    assert len(report["pairs"]) == 3
    assert report["skipped"]["not_run"] == 2 and report["skipped"]["not_selected"] == 0
    result.stdout.fnmatch_lines([
        "interrupted after 3 of 5 items: the numbers below cover only what ran; run again "
        "for the rest",
        "pairs: 3 scored of 5 usable; skipped 0 abstention, 0 rejected, 0 not selected, "
        "2 not run",
    ])


def test_deselection_and_interruption_are_counted_apart(pytester: pytest.Pytester,
                                                         isolated_cache: Path) -> None:
    data = five(pytester)
    pytester.makeconftest(STOP_AFTER.format(after=2, how="raise KeyboardInterrupt"))
    out = pytester.path / "r.json"
    result = run_interrupted(pytester, "--no-model", "--retrieval-eval-retriever", "bm25",
                             f"--retrieval-eval-data={data}", f"--retrieval-eval-json={out}",
                             "-k", "not q4")
    report = report_of(out)
    counts = without_created(report["run"])
    assert counts == {"interrupted": True, "items_run": 2, "items_selected": 4}
    assert report["skipped"]["not_selected"] == 1 and report["skipped"]["not_run"] == 2
    result.stdout.fnmatch_lines(["interrupted after 2 of 4 items*"])


def test_a_complete_run_is_not_interrupted(pytester: pytest.Pytester,
                                           isolated_cache: Path) -> None:
    data = five(pytester)
    out = pytester.path / "r.json"
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever", "bm25",
                        f"--retrieval-eval-data={data}", f"--retrieval-eval-json={out}",
                        "-k", "not q4")
    assert result.ret == 0
    report = report_of(out)
    assert report["interrupted"] is False
    counts = without_created(report["run"])
    assert counts == {"interrupted": False, "items_run": 4, "items_selected": 4}
    assert report["skipped"]["not_selected"] == 1 and report["skipped"]["not_run"] == 0
    assert "interrupted after" not in result.stdout.str()


def test_a_stop_on_first_failure_is_reported_as_interrupted(pytester: pytest.Pytester,
                                                            isolated_cache: Path) -> None:
    data = five(pytester)
    pytester.makeconftest("""
import pytest

def pytest_runtest_setup(item):
    if item.parent.name == "q1":
        pytest.fail("boom")
""")
    out = pytester.path / "r.json"
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever", "bm25",
                        f"--retrieval-eval-data={data}", f"--retrieval-eval-json={out}", "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = report_of(out)
    assert report["interrupted"] is True
    assert report["run"]["items_run"] == 2 and report["run"]["items_selected"] == 5
    assert report["skipped"]["not_run"] == 3
    result.stdout.fnmatch_lines(["interrupted after 2 of 5 items*"])


def test_ctrl_c_under_xdist_keeps_what_the_workers_finished(pytester: pytest.Pytester,
                                                            isolated_cache: Path) -> None:
    """Ctrl-C reaches the whole process group (controller and workers), as a terminal's
    does: the report used to hold 0 pairs ("94 not selected") after 73 items had passed."""
    data = write_dataset(pytester.path / "lme.json",
                         [make_instance(f"q{i}", n_sessions=3) for i in range(12)])
    pytester.makeconftest(STOP_AFTER.format(
        after=3, how="os.killpg(os.getpgid(0), signal.SIGINT)"))
    out = pytester.path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         "--retrieval-eval", "--no-model", "--retrieval-eval-retriever", "bm25",
         f"--retrieval-eval-data={data}", f"--retrieval-eval-json={out}"],
        cwd=pytester.path, env=subprocess_env(RETRIEVAL_EVAL_CACHE_DIR=str(isolated_cache)),
        capture_output=True, text=True, timeout=300, start_new_session=True, check=False,
        preexec_fn=default_sigint)
    text = proc.stdout + proc.stderr
    report = report_of(out)
    assert report["interrupted"] is True, text
    # The first worker to finish its third item signals: at least two reports had reached
    # the controller by then (the workers never got to publish their output).
    assert len(report["pairs"]) >= 2, text
    assert report["run"]["items_run"] == len(report["pairs"]) + len(report["errors"])
    assert report["run"]["items_selected"] == 12
    assert report["skipped"]["not_run"] == 12 - report["run"]["items_run"]
    assert f"interrupted after {report['run']['items_run']} of 12 items" in proc.stdout, text


SIGTERM_AFTER = """
import os, signal
from pathlib import Path

_done = []

def pytest_runtest_teardown(item):
    _done.append(item.nodeid)
    if len(_done) == 2:
        children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text()
        Path("children.txt").write_text(children)
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # coreutils timeout sends it twice
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_sigterm_is_handled_as_ctrl_c(pytester: pytest.Pytester, isolated_cache: Path) -> None:
    """Issue 43.12: SIGTERM (timeout, a CI cancel, a container stop) used to end pytest at
    once: no summary line, no report, and the ``cmd:`` store (its own process group) lived
    on. Now it stops the run as Ctrl-C does."""
    from tests.support.processes import kill_left, wait_gone

    store = Path(__file__).resolve().parents[1] / "support" / "fake_store.py"
    pytester.makeconftest(SIGTERM_AFTER)
    out = pytester.path / "r.json"
    result = run_apart(pytester, "--no-model", "-p", "no:randomly",
                       f"--retrieval-eval-retriever=cmd:{sys.executable} {store} ok",
                       f"--retrieval-eval-json={out}")  # the bundled sample: 15 pairs
    children = [int(p) for p in (pytester.path / "children.txt").read_text().split()]
    try:
        assert children, "the cmd: store was not running"
        assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
        result.stdout.fnmatch_lines(["interrupted after 2 of 15 items*"])
        report = report_of(out)
        assert report["interrupted"] is True
        assert report["run"]["items_run"] == 2 and len(report["pairs"]) == 2
        assert all(wait_gone(pid) for pid in children)
    finally:
        kill_left(children)
