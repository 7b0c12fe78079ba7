"""retrievers/row_facts.py and explain_facts' rows: scores and a retriever's last_facts for
the rows explain shows, bounded and JSON-able."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from pytest_retrieval_eval.reporting.explain_facts import full_facts
from pytest_retrieval_eval.retrievers.ranking import explain_facts, rank_per_k
from pytest_retrieval_eval.retrievers.row_facts import (
    MAX_ITEMS,
    MAX_KEYS,
    MAX_NAME,
    MAX_TEXT,
    clean_facts,
    row_facts,
)
from tests.retrievers.test_retrievers import make_persona, make_query


def test_clean_facts_keeps_json_scalars_and_cuts_the_rest() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd" * 100

    got = clean_facts({"score": np.float32(0.5), "n": np.int64(3), "ok": True, "none": None,
                       "nan": math.nan, "text": "x" * 500, "k" * 99: 1,
                       "matched": ["a", 2, Odd(), *range(20)], "obj": Odd(),
                       "ninth": 9})
    # The first MAX_KEYS facts given are read (NaN among them, dropped): "obj", "ninth" not.
    assert len(got) == MAX_KEYS - 1 and "obj" not in got and "ninth" not in got
    assert got["score"] == 0.5 and got["n"] == 3 and got["ok"] is True and got["none"] is None
    assert "nan" not in got  # not finite: dropped, JSON could not hold it
    assert got["text"] == "x" * (MAX_TEXT - 1) + "…"
    assert "k" * (MAX_NAME - 1) + "…" in got
    assert got["matched"][:2] == ["a", 2] and len(got["matched"]) == MAX_ITEMS + 1
    assert got["matched"][2] == ("odd" * 100)[:MAX_TEXT - 1] + "…"
    assert got["matched"][-1] == f"... {3 + 20 - MAX_ITEMS} more"
    assert clean_facts({"obj": Odd()}) == {"obj": ("odd" * 100)[:MAX_TEXT - 1] + "…"}
    json.dumps(got, allow_nan=False)
    assert clean_facts(["not", "a", "mapping"]) == {} and clean_facts(None) == {}


def test_row_facts_scores_first_source_wins_and_rows_without_anything_are_left_out() -> None:
    class R:
        def __init__(self) -> None:
            self.last_facts: Any = {"a": {"matched": ["cat"]}, "z": {"matched": ["far"]}}

    got = row_facts(R(), ["a", "b", "c", "a"], [(["a", "b"], [2.0, 1.0]),
                                                (["a", "b", "c"], [9.0, 9.0, math.inf])])
    assert got == {"a": {"score": 2.0, "facts": {"matched": ["cat"]}}, "b": {"score": 1.0}}
    odd = R()
    odd.last_facts = "not a mapping"
    assert row_facts(odd, ["a"], [None]) == {}


class Matching:
    """Scores by words shared with the question; says which words matched."""

    name = "matching"

    def rank(self, persona: Any, query: Any, limit: int) -> list[tuple[str, float]]:
        words = set(query.question.lower().split())
        scored = []
        facts = {}
        for mem_id, text in zip(persona.session_ids, persona.texts, strict=True):
            hit = sorted(words & set(text.lower().split()))
            scored.append((mem_id, float(len(hit))))
            facts[mem_id] = {"matched": hit}
        scored.sort(key=lambda x: -x[1])
        self.last_facts = facts
        return scored[:limit]


def test_explain_facts_records_scores_and_facts_of_top_and_gold(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    gold = (persona.session_ids[-1],)
    query = make_query("garden budget cat", None, gold)
    retriever = Matching()
    scored: dict[int, tuple[list[str], list[float]]] = {}
    rankings, comps = rank_per_k(retriever, persona, query, [1, 2], scored)
    facts = explain_facts(retriever, query, gold, rankings, comps, [1, 2], scored)
    rows = full_facts({"ranked": rankings[2], "gold": gold, "explain": facts})["rows"]
    assert list(rows)[:2] == rankings[2]
    for mem_id in rankings[2]:
        assert rows[mem_id]["score"] == dict(zip(*scored[2], strict=True))[mem_id]
        assert rows[mem_id]["facts"] == retriever.last_facts[mem_id]
    assert gold[0] in rows and rows[gold[0]]["facts"] == retriever.last_facts[gold[0]]
    assert len(rows) <= 3  # the top max-k and the gold: never every row
    json.dumps(facts, allow_nan=False)


def test_no_scores_no_facts_no_rows(tmp_path: Path) -> None:
    class Plain:
        name = "plain"

        def rank(self, persona: Any, query: Any, limit: int) -> list[str]:
            return list(persona.session_ids)[:limit]

    persona = make_persona(tmp_path)
    query = make_query("x", None)
    rankings, comps = rank_per_k(Plain(), persona, query, [3], {})
    assert "rows" not in explain_facts(Plain(), query, (), rankings, comps, [3], {})
