"""``retrieval-eval history`` (issue 38, item 5): one row per report, ordered by the date it
was written (not by the order given), with its commit, branch, lane and model and the overall
values per retriever; a folder of reports; ``--markdown``; ``--plot`` (the [plot] extra, or
its one line); unknown names refused in one line naming the known ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.cli import console as cli
from tests.support.compare_factory import make_report, write_report

REFUSED = 4
QIDS = [("q1", "multi-session"), ("q2", "temporal-reasoning")]


def report(created: str, commit: str | None, values: dict[str, float], *,
           branch: str | None = "main", ks: tuple[int, ...] = (1, 5)) -> dict[str, Any]:
    git = None if commit is None else {"commit": commit, "committed": created,
                                       "branch": branch}
    return make_report({name: [(q, t, v) for q, t in QIDS] for name, v in values.items()},
                       ks=ks, run={"created": created, "git": git})


@pytest.fixture
def three(tmp_path: Path) -> list[Path]:
    """Three reports, named so that the file order is not the date order."""
    return [
        write_report(tmp_path / "a.json", report("2026-03-01T10:00:00+00:00", "c" * 40,
                                                 {"hybrid": 0.75, "fts": 0.25})),
        write_report(tmp_path / "b.json", report("2026-01-01T09:30:00+00:00", "a" * 40,
                                                 {"hybrid": 0.5})),
        write_report(tmp_path / "c.json", report("2026-02-01T08:00:00+00:00", None,
                                                 {"hybrid": 1.0, "fts": 0.0})),
    ]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_one_row_per_report_oldest_first(three: list[Path], capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(capsys, "history", *map(str, three))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == ["history: 3 reports, oldest first; dataset sample (sha256 "
                         "aaaaaaaaaaaaaaaa…);", "  overall recall@k"]
    assert lines[2:6] == [
        "#  date (UTC)        commit      branch  lane        model  pairs",
        "1  2026-01-01 09:30  aaaaaaaaaa  main    model-free  model      2",
        "2  2026-02-01 08:00  -           -       model-free  model      2",
        "3  2026-03-01 10:00  cccccccccc  main    model-free  model      2",
    ]
    assert lines[6:] == [
        "",
        "                 hybrid          fts",
        "                    @1     @5       @1     @5",
        "1  aaaaaaaaaa    0.500  0.500        -      -",
        "2  -             1.000  1.000    0.000  0.000",
        "3  cccccccccc    0.750  0.750    0.250  0.250",
    ]
    assert all(len(line) <= 80 for line in lines)


def test_a_folder_stands_for_its_reports_and_other_json_is_named(
        three: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder = three[0].parent
    (folder / "comparison.json").write_text(json.dumps({"comparison": {}}))
    code, out, _ = run_cli(capsys, "history", str(folder), str(three[1]))  # b.json once
    assert code == 0
    assert "history: 3 reports, oldest first" in out
    assert " ".join(out.split()).endswith(
        f"skipped 1 *.json that are not reports: {folder / 'comparison.json'} (not a report)")
    code, _, err = run_cli(capsys, "history", str(folder / "comparison.json"))
    assert code == REFUSED and "not a retrieval-eval JSON report" in err  # named: refused
    empty = folder / "empty"
    empty.mkdir()
    code, _, err = run_cli(capsys, "history", str(empty))
    assert code == REFUSED and err.count("\n") == 1 and "holds no *.json report" in err


def test_metric_and_retrievers_choose_the_columns(three: list[Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "history", *map(str, three), "--metric", "ndcg_any@5",
                           "--retrievers", "fts")
    assert code == 0
    assert out.splitlines()[-6:] == ["",
                                     "                 fts",
                                     "                    @5",
                                     "1  aaaaaaaaaa        -",
                                     "2  -             0.000",
                                     "3  cccccccccc    0.250"]
    assert "overall ndcg_any@5" in out and "hybrid" not in out
    code, _, err = run_cli(capsys, "history", *map(str, three), "--retrievers", "hybird")
    assert code == REFUSED
    assert err == ("retrieval-eval: error: --retrievers: 'hybird' is a retriever of no report "
                   "given; the reports hold hybrid, fts\n")
    code, _, err = run_cli(capsys, "history", *map(str, three), "--metric", "recall@10")
    assert code == REFUSED
    assert err.startswith("retrieval-eval: error: --metric recall@10: no report holds it; "
                          "the reports hold ndcg_any@1, ndcg_any@5, recall@1, recall@5,")
    code, _, err = run_cli(capsys, "history", *map(str, three), "--metric", "mrr")
    assert code == REFUSED and err.count("\n") == 1
    assert "give one of ndcg_any, recall, recall_all, recall_any" in err


def test_markdown_is_one_table_for_a_job_summary(three: list[Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "history", *map(str, three), "--markdown")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("**retrieval-eval history: 3 reports, oldest first;")
    assert lines[2] == ("| # | date (UTC) | commit | branch | lane | model | hybrid @1 | "
                        "hybrid @5 | fts @1 | fts @5 |")
    assert lines[4] == ("| 1 | 2026-01-01 09:30 | `aaaaaaaaaa` | `main` | model-free | "
                        "`test/model` | 0.500 | 0.500 | - | - |")
    assert lines[5].startswith("| 2 | 2026-02-01 08:00 | - | - |")
    assert len(lines) == 7


def test_plot_draws_the_values_over_the_reports(three: list[Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is in the test extra")
    figure = tmp_path / "history.svg"
    code, out, _ = run_cli(capsys, "history", *map(str, three), "--plot", str(figure))
    assert code == 0 and out.splitlines()[-1] == f"figure: {figure}"
    svg = figure.read_text()
    assert "recall@5" in svg and "3 reports, oldest first" in svg
    code, _, err = run_cli(capsys, "history", *map(str, three), "--plot", str(three[0]))
    assert code == REFUSED and "unknown format '.json'" in err


def test_plot_without_matplotlib_names_the_extra(three: list[Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    code, out, err = run_cli(capsys, "history", *map(str, three), "--plot",
                             str(tmp_path / "h.png"))
    assert (code, out) == (REFUSED, "")
    assert err.startswith("retrieval-eval: error: plots need matplotlib, which is not "
                          "installed;") and err.count("\n") == 1  # plot's own line
    assert "[plot]" in err
    assert not (tmp_path / "h.png").exists()


def test_a_report_without_created_is_dated_by_its_file(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    import os

    old = write_report(tmp_path / "z-old.json", make_report({"hybrid": [("q1", "x", 0.0)]}))
    new = write_report(tmp_path / "a-new.json", make_report({"hybrid": [("q1", "x", 1.0)]}))
    os.utime(old, (1_700_000_000, 1_700_000_000))
    os.utime(new, (1_800_000_000, 1_800_000_000))
    code, out, _ = run_cli(capsys, "history", str(new), str(old))
    assert code == 0
    assert out.splitlines()[-2:] == ["1  -             0.000  0.000",
                                     "2  -             1.000  1.000"]


def test_column_heads_never_collide(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43.19: every name was cut to the values' width (5 characters for one metric):
    ``semantic`` and ``semantic+unit:turn`` both read ``seman``."""
    monkeypatch.setenv("COLUMNS", "80")
    path = write_report(tmp_path / "a.json", report(
        "2026-03-01T10:00:00+00:00", "c" * 40, {"semantic": 0.5, "semantic+unit:turn": 0.25}))
    code, out, _ = run_cli(capsys, "history", str(path), "--metric", "recall@1")
    assert code == 0
    lines = out.splitlines()
    head = next(line for line in lines if "semantic" in line and "date" not in line)
    assert head.split() == ["semantic", "semantic+unit:turn"]
    assert lines[-1].split() == ["1", "cccccccccc", "0.500", "0.250"]


