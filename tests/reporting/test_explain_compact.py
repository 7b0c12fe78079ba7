"""Issue 35, item 3: the explain facts in a compact form, the report about its size before
them, and ``retrieval-eval explain`` exactly as complete as it was, for reports written before
the change too.

``data/explain_pre35.json`` is two questions of the sample's report as main wrote it before
the change (keyed rows, word lists, hybrid scores recorded beside their ranks), for six
retrievers; ``data/explain_pre35.txt`` is what that version's ``explain`` (and ``--diff``,
mapped to the OR what-ifs) printed of it, with one change since: a wrapped row continues
under its id, rows 1-10 alike (issue 38 item 13; the same words, only indents moved).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
from pytest_retrieval_eval.reporting.explain import explain_lines
from pytest_retrieval_eval.reporting.explain_diff import diff_lines
from pytest_retrieval_eval.reporting.explain_facts import full_facts
from pytest_retrieval_eval.reporting.report import report_text
from pytest_retrieval_eval.retrievers.ranking import compact_facts
from tests.support.plugin_runs import run_with_report

DATA = Path(__file__).parent / "data"
RETRIEVERS = "hybrid,semantic,fts,bm25,hybrid+fts:or,fts+mode:or"
#: The sample's report at fbc1d0f (before the explain facts), in bytes: hybrid alone, and
#: hybrid, semantic, fts and bm25 (k 1,5,10, serial).
BEFORE_FACTS = {"hybrid": 37_231, "hybrid,semantic,fts,bm25": 108_228}


def _lines(report: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for qid in dict.fromkeys(p["question_id"] for p in report["pairs"]):
        diff = diff_lines(report, report, qid,
                          retrievers=[("hybrid", "hybrid+fts:or"), ("fts", "fts+mode:or")])
        out += [*explain_lines(report, qid), "", *diff, ""]
    return out


def _golden() -> list[str]:
    return (DATA / "explain_pre35.txt").read_text(encoding="utf-8").split("\n")


def test_a_report_written_before_the_change_explains_as_it_did() -> None:
    old = json.loads((DATA / "explain_pre35.json").read_text(encoding="utf-8"))
    assert isinstance(old["pairs"][0]["explain"]["fusion"]["matched"], dict)  # the old form
    assert _lines(old) == _golden()


#: The retrievers whose rankings read no vector: the sample's vectors were rebuilt after the
#: old report was written (issue 43.22), so only these rank as they did then.
VECTOR_FREE = ("fts", "fts+mode:or")


def test_this_versions_report_explains_exactly_as_the_old_one_did(
        pytester: pytest.Pytester) -> None:
    _, data = run_with_report(pytester, "--retrieval-eval-retriever", RETRIEVERS)
    old_report = json.loads((DATA / "explain_pre35.json").read_text(encoding="utf-8"))
    wanted = {p["question_id"] for p in old_report["pairs"]}
    data["pairs"] = [p for p in data["pairs"]
                     if p["question_id"] in wanted and p["retriever"] in VECTOR_FREE]
    old_report["pairs"] = [p for p in old_report["pairs"] if p["retriever"] in VECTOR_FREE]
    assert len(data["pairs"]) == len(old_report["pairs"]) > 0

    def lines(report: dict[str, Any]) -> list[str]:
        return [line for qid in dict.fromkeys(p["question_id"] for p in report["pairs"])
                for line in explain_lines(report, qid)]

    assert lines(data) == lines(old_report)
    # and each pair's facts, read back, are the old report's
    old = {(p["retriever"], p["question_id"]): p["explain"] for p in old_report["pairs"]}
    for pair in data["pairs"]:
        assert full_facts(pair) == old[(pair["retriever"], pair["question_id"])], pair


@pytest.mark.parametrize("retrievers", sorted(BEFORE_FACTS))
def test_the_report_is_at_most_a_quarter_larger_than_before_the_explain_facts(
        pytester: pytest.Pytester, retrievers: str) -> None:
    """Issue 35's bound: at equal retrievers, at most 1.25 times the report of fbc1d0f (the
    sample's was 1.77 times it for four retrievers, 2.2 times for hybrid, before this)."""
    run_with_report(pytester, "--retrieval-eval-retriever", retrievers)
    size = (pytester.path / "report.json").stat().st_size
    assert size <= 1.25 * BEFORE_FACTS[retrievers], (size, BEFORE_FACTS[retrievers])


