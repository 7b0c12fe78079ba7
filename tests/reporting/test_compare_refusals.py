"""Reliability III (issue 23, items 2, 5 and 6): a report compare cannot trust is refused in one
line naming the pair and the field, never compared into a "significant" change; every report
file is read with the dataset path's guards (regular file, bounded size and nesting)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting import compare as cmp
from tests.support.compare_factory import make_report, write_report
from tests.support.reliability_support import joined_errors

REFUSED = 4


def report() -> dict[str, Any]:
    return make_report({"hybrid": [("q1", "multi-session", 0.5), ("q2", "temporal-reasoning",
                                                                    1.0)],
                        "semantic": [("q1", "multi-session", 0.0)]})


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, bad: dict[str, Any] | str,
            *, as_base: bool = False) -> str:
    """``compare`` of a good report with ``bad``: exit 4, nothing on stdout, one stderr line."""
    good = write_report(tmp_path / "good.json", report())
    path = tmp_path / "bad.json"
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad), encoding="utf-8")
    args = [str(path), str(good)] if as_base else [str(good), str(path)]
    code, out, err = run_cli(capsys, "compare", *args)
    assert (code, out) == (REFUSED, "")
    assert err.count("\n") == 1 and err.startswith("retrieval-eval: error: report ")
    assert "Traceback" not in err and "significant" not in err
    return err.strip()


@pytest.mark.parametrize(("value", "shown"), [
    (float("nan"), "NaN"), (None, "null"), ("abc", '"abc"'), (-7, "-7"), (42, "42"),
    (float("inf"), "Infinity"), (True, "true"), ([0.5], "[0.5]"), (1.0000001, "1.0000001")])
@pytest.mark.parametrize("as_base", [False, True])
def test_a_metric_that_is_not_a_number_in_0_1_names_the_pair_and_field(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, value: object, shown: str,
        as_base: bool) -> None:
    bad = report()
    bad["pairs"][1]["metrics"]["recall@5"] = value
    err = refused(capsys, tmp_path, bad, as_base=as_base)
    assert f"pair 1 (q2, hybrid): metrics.recall@5 is {shown}, not a number in [0, 1]" in err


def test_bounds_and_whole_numbers_are_accepted(tmp_path: Path) -> None:
    ok = report()
    ok["pairs"][0]["metrics"].update({"recall@1": 0, "recall@5": 1})  # JSON integers
    ok["pairs"][1]["metrics"]["recall@1"] = 0.0
    assert cmp.load_report(write_report(tmp_path / "ok.json", ok))["pairs"][0]["metrics"]


@pytest.mark.parametrize(("field", "value", "says"), [
    ("ks", ["1", "5"], 'ks holds "1", not a whole number >= 1 (ks ["1", "5"])'),
    ("ks", [[1], 5], "ks holds [1], not a whole number >= 1"),
    ("ks", [0, 5], "ks holds 0, not a whole number >= 1"),
    ("ks", [True], "ks holds true, not a whole number"),
    ("retrievers", [["hybrid"], "semantic"], 'retrievers holds ["hybrid"], not a retriever '
                                             "name"),
    ("retrievers", "hybrid", "no 'retrievers' list"),
    ("schema_version", True, "no 'schema_version' int"),
    ("ks", [], "ks is empty"),
    ("summary", None, "summary is null, not an object"),
    ("summary", {"hybrid": None}, "summary.hybrid is null, not an object"),
    ("summary", {"hybrid": {"overall": {"n": 2, "recall@1": "0.5"}}},
     'summary.hybrid.overall.recall@1 is "0.5", not a number in [0, 1]'),
    ("summary", {"hybrid": {"overall": {"n": -1}}}, "summary.hybrid.overall.n is -1, not a "
                                                    "count"),
])
def test_ks_and_retrievers_of_the_wrong_kind_are_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, field: str, value: object,
        says: str) -> None:
    bad = report()
    bad[field] = value
    assert says in refused(capsys, tmp_path, bad)


def test_a_question_type_that_is_not_a_name_is_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = report()
    bad["pairs"][0]["question_type"] = ["multi-session"]
    assert 'pair 0 (q1, hybrid): question_type is ["multi-session"]' in refused(
        capsys, tmp_path, bad)


def test_a_repeated_pair_is_refused_never_dropped(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = report()
    bad["pairs"].append({**bad["pairs"][0], "metrics": {**bad["pairs"][0]["metrics"]}})
    err = refused(capsys, tmp_path, bad)
    assert "pair 3 (q1, hybrid) repeats pair 0" in err
    assert "never drops one silently" in err


def test_the_api_refuses_the_same_for_a_report_given_as_data() -> None:
    """compare_reports checks both sides too (the in-run compare hands in the run's own
    report as data): NaN is refused, never a p of 0."""
    bad = report()
    bad["pairs"][0]["metrics"]["recall@1"] = float("nan")
    with pytest.raises(cmp.CompareError, match=r"report new: pair 0 \(q1, hybrid\): "
                       r"metrics.recall@1 is NaN"):
        cmp.compare_reports(report(), bad)
    with pytest.raises(cmp.CompareError, match="report base: pair 0"):
        cmp.compare_reports(bad, report())
    with pytest.raises(cmp.CompareError, match="report r: pair 0"):
        cmp.compare_retrievers(bad, "semantic", "hybrid", name="r")


def test_the_comparison_json_is_strict_json(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    a = write_report(tmp_path / "a.json", report())
    b = write_report(tmp_path / "b.json", report())
    code, _, _ = run_cli(capsys, "compare", str(a), str(b), "--json", str(tmp_path / "c.json"))
    assert code == 0

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} in the comparison JSON")

    saved = json.loads((tmp_path / "c.json").read_text(), parse_constant=no_constants)
    assert saved["comparison"]["rows"]["recall@1"][0]["p"] == 1.0


# --------------------------------------------------------------------------- file guards


def test_a_2000_deep_report_is_one_line(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    deep = json.dumps(report())[:-1] + ', "x": ' + "[" * 2000 + "]" * 2000 + "}"
    err = refused(capsys, tmp_path, deep)
    assert "nests JSON more than 64 levels deep (at byte" in err


def test_a_report_past_the_size_limit_is_one_line(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_retrieval_eval.reporting import report_file

    monkeypatch.setattr(report_file, "MAX_REPORT_BYTES", 2000)
    err = refused(capsys, tmp_path, {**report(), "padding": "x" * 3000})
    assert "larger than the 2,000 bytes a report may be" in err


def test_the_documented_limit_is_the_code_s() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "compare.md").read_text(encoding="utf-8")
    assert f"{cmp.MAX_REPORT_BYTES >> 20} MiB" in docs


def test_dev_zero_is_refused_before_any_read(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    good = write_report(tmp_path / "good.json", report())
    code, out, err = run_cli(capsys, "compare", str(good), "/dev/zero")
    assert (code, out) == (REFUSED, "")
    assert "report /dev/zero is a character device, not a regular file" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_compare_of_a_fifo_never_hangs(tmp_path: Path) -> None:
    good = write_report(tmp_path / "good.json", report())
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "pytest_retrieval_eval.cli", "compare",
                           str(good), str(fifo)], capture_output=True, text=True, timeout=60)
    assert done.returncode == REFUSED
    assert done.stderr.strip() == (f"retrieval-eval: error: report {fifo} is a FIFO (named "
                                   "pipe), not a regular file; save the data to a file and "
                                   "pass that file")


# --------------------------------------------------------------------------- in-run base


@pytest.mark.parametrize("case", ["fifo", "deep", "nan", "abc", "repeated"])
def test_an_in_run_base_that_cannot_be_compared_is_one_line(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        case: str) -> None:
    """``--retrieval-eval-compare BASE`` reads BASE through load_report: a FIFO does not hang,
    a 2,000-deep file is no INTERNALERROR, a bad field no traceback at session finish. (Where
    the line shows, before the run or as "comparison refused", is the plugin's choice.)"""
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    base = tmp_path / "base.json"
    good = make_report({"hybrid": [("q1", "multi-session", 1.0)]})
    if case == "fifo":
        os.mkfifo(base)
        says = "is a FIFO (named pipe), not a regular file"
    elif case == "deep":
        base.write_text('{"x": ' + "[" * 2000 + "]" * 2000 + "}")
        says = "nests JSON more than 64 levels deep"
    elif case == "repeated":
        good["pairs"].append(dict(good["pairs"][0]))
        write_report(base, good)
        says = "pair 1 (q1, hybrid) repeats pair 0"
    else:
        good["pairs"][0]["metrics"]["recall@1"] = float("nan") if case == "nan" else "abc"
        write_report(base, good)
        says = "metrics.recall@1 is " + ("NaN" if case == "nan" else '"abc"')
    args = ("-p", "no:randomly", "--retrieval-eval", "--no-model", "--retrieval-eval-compare",
            str(base))
    # A FIFO that hung the read would hang this process too: that case runs in a child
    # under a timeout; the others in-process (what they check is a line, not a process).
    result = (pytester.runpytest_subprocess(*args, timeout=240) if case == "fifo"
              else pytester.runpytest(*args))
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-3000:]
    assert result.ret in (0, 4), text[-3000:]
    # an error is fitted to the terminal (a long tmp path wraps it): read it joined back
    lines = [line for line in joined_errors(text) if says in line]
    assert len(lines) == 1, text[-3000:]


