"""``cmd:COMMAND``: a store in any language, spoken to in JSON lines over its stdin and stdout.

The command is started lazily, once per process that ranks with it (an xdist worker, never
the controller), in the rootdir. Each request is one JSON line on its stdin and each answer
one JSON line on its stdout (``docs/cmd-protocol.md`` holds the protocol):

- ``{"op": "hello", "protocol": 1, "vector_encodings": [...]}`` -> ``{"name": NAME,
  "vectors": true|false, "vector_encoding"?: "json"|"base64-f32le", "config"?: {...}}``
  (config: a small JSON object recorded with the numbers, ``store_config.py``);
- ``{"op": "index", "persona": KEY, "sessions": [...]}`` -> ``{"ok": true}``, once per persona;
- ``{"op": "rank", "persona": KEY, ...}`` -> ``{"ids": [...], "scores"?: [...], "facts"?:
  [...]}``, or a memory store's ``{"memories": [{"id", "score"?, "sessions"?, "turns"?,
  "text"?}, ...]}`` (:func:`.memories.memories_from_json`);
- any answer may be ``{"error": MESSAGE}``: that item fails with MESSAGE, the store goes on.

A command that does not start, exits, answers a line that is not a JSON object, a line past
:data:`MAX_ANSWER_BYTES`, or nothing within its timeout fails the item in one line naming the
command and the last request; the process is then stopped, and every later item of this
process fails at once with that line (no item waits out another timeout). Everything the
command writes to stderr is copied to ``sys.stderr`` after each answer, so pytest shows it in
that item's captured output. POSIX only (``selectors`` on pipes).

The store's own time (last byte written to first byte of its answer) is kept apart from the
plugin's transport, and the start-up (spawn and hello) apart from both
(:mod:`.command_transport`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import shlex
import subprocess
import time
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import RetrievalEvalError, RetrieverError, one_line
from .base import Memory, Persona, Query, _check_limit, process_limits
from .command_answers import (
    LineRefused,
    hello_fault,
    memories_answer,
    parse_answer_line,
    ranking_answer,
    turns_of,
)
from .command_embed import Embed, embed_reply, embed_texts, is_embed_request
from .command_process import (
    CHUNK,
    CLOSE_GRACE_S,
    EXIT_POLL_S,
    Wait,
    close_pipes,
    copy_stderr,
    exit_line,
    exit_status,
    kill_group,
    leader_watch,
    shutdown,
)
from .command_selector import PREFIX, command_name, parse_command
from .command_transport import (
    VECTOR_ENCODINGS,
    Clock,
    VectorCodec,
    encode_line,
    encode_vectors_reply,
    join_index_line,
)

__all__ = ["MAX_ANSWER_BYTES", "PREFIX", "PROTOCOL", "CommandRetriever", "command_name",
           "parse_command"]

PROTOCOL = 1
#: The longest answer line read (bytes); a longer one fails the item, never fills memory.
MAX_ANSWER_BYTES = 8 * 1024 * 1024


class CommandRetriever:
    """A store run as a command, talked to in JSON lines (see the module's docstring).

    ``name`` is the name given up front (``cmd:NAME=COMMAND``); else the selector until the
    command said hello, then hello's ``name``.
    ``needs_vectors`` is True: the controller decides whether the run holds vectors before
    any command runs (it never starts one), so a ``cmd:`` retriever is taken to need them;
    they are sent only when hello asks for them.
    """

    needs_vectors = True

    def __init__(self, selector: str, *, timeout: float = 60.0, index_timeout: float = 600.0,
                 cwd: str | os.PathLike[str] | None = None) -> None:
        self.argv = parse_command(selector)
        self.selector = selector if selector.startswith(PREFIX) else PREFIX + selector
        self.given_name = command_name(self.selector)
        self.name = self.given_name or self.selector
        for label, value in (("timeout", timeout), ("index timeout", index_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise RetrievalEvalError(
                    f"retriever '{self.selector}': {label} {value!r} must be a finite number "
                    "of seconds above 0")
        self.timeout = float(timeout)
        self.index_timeout = float(index_timeout)
        self.cwd = None if cwd is None else Path(cwd)
        self.wants_vectors = False
        #: hello's ``"config"`` object (None until hello, or when it gives none).
        self.config: object = None
        self.last_scores: list[tuple[str, float]] | None = None
        self.last_facts: dict[str, Mapping[str, object]] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._broken: str | None = None
        self._indexed: set[str] = set()
        self._out = bytearray()  # stdout read past the last answer line
        self._last = "nothing yet"  # what was sent last, for the failure line
        #: The store's time, the plugin's transport and the start-up, in milliseconds.
        self.clock = Clock()
        self.codec = VectorCodec()

    @property
    def transport_ms(self) -> float:
        """The plugin's side of every ``index`` and ``rank`` so far (milliseconds): what the
        harness takes out of ingest and query latency and reports as transport."""
        return self.clock.transport_ms

    @property
    def started(self) -> bool:
        """Whether the command runs (said hello) in this process."""
        return self._proc is not None

    @property
    def pid(self) -> int | None:
        """The command's process id while it runs."""
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        """Spawn the command and say hello (once; the harness times it as start-up)."""
        self._start()

    @contextlib.contextmanager
    def _charged(self) -> Iterator[None]:
        """What a call spends that is neither the store's nor embedding: transport."""
        begun = time.perf_counter()
        store, embedded = self.clock.store_ms, self.clock.embed_ms
        try:
            yield
        finally:
            self.clock.charge((time.perf_counter() - begun) * 1000.0, store, embedded)

    # -- the lifecycle the harness calls ---------------------------------------------------

    def index(self, persona: Persona) -> None:
        """Send the persona's sessions (once per persona and process)."""
        self._start()
        if persona.key in self._indexed:
            return
        with self._charged():
            self._index(persona)

    def _index(self, persona: Persona) -> None:
        turns = persona.turns if len(persona.turns) == len(persona.session_ids) else None
        vectors = np.asarray(persona.vectors) if self.wants_vectors else None
        if self.wants_vectors and (vectors is None or vectors.ndim != 2
                                   or vectors.shape[0] != len(persona.session_ids)):
            raise self._fail(
                f"hello asked for vectors, but this run holds none for persona "
                f"{persona.key[:12]}; run with the vectors prepped (or say vectors: false)")
        sessions = []
        for i, (sid, created) in enumerate(zip(persona.session_ids, persona.created_at,
                                               strict=True)):
            text = persona.texts[i]
            sessions.append({
                "id": sid, "text": text, "created_at": created,
                "turns": ([dict(t) for t in turns[i]] if turns is not None
                          else turns_of(text)),
            })
        what = f"index of persona {persona.key[:12]} ({len(sessions)} sessions)"
        line = self._encoded(what, lambda: join_index_line(
            {"op": "index", "persona": persona.key,
             **({} if persona.workdir is None else {"workdir": str(persona.workdir)})},
            sessions,
            None if vectors is None else self.codec.rows(vectors)))
        answer = self._ask(line, what, self.index_timeout, embed=persona.text_vectors)
        if set(answer) != {"ok"} or answer["ok"] is not True:  # {"ids": []} is no index
            raise RetrieverError(
                f"{self.selector}: {what}: the answer {one_line(json.dumps(answer), 120)} is "
                "not {\"ok\": true}; answer exactly {\"ok\": true} once the persona is "
                "indexed, or {\"error\": MESSAGE}")
        self._indexed.add(persona.key)

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str] | list[Memory]:
        lim = _check_limit(limit)
        self.last_scores = None
        self.last_facts = None
        if persona.key not in self._indexed:  # the harness indexes first; this is a guard
            self.index(persona)
        with self._charged():
            return self._rank(persona, query, lim)

    def _rank(self, persona: Persona, query: Query, lim: int) -> list[str] | list[Memory]:
        request: dict[str, Any] = {
            "op": "rank", "persona": persona.key, "question_id": query.question_id,
            "question": query.question, "question_date": query.question_date, "limit": lim,
        }
        if self.wants_vectors and query.vector is None:
            raise self._fail(f"hello asked for vectors, but question {query.question_id} "
                             "has none in this run")
        what = f"rank of question {query.question_id}"
        line = self._encoded(what, lambda: encode_line(
            request, self.codec.row(query.vector) if self.wants_vectors else None))
        answer = self._ask(line, what, self.timeout, embed=persona.text_vectors)
        if "memories" in answer:  # a memory store's answer (docs/cmd-protocol.md)
            return memories_answer(answer, self.selector, query.question_id)
        ranked, self.last_scores, self.last_facts = ranking_answer(
            answer, persona, self.selector, query.question_id, lim)
        return ranked

    def close(self) -> None:
        """Close the command's stdin (its end of session), wait briefly, then kill it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if self._finalizer is not None:
                self._finalizer.detach()
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()
            exit_status(proc, CLOSE_GRACE_S)  # left unreaped: its group is killed next
            kill_group(proc)
            copy_stderr(proc, wait=True)
            close_pipes(proc)
        self._indexed.clear()

    # -- answers --------------------------------------------------------------------------

    # -- the process ----------------------------------------------------------------------

    def _fail(self, message: str) -> RetrieverError:
        """Stop the command for good in this process; the error of this and later items."""
        self._broken = f"{self.selector}: {message}"
        proc, self._proc = self._proc, None
        if proc is not None:
            if self._finalizer is not None:
                self._finalizer.detach()
            kill_group(proc)
            copy_stderr(proc, wait=True)
            close_pipes(proc)
        return RetrieverError(self._broken)

    def _start(self) -> None:
        if self._broken is not None:
            raise RetrieverError(f"{self._broken} (stopped at an earlier item)")
        if self._proc is not None:
            return
        command = shlex.join(self.argv)
        begun = time.perf_counter()
        try:
            proc = subprocess.Popen(self.argv, cwd=self.cwd, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    bufsize=0, start_new_session=True)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise self._fail(f"command `{command}` does not start ({reason}); check the "
                             f"program is installed and the path is right (run from "
                             f"{self.cwd or Path.cwd()})") from None
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
        self._proc = proc
        self._finalizer = weakref.finalize(self, shutdown, proc)
        spawned = time.perf_counter()
        self.clock.spawn_ms = (spawned - begun) * 1000.0
        answer = self._ask(encode_line({"op": "hello", "protocol": PROTOCOL,
                                        "vector_encodings": list(VECTOR_ENCODINGS)}),
                           "hello", self.timeout)
        self.clock.hello_ms = (time.perf_counter() - spawned) * 1000.0
        fault = hello_fault(answer, VECTOR_ENCODINGS)
        if fault is not None:
            raise self._fail(fault)
        name, vectors = answer["name"], answer.get("vectors", False)
        encoding = answer.get("vector_encoding", VECTOR_ENCODINGS[0])
        # A name given up front is the column already (named at collection): hello's is
        # checked, never used.
        self.name, self.wants_vectors = self.given_name or name, vectors
        self.config = answer.get("config")  # checked where it is recorded (store_config.py)
        self.codec = VectorCodec(encoding)

    def _encoded(self, what: str, encode: Any) -> bytes:
        """``encode()``: a request line, or one line naming what cannot be sent."""
        try:
            return bytes(encode())
        except (ValueError, RetrieverError) as exc:
            raise RetrieverError(f"{self.selector}: {what} cannot be sent as JSON ({exc}); "
                                 "the run's vectors hold NaN or infinite values") from None

    def _ask(self, line: bytes, what: str, timeout: float,
             embed: Embed | None = None) -> dict[str, Any]:
        """Send one request line, read one answer line: the answer as a dict. ``{"error"}``
        answers raise a plain :class:`RetrieverError`; everything else that goes wrong stops
        the command (``_fail``). An embed request the command sends while it owes the answer
        is answered with ``embed`` (``persona.embed``, :mod:`.command_embed`), and the wait
        goes on."""
        if self._proc is None:
            self._start()
        proc = self._proc
        assert proc is not None
        self._read_pending(proc)
        if self._out.strip():
            extra = one_line(bytes(self._out[:80]).decode("utf-8", "replace"))
            raise self._fail(f"command `{shlex.join(self.argv)}` wrote {extra!r} to stdout "
                             f"unasked after {self._last}; answer each request with exactly "
                             "one line (log to stderr)")
        self._last = what
        # One deadline for the request and every embed exchange it holds: an exchange never
        # restarts it (a store asking for embeddings forever would never time out).
        wait = Wait(time.monotonic() + timeout, timeout)
        answer = self._answer(proc, line, what, wait)
        refused: str | None = None
        while is_embed_request(answer):  # the store asks for the run's model first
            texts = embed_texts(answer)
            if texts is None:
                raise self._fail(f"command `{shlex.join(self.argv)}` sent an embed request "
                                 f"during {what} without a \"texts\" list of strings; send "
                                 "{\"op\": \"embed\", \"texts\": [\"...\"]}")
            begun = time.perf_counter()
            reply, refusal = embed_reply(embed, texts)
            self.clock.embed_ms += (time.perf_counter() - begun) * 1000.0
            refused = refused or refusal
            wait.embeds += 1
            answer = self._answer(proc, encode_vectors_reply(self.codec, reply), what, wait)
        if refused is not None:  # the store was told; its answer to the request is past
            raise RetrieverError(f"{self.selector}: {what}: {refused}")
        if "error" in answer:
            raise RetrieverError(f"{self.selector}: {what}: "
                                 f"{one_line(answer['error'], 500)}")
        return answer

    def _answer(self, proc: subprocess.Popen[bytes], line: bytes, what: str,
                wait: Wait) -> dict[str, Any]:
        """Write ``line``, read the next line: one JSON object (anything else stops the
        command)."""
        try:
            raw = self._exchange(proc, line, wait)
        finally:
            copy_stderr(proc)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            shown = one_line(raw[:120].decode("utf-8", "backslashreplace"))
            raise self._fail(f"command `{shlex.join(self.argv)}` answered {what} with "
                             f"'{shown}', which is not UTF-8 (byte 0x{raw[exc.start]:02x} at "
                             f"offset {exc.start}); write each answer as UTF-8 JSON (log to "
                             "stderr)") from None
        try:
            answer = parse_answer_line(text, raw)
        except LineRefused as why:
            raise self._fail(f"command `{shlex.join(self.argv)}` answered {what} with {why}"
                             ) from None
        except ValueError:
            shown = one_line(raw[:120].decode("utf-8", "replace")) or "an empty line"
            raise self._fail(f"command `{shlex.join(self.argv)}` answered {what} with "
                             f"{shown!r}, which is not JSON; answer one JSON object a line "
                             "(log to stderr)") from None
        if not isinstance(answer, dict):
            raise self._fail(f"command `{shlex.join(self.argv)}` answered {what} with a JSON "
                             f"{type(answer).__name__}, not an object")
        return answer

    def _exchange(self, proc: subprocess.Popen[bytes], line: bytes, wait: Wait) -> bytes:
        """Write ``line`` and read the answer line, by the request's deadline."""
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        command = shlex.join(self.argv)
        deadline = wait.deadline
        pending = memoryview(line)
        written: float | None = None  # when its last byte went
        sel = selectors.DefaultSelector()
        # The leader's exit, seen as it happens: a helper it forked may hold stdout open, so
        # stdout's end would never come (issue 43.14). A pidfd where the kernel has them,
        # else a look at the leader each EXIT_POLL_S without an event.
        exited = leader_watch(proc)
        leader_gone = False
        try:
            sel.register(proc.stdout, selectors.EVENT_READ)
            sel.register(proc.stdin, selectors.EVENT_WRITE)
            sel.register(proc.stderr, selectors.EVENT_READ)  # drained: it never blocks on it
            if exited is not None:
                sel.register(exited, selectors.EVENT_READ)
            writing = True
            while True:
                newline = self._out.find(b"\n")
                if newline >= 0:
                    raw = bytes(self._out[:newline])
                    del self._out[:newline + 1]
                    if raw.strip():  # blank lines are no answer: skipped
                        return raw
                    continue
                if leader_gone:  # what it wrote before it went is read; no line came
                    before = len(self._out)
                    self._read_pending(proc)
                    if len(self._out) == before:
                        raise self._fail(self._exit_line(proc))
                    continue
                if len(self._out) > MAX_ANSWER_BYTES:
                    raise self._fail(
                        f"command `{command}` answered {self._last} with a line longer than "
                        f"{MAX_ANSWER_BYTES // (1024 * 1024)} MiB; keep each answer short")
                left = deadline - time.monotonic()
                if left <= 0:
                    embeds = ("" if not wait.embeds else
                              f", {wait.embeds:,} embed exchange(s) included")
                    raise self._fail(
                        f"command `{command}` did not answer {self._last} within "
                        f"{wait.timeout:g} s (killed{embeds}); raise --retrieval-eval-cmd-"
                        f"{'index-' if self._last.startswith('index') else ''}timeout if it "
                        "needs longer")
                ready = sel.select(left if exited is not None else min(left, EXIT_POLL_S))
                woke = time.perf_counter()  # the answer's first byte is here (or not yet)
                if not ready and exited is None:
                    leader_gone = exit_status(proc) is not None
                for key, _ in ready:
                    if exited is not None and key.fd == exited:
                        sel.unregister(exited)
                        leader_gone = True
                        continue
                    if key.fileobj is proc.stdin:
                        begun = time.perf_counter()
                        try:
                            sent = os.write(proc.stdin.fileno(), pending)
                        except BlockingIOError:
                            continue
                        except OSError:  # it closed stdin (exited?): stdout says how
                            sel.unregister(proc.stdin)
                            writing = False
                            continue
                        pending = pending[sent:]
                        if not pending and writing:
                            # The last byte went during this write: the store's time starts
                            # when the write began, since a write that wakes the store may
                            # return only once the store has run (the scheduler lets the
                            # woken reader go first), even after it answered.
                            written = begun
                            sel.unregister(proc.stdin)
                            writing = False
                        continue
                    if key.fileobj is proc.stderr:
                        if not copy_stderr(proc, once=True):
                            sel.unregister(proc.stderr)
                        continue
                    try:
                        chunk = os.read(proc.stdout.fileno(), CHUNK)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        raise self._fail(self._exit_line(proc))
                    if written is not None:  # the answer's first byte: the store's time ends
                        self.clock.store_ms += (max(woke, written) - written) * 1000.0
                        written = None
                    self._out += chunk
                    if pending and self._out.strip():  # before it could have read it all
                        raise self._fail(self._early_line(len(line) - len(pending),
                                                          len(line)))
        finally:
            sel.close()
            if exited is not None:
                os.close(exited)

    def _read_pending(self, proc: subprocess.Popen[bytes]) -> None:
        """What the command wrote to stdout since its last answer (without waiting): a
        line nothing asked for is caught before the next answer could be mistaken for it."""
        assert proc.stdout is not None
        while len(self._out) <= MAX_ANSWER_BYTES:
            try:
                chunk = os.read(proc.stdout.fileno(), CHUNK)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return  # at its end: the exchange says how it exited
            self._out += chunk

    def _early_line(self, sent: int, size: int) -> str:
        """An answer begun before its request was written whole: a line nothing asked for
        (the rest of the request would follow it, the next request glued to it)."""
        shown = one_line(bytes(self._out[:80]).decode("utf-8", "replace"))
        return (f"command `{shlex.join(self.argv)}` wrote {shown!r} to stdout before "
                f"{self._last} was written whole ({sent:,} of {size:,} bytes sent), a line "
                "nothing asked for; read each request to its newline before answering it")

    def _exit_line(self, proc: subprocess.Popen[bytes]) -> str:
        return exit_line(proc, shlex.join(self.argv), self._last)


def make_command_retriever(selector: str, options: object) -> CommandRetriever:
    """The retriever for ``cmd:COMMAND`` with the run's timeouts and rootdir."""
    timeout, index_timeout, cwd = process_limits(options)
    return CommandRetriever(selector, timeout=timeout, index_timeout=index_timeout, cwd=cwd)
