"""Whether a process is gone, by pid: for tests that check a store's helpers end (issue
34.8), and the cleanup that never leaves one behind whatever the code under test did."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

#: What every child pytest of the suite (pytester's runs, in-process or not, and the
#: subprocesses the tests start) is given in ``PYTEST_ADDOPTS`` (the root conftest sets it):
#: third-party plugins that the test extra installs and no test exercises are left out.
#: Hypothesis's plugin imports all of Hypothesis in its terminal summary (about 0.7 s of CPU
#: a child process) and LangSmith's (langchain-core's dependency) its client when it loads
#: (about 0.3 s); anyio's (the MCP SDK's dependency) its asyncio backend (about 0.14 s); the
#: suite starts a few hundred children. pytest-timeout guards the suite's own tests
#: (conftest.py), each of which bounds its children. A test about plugins names its own.
CHILD_ADDOPTS = "-p no:hypothesispytest -p no:langsmith_plugin -p no:anyio -p no:timeout"


def child_addopts(extra: str = "") -> str:
    """``PYTEST_ADDOPTS`` for a child pytest: :data:`CHILD_ADDOPTS`, then ``extra``."""
    return f"{CHILD_ADDOPTS} {extra}".strip()


def gone(pid: int) -> bool:
    """Whether process ``pid`` is gone (a zombie nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def wait_gone(pid: int) -> bool:
    """SIGKILL is delivered at once, but the process ends a moment later: look for up to 5 s
    (the passing case returns at the first or second look). No timing is asserted."""
    deadline = time.monotonic() + 5.0
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return gone(pid)


def kill_left(pids: Iterable[int]) -> None:
    """SIGKILL whichever of ``pids`` is still running."""
    for pid in pids:
        if not gone(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def default_sigint() -> None:
    """A child's ``preexec_fn``: SIGINT back to its default, so the child's Python installs
    its KeyboardInterrupt handler. A suite started in the background (``&``, nohup) inherits
    SIGINT ignored, and a child that ignores it never sees the Ctrl-C its test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

