"""The process of a ``cmd:`` store (:mod:`.command`): its exit status read without reaping
it, its process group killed (helpers too), its pipes closed, its stderr copied.

The command runs as the leader of its own process group (``start_new_session``), so its
helpers, a shell script's ``sleep 300 &`` or a forked grandchild, share the group's id, the
leader's pid. The group is killed whenever the command is stopped, also after the leader
exited on its own: helpers never outlive the run (issue 34.8). That is safe only while the
leader is not reaped: until then its pid, the group's id, stays reserved (POSIX reuses neither
a process id nor a process group id while either is in use), so ``killpg`` can reach no other
process. Hence :func:`exit_status` waits with ``waitid(..., WNOWAIT)``, which leaves the
exited leader a zombie, and only :func:`kill_group` reaps it, after the group's signal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

__all__ = ["CLOSE_GRACE_S", "EXIT_POLL_S", "Wait", "close_pipes", "copy_stderr", "exit_line",
           "exit_status", "kill_group", "leader_watch", "shutdown"]

#: Seconds the command is given to exit after its stdin closed, before its group is killed.
CLOSE_GRACE_S = 2.0
#: Without a pidfd, how often (seconds) a wait without events looks whether the leader exited.
EXIT_POLL_S = 0.25
#: Bytes read at a time from the command's pipes.
CHUNK = 65536
#: The most stderr bytes copied at one call.
MAX_COPIED = 8 * 1024 * 1024


def _peek(proc: subprocess.Popen[bytes]) -> tuple[bool, int | None]:
    """(whether the leader is still ours to signal, its exit status if it exited), without
    reaping it. Not ours: reaped already (by ``Popen`` or, with SIGCHLD ignored, the kernel)."""
    if proc.returncode is not None:
        return False, proc.returncode
    waitid = getattr(os, "waitid", None)
    if waitid is None:  # no waitid: Popen's poll reaps, so the group is killed only alive
        status = proc.poll()
        return status is None, status
    try:
        info = waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False, proc.poll()
    if info is None:
        return True, None
    return True, (info.si_status if info.si_code == os.CLD_EXITED else -info.si_status)


def exit_status(proc: subprocess.Popen[bytes], timeout: float = 0.0) -> int | None:
    """The leader's exit status (negative: the signal that killed it) once it has exited,
    waiting up to ``timeout`` seconds; None while it runs. It is left unreaped."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        _, status = _peek(proc)
        left = deadline - time.monotonic()
        if status is not None or left <= 0:
            return status
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group, the leader running or exited (helpers and
    grandchildren go too), then reap the leader. Safe to call twice."""
    ours, _ = _peek(proc)
    if ours:  # unreaped: the group's id is still this command's
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, OSError):
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        proc.wait(CLOSE_GRACE_S)


def close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(OSError, ValueError):
            if pipe is not None:
                pipe.close()


def shutdown(proc: subprocess.Popen[bytes]) -> None:
    """Close the command's stdin, give it :data:`CLOSE_GRACE_S` to exit, then kill its
    process group. Safe to call twice; used by ``close`` and at garbage collection."""
    with contextlib.suppress(OSError, ValueError):
        if proc.stdin is not None:
            proc.stdin.close()
    exit_status(proc, CLOSE_GRACE_S)
    kill_group(proc)
    close_pipes(proc)


def copy_stderr(proc: subprocess.Popen[bytes], wait: bool = False, once: bool = False) -> bool:
    """What the command wrote to stderr so far, onto ``sys.stderr`` (pytest captures it as
    the item's). ``wait``: read to its end (the command is gone); ``once``: one read. False
    once stderr is at its end (or closed)."""
    if proc.stderr is None or proc.stderr.closed:
        return False
    fd = proc.stderr.fileno()
    deadline = time.monotonic() + CLOSE_GRACE_S
    got = bytearray()
    open_ = True
    while len(got) < MAX_COPIED:
        try:
            chunk = os.read(fd, CHUNK)
        except BlockingIOError:
            if not wait or time.monotonic() > deadline:
                break
            time.sleep(0.01)
            continue
        except OSError:
            chunk = b""
        if not chunk:
            open_ = False
            break
        got += chunk
        if once:
            break
    if got:
        sys.stderr.write(got.decode("utf-8", "replace"))
        sys.stderr.flush()
    return open_


class Wait:
    """One request's deadline (``time.monotonic``), its timeout in seconds (for the message)
    and how many embed exchanges it held so far."""

    __slots__ = ("deadline", "embeds", "timeout")

    def __init__(self, deadline: float, timeout: float) -> None:
        self.deadline, self.timeout, self.embeds = deadline, timeout, 0


def leader_watch(proc: subprocess.Popen[bytes]) -> int | None:
    """A pidfd of the command's leader (readable once it exits), or None where the kernel
    or Python has none (or it is reaped already): then the exchange looks every
    :data:`EXIT_POLL_S`."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None or proc.returncode is not None:
        return None
    try:
        return int(pidfd_open(proc.pid))
    except OSError:
        return None


def exit_line(proc: subprocess.Popen[bytes], command: str, last: str) -> str:
    """How the command ended while it owed an answer to ``last``: its exit status or signal
    (it is left unreaped: the caller kills its group), or its stdout closed while it runs."""
    status = exit_status(proc, CLOSE_GRACE_S)
    if status is None:
        return (f"command `{command}` closed its stdout while answering {last}; keep it open "
                "until stdin closes")
    how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
    return (f"command `{command}` {how} while answering {last} (its stderr is in the captured "
            "output)")
