"""Reliability IV, through the plugin and the console script: no output over an input
(27.7), crashed xdist workers counted (27.10), dataset text escaped on every output (27.11)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.cli import console as cli
from tests.support.compare_factory import make_report, write_report
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.reliability_support import joined_errors, run_plugin, usage_error_line

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
    err = "\n".join(joined_errors(capsys.readouterr().err, "retrieval-eval"))  # one message
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


# ------------------------------------------------------------ 27.11 escaped dataset text

HOSTILE = ["q\n## INJECTED\n", "<img src=x onerror=alert(1)>", "[click](http://x.invalid)",
           "a`b``c", "`edge`", "esc\x1b[31mred\x1b[0m", "rtl\u202egnp.exe"]


def _live_markdown(text: str) -> list[str]:
    """What of ``text`` GitHub would render live outside code spans: headings, HTML, links."""
    import re

    outside = re.sub(r"(`+)(?:(?!\1).)*?\1", "", text)  # code spans (one line each) removed
    found = [line for line in text.splitlines() if line.startswith("#") and "INJECTED" in line]
    found += re.findall(r"<img[^>]*>|\[click\]\(", outside)
    return found


def test_markdown_holds_hostile_ids_as_code_spans() -> None:
    from pytest_retrieval_eval.reporting import compare as cmp_mod
    from pytest_retrieval_eval.reporting import markdown

    rows = [(q, "multi-session", 0.0) for q in HOSTILE]
    better = [(q, t, 1.0) for q, t, _ in rows]
    result = cmp_mod.compare_reports(make_report({"h": rows}, ks=(5,)),
                                     make_report({"h": [*better, ("new\n# X", "multi-session",
                                                                  1.0)]}, ks=(5,)))
    text = markdown.comparison_markdown(result)
    assert _live_markdown(text) == []
    assert "\x1b" not in text and "\u202e" not in text
    assert "`` a`b``c ``" not in text and "```a`b``c```" in text  # fenced past its runs
    assert "`` `edge` ``" in text  # padded: it starts and ends with a backtick
    assert "`q\\n## INJECTED\\n`" in text


def test_code_span_in_a_table_escapes_the_pipe() -> None:
    from pytest_retrieval_eval.reporting.markdown import code

    assert code("a|b", in_table=True) == "`a\\|b`" and code("a|b") == "`a|b`"
    assert code("plain") == "`plain`"


def test_terminal_lines_escape_control_characters(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_retrieval_eval.reporting import compare as cmp_mod
    from pytest_retrieval_eval.reporting.compare_lines import comparison_lines
    from pytest_retrieval_eval.reporting.report import rejection_lines

    lines = rejection_lines([{"index": 3, "question_id": "x\x1b]0;pwned\x07\n",
                              "reason": "bad\rline"}])
    assert lines[1] == "  instance 3 (x\\x1b]0;pwned\\x07\\n): bad\\rline"
    rows = [("esc\x1b[2J", "multi-session", 0.0)]
    result = cmp_mod.compare_reports(make_report({"h": rows}, ks=(5,)),
                                     make_report({"h": [(rows[0][0], rows[0][1], 1.0)]},
                                                 ks=(5,)))
    shown = "\n".join(comparison_lines(result, verbose=True))
    assert "\x1b" not in shown and "esc\\x1b[2J" in shown


def test_prep_warning_escapes_the_question_id(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = make_instance("bad\x1b[2Jid")
    bad["question_type"] = "no-such-type"
    data = write_dataset(tmp_path / "d.json", [make_instance("q1"), bad])
    cli.main(["prep", "--data", str(data), "--cache", str(tmp_path / "cache"),
              "--model", str(tmp_path / "no-model"), "--no-progress"])
    err = capsys.readouterr().err
    assert "rejected" in err and "bad\\x1b[2Jid" in err and "\x1b" not in err, err


def test_explain_escapes_the_question_and_its_ids() -> None:
    from pytest_retrieval_eval.reporting.explain import explain_lines

    report = make_report({"h": [("q\x1b1", "multi-session", 1.0)]}, ks=(1,))
    report["pairs"][0]["question"] = "what\nnext\x1b[2J"
    text = "\n".join(explain_lines(report, "q\x1b1", width=None))
    assert "\x1b" not in text and "what\\nnext\\x1b[2J" in text
