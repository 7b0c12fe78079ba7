"""Columns and headers a run can get wrong silently (issues 22 and 23).

* Recording tests that share a function name (parametrized, or in two files) get a column
  each; ``-n 2`` names and fills them as a serial run does (23.1).
* The custom retriever: no fixture is one usage error before any item; its ``name`` is the
  column when free, ``custom`` stays the selector (22.5).
* The header says what a subset or a deselection left out (21, 22.11); ``-v`` explains a
  chosen or a failed item (22.2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.reliability_support import match_errors

RANK_GOLD_LAST = """
def test_rank(retrieval_eval_pair, retrieval_eval_record):
    pair = retrieval_eval_pair
    rest = [s for s in pair.session_ids if s not in pair.gold]
    retrieval_eval_record((rest + [g for g in pair.gold if g in pair.session_ids]){flip})
"""


@pytest.fixture
def data(pytester: pytest.Pytester, isolated_cache: Path,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", "200")
    return write_dataset(pytester.path / "lme.json", [
        make_instance(f"q{i}", question_type=t, n_sessions=6)
        for i, t in enumerate(["multi-session", "multi-session", "temporal-reasoning",
                               "knowledge-update"], start=1)])


def run(pytester: pytest.Pytester, data: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-W",
                              "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval",
                              "--no-model", f"--retrieval-eval-data={data}", *args)


def report_of(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def overall(report: dict[str, Any], name: str) -> float:
    return float(report["summary"][name]["overall"]["recall@5"])


def test_two_files_with_one_test_name_get_a_column_each(pytester: pytest.Pytester,
                                                        data: Path) -> None:
    """Gold last (a) and gold first (b): one column would mix them."""
    first = pytester.mkdir("a").joinpath("test_rank.py")
    first.write_text(RANK_GOLD_LAST.format(flip=""))
    second = pytester.mkdir("b").joinpath("test_rank.py")
    second.write_text(RANK_GOLD_LAST.format(flip="[::-1]"))
    serial = pytester.path / "serial.json"
    result = run(pytester, data, "--retrieval-eval-retriever", "oracle",
                 f"--retrieval-eval-json={serial}", "--import-mode=importlib")
    result.assert_outcomes(passed=12)
    report = report_of(serial)
    assert report["retrievers"] == ["oracle", "a/test_rank.py::test_rank",
                                    "b/test_rank.py::test_rank"]
    assert overall(report, "b/test_rank.py::test_rank") == 1.0
    assert overall(report, "a/test_rank.py::test_rank") < 1.0
    parallel = pytester.path / "parallel.json"
    run(pytester, data, "--retrieval-eval-retriever", "oracle", "-n", "2",
        f"--retrieval-eval-json={parallel}", "--import-mode=importlib").assert_outcomes(
            passed=12)
    assert report_of(parallel)["summary"] == report["summary"]


def test_a_parametrized_recording_test_gets_a_column_per_parameter(
        pytester: pytest.Pytester, data: Path) -> None:
    pytester.makepyfile(test_p="""
import pytest

@pytest.mark.parametrize("good", [True, False])
def test_p(retrieval_eval_pair, retrieval_eval_record, good):
    pair = retrieval_eval_pair
    gold = [g for g in pair.gold if g in pair.session_ids]
    rest = [s for s in pair.session_ids if s not in gold]
    retrieval_eval_record(gold + rest if good else rest + gold)
""")
    out = pytester.path / "r.json"
    run(pytester, data, "--retrieval-eval-retriever", "oracle",
        f"--retrieval-eval-json={out}").assert_outcomes(passed=12)
    report = report_of(out)
    assert report["retrievers"] == ["oracle", "test_p[True]", "test_p[False]"]
    assert overall(report, "test_p[True]") == 1.0 > overall(report, "test_p[False]")


def test_a_test_named_like_a_retriever_is_named_by_its_node_id(pytester: pytest.Pytester,
                                                               data: Path) -> None:
    pytester.makepyfile(test_x=RANK_GOLD_LAST.format(flip="").replace("test_rank", "oracle"))
    pytester.makepyfile(test_y=RANK_GOLD_LAST.format(flip=""))
    out = pytester.path / "r.json"
    pytester.makeini("[pytest]\npython_functions = test_* oracle\n")
    result = run(pytester, data, "--retrieval-eval-retriever", "oracle",
                 f"--retrieval-eval-json={out}")
    result.assert_outcomes(passed=12)
    report = report_of(out)
    assert report["retrievers"] == ["oracle", "test_x.py::oracle", "test_rank"]
    assert overall(report, "oracle") == 1.0 > overall(report, "test_x.py::oracle")


CUSTOM = """
import pytest

class Named:
    name = {name!r}
    needs_vectors = False

    def rank(self, persona, query, limit):
        return list(persona.session_ids)[:limit]

@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever():
    return Named()
