"""``mcp:`` retrievers against real MCP servers, offline (issue 45): an exact-cosine store
written in the tests (tests/support/mcp/cosine_server.py) over stdio and over streamable HTTP
on 127.0.0.1 equals the same store in process pair by pair, ``-n 2`` equals serial, the
generic mapping read from TOML; the vipune stand-in (examples/mcp) equals ``hybrid``; hostile
servers fail in one line within their deadline and leave no process."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.errors import RetrieverError
from pytest_retrieval_eval.mcp import make_retriever
from pytest_retrieval_eval.retrievers.base import Persona, Query
from tests.support.plugin_runs import run_with_report
from tests.support.processes import default_sigint, kill_left, wait_gone

ROOT = Path(__file__).resolve().parents[2]
COSINE = ROOT / "tests" / "support" / "mcp" / "cosine_server.py"
HOSTILE = ROOT / "tests" / "support" / "mcp" / "hostile_server.py"
STANDIN = ROOT / "examples" / "mcp" / "vipune_mcp_standin.py"
PY = shlex.quote(sys.executable)
IN_PROCESS = "tests.support.mcp.cosine:CosineStore"
#: Two of the sample's pairs (each its own persona: a server each; a cosine server starts in
#: about 1 s of CPU, the SDK's import).
SUBSET = ("-k", "knowledge-update")
MAPPING = """store_tool = "remember"
search_tool = "recall"
results = "results"
[store_arguments]
text = "{text}"
metadata = "{metadata}"
[search_arguments]
query = "{query}"
limit = "{limit}"
"""

pytestmark = pytest.mark.usefixtures("isolated_cache")


def by_pair(report: dict[str, Any], column: str) -> dict[str, dict[str, Any]]:
    return {p["question_id"]: p for p in report["pairs"] if p["retriever"] == column}


def assert_equal_pairs(report: dict[str, Any], ours: str, theirs: str, n: int) -> None:
    a, b = by_pair(report, ours), by_pair(report, theirs)
    assert len(a) == len(b) == n
    for qid, pair in a.items():  # the session metrics (a memory store has more)
        assert pair["ranked"] == b[qid]["ranked"], qid
        assert {k: pair["metrics"][k] for k in b[qid]["metrics"]} == b[qid]["metrics"], qid
    mine, other = report["summary"][ours]["overall"], report["summary"][theirs]["overall"]
    assert {k: mine[k] for k in other} == other


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    return run_with_report(pytester, "-p", "no:randomly", "-p", "no:cacheprovider", *args)


@pytest.fixture(scope="module")
def stdio_serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("map") / "cosine.toml"
    path.write_text(MAPPING)
    return path


@pytest.mark.slow
def test_a_stdio_server_equals_the_store_in_process_and_n2_equals_serial(
        pytester: pytest.Pytester, stdio_serial: Path) -> None:
    # xdist's workers are fresh processes started in the run's folder, where the repository's
    # tests package is not importable (under the README's test command): the in-process twin
    # is a module of that folder, its source the one the other tests import, and the folder
    # on every process's path as a user puts it (`pythonpath = .`, as the loader's line says)
    pytester.makepyfile(cosine_twin=(ROOT / "tests/support/mcp/cosine.py").read_text())
    pytester.makeini("[pytest]\npythonpath = .\n")
    selector = f"mcp:cos={PY} {shlex.quote(str(COSINE))}+map:{stdio_serial}"
    args = ("--retrieval-eval-retriever", f"cosine_twin:CosineStore,{selector}", *SUBSET)
    result, serial = run(pytester, *args, "-v")  # -v: the timing lines
    assert_equal_pairs(serial, "cos", "cosine-inprocess", 2)
    timing = serial["timing"]["cos"]
    assert timing["startup"]["processes"] == 2 and timing["ingest"]["personas"] == 2
    assert timing["server"]["search_calls"] == 2 and timing["server"]["unmatched"] == 0
    assert timing["server"]["store_calls"] == sum(
        p["server"]["store_calls"] for p in by_pair(serial, "cos").values())
    result.stdout.fnmatch_lines(["cos: ingest*", "*start-up * in 2 processes*",
                                 "*store and 2 search*"])
    _, parallel = run(pytester, *args, "-n", "2")
    for qid, pair in by_pair(serial, "cos").items():
        assert by_pair(parallel, "cos")[qid]["ranked"] == pair["ranked"], qid
        assert by_pair(parallel, "cos")[qid]["metrics"] == pair["metrics"], qid


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(COSINE), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.slow
def test_a_streamable_http_server_reset_per_persona_equals_the_store_in_process(
        pytester: pytest.Pytester, http_server: str) -> None:
    selector = (f"mcp:web={http_server}+store_tool:remember+search_tool:recall"
                "+results:results+reset_tool:reset")
    _, report = run(pytester, "--retrieval-eval-retriever", f"{IN_PROCESS},{selector}",
                    "-k", "single-session-assistant or knowledge-update")
    assert_equal_pairs(report, "web", "cosine-inprocess", 4)  # four personas: three resets


@pytest.mark.slow
def test_the_vipune_standin_forced_equals_hybrid_and_conflicts_are_counted(
        pytester: pytest.Pytester) -> None:
    """Forced, only what vipune refuses whatever force says (a text past its 100,000-byte
    limit: one session of the sample) is not stored, and the ranking is hybrid's; conflict-
    aware, more sessions are refused, each counted and named."""
    base = f"{PY} {shlex.quote(str(STANDIN))}+preset:vipune"
    result, report = run(pytester, "--retrieval-eval-retriever",
                         f"hybrid,mcp:vip={base}+force:true,mcp:aware={base}",
                         "-k", "knowledge-update", "-v")
    assert_equal_pairs(report, "vip", "hybrid", 2)
    forced = report["timing"]["vip"]["server"]["refused"]
    refused = report["timing"]["aware"]["server"]["refused"]
    assert forced["count"] == 1 and refused["count"] > 1
    assert set(forced["ids"]) <= set(refused["ids"])
    result.stdout.fnmatch_lines(["aware: ingest*", f"*{refused['count']} refused, not stored*"])


# -- hostile servers, straight through the retriever (no pytest run: milliseconds each) ---

PERSONA_TEXTS = ("user: I adopted a cat named Tom", "user: my bike is red",
                 "user: the cat sleeps a lot")


def persona(tmp_path: Path) -> Persona:
    return Persona(key="k" * 40, session_ids=("s1", "s2", "s3"),
                   created_at=("2023-01-02", "2023-01-01", "2023-01-03"),
                   vectors=np.zeros((3, 4), np.float32), texts=list(PERSONA_TEXTS),
                   store_path=lambda: tmp_path, workdir=tmp_path)


QUERY = Query("q1", "t", "cat please", "", None, ())


#: The hostile servers' deadline: the hang, hang-hello and fork cases wait it out, so theirs
#: is shorter (the server's start and its stores take milliseconds); the flood (84 MiB
#: written) keeps 2 s.
DEADLINE = 2.0
WAITED = {"hang": 1.0, "hang-hello": 1.0, "fork": 1.0}


def hostile(mode: str, extra: str = "") -> Any:
    return make_retriever(
        f"mcp:h={PY} {shlex.quote(str(HOSTILE))} {mode}+store_tool:remember"
        f"+search_tool:recall+results:results{extra}",
        {"cmd_timeout": WAITED.get(mode, DEADLINE), "rootdir": str(ROOT)})


def _left(tmp_path: Path) -> list[int]:
    return [int(p.read_text()) for p in tmp_path.rglob("*.pid")]


def _hostile_fails_in_one_line(tmp_path: Path, mode: str, words: str,
                               stderr: Callable[[], str]) -> None:
    retriever = hostile(mode)
    p = persona(tmp_path)
    begun = time.monotonic()
    try:
        with pytest.raises(RetrieverError) as got:
            retriever.index(p)
            retriever.rank(p, QUERY, 2)
        assert words in str(got.value) and "\n" not in str(got.value)
        assert time.monotonic() - begun < DEADLINE + 10.0  # its deadline, and the kill
        if mode not in ("iserror", "malformed"):  # the server is gone: later items at once
            with pytest.raises(RetrieverError, match="stopped at an earlier item"):
                retriever.index(persona(tmp_path / "next"))
        if mode == "flood":
            assert "earlier bytes of stderr dropped" in stderr()
    finally:
        pid = retriever.pid
        retriever.close()
        left = [pid] if pid is not None else []
        left += _left(tmp_path)
        gone = [wait_gone(p) for p in left]
        kill_left(left)
    assert all(gone), left


@pytest.mark.parametrize(("mode", "words"), [
    ("flood", "wrote a line longer than 16 MiB to stdout"),
    ("crash", "failed during recall: it exited with status 7"),
    ("garbage", "wrote 'this is not json-rpc' to stdout, which is not an MCP"),
    ("notools", "has no tool 'recall'; its tools: remember, reset"),
    ("notmcp", "did not finish the MCP handshake (it wrote 'hello, I am not an MCP"),
    ("iserror", "question q1: recall: the tool answered an error (isError): the index is"),
    ("malformed", "the results (results) are a JSON int, not a list"),
])
def test_a_hostile_server_fails_in_one_line_and_leaves_no_process(
        tmp_path: Path, mode: str, words: str, capsys: pytest.CaptureFixture[str]) -> None:
    _hostile_fails_in_one_line(tmp_path, mode, words, lambda: capsys.readouterr().err)


WAITED_CASES = {
    "hang": "did not answer recall within 1 s (killed)",
    "hang-hello": "did not finish the MCP handshake within 1 s (killed)",
    "fork": "did not answer recall within 1 s (killed)",
}


def test_a_hanging_server_fails_in_one_line_and_leaves_no_process(tmp_path: Path) -> None:
    """The hostile servers that wait out their deadline (hang in a call, hang before the
    handshake, hang with a forked child) run at once, each in its own thread with its own
    server, so the test waits one deadline, not three; each case's checks are those of the
    test above, and a failure names its case."""
    failed: dict[str, BaseException] = {}

    def run(mode: str) -> None:
        try:
            _hostile_fails_in_one_line(tmp_path / mode, mode, WAITED_CASES[mode], str)
        except BaseException as exc:  # said below, with its case
            failed[mode] = exc

    threads = {mode: threading.Thread(target=run, args=(mode,), daemon=True)
               for mode in WAITED_CASES}
    for thread in threads.values():
        thread.start()
    for thread in threads.values():
        thread.join(timeout=120)
    assert not [m for m, t in threads.items() if t.is_alive()], "a case is still running"
    assert not failed, "; ".join(f"{mode}: {exc!r}" for mode, exc in failed.items())


def test_conflicts_are_counted_not_failed_and_text_results_matched_back(
        tmp_path: Path) -> None:
    retriever = hostile("conflict", "+conflict:conflict")
    try:
        p = persona(tmp_path)
        retriever.index(p)
        got = retriever.rank(p, QUERY, 3)
        facts = retriever.take_facts()
    finally:
        retriever.close()
    # stored in time order s2, s1, s3: the second store (s1) is refused
    assert facts["refused"] == ["s1"] and facts["store_calls"] == 3
    assert [m.sessions for m in got] == [("s3",)]
    texts = hostile("textonly")
    try:
        p = persona(tmp_path / "t")
        texts.index(p)
        got = texts.rank(p, QUERY, 3)
        facts = texts.take_facts()
    finally:
        texts.close()
    assert [m.sessions for m in got] == [("s1",), ("s3",), ()]
    assert facts["unmatched"] == 1


def _stop_mid_call_leaves_no_server(tmp_path: Path, signum: int) -> None:
    cache = tmp_path / "cache"
    tmp_path.mkdir(parents=True, exist_ok=True)
    selector = (f"mcp:h={PY} {shlex.quote(str(HOSTILE))} hang+store_tool:remember"
                "+search_tool:recall+results:results")
    env = {**os.environ, "RETRIEVAL_EVAL_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--retrieval-eval", "--no-model", "-p", "no:randomly",
         "-p", "no:cacheprovider", "--retrieval-eval-retriever", selector,
         "-k", "2819ce0a", f"--rootdir={tmp_path}", "--retrieval-eval-cmd-timeout=120"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=default_sigint)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        hanging: list[Path] = []
        while not hanging and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            pids = [int(p.read_text()) for p in cache.rglob("server.pid")
                    if p.read_text().strip()]
            # its ingest (three stores) is done; it hangs in the search
            hanging = [p for p in cache.rglob("recall.hang") if p.read_text().strip()]
        assert pids, "the server never started"
        assert hanging, "the server never got its search"
        proc.send_signal(signum)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        gone = [wait_gone(p) for p in pids]
        kill_left(pids)
    assert all(gone), pids


@pytest.mark.slow
def test_ctrl_c_or_sigterm_mid_call_leaves_no_server(tmp_path: Path) -> None:
    """The run is stopped while a server hangs in a search: the server's group goes too
    (Ctrl-C: the run's end closes it, after the server's 2 s close grace; SIGTERM: the
    plugin's handler kills it first). The two runs go at once, each in a thread with its own
    child pytest and cache, so the Ctrl-C run's grace is not waited on its own; a failure
    names its signal."""
    failed: dict[str, BaseException] = {}

    def run(signum: signal.Signals) -> None:
        try:
            _stop_mid_call_leaves_no_server(tmp_path / signum.name, signum)
        except BaseException as exc:  # said below, with its signal
            failed[signum.name] = exc

    threads = [threading.Thread(target=run, args=(signum,), daemon=True)
               for signum in (signal.SIGINT, signal.SIGTERM)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not [t for t in threads if t.is_alive()], "a run is still going"
    assert not failed, "; ".join(f"{name}: {exc!r}" for name, exc in failed.items())


@pytest.fixture(scope="module")
def server_memory() -> tuple[str, list[str]]:
    from tests.support import node_servers

    return node_servers.server_memory()


@pytest.mark.slow
def test_server_memory_through_the_plugin_equals_the_direct_client(
        pytester: pytest.Pytester, server_memory: tuple[str, list[str]],
        tmp_path: Path) -> None:
    """The sample's pairs through ``+preset:server-memory`` rank what the test's own SDK
    client gets from the same calls (a whole question is no substring of any session: none)."""
    from tests.support import mcp_clients

    node, args = server_memory
    selector = f"mcp:sm={shlex.quote(node)} {shlex.quote(args[0])}+preset:server-memory"
    _, report = run(pytester, "--retrieval-eval-retriever", f"bm25,{selector}",
                    "-k", "knowledge-update")
    pairs = by_pair(report, "sm")
    assert len(pairs) == 2
    for qid, pair in pairs.items():
        q = next(p for p in report["pairs"] if p["question_id"] == qid)
        got = mcp_clients.server_memory_ranking(server_memory, _fresh(tmp_path / qid),
                                                _sample_sessions(qid, tmp_path / "c"),
                                                q["question"])
        assert pair["ranked"] == got, qid


def _fresh(folder: Path) -> Path:
    folder.mkdir(parents=True)
    return folder


def _sample_sessions(qid: str, cache: Path) -> list[tuple[str, str]]:
    """The sample pair's sessions as the preset stores them: each id once (its first
    occurrence, as the persona keeps it), in time order, with its text."""
    from pytest_retrieval_eval.data import dataset, ingest

    corpus = ingest.load_corpus(dataset.resolve_dataset("sample"), cache)
    pair = next(p for p in corpus.pairs if p.question_id == qid)
    texts = corpus.texts(list(pair.text_keys))
    first = list({sid: i for i, sid in reversed(list(enumerate(pair.session_ids)))}.values())
    first.sort()
    order = sorted(first, key=lambda i: pair.created_at[i] or "")
    return [(pair.session_ids[i], texts[i]) for i in order]


def test_server_memory_ranks_a_word_as_the_direct_client(
        server_memory: tuple[str, list[str]], tmp_path: Path) -> None:
    """A query the server can find (one word): the retriever's ranking is the direct SDK
    client's, entity names mapped back to their sessions."""
    from tests.support import mcp_clients

    node, args = server_memory
    retriever = make_retriever(f"mcp:sm={shlex.quote(node)} {shlex.quote(args[0])}"
                               "+preset:server-memory", {"rootdir": str(ROOT)})
    p = persona(tmp_path / "plugin")
    try:
        retriever.index(p)
        got = retriever.rank(p, Query("q", "t", "cat", "", None, ()), 5)
        facts = retriever.take_facts()
    finally:
        retriever.close()
    order = sorted(range(3), key=lambda i: p.created_at[i])
    direct = mcp_clients.server_memory_ranking(
        server_memory, _fresh(tmp_path / "direct"),
        [(p.session_ids[i], PERSONA_TEXTS[i]) for i in order], "cat")
    assert [m.sessions[0] for m in got] == direct == ["s1", "s3"]
    assert facts["unmatched"] == 0 and facts["store_calls"] == 3


