"""Publishing a run, through pytester: in-run comparison, Markdown, the job summary, JUnit XML
properties and summary tables that fit the terminal."""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.boundary.outputs import MARKDOWN_MARKER
from pytest_retrieval_eval.reporting import markdown
from pytest_retrieval_eval.reporting.summary_table import table_lines
from tests.support.compare_factory import make_report, write_report
from tests.support.reliability_support import match_errors
from tests.support.wrapped import join

pytestmark = pytest.mark.usefixtures("isolated_cache")
USAGE_ERROR = 4
FIVE = "hybrid,semantic,fts,bm25,oracle"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                              "--retrieval-eval", "--no-model", *args)


def sample_report(pytester: pytest.Pytester, name: str, retrievers: str) -> Path:
    out = pytester.path / name
    result = run(pytester, "--retrieval-eval-retriever", retrievers,
                 "--retrieval-eval-json", str(out))
    assert result.ret == 0, result.stdout.str()
    return out


@pytest.fixture(scope="module")
def reports_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hybrid-base")


@pytest.fixture
def hybrid_base(pytester: pytest.Pytester, reports_dir: Path) -> Path:
    """The report of a real ``hybrid`` run, made by the first test that asks; the tests
    compare with it (or with a doctored copy) and never write it."""
    base = reports_dir / "base.json"
    if not base.exists():
        sample_report(pytester, "base.json", "hybrid").rename(base)
    return base


def test_in_run_comparison_under_the_summary_and_in_the_json(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # whole lines, tmp paths and all (test_fit_lines)
    base = sample_report(pytester, "base.json", "semantic,fts")
    out = pytester.path / "new.json"
    result = run(pytester, "--retrieval-eval-retriever", "semantic,hybrid",
                 "--retrieval-eval-compare", str(base), "--retrieval-eval-json", str(out))
    assert result.ret == 0
    text = result.stdout.str()
    summary = text.split("= retrieval-eval =")[1]
    assert summary.index("overall") < summary.index(f"compare: base {base}")
    result.stdout.fnmatch_lines([
        "*vs new this run (lane model-free*",
        "paired on (question_id, retriever): 15 matched, 15 only in base, 15 only in new",
        "recall@1 · semantic", "overall  * 15 *",
        "only in base (15, not compared): *fts*",
        "only in new (15, not compared): *hybrid*",
    ])
    saved = json.loads(out.read_text())["comparison"]
    assert saved["matched"] == 15 and len(saved["only_in_base"]) == 15
    semantic = [r for r in saved["rows"]["recall@5"] if r["retriever"] == "semantic"]
    assert all(r["delta"] == 0 and r["p"] == 1.0 for r in semantic)  # same scores, same data
    assert saved["changes"]["semantic"]["5"] == {"gained": [], "lost": []}


def test_in_run_comparison_with_v_names_gained_and_lost(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        hybrid_base: Path) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # whole lines, tmp paths and all (test_fit_lines)
    base = json.loads(hybrid_base.read_text())
    for pair in base["pairs"]:  # pretend the base missed every pair at 5
        pair["metrics"]["recall@5"] = 0.0
    doctored = write_report(tmp_path / "doctored.json", base)
    result = run(pytester, "--retrieval-eval-compare", str(doctored), "-v")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["hybrid: pairs whose recall@k rose (+) or fell (-): "
                                 "@1 +0/-0, @5 +*/-0, @10 +0/-0", "  @5 gained: *"])


def test_a_refused_comparison_is_one_line_and_does_not_fail_the_run(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # whole lines, tmp paths and all (test_fit_lines)
    other = write_report(tmp_path / "other.json", make_report(
        {"hybrid": [("q1", "multi-session", 1.0)]}))  # another dataset's sha256
    out = pytester.path / "r.json"
    result = run(pytester, "--retrieval-eval-compare", str(other),
                 "--retrieval-eval-json", str(out))
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"comparison refused: reports {other} and this run are on "
                                 "different data (sample sha256 aaaaaaaaaaaa vs sample *"])
    assert "different data" in json.loads(out.read_text())["comparison"]["refused"]