"""


@pytest.mark.parametrize(("name", "column"), [("word-overlap", "word-overlap"),
                                              ("hybrid", "custom"), ("", "custom")])
def test_the_custom_retriever_names_its_column_when_the_name_is_free(
        pytester: pytest.Pytester, data: Path, tiny_model_dir: Path, name: str,
        column: str) -> None:
    pytester.makeconftest(CUSTOM.format(name=name))
    out = pytester.path / "r.json"
    result = pytester.runpytest(
        "-p", "no:randomly", "--retrieval-eval", f"--retrieval-eval-model={tiny_model_dir}",
        f"--retrieval-eval-data={data}", "--retrieval-eval-retriever", "bm25,custom",
        f"--retrieval-eval-json={out}", "-k", "custom")
    result.assert_outcomes(passed=4, deselected=4)  # custom stays the selector
    report = report_of(out)
    assert report["retrievers"] == [column]  # bm25, deselected whole: no column (38.12)
    assert {p["retriever"] for p in report["pairs"]} == {column}
    assert report["run"]["items_selected"] == report["run"]["items_run"] == 4
    result.stdout.fnmatch_lines([f"retrievers: {column}  k: 1, 5, 10"])


def test_a_custom_retriever_without_its_fixture_is_one_usage_error(
        pytester: pytest.Pytester, data: Path) -> None:
    result = run(pytester, data, "--retrieval-eval-retriever", "bm25,custom")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(), ["ERROR: retriever 'custom' needs a session fixture named "
                                 "retrieval_eval_custom_retriever*"])
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()


def test_the_header_of_a_subset_and_of_a_deselection(pytester: pytest.Pytester,
                                                     data: Path) -> None:
    sub = run(pytester, data, "--retrieval-eval-retriever", "bm25",
              "--retrieval-eval-subset", "3")
    sub.stdout.fnmatch_lines(["pairs: 3 scored of 4 usable, 3 in the subset; skipped 0 "
                              "abstention, 0 rejected, 0 not selected",
                              "subset: 3 of 4 usable pairs*"])
    dropped = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle",
                  "--deselect", "retrieval-eval::multi-session::q1::bm25")
    dropped.assert_outcomes(passed=7, deselected=1)
    dropped.stdout.fnmatch_lines(["pairs: 4 scored (3 by every retriever) of 4 usable*",
                                  "multi-session * 2* *", "overall * 4* *",
                                  "[*]: the retrievers of this row scored different numbers*"])


def test_verbose_explains_a_chosen_item_and_a_failed_one(pytester: pytest.Pytester,
                                                         data: Path) -> None:
    chosen = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle", "-v",
                 "retrieval-eval::temporal-reasoning::q3::bm25")
    chosen.assert_outcomes(passed=1)
    chosen.stdout.fnmatch_lines(["explain q3 [bm25]", "question q3 (temporal-reasoning*",
                                 "gold: *", "bm25: top 10*"])
    quiet = run(pytester, data, "--retrieval-eval-retriever", "bm25",
                "retrieval-eval::temporal-reasoning::q3::bm25")
    assert "explain q3" not in quiet.stdout.str()


def test_plot_tells_base_from_new_by_the_reports_own_stamp(pytester: pytest.Pytester,
                                                           data: Path) -> None:
    """A report records when it was made (run.created), so copying an old base (which makes
    its file the newer one) does not trip plot's check of the argument order."""
    import os
    import shutil
    import sys
    import time

    def plot(*reports: Path) -> int:  # a child process: matplotlib stays out of this one
        return pytester.run(sys.executable, "-m", "pytest_retrieval_eval.cli", "plot",
                            *map(str, reports), "-o", str(pytester.path / "d.png")).ret

    base, new = pytester.path / "base.json", pytester.path / "new.json"
    run(pytester, data, "--retrieval-eval-retriever", "bm25", f"--retrieval-eval-json={base}")
    time.sleep(0.01)
    run(pytester, data, "--retrieval-eval-retriever", "bm25", f"--retrieval-eval-json={new}")
    assert report_of(base)["run"]["created"] < report_of(new)["run"]["created"]
    copied = pytester.path / "copied-base.json"
    shutil.copy(base, copied)
    os.utime(new, (1, 1))  # the new report's file is now the oldest
    assert plot(copied, new) == 0
    assert plot(new, copied) == 4


@pytest.mark.parametrize(("full", "own"), [
    ("multi-session::q1", ""), ("multi-session::q1-good", "good"),
    ("good-multi-session::q1", "good"), ("a-multi-session::q1-b", "a-b"), ("", "")])
def test_a_tests_own_parameters_are_its_id_without_the_pairs(full: str, own: str) -> None:
    from types import SimpleNamespace

    from pytest_retrieval_eval.run.record_columns import _own_params

    item = SimpleNamespace(callspec=SimpleNamespace(id=full))
    assert _own_params(item, "multi-session::q1") == own
