"""Reliability IV, through the plugin and the console script: no output over an input
(27.7), crashed xdist workers counted (27.10), dataset text escaped on every output (27.11)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_retrieval_eval.cli import console as cli
from tests.support.compare_factory import make_report, write_report
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.reliability_support import run_plugin, usage_error_line

REFUSED = 4


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(tmp_path / "cache"))


# ------------------------------------------------------------------ 27.7 outputs apart


def test_the_report_over_its_dataset_is_refused_before_any_work(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "mydata.json", [make_instance("q1"), make_instance("q2")])
    before = data.read_bytes()
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-data", str(data),
                        "--retrieval-eval-json", str(data))
    usage_error_line(result, f"--retrieval-eval-json {data} is the file "
                     "--retrieval-eval-data names")
    assert data.read_bytes() == before and not (tmp_path / "cache").exists()


def test_a_hard_link_of_the_dataset_is_refused(pytester: pytest.Pytester,
                                               tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "mydata.json", [make_instance("q1")])
    os.link(data, tmp_path / "alias.json")
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-data", str(data),
                        "--retrieval-eval-markdown", str(tmp_path / "alias.json"))
    usage_error_line(result, "--retrieval-eval-markdown", "--retrieval-eval-data names")


def test_json_and_markdown_at_one_path_are_refused(pytester: pytest.Pytester,
                                                   tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-json", str(out),
                        "--retrieval-eval-markdown", str(tmp_path / "." / "out.txt"))
    usage_error_line(result, "--retrieval-eval-markdown", "--retrieval-eval-json names")
    assert not out.exists()


def test_the_report_over_its_base_is_refused(pytester: pytest.Pytester,
                                             tmp_path: Path) -> None:
    base = write_report(tmp_path / "base.json", make_report({}))
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-compare", str(base),
                        "--retrieval-eval-json", str(base))
    usage_error_line(result, "--retrieval-eval-json", "--retrieval-eval-compare names")


def test_the_job_summary_over_the_json_is_refused(pytester: pytest.Pytester,
                                                  tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "r.json"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(out))
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-json", str(out))
    usage_error_line(result, "$GITHUB_STEP_SUMMARY", "--retrieval-eval-json names")
    ok = run_plugin(pytester, "--no-model", "--retrieval-eval-json", str(out),
                    "--retrieval-eval-no-step-summary", "--co", "-q")
    assert ok.ret == 0, ok.stdout.str() + ok.stderr.str()


@pytest.mark.parametrize("command", ["compare", "plot"])
def test_compare_and_plot_never_write_over_their_reports(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    base = write_report(tmp_path / "b.json", make_report({}))
    new = write_report(tmp_path / "n.json", make_report({}))
    before = new.read_bytes()
    flag = "--json" if command == "compare" else "-o"
    code = cli.main([command, str(base), str(new), flag, str(new)])
    err = capsys.readouterr().err
    assert code == REFUSED and len(err.splitlines()) == 1, err
    assert f"{flag} {new} is the report {new}" in err
    assert new.read_bytes() == before and json.loads(before)


# ------------------------------------------------------------- 27.10 crashed workers


def test_an_item_lost_to_a_crashed_worker_is_an_error(pytester: pytest.Pytester) -> None:
    data = write_dataset(pytester.path / "d.json", [make_instance(f"q{i}") for i in range(4)])
    pytester.makeconftest("""
        import os

        def pytest_runtest_call(item):
            if hasattr(item.config, "workerinput") and "::q2::" in item.nodeid:
                os._exit(1)  # the worker dies as under the OOM killer or kill -9
    """)
    out = pytester.path / "r.json"
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-data", str(data),
                        "--retrieval-eval-retriever", "bm25", "-n", "2",
                        "--retrieval-eval-json", str(out))
    result.assert_outcomes(failed=1, passed=3)
    report = json.loads(out.read_text())
    assert [(e["retriever"], e["question_id"]) for e in report["errors"]] == [("bm25", "q2")]
    assert "crashed while running" in report["errors"][0]["error"]
    result.stdout.fnmatch_lines(["errors: 1 item(s) failed; see their failures above"])
