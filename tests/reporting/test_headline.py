"""The summary's headline (issue 38, item 1) on hand-made results: best per k (ties named,
the self-check never), the weakest type and who is 0 there, the misses a diagnostic
explains, the next command; and its lines fitted to 80 columns."""

from __future__ import annotations

import shlex
from typing import Any

from pytest_retrieval_eval.reporting.headline import build_headline, continued, headline_lines
from pytest_retrieval_eval.reporting.report import summarize
from pytest_retrieval_eval.scoring import headline as figures

GOLD = ["g"]


def pair(retriever: str, index: int, qtype: str, ranked: list[str]) -> dict[str, Any]:
    """A scored pair: recall@k of one gold session ``g`` in ``ranked`` at k 1 and 2."""
    metrics = {f"recall@{k}": float("g" in ranked[:k]) for k in (1, 2)}
    return {"retriever": retriever, "index": index, "question_id": f"q{index}",
            "question_type": qtype, "gold": GOLD, "ranked": ranked, "metrics": metrics}


def report(pairs: list[dict[str, Any]], retrievers: list[str], **extra: Any) -> dict[str, Any]:
    return {"protocol": "vipune", "granularity": "session", "ks": [1, 2],
            "retrievers": retrievers, "pairs": pairs,
            "summary": summarize(pairs, retrievers), **extra}


# q0 multi-session, q1 temporal-reasoning, q2 temporal-reasoning.
PAIRS = [
    pair("a", 0, "multi-session", ["g", "x"]),
    pair("a", 1, "temporal-reasoning", ["x", "g"]),
    pair("a", 2, "temporal-reasoning", ["x", "y"]),
    pair("b", 0, "multi-session", ["x", "g"]),
    pair("b", 1, "temporal-reasoning", []),  # no rows
    pair("b", 2, "temporal-reasoning", []),
    pair("oracle", 0, "multi-session", ["g"]),
    pair("oracle", 1, "temporal-reasoning", ["g"]),
    pair("oracle", 2, "temporal-reasoning", ["g"]),
]


def test_best_per_k_names_ties_and_never_the_self_check() -> None:
    h = build_headline(report(PAIRS, ["a", "b", "oracle"]))
    # recall@1: a 1/3, b 0, oracle 1 (left out); recall@2: a 2/3, b 1/3.
    assert h["best"] == [{"metric": "recall@1", "value": 0.333, "retrievers": ["a"]},
                         {"metric": "recall@2", "value": 0.667, "retrievers": ["a"]}]
    tied = [p for p in PAIRS if p["retriever"] != "b"] + [
        {**p, "retriever": "b"} for p in PAIRS if p["retriever"] == "a"]
    h = build_headline(report(tied, ["a", "b", "oracle"]))
    assert h["best"][0]["retrievers"] == ["a", "b"]
    assert h["lines"][0] == "best: @1 a, b 0.333; @2 a, b 0.667"


def test_the_weakest_type_and_who_is_zero_at_every_k() -> None:
    h = build_headline(report(PAIRS, ["a", "b", "oracle"]))
    assert h["weakest"] == [{"question_type": "temporal-reasoning", "weakest_for": ["a", "b"],
                             "values": {"a": 0.5, "b": 0.0}, "zero": ["b"]}]
    assert "weakest: temporal-reasoning (0 at every k for b; a 0.500 @2)" in h["lines"]


def test_the_misses_no_rows_explain_and_the_next_command() -> None:
    h = build_headline(report(PAIRS, ["a", "b", "oracle"]))
    assert h["misses"] == {"a": {"pairs": 3, "missed": 1, "no_rows": 0, "fewer_rows": 0},
                           "b": {"pairs": 3, "missed": 2, "no_rows": 2, "fewer_rows": 0}}
    assert h["explained"] == {"retriever": "b", "reason": "no_rows", "count": 2, "missed": 2,
                              "pairs": 3}
    assert "most misses: b: no rows in 2 of its 2 misses" in h["lines"]
    # The best at the largest k (a) on its weakest type's first missed pair (q2).
    assert h["next"]["question_id"] == "q2" and h["next"]["retriever"] == "a"
    assert h["lines"][-1] == "next: pytest --retrieval-eval -v -k 'q2 and a'"
    with_json = build_headline(report(PAIRS, ["a", "b", "oracle"]), report_path="out/r.json",
                               rerun=["--retrieval-eval", "--no-model"])
    assert with_json["next"]["command"] == ("retrieval-eval explain out/r.json q2 "
                                            "--retriever=a")
    rerun = build_headline(report(PAIRS, ["a", "b", "oracle"]),
                           rerun=["--retrieval-eval", "--no-model"])
    assert rerun["next"]["command"] == "pytest --retrieval-eval --no-model -v -k 'q2 and a'"


def test_an_fts_and_retriever_says_why_its_rows_are_empty() -> None:
    renamed = [{**p, "retriever": "fts"} if p["retriever"] == "b" else p for p in PAIRS]
    h = build_headline(report(renamed, ["a", "fts"]))
    assert ("most misses: fts: no rows in 2 of its 2 misses (vipune ANDs the query's words)"
            in h["lines"])


