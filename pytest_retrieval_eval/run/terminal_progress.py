"""Progress of the run's long steps (ingest, embedding) through pytest's terminal reporter."""

from __future__ import annotations

import time

import pytest


class Progress:
    """Progress of long steps (ingest, embedding) through the terminal reporter.

    On a terminal the line is rewritten in place (at most twice a second); in a log (CI) a
    line is written once the step has run a second, every 30 seconds, and at its end. A step
    that ends within :data:`GRACE` seconds shows nothing (a small file's error is not preceded
    by the progress of the steps before it).
    """

    GRACE = 1.0  # seconds a step runs before its first line

    def __init__(self, config: pytest.Config) -> None:
        self.tr = config.pluginmanager.get_plugin("terminalreporter")
        self.width = config.get_terminal_writer().fullwidth
        self.last = 0.0
        self.label = ""
        self.started = 0.0

    def __call__(self, label: str, done: int, total: int | None) -> None:
        if self.tr is None:
            return
        now = time.monotonic()
        if label != self.label:
            self.label, self.started, self.last = label, now, 0.0
        final = total is not None and done >= total
        if final and self.last < 0:
            return  # this step's end was shown already
        if now - self.started < self.GRACE:
            return  # a step that ends within a second shows nothing
        interval = 0.5 if self.tr.isatty else 30.0
        if not final and self.last > 0 and now - self.last < interval:
            return
        self.last = -1.0 if final else now
        # An open-ended step that has counted nothing yet is shown by its label alone.
        amount = f" {done}/{total}" if total is not None else f" {done}" if done else ""
        rate = done / (now - self.started) if now > self.started and done else 0.0
        eta = f", ~{(total - done) / rate:.0f}s left" if total and rate and not final else ""
        speed = f" ({human_rate(rate)}/s{eta})" if rate else ""
        line = f"retrieval-eval: {label}{amount}{speed}"
        if self.tr.isatty:
            # A rewritten line must not wrap (its first part would stay behind): past the
            # terminal's width the rate goes, then the count becomes a percentage.
            percent = f" {100 * done // total}%" if total else amount
            fitting = [text for text in (line, f"retrieval-eval: {label}{amount}",
                                         f"retrieval-eval: {label}{percent}")
                       if len(text) < self.width]
            self.tr.rewrite(fitting[0] if fitting else f"retrieval-eval: {label}", erase=True)
            if final:
                self.tr.write_line("")
        else:
            from ..reporting.text_width import fit_lines

            for part in fit_lines([line], self.width):
                self.tr.write_line(part)


def human_rate(rate: float) -> str:
    """``2330757749`` -> ``2.3G``: rates of bytes and of texts alike."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if rate >= size:
            return f"{rate / size:.1f}{unit}"
    return f"{rate:.0f}"


