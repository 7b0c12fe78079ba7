"""Reliability V (34.13): a dotted-path retriever's argument its class does not take, and a
list cut at the retriever list's comma, are one usage line at start-up (exit 4), not a
failure per item."""

from __future__ import annotations

import pytest

from tests.support.reliability_support import run_plugin, usage_error_line

STORE = """
class Store:
    name = "mine"

    def __init__(self, ef=1, *, metric="cosine"):
        self.ef = ef

    def rank(self, persona, query, limit):
        return list(persona.session_ids)[:limit]
"""

pytestmark = pytest.mark.usefixtures("isolated_cache")


def test_an_argument_the_class_does_not_take_is_one_usage_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(mystore_34=STORE)
    pytester.syspathinsert()
    result = run_plugin(pytester, "--no-model",
                        "--retrieval-eval-retriever=mystore_34:Store+zz:1")
    line = usage_error_line(result, "retriever 'mystore_34:Store+zz:1'", "'zz'",
                            "it takes ef, metric")
    assert "failed" not in result.stdout.str(), line


def test_an_argument_it_takes_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(mystore_34=STORE)
    pytester.syspathinsert()
    result = run_plugin(pytester, "--no-model", "--co", "-q",
                        "--retrieval-eval-retriever=mystore_34:Store+metric:dot")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()


def test_a_list_value_says_a_comma_ends_a_retriever(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(mystore_34=STORE)
    pytester.syspathinsert()
    result = run_plugin(pytester, "--no-model",
                        "--retrieval-eval-retriever=mystore_34:Store+ef:[1,2]")
    usage_error_line(result, "a comma ends a retriever", "'mystore_34:Store+ef:[1'",
                     "pass a list through a no-argument factory")
    assert "unknown retriever '2]'" not in result.stderr.str()
