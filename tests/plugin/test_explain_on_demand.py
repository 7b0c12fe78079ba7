"""Explain facts cost only those who read them (issue 35, item 2): a run that writes no JSON
report and shows no ``-v`` explanations computes none, one that does computes no FTS5 matched
words (explain asks the store for them: issue 48, item 11), and its numbers are those of a
run that records them."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)

pytestmark = pytest.mark.usefixtures("isolated_cache")

# Counts fts_matched's calls (the matched words: most of hybrid's explain cost) and keeps
# each result's keys, written at session end.
CONFTEST = '''
import json
from pathlib import Path

import pytest

from pytest_retrieval_eval import vipune

CALLS = []
_real = vipune.fts_matched


def _counted(*args, **kwargs):
    CALLS.append(1)
    return _real(*args, **kwargs)


vipune.fts_matched = _counted


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    from pytest_retrieval_eval.fixtures import SESSION_KEY

    state = session.config.stash[SESSION_KEY]
    keys = sorted({k for r in state.outcomes.results for k in r})
    ranked = sorted((r["retriever"], r["question_id"], r["ranked"], sorted(r["metrics"].items()))
                    for r in state.outcomes.results)
    Path("seen.json").write_text(json.dumps({"calls": len(CALLS), "keys": keys,
                                             "summary": state.report["summary"],
                                             "ranked": ranked}))
    vipune.fts_matched = _real
'''


def run(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    pytester.makeconftest(CONFTEST)
    # in a subprocess: the conftest's patch reaches the modules the run itself imported
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--retrieval-eval", "--no-model",
        "--retrieval-eval-retriever=hybrid,fts", *args)
    assert result.ret == 0, result.stdout.str()
    seen: dict[str, Any] = json.loads((pytester.path / "seen.json").read_text())
    return seen


def test_only_a_report_or_v_computes_explain_facts_and_the_numbers_are_the_same(
        pytester: pytest.Pytester) -> None:
    """No report and no ``-v``: no explain facts (the tie report stays: its line is in every
    summary). A report records them, but never FTS5's matched words: explain asks the store
    for them when it shows them (issue 48, item 11), so a run with a report pays no
    fts_matched call. The two runs' numbers are the same."""
    without = run(pytester)
    assert without["calls"] == 0 and "explain" not in without["keys"], without
    assert "ties" in without["keys"]
    with_facts = run(pytester, "--retrieval-eval-json=with.json")
    assert "explain" in with_facts["keys"] and with_facts["calls"] == 0, with_facts
    assert with_facts["summary"] == without["summary"]
    assert with_facts["ranked"] == without["ranked"]


def test_v_records_them_without_matched_words(pytester: pytest.Pytester) -> None:
    seen = run(pytester, "-v", "-k", "1127eab1")
    assert "explain" in seen["keys"] and seen["calls"] == 0, seen
