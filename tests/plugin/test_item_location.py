"""Items are located at the dataset file and the question's instance index (issue 29): a
report names a file a person can open, not ``.`` line 0; node ids stay as they are."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.lme_factory import make_instance, write_dataset

QUESTIONS = [("q1", "multi-session"), ("q2", "multi-session"), ("q3", "temporal-reasoning")]

SKIP_Q3 = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if "::q3::" in item.nodeid:
            item.add_marker(pytest.mark.skip(reason="q3 is out"))
"""


@pytest.fixture
def data(pytester: pytest.Pytester, isolated_cache: Path) -> Path:
    return write_dataset(pytester.path / "data" / "lme.json", [
        make_instance(qid, question_type=qtype, n_sessions=3) for qid, qtype in QUESTIONS])


def run(pytester: pytest.Pytester, data: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:randomly", "-W",
                              "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval",
                              "--no-model", f"--retrieval-eval-data={data}",
                              "--retrieval-eval-retriever", "bm25", *args)


def test_a_skipped_line_names_the_dataset_file(pytester: pytest.Pytester, data: Path) -> None:
    pytester.makeconftest(SKIP_Q3)
    result = run(pytester, data, "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] data/lme.json*: q3 is out"])
    assert not [line for line in result.stdout.lines if " .:" in line]


def test_junit_xunit1_file_is_the_dataset_and_line_the_index(pytester: pytest.Pytester,
                                                              data: Path) -> None:
    xml = pytester.path / "x.xml"
    result = run(pytester, data, "-o", "junit_family=xunit1", f"--junitxml={xml}")
    result.assert_outcomes(passed=3)
    got = sorted((c.get("classname"), c.get("file"), c.get("line"))
                 for c in ET.parse(xml).getroot().iter("testcase"))
    assert got == [("retrieval-eval.multi-session.q1", "data/lme.json", "0"),
                   ("retrieval-eval.multi-session.q2", "data/lme.json", "1"),
                   ("retrieval-eval.temporal-reasoning.q3", "data/lme.json", "2")]


def test_node_ids_are_unchanged(pytester: pytest.Pytester, data: Path) -> None:
    result = run(pytester, data, "--co", "-q")
    assert "retrieval-eval::multi-session::q1::bm25" in result.stdout.lines


def test_a_dataset_outside_the_rootdir_is_located_as_pytest_shows_such_paths(
        pytester: pytest.Pytester, isolated_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = write_dataset(tmp_path_factory.mktemp("elsewhere") / "lme.json", [
        make_instance(qid, question_type=qtype, n_sessions=3) for qid, qtype in QUESTIONS])
    pytester.makeconftest(SKIP_Q3)
    result = run(pytester, outside, "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    line = next(line for line in result.stdout.lines if line.startswith("SKIPPED"))
    assert "lme.json" in line and " .:" not in line


def test_under_xdist_workers_report_the_same_location(pytester: pytest.Pytester,
                                                      data: Path) -> None:
    pytest.importorskip("xdist")
    xml = pytester.path / "x.xml"
    result = run(pytester, data, "-n", "2", "-o", "junit_family=xunit1", f"--junitxml={xml}")
    result.assert_outcomes(passed=3)
    assert sorted((c.get("file"), c.get("line"))
                  for c in ET.parse(xml).getroot().iter("testcase")) == [
        ("data/lme.json", "0"), ("data/lme.json", "1"), ("data/lme.json", "2")]
