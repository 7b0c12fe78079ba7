"""``RRF`` in real runs on the bundled sample (issue 37 item 6): from a conftest's hook,
``RRF(["semantic", "fts"], k=25)`` ranks every pair exactly as ``hybrid``; its parts' query
and ingest times sit inside its own timing, its config names them, ``retrieval-eval
explain`` shows each row's rank in each part; from the custom fixture it is one column."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.cli import console as cli

pytestmark = pytest.mark.usefixtures("isolated_cache")

SAMPLE_PAIRS = 15  # the bundled sample's usable pairs

HOOK = """
from pytest_retrieval_eval.retrievers import RRF

def pytest_retrieval_eval_retrievers(config):
    return {"rrf25": RRF(["semantic", "fts"], k=25), "rrf-bm25": RRF(["bm25", "semantic"])}
"""

FIXTURE = """
import pytest
from pytest_retrieval_eval.retrievers import RRF, SemanticRetriever

@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever():
    return RRF([SemanticRetriever(), "bm25"], name="fused")
"""


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = pytester.path / "report.json"
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-W",
                                "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval",
                                "--no-model", "--retrieval-eval-json", str(out), *args)
    assert result.ret == 0, result.stdout.str()
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result, report


def test_rrf_of_semantic_and_fts_equals_hybrid_pair_by_pair(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makeconftest(HOOK)
    result, report = run(pytester, "--retrieval-eval-retriever", "hybrid,custom",
                         "--retrieval-eval-tables=all")
    result.assert_outcomes(passed=3 * SAMPLE_PAIRS)
    assert report["retrievers"] == ["hybrid", "rrf25", "rrf-bm25"]
    pairs: dict[str, dict[str, dict[str, Any]]] = {}
    for pair in report["pairs"]:
        pairs.setdefault(pair["question_id"], {})[pair["retriever"]] = pair
    assert len(pairs) == SAMPLE_PAIRS
    for qid, by in pairs.items():
        assert by["rrf25"]["ranked"] == by["hybrid"]["ranked"], qid
        assert by["rrf25"]["metrics"] == by["hybrid"]["metrics"], qid
    assert report["summary"]["rrf25"]["overall"] == report["summary"]["hybrid"]["overall"]
    assert report["config"]["rrf25"] == {"k": 25, "parts": ["semantic", "fts"]}
    assert report["config"]["rrf-bm25"] == {"k": 60, "parts": ["bm25", "semantic"]}
    # Each part's times, inside the fused store's own: bm25 indexes, semantic does not.
    parts = report["timing"]["rrf-bm25"]["parts"]
    assert set(parts) == {"bm25", "semantic"}
    assert parts["bm25"]["query"]["n"] == SAMPLE_PAIRS and parts["semantic"]["query"]["n"]
    assert parts["bm25"]["ingest"]["personas"] == SAMPLE_PAIRS
    assert "ingest" not in parts["semantic"]
    assert "ingest" in report["timing"]["rrf-bm25"]
    assert "ingest" not in report["timing"]["rrf25"]  # neither semantic nor fts indexes
    result.stdout.fnmatch_lines(["rrf-bm25 parts: bm25 query * ms (p95 *), ingest * s; "
                                 "semantic query * ms (p95 *)"])
    # explain: each shown row's rank in each part's list
    qid = next(iter(pairs))
    code = cli.main(["explain", str(pytester.path / "report.json"), qid,
                     "--retriever", "rrf25"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ranks: semantic " in out and ", fts " in out


def test_rrf_from_the_custom_fixture_is_one_column(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FIXTURE)
    result, report = run(pytester, "--retrieval-eval-retriever", "custom")
    result.assert_outcomes(passed=SAMPLE_PAIRS)
    assert report["retrievers"] == ["fused"]
    assert report["config"]["fused"] == {"k": 60, "parts": ["semantic", "bm25"]}
    assert set(report["timing"]["fused"]["parts"]) == {"semantic", "bm25"}
