"""The budget metrics in the reports: tokens@k loads (a count, not a [0, 1] score), compare
takes recall@<B>tok and tokens@k as any metric, the summary's and Markdown's budget tables."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.reporting.compare import (
    CompareError,
    compare_reports,
    load_report,
    resolve_metrics,
)
from pytest_retrieval_eval.reporting.markdown import summary_markdown
from pytest_retrieval_eval.reporting.report import summarize
from pytest_retrieval_eval.reporting.summary_table import budget_lines, families_for
from tests.support.compare_factory import make_report, write_report

BUDGET = {"budgets": [500, 2000],
          "tokenizer": {"name": "o200k_base", "library": "bpe-openai", "version": "0.1.4"}}


def _with_budget(report: dict[str, Any], recall: float, tokens: float) -> dict[str, Any]:
    report = copy.deepcopy(report)
    for pair in report["pairs"]:
        pair["metrics"].update({"recall@500tok": recall / 2, "recall@2000tok": recall,
                                **{f"tokens@{k}": tokens * k for k in report["ks"]}})
    report["summary"] = summarize(report["pairs"], report["retrievers"])
    report["budget"] = BUDGET
    return report


def _pairs(value: float) -> dict[str, list[tuple[str, str, float]]]:
    return {"semantic": [(f"q{i}", "multi-session", value) for i in range(8)]}


def test_a_report_with_tokens_loads(tmp_path: Path) -> None:
    path = write_report(tmp_path / "r.json", _with_budget(make_report(_pairs(0.5)), 0.5, 900.0))
    loaded = load_report(path)
    assert loaded["pairs"][0]["metrics"]["tokens@5"] == 4500.0


@pytest.mark.parametrize(("key", "value", "words"), [
    ("tokens@1", -1.0, "not a count of tokens"),
    ("recall@500tok", 1.5, "not a number in [0, 1]"),
])
def test_a_bad_budget_metric_is_refused(tmp_path: Path, key: str, value: float,
                                        words: str) -> None:
    report = _with_budget(make_report(_pairs(0.5)), 0.5, 900.0)
    report["pairs"][0]["metrics"][key] = value
    report["summary"] = summarize(report["pairs"], report["retrievers"])
    with pytest.raises(CompareError, match=words.replace("[", r"\[").replace("]", r"\]")):
        load_report(write_report(tmp_path / "r.json", report))


def test_compare_takes_the_budget_metrics() -> None:
    base = _with_budget(make_report(_pairs(0.5)), 0.5, 900.0)
    new = _with_budget(make_report(_pairs(0.5)), 0.75, 300.0)
    cmp = compare_reports(base, new, metrics=["recall@2000tok", "tokens@5"], resamples=200,
                          permutations=200)
    overall = {m: next(r for r in rows if r["question_type"] == "overall")
               for m, rows in cmp["rows"].items()}
    assert overall["recall@2000tok"]["delta"] == pytest.approx(0.25)
    assert overall["tokens@5"]["delta"] == pytest.approx(300.0 * 5 - 900.0 * 5)
    assert resolve_metrics(["tokens"], [1, 5]) == ["tokens@1", "tokens@5"]
    assert resolve_metrics(["recall@500tok"], [1, 5]) == ["recall@500tok"]


def test_compare_of_a_budget_one_report_lacks_is_one_line() -> None:
    base = make_report(_pairs(0.5))
    new = _with_budget(make_report(_pairs(0.5)), 0.75, 300.0)
    with pytest.raises(CompareError, match="metric recall@2000tok is not scored in these"):
        compare_reports(base, new, metrics=["recall@2000tok"])


def test_families_leave_the_budget_to_its_table() -> None:
    report = _with_budget(make_report(_pairs(0.5)), 0.5, 900.0)
    names = [f for f, _ in families_for("vipune", "session", report["summary"])]
    assert names == ["recall", "recall_any", "recall_all", "ndcg_any"]


def test_budget_lines_by_hand() -> None:
    report = _with_budget(make_report(_pairs(0.5)), 0.5, 900.0)
    lines = budget_lines(report["summary"], report["retrievers"], [500, 2000], [1, 5])
    text = "\n".join(lines)
    assert "R@500tok" in text and "R@2000tok" in text
    overall = [line.split() for line in lines if line.startswith("overall")]
    assert overall == [["overall", "8", "0.250", "0.500"], ["overall", "8", "900", "4500"]]
    assert budget_lines(make_report(_pairs(0.5))["summary"], ["semantic"], [500], [1]) == []


def test_markdown_has_the_budget_tables() -> None:
    text = summary_markdown(_with_budget(make_report(_pairs(0.5)), 0.5, 900.0))
    assert "#### recall@B (B tokens of `o200k_base`)" in text
    assert "| **overall** | 8 | 0.250 | 0.500 |" in text
    assert "#### tokens@k (mean tokens of the first k memories, `o200k_base`)" in text
    assert "| **overall** | 8 | 900 | 4500 |" in text
    assert "tokens" not in summary_markdown(make_report(_pairs(0.5)))
