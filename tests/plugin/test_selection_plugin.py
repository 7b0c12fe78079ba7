"""Selecting the plugin's items (issues 37.7, 38.12, 38.14), end to end with pytester.

- Every item carries ``retrieval_eval(retriever=COLUMN, question_type=TYPE,
  question_id=ID)``: pytest 8.3+'s ``-m "retrieval_eval(retriever='bm25')"`` selects one
  column exactly, where ``-k fts`` is a substring match (``fts+mode:or`` too). Older pytest
  versions still carry the marker (plain ``-m retrieval_eval`` works there).
- ``cmd:NAME=COMMAND`` names a command's column up front: ``-k NAME`` and the marker select
  it at collection, before any command runs; hello's name is then not the column.
- A column whose every item was deselected is left out of the summary and the JSON; one
  whose items ran (failed or skipped) stays.
- Turn granularity's refusal of a question without a has_answer turn names a question the
  run scores, in the summary and when the question is named by node id.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.reliability_support import match_errors

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "support" / "fake_store.py"
SAMPLE_PAIRS = 15  # the bundled sample's usable pairs
QUESTIONS = [("q1", "multi-session"), ("q2", "temporal-reasoning"), ("q3", "knowledge-update")]
#: -m with keyword arguments: pytest 8.3 and later (pytest's changelog, 8.3.0).
KEYWORD_M = tuple(int(p) for p in pytest.__version__.split(".")[:2]) >= (8, 3)

pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.fixture
def data(pytester: pytest.Pytester) -> Path:
    return write_dataset(pytester.path / "lme.json", [
        make_instance(qid, question_type=qtype, n_sessions=3) for qid, qtype in QUESTIONS])


def run(pytester: pytest.Pytester, data: Path | None, *args: str
        ) -> tuple[pytest.RunResult, dict[str, Any]]:
    """A run on ``data``, or on the bundled sample (its vectors are shipped: a ``cmd:`` store
    needs them) for None."""
    out = pytester.path / "report.json"
    if out.exists():
        out.unlink()
    dataset = () if data is None else (f"--retrieval-eval-data={data}",)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-W",
                                "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval",
                                "--no-model", *dataset, f"--retrieval-eval-json={out}", *args)
    report: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    return result, report


def summary_of(result: pytest.RunResult) -> str:
    """The run's retrieval-eval section (the header before it names every retriever)."""
    text = result.stdout.str()
    return text[text.index("= retrieval-eval ="):]


def fake(mode: str, name: str | None = None) -> str:
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} {mode}"
    return f"cmd:{name}={command}" if name else f"cmd:{command}"


MARKS = """
import json

def pytest_collection_finish(session):
    marks = [dict(item.get_closest_marker("retrieval_eval").kwargs) for item in session.items]
    with open("marks.json", "w") as f:
        json.dump(marks, f)
"""


def test_every_item_carries_its_column_type_and_question_in_its_marker(
        pytester: pytest.Pytester, data: Path) -> None:
    """On every pytest version (the oldest pytest has no keyword -m, but the marks are the
    same); a cmd: store named up front carries that name before it ever ran."""
    pytester.makeconftest(MARKS)
    result, _ = run(pytester, data, "--retrieval-eval-retriever=bm25,oracle", "--co")
    assert result.ret == 0, result.stdout.str()
    marks = json.loads((pytester.path / "marks.json").read_text())
    assert marks == [{"retriever": name, "question_type": qtype, "question_id": qid}
                     for qid, qtype in QUESTIONS for name in ("bm25", "oracle")]
    result, _ = run(pytester, None, f"--retrieval-eval-retriever={fake('ok', 'mine')}",
                    "--co", "-k", "2819ce0a")
    assert result.ret == 0, result.stdout.str()
    assert json.loads((pytester.path / "marks.json").read_text()) == [
        {"retriever": "mine", "question_type": "knowledge-update", "question_id": "2819ce0a"}]
    plain, _ = run(pytester, data, "--retrieval-eval-retriever=bm25", "-m", "retrieval_eval")
    plain.assert_outcomes(passed=3)


@pytest.mark.skipif(not KEYWORD_M, reason="-m reads keyword arguments from pytest 8.3")
def test_m_with_a_retriever_selects_one_column_exactly(pytester: pytest.Pytester,
                                                       data: Path) -> None:
    both = "--retrieval-eval-retriever=fts,fts+mode:or"
    by_k, _ = run(pytester, data, both, "-k", "fts")
    by_k.assert_outcomes(passed=6)  # a substring: both columns
    exact, report = run(pytester, data, both, "-m", "retrieval_eval(retriever='fts')")
    exact.assert_outcomes(passed=3, deselected=3)
    assert report["retrievers"] == ["fts"]
    one, _ = run(pytester, data, both, "-m",
                 "retrieval_eval(retriever='fts+mode:or', question_type='knowledge-update')")
    one.assert_outcomes(passed=1, deselected=5)