def test_an_unreadable_base_is_a_usage_error_before_any_work(pytester: pytest.Pytester) -> None:
    broken = pytester.path / "cut.json"
    broken.write_text('{"schema_version": 1, "pairs": [')
    result = run(pytester, "--retrieval-eval-compare", str(broken))
    assert result.ret == USAGE_ERROR
    match_errors(result.stderr.str(), [f"ERROR: report {broken}: not valid JSON*"])
    assert "passed" not in result.stdout.str()


def test_markdown_file_and_job_summary(pytester: pytest.Pytester,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    summary = pytester.path / "step.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    md = pytester.path / "out" / "summary.md"
    result = run(pytester, "--retrieval-eval-retriever", "hybrid,oracle",
                 "--retrieval-eval-markdown", str(md))
    assert result.ret == 0
    where = [f"Markdown summary: {md}", f"job summary ($GITHUB_STEP_SUMMARY): {summary}"]
    lines = join(result.stdout.lines)  # tmp paths: wrapped to the terminal's width
    assert lines[lines.index(where[0]):][:2] == where
    marker, text = md.read_text().split("\n", 1)  # the plugin's marker line (issue 43.11)
    assert marker == MARKDOWN_MARKER
    assert text.startswith("**retrieval-eval** · dataset `sample` (sha256 `")
    assert "lane model-free · model `sentence-transformers/all-MiniLM-L6-v2`" in text
    assert "| question type | n | hybrid @1 | hybrid @5 | hybrid @10 | oracle @1 |" in text
    overall = next(line for line in text.splitlines() if line.startswith("| **overall** | 15"))
    assert "**" not in overall.split("|", 2)[2]  # the self-check (oracle) is never bold (38.11)
    assert summary.read_text() == "earlier step\n" + text
    # A second run appends; the ini flag turns the job summary off.
    pytester.makeini("[pytest]\nretrieval_eval_no_step_summary = true\n")
    result = run(pytester, "--retrieval-eval-retriever", "hybrid,oracle")
    assert result.ret == 0 and "job summary" not in result.stdout.str()
    assert summary.read_text() == "earlier step\n" + text


def test_markdown_of_an_in_run_comparison(pytester: pytest.Pytester, hybrid_base: Path) -> None:
    base = hybrid_base
    md = pytester.path / "s.md"
    result = run(pytester, "--retrieval-eval-compare", str(base),
                 "--retrieval-eval-markdown", str(md))
    assert result.ret == 0
    text = md.read_text()
    assert f"**retrieval-eval compare** · base `{base}` → new `this run`" in text
    assert "#### Δ recall@5" in text
    assert ("| question type | n | hybrid m | hybrid base → new | hybrid Δ [95% CI] | "
            "hybrid p (Holm) |") in text
    # the same pairs: nothing differs, so every row is marked and no shift can be detected
    assert "| **overall** | 15 | 0 | 0.611 → 0.611 | +0.000 [+0.00, +0.00] | 1.000 † |" in text
    assert "- † too few pairs differ to reach p <= 0.05: the least p is 2/2^m (m >= 6 can)" in (
        text)
    assert ("- `hybrid` overall: smallest Δ these 15 pairs could detect at p <= 0.05 with 80% "
            "power: none, too few differ (0; the test needs 6)") in text


def test_markdown_path_that_is_a_folder_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--retrieval-eval-markdown", str(pytester.path))
    assert result.ret == USAGE_ERROR
    assert "--retrieval-eval-markdown" in result.stderr.str()


def test_junitxml_under_xunit2_has_no_properties_and_says_how_to_get_them(
        pytester: pytest.Pytester) -> None:
    """xunit2 (pytest's default junit_family) has no testcase <properties>: none is written,
    and one line says which setting brings them."""
    xml = pytester.path / "junit.xml"
    result = run(pytester, "--retrieval-eval-retriever", "oracle", f"--junitxml={xml}")
    assert result.ret == 0
    root = ET.parse(xml).getroot()
    assert len(list(root.iter("testcase"))) == 15
    assert not list(root.iter("properties"))
    notes = [line for line in join(result.stdout.lines) if "JUnit XML" in line]
    assert notes == ["retrieval-eval: the JUnit XML holds no per-pair metrics: junit_family "
                     "xunit2 forbids testcase properties; set junit_family = xunit1 in the ini "
                     "file to get them"]
    start = next(i for i, line in enumerate(result.stdout.lines) if "JUnit XML" in line)
    assert len(result.stdout.lines[start]) <= 80  # fitted to pytester's 80 columns
    assert result.stdout.lines[start + 1].startswith("  ")


def test_junitxml_carries_metrics_and_latencies_under_xunit1(pytester: pytest.Pytester) -> None:
    xml = pytester.path / "junit.xml"
    result = run(pytester, "--retrieval-eval-retriever", "hybrid,oracle",
                 "--retrieval-eval-k", "1,5", f"--junitxml={xml}", "-o", "junit_family=xunit1")
    assert result.ret == 0
    cases = ET.parse(xml).getroot().iter("testcase")
    by_name = {f"{c.get('classname')}::{c.get('name')}": {
        p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    assert len(by_name) == 30
    oracle = [props for name, props in by_name.items() if name.endswith("::oracle")]
    assert len(oracle) == 15
    assert all(props["recall@5"] == "1.0" for props in oracle)
    props = next(iter(by_name.values()))
    for key in ("retriever", "question_type", "recall@1", "recall@5", "recall_any@5",
                "recall_all@5", "ndcg_any@5", "latency_ms.retrieval"):
        assert key in props
    assert float(props["latency_ms.retrieval"]) >= 0
    assert "latency_ms.query_embedding" not in props  # model-free lane: no live embedding


@pytest.mark.parametrize("columns", [60, 80, 120, 200])
def test_summary_rows_fit_the_terminal_width(pytester: pytest.Pytester,
                                             monkeypatch: pytest.MonkeyPatch,
                                             columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = run(pytester, "--retrieval-eval-retriever", FIVE)
    assert result.ret == 0
    text = result.stdout.str().split("= retrieval-eval =")[1]
    table = [line for line in text.splitlines()
             if line.startswith(("question type", "recall", "overall", "multi-session"))]
    assert table and all(len(line) <= max(columns, 56) for line in table)
    heads = [line for line in table if line.startswith("recall@k")]
    shown = " ".join(heads).split()
    assert all(name in shown for name in FIVE.split(","))  # every retriever, in some block
    if columns >= 200:
        assert len(heads) == 1  # all five fit side by side


def test_table_lines_split_into_blocks() -> None:
    report = make_report({name: [("q1", "multi-session", 0.5)] for name in FIVE.split(",")},
                         ks=(1, 5, 10))
    lines = table_lines(report["summary"], report["retrievers"], report["ks"], width=80)
    assert max(len(line) for line in lines) <= 80
    heads = [line for line in lines if line.startswith("recall@k")]
    assert [h.split()[1:] for h in heads] == [["hybrid", "semantic"], ["fts", "bm25"],
                                             ["oracle"]]
    wide = table_lines(report["summary"], report["retrievers"], report["ks"])
    assert [line.split()[1:] for line in wide if line.startswith("recall@k")] == [
        FIVE.split(",")]
    one = table_lines(report["summary"], ["hybrid"], report["ks"], width=80)
    assert max(len(line) for line in one) <= 80
    assert [line.split()[0] for line in one if line.endswith("hybrid")] == [
        "recall@k", "recall_any@k", "recall_all@k", "ndcg_any@k"]  # a block per family
    compact = table_lines(report["summary"], ["hybrid"], report["ks"], width=200)
    assert compact[0].startswith("hybrid: R@k recall@k")  # its caption (issue 48)
    assert compact[1].startswith("question type")


def test_markdown_bolds_the_best_value_per_row() -> None:
    report = make_report({"a": [("q1", "multi-session", 0.5), ("q2", "temporal-reasoning", 1)],
                          "b": [("q1", "multi-session", 1.0), ("q2", "temporal-reasoning", 1)]},
                         ks=(1,), protocol="sessions")
    text = markdown.summary_markdown(report)
    assert text.splitlines()[0].endswith("· protocol sessions")
    assert "| temporal-reasoning | 1 | 1.000 | 1.000 |" in text  # a tie: no bold (issue 22)
    assert "| multi-session | 1 | 0.500 | **1.000** |" in text
    assert text.count("#### ") == 4  # one table per metric family, ndcg_any included
    single: dict[str, Any] = make_report({"a": [("q1", "multi-session", 0.5)]}, ks=(1,))
    assert "**0.500**" not in markdown.summary_markdown(single)  # nothing to beat


def test_under_xdist_the_controller_compares_and_items_keep_their_properties(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, hybrid_base: Path) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # whole lines, tmp paths and all (test_fit_lines)
    base = hybrid_base
    xml = pytester.path / "junit.xml"
    out = pytester.path / "new.json"
    result = run(pytester, "-n", "2", "--retrieval-eval-compare", str(base),
                 f"--junitxml={xml}", "-o", "junit_family=xunit1",
                 "--retrieval-eval-json", str(out))
    assert result.ret == 0
    assert result.stdout.str().count("compare: base ") == 1  # the controller alone
    assert json.loads(out.read_text())["comparison"]["matched"] == 15
    recall5 = [p for p in ET.parse(xml).getroot().iter("property")
               if p.get("name") == "recall@5"]
    assert len(recall5) == 15


def test_markdown_file_mode_follows_the_umask(tmp_path: Path) -> None:
    from pytest_retrieval_eval.reporting.publish import publish_markdown

    old = os.umask(0o002)
    try:
        lines = publish_markdown(make_report({"a": [("q1", "multi-session", 1.0)]}),
                                 tmp_path / "s.md", step_summary=False)
    finally:
        os.umask(old)
    assert lines == [f"Markdown summary: {tmp_path / 's.md'}"]
    assert stat.S_IMODE((tmp_path / "s.md").stat().st_mode) == 0o664


def test_reports_write_through_symlinks_and_a_fifo_job_summary_never_hangs(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23.3 and 23.8: a symlinked report is written at its target; a FIFO as
    $GITHUB_STEP_SUMMARY is one line, the run ends and its JSON report is written."""
    monkeypatch.setenv("COLUMNS", "400")
    real_json, real_md = pytester.path / "real.json", pytester.path / "real.md"
    real_json.write_text('{"schema_version": 1, "stale": true}')  # the plugin's own (43.11)
    real_md.write_text(f"{MARKDOWN_MARKER}\nstale")
    (pytester.path / "link.json").symlink_to(real_json)
    (pytester.path / "link.md").symlink_to(real_md)
    fifo = pytester.path / "summary-fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))
    result = pytester.runpytest_subprocess(
        "-W", "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval", "--no-model",
        "--retrieval-eval-retriever", "oracle", "--retrieval-eval-json", "link.json",
        "--retrieval-eval-markdown", "link.md", timeout=120)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*error: job summary ($GITHUB_STEP_SUMMARY) *summary-fifo "
                                 "cannot be written (it is a FIFO (named pipe), not a regular "
                                 "file); point $GITHUB_STEP_SUMMARY at a file"])
    assert json.loads(real_json.read_text())["retrievers"] == ["oracle"]
    assert real_md.read_text().startswith(f"{MARKDOWN_MARKER}\n**retrieval-eval**")
    assert (pytester.path / "link.json").is_symlink() and (pytester.path / "link.md").is_symlink()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("option", ["--retrieval-eval-json", "--retrieval-eval-markdown"])
def test_a_fifo_as_the_report_path_is_refused_before_any_work(
        pytester: pytest.Pytester, option: str) -> None:
    """The writer would refuse it at the end of the run; the option check does at its start."""
    fifo = pytester.path / "pipe"
    os.mkfifo(fifo)
    result = run(pytester, option, str(fifo))
    assert result.ret == USAGE_ERROR
    match_errors(result.stderr.str(), [f"ERROR: {option} {fifo}: *a FIFO (named pipe), not a "
                                 "regular file; give a file path"])
    assert "passed" not in result.stdout.str()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_attach_comparison_never_raises(monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    """Issue 23.5: whatever the comparison raises, the run keeps its report and one line."""
    from pytest_retrieval_eval.reporting import compare, publish

    def broken(*args: object, **kwargs: object) -> dict[str, object]:
        raise KeyError("ks")

    monkeypatch.setattr(compare, "compare_reports", broken)
    report: dict[str, object] = {}
    publish.attach_comparison(report, {}, tmp_path / "base.json")
    assert report["comparison"] == {"refused": f"{tmp_path / 'base.json'}: KeyError: 'ks'"}
