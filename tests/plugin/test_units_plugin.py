"""The memory examples and the +unit:turn references in a run (pytester, the bundled sample):
the Python turn store, the same store in Node over cmd: (embed op) and the built-in
semantic+unit:turn give one ranking, one set of metrics and one set of memories; the facts
store's memories carry their text and turn. Needs the harness's memory reading (issue 36
sections 1-2: retrievers/memories.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.plugin_runs import run_with_report

pytest.importorskip("pytest_retrieval_eval.retrievers.memories")
pytestmark = pytest.mark.usefixtures("isolated_cache")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "memories"


def _pairs(report: dict[str, Any], column: str) -> dict[str, dict[str, Any]]:
    return {p["question_id"]: p for p in report["pairs"] if p["retriever"] == column}


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_memory_examples_rank_as_semantic_unit_turn(pytester: pytest.Pytester) -> None:
    for name in ("turn_store.py", "facts_store.py", "store.js", "pytest.ini"):
        shutil.copy(EXAMPLES / name, pytester.path / name)
    _, report = run_with_report(pytester, "-p", "no:randomly")
    assert report["retrievers"] == ["semantic", "semantic+unit:turn", "turn-store", "facts",
                                    "node-turns"]
    builtin = _pairs(report, "semantic+unit:turn")
    assert len(builtin) == 15
    for column in ("turn-store", "node-turns"):
        theirs = _pairs(report, column)
        for qid, mine in builtin.items():
            assert theirs[qid]["ranked"] == mine["ranked"], (column, qid)
            assert theirs[qid]["metrics"] == mine["metrics"], (column, qid)
            assert [m["id"] for m in theirs[qid]["memories"]] == \
                [m["id"] for m in mine["memories"]], (column, qid)
        assert report["summary"][column] == report["summary"]["semantic+unit:turn"]
    for pair in builtin.values():
        assert all(m["turns"] == [m["id"]] for m in pair["memories"])
        assert pair["metrics"]["memory_recall@10"] <= pair["metrics"]["recall@10"]
    # The stores that embedded their own turns say how long that took, apart from ingest.
    assert all("store_embedding" in p["latency_ms"]
               for p in _pairs(report, "turn-store").values())
    facts = _pairs(report, "facts")
    for pair in facts.values():
        for memory in pair["memories"]:
            assert memory["id"].startswith(memory["turns"][0] + "#")
            assert memory["text"]


def test_bm25_and_fts_unit_turn_run_without_a_model(pytester: pytest.Pytester) -> None:
    _, report = run_with_report(pytester, "--retrieval-eval-retriever",
                                "bm25+unit:turn,fts+unit:turn")
    for column in ("bm25+unit:turn", "fts+unit:turn"):
        pairs = _pairs(report, column)
        assert len(pairs) == 15
        found = [p for p in pairs.values() if p["ranked"]]  # FTS5 ANDs: some find no turn
        assert len(found) >= 8
        assert all("memory_recall@10" in p["metrics"] for p in found)
        assert all(m["turns"] == [m["id"]] for p in found for m in p["memories"])
        # Issue 43.1: turn_recall@k over every pair whose gold marks turns, a pair that found
        # nothing counting 0 (as memory_recall@k does), not over the pairs that found some.
        marked = [p for p in pairs.values() if p.get("gold_turns")]
        assert len(marked) == 14
        assert all("turn_recall@10" in p["metrics"] for p in marked)
        assert report["summary"][column]["overall"]["turn_recall@10"] == pytest.approx(
            sum(p["metrics"]["turn_recall@10"] for p in marked) / 14)
    assert report["summary"]["fts+unit:turn"]["overall"]["turn_recall@10"] == pytest.approx(
        0.476, abs=5e-4)
