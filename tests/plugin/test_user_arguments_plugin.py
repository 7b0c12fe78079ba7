"""Reliability V (34.13): a dotted-path retriever's argument its class does not take, and a
list cut at the retriever list's comma, are one usage line at start-up (exit 4), not a
failure per item."""

from __future__ import annotations

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
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


HOOK_STORE = """
import json, os

class Boom:
    name = "boom"
    needs_vectors = False

    def __init__(self):
        with open(os.path.join(os.path.dirname(__file__), "built.log"), "a") as f:
            f.write(json.dumps(os.getpid()) + "\\n")
        raise RuntimeError("no server at localhost:9")

    def rank(self, persona, query, limit):
        return list(persona.session_ids)[:limit]

def pytest_retrieval_eval_retrievers(config):
    return [Boom]
"""

BOOM = "pytest_retrieval_eval_retrievers: store 'boom': creating it failed"


def _builds(pytester: pytest.Pytester) -> list[int]:
    log = pytester.path / "built.log"
    return [int(x) for x in log.read_text().split()] if log.exists() else []


def test_a_hook_store_that_cannot_be_made_is_one_usage_line(
        pytester: pytest.Pytester) -> None:
    """Serial: the store is built at collection, in the process that ranks; its failure is
    one usage line (exit 4), no item fails, no report is written, and it is built once."""
    pytester.makeconftest(HOOK_STORE)
    out = pytester.path / "report.json"
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever=fts,custom",
                        f"--retrieval-eval-json={out}")
    usage_error_line(result, BOOM, "RuntimeError: no server at localhost:9")
    assert "failed" not in result.stdout.str() and "passed" not in result.stdout.str()
    assert not out.exists()
    assert len(_builds(pytester)) == 1


def test_a_hook_store_that_cannot_be_made_stops_an_xdist_run(
        pytester: pytest.Pytester) -> None:
    """Under xdist each worker builds where its first item needs it: the first failure
    stops the whole run with that line (at most one failed item per worker, not one per
    pair), exit 4, no report."""
    pytest.importorskip("xdist")
    pytester.makeconftest(HOOK_STORE)
    out = pytester.path / "report.json"
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-W",
        "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval", "--no-model",
        "--retrieval-eval-retriever=fts,custom", f"--retrieval-eval-json={out}", "-n", "2")
    text = result.stdout.str()
    assert result.ret == 4, text
    failed = [line for line in text.splitlines() if line.startswith("FAILED ")]
    assert 1 <= len(failed) <= 2, text
    assert all("::boom - " in line for line in failed), text
    stops = [line for line in text.splitlines() if "Interrupted: " + BOOM in line]
    assert len(stops) == 1, text
    assert not out.exists()
    assert 1 <= len(_builds(pytester)) <= 2  # once per worker at most, never per item


CUSTOM_FIXTURE = """
import pytest

@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever():
    raise RuntimeError("the index is not there")
"""


def test_a_custom_fixture_that_raises_stops_at_the_first_pair(
        pytester: pytest.Pytester) -> None:
    """The custom fixture's store is built by the fixture, inside the first item: its
    failure is that item's one line, then the run stops, exit 4, no report."""
    pytester.makeconftest(CUSTOM_FIXTURE)
    out = pytester.path / "report.json"
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever=custom",
                        f"--retrieval-eval-json={out}")
    text = result.stdout.str()
    assert result.ret == 4, text
    result.assert_outcomes(failed=1)
    needle = ("retrieval_eval_custom_retriever raised RuntimeError: the index is not there; "
              "fix the fixture in your conftest.py")
    assert needle in text and "Traceback" not in text, text
    assert not out.exists()


def test_a_dotted_class_whose_constructor_raises_is_one_usage_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(mystore_34b=STORE.replace("self.ef = ef", "raise OSError('gone')"))
    pytester.syspathinsert()
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever=mystore_34b:Store")
    usage_error_line(result, "retriever 'mystore_34b:Store': creating it failed",
                     "OSError: gone")
    assert "failed" not in result.stdout.str()
