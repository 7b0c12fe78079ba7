"""The Markdown renderer (issue 22, item 8): bold only a strict best; diagnostics and the
gained/lost lists folded into <details>."""

from __future__ import annotations

import re

import pytest

from pytest_retrieval_eval.reporting import compare as cmp
from pytest_retrieval_eval.reporting import markdown
from tests.support.compare_factory import make_report


@pytest.mark.parametrize(("values", "best"), [
    ([0.5, 1.0], 1), ([1.0, 0.5, 0.25], 0), ([1.0, 1.0], None), ([0.0, 0.0, 0.0], None),
    ([0.0, None], None), ([0.3334, 0.3333], None),  # equal as printed: a tie
    ([None, 0.2, 0.1], 1), ([0.7], None), ([0.0, 0.001], 1)])
def test_strict_best(values: list[float | None], best: int | None) -> None:
    assert markdown.strict_best(values) == best


def test_a_row_of_zeros_and_a_tie_are_not_bold() -> None:
    report = make_report({"a": [("q1", "multi-session", 0.0), ("q2", "temporal-reasoning", 1),
                                ("q3", "knowledge-update", 0.5)],
                          "b": [("q1", "multi-session", 0.0), ("q2", "temporal-reasoning", 1),
                                ("q3", "knowledge-update", 0.0)]}, ks=(1,))
    text = markdown.summary_markdown(report)
    assert "| multi-session | 1 | 0.000 | 0.000 |" in text
    assert "| temporal-reasoning | 1 | 1.000 | 1.000 |" in text
    assert "| knowledge-update | 1 | **0.500** | 0.000 |" in text
    assert "| **overall** | 3 | **0.500** | 0.333 |" in text


def test_the_self_check_is_never_bold() -> None:
    """Issue 38.11: oracle ranks gold first by construction; the best real retriever is bold
    beside it, and an oracle what-if is no candidate either."""
    report = make_report({"oracle": [("q1", "multi-session", 1.0), ("q2", "multi-session", 1)],
                          "a": [("q1", "multi-session", 1.0), ("q2", "multi-session", 0.0)],
                          "b": [("q1", "multi-session", 0.0), ("q2", "multi-session", 0.0)],
                          "oracle+unit:turn": [("q1", "multi-session", 1.0),
                                               ("q2", "multi-session", 1.0)]}, ks=(1,))
    text = markdown.summary_markdown(report)
    assert "| **overall** | 2 | 1.000 | **0.500** | 0.000 | 1.000 |" in text


def test_no_diagnostics_no_details() -> None:
    report = make_report({"a": [("q1", "multi-session", 0.0)]}, ks=(1,))
    assert "<details>" not in markdown.summary_markdown(report)


def test_the_changes_fold_into_details_with_every_question() -> None:
    rows = [(f"q{i}", "multi-session", 0.0) for i in range(12)]
    better = [(q, t, 1.0 if i < 10 else 0.0) for i, (q, t, _) in enumerate(rows)]
    result = cmp.compare_reports(make_report({"h": rows}, ks=(5,)),
                                 make_report({"h": [*better, ("q99", "multi-session", 1.0)]},
                                             ks=(5,)))
    text = markdown.comparison_markdown(result)
    details = text.split("<details>")[1].split("</details>")[0]
    assert "<summary>Questions whose recall@k rose (+) or fell (-): `h` @5 +10/-0</summary>" in (
        details)
    assert f"- `h` recall@5 gained (10): {', '.join(f'`q{i}`' for i in range(10))}" in details
    assert "- only in new (1, not compared): `q99[h]`" in details
    unchanged = cmp.compare_reports(make_report({"h": rows}, ks=(5,)),
                                    make_report({"h": rows}, ks=(5,)))
    assert "<details>" not in markdown.comparison_markdown(unchanged)


