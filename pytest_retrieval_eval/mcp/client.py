"""The ``mcp`` SDK's side of an ``mcp:`` retriever: one event-loop thread (anyio's blocking
portal) per retriever, and on it one client session per persona, over a stdio server process
of the plugin's own or a streamable-HTTP URL. The only module of the plugin that imports the
SDK (the ``[mcp]`` extra).

Every wait of the calling thread is bounded: the handshake and each tool call run under the
deadline inside the loop (``anyio.fail_after``), and the caller waits for their futures at most
that deadline and :data:`GRACE_S` more; past it the server's process group is killed from
the calling thread, so a loop that never answers cannot hang the run either.

The stdio transport is the plugin's own (not the SDK's ``stdio_client``), so that the server
runs as the leader of its own process group (``start_new_session``: its helpers, a forked
child, go when it is stopped, :func:`..retrievers.command_process.kill_group`), one answer line
is bounded (:data:`MAX_LINE_BYTES`), a line that is not JSON-RPC ends the session at once
rather than leaving the call to wait out its deadline, and stderr is read into a bounded tail
(:data:`STDERR_TAIL_BYTES`), shown when the server fails.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from ..errors import one_line
from ..retrievers.command_process import CHUNK, CLOSE_GRACE_S, exit_status, kill_group
from .results import Answer

__all__ = ["GRACE_S", "Broken", "EventLoop", "Server", "ToolError", "kill_all"]

#: Seconds the calling thread waits past a deadline for the loop to report it.
GRACE_S = 5.0
#: The longest line a stdio server may answer (bytes).
MAX_LINE_BYTES = 16 * 1024 * 1024
#: The bytes of the server's stderr kept (its last ones), shown when it fails.
STDERR_TAIL_BYTES = 16 * 1024


#: Every server process started and not yet stopped, for :func:`kill_all`.
_LIVE: weakref.WeakSet[Server] = weakref.WeakSet()
_GUARDED = False


def kill_all() -> None:
    """Kill every live server's process group (at exit, and on SIGTERM)."""
    for server in list(_LIVE):
        server.kill()


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (a CI cancel, ``timeout``, a container stop): the servers go first, then the
    signal does what it did before (by default it ends the process, which runs no
    ``finally``)."""
    kill_all()
    previous = _PREVIOUS.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, previous)
    os.kill(os.getpid(), signum)


_PREVIOUS: dict[int, Any] = {}


def _guard() -> None:
    """Once per process, from the main thread: kill the servers at exit and on SIGTERM."""
    global _GUARDED
    if _GUARDED or threading.current_thread() is not threading.main_thread():
        return
    _GUARDED = True
    atexit.register(kill_all)
    with contextlib.suppress(ValueError, OSError):
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_IGN:
            _PREVIOUS[signal.SIGTERM] = previous
            signal.signal(signal.SIGTERM, _on_sigterm)


class Broken(Exception):
    """The server cannot go on (did not start, not MCP, exited, past a deadline): one line."""


class ToolError(Exception):
    """A tool call answered with a JSON-RPC error (the server goes on): its code, message
    and data."""

    def __init__(self, code: int, message: str, data: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class EventLoop:
    """One event-loop thread of anyio's blocking portal, for a retriever's servers."""

    def __init__(self) -> None:
        self._cm = start_blocking_portal(name="retrieval-eval-mcp")
        self.portal: BlockingPortal = self._cm.__enter__()

    def close(self) -> None:
        """Stop the loop, its tasks cancelled (bounded: a stuck loop is left to its daemon
        thread)."""
        with contextlib.suppress(Exception):
            self.portal.start_task_soon(self.portal.stop, True).result(GRACE_S)


class _Tail:
    """The last :data:`STDERR_TAIL_BYTES` of a stream."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        over = len(self.data) - STDERR_TAIL_BYTES
        if over > 0:
            del self.data[:over]
            self.dropped += over

    def text(self) -> str:
        head = f"[... {self.dropped:,} earlier bytes of stderr dropped]\n" if self.dropped \
            else ""
        return head + self.data.decode("utf-8", "replace")


async def _read_chunk(fd: int) -> bytes:
    """The next bytes of a pipe the server writes (b"": it closed, or reading failed)."""
    while True:
        await anyio.wait_readable(fd)
        try:
            return os.read(fd, CHUNK)
        except BlockingIOError:
            continue
        except OSError:
            return b""


