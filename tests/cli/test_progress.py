"""Progress lines: a step that ends within a second shows none (plugin and CLI alike)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.cli import progress_bar
from pytest_retrieval_eval.run import terminal_progress
from tests.support.reliability_support import joined_errors

pytest_plugins = ["pytester"]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Reporter:
    def __init__(self, isatty: bool) -> None:
        self.isatty = isatty
        self.lines: list[str] = []

    def write_line(self, line: str) -> None:
        self.lines.append(line)

    def rewrite(self, line: str, erase: bool = False) -> None:
        self.lines.append(line)


def _plugin_progress(reporter: _Reporter, width: int = 80) -> Any:
    progress = terminal_progress.Progress.__new__(terminal_progress.Progress)
    progress.tr, progress.width = reporter, width
    progress.last, progress.label, progress.started = 0.0, "", 0.0
    return progress


@pytest.mark.parametrize("isatty", [False, True])
def test_plugin_step_under_a_second_shows_nothing(monkeypatch: pytest.MonkeyPatch,
                                                  isatty: bool) -> None:
    clock = _Clock()
    monkeypatch.setattr(terminal_progress.time, "monotonic", clock)
    reporter = _Reporter(isatty)
    progress = _plugin_progress(reporter)
    for done in range(0, 1_637_687, 1 << 20):
        progress("sha256 sample", done, 1_637_687)
        clock.now += 0.3
    progress("sha256 sample", 1_637_687, 1_637_687)  # ends 0.6 s after it began
    progress("ingest sample", 0, None)
    clock.now += 0.9
    progress("ingest sample", 18, 18)
    assert [line for line in reporter.lines if line] == []


def test_plugin_step_over_a_second_shows_its_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(terminal_progress.time, "monotonic", clock)
    reporter = _Reporter(False)
    progress = _plugin_progress(reporter)
    progress("embed", 0, 100)
    clock.now += 0.5
    progress("embed", 10, 100)
    clock.now += 1.0
    progress("embed", 50, 100)  # 1.5 s in: shown
    clock.now += 1.0
    progress("embed", 100, 100)  # the end: shown
    assert [line.split(" (")[0] for line in reporter.lines] == [
        "retrieval-eval: embed 50/100", "retrieval-eval: embed 100/100"]


def test_cli_bar_step_under_a_second_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(progress_bar.time, "monotonic", clock)
    stream = io.StringIO()
    bar = cli.ProgressBar(stream, width=10)
    bar("ingest", 0, 18)
    clock.now += 0.4
    bar("ingest", 18, 18)
    bar("embed", 0, 4)
    clock.now += 0.99
    bar("embed", 4, 4)
    bar.finish()
    assert stream.getvalue() == ""
    bar("embed", 0, 4)
    clock.now += 1.5
    bar("embed", 4, 4)
    bar.finish()
    assert stream.getvalue().startswith("embed [##########] 4/4")


def test_small_broken_file_is_one_line_with_no_progress_before_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small file ends in its one error line: the sha256 and ingest steps before it took
    well under a second, so they print nothing."""
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(pytester.path / "cache"))
    data = pytester.path / "broken.json"
    sample = Path(terminal_progress.__file__).parent.parent / "data" / "sample" / (
        "longmemeval_sample.json")
    data.write_bytes(sample.read_bytes()[:200_000])  # cut short: truncated JSON
    result = pytester.runpytest("-p", "no:cacheprovider", "--retrieval-eval", "--no-model",
                                "--retrieval-eval-data", str(data))
    assert result.ret == 4
    lines = [line for line in joined_errors("\n".join(result.outlines + result.errlines))
             if line.strip()]
    assert len(lines) == 1 and "ends early" in lines[0], lines


def test_cli_bar_shrinks_to_fit_a_narrow_terminal() -> None:
    """A bar wider than the terminal would wrap, and each redraw would leave a line behind:
    the bar shrinks to fit, the last column left free (down to MIN_BAR cells)."""
    def drawn(columns: int) -> str:
        return cli.ProgressBar(io.StringIO(), columns=columns).render(
            "embed", 12345, 67890, 10.0, 12345)

    assert drawn(200) == drawn(80) == (
        f"embed [{'#' * 5}{'.' * 25}] 12345/67890 1234.5/s ETA 00:44")
    assert len(drawn(60)) == 59 and drawn(60).startswith("embed [###....")
    assert "[.....]" in drawn(30)  # no room left: the fewest cells, never none


@pytest.mark.parametrize("isatty", [False, True])
def test_plugin_progress_fits_the_terminal(monkeypatch: pytest.MonkeyPatch,
                                           isatty: bool) -> None:
    """On a terminal the rewritten line never wraps (past the width its rate goes, then its
    count becomes a percentage); in a log a long line is wrapped like the summary's."""
    clock = _Clock()
    monkeypatch.setattr(terminal_progress.time, "monotonic", clock)
    reporter = _Reporter(isatty)
    progress = _plugin_progress(reporter, width=60)
    label = "sha256 longmemeval_s_cleaned.json"
    progress(label, 0, 2_730_000_000)
    clock.now += 1.5
    progress(label, 1_000_000_000, 2_730_000_000)
    lines = [line for line in reporter.lines if line]
    assert all(len(line) < 60 for line in lines), lines
    if isatty:
        assert lines == [f"retrieval-eval: {label} 36%"]
    else:
        assert " ".join(line.strip() for line in lines) == (
            f"retrieval-eval: {label} 1000000000/2730000000 (666.7M/s, ~3s left)")
