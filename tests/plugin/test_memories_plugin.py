"""Memory stores end to end (issue 36), on the bundled sample.

* a session store returning ``(id, score)`` pairs and the same store returning one-session
  ``Memory`` items give identical reports;
* a Python turn store, the same store over ``cmd:``, and its rankings as a ``run:`` file of
  turn ids give identical metrics, memories and session rankings.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.plugin_runs import run_with_report

pytestmark = pytest.mark.usefixtures("isolated_cache")
STORE = Path(__file__).resolve().parents[1] / "support" / "memory_store.py"
VARYING = ("retriever", "selector", "latency_ms")


def by_question(report: dict[str, Any], column: str) -> dict[str, dict[str, Any]]:
    return {p["question_id"]: {k: v for k, v in p.items() if k not in VARYING}
            for p in report["pairs"] if p["retriever"] == column}


def test_one_session_memories_report_as_their_ids(pytester: pytest.Pytester) -> None:
    _, data = run_with_report(
        pytester, "--retrieval-eval-budget=500,4000", "--retrieval-eval-retriever",
        "tests.support.memory_store:SessionIds,tests.support.memory_store:SessionMemories")
    ids, mems = by_question(data, "session-ids"), by_question(data, "session-memories")
    assert ids and ids == mems
    assert all("memories" not in p and "memory_recall@1" not in p["metrics"]
               and "recall@500tok" in p["metrics"] for p in ids.values())
    assert data["summary"]["session-ids"] == data["summary"]["session-memories"]
    assert data["ties"]["session-ids"] == data["ties"]["session-memories"]


def test_a_turn_store_in_python_over_cmd_and_as_a_run_file_agree(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = pytester.path / "memories.jsonl"
    monkeypatch.setenv("MEMORY_STORE_LOG", str(log))
    command = f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(STORE))}"
    _, data = run_with_report(pytester, "--retrieval-eval-budget=300", "--retrieval-eval-retriever",
                              f"tests.support.memory_store:TurnStore,{command}")
    lines = []
    for row in map(json.loads, log.read_text().splitlines()):
        for rank, (tid, score) in enumerate(row["memories"], start=1):
            lines.append(f"{row['question_id']} Q0 {tid} {rank} {score!r} turnrun")
    pytester.path.joinpath("turns.trec").write_text("\n".join(lines[::-1]) + "\n")
    _, run = run_with_report(pytester, "--retrieval-eval-budget=300",
                             "--retrieval-eval-retriever", "run:turns.trec")
    python = by_question(data, "turnstore")
    over_cmd = by_question(data, "turnstore-cmd")
    as_run = by_question(run, run["retrievers"][0])
    assert len(python) == 15
    for qid, mine in python.items():
        assert "memory_recall@10" in mine["metrics"] and "recall@300tok" in mine["metrics"]
        assert mine["memories"][0]["turns"] == [mine["memories"][0]["id"]]
        for other in (over_cmd[qid], as_run[qid]):
            assert other["metrics"] == mine["metrics"], qid
            assert other["ranked"] == mine["ranked"], qid
            assert other["memories"] == mine["memories"], qid
            assert other["budget"] == mine["budget"], qid
    assert data["summary"]["turnstore"] == data["summary"]["turnstore-cmd"] \
        == run["summary"][run["retrievers"][0]]
    with_turns = [p for p in python.values() if "turn_recall@10" in p["metrics"]]
    assert 0 < len(with_turns) < len(python)  # pairs whose gold marks has_answer turns
    overall = data["summary"]["turnstore"]["overall"]
    assert overall["turn_recall@10"] == pytest.approx(
        sum(p["metrics"]["turn_recall@10"] for p in with_turns) / len(with_turns))
    assert 0 < overall["turn_recall@10"] < overall["memory_recall@10"] <= 1
    assert overall["recall@10"] >= overall["memory_recall@10"]  # 10 sessions >= 10 turns


def test_explain_diff_and_compare_read_a_memory_store_beside_a_session_store(
        pytester: pytest.Pytester) -> None:
    from pytest_retrieval_eval.reporting.compare import compare_reports, compare_retrievers
    from pytest_retrieval_eval.reporting.explain import explain_lines
    from pytest_retrieval_eval.reporting.explain_diff import diff_lines

    _, data = run_with_report(
        pytester, "--retrieval-eval-retriever",
        "tests.support.memory_store:SessionIds,tests.support.memory_store:TurnStore")
    turns = {p["question_id"]: p for p in data["pairs"] if p["retriever"] == "turnstore"}
    sessions = {p["question_id"]: p for p in data["pairs"] if p["retriever"] == "session-ids"}
    qid = next(q for q, p in turns.items() if set(p["gold"]) & set(p["ranked"]))
    pair = turns[qid]
    lines = explain_lines(data, qid, "turnstore", width=None)
    head = lines.index(next(x for x in lines if x.startswith("turnstore: memories")))
    first = pair["memories"][0]
    assert lines[head + 1].split()[:2] == ["1", first["id"]] or \
        lines[head + 1].split()[:3] == ["1", "*", first["id"]]
    # a turn memory's provenance is its id: not repeated; its text stands beside it
    assert first["turns"] == [first["id"]] and "turns " not in lines[head + 1]
    assert first["excerpt"] and lines[head + 1].endswith(repr(first["excerpt"][:59] + "…")
                                                         if len(first["excerpt"]) > 60
                                                         else repr(first["excerpt"]))
    gold = pair["gold"][0]
    covering = next(m for m in pair["memories"]
                    if gold in [t.rsplit("_", 1)[0] for t in m["turns"]])
    assert f"  gold {gold}: first in memory {covering['rank']} ({covering['id']})" in lines
    # a session store's explain has no memory part
    assert not any("memories" in x for x in explain_lines(data, qid, "session-ids", width=None))
    diff = diff_lines(data, data, qid, retrievers=[("session-ids", "turnstore")], width=None)
    line = next(x for x in diff if x.startswith("  memory_recall"))
    b, n = sessions[qid]["metrics"], pair["metrics"]
    assert f"@10 {b['recall@10']:.3f} -> {n['memory_recall@10']:.3f}" in line
    # compare: within one report, and across two; a session store's memory_recall is recall
    within = compare_retrievers(data, "session-ids", "turnstore",
                                metrics=["memory_recall@10"], permutations=200,
                                resamples=200)
    row = next(r for r in within["rows"]["memory_recall@10"] if r["question_type"] == "overall")
    mean_b = sum(p["metrics"]["recall@10"] for p in sessions.values()) / len(sessions)
    mean_n = sum(p["metrics"]["memory_recall@10"] for p in turns.values()) / len(turns)
    assert row["base"] == pytest.approx(mean_b) and row["new"] == pytest.approx(mean_n)
    across = compare_reports(data, data, metrics=["memory_recall@10"],
                             retrievers=[("session-ids", "turnstore")], permutations=200,
                             resamples=200)
    row2 = next(r for r in across["rows"]["memory_recall@10"]
                if r["question_type"] == "overall")
    assert (row2["base"], row2["new"], row2["n"]) == (row["base"], row["new"], row["n"])


RECORDING_TEST = '''
from types import SimpleNamespace

from tests.support.memory_store import TurnStore


def test_turns_recorded(retrieval_eval_pair, retrieval_eval_corpus, retrieval_eval_record):
    pair = retrieval_eval_pair
    persona = SimpleNamespace(session_ids=pair.session_ids,
                              turns=retrieval_eval_corpus.turns(list(pair.text_keys)))
    memories = TurnStore().rank(persona, SimpleNamespace(question=pair.question,
                                                         question_id=pair.question_id), 10)
    retrieval_eval_record(memories)
'''


def test_memories_handed_to_retrieval_eval_record_score_as_the_store(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=RECORDING_TEST)
    _, data = run_with_report(pytester, "--retrieval-eval-retriever",
                              "tests.support.memory_store:TurnStore")
    store = by_question(data, "turnstore")
    recorded = by_question(data, "test_turns_recorded")
    assert len(recorded) == len(store) == 15
    for qid, mine in store.items():
        assert recorded[qid]["metrics"] == mine["metrics"], qid
        assert recorded[qid]["memories"] == mine["memories"], qid
        assert recorded[qid]["ranked"] == mine["ranked"], qid


def test_a_budget_counts_a_memory_stores_memories(pytester: pytest.Pytester) -> None:
    _, data = run_with_report(
        pytester, "--retrieval-eval-budget", "500",
        "--retrieval-eval-retriever",
        "tests.support.memory_store:SessionIds,tests.support.memory_store:TurnStore")
    turns = by_question(data, "turnstore")
    sessions = by_question(data, "session-ids")
    for qid, pair in turns.items():
        # the context is the memories: one token count per memory read (turns, not sessions)
        assert len(pair["budget"]["tokens"]) <= len(pair["memories"]) + 10, qid
        assert 0.0 <= pair["metrics"]["recall@500tok"] <= 1.0
    mean = {name: sum(p["metrics"]["tokens@1"] for p in pairs.values()) / len(pairs)
            for name, pairs in (("turns", turns), ("sessions", sessions))}
    assert mean["turns"] < mean["sessions"]  # one turn is less context than one session
