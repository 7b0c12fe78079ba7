"""The progress bar ``retrieval-eval`` draws on stderr while a step runs (prep, cache merge,
push and pull): self-drawn, no dependency, quiet in a pipe."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class ProgressBar:
    """A self-drawn progress bar: ``label [####....] done/total rate/s ETA mm:ss``.

    Callable as a ``Progress`` (label, done, total). Redraws at most every ``interval``
    seconds on a terminal; elsewhere (a pipe, a CI log) it prints one line per label change
    and then at most every ``quiet_interval`` seconds. Nothing is drawn for a step until it
    has run :data:`GRACE` seconds, so a step that ends within a second shows nothing.
    """

    GRACE = 1.0  # seconds a step runs before it is first drawn
    MIN_BAR = 5  # the fewest cells a bar shrinks to on a narrow terminal

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        width: int = 30,
        interval: float = 0.1,
        quiet_interval: float = 30.0,
        columns: int | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        # The terminal's width: a bar line wider would wrap, and its redraw would then
        # leave the first part behind; the bar shrinks (to MIN_BAR) to fit it.
        self.columns = columns if columns is not None else shutil.get_terminal_size().columns
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if self.tty else quiet_interval
        self._label: str | None = None
        self._start = 0.0
        self._first_done = 0
        self._last_draw = 0.0
        self._drawn = False
        self._last_state: tuple[int, int | None] | None = None
        self._ended = False

    def __call__(self, label: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        if label != self._label:
            self.finish()
            self._label, self._start, self._first_done = label, now, done
            self._last_draw, self._last_state, self._ended = 0.0, None, False
        # A step's end is drawn at once, but once only: a count that runs past its total (a
        # file that grows, or reports size 0) is then rate-limited like an open-ended one.
        final = total is not None and done >= total and not self._ended
        self._ended = self._ended or final
        if (done, total) == self._last_state:
            return
        if now - self._start < self.GRACE:
            return  # a step that ends within a second shows nothing
        if not final and now - self._last_draw < self.interval:
            return
        self._last_draw, self._last_state = now, (done, total)
        self._draw(self.render(label, done, total, now - self._start, done - self._first_done))

    def render(
        self, label: str, done: int, total: int | None, elapsed: float, progressed: int
    ) -> str:
        """The bar's text (no line ending)."""
        rate = progressed / elapsed if elapsed > 0 else 0.0
        if total is not None:
            frac = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
            eta = _clock((total - done) / rate) if rate > 0 else "--:--"
            rest = f"] {done}/{total} {rate:.1f}/s ETA {eta}"
            # The last column stays free: a terminal's cursor there wraps the line.
            width = max(self.MIN_BAR, min(self.width, self.columns - 1 - len(label) - 2
                                          - len(rest)))
            filled = int(frac * width)
            return f"{label} [{'#' * filled}{'.' * (width - filled)}{rest}"
        if done == 0:  # an open-ended step that has counted nothing yet: its label alone
            return label
        return f"{label} {done} {rate:.1f}/s {_clock(elapsed)}"

    def _draw(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the current bar's line."""
        if self._drawn and self.tty:
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = False
        self._label = None