def test_unit_turn_stores_each_turn_and_maps_results_to_turns(tmp_path: Path) -> None:
    """``+unit:turn``: one store call per turn (``role: content``), in time order, and a
    result traced back to its turn and session."""
    retriever = hostile("textonly", "+unit:turn")
    p = persona(tmp_path)
    p.turns = [[{"role": "user", "content": "I adopted a cat named Tom"},
                {"role": "assistant", "content": "Lovely."}],
               [{"role": "user", "content": "my bike is red"}],
               [{"role": "user", "content": "the cat sleeps a lot"}]]
    try:
        retriever.index(p)
        got = retriever.rank(p, Query("q1", "t", "lovely", "", None, ()), 3)
        facts = retriever.take_facts()
    finally:
        retriever.close()
    assert facts["store_calls"] == 4 and facts["stored"] == 4
    assert got[0].sessions == ("s1",) and got[0].turns == ("s1_2",)
    assert got[0].text == "assistant: Lovely."


def test_through_pytest_a_broken_server_fails_each_item_in_one_line(
        pytester: pytest.Pytester) -> None:
    """The first item says why (the tools the server has), the next fails at once; the run
    ends, its report written, no server left."""
    out = pytester.path / "report.json"
    selector = (f"mcp:h={PY} {shlex.quote(str(HOSTILE))} notools+store_tool:remember"
                "+search_tool:recall")
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider",
                                "--retrieval-eval", "--no-model", "--retrieval-eval-retriever",
                                selector, "-k", "knowledge-update",
                                f"--retrieval-eval-json={out}")
    assert result.ret == 1 and out.exists()
    result.assert_outcomes(failed=2)
    text = " ".join(result.stdout.str().split())  # the lines as wrapped to the terminal
    assert "has no tool 'recall'; its tools: remember, reset; name one with" in text
    assert "(stopped at an earlier item)" in text
    pids = [int(p.read_text()) for p in pytester.path.parent.rglob("server.pid")]
    assert pids and all(wait_gone(p) for p in pids)
