"""The summary's prose lines (header, notes, latency, comparison header) fit the terminal.

Lines wider than the terminal are cut at single spaces and continue two spaces further in;
joining each continuation to the line before it with one space gives the original back.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting.compare import compare_reports
from pytest_retrieval_eval.reporting.compare_lines import comparison_lines, header_lines
from pytest_retrieval_eval.reporting.text_width import fit_lines
from tests.support.compare_factory import make_report, write_report
from tests.support.wrapped import fits, join

FIVE = "hybrid,semantic,fts,bm25,oracle"


def test_a_line_that_fits_is_left_as_it_is() -> None:
    lines = ["dataset: x  gold: y", "  indented   run", "", "x" * 80]
    assert fit_lines(lines, 80) == lines
    assert fit_lines(["a " * 100], None) == ["a " * 100]


def test_long_lines_are_cut_at_spaces_and_continue_indented() -> None:
    line = ("median latency per query: hybrid 2.2 ms (p95 2.6), semantic 0.8 ms (p95 0.8), "
            "fts 0.6 ms (p95 0.7)")
    out = fit_lines([line], 40)
    assert out == ["median latency per query: hybrid 2.2 ms",
                   "  (p95 2.6), semantic 0.8 ms (p95 0.8),",
                   "  fts 0.6 ms (p95 0.7)"]
    assert join(out) == [line]


def test_double_spaces_are_kept_and_a_long_word_is_not_split() -> None:
    line = "lane: model-free  model: sentence-transformers/all-MiniLM-L6-v2 (fingerprint x)"
    out = fit_lines([line], 30)
    assert out == ["lane: model-free  model:",
                   "  sentence-transformers/all-MiniLM-L6-v2",  # one word, left whole
                   "  (fingerprint x)"]
    assert join(out) == [line]
    nested = fit_lines(["  instance 2 (q-9): a reason that is rather long"], 24)
    assert nested == ["  instance 2 (q-9): a", "    reason that is", "    rather long"]


@given(st.lists(st.text(alphabet="ab- ", max_size=120), max_size=4),
       st.integers(min_value=8, max_value=90))
def test_any_text_fits_and_joins_back(lines: list[str], width: int) -> None:
    # Lines as the report writes them: no trailing space, a leading indent at most.
    lines = [line.rstrip(" ") for line in lines]
    out = fit_lines(lines, width)
    assert all(fits(line, width) for line in out)
    assert all(line == line.rstrip(" ") for line in out)
    assert "\x00" not in "".join(out)
    # A continuation is only ever made of a cut line; the originals' own structure
    # (one indent under another) is ambiguous to join, so check line by line.
    for line in lines:
        assert join(fit_lines([line], width)) == [line]


def summary(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
            columns: int) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                                "--retrieval-eval", "--no-model",
                                "--retrieval-eval-retriever", FIVE,
                                "--retrieval-eval-tables=all")
    assert result.ret == 0, result.stdout.str()
    section = result.stdout.str().split("= retrieval-eval =", 1)[1].splitlines()[1:]
    return [line for line in section if not line.startswith("=")]


@pytest.mark.parametrize("columns", [60, 80])
def test_every_summary_line_fits_and_joins_back(pytester: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch,
                                               columns: int) -> None:
    narrow = summary(pytester, monkeypatch, columns)
    # A line wider than the terminal is one word (a next: command's argument before its
    # continuation backslash, issue 48.2), or the headline's next command's first line.
    assert all(len(line) <= columns or len(line.removesuffix(" \\").split()) == 1
               or line.startswith("  pytest --retrieval-eval ") for line in narrow), narrow
    assert any(line.startswith("  ") for line in narrow)  # something was wrapped
    wide = summary(pytester, monkeypatch, 400)
    assert not any(line.startswith("  ") for line in wide)  # nothing to wrap at 400

    def header(lines: list[str]) -> list[str]:
        return lines[:lines.index("")]

    assert join(header(narrow)) == header(wide)
    assert any(line.startswith("lane: model-free  model: ") and "dim 384)" in line
               for line in header(wide))
    (latency,) = [line for line in join(narrow) if line.startswith("median latency")]
    shown = re.findall(r"(\w+) \d+\.\d ms \(p95 \d+\.\d\)", latency)
    assert shown == FIVE.split(",")


def two_reports() -> tuple[dict[str, object], dict[str, object]]:
    base = make_report({"hybrid": [("q1", "multi-session", 0.0), ("q2", "multi-session", 1.0)]})
    new = make_report({"hybrid": [("q1", "multi-session", 1.0), ("q2", "multi-session", 1.0)]})
    return base, new


@pytest.mark.parametrize("width", [60, 80])
def test_comparison_header_fits_and_joins_back(width: int) -> None:
    base, new = two_reports()
    cmp = compare_reports(base, new, base_name="runs/2026-11-30-baseline-report.json",
                          new_name="runs/2026-12-01-candidate-report.json")
    whole = comparison_lines(cmp)
    assert any(len(line) > width for line in header_lines(cmp))  # a header to wrap
    out = comparison_lines(cmp, width=width)
    head = fit_lines(header_lines(cmp), width)
    assert out[:len(head)] == head
    assert all(fits(line, width) for line in head)
    assert join(head) == header_lines(cmp) == whole[:len(header_lines(cmp))]


def test_cli_compare_fits_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    base, new = two_reports()
    a = write_report(tmp_path / "a.json", base)
    b = write_report(tmp_path / "b.json", new)
    monkeypatch.setenv("COLUMNS", "60")
    assert cli.main(["compare", str(a), str(b)]) == 0
    narrow = capsys.readouterr().out.splitlines()
    monkeypatch.setenv("COLUMNS", "400")
    assert cli.main(["compare", str(a), str(b)]) == 0
    wide = capsys.readouterr().out.splitlines()
    assert narrow != wide
    assert all(fits(line, 60) for line in narrow[:narrow.index("")])
    assert join(narrow[:narrow.index("")]) == wide[:wide.index("")]
    assert wide[0].startswith(f"compare: base {a} (lane model-free, model test/model")


def test_hang_sets_the_continuations_indent() -> None:
    line = "   10   row10  " + " ".join(["word"] * 20)
    fitted = fit_lines([line], 40, hang=8)
    assert fitted[0].startswith("   10   row10")
    assert all(x.startswith(" " * 8) and x[8] != " " for x in fitted[1:])
    assert all(len(x) <= 40 for x in fitted)
    assert " ".join(x.strip() for x in fitted) == line.strip()
