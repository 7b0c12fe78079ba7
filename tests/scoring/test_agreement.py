"""scoring/agreement.py: identical top k and overlap@k, computed by hand on small cases."""

from __future__ import annotations

import pytest

from pytest_retrieval_eval.scoring.agreement import agreement, identical_top, overlap_at


def test_identical_top_k_is_same_ids_same_order() -> None:
    assert identical_top(["a", "b", "c"], ["a", "b", "d"], 2)
    assert not identical_top(["a", "b", "c"], ["a", "b", "d"], 3)
    assert not identical_top(["a", "b"], ["b", "a"], 2)  # same set, another order
    assert identical_top(["a"], ["a"], 10)  # both short: compared on what they returned
    assert not identical_top(["a"], ["a", "b"], 10)
    assert identical_top([], [], 5)


def test_overlap_at_k_by_hand() -> None:
    assert overlap_at(["a", "b", "c", "d"], ["d", "c", "x", "y"], 4) == 2 / 4
    assert overlap_at(["a", "b", "c", "d"], ["d", "c", "x", "y"], 2) == 0.0
    assert overlap_at(["a", "b"], ["b", "a"], 2) == 1.0  # order does not count
    # Short lists: divided by the longer top k, not by k.
    assert overlap_at(["a", "b"], ["a", "b"], 10) == 1.0
    assert overlap_at(["a", "b"], ["a", "b", "c", "d"], 10) == 2 / 4
    assert overlap_at([], ["a"], 5) == 0.0
    assert overlap_at([], [], 5) == 1.0


def test_agreement_counts_and_means_per_type() -> None:
    rows = [("t1", ["a", "b", "c"], ["a", "b", "c"]),   # identical
            ("t1", ["a", "b", "c"], ["a", "c", "b"]),   # same set, top 1 only identical
            ("t2", ["a", "b", "c"], ["x", "y", "a"])]   # overlap@3 1/3
    got = agreement(rows, [1, 3])
    assert got["overall"] == {"pairs": 3, "1": {"identical": 2, "overlap": pytest.approx(2 / 3)},
                              "3": {"identical": 1,
                                    "overlap": pytest.approx((1 + 1 + 1 / 3) / 3)}}
    assert list(got["by_type"]) == ["t1", "t2"]
    assert got["by_type"]["t1"] == {"pairs": 2, "1": {"identical": 2, "overlap": 1.0},
                                    "3": {"identical": 1, "overlap": 1.0}}
    assert got["by_type"]["t2"]["3"] == {"identical": 0, "overlap": pytest.approx(1 / 3)}
    assert agreement([], [1]) == {"overall": {"pairs": 0, "1": {"identical": 0,
                                                                "overlap": 0.0}},
                                  "by_type": {}}
