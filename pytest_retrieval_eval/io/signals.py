"""SIGTERM handled as Ctrl-C is, for the length of a run.

SIGTERM is what ``timeout``, a CI cancel and a container stop send. Left to its default, it
ends pytest at once: no summary, no report, and a ``cmd:`` store (the leader of its own
process group) lives on. Raised as ``KeyboardInterrupt`` instead, pytest stops the run as it
does for Ctrl-C: the session finishes, the stores are stopped and the report says
``"interrupted": true``.

Only the first SIGTERM interrupts: coreutils ``timeout`` sends it twice (to its child, then
to the child's process group), and a second ``KeyboardInterrupt`` landing in the session's
finish would cost the report. SIGKILL stays the hard stop.

PYTEST_DONT_REWRITE: holds no test asserts.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["SigtermInterrupt", "sigterm_as_interrupt"]


class SigtermInterrupt(KeyboardInterrupt):
    """The ``KeyboardInterrupt`` a SIGTERM is raised as (pytest prints its line)."""

    def __init__(self) -> None:
        super().__init__("SIGTERM: the run was asked to stop (as Ctrl-C)")


def sigterm_as_interrupt() -> Callable[[], None] | None:
    """Handle SIGTERM as Ctrl-C from now on; the function returned puts the default back.

    None (nothing changed) off the main thread, where no handler can be set, and where a
    handler other than the default is set already (the user's or another plugin's own)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    fired: list[bool] = []

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if fired:  # the run is stopping already
            return
        fired.append(True)
        raise SigtermInterrupt

    signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) is interrupt):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return restore
