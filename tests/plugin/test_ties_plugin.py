"""Tie-aware numbers end to end (pytester): a custom retriever returning (id, score) pairs
with a known tie, and LongMemEval's bm25 at turn granularity on the bundled sample, checked
against the independent re-implementation's scores (tests/support/lme_reference.py)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.data.generator.instances import SAMPLE, iter_instances
from tests.support import lme_reference
from tests.support.plugin_runs import run_with_report

SAMPLE_INSTANCES = list(iter_instances(SAMPLE))
USABLE = [i for i in SAMPLE_INSTANCES if not i["question_id"].endswith("_abs")]

pytestmark = pytest.mark.usefixtures("isolated_cache")

#: Gold first, tied (score 1.0) with the first other session; then a strict order below.
TIED_TOP = textwrap.dedent('''
    import pytest

    class TiedTop:
        name = "tied-top"
        needs_vectors = False

        def rank(self, persona, query, limit):
            ids = list(persona.session_ids)
            gold = next(g for g in query.gold if g in ids)
            other = next(s for s in ids if s != gold)
            rest = [s for s in ids if s not in (gold, other)]
            return ([(gold, 1.0), (other, 1.0)]
                    + [(s, 0.5 - i / 1000) for i, s in enumerate(rest)])[:limit]

    @pytest.fixture(scope="session")
    def retrieval_eval_custom_retriever():
        return TiedTop()
''')


def report_of(pytester: pytest.Pytester, *args: str) -> tuple[dict[str, Any], str]:
    result, data = run_with_report(pytester, *args)
    return data, result.stdout.str()


def test_scored_pairs_from_a_custom_retriever_give_the_tie_range(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gold tied with one other session at the top: every @1 metric is 1 as run, 1/2
    expected, 0 worst, 1 best; @5 and @10 do not move (both tied positions are inside, and
    LongMemEval's DCG weighs ranks 1 and 2 alike)."""
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makeconftest(TIED_TOP)
    data, text = report_of(pytester, "--retrieval-eval-retriever", "custom")
    n = len(USABLE)
    for pair in data["pairs"]:
        gold = len(pair["gold"])
        sensitive = pair["ties"]["sensitive"]
        want = {"recall@1": {"expected": 0.5 / gold, "worst": 0.0, "best": 1 / gold},
                "recall_any@1": {"expected": 0.5, "worst": 0.0, "best": 1.0},
                "ndcg_any@1": {"expected": 0.5, "worst": 0.0, "best": 1.0}}
        if gold == 1:
            want["recall_all@1"] = {"expected": 0.5, "worst": 0.0, "best": 1.0}
        assert set(sensitive) == set(want), pair["question_id"]
        for key, value in want.items():
            assert sensitive[key] == pytest.approx(value), (pair["question_id"], key)
        assert pair["metrics"]["recall_any@1"] == 1.0
    name = data["retrievers"][0]
    summary = data["ties"][name]
    assert summary["pairs_with_scores"] == n and summary["sensitive_pairs"] == n
    assert summary["metrics"]["recall_any@1"] == {"as_run": 1.0, "expected": 0.5,
                                                  "worst": 0.0, "best": 1.0, "pairs": n}
    assert not any(key.endswith(("@5", "@10")) for key in summary["metrics"])
    assert (f"ties: {name}: {n} of {n} pairs depend on the order of equal scores, "
            "recall_any@1 most: 1.000 as run, 0.500 expected over every order (worst 0.000, "
            "best 1.000); every metric in the JSON report's \"ties\"") in text


def test_no_tie_line_when_no_pair_is_tie_sensitive(pytester: pytest.Pytester) -> None:
    data, text = report_of(pytester, "--retrieval-eval-retriever", "oracle,bm25")
    assert all(p["ties"] == {"sensitive": {}} for p in data["pairs"])
    assert data["ties"]["oracle"]["sensitive_pairs"] == 0
    assert "ties:" not in text


def _reference_turns(entry: dict[str, Any]) -> tuple[list[str], np.ndarray]:
    items = [it for sid, turns in zip(entry["haystack_session_ids"], entry["haystack_sessions"],
                                      strict=True)
             for it in lme_reference._items(sid, turns, "turn")]
    scores = BM25Okapi([text.split(" ") for _, text in items]).get_scores(
        entry["question"].split(" "))
    return [cid for cid, _ in items], scores


