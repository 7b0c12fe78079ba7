"""Root conftest for the project's own tests (the plugin itself is loaded via its entry point)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

# numpy is loaded before any in-process pytester run snapshots sys.modules: a C extension
# that the snapshot's restore drops cannot be imported again in this process. So are its
# lazily loaded C parts that a test's library may import after a pytester run (ranx, through
# scipy, imports numpy.fft: "cannot load module more than once per process").
import numpy
import numpy.fft
import numpy.random  # noqa: F401
import pytest

from tests.support.processes import CHILD_ADDOPTS, child_addopts

pytest_plugins = ["pytester"]

# The suite keeps compiled bytecode where PYTHONDONTWRITEBYTECODE is set (as on the project's
# machines): pytest's rewritten test modules, and the plugin's own modules in every child
# pytest, would otherwise be parsed and compiled again by every process (about 6 s of CPU in
# each xdist worker's collection, and a few tenths of a second in each of the few hundred
# child pytests). Set before any test module is imported, and before xdist starts its workers
# (they inherit this environment); ``__pycache__/`` is git-ignored.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The plugin's modules, loaded once per test process, so pytester's in-process runs in every
# test folder reuse them (tests/support/preload.py says why).
import tests.support.preload  # noqa: E402, F401

#: The suite's ceiling on one test (setup, call and teardown each), where pytest-timeout (the
#: test extra) is installed: a test that hangs fails, named, with every thread's stack, and
#: its xdist worker is replaced, instead of holding the run until CI's own limit with no word
#: of where (stop 54: the suite stopped at 99 % and CI ended it 80 minutes later). The slowest
#: test takes about 26 s on a 2-core machine. The thread method: a test blocked in C code,
#: or in a ``finally`` that blocks again, is ended too. A test may set its own mark.
HANG_S = 300.0


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("timeout"):
        config.addinivalue_line("markers", "timeout: pytest-timeout's per-test limit")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("timeout"):
        return
    mark = pytest.mark.timeout(HANG_S, method="thread")
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(mark)


@pytest.fixture(scope="session", autouse=True)
def _children_skip_unused_plugins() -> Iterator[None]:
    """Children started with this process's environment (``subprocess.run(["pytest", ...])``)
    get :data:`CHILD_ADDOPTS`; this process was configured before, so it keeps its own."""
    before = os.environ.get("PYTEST_ADDOPTS")
    os.environ["PYTEST_ADDOPTS"] = child_addopts(before or "")
    yield
    if before is None:
        os.environ.pop("PYTEST_ADDOPTS", None)
    else:
        os.environ["PYTEST_ADDOPTS"] = before


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, whose runs get :data:`CHILD_ADDOPTS` (pytester itself clears
    ``PYTEST_ADDOPTS``; a test may set its own after)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_ADDOPTS)
    return pytester


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh plugin cache per test, no network, an empty Hugging Face home."""
    root = tmp_path / "retrieval-cache"
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-empty"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)  # tests in CI: not its summary
    return root
