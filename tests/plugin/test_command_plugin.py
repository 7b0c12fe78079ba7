"""``--retrieval-eval-retriever cmd:COMMAND`` in real runs on the bundled sample: the Node
example store (examples/stores/node/store.js) ranks as ``semantic`` pair by pair; a broken
command fails its items in one line each, shows its stderr in the item's captured output,
never hangs the run, and the JSON report is still written."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.processes import kill_left, wait_gone
from tests.support.reliability_support import match_errors

ROOT = Path(__file__).resolve().parents[2]
NODE_STORE = ROOT / "examples" / "stores" / "node" / "store.js"
FAKE = ROOT / "tests" / "support" / "fake_store.py"
SAMPLE_PAIRS = 15  # the bundled sample's usable pairs

pytestmark = pytest.mark.usefixtures("isolated_cache")
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def fake(mode: str) -> str:
    return f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} {mode}"


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = pytester.path / "report.json"
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-W",
                                "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval",
                                "--no-model", "--retrieval-eval-json", str(out), *args)
    assert out.exists(), result.stdout.str()
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result, report


@needs_node
@pytest.mark.parametrize(("flags", "spread"), [("", ()), (" --base64", ("-n", "2"))],
                         ids=["json", "base64-n2"])
def test_the_node_store_ranks_every_pair_as_semantic(pytester: pytest.Pytester, flags: str,
                                                     spread: tuple[str, ...]) -> None:
    """With vectors as JSON arrays or as base64-f32le (issue 37.1): the same float32
    values reach the store, so it ranks every pair as ``semantic`` either way. Its column is
    named by its hello, ``node-cosine``, serially and under ``-n 2`` (the base64 run), and
    its pairs keep the selector."""
    selector = f"cmd:node {shlex.quote(str(NODE_STORE))}{flags}"
    result, report = run(pytester, "--retrieval-eval-retriever", f"semantic,{selector}",
                         *spread)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2 * SAMPLE_PAIRS)
    assert report["retrievers"] == ["semantic", "node-cosine"]
    assert {p["selector"] for p in report["pairs"] if p["retriever"] == "node-cosine"} == {
        selector}
    pairs: dict[str, dict[str, dict[str, Any]]] = {}
    for pair in report["pairs"]:
        column = pair.get("selector", pair["retriever"])
        pairs.setdefault(pair["question_id"], {})[column] = pair
    assert len(pairs) == SAMPLE_PAIRS
    for qid, both in pairs.items():
        ours, theirs = both[selector], both["semantic"]
        assert ours["ranked"] == theirs["ranked"], qid
        assert ours["metrics"] == theirs["metrics"], qid
        assert ours["ties"] == theirs["ties"], qid
    assert report["summary"][report["retrievers"][1]]["overall"] == \
        report["summary"]["semantic"]["overall"]


@pytest.mark.parametrize(("mode", "line"), [
    ("exit", "exited with status 3 while answering rank of question"),
    ("notjson", "which is not JSON"),
    ("huge", "with a line longer than 8 MiB"),
])
def test_a_broken_command_fails_each_item_in_one_line_and_the_report_is_written(
        pytester: pytest.Pytester, mode: str, line: str) -> None:
    result, report = run(pytester, "--retrieval-eval-retriever", f"bm25,{fake(mode)}")
    assert result.ret == 1
    result.assert_outcomes(passed=SAMPLE_PAIRS, failed=SAMPLE_PAIRS)
    errors = report["errors"]
    assert len(errors) == SAMPLE_PAIRS
    assert all("\n" not in e["error"] and "fake_store.py" in e["error"] for e in errors)
    assert all(line in e["error"] for e in errors)  # the first's line, then "stopped"
    assert sum("stopped at an earlier item" in e["error"] for e in errors) == SAMPLE_PAIRS - 1
    assert len(report["pairs"]) == SAMPLE_PAIRS  # bm25's


def test_a_missing_program_fails_in_one_line(pytester: pytest.Pytester) -> None:
    result, report = run(pytester, "--retrieval-eval-retriever", "cmd:no-such-store-here x")
    assert result.ret == 1
    result.assert_outcomes(failed=SAMPLE_PAIRS)
    assert "command `no-such-store-here x` does not start" in report["errors"][0]["error"]
    match_errors(result.stdout.str(), head="cmd:", patterns=[
        "cmd:no-such-store-here x: command `no-such-store-here x` does not start (No such "
        "file or directory); *"])


def test_a_silent_command_times_out_by_its_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nretrieval_eval_cmd_timeout = 0.5\n")
    result, report = run(pytester, "--retrieval-eval-retriever", fake("sleep"))
    assert result.ret == 1
    assert "did not answer rank of question" in report["errors"][0]["error"]
    assert "within 0.5 s (killed)" in report["errors"][0]["error"]
    assert float(result.parseoutcomes().get("seconds", 0) or 0) < 30


def test_an_error_answer_fails_the_item_and_shows_the_stores_stderr(
        pytester: pytest.Pytester) -> None:
    result, report = run(pytester, "--retrieval-eval-retriever", fake("error"), "-x")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    assert report["errors"][0]["error"].endswith("the index is not ready")
    result.stdout.fnmatch_lines(["*Captured stderr call*", "fake-store got hello",
                                 "fake-store got index", "fake-store got rank"])


@pytest.mark.parametrize(("value", "message"), [
    ("cmd:", "names no command"), ("cmd:node 'x", "cannot be split into words")])
def test_a_selector_without_a_command_is_one_usage_error(pytester: pytest.Pytester,
                                                         value: str, message: str) -> None:
    result = pytester.runpytest("--retrieval-eval", "--retrieval-eval-retriever", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(), [f"ERROR: --retrieval-eval-retriever: *{message}*"])


@pytest.mark.parametrize("value", ["0", "inf", "x"])
def test_the_timeout_option_is_checked(pytester: pytest.Pytester, value: str) -> None:
    result = pytester.runpytest("--retrieval-eval", "--retrieval-eval-cmd-timeout", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(), ["ERROR: --retrieval-eval-cmd-timeout: *"])


def test_the_retriever_list_takes_commands() -> None:
    from pytest_retrieval_eval.config import options

    assert options.parse_retrievers("bm25,cmd:node 'my store.js' --a+b") == (
        "bm25", "cmd:node 'my store.js' --a+b")  # '+' in a command is no what-if


JQ_STORE = ROOT / "examples" / "stores" / "jq" / "store.jq"
OVERLAP = """
import re