def test_longmemeval_turn_ties_match_the_reference_scores(pytester: pytest.Pytester) -> None:
    """Worst and best case of each pair and k are the reference's metrics of its ranking
    re-sorted with gold last / first among equal BM25Okapi scores (rank_bm25's own floats);
    a metric is listed exactly when they differ."""
    data, text = report_of(pytester, "--retrieval-eval-protocol", "longmemeval",
                           "--retrieval-eval-granularity", "turn")
    pairs = {p["question_id"]: p for p in data["pairs"]}
    by_id = {e["question_id"]: e for e in SAMPLE_INSTANCES}
    moved = 0
    for qid, pair in pairs.items():
        ids, scores = _reference_turns(by_id[qid])
        gold = {c for c in ids if "answer" in c}
        order = {}
        for case, sign in (("worst", 1), ("best", -1)):
            keys = sorted(range(len(ids)), key=lambda i: (-scores[i], sign * (ids[i] in gold)))
            order[case] = [ids[i] for i in keys]
        sensitive = pair["ties"]["sensitive"]
        for k in data["ks"]:
            values = {case: lme_reference._metrics(order[case], gold, ids, k)
                      for case in order}
            for j, family in enumerate(("recall_any", "recall_all", "ndcg_any")):
                key = f"{family}@{k}"
                low, high = values["worst"][j], values["best"][j]
                if high - low > 1e-12:
                    got = sensitive[key]
                    assert (got["worst"], got["best"]) == pytest.approx((low, high)), (qid, key)
                    assert low - 1e-12 <= got["expected"] <= high + 1e-12
                    assert low - 1e-12 <= pair["metrics"][key] <= high + 1e-12
                else:
                    assert key not in sensitive, (qid, key)
        moved += bool(sensitive)
    assert moved > 0  # the sample's turns share BM25 scores of 0 that decide some numbers
    assert data["ties"]["bm25"]["sensitive_pairs"] == moved
    assert "ties: bm25: " in text


def test_hybrid_reports_the_ties_of_its_semantic_list(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        tiny_model_dir: Path) -> None:
    """27.3: five sessions of one text, one of them gold, in each of six histories: the
    semantic list ties them (6 of 6 pairs), and so does hybrid now (RRF made strict ranks
    of them by row order: it showed 0 of 6); hybrid's numbers as run are unchanged."""
    from tests.support.lme_factory import make_instance, make_turns, write_dataset

    monkeypatch.setenv("COLUMNS", "200")
    instances = []
    for i in range(6):
        inst = make_instance(f"q{i}", n_sessions=12, gold=(2,))
        same = make_turns("my cat Luna and her vet visit")
        inst["haystack_sessions"] = [
            same if j < 5 else make_turns(f"q{i} garden topic {j}") for j in range(12)]
        inst["haystack_sessions"][2] = [dict(t, has_answer=True) if t["role"] == "user"
                                        and n == 0 else t for n, t in enumerate(same)]
        inst["question"] = "what about my cat Luna?"
        instances.append(inst)
    data_file = write_dataset(pytester.path / "twins.json", instances)
    out = pytester.path / "report.json"
    result = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                                "--retrieval-eval", f"--retrieval-eval-model={tiny_model_dir}",
                                f"--retrieval-eval-json={out}",
                                f"--retrieval-eval-data={data_file}",
                                "--retrieval-eval-retriever", "semantic,hybrid")
    text = result.stdout.str()
    assert result.ret == 0, text
    data = json.loads(out.read_text())
    assert data["ties"]["semantic"]["sensitive_pairs"] == 6
    assert data["ties"]["hybrid"]["sensitive_pairs"] == 6
    hybrid = data["ties"]["hybrid"]["metrics"]["recall@1"]
    assert hybrid["worst"] == 0.0 and hybrid["best"] == 1.0
    assert 0.0 < hybrid["expected"] < 1.0
    assert "ties: semantic: 6 of 6 pairs" in text and "hybrid: 6 of 6 pairs" in text
