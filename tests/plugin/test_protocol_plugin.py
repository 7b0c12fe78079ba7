"""``--retrieval-eval-protocol`` and ``--retrieval-eval-granularity`` end to end (pytester)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.data.generator.instances import SAMPLE, iter_instances
from tests.support import lme_reference

SAMPLE_INSTANCES = list(iter_instances(SAMPLE))
USAGE_ERROR = 4

pytestmark = pytest.mark.usefixtures("isolated_cache")


def report_of(pytester: pytest.Pytester, *args: str) -> tuple[dict[str, Any], str]:
    out = pytester.path / "report.json"
    result = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                                "--retrieval-eval", "--retrieval-eval-json", str(out), *args)
    assert result.ret == 0, result.stdout.str()
    data: dict[str, Any] = json.loads(out.read_text())
    return data, result.stdout.str()


@pytest.mark.parametrize("granularity", ["session", "turn"])
def test_longmemeval_protocol_equals_an_independent_reimplementation(
        pytester: pytest.Pytester, granularity: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled sample's bm25 rankings and averages are upstream's (numpy's own ties)."""
    monkeypatch.setenv("COLUMNS", "200")  # whole summary lines (test_fit_lines: the wrapping)
    data, text = report_of(pytester, "--retrieval-eval-protocol", "longmemeval",
                           "--retrieval-eval-granularity", granularity)
    assert data["protocol"] == "longmemeval" and data["granularity"] == granularity
    assert data["ks"] == [1, 3, 5, 10, 30, 50] and data["retrievers"] == ["bm25"]
    assert f"protocol: longmemeval  granularity: {granularity}" in text
    expected = lme_reference.run(SAMPLE_INSTANCES, granularity)
    pairs = {p["question_id"]: p for p in data["pairs"]}
    assert set(pairs) == set(expected)  # the same question set
    for qid, want in expected.items():
        assert pairs[qid]["ranked"] == want["ranked"][:50], qid
        assert pairs[qid]["metrics"] == pytest.approx(want["metrics"], abs=1e-12), qid
    overall = data["summary"]["bm25"]["overall"]
    for key in expected[next(iter(expected))]["metrics"]:
        mean = sum(e["metrics"][key] for e in expected.values()) / len(expected)
        assert overall[key] == pytest.approx(mean, abs=1e-12), key
    skipped = data["skipped"]
    assert skipped["abstention"] + skipped["no_user_evidence"] == len(SAMPLE_INSTANCES) - len(
        expected)
    assert "without a user has_answer turn" in text
    assert "repeated session slot(s), each kept as its own item" in text
    assert "first occurrence kept" not in text
    if granularity == "turn":  # shown by default beside recall_any (one retriever: one table)
        assert re.search(r"question type +n +any@1 .* sany@1 ", text), text
        assert all("_" in r for p in data["pairs"] for r in p["ranked"])


def test_the_vipune_protocol_is_the_default(pytester: pytest.Pytester) -> None:
    data, text = report_of(pytester, "--retrieval-eval-retriever", "bm25")
    assert data["protocol"] == "vipune" and data["granularity"] == "session"
    assert data["ks"] == [1, 5, 10] and "protocol: vipune  granularity: session" in text


def test_vipune_turns_rank_turn_rows_and_derive_session_recall(
        pytester: pytest.Pytester) -> None:
    data, text = report_of(pytester, "--retrieval-eval-granularity", "turn",
                           "--retrieval-eval-retriever", "bm25,oracle")
    assert data["protocol"] == "vipune" and data["granularity"] == "turn"
    oracle = data["summary"]["oracle"]["overall"]
    assert oracle["recall@1"] < 1.0 <= oracle["session_recall@10"]
    pair = next(p for p in data["pairs"] if p["retriever"] == "bm25")
    session_ids = {sid for i in SAMPLE_INSTANCES for sid in i["haystack_session_ids"]}
    assert all(r.rsplit("_", 1)[0] in session_ids for r in pair["ranked"])
    assert "session_recall@k" in text


def test_longmemeval_protocol_ini_twin_and_explicit_ks(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nretrieval_eval_protocol = longmemeval\n")
    data, _ = report_of(pytester, "--retrieval-eval-k", "2")
    assert data["protocol"] == "longmemeval" and data["ks"] == [2]


def test_store_retrievers_are_refused_under_longmemeval(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--retrieval-eval", "--retrieval-eval-protocol", "longmemeval",
                                "--retrieval-eval-retriever", "bm25,hybrid")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(["*--retrieval-eval-retriever hybrid reads a vipune store*"])
    result = pytester.runpytest("--retrieval-eval", "--retrieval-eval-protocol", "longmemeval",
                                "--retrieval-eval-retriever", "fts+mode:or")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(["*--retrieval-eval-retriever fts+mode:or reads a vipune*"])


def test_a_bad_protocol_is_one_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--retrieval-eval", "--retrieval-eval-protocol", "upstream")
    assert result.ret == USAGE_ERROR
    assert "not one of vipune, longmemeval" in result.stderr.str()