# --------------------------------------------------------------------------- any field, any kind

#: Values of the wrong kind put in each field in turn.
WRONG = [None, [], {}, "x", [1], {"a": 1}, -1, True, 1.5, float("nan")]


def mutations() -> list[tuple[str, Any]]:
    """``(where, value)``: a top-level key, a pair field, a metric, a summary cell, the
    diagnostics, or a stored comparison's part set to a value of the wrong kind."""
    base = report()
    where = [f"top.{key}" for key in base if key != "pairs"]
    where += [f"pair.{key}" for key in base["pairs"][0]]
    where += ["pairs", "pair", "metric", "dataset.sha256", "summary.hybrid",
              "summary.hybrid.overall", "diagnostics", "diagnostics.hybrid",
              "comparison", "comparison.rows", "comparison.changes", "comparison.base",
              "comparison.method"]
    return [(w, v) for w in where for v in WRONG]


def mutated(where: str, value: object) -> dict[str, Any]:
    bad = report()
    bad["comparison"] = cmp.compare_reports(report(), report())
    bad["diagnostics"] = {"hybrid": {"pairs": 2, "no_results": 0, "fewer_than_k": {},
                                     "first_gold": {"top": 5, "pairs_with_gold": 0}}}
    head, _, rest = where.partition(".")
    if head == "top":
        bad[rest] = value
    elif head == "pairs":
        bad["pairs"] = value
    elif head == "pair" and rest:
        bad["pairs"][0][rest] = value
    elif head == "pair":
        bad["pairs"][0] = value
    elif head == "metric":
        bad["pairs"][0]["metrics"]["recall@1"] = value
    else:
        node = bad
        keys = where.split(".")
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return bad