class Server:
    """One server session: a stdio process started for it, or a URL's new session."""

    def __init__(self, loop: EventLoop, *, argv: Sequence[str] = (), url: str | None = None,
                 cwd: Path | None = None, env: Mapping[str, str] | None = None,
                 label: str) -> None:
        self.loop, self.argv, self.url, self.cwd, self.env = loop, tuple(argv), url, cwd, env
        self.label = label
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr = _Tail()
        self.tools: list[str] = []
        self.spawn_ms = 0.0
        self.hello_ms = 0.0
        self._session: ClientSession | None = None
        self._stop: anyio.Event | None = None
        self._main: concurrent.futures.Future[None] | None = None
        #: Why the transport ended, when it saw why (exit, not JSON-RPC, a long line).
        self._why: str | None = None
        self._closing = False

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    # -- opening ----------------------------------------------------------------------

    def open(self, timeout: float) -> None:
        """Start the server (or connect) and finish the MCP handshake within ``timeout``;
        :class:`Broken` otherwise (the process killed)."""
        _guard()
        _LIVE.add(self)
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._main = self.loop.portal.start_task_soon(self._run, ready, timeout)
        try:
            ready.result(timeout + GRACE_S)
        except concurrent.futures.TimeoutError:
            self.kill()
            raise Broken(f"{self._what()} did not finish the MCP handshake within "
                         f"{timeout:g} s (killed)") from None
        except Broken:
            self.kill()
            raise

    def _what(self) -> str:
        return f"server {self.url}" if self.url is not None else \
            f"server `{' '.join(self.argv)}`"

    async def _run(self, ready: concurrent.futures.Future[None], timeout: float) -> None:
        self._stop = anyio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                begun = time.perf_counter()
                read, write = await stack.enter_async_context(self._transport())
                self.spawn_ms = (time.perf_counter() - begun) * 1000.0
                session = await stack.enter_async_context(ClientSession(read, write))
                with anyio.fail_after(timeout):
                    await session.initialize()
                    self.tools = await _tool_names(session)
                self.hello_ms = (time.perf_counter() - begun) * 1000.0 - self.spawn_ms
                self._session = session
                ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:  # the handshake's failure, said once
            if not ready.done():
                ready.set_exception(Broken(self._handshake_line(exc, timeout)))
        finally:
            self._session = None
            if not ready.done():
                ready.set_exception(Broken(f"{self._what()} stopped during the handshake"))

    def _handshake_line(self, exc: BaseException, timeout: float) -> str:
        exc = _innermost(exc)
        if isinstance(exc, Broken):
            return str(exc)
        if isinstance(exc, TimeoutError):
            return (f"{self._what()} did not finish the MCP handshake within {timeout:g} s "
                    "(killed); check it is an MCP server and speaks on this transport")
        why = self._why or f"{type(exc).__name__}: {one_line(exc, 200)}"
        return (f"{self._what()} did not finish the MCP handshake ({why}); check it is an "
                "MCP server (stdio: JSON-RPC lines on stdout, logs on stderr)")

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        if self.url is not None:
            async with streamable_http_client(self.url) as streams:
                yield streams[0], streams[1]
            return
        try:
            proc = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, bufsize=0, start_new_session=True)
        except OSError as exc:
            raise Broken(f"{self._what()} does not start ({exc.strerror or exc}); check the "
                         "program is installed and the path is right") from None
        self.proc = proc
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](64)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](64)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_stdout, proc, read_send)
                tg.start_soon(self._read_stderr, proc)
                tg.start_soon(self._write_stdin, proc, write_recv, read_send)
                try:
                    yield read_recv, write_send
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._end_process(proc)

    async def _read_stdout(self, proc: subprocess.Popen[bytes], send: Any) -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = bytearray()
        async with send:
            while True:
                chunk = await _read_chunk(fd)
                if not chunk:
                    status = exit_status(proc, 0.2)
                    self._why = self._why or (
                        "it closed its stdout" if status is None else
                        f"it exited with status {status}" if status >= 0 else
                        f"it was killed by signal {-status}")
                    return
                buf += chunk
                while (end := buf.find(b"\n")) >= 0:
                    line = bytes(buf[:end])
                    del buf[:end + 1]
                    if not line.strip():
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(
                            line, by_name=False)
                    except ValueError:
                        shown = one_line(line[:120].decode("utf-8", "replace"), 120)
                        self._why = (f"it wrote {shown!r} to stdout, which is not an MCP "
                                     "(JSON-RPC) message; log to stderr")
                        return
                    await send.send(SessionMessage(message))
                if len(buf) > MAX_LINE_BYTES:
                    self._why = (f"it wrote a line longer than {MAX_LINE_BYTES >> 20} MiB "
                                 "to stdout")
                    return

    async def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        fd = proc.stderr.fileno()
        while True:
            chunk = await _read_chunk(fd)
            if not chunk:
                return
            self.stderr.add(chunk)

    async def _write_stdin(self, proc: subprocess.Popen[bytes], receive: Any,
                           read_send: Any) -> None:
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        async with receive:
            async for message in receive:
                data = memoryview(message.message.model_dump_json(
                    by_alias=True, exclude_unset=True).encode() + b"\n")
                while data:
                    await anyio.wait_writable(fd)
                    try:
                        sent = os.write(fd, data)
                    except BlockingIOError:
                        continue
                    except OSError:  # it closed stdin: the session ends, stdout says why
                        self._why = self._why or "it closed its stdin"
                        await read_send.aclose()
                        return
                    data = data[sent:]

    async def _end_process(self, proc: subprocess.Popen[bytes]) -> None:
        """Close stdin, give the server :data:`CLOSE_GRACE_S` to exit (none when it broke),
        then kill its process group (helpers too)."""
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.close()
        if self._closing and self._why is None:  # a clean close: it may exit on its own
            deadline = time.monotonic() + CLOSE_GRACE_S
            while exit_status(proc) is None and time.monotonic() < deadline:
                await anyio.sleep(0.02)
        kill_group(proc)
        for pipe in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                assert pipe is not None
                pipe.close()

    # -- calls --------------------------------------------------------------------------

    def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> Answer:
        """Call ``tool`` within ``timeout`` seconds: its answer, :class:`ToolError` for a
        JSON-RPC error, :class:`Broken` when the server cannot go on (then killed)."""
        future = self.loop.portal.start_task_soon(self._call, tool, arguments, timeout)
        try:
            answer: Answer = future.result(timeout + GRACE_S)
            return answer
        except concurrent.futures.TimeoutError:
            future.cancel()
            self.kill()
            raise Broken(self._late(tool, timeout)) from None
        except Broken:
            self.kill()
            raise

    def _late(self, tool: str, timeout: float) -> str:
        return (f"{self._what()} did not answer {tool} within {timeout:g} s (killed); raise "
                "--retrieval-eval-cmd-timeout (--retrieval-eval-cmd-index-timeout for the "
                "store calls) if it needs longer")

    async def _call(self, tool: str, arguments: dict[str, Any], timeout: float) -> Answer:
        session = self._session
        if session is None:
            raise Broken(f"{self._what()} is gone ({self._why or 'its session ended'})")
        try:
            with anyio.fail_after(timeout):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            raise Broken(self._late(tool, timeout)) from None
        except MCPError as exc:
            if self._why is not None:
                raise Broken(f"{self._what()} failed during {tool}: {self._why}") from None
            if self.url is None and self.proc is not None and exit_status(self.proc) \
                    is not None:
                raise Broken(f"{self._what()} exited during {tool}") from None
            raise ToolError(exc.code, exc.message, exc.data) from None
        except Exception as exc:  # the transport's or the SDK's: the session cannot go on
            why = self._why or f"{type(exc).__name__}: {one_line(exc, 200)}"
            raise Broken(f"{self._what()} failed during {tool}: {why}") from None
        if not isinstance(result, types.CallToolResult):
            raise Broken(f"{self._what()} answered {tool} with a "
                         f"{type(result).__name__}, not a tool result")
        texts = tuple(c.text for c in result.content if isinstance(c, types.TextContent))
        return Answer(texts=texts, structured=result.structured_content,
                      is_error=bool(result.is_error), other=len(result.content) - len(texts))

    # -- closing ------------------------------------------------------------------------

    def close(self) -> None:
        """End the session (the process given :data:`CLOSE_GRACE_S` to exit), then make
        sure its group is gone."""
        stop, main = self._stop, self._main
        self._closing = True
        if stop is not None and main is not None and not main.done():
            with contextlib.suppress(Exception):
                self.loop.portal.start_task_soon(_set, stop).result(GRACE_S)
            with contextlib.suppress(Exception):
                main.result(CLOSE_GRACE_S + GRACE_S)
        self.kill()

    def kill(self) -> None:
        """Kill the server's process group now (from any thread; safe twice)."""
        if self.proc is not None:
            self._why = self._why or "killed"
            kill_group(self.proc)
        _LIVE.discard(self)

    def show_stderr(self) -> None:
        """The server's stderr tail onto ``sys.stderr`` (the item's captured output)."""
        text = self.stderr.text()
        if text.strip():
            sys.stderr.write(f"--- stderr of {self._what()} (last "
                             f"{STDERR_TAIL_BYTES // 1024} KiB) ---\n{text}\n")
            sys.stderr.flush()


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio's task groups wrap what failed)."""
    while (inner := getattr(exc, "exceptions", None)) and isinstance(inner[0], BaseException):
        exc = inner[0]
    return exc


async def _set(event: anyio.Event) -> None:
    event.set()


async def _tool_names(session: ClientSession) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    for _ in range(100):  # pages; a server that pages forever is cut off
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        listed = await session.list_tools(params=params)
        names += [t.name for t in listed.tools]
        cursor = listed.next_cursor
        if not cursor:
            break
    return names