def test_compact_facts_read_back_in_the_long_form() -> None:
    shown = ["a", "b", "g"]
    long = {
        "gold_ranks": {"g": 7}, "searched": 9,
        "rows": {"a": {"score": 1 / 26}, "b": {"score": 0.5, "facts": {"k": 1}},
                 "g": {"score": 1 / 28 + 1 / 27}},
        "fusion": {"rrf_k": 25, "words": ["x", "y", "z"], "tokens": [["x"], ["y"], ["z"]],
                   "words_total": 3,
                   "rows": {"a": {"semantic": 1, "fts": None},
                            "b": {"semantic": 2, "fts": 1},
                            "g": {"semantic": 3, "fts": 2}},
                   "matched": {"a": 0b101, "g": 0b010}},
    }
    short = compact_facts(long, shown)
    assert short["fusion"]["rows"] == [[1, None], [2, 1], [3, 2]]
    assert short["fusion"]["matched"] == [0b101, 0, 0b010]
    # a's and g's scores are their RRF sums: left out; b's is not (0.5): kept with its facts
    assert short["rows"] == [None, {"score": 0.5, "facts": {"k": 1}}, None]
    back = full_facts({"ranked": ["a", "b"], "gold": ["g"], "explain": short})
    assert back["rows"] == {"b": {"score": 0.5, "facts": {"k": 1}}}
    assert back["fusion"]["rows"] == long["fusion"]["rows"]
    assert back["fusion"]["matched"] == {"a": ["x", "z"], "g": ["y"]}
    fts_only = compact_facts({"rows": {"a": {"score": 2.5}}, "fts": {
        "words": ["x"], "matched": {"a": 1}}}, ["a", "g"])
    assert fts_only["rows"] == [2.5, None] and fts_only["fts"]["matched"] == [1, 0]
    assert full_facts({"ranked": ["a"], "gold": ["g"], "explain": fts_only}) == {
        "rows": {"a": {"score": 2.5}}, "fts": {"words": ["x"], "matched": {"a": ["x"]}}}


def test_report_text_is_the_same_value_with_each_pair_on_one_line() -> None:
    report = {"schema_version": 1, "ks": [1], "pairs": [
        {"question_id": "q1", "explain": {"rows": [0.5, None], "fusion": {"matched": [1]}},
         "metrics": {"recall@1": 1.0}},
        {"question_id": 'q"2', "metrics": {}},  # an older pair without explain
    ]}
    text = report_text(report)
    assert json.loads(text) == report
    lines = text.splitlines()
    assert lines[lines.index(' "pairs": [') + 1:lines.index(' "pairs": [') + 4] == [
        '  {"question_id":"q1","explain":{"rows":[0.5,null],"fusion":{"matched":[1]}},'
        '"metrics":{"recall@1":1.0}},',
        '  {"question_id":"q\\"2","metrics":{}}', " ]"]
    assert ' "ks": [\n  1\n ],' in text  # the rest indented as before
    assert json.loads(report_text({**report, "pairs": []})) == {**report, "pairs": []}
    with pytest.raises(ValueError):
        report_text({"pairs": [{"explain": {"rows": [float("nan")]}}]})


def test_a_report_written_before_issue_48_explains_as_it_did() -> None:
    """``data/explain_pre48.json``: the same two questions as main wrote them at 2f91fdd, the
    matched words recorded as bitmasks by the run; explain reads them as they are."""
    old = json.loads((DATA / "explain_pre48.json").read_text(encoding="utf-8"))
    assert isinstance(old["pairs"][0]["explain"]["fusion"]["matched"], list)  # the old form
    assert "store" not in old["pairs"][0]["explain"]["fusion"]
    assert _lines(old) == _golden()


def test_the_run_records_the_store_and_explain_asks_it_for_the_matched_words(
        pytester: pytest.Pytester) -> None:
    """Issue 48, item 11: the run records where the words are (its store), not the words;
    explain asks the store, and says so in one line when the store is gone."""
    _, data = run_with_report(pytester, "--retrieval-eval-retriever", "hybrid,fts")
    pair = next(p for p in data["pairs"] if p["retriever"] == "hybrid"
                and p["question_id"] == "2819ce0a")
    fusion = pair["explain"]["fusion"]
    assert not {"matched", "words", "tokens", "words_total"} & set(fusion)
    assert Path(fusion["store"]).is_file()
    assert full_facts(pair)["fusion"]["matched"]["answer_a3d03f0c_1"] == [
        "Saxophone", "teacher", "name?"]
    gone = {**pair, "explain": {**pair["explain"], "fusion": {
        **fusion, "store": str(pytester.path / "gone.sqlite")}}}
    facts = full_facts(gone)["fusion"]
    assert "matched" not in facts and facts["tokens"][0] == ["saxophon"]
    text = " ".join(explain_lines({**data, "pairs": [gone]}, "2819ce0a", width=10_000))
    assert "store " + str(pytester.path / "gone.sqlite") + ", which is not there now" in text


def test_a_part_of_a_question_id_finds_it_as_minus_k_does() -> None:
    """Issue 48, item 7: ``explain report.json fa1b838c`` finds ``gpt4_fa1b838c``; a part
    of several ids is one line naming them."""
    from pytest_retrieval_eval.reporting.explain import ExplainError

    report = json.loads((DATA / "explain_pre48.json").read_text(encoding="utf-8"))
    assert explain_lines(report, "CE0A") == explain_lines(report, "2819ce0a")
    assert diff_lines(report, report, "ce0a") == diff_lines(report, report, "2819ce0a")
    with pytest.raises(ExplainError, match=r"did you mean 2819ce0a, 1127eab1\?"):
        explain_lines(report, "1")