def test_a_command_named_up_front_is_that_column_and_selects_with_k(
        pytester: pytest.Pytester) -> None:
    selector = fake("ok", "mine")
    picked, report = run(pytester, None, f"--retrieval-eval-retriever=bm25,{selector}",
                         "-k", "mine")
    picked.assert_outcomes(passed=SAMPLE_PAIRS, deselected=SAMPLE_PAIRS)
    assert report["retrievers"] == ["mine"]  # hello says "fake-ok": the given name stays
    assert {(p["retriever"], p["selector"]) for p in report["pairs"]} == {("mine", selector)}
    by_hello, _ = run(pytester, None, f"--retrieval-eval-retriever=bm25,{fake('ok')}",
                      "-k", "fake-ok")
    by_hello.assert_outcomes(deselected=2 * SAMPLE_PAIRS)  # hello's name: known once it ran


def test_a_taken_name_given_up_front_is_one_usage_error(pytester: pytest.Pytester) -> None:
    result, _ = run(pytester, None, f"--retrieval-eval-retriever=bm25,{fake('ok', 'bm25')}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(), ["ERROR: retriever 'cmd:bm25=*': the name 'bm25' is "
                                       "taken*cmd:OTHER_NAME=COMMAND"])


SKIP_BM25 = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "bm25":
            item.add_marker(pytest.mark.skip(reason="not today"))
"""


def test_a_column_deselected_whole_is_left_out_and_one_that_ran_stays(
        pytester: pytest.Pytester, data: Path) -> None:
    sliced, report = run(pytester, data, "--retrieval-eval-retriever=bm25,oracle", "-k",
                         "oracle")
    sliced.assert_outcomes(passed=3, deselected=3)
    assert report["retrievers"] == ["oracle"] and list(report["summary"]) == ["oracle"]
    assert "bm25" not in summary_of(sliced)  # no empty column ("-", n as "3*")
    retrievers = f"--retrieval-eval-retriever=bm25,oracle,{fake('error', 'broken')}"
    result, report = run(pytester, None, retrievers, "-k", "not bm25")
    result.assert_outcomes(passed=SAMPLE_PAIRS, failed=SAMPLE_PAIRS, deselected=SAMPLE_PAIRS)
    assert report["retrievers"] == ["oracle", "broken"]  # failed: kept, as before
    table = summary_of(result)
    assert "bm25" not in table and "broken" in table and "oracle" in table
    pytester.makeconftest(SKIP_BM25)
    skipped, report = run(pytester, data, "--retrieval-eval-retriever=bm25,oracle")
    skipped.assert_outcomes(passed=3, skipped=3)
    assert report["retrievers"] == ["bm25", "oracle"]  # its items ran (skipped): kept
    nothing, report = run(pytester, data, "--retrieval-eval-retriever=bm25,oracle",
                          "-k", "nothing_at_all")
    nothing.assert_outcomes(deselected=6)
    assert report["retrievers"] == ["bm25", "oracle"]  # nothing chosen: the run's list


def test_only_a_recording_test_selected_leaves_the_plugins_columns_out(
        pytester: pytest.Pytester, data: Path) -> None:
    pytester.makepyfile(test_user="""
        def test_mine(retrieval_eval_pair, retrieval_eval_record):
            retrieval_eval_record(list(retrieval_eval_pair.session_ids))
    """)
    result, report = run(pytester, data, "--retrieval-eval-retriever=bm25,oracle", "-k",
                         "test_mine")
    result.assert_outcomes(passed=3, deselected=6)
    assert report["retrievers"] == ["test_mine"]
    assert "oracle" not in summary_of(result)


@pytest.fixture
def unmarked(pytester: pytest.Pytester) -> Path:
    """q2's gold session marks no has_answer turn: turn granularity cannot score it."""
    instances = [make_instance(qid, question_type=qtype, n_sessions=3)
                 for qid, qtype in QUESTIONS]
    for session in instances[1]["haystack_sessions"]:
        for turn in session:
            turn.pop("has_answer", None)
    return write_dataset(pytester.path / "unmarked.json", instances)


def test_turn_granularitys_refusal_says_why_and_names_a_question_it_scores(
        pytester: pytest.Pytester, unmarked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    turn = ("--retrieval-eval-granularity=turn", "--retrieval-eval-retriever=bm25")
    result, report = run(pytester, unmarked, *turn, "-k", "q2")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout.str()
    reason = ("no turn of its gold sessions carries has_answer: true, which turn granularity "
              "needs to name the gold turns; mark the evidence turns, or score sessions "
              "(--retrieval-eval-granularity=session); turn granularity cannot score it: "
              "-k q1 picks a question (multi-session) it scores")
    assert report["rejections"] == [{"index": 1, "question_id": "q2", "reason": reason}]
    assert f"instance 1 (q2): {reason}" in result.stdout.str()
    by_id, _ = run(pytester, unmarked, *turn, "retrieval-eval::temporal-reasoning::q2")
    assert by_id.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(by_id.stderr.str(), [
        "ERROR: not found: retrieval-eval::temporal-reasoning::q2: question q2 is not scored "
        f"in this run: {reason}"])
    sessions, _ = run(pytester, unmarked, "--retrieval-eval-retriever=bm25", "-k", "q2")
    sessions.assert_outcomes(passed=1, deselected=2)  # session granularity scores it
