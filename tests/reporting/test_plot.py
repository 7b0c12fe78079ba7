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
from pytest_retrieval_eval.reporting import plot
from tests.support.compare_factory import make_report, write_report
from tests.support.wrapped import unwrap


@pytest.fixture(scope="module", autouse=True)
def _matplotlib() -> None:
    """matplotlib, imported by the worker that runs this module (not at every worker's
    collection: about a second each)."""
    pytest.importorskip("matplotlib", reason="matplotlib is in the test extra")


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
        assert width == 750 and height > 500  # 7.5 in at 100 dpi, three panels
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
                   "pip install matplotlib (the plugin's [plot] extra)\n")
    assert not (tmp_path / "r.png").exists()


def test_cli_plot_single_and_comparison(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    base, new = reports()
    b = write_report(tmp_path / "base.json", base)
    n = write_report(tmp_path / "new.json", new)
    os.utime(b, (1_000_000_000, 1_000_000_000))  # the base was written first
    assert cli.main(["plot", str(n), "-o", str(tmp_path / "one.png")]) == 0
    assert cli.main(["plot", str(b), str(n), "-o", str(tmp_path / "cmp.svg")]) == 0
    out, _ = capsys.readouterr()
    assert unwrap(out).splitlines() == [f"figure: {tmp_path / 'one.png'}",
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


# --------------------------------------------------------------------------- issue 22, item 7


def drawn(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The figures plot draws, kept open instead of saved (inspected as matplotlib objects)."""
    figures: list[object] = []
    monkeypatch.setattr(plot, "_save", lambda fig, plt, path, fmt, dpi: figures.append(fig))
    return figures


def test_the_old_plot_order_is_refused_in_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """plot takes BASE NEW as compare does; NEW BASE (the old order) is told apart by when
    each report was written (run.created where the report has it, else the file's mtime)."""
    base, new = reports()
    b = write_report(tmp_path / "base.json", base)
    n = write_report(tmp_path / "new.json", new)
    os.utime(b, (1_000_000_000, 1_000_000_000))
    code = cli.main(["plot", str(n), str(b), "-o", str(tmp_path / "x.png")])
    _, err = capsys.readouterr()
    assert code == 4 and err.count("\n") == 1
    assert err == (f"retrieval-eval: error: plot takes BASE.json NEW.json, in compare's order "
                   f"(it once took NEW BASE): {n} was written after {b}, so they look swapped; "
                   "swap them, or pass --base-is-newer if the base really is the later run\n")
    assert not (tmp_path / "x.png").exists()
    assert cli.main(["plot", str(n), str(b), "-o", str(tmp_path / "x.svg"),
                     "--base-is-newer"]) == 0
    # A creation time recorded in the reports wins over the files' times.
    write_report(b, {**base, "run": {"created": "2026-12-02T10:00:00+00:00"}})
    write_report(n, {**new, "run": {"created": "2026-12-02T09:00:00+00:00"}})
    assert cli.main(["plot", str(b), str(n), "-o", str(tmp_path / "y.svg")]) == 4
    assert cli.main(["plot", str(n), str(b), "-o", str(tmp_path / "y.svg")]) == 0


def test_the_comparison_draws_base_to_new_with_the_right_sign(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base, new = reports()  # new is better: every delta >= 0
    b = write_report(tmp_path / "base.json", base)
    n = write_report(tmp_path / "new.json", new)
    os.utime(b, (1_000_000_000, 1_000_000_000))
    figures = drawn(monkeypatch)
    assert cli.main(["plot", str(b), str(n), "-o", str(tmp_path / "c.png")]) == 0
    (fig,) = figures
    ys = [y for ax in fig.axes for line in ax.lines for y in line.get_ydata()]  # type: ignore[attr-defined]
    assert max(ys) > 0.4 and min(ys) >= 0.0


@pytest.mark.parametrize("dpi", [50, 200])
def test_dpi_sets_the_pixel_size(tmp_path: Path, dpi: int) -> None:
    report = write_report(tmp_path / "r.json", reports()[0])
    assert cli.main(["plot", str(report), "-o", str(tmp_path / "r.png"), "--dpi", str(dpi)]) == 0
    assert png_size(tmp_path / "r.png")[0] == int(7.5 * dpi)


def test_a_bad_dpi_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = write_report(tmp_path / "r.json", reports()[0])
    with pytest.raises(SystemExit) as usage:
        cli.main(["plot", str(report), "-o", str(tmp_path / "r.png"), "--dpi", "0"])
    assert usage.value.code == 2
    assert "--dpi: '0': give a whole number in 30..1200" in capsys.readouterr().err


def test_single_report_bars_have_cis_n_per_type_and_marked_zeros(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Hand-made: multi-session holds 0.0 and 1.0 (mean 0.5, a CI spanning most of [0, 1]);
    semantic scores 0.0 on temporal-reasoning: that bar is marked "0"."""
    base = make_report({"hybrid": [("q1", "multi-session", 0.0), ("q2", "multi-session", 1.0),
                                   ("q3", "temporal-reasoning", 0.5)],
                        "semantic": [("q1", "multi-session", 1.0),
                                     ("q2", "multi-session", 1.0),
                                     ("q3", "temporal-reasoning", 0.0)]}, ks=(5,))
    figures = drawn(monkeypatch)
    plot.plot_report(base, tmp_path / "r.png")
    (fig,) = figures
    (ax,) = fig.axes  # type: ignore[attr-defined]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["temporal-\nreasoning\nn=1", "multi-session\nn=2", "overall\nn=3"]
    from matplotlib.container import BarContainer

    hybrid, semantic = [c for c in ax.containers if isinstance(c, BarContainer)]
    heights = [round(b.get_height(), 3) for b in hybrid.patches]
    assert heights == [0.5, 0.5, 0.5]
    low, high = plot._ci([0.0, 1.0])
    assert (low, high) == (0.0, 1.0)  # both resampled means 0 and 1 occur within 10,000
    low_o, high_o = (round(x, 3) for x in plot._ci([0.0, 1.0, 0.5]))
    assert 0.0 <= low_o < 0.5 < high_o <= 1.0
    (whisker,) = hybrid.errorbar.lines[2]
    segments = whisker.get_segments()
    # multi-session's whisker (the second bar) runs over that interval; temporal-reasoning's
    # single pair has none (0 long).
    assert [(round(float(a[1]), 3), round(float(b[1]), 3)) for a, b in segments] == [
        (0.5, 0.5), (0.0, 1.0), (low_o, high_o)]
    zeros = [t for t in ax.texts if t.get_text() == "0"]
    assert len(zeros) == 1
    assert zeros[0].get_position()[0] == pytest.approx(semantic.patches[0].get_x()
                                                       + semantic.patches[0].get_width() / 2)


def test_delta_panels_share_one_y_scale(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    base, new = reports()
    figures = drawn(monkeypatch)
    plot.plot_comparison(cmp.compare_reports(base, new), tmp_path / "c.png")
    (fig,) = figures
    limits = {ax.get_ylim() for ax in fig.axes}  # type: ignore[attr-defined]
    assert len(fig.axes) == 3 and len(limits) == 1  # type: ignore[attr-defined]


def test_the_comparison_title_names_the_retrievers_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, item 7: the figure says which retrievers it compares, not only which files:
    the retrievers of two reports, or a mapping's pairs."""
    base, new = reports()
    b = write_report(tmp_path / "base.json", base)
    n = write_report(tmp_path / "new.json", new)
    figures = drawn(monkeypatch)
    for args, who in ((["plot", str(b), str(n)], "hybrid, semantic · "),
                      (["plot", str(b), str(n), "--retrievers", "hybrid=semantic"],
                       "semantic vs hybrid · ")):
        assert cli.main([*args, "-o", str(tmp_path / "c.png")]) == 0, args
        title = figures[-1]._suptitle.get_text()  # type: ignore[attr-defined]
        assert title.startswith(who), (args, title)
