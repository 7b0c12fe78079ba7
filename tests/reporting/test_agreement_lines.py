"""A comparison's agreement (reporting/agreement_lines.py): in the JSON, the terminal (per
question type with -v) and Markdown; checked against hand-made rankings, and on the bundled
sample against an independent count (hybrid's diagnostics: its top k equal to its semantic
list's, which is semantic's ranking)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_retrieval_eval.reporting import compare, compare_lines
from pytest_retrieval_eval.reporting.markdown import comparison_markdown
from tests.support.compare_factory import make_report

RANKED = {  # (base, new) per question
    "q1": (["a", "b", "c"], ["a", "b", "c"]),
    "q2": (["a", "b", "c"], ["b", "a", "c"]),
    "q3": (["a", "b", "c"], ["x", "y", "z"]),
}
TYPES = {"q1": "multi-session", "q2": "multi-session", "q3": "temporal-reasoning"}


def reports() -> tuple[dict[str, Any], dict[str, Any]]:
    rows = [(q, TYPES[q], 1.0) for q in RANKED]
    base = make_report({"hybrid": rows}, ks=(1, 3))
    new = make_report({"hybrid": rows}, ks=(1, 3))
    for side, report in enumerate((base, new)):
        for pair in report["pairs"]:
            pair["ranked"] = RANKED[pair["question_id"]][side]
    return base, new


def test_two_reports_agreement_by_hand() -> None:
    cmp = compare.compare_reports(*reports())
    got = cmp["agreement"]["hybrid"]
    assert got["overall"]["pairs"] == 3
    assert got["overall"]["1"] == {"identical": 1, "overlap": pytest.approx(1 / 3)}
    assert got["overall"]["3"] == {"identical": 1, "overlap": pytest.approx(2 / 3)}
    assert got["by_type"]["multi-session"]["3"] == {"identical": 1, "overlap": 1.0}
    lines = compare_lines.comparison_lines(cmp)
    assert ("agreement hybrid: top 1/3 identical in 1/1 of 3 pairs, mean overlap@1/3 "
            "0.333/0.667") in lines
    assert not any(line.startswith("  multi-session:") for line in lines)
    verbose = compare_lines.comparison_lines(cmp, verbose=True)
    i = verbose.index("agreement hybrid: top 1/3 identical in 1/1 of 3 pairs, mean "
                      "overlap@1/3 0.333/0.667")
    assert verbose[i + 1:i + 3] == [  # the question types in the tables' (card) order
        "  temporal-reasoning: top 1/3 identical in 0/0 of 1 pairs, mean overlap@1/3 "
        "0.000/0.000",
        "  multi-session: top 1/3 identical in 1/1 of 2 pairs, mean overlap@1/3 0.500/1.000"]
    text = comparison_markdown(cmp)
    assert "<summary>Agreement of the rankings (identical top k, mean overlap@k)</summary>" in text
    assert ("- `hybrid`: top 1/3 identical in 1/1 of 3 pairs, mean overlap@1/3 0.333/0.667"
            in text)


def test_reports_without_ranked_have_no_agreement_line() -> None:
    base, new = reports()
    for pair in base["pairs"]:
        del pair["ranked"]
    cmp = compare.compare_reports(base, new)
    assert cmp["agreement"] == {}
    assert not any(line.startswith("agreement") for line in compare_lines.comparison_lines(cmp))
    assert "Agreement" not in comparison_markdown(cmp)
    new["pairs"][0]["ranked"] = "not a list"  # an odd report: no line, no crash
    assert compare.compare_reports(new, reports()[1])["agreement"] == {}


def test_two_retrievers_of_one_report() -> None:
    one = make_report({"a": [(q, TYPES[q], 1.0) for q in RANKED],
                       "b": [(q, TYPES[q], 1.0) for q in RANKED]}, ks=(1, 3))
    for pair in one["pairs"]:
        pair["ranked"] = RANKED[pair["question_id"]][pair["retriever"] == "b"]
    cmp = compare.compare_retrievers(one, "a", "b")
    assert cmp["agreement"]["b vs a"]["overall"]["3"] == {"identical": 1,
                                                          "overlap": pytest.approx(2 / 3)}


def test_no_scores_line_names_partial_and_skips_recorded_rankings() -> None:
    from pytest_retrieval_eval.reporting.diagnostic_lines import no_scores_line

    pairs = [{"retriever": "a", "ties": None}, {"retriever": "a", "ties": {"sensitive": {}}},
             {"retriever": "b", "ties": None}, {"retriever": "rec"},
             {"retriever": "c", "ties": {"sensitive": {}}}]
    line = no_scores_line(pairs, ["a", "b", "rec", "c"])
    assert line is not None and line.startswith(
        "no scores: a (1 of 2 pairs), b give ranked ids only, so an order of equal scores "
        "cannot be seen (no tie is counted); return (id, score) pairs from rank")
    assert no_scores_line(pairs[3:], ["rec", "c"]) is None
