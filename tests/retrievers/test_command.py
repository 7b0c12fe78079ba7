"""``cmd:COMMAND`` retrievers (retrievers/command.py): the protocol, and each way a command
can fail, as one line naming the command and its last request, never a hang."""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.errors import RetrievalEvalError, RetrieverError
from pytest_retrieval_eval.retrievers import Persona, Query, SemanticRetriever
from pytest_retrieval_eval.retrievers.command import (
    CommandRetriever,
    command_name,
    parse_command,
)
from pytest_retrieval_eval.retrievers.command_answers import turns_of as _turns_of
from pytest_retrieval_eval.retrievers.loader import get_retriever
from pytest_retrieval_eval.retrievers.ranking import REPEATED_IDS, rank_per_k
from tests.support.processes import kill_left, wait_gone

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "support" / "fake_store.py"
NODE_STORE = ROOT / "examples" / "stores" / "node" / "store.js"


def fake(mode: str) -> str:
    return f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} {mode}"


def persona(n: int = 5, key: str = "p1", seed: int = 0) -> Persona:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, 8)).astype(np.float32)
    vectors[1] = vectors[3]  # a tie
    texts = [f"user: hello {i}\nassistant: line one\nline two" for i in range(n)]
    return Persona(key=key, session_ids=tuple(f"s{i}" for i in range(n)),
                   created_at=("2023-05-30T23:40:00Z",) * n, vectors=vectors, texts=texts,
                   store_path=lambda: Path("unused"))


def query(vector: np.ndarray | None = None, qid: str = "q1") -> Query:
    return Query(qid, "multi-session", "what did I say?", "2023/06/01 (Thu) 10:00",
                 vector if vector is not None else np.ones(8, dtype=np.float32), ())


@pytest.fixture
def closing() -> list[CommandRetriever]:
    made: list[CommandRetriever] = []
    yield made
    for r in made:
        r.close()


def make(selector: str, closing: list[CommandRetriever], **kw: float) -> CommandRetriever:
    r = CommandRetriever(selector, **kw)  # type: ignore[arg-type]
    closing.append(r)
    return r


def test_the_selector_is_split_as_a_shell_splits_words() -> None:
    assert parse_command("cmd:node 'my store.js' --k=1") == ["node", "my store.js", "--k=1"]
    with pytest.raises(RetrievalEvalError, match="names no command"):
        parse_command("cmd:  ")
    with pytest.raises(RetrievalEvalError, match="cannot be split"):
        parse_command("cmd:node 'open")


@pytest.mark.parametrize(("selector", "name", "argv"), [
    ("cmd:exact=node store.js", "exact", ["node", "store.js"]),
    ("cmd:node-exact.v2=node 'my store.js'", "node-exact.v2", ["node", "my store.js"]),
    ("cmd:node --k=1 store.js", None, ["node", "--k=1", "store.js"]),  # a flag's '='
    ("cmd:./a=b", None, ["./a=b"]),  # a path's '='
    ("cmd:a= node", None, ["a=", "node"]),  # nothing right after '=': part of the command
    ("cmd:node", None, ["node"]),
])
def test_a_name_is_given_up_front_as_name_equals_command(
        selector: str, name: str | None, argv: list[str]) -> None:
    """Issue 37.7: ``cmd:NAME=COMMAND`` names the column before the command runs."""
    assert command_name(selector) == name
    assert parse_command(selector) == argv


def test_a_name_given_up_front_stays_the_retrievers_name_after_hello(
        closing: list[CommandRetriever]) -> None:
    r = make(fake("ok").replace("cmd:", "cmd:mine=", 1), closing)
    r.index(persona())
    assert r.name == "mine"  # hello said "fake-ok"; it was checked, not used
    assert make(fake("ok"), closing).name == fake("ok")  # until hello


def test_get_retriever_makes_one_without_starting_it(tmp_path: Path) -> None:
    """The controller makes every retriever; a cmd: one starts nothing there."""
    r = get_retriever("cmd:no-such-program-here a+b", {"cmd_timeout": 5.0, "rootdir": tmp_path})
    assert isinstance(r, CommandRetriever)
    assert (r.name, r.timeout, r.cwd, r.needs_vectors) == (
        "cmd:no-such-program-here a+b", 5.0, tmp_path, True)
    assert r._proc is None


