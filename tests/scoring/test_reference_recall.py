"""``ref_recall@k`` (scoring/reference_recall.py, issue 37 item 5) on hand-made rankings."""

from __future__ import annotations

import pytest

from pytest_retrieval_eval.scoring.agreement import overlap_at
from pytest_retrieval_eval.scoring.reference_recall import (
    pair_ref_recall,
    ref_recall_at,
    reference_recall,
)


def test_the_share_of_the_references_top_k() -> None:
    ref, other = ["a", "b", "c", "d"], ["b", "x", "a", "y"]
    assert ref_recall_at(ref, other, 1) == 0.0
    assert ref_recall_at(ref, other, 2) == 0.5  # {a, b} vs {b, x}
    assert ref_recall_at(ref, other, 3) == pytest.approx(2 / 3)
    assert ref_recall_at(ref, other, 4) == 0.5
    # both full: compare's overlap@k
    for k in (1, 2, 3, 4):
        assert ref_recall_at(ref, other, k) == overlap_at(ref, other, k)
    # a short reference is divided by what it returned; an empty one is no pair
    assert ref_recall_at(["a"], ["a", "b", "c"], 3) == 1.0
    assert overlap_at(["a"], ["a", "b", "c"], 3) == pytest.approx(1 / 3)
    assert ref_recall_at([], ["a"], 3) is None
    assert pair_ref_recall([], ["a"], [1, 3]) is None
    assert pair_ref_recall(["a", "b"], [], [1, 3]) == {"1": 0.0, "3": 0.0}


def test_per_retriever_over_the_pairs_both_ranked() -> None:
    def pair(retriever: str, qid: str, qtype: str, ranked: list[str]) -> dict[str, object]:
        return {"retriever": retriever, "question_id": qid, "question_type": qtype,
                "ranked": ranked}

    results = [pair("ref", "q1", "t1", ["a", "b"]), pair("ref", "q2", "t2", ["c", "d"]),
               pair("ref", "q3", "t2", []),
               pair("x", "q1", "t1", ["b", "a"]), pair("x", "q2", "t2", ["e", "c"]),
               pair("x", "q3", "t2", ["z"]), pair("x", "q4", "t2", ["z"]),  # no reference
               pair("y", "q9", "t1", ["a"])]
    got = reference_recall(results, "ref", ["ref", "x", "y"], [1, 2])
    assert got["pairs"] == {"x": {"q1": {"1": 0.0, "2": 1.0}, "q2": {"1": 0.0, "2": 0.5}}}
    assert got["summary"]["x"]["overall"] == {"pairs": 2, "ref_recall@1": 0.0,
                                              "ref_recall@2": 0.75}
    assert got["summary"]["x"]["by_type"]["t2"] == {"pairs": 1, "ref_recall@1": 0.0,
                                                    "ref_recall@2": 0.5}
    assert "y" not in got["summary"] and "ref" not in got["summary"]
