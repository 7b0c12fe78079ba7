"""``retrieval-eval explain``'s lines from hand-built reports: every top row's recorded parts
(fused lists' ranks and RRF sum, matched query words, score), the gold past the top, what an
older report lacks, and ``--diff``'s aligned rows (``+`` entered, ``-`` left, gold moves)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from pytest_retrieval_eval.reporting.explain import ExplainError, explain_lines
from pytest_retrieval_eval.reporting.explain_diff import diff_lines

WORDS = ["Emergency", "fund", "months?"]
TOKENS = [["emerg"], ["fund"], ["month"]]


def _fusion(mode: str, rows: dict[str, tuple[int | None, int | None]],
            matched: dict[str, list[str]], gold: str = "g") -> dict[str, Any]:
    join = " " if mode == "and" else " OR "
    return {
        "rrf_k": 25, "recency": 0.0, "fts_mode": mode,
        "fts_match": join.join(f'"{w}"' for w in WORDS), "semantic_rows": 30, "fts_rows": 9,
        "gold": {gold: {"semantic": rows[gold][0], "fts": rows[gold][1]}},
        "rows": {i: {"semantic": s, "fts": f} for i, (s, f) in rows.items()},
        "words": WORDS, "tokens": TOKENS, "words_total": 3, "matched": matched,
    }


def _pair(name: str, ranked: list[str], fusion: dict[str, Any], gold_rank: int,
          recall5: float) -> dict[str, Any]:
    return {
        "retriever": name, "question_id": "q1", "question_type": "single-session-user",
        "question": "Emergency fund months?", "question_date": "2023-01-01", "gold": ["g"],
        "ranked": ranked, "metrics": {"recall@1": 0.0, "recall@5": recall5},
        "explain": {"gold_ranks": {"g": gold_rank}, "searched": 30, "fusion": fusion},
    }


ALL = list(WORDS)
BASE = _pair("hybrid", ["a", "b", "g"], _fusion(
    "and", {"a": (2, 1), "b": (3, 2), "g": (1, 3), "x": (1, None)},
    {"a": ALL, "b": ALL, "g": ALL}), gold_rank=3, recall5=1.0)
NEW = _pair("hybrid+fts:or", ["a", "x", "b"], _fusion(
    "or", {"a": (2, 1), "x": (1, 5), "b": (3, 2), "g": (4, 7)},
    {"a": ALL, "x": ["Emergency", "fund"], "b": ALL, "g": ALL}), gold_rank=6, recall5=0.0)


def report(*pairs: dict[str, Any]) -> dict[str, Any]:
    return {"ks": [1, 3], "pairs": list(pairs)}


def _line(lines: list[str], start: str) -> str:
    return next(line for line in lines if line.startswith(start))


def test_every_top_row_shows_its_ranks_rrf_sum_and_matched_words() -> None:
    lines = explain_lines(report(NEW), "q1", width=None)
    assert _line(lines, "    1 ").split() == [
        "1", "a", "sem", "2", "+", "fts", "1", "=", f"{1 / 27 + 1 / 26:.4f};", "matched",
        "all", "3"]
    assert _line(lines, "    2 ").split()[1:] == [
        "x", "sem", "1", "+", "fts", "5", "=", f"{1 / 26 + 1 / 30:.4f};", "matched",
        "Emergency,", "fund"]
    # the gold past the top: its own line, with the same parts
    gold = _line(lines, "  gold g:")
    assert gold.startswith("  gold g: rank 6 (outside the top 3)")
    assert f"sem 4 + fts 7 = {1 / 29 + 1 / 32:.4f}; matched all 3" in gold
    assert "  FTS5 reads the words: Emergency -> emerg, fund, months? -> month" in lines
    assert any(line.startswith("  sem + fts: a row's ranks") for line in lines)
    assert all(len(line) <= 80 for line in explain_lines(report(NEW), "q1", width=80))


def test_a_row_missing_from_a_list_a_recency_score_and_no_match() -> None:
    pair = copy.deepcopy(BASE)
    pair["explain"]["fusion"]["rows"]["b"] = {"semantic": None, "fts": 2}
    pair["explain"]["fusion"]["matched"] = {"a": ["fund"]}
    pair["explain"]["rows"] = {"a": {"score": 0.5}, "b": {"score": 1 / 27}}
    lines = explain_lines(report(pair), "q1", width=None)
    assert "sem 2 + fts 1 = 0.0755, score 0.5000; matched fund" in _line(lines, "    1 ")
    assert _line(lines, "    2 ").endswith(f"sem - + fts 2 = {1 / 27:.4f}; matched none")
    assert "score" not in _line(lines, "    2 ")  # the sum says it


def test_fts_rows_show_score_and_matched_words() -> None:
    pair = {**NEW, "retriever": "fts+mode:or", "explain": {
        "gold_ranks": {"g": None}, "searched": 3,
        "rows": {"a": {"score": 2.5}, "x": {"score": 1.25}},
        "fts": {"fts_mode": "or", "fts_match": '"Emergency" OR "fund" OR "months?"',
                "fts_rows": 3, "words": WORDS, "tokens": TOKENS, "words_total": 3,
                "matched": {"a": ALL, "x": ["months?"]}}}}
    lines = explain_lines(report(pair), "q1", width=None)
    assert _line(lines, "    1 ").endswith("score 2.5000; matched all 3")
    assert _line(lines, "    2 ").endswith("score 1.2500; matched months?")
    assert _line(lines, "    3 ").endswith("matched none")
    assert "  gold g: not returned  matched none" in lines


def test_an_older_report_says_which_option_records_the_rows() -> None:
    pair = copy.deepcopy(NEW)
    fusion = pair["explain"]["fusion"]
    for key in ("rows", "words", "tokens", "words_total", "matched"):
        fusion.pop(key)
    lines = explain_lines(report(pair), "q1", width=None)
    assert _line(lines, "    1 ") == "    1   a"  # nothing recorded of the row: as before
    assert "  each row's semantic and FTS ranks and the query words it matched are not in " \
           "this report; run pytest --retrieval-eval again with --retrieval-eval-json=PATH " \
           "(this version records it)" in lines
    assert any(line.startswith("  g: semantic rank 4: 1/(25+4)") for line in lines)


def test_diff_marks_rows_that_entered_or_left_and_the_golds_move() -> None:
    lines = diff_lines(report(BASE), report(NEW), "q1", retrievers=[("hybrid", "hybrid+fts:or")],
                       width=None, base_source="report b.json", new_source="report n.json")
    assert lines[3:5] == ["base: report b.json", "new:  report n.json"]
    assert "hybrid -> hybrid+fts:or: top 3 (base, new rank; + entered, - left; * gold)" in lines
    assert _line(lines, "    1 1   a ")
    entered = _line(lines, "  + - 2   x ")
    assert f"sem 1 + fts 5 = {1 / 26 + 1 / 30:.4f}; matched Emergency, fund" in entered
    assert _line(lines, "    2 3   b ")
    left = _line(lines, "  - 3 - * g ")
    assert "base: sem 1 + fts 3 = " in left  # a row that left: the base report's parts
    assert "  gold g: rank 3 -> rank 6 (outside the top 3) (down 3)" in lines
    assert f"    new: sem 4 + fts 7 = {1 / 29 + 1 / 32:.4f}; matched all 3" in lines
    assert """  base FTS5 MATCH '"Emergency" "fund" "months?"': 9 rows""" in lines
    assert "  recall@5 1.000 -> 0.000" in lines
    assert all(len(line) <= 80 for line in diff_lines(
        report(BASE), report(NEW), "q1", retrievers=[("hybrid", "hybrid+fts:or")], width=80))


def test_diff_of_the_same_retriever_and_its_refusals() -> None:
    same = {**NEW, "retriever": "hybrid"}
    lines = diff_lines(report(BASE), report(same), "q1", width=None)
    assert "hybrid: top 3 (base, new rank; + entered, - left; * gold)" in lines
    other = {**NEW, "question_id": "q2"}
    with pytest.raises(ExplainError, match=r"^question 'q1' is not in report n.json \(1 "
                       r"questions scored: q2\); give one of its question_ids$"):
        diff_lines(report(BASE), report(other), "q1", new_source="report n.json")
    with pytest.raises(ExplainError, match=r"^question 'q2' is not in report b.json"):
        diff_lines(report(BASE), report(other), "q2", base_source="report b.json")
    with pytest.raises(ExplainError, match=r"^no retriever ranked question q1 in both report "
                       r"b.json \(it has: hybrid\) and report n.json \(it has: hybrid\+fts:or"
                       r"\); map them with --retrievers BASE=NEW$"):
        diff_lines(report(BASE), report(NEW), "q1", base_source="report b.json",
                   new_source="report n.json")
    with pytest.raises(ExplainError, match=r"^retriever 'fts' did not rank question q1 in "
                       r"report n.json \(it has: hybrid\+fts:or\); give one of them with "
                       r"--retrievers$"):
        diff_lines(report(BASE), report(NEW), "q1", retrievers=[("hybrid", "fts")],
                   new_source="report n.json")


def _ten_rows(words: list[str]) -> dict[str, Any]:
    """A fts pair of ten rows, each matching ``words`` (long enough to wrap at 60)."""
    ids = [f"row{i}" for i in range(1, 11)]
    return {**NEW, "retriever": "fts", "ranked": ids, "explain": {
        "gold_ranks": {"g": None}, "searched": 10,
        "rows": {i: {"score": 1.0 / n} for n, i in enumerate(ids, start=1)},
        "fts": {"fts_mode": "or", "fts_match": " OR ".join(f'"{w}"' for w in words),
                "fts_rows": 10, "words": words, "tokens": [[w.strip(",")] for w in words],
                "words_total": len(words) + 1,
                "matched": {i: words for i in ids}}}}


def test_row_ten_continues_where_rows_one_to_nine_do() -> None:
    # issue 38 item 13: a wrapped row continued two spaces past its own indent, and row 10's
    # right-aligned rank has one space less of it
    pair = _ten_rows(["Which", "camping", "trip", "closing", "house", "Tahoe", "Lake"])
    lines = explain_lines({"ks": [10], "pairs": [pair]}, "q1", width=60)
    starts = [i for i, line in enumerate(lines) if re.match(r" +\d+ +row\d+ ", line)]
    assert len(starts) == 10
    indents = {len(lines[i + 1]) - len(lines[i + 1].lstrip()) for i in starts}
    assert indents == {lines[starts[0]].index("row1")}  # under the id, rows 1 to 10 alike
    assert all(len(line) <= 60 for line in lines)


def test_a_matched_word_with_a_comma_is_quoted_not_doubled() -> None:
    # issue 38 item 13: "matched first,, on" from the query word "first,"
    pair = _ten_rows(["Which", "first,", "on", 'say"hi'])
    lines = explain_lines({"ks": [10], "pairs": [pair]}, "q1", width=None)
    assert _line(lines, "    1 ").endswith('matched Which, "first,", on, "say""hi"')
    reads = _line(lines, "  FTS5 reads the words")
    assert '"first," -> first' in reads
    assert not any(",," in line for line in lines)
