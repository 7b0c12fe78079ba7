"""The host project's git commit and branch, for the report (issue 38, item 5).

:func:`git_facts` asks the ``git`` program (never a library, never the network) about the
folder pytest runs in: the commit ``HEAD`` names, when that commit was made, and the branch
(``None`` on a detached ``HEAD``, as GitHub's pull-request checkouts are). Only reads that
touch neither the index nor the working tree run (``git log -1`` and ``git symbolic-ref``),
so no hook or fsmonitor of the checkout is started, and each call has a short timeout.

It never fails: no ``git`` on ``PATH``, a folder that is not a checkout, a repository without
a commit yet, one that git refuses (another owner: ``safe.directory``), a slow file system
past the timeout: each gives ``None`` (or a ``None`` branch), and the run goes on.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["TIMEOUT_S", "git_facts"]

#: Seconds each ``git`` call may take before the facts are given up.
TIMEOUT_S = 5.0


def _git(folder: Path, *args: str, timeout: float) -> str | None:
    """``git -C folder ARGS``'s stdout, stripped; None when it cannot be had."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True,
                              stdin=subprocess.DEVNULL, env=env, timeout=timeout,
                              check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None  # no git, not executable, the timeout, a NUL in the path
    if done.returncode != 0:
        return None
    try:
        return done.stdout.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


def git_facts(folder: Path, *, timeout: float = TIMEOUT_S) -> dict[str, str | None] | None:
    """``{"commit": sha, "committed": ISO 8601 date, "branch": name or None}`` of the checkout
    ``folder`` lies in, or None when it is no checkout (or git cannot tell)."""
    head = _git(folder, "log", "-1", "--no-show-signature", "--format=%H%n%cI", "HEAD",
                timeout=timeout)
    if not head:
        return None
    commit, _, committed = head.partition("\n")
    if len(commit) not in (40, 64) or any(c not in "0123456789abcdef" for c in commit):
        return None
    branch = _git(folder, "symbolic-ref", "--quiet", "--short", "HEAD", timeout=timeout)
    return {"commit": commit, "committed": committed.strip() or None,
            "branch": branch or None}