def test_a_name_minus_k_cannot_read_is_selected_by_its_node_id() -> None:
    odd = [{**p, "retriever": "cmd:node s.js"} for p in PAIRS if p["retriever"] == "a"]
    h = build_headline(report(odd, ["cmd:node s.js"]))
    assert h["next"]["command"] == ("pytest --retrieval-eval -v "
                                    "'retrieval-eval::temporal-reasoning::q2::cmd:node s.js'")


def test_only_self_checks_or_nothing_missed_give_no_next() -> None:
    assert build_headline(report([p for p in PAIRS if p["retriever"] == "oracle"],
                                 ["oracle"])) == {"lines": []}
    perfect = [pair("a", i, "multi-session", ["g"]) for i in range(2)]
    h = build_headline(report(perfect, ["a"]))
    assert h["next"] is None and h["explained"] is None and h["weakest"] == []


def test_budgets_get_a_best_each() -> None:
    pairs = [{**p, "metrics": {**p["metrics"], "recall@100tok": 1.0 if p["retriever"] == "b"
                                                               else 0.0}} for p in PAIRS]
    h = build_headline(report(pairs, ["a", "b", "oracle"], budget={"budgets": [100]}))
    assert h["best"][-1] == {"metric": "recall@100tok", "value": 1.0, "retrievers": ["b"]}


def test_lines_fit_80_columns_and_a_long_command_is_continued_with_backslashes() -> None:
    """Issue 48, item 2: a ``next:`` wider than the terminal is written as shell lines
    ending in `` \\``, broken between words, so it is still copied (and run) whole."""
    long = "x" * 30
    pairs = [{**p, "question_id": long + p["question_id"]} for p in PAIRS]
    h = build_headline(report(pairs, ["a", "b", "oracle"]),
                       rerun=["--retrieval-eval", "--no-model", "--retrieval-eval-data=" + long])
    out = headline_lines(h, 80)
    start = next(i for i, line in enumerate(out) if line.startswith("next: "))
    command = out[start:]
    assert len(command) > 1 and all(line.endswith(" \\") for line in command[:-1])
    assert all(len(line) <= 80 for line in out)
    joined = " ".join(line.removesuffix(" \\").strip() for line in command)
    assert shlex.split(joined.removeprefix("next: ")) == shlex.split(h["next"]["command"])


def test_a_word_wider_than_the_line_gets_a_line_of_its_own() -> None:
    path = "/tmp/" + "p" * 90 + "/report.json"
    out = continued(f"retrieval-eval explain {path} q1 --retriever=a", 80, "next: ")
    assert out == ["next: retrieval-eval explain \\", f"  {path} \\", "  q1 --retriever=a"]


def test_the_next_command_selects_the_items_own_word() -> None:
    """A custom fixture store's column is its ``name``; its items are ``::custom``: the next
    command selects by the item's word (the pair's ``selector``), not the column's."""
    named = [{**p, "retriever": "word-overlap", "selector": "custom"} for p in PAIRS
             if p["retriever"] == "a"]
    h = build_headline(report(named, ["word-overlap"]))
    assert h["next"]["command"] == "pytest --retrieval-eval -v -k 'q2 and custom'"
    with_json = build_headline(report(named, ["word-overlap"]), report_path="r.json")
    assert with_json["next"]["command"] == ("retrieval-eval explain r.json q2 "
                                            "--retriever=word-overlap")


def test_running_the_next_command_does_not_print_it_again() -> None:
    first = build_headline(report(PAIRS, ["a", "b", "oracle"]))
    shown = [(first["next"]["question_id"], first["next"]["retriever"])]
    again = build_headline(report(PAIRS, ["a", "b", "oracle"]), shown=shown)
    assert again["next"] is None and not any(line.startswith("next:")
                                             for line in again["lines"])


def test_the_next_command_shows_where_the_gold_ranked_past_k() -> None:
    """With explain facts recorded, the next question is one whose gold ranked past the top
    k (its explanation shows where), and a line says so."""
    ranked = [{**p, "explain": {"gold_ranks": {"g": 7}}}
              if (p["retriever"], p["question_id"]) == ("a", "q1") else p for p in PAIRS]
    ranked = [{**p, "metrics": {**p["metrics"], "recall@2": 0.0}}
              if (p["retriever"], p["question_id"]) == ("a", "q1") else p for p in ranked]
    h = build_headline(report(ranked, ["a", "b", "oracle"]), report_path="r.json")
    assert h["next"]["question_id"] == "q1" and h["next"]["gold_rank"] == "7"
    assert h["lines"][-1] == "  (it shows gold g at rank 7, past the top 2)"


def test_self_check_names() -> None:
    assert figures.is_self_check("oracle") and figures.is_self_check("oracle+unit:turn")
    assert not figures.is_self_check("my_oracle") and not figures.is_self_check("hybrid")
