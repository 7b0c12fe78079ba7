"""``retrieval-eval badge`` (issue 38, item 6): shields.io's endpoint JSON (schemaVersion 1,
label, message, the colour of the value's band) or a self-contained SVG; an unknown retriever
or metric is one line naming the known ones."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting import badge
from tests.support.compare_factory import make_report, write_report

REFUSED = 4
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    return write_report(tmp_path / "report.json", make_report(
        {"hybrid": [("q1", "multi-session", 1.0), ("q2", "multi-session", 0.5)],
         "fts": [("q1", "multi-session", 0.0), ("q2", "multi-session", 0.5)]}, ks=(1, 10)))


def test_endpoint_json_names_the_number_and_its_band(saved: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "badge.json"
    assert cli.main(["badge", str(saved), "--retriever", "hybrid", "--metric", "recall@10",
                     "--out", str(out_file)]) == 0
    assert json.loads(out_file.read_text()) == {
        "schemaVersion": 1, "label": "recall@10 hybrid", "message": "0.750", "color": "green"}
    out = " ".join(capsys.readouterr().out.split())  # fitted to the terminal's width
    assert out == f"badge: {out_file} (recall@10 hybrid: 0.750, green)"
    # the defaults: the report's first retriever, the table's family at its largest k
    assert cli.main(["badge", str(saved), "--out", str(out_file), "--label", "fts?"]) == 0
    assert json.loads(out_file.read_text())["label"] == "fts?"
    assert json.loads(out_file.read_text())["message"] == "0.750"


def test_without_out_it_writes_badge_json_or_badge_svg_here(
        saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, item 7: ``--out`` has a default, ``badge.json`` (``badge.svg`` with
    ``--svg``), in the working folder."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["badge", str(saved)]) == 0
    assert json.loads((tmp_path / "badge.json").read_text())["message"] == "0.750"
    assert cli.main(["badge", str(saved), "--svg"]) == 0
    assert ET.parse(tmp_path / "badge.svg").getroot().tag == f"{SVG}svg"


@pytest.mark.parametrize(("value", "name"), [
    (1.0, "brightgreen"), (0.9, "brightgreen"), (0.8999, "green"), (0.75, "green"),
    (0.6, "yellowgreen"), (0.45, "yellow"), (0.3, "orange"), (0.2999, "red"), (0.0, "red")])
def test_bands(value: float, name: str) -> None:
    assert badge.color(value)[0] == name
    assert badge.endpoint_json("l", value)["color"] == name


def test_the_bands_are_documented() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "ci.md").read_text()
    for low, name, _ in badge.BANDS:
        assert f"| {low:.2f} | `{name}` |" in page


def test_svg_is_self_contained_and_sized_by_its_text(saved: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "badge.svg"
    assert cli.main(["badge", str(saved), "--retriever", "fts", "--metric", "recall@1",
                     "--out", str(out_file), "--svg", "--label", 'a<b & "c"']) == 0
    text = out_file.read_text()
    root = ET.fromstring(text)  # well-formed XML, the label escaped
    assert root.tag == f"{SVG}svg"
    assert root.get("aria-label") == 'a<b & "c": 0.250'
    assert "http" not in text.replace("http://www.w3.org/2000/svg", "")  # nothing to fetch
    assert "<script" not in text and "@font-face" not in text and "href" not in text
    texts = [t for t in root.iter(f"{SVG}text") if t.get("aria-hidden") is None]
    assert [t.text for t in texts] == ['a<b & "c"', "0.250"]
    rects = [r for r in root.iter(f"{SVG}rect")  # the label's and the message's
             if r.get("fill", "").startswith("#") and r.get("fill") != "#fff"]
    assert rects[1].get("fill") == badge.color(0.25)[1]
    label_w, message_w = int(rects[0].get("width", "0")), int(rects[1].get("width", "0"))
    assert int(root.get("width", "0")) == label_w + message_w
    assert label_w == round(badge.text_width('a<b & "c"')) + 10
    assert texts[0].get("textLength") == str((label_w - 10) * 10)


def test_text_width_grows_with_the_text_and_its_letters() -> None:
    assert badge.text_width("") == 0
    assert badge.text_width("iii") < badge.text_width("aaa") < badge.text_width("MMM")
    assert badge.text_width("recall@10 hybrid") == pytest.approx(
        sum(badge.text_width(c) for c in "recall@10 hybrid"))
    assert 80 < badge.text_width("recall@10 hybrid") < 120  # shields draws it ~100 px wide


def test_unknown_names_are_one_line_naming_the_known_ones(saved: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    out_file = tmp_path / "b.json"
    assert cli.main(["badge", str(saved), "--retriever", "semantic", "--out",
                     str(out_file)]) == REFUSED
    assert capsys.readouterr().err == (
        "retrieval-eval: error: badge: retriever 'semantic' is not in the report; it holds "
        "hybrid, fts (pass one with --retriever)\n")
    assert cli.main(["badge", str(saved), "--metric", "recall@5", "--out",
                     str(out_file)]) == REFUSED
    err = capsys.readouterr().err
    assert err.startswith("retrieval-eval: error: badge: metric 'recall@5' is not in the "
                          "report for hybrid; it holds recall@1, recall_any@1,")
    assert err.endswith("(pass one with --metric)\n") and err.count("\n") == 1
    assert cli.main(["badge", str(saved), "--out", str(saved)]) == REFUSED
    assert "would replace that report" in capsys.readouterr().err
    assert not out_file.exists()


def test_a_token_count_is_not_coloured_as_a_recall(
        saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43.19: ``tokens@10`` of 4596 was put in the top band (brightgreen), as a recall
    of 0.9 or more would be: a count of tokens is no share."""
    report = json.loads(saved.read_text())
    report["summary"]["hybrid"]["overall"]["tokens@10"] = 4596.0
    saved.write_text(json.dumps(report))
    out_file = tmp_path / "tokens.json"
    assert cli.main(["badge", str(saved), "--retriever", "hybrid", "--metric", "tokens@10",
                     "--out", str(out_file)]) == 0
    assert json.loads(out_file.read_text()) == {
        "schemaVersion": 1, "label": "tokens@10 hybrid", "message": "4596 tokens",
        "color": "blue"}
    svg = badge.badge_svg("tokens@10 hybrid", 4596.0, "tokens@10")
    assert badge.NEUTRAL[1] in svg and "4596 tokens" in svg


def test_names_from_the_report_reach_the_terminal_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43.17: ESC, CR and newline in a report's retriever name reached the terminal
    raw (explain and compare escape them)."""
    name = "evil\x1b[2J\r\nname"
    saved = write_report(tmp_path / "r.json", make_report(
        {name: [("q1", "multi-session", 1.0)]}, ks=(1, 10)))
    assert cli.main(["badge", str(saved), "--out", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "evil\\x1b[2J\\r\\nname" in out
    assert cli.main(["badge", str(saved), "--retriever", "x", "--out",
                     str(tmp_path / "b.json")]) == REFUSED
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err and err.count("\n") == 1