@pytest.fixture(scope="module")
def built_parser() -> argparse.ArgumentParser:
    return cli.build_parser()


@pytest.fixture
def one_parser(built_parser: argparse.ArgumentParser, monkeypatch: pytest.MonkeyPatch) -> None:
    """``retrieval-eval``'s parser built once for the 1,350 commands below, not once a command
    (building it was about half of each one's time). These commands read no option default
    that the environment sets (the cache folder); each still parses its own arguments with it."""
    monkeypatch.setattr(cli, "build_parser", lambda: built_parser)


@pytest.mark.usefixtures("one_parser")
@pytest.mark.parametrize(("where", "value"), mutations())
def test_compare_and_markdown_never_raise_on_a_field_of_the_wrong_kind(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, value: object) -> None:
    """compare (either side, and one report's retrievers) and markdown (alone and as NEW) end
    in their output or one error line: never an exception."""
    good = write_report(tmp_path / "good.json", report())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(mutated(where, value)), encoding="utf-8")
    for args in (["compare", str(good), str(bad)], ["compare", str(bad), str(good)],
                 ["compare", str(bad), "--retrievers", "semantic,hybrid"],
                 ["markdown", str(bad)], ["markdown", str(good), str(bad)]):
        code, out, err = run_cli(capsys, *args)
        assert code in (0, REFUSED), (args, err)
        if code == REFUSED:
            assert err.count("\n") == 1 and out == "", err
