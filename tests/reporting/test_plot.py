"""Figures, rendered headless (Agg) and checked as files; the [plot] extra stays optional."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting import compare as cmp
from tests.support.compare_factory import make_report, write_report

pytest.importorskip("matplotlib", reason="matplotlib is in the test extra")

from pytest_retrieval_eval.reporting import plot

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "svg": b"<?xml"}


def reports() -> tuple[dict[str, object], dict[str, object]]:
    rows = [("q1", "multi-session", 0.0), ("q2", "multi-session", 1.0),
            ("q3", "temporal-reasoning", 0.5), ("q4", "knowledge-update", 1.0)]
    base = make_report({"hybrid": rows, "semantic": rows}, ks=(1, 5, 10))
    better = [(q, t, min(1.0, v + 0.5)) for q, t, v in rows]
    new = make_report({"hybrid": better, "semantic": rows}, ks=(1, 5, 10))
    return base, new


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_report_figure_in_each_format(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"r.{fmt}"
    plot.plot_report(reports()[0], out)
    data = out.read_bytes()
    assert data.startswith(MAGIC[fmt]) and len(data) > 2000
    if fmt == "svg":
        text = data.decode()
        assert "recall@10" in text and "multi-session" in text  # a panel per k, types on x
    if fmt == "png":
        width, height = png_size(out)
        assert width == 600 and height > 400  # 7.5 in at 80 dpi, three panels
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temp file left


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_comparison_figure_in_each_format(tmp_path: Path, fmt: str) -> None:
    base, new = reports()
    result = cmp.compare_reports(base, new)
    out = tmp_path / f"c.{fmt}"
    plot.plot_comparison(result, out)
    data = out.read_bytes()
    assert data.startswith(MAGIC[fmt]) and len(data) > 2000
    if fmt == "svg":
        assert "Δ recall@5" in data.decode()


def test_more_panels_make_a_taller_figure(tmp_path: Path) -> None:
    base, _ = reports()
    plot.plot_report(base, tmp_path / "three.png")
    one = make_report({"hybrid": [("q1", "multi-session", 1.0)]}, ks=(5,))
    plot.plot_report(one, tmp_path / "one.png")
    assert png_size(tmp_path / "one.png")[1] < png_size(tmp_path / "three.png")[1]


def test_unknown_format_and_unwritable_path_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(plot.PlotError, match=r"unknown format '\.gif'; end the name in \.png"):
        plot.plot_report(reports()[0], tmp_path / "x.gif")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(plot.PlotError, match="cannot be written"):
        plot.plot_report(reports()[0], blocker / "x.png")


def test_without_matplotlib_one_line_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    report = write_report(tmp_path / "r.json", reports()[0])
    code = cli.main(["plot", str(report), "-o", str(tmp_path / "r.png")])
    _, err = capsys.readouterr()
    assert code == 4
    assert err == ("retrieval-eval: error: plots need matplotlib, which is not installed; "
                   "pip install 'pytest-retrieval-eval[plot]'\n")
    assert not (tmp_path / "r.png").exists()


def test_cli_plot_single_and_comparison(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    base, new = reports()
    b = write_report(tmp_path / "base.json", base)
    n = write_report(tmp_path / "new.json", new)
    assert cli.main(["plot", str(n), "-o", str(tmp_path / "one.png")]) == 0
    assert cli.main(["plot", str(n), str(b), "-o", str(tmp_path / "cmp.svg")]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines() == [f"figure: {tmp_path / 'one.png'}",
                                f"figure: {tmp_path / 'cmp.svg'}"]
    assert "Δ recall@5" in (tmp_path / "cmp.svg").read_text()


def test_the_plugin_and_compare_never_import_matplotlib() -> None:
    code = ("import sys; import pytest_retrieval_eval.plugin, "
            "pytest_retrieval_eval.reporting.compare, "
            "pytest_retrieval_eval.reporting.markdown, pytest_retrieval_eval.reporting.publish, "
            "pytest_retrieval_eval.cli, pytest_retrieval_eval.reporting.plot; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("mask", [0o022, 0o002])
def test_figure_mode_follows_the_umask(tmp_path: Path, mask: int) -> None:
    old = os.umask(mask)
    try:
        plot.plot_report(reports()[0], tmp_path / "r.png")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.png").stat().st_mode) == 0o666 & ~mask