def test_report_names_reach_the_terminal_escaped(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43.17: ESC, CR and newline in a report's names (retriever, lane) reached the
    terminal raw."""
    evil = report("2026-03-01T10:00:00+00:00", "c" * 40, {"a\x1b[31m\rb\nc": 0.5})
    evil["lane"] = "lane\x1b[2J"
    path = write_report(tmp_path / "a.json", evil)
    code, out, _ = run_cli(capsys, "history", str(path))
    assert code == 0
    assert "\x1b" not in out and "\r" not in out and "a\\x1b[31m\\rb\\nc" in out
    assert "lane\\x1b[2J" in out
    code, _, err = run_cli(capsys, "history", str(path), "--retrievers", "zz")
    assert code == REFUSED and "\x1b" not in err and err.count("\n") == 1


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and symlinks")
def test_a_folder_names_every_json_it_leaves_out_and_why(
        three: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43.18: a dangling link, a symlink loop and a FIFO named *.json were left out
    without a word (only JSON that is no report was named)."""
    import os

    folder = three[0].parent
    (folder / "dangling.json").symlink_to(folder / "gone.json")
    (folder / "loop.json").symlink_to(folder / "loop.json")
    os.mkfifo(folder / "fifo.json")
    code, out, _ = run_cli(capsys, "history", str(folder))
    assert code == 0
    said = " ".join(out.split())
    assert (f"skipped 3 *.json that are not reports: {folder / 'dangling.json'} (a dangling "
            f"link), {folder / 'fifo.json'} (a FIFO), {folder / 'loop.json'} (a symlink loop)"
            ) in said