def test_turns_are_read_back_from_a_rendered_text() -> None:
    assert _turns_of("user: hi\nthere\nassistant: yes") == [
        {"role": "user", "content": "hi\nthere"}, {"role": "assistant", "content": "yes"}]
    assert _turns_of("plain") == [{"role": "user", "content": "plain"}]


def test_a_good_store_ranks_with_scores_and_facts(closing: list[CommandRetriever]) -> None:
    r = make(fake("ok"), closing)
    got = r.rank(persona(), query(), 3)
    assert r.name == "fake-ok"  # hello's name
    assert got == ["s0", "s1", "s2"]
    assert r.last_scores == [("s0", 0.0), ("s1", -1.0), ("s2", -2.0)]
    assert r.last_facts == {"s0": {"row": 0}, "s1": {"row": 1}, "s2": {"row": 2}}
    assert r.rank(persona(), query(qid="q2"), 2) == ["s0", "s1"]


def test_blank_lines_and_crlf_are_no_answers(closing: list[CommandRetriever]) -> None:
    r = make(fake("blanks"), closing)
    assert r.rank(persona(), query(), 2) == ["s0", "s1"]
    assert r.rank(persona(), query(qid="q2"), 1) == ["s0"]


def test_each_persona_is_indexed_once(closing: list[CommandRetriever],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    r = make(fake("ok"), closing)
    r.index(persona())
    r.rank(persona(), query(), 3)
    r.rank(persona(), query(qid="q2"), 3)
    r.rank(persona(key="p2"), query(), 3)
    err = capsys.readouterr().err
    assert err.count("fake-store got index") == 2
    assert err.count("fake-store got rank") == 3
    assert err.count("fake-store got hello") == 1


def test_vectors_are_sent_only_when_hello_asks(closing: list[CommandRetriever]) -> None:
    r = make(fake("novectors"), closing)
    assert r.rank(persona(), query(), 2) == ["s0", "s1"]
    assert r.wants_vectors is False


@pytest.mark.skipif(not Path("/usr/bin/node").exists() and not __import__("shutil").which(
    "node"), reason="node is not installed")
def test_the_node_example_ranks_as_semantic(closing: list[CommandRetriever]) -> None:
    """Cosine in Node over the sent vectors equals vipune's reference, ties and all."""
    r = make(f"cmd:node {shlex.quote(str(NODE_STORE))}", closing)
    semantic = SemanticRetriever()
    for seed in range(5):
        p = persona(n=30, key=f"p{seed}", seed=seed)
        qvec = np.random.default_rng(100 + seed).standard_normal(8).astype(np.float32)
        for limit in (1, 3, 10, 30):
            ids = semantic.rank(p, query(qvec), limit)
            assert r.rank(p, query(qvec), limit) == ids
            assert semantic.last_scores is not None and r.last_scores is not None
            # Its scores equal semantic's bit for bit, the ties past the cut included.
            assert r.last_scores == list(semantic.last_scores[:len(r.last_scores)])
    p = persona(n=30, key="tie")
    assert r.rank(p, query(p.vectors[1]), 1) == ["s1"]  # s3 holds the very same vector
    assert r.last_scores is not None and [i for i, _ in r.last_scores] == ["s1", "s3"]
    assert r.last_scores[0][1] == r.last_scores[1][1]
    assert r.name == "node-cosine"


@pytest.mark.parametrize(("mode", "match"), [
    ("exit", r"exited with status 3 while answering rank of question q1"),
    ("notjson", r"answered rank of question q1 with 'ranking now\.\.\.', which is not JSON"),
    ("array", r"answered rank of question q1 with a JSON list, not an object"),
    ("huge", r"answered rank of question q1 with a line longer than 8 MiB"),
    ("badname", r"hello's answer .* needs a \"name\""),
    ("badencoding", r"hello's \"vector_encoding\" is \"float16\"; answer one of \"json\", "
                    r"\"base64-f32le\"$"),
    ("latin1", r"answered rank of question q1 with '\{\"ids\": \[\"caf\\xe9\"\]\}', which is "
               r"not UTF-8 \(byte 0xe9 at offset 13\); write each answer as UTF-8 JSON"),
])
def test_a_broken_store_fails_in_one_line_and_stays_stopped(
        closing: list[CommandRetriever], mode: str, match: str) -> None:
    r = make(fake(mode), closing)
    with pytest.raises(RetrieverError, match=match) as first:
        r.rank(persona(), query(), 3)
    message = str(first.value)
    assert "\n" not in message
    assert message.startswith(f"{fake(mode)}: ")
    assert "fake_store.py" in message  # names the command
    assert r._proc is None  # stopped (killed and reaped)
    start = time.monotonic()
    with pytest.raises(RetrieverError, match="stopped at an earlier item"):
        r.rank(persona(), query(qid="q2"), 3)
    assert time.monotonic() - start < 1.0


def test_an_unasked_second_line_is_refused(closing: list[CommandRetriever]) -> None:
    r = make(fake("extra"), closing)
    r.rank(persona(), query(), 3)
    with pytest.raises(RetrieverError, match="unasked after rank of question q1"):
        r.rank(persona(), query(qid="q2"), 3)


def test_an_error_answer_fails_the_item_only(closing: list[CommandRetriever]) -> None:
    r = make(fake("error"), closing)
    for qid in ("q1", "q2"):
        with pytest.raises(RetrieverError) as caught:
            r.rank(persona(), query(qid=qid), 3)
        assert str(caught.value) == f"{fake('error')}: rank of question {qid}: the index is " \
                                    "not ready"
    assert r._proc is not None and r._proc.poll() is None  # still running


def test_a_silent_store_times_out_and_is_killed(closing: list[CommandRetriever]) -> None:
    r = make(fake("sleep"), closing, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(RetrieverError, match=r"did not answer rank of question q1 within "
                                             r"0\.5 s \(killed\); raise --retrieval-eval-cmd-"
                                             r"timeout"):
        r.rank(persona(), query(), 3)
    assert time.monotonic() - start < 5.0


def test_a_missing_program_does_not_start(closing: list[CommandRetriever]) -> None:
    r = make("cmd:no-such-program-here --flag", closing)
    with pytest.raises(RetrieverError, match=r"^cmd:no-such-program-here --flag: command "
                                             r"`no-such-program-here --flag` does not start"):
        r.rank(persona(), query(), 3)


def test_close_ends_the_session_by_closing_stdin(closing: list[CommandRetriever]) -> None:
    r = make(fake("ok"), closing)
    r.rank(persona(), query(), 1)
    proc = r._proc
    assert proc is not None
    r.close()
    assert proc.returncode == 0  # it read EOF and exited on its own, not killed
    r.close()  # twice is harmless


@pytest.mark.parametrize("value", [0.0, -1.0, float("inf"), float("nan")])
def test_timeouts_must_be_finite_and_positive(value: float) -> None:
    with pytest.raises(RetrievalEvalError, match="finite number of seconds above 0"):
        CommandRetriever("cmd:true", timeout=value)


@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="node is not installed")
def test_the_docs_transcript_is_what_the_node_store_answers() -> None:
    """docs/cmd-protocol.md's transcript, replayed: the store's answers, line by line."""
    import json
    import subprocess

    page = (ROOT / "docs" / "cmd-protocol.md").read_text(encoding="utf-8")
    block = page.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    sent = [line[2:] for line in block if line.startswith("> ")]
    said = [json.loads(line[2:]) for line in block if line.startswith("< ")]
    assert len(sent) == len(said) == 4
    done = subprocess.run(["node", str(NODE_STORE)], input="\n".join(sent) + "\n",
                          capture_output=True, text=True, timeout=60, check=True)
    assert [json.loads(line) for line in done.stdout.splitlines()] == said
    assert "indexed 3 sessions" in done.stderr  # its log went to stderr, not stdout


# -- issue 34: ids checked past the limit, repeats, early answers, index answers, helpers ---


def test_every_id_is_checked_past_the_limit(closing: list[CommandRetriever]) -> None:
    """Three made-up ids tied with the last row past the limit once decided the tie report:
    the item fails in one line, and the store goes on (34.3)."""
    r = make(fake("strangers"), closing)
    with pytest.raises(RetrieverError) as caught:
        r.rank(persona(), query(), 3)
    assert str(caught.value) == (
        f"{fake('strangers')}: question q1: the rank answer holds 'made-up-1' and 2 more "
        "id(s), not a session of persona p1 (5 sessions); answer only ids that its index "
        "request sent")
    assert r.last_scores is None
    assert r._proc is not None and r._proc.poll() is None  # only the item failed


def test_repeated_ids_are_read_to_limit_distinct_and_counted(
        closing: list[CommandRetriever]) -> None:
    """A store answering every id twice ranks ``limit`` distinct sessions, as a Python store
    does; the repeats are counted for the result record (34.15)."""
    r = make(fake("repeats"), closing)
    assert r.rank(persona(), query(), 3) == ["s0", "s0", "s1", "s1", "s2"]
    counts: dict[str, int] = {}
    rankings, _ = rank_per_k(r, persona(), query(), [1, 3], {}, counts)
    assert rankings == {1: ["s0", "s1", "s2"], 3: ["s0", "s1", "s2"]}
    assert counts == {REPEATED_IDS: 2}
    counts.clear()
    rank_per_k(make(fake("ok"), closing), persona(), query(), [3], {}, counts)
    assert counts == {}  # no repeats: no count


def test_an_index_answer_other_than_ok_is_refused(closing: list[CommandRetriever]) -> None:
    r = make(fake("indexids"), closing)
    for _ in range(2):  # not indexed: asked again at the next item
        with pytest.raises(RetrieverError) as caught:
            r.rank(persona(), query(), 3)
        assert str(caught.value) == (
            f"{fake('indexids')}: index of persona p1 (5 sessions): the answer "
            '{"ids": []} is not {"ok": true}; answer exactly {"ok": true} once the persona '
            'is indexed, or {"error": MESSAGE}')


def test_an_answer_before_its_request_was_written_whole_stops_the_command(
        closing: list[CommandRetriever]) -> None:
    """The store answers the index request after its first 4 KiB and reads no more: the
    answer is a line nothing asked for, and no later request is glued to the half-written
    one (34.7). The request (about 1 MB) cannot fit the pipe, so this never races."""
    r = make(fake("early"), closing)
    big = persona(n=200)
    big.texts = ["user: " + "word " * 1000] * 200
    with pytest.raises(RetrieverError) as caught:
        r.index(big)
    message = str(caught.value)
    assert re.fullmatch(
        re.escape(f"{fake('early')}: command `") + r".*` wrote '\{\"ok\": true\}' to stdout "
        r"before index of persona p1 \(200 sessions\) was written whole \([\d,]+ of "
        r"[\d,]+ bytes sent\), a line nothing asked for; read each request to its newline "
        r"before answering it", message), message
    assert r._proc is None  # stopped
    with pytest.raises(RetrieverError, match="stopped at an earlier item"):
        r.rank(persona(), query(), 3)


SHELL_HELPER = ("sh -c 'sleep 300 {redirect}& echo \"fake-store helper $!\" >&2; "
                "exec \"$0\" \"$@\"'")


@pytest.mark.parametrize(("wrapper", "mode"), [
    ("", "helper"),  # a forked grandchild holding the pipes; the store exits at close
    (SHELL_HELPER.format(redirect=""), "ok"),  # `sleep 300 &` in a shell wrapper
    # the store exits mid-run; its helper holds no pipe, so the exit is seen at once
    (SHELL_HELPER.format(redirect=">/dev/null 2>&1 </dev/null "), "exit"),
])
def test_the_stores_helpers_are_killed_after_it_exits(
        closing: list[CommandRetriever], capsys: pytest.CaptureFixture[str],
        wrapper: str, mode: str) -> None:
    """The process group is killed also when its leader exited by itself (34.8)."""
    selector = fake(mode) if not wrapper else \
        f"cmd:{wrapper} {shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} {mode}"
    r = make(selector, closing)
    if mode == "exit":
        with pytest.raises(RetrieverError, match="exited with status 3"):
            r.rank(persona(), query(), 3)
    else:
        assert r.rank(persona(), query(), 3) == ["s0", "s1", "s2"]
        r.close()
    found = re.search(r"fake-store helper (\d+)", capsys.readouterr().err)
    assert found is not None
    pid = int(found.group(1))
    try:
        assert wait_gone(pid), f"helper {pid} outlived the store"
    finally:
        kill_left([pid])  # never left behind, whatever the code under test did


@pytest.mark.parametrize(("mode", "why"), [
    ("deep", "with JSON nested more than 64 levels deep (at byte 71); nest answers at most "
             "64 levels"),
    ("bigint", "with an integer of 400 digits (99999999999999999999…), past 64 bits; send "
               "numbers a 64-bit integer or a double holds"),
])
def test_a_deep_or_huge_number_answer_is_one_line(closing: list[CommandRetriever],
                                                   mode: str, why: str) -> None:
    """Issue 43.14: JSON nested 5000 deep was a RecursionError, a 400-digit score an
    OverflowError; the line is read with the dataset readers' 64-level bound and 64-bit
    integers."""
    r = make(fake(mode), closing)
    with pytest.raises(RetrieverError) as caught:
        r.rank(persona(), query(), 3)
    assert str(caught.value) == (f"{fake(mode)}: command `{shlex.join(r.argv)}` answered "
                                 f"rank of question q1 {why}")


def test_a_store_that_exits_while_its_helper_holds_stdout_is_reported_as_exited(
        closing: list[CommandRetriever], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43.14: stdout stays open while a helper the store forked holds it, so its end
    never came: the store's exit was told as a timeout, after waiting it out."""
    r = CommandRetriever(fake("helperexit"), timeout=30.0, index_timeout=30.0)
    closing.append(r)
    try:
        with pytest.raises(RetrieverError) as caught:
            r.rank(persona(), query(), 3)
        assert "exited with status 3 while answering rank of question q1" in \
            str(caught.value), caught.value
    finally:
        found = re.search(r"fake-store helper (\d+)", capsys.readouterr().err)
        assert found is not None
        pid = int(found.group(1))
        try:
            assert wait_gone(pid), f"helper {pid} outlived the store"
        finally:
            kill_left([pid])


def test_the_stores_time_starts_before_a_write_that_returns_late(
        closing: list[CommandRetriever], monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that wakes the store may return only once the store has run (the scheduler
    lets the woken reader go first), even after it answered: the store's time starts when
    the request's last write began, so such a write never hides the store's own time (it
    once read 0.02 ms for a 0.14 ms rank). Simulated: the rank's write returns only once the
    answer is there; the store takes 0.2 s on it."""
    import os
    import select

    r = make(fake("slow"), closing)
    p = persona()
    r.index(p)
    assert r._proc is not None and r._proc.stdin is not None and r._proc.stdout is not None
    stdin, stdout = r._proc.stdin.fileno(), r._proc.stdout.fileno()
    real_write = os.write
    spans: list[float] = []

    def late_write(fd: int, data: bytes) -> int:
        begun = time.perf_counter()
        sent = real_write(fd, data)
        if fd == stdin:  # returns once the answer is readable
            select.select([stdout], [], [], 30.0)
            spans.append(time.perf_counter() - begun)
        return sent

    monkeypatch.setattr(os, "write", late_write)
    before = r.clock.store_ms
    assert r.rank(p, query(), 3) == ["s0", "s1", "s2"]
    monkeypatch.undo()
    assert len(spans) == 1 and spans[0] >= 0.19  # the store's 0.2 s lie inside the write
    assert r.clock.store_ms - before >= spans[0] * 1000.0
