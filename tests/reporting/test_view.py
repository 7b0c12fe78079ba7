"""The HTML view without a browser (issue 47): the data's escaping, the page's parts, the
``view`` command and ``--retrieval-eval-html`` (the browser tests: test_view_browser.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_retrieval_eval.cli import main
from pytest_retrieval_eval.reporting.view import page_data, render_html
from pytest_retrieval_eval.reporting.view.page import CSP, script_json
from tests.support.compare_factory import make_report, write_report
from tests.support.view_reports import HOSTILE

NASTY = st.lists(st.sampled_from([*"<>&/'\"\\ \u2028\u2029\né", "</script>", "<!--"]),
                 max_size=8).map("".join)


@given(st.recursive(st.none() | st.booleans() | st.integers() | NASTY,
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(NASTY, inner, max_size=4), max_leaves=20))
def test_script_json_cannot_close_its_element_and_reads_back(value: Any) -> None:
    text = script_json(value)
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(text) == value


def test_the_page_holds_its_data_escaped_and_forbids_requests() -> None:
    report = make_report({"hybrid": [(HOSTILE["close"], "single-session-user", 1.0),
                                     (HOSTILE["img"], "multi-session", 0.0)]})
    report["pairs"][0]["question"] = HOSTILE["script"] + HOSTILE["separators"]
    page = render_html(page_data([(Path("r.json"), report)]))
    assert page.count("</script") == 2 and page.count("<script") == 2  # the page's own
    assert "<img" not in page and "\u2028" not in page
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    assert "default-src 'none'" in CSP and "connect-src" not in CSP  # none: default's
    found = re.search(r'<script type="application/json" id="retrieval-eval-data">(.*?)'
                      r"</script>", page, re.S)
    assert found is not None
    data = json.loads(found.group(1))
    assert data["run"]["pairs"][0]["question"] == HOSTILE["script"] + HOSTILE["separators"]
    assert data["run"]["pairs"][1]["question_id"] == HOSTILE["img"]
    assert "latency_ms" not in data["run"]["pairs"][0]  # slimmed
    # The script never writes HTML from text, nor builds a link or an image from data.
    script = page[page.index("(function () {"):]
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|"
                         r"new Function|\.src\s*=", script)


def test_page_data_modes() -> None:
    one = make_report({"hybrid": [("q1", "multi-session", 1.0), ("q2", "multi-session", 0.0)]})
    two = make_report({"hybrid": [("q1", "multi-session", 0.0), ("q2", "multi-session", 1.0)]})
    assert page_data([(Path("a.json"), one)])["mode"] == "run"
    compared = page_data([(Path("a.json"), one), (Path("b.json"), two)])
    assert compared["mode"] == "compare" and compared["run"]["label"] == "b.json"
    assert compared["comparison"]["changes"]["hybrid"]
    dated = [(Path(f"{n}.json"), {**r, "run": {"created": f"2026-01-0{day}T00:00:00+00:00"}})
             for day, n, r in ((3, "a", one), (1, "b", two), (2, "c", one))]
    three = page_data(dated)
    assert three["mode"] == "history" and three["run"]["label"] == "a.json"  # the newest
    assert [row["label"] for row in three["history"]["rows"]] == ["b.json", "c.json", "a.json"]


def test_view_command_writes_a_page_and_refuses_to_replace_a_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_report(tmp_path / "base.json",
                        make_report({"hybrid": [("q1", "multi-session", 1.0)]}))
    new = write_report(tmp_path / "new.json",
                       make_report({"hybrid": [("q1", "multi-session", 0.0)]}))
    out = tmp_path / "cmp.html"
    assert main(["view", str(base), str(new), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert f"view: {out}" in " ".join(capsys.readouterr().out.split())  # fitted to a width
    assert main(["view", str(base), str(new), "-o", str(new)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-o" in err and "would replace that report" in err
    assert json.loads(new.read_text(encoding="utf-8"))["pairs"]  # untouched
    assert main(["view", str(tmp_path / "absent.json"), "-o", str(out)]) == 4
    assert capsys.readouterr().err.count("\n") == 1


def test_the_page_is_written_only_where_no_file_is_or_over_a_view(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43.11 for the view: a file the plugin did not write is one line and left as it
    was; a page the plugin wrote (its generator meta) is replaced."""
    report = write_report(tmp_path / "r.json",
                          make_report({"hybrid": [("q1", "multi-session", 1.0)]}))
    theirs = tmp_path / "index.html"
    theirs.write_text("<html>my page</html>", encoding="utf-8")
    assert main(["view", str(report), "-o", str(theirs)]) == 4
    err = " ".join(capsys.readouterr().err.split())
    assert f"-o {theirs} is a file this plugin did not write" in err
    assert theirs.read_text(encoding="utf-8") == "<html>my page</html>"
    ours = tmp_path / "view.html"
    assert main(["view", str(report), "-o", str(ours)]) == 0
    assert main(["view", str(report), "-o", str(ours)]) == 0  # its own page: replaced


def test_the_option_and_its_ini_twin_write_the_page_beside_the_json(
        pytester: pytest.Pytester, isolated_cache: Path) -> None:
    pytester.makeini("[pytest]\nretrieval_eval_html = out/view.html\n")
    pytester.mkdir("out")
    result = pytester.runpytest_inprocess(
        "-p", "no:randomly", "--retrieval-eval", "--no-model", "--retrieval-eval-json",
        "out/report.json", "--retrieval-eval-retriever=bm25", "--retrieval-eval-budget=500")
    assert result.ret == 0, result.stdout.str()
    page = pytester.path / "out" / "view.html"
    assert re.search(r"HTML view:\s+\S*out/view\.html\s+\(\d+ KiB\)", result.stdout.str())
    text = page.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="retrieval-eval-data">(.*?)</script>', text,
                                re.S).group(1))  # type: ignore[union-attr]
    report = json.loads((pytester.path / "out" / "report.json").read_text(encoding="utf-8"))
    assert data["run"]["summary"] == report["summary"]
    assert all("reach" in p["budget"] for p in data["run"]["pairs"])
    assert len(text.encode("utf-8")) <= 3 * len(json.dumps(report))
    # The same output as the JSON's is refused up front, as the Markdown's is.
    again = pytester.runpytest_inprocess(
        "-p", "no:randomly", "--retrieval-eval", "--no-model", "--retrieval-eval-json",
        "out/view.html", "--retrieval-eval-retriever=bm25")
    assert again.ret == 4
    again.stderr.fnmatch_lines(["*--retrieval-eval-html*"])
