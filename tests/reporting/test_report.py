"""Summary aggregation, table lines and the JSON report, from plain result dicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.reporting import report
from pytest_retrieval_eval.scoring.metrics import score_ranking

KS = (1, 2)


def result(retriever: str, index: int, qtype: str, ranked: list[str], gold: list[str],
           qid: str | None = None) -> dict[str, Any]:
    return {
        "retriever": retriever, "index": index, "question_id": qid or f"q{index}",
        "question_type": qtype, "gold": gold, "gold_source": "answer_session_ids",
        "ranked": ranked, "metrics": score_ranking(ranked, gold, KS, set(ranked) | set(gold)),
        "notes": {}, "latency_ms": {"query_embedding": None, "retrieval": 1.0 + index},
    }


def info(retrievers: list[str], usable: int = 3) -> dict[str, Any]:
    return {
        "dataset": {"name": "sample", "sha256": "ab" * 32, "gold_source": "answer_session_ids"},
        "lane": "model-free", "model": {"name": "m", "fingerprint": "f" * 64, "dim": 4,
                                        "pooling": "mean"},
        "ks": list(KS), "retrievers": retrievers, "usable": usable,
        "skipped": {"abstention": 2, "rejected": 1}, "rejections": [], "notes": {},
    }


RESULTS = [
    result("a", 0, "temporal-reasoning", ["g", "x"], ["g"]),
    result("a", 1, "temporal-reasoning", ["x", "g"], ["g"]),
    result("a", 2, "multi-session", ["x", "y"], ["g", "h"]),
    result("b", 0, "temporal-reasoning", ["x", "g"], ["g"]),
    result("b", 1, "temporal-reasoning", ["x", "g"], ["g"]),
    result("b", 2, "multi-session", ["g", "h"], ["g", "h"]),
]


def test_summary_by_type_and_overall() -> None:
    s = report.summarize(RESULTS, ["a", "b"])
    assert s["a"]["by_type"]["temporal-reasoning"]["n"] == 2
    assert s["a"]["by_type"]["temporal-reasoning"]["recall@1"] == pytest.approx(0.5)
    assert s["a"]["overall"]["recall@2"] == pytest.approx(2 / 3)
    assert s["b"]["overall"]["recall@1"] == pytest.approx(0.5 / 3)
    assert s["b"]["by_type"]["multi-session"]["recall_all@2"] == 1.0
    # question types follow the dataset card's order, not insertion order
    assert list(s["a"]["by_type"]) == ["temporal-reasoning", "multi-session"]


def test_order_of_results_does_not_change_anything() -> None:
    one = report.build_report(info(["a", "b"]), RESULTS, [])
    two = report.build_report(info(["a", "b"]), list(reversed(RESULTS)), [])
    assert one == two
    assert [r["retriever"] for r in one["pairs"]] == ["a"] * 3 + ["b"] * 3


def test_single_retriever_table() -> None:
    rep = report.build_report(info(["a"]), RESULTS[:3], [])
    default = report.terminal_lines(rep, width=120)  # the main table alone: recall@k
    head = next(line for line in default if line.startswith("question type"))
    assert head.split()[2:] == ["n", "R@1", "R@2"]
    lines = report.terminal_lines(rep, width=120, tables=["all"])
    head = next(line for line in lines if line.startswith("question type"))
    assert head.split()[2:] == ["n", "R@1", "R@2", "any@1", "any@2", "all@1", "all@2",
                                "ndcg@1", "ndcg@2"]
    overall = next(line for line in lines if line.startswith("overall"))
    assert overall.split()[1:4] == ["3", "0.333", "0.667"]
    # ndcg_any@2: 1 (gold first), 1/log2(2) = 1 (gold second, ideal 1), 0: mean 2/3.
    assert overall.split()[-1] == "0.667"
    assert any("pairs: 3 scored of 3 usable; skipped 2 abstention, 1 rejected" in line
               for line in lines)


def test_several_retrievers_side_by_side() -> None:
    lines = report.terminal_lines(report.build_report(info(["a", "b"]), RESULTS, []),
                                  tables=["all"])
    titles = [line.split()[0] for line in lines if line.endswith("b") and "@k" in line]
    assert titles == ["recall@k", "recall_any@k", "recall_all@k", "ndcg_any@k"]
    title = next(i for i, line in enumerate(lines) if line.startswith("recall@k"))
    assert lines[title].split()[1:] == ["a", "b"]
    assert lines[title + 1].split()[2:] == ["n", "@1", "@2", "@1", "@2"]
    overall = next(line for line in lines[title:] if line.startswith("overall"))
    # a: recall@1 = 1/3, recall@2 = 2/3; b: recall@1 = 0.5/3, recall@2 = 1
    assert overall.split()[1:] == ["3", "0.333", "0.667", "0.167", "1.000"]


def test_drift_counts_identical_top_k() -> None:
    res = [result("hybrid", 0, "multi-session", ["a", "b"], ["a"]),
           result("vipune", 0, "multi-session", ["a", "b"], ["a"]),
           result("hybrid", 1, "multi-session", ["a", "b"], ["a"]),
           result("vipune", 1, "multi-session", ["b", "a"], ["a"])]
    rep = report.build_report(info(["hybrid", "vipune"], usable=2), res, [])
    assert rep["drift"] == [{"a": "hybrid", "b": "vipune", "k": 2, "pairs": 2, "identical": 1}]
    assert any("1 of 2 pairs have an identical top 2" in line
               for line in report.terminal_lines(rep))


def test_not_selected_counts_deselected_pairs() -> None:
    rep = report.build_report(info(["a"], usable=10), RESULTS[:3], [])
    assert rep["skipped"]["not_selected"] == 7


def test_json_is_written_atomically(tmp_path: Path) -> None:
    rep = report.build_report(info(["a"]), RESULTS[:3], [])
    target = tmp_path / "out" / "report.json"
    report.write_json(rep, target)
    data = json.loads(target.read_text())
    assert data["schema_version"] == report.SCHEMA_VERSION
    assert {"dataset", "lane", "model", "ks", "retrievers", "pairs", "summary",
            "skipped"} <= set(data)
    assert "info" not in data
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_json_write_failure_leaves_nothing(tmp_path: Path) -> None:
    rep = report.build_report(info(["a"]), RESULTS[:3], [])
    rep["pairs"].append({"bad": object()})  # not JSON-serialisable
    target = tmp_path / "report.json"
    with pytest.raises(TypeError):
        report.write_json(rep, target)
    assert list(tmp_path.iterdir()) == []


def test_write_json_to_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    from pytest_retrieval_eval.errors import CacheError

    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(CacheError) as info:
        report.write_json({"schema_version": 1}, blocker / "r.json")
    assert "\n" not in str(info.value) and "JSON report" in str(info.value)
    assert blocker.read_text(encoding="utf-8") == "x"


def test_terminal_lines_verbose_adds_diagnostics_per_type_and_ties_line() -> None:
    results = [dict(r) for r in RESULTS]
    results[0]["ties"] = {"sensitive": {"recall@1": {"expected": 0.5, "worst": 0.0,
                                                     "best": 1.0}}}
    for r in results[1:]:
        r["ties"] = {"sensitive": {}}
    rep = report.build_report(info(["a", "b"]), results, [])
    assert rep["diagnostics"]["a"]["by_type"]["temporal-reasoning"]["pairs"] == 2
    assert rep["ties"]["a"]["sensitive_pairs"] == 1
    plain = report.terminal_lines(rep, width=200)
    verbose = report.terminal_lines(rep, width=200, verbose=True)
    per_type = [line for line in verbose if line.startswith("  temporal-reasoning: ")]
    assert len(per_type) == 2 and not any(line.startswith("  temporal") for line in plain)
    # a: recall@1 as run 1/3 over 3 pairs; the tied pair 0.5 expected, 0 worst, 1 best.
    tie, = [line for line in plain if line.startswith("ties: ")]
    assert tie == ("ties: a: 1 of 3 pairs depend on the order of equal scores, recall@1 "
                   "most: 0.333 as run, 0.167 expected over every order (worst 0.000, best "
                   "0.333); every metric in the JSON report's \"ties\"")


def test_a_session_stores_memory_recall_is_its_recall_beside_a_memory_store() -> None:
    # b is a memory store (its pairs hold memory_recall@k, here by hand); a a session store,
    # whose memory_recall@k is its recall@k (each memory one session): shown, not "-"
    mem = [{**r, "metrics": {**r["metrics"], "memory_recall@1": 0.0, "memory_recall@2": 0.5,
                             "recall@500tok": 0.25}} for r in RESULTS[3:]]
    sessions = [{**r, "metrics": {**r["metrics"], "recall@500tok": 1.0}} for r in RESULTS[:3]]
    rep = report.build_report(info(["a", "b"]), [*sessions, *mem], [])
    a, b = rep["summary"]["a"]["overall"], rep["summary"]["b"]["overall"]
    assert a["memory_recall@1"] == a["recall@1"] == pytest.approx(1 / 3)
    assert a["memory_recall@2"] == a["recall@2"] == pytest.approx(2 / 3)
    assert "memory_recall@500tok" not in a  # a budget is no k
    assert (b["memory_recall@1"], b["memory_recall@2"]) == (0.0, 0.5)
    assert rep["summary"]["a"]["by_type"]["multi-session"]["memory_recall@2"] == 0.0
    assert all("memory_recall@1" not in p["metrics"] for p in rep["pairs"][:3])  # pairs as run
    lines = report.terminal_lines(rep, width=120, tables=["memory_recall"])  # -v's table
    title = next(i for i, line in enumerate(lines) if line.startswith("memory_recall@k"))
    overall = next(line for line in lines[title:] if line.startswith("overall"))
    assert overall.split()[1:] == ["3", "0.333", "0.667", "0.000", "0.500"]
    # a run of session stores only has no memory_recall at all
    plain = report.build_report(info(["a", "b"]), RESULTS, [])
    assert not any("memory_recall" in key for s in plain["summary"].values()
                   for key in s["overall"])


def test_with_memory_recall_maps_ks_not_budgets() -> None:
    from pytest_retrieval_eval.scoring.memory_metrics import with_memory_recall

    got = with_memory_recall({"recall@5": 0.5, "recall@500tok": 1.0, "tokens@5": 80.0})
    assert got == {"recall@5": 0.5, "recall@500tok": 1.0, "tokens@5": 80.0,
                   "memory_recall@5": 0.5}