import pytest


def words(text):
    low = "".join(c.lower() if "A" <= c <= "Z" else c for c in text)  # jq's ascii_downcase
    return set(re.findall("[a-z0-9]+", low))


class Overlap:
    name = "py-overlap"
    needs_vectors = False

    def rank(self, persona, query, limit):
        q = words(query.question)
        scores = [len(words(t) & q) for t in persona.texts]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: row order
        return [persona.session_ids[i] for i in order[:limit]]


@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever():
    return Overlap()
"""


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_jq_store_ranks_as_its_python_twin(pytester: pytest.Pytester) -> None:
    """examples/stores/jq/store.jq (jq alone, no vectors) against the same word overlap
    written in Python as the custom retriever: equal rankings, pair by pair."""
    pytester.makeconftest(OVERLAP)
    selector = f"cmd:jq -nc --unbuffered -f {shlex.quote(str(JQ_STORE))}"
    result, report = run(pytester, "--retrieval-eval-retriever", f"custom,{selector}",
                         "--retrieval-eval-subset", "6")  # one per type: jq is slow
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2 * 6)
    ranked: dict[str, dict[str, list[str]]] = {}
    for pair in report["pairs"]:
        column = pair.get("selector", pair["retriever"])
        ranked.setdefault(pair["question_id"], {})[column] = pair["ranked"]
    assert len(ranked) == 6
    for qid, both in ranked.items():
        assert both[selector] == both["custom"], qid
    assert len({tuple(b["custom"]) for b in ranked.values()}) > 1  # it ranks something


# -- issue 34 ----------------------------------------------------------------------------


def test_made_up_ids_past_the_limit_fail_each_item_and_decide_no_tie(
        pytester: pytest.Pytester) -> None:
    """Three made-up ids tied with the last row past the limit: each item fails in one line
    (the store goes on serving the next), and no tie figure is reported for it (34.3)."""
    result, report = run(pytester, "--retrieval-eval-retriever", f"bm25,{fake('strangers')}")
    assert result.ret == 1
    result.assert_outcomes(passed=SAMPLE_PAIRS, failed=SAMPLE_PAIRS)
    errors = [e["error"] for e in report["errors"]]
    assert len(errors) == SAMPLE_PAIRS
    assert all("the rank answer holds 'made-up-1' and 2 more id(s), not a session of persona"
               in e and "\n" not in e for e in errors), errors[0]
    assert not any("stopped at an earlier item" in e for e in errors)
    assert {p["retriever"] for p in report["pairs"]} == {"bm25"}


def test_repeated_ids_rank_max_k_distinct_sessions_and_are_counted(
        pytester: pytest.Pytester) -> None:
    """A store answering every id twice ranks max(k) distinct sessions, as a Python store
    would, and each result record counts the repeats it dropped (34.15)."""
    result, report = run(pytester, "--retrieval-eval-retriever", fake("repeats"))
    assert result.ret == 0, result.stdout.str()
    top = max(report["ks"])
    pairs = report["pairs"]
    assert len(pairs) == SAMPLE_PAIRS
    for pair in pairs:
        ranked = pair["ranked"]
        assert len(ranked) == top == len(set(ranked)), pair["question_id"]
        # read to the top-th distinct id of s0, s0, s1, s1, ...: top - 1 repeats
        assert pair["repeated_ids"] == top - 1, pair["question_id"]


def test_a_helper_of_the_store_does_not_outlive_the_run(pytester: pytest.Pytester) -> None:
    """`sleep 300 &` in a shell wrapper: gone when the run ends (34.8)."""
    pids = pytester.path / "helpers.txt"
    wrapper = (f"sh -c 'sleep 300 & echo $! >> {shlex.quote(str(pids))}; "
               "exec \"$0\" \"$@\"'")
    selector = f"cmd:{wrapper} {shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} ok"
    try:
        result, _ = run(pytester, "--retrieval-eval-retriever", selector,
                        "--retrieval-eval-subset", "6")
        assert result.ret == 0, result.stdout.str()
        started = [int(x) for x in pids.read_text(encoding="utf-8").split()]
        assert len(started) == 1  # one store, started once
        assert all(wait_gone(pid) for pid in started), started
    finally:
        if pids.exists():
            kill_left(int(x) for x in pids.read_text(encoding="utf-8").split())