def test_diagnostics_fold_in_overall_and_per_question_type() -> None:
    """Issue 22.3: the Markdown carries the per-type lines too, as nested items."""
    diagnostics = {"fts": {"overall": {}, "by_type": {}}}
    report = make_report({"fts": [("q1", "multi-session", 0.0)]}, ks=(1,))
    report["diagnostics"] = diagnostics
    seen: dict[str, object] = {}

    def fake(diag: object, retrievers: object, ks: object, width: object = None, *,
             verbose: bool = False) -> list[str]:
        seen["verbose"] = verbose
        return ["fts: 1 of 1 pairs returned no rows", "  multi-session: 1 of 1 returned no rows"]

    import pytest_retrieval_eval.reporting.diagnostic_lines as words

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(words, "lines", fake)
        text = markdown.summary_markdown(report)
    assert seen["verbose"] is True
    assert "- fts: 1 of 1 pairs returned no rows\n  - multi-session: 1 of 1 returned no rows" \
        in text


HOSTILE = ("**c**", "<img src=x onerror=alert(1)>", "a|b", "x\ny", "[l](http://e)")


def _cells(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_hostile_retriever_names_reach_the_markdown_inert() -> None:
    """34.10: emphasis, HTML, a pipe, a newline and a link in a retriever's name are shown as
    written, in table heads, cells, details summaries and lists: never live."""
    rows = [("q1", "multi-session", 0.0), ("q2", "multi-session", 1.0)]
    base = make_report({name: rows for name in HOSTILE}, ks=(1,))
    new = make_report({name: [("q1", "multi-session", 1.0), ("q2", "multi-session", 1.0)]
                       for name in HOSTILE}, ks=(1,))
    texts = [markdown.summary_markdown(base),
             markdown.comparison_markdown(cmp.compare_reports(base, new))]
    for text in texts:
        live = re.sub(r"(`+).*?\1", "", text)  # code spans show their text as written
        assert "<img" not in live and "**c**" not in live and "[l](http" not in live
        assert "\\*\\*c\\*\\*" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
        for table in [t for t in text.split("\n\n") if t.startswith("| ")]:
            widths = {_cells(line) for line in table.splitlines()}
            assert len(widths) == 1, table  # a | or a newline split no row
    details = texts[1].split("<summary>")[1].split("</summary>")[0]
    assert "<img" not in details and "&lt;img" in details


def test_inert_keeps_plain_names_as_they_are() -> None:
    assert markdown.inert("hybrid+fts:or") == "hybrid+fts:or"
    assert markdown.inert("a|b") == "a\\|b" and markdown.inert("x\ny") == "x\\\\ny"


def test_the_markdown_holds_the_tables_of_the_terminals_verbose_summary() -> None:
    """Issue 36 audit B: a report with memory metrics gets their tables in the Markdown, as
    the terminal's -v shows them (the same families, in the same order)."""
    from pytest_retrieval_eval.reporting.report import summarize
    from pytest_retrieval_eval.reporting.summary_choice import chosen

    report = make_report({"turns": [("q1", "multi-session", 0.5), ("q2", "multi-session", 1)],
                          "sessions": [("q1", "multi-session", 0.0),
                                       ("q2", "multi-session", 1.0)]}, ks=(1, 5))
    for pair in report["pairs"]:
        value = pair["metrics"]["recall@1"]
        pair["metrics"].update({f"memory_recall@{k}": value for k in (1, 5)})
        if pair["retriever"] == "turns":
            pair["metrics"].update({f"turn_recall@{k}": value / 2 for k in (1, 5)})
    report["summary"] = summarize(report["pairs"], report["retrievers"])
    text = markdown.summary_markdown(report)
    headings = [line[len("#### "):] for line in text.splitlines() if line.startswith("#### ")]
    verbose = [f"{family}@k" for family, _ in chosen(report, None, verbose=True).families]
    assert headings == verbose == ["recall@k", "recall_any@k", "recall_all@k", "ndcg_any@k",
                                   "memory_recall@k", "turn_recall@k"]
    memory, turn = text.split("#### memory_recall@k")[1].split("#### turn_recall@k")
    assert "| **overall** | 2 | **0.750** | **0.750** | 0.500 | 0.500 |" in memory
    assert "| **overall** | 2 | 0.375 | 0.375 | - | - |" in turn  # one value: nothing to beat
