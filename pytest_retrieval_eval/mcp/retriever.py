"""``mcp:`` retrievers (issue 45): a memory server measured over MCP, one server per persona.

``index(persona)`` starts a fresh server (a stdio command in a folder of its own under
``persona.workdir``, emptied first, with its environment; or a new session of a URL server,
its ``reset_tool`` called first), times that start-up apart, then calls the store tool once
per session (or turn, ``unit = "turn"``) in the history's time order. ``rank`` calls the search
tool with the question and the limit and maps the results back to :class:`Memory` items
(:mod:`.results`). A store refused as a conflict is counted and reported, never dropped in
silence. The persona's server is kept while its questions are ranked (the last
:data:`LIVE_SERVERS` personas'), then stopped.

Failures are one line per item: a tool's JSON-RPC error or ``isError`` result fails that item
and the run goes on; a server that does not start, does not speak MCP, lacks a tool, exits or
misses its deadline is killed, its stderr tail written to the item's captured output, and every
later item of this process fails at once with that line (none waits out another deadline).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RetrievalEvalError, RetrieverError, one_line
from ..retrievers.base import Memory, Persona, Query, _check_limit, path_option, process_limits
from .client import Broken, EventLoop, Server, ToolError
from .mapping import ToolMapping, build_mapping, fill
from .results import Answer, Provenance, Unit, read_results, refused, stored_id
from .selector import PREFIX, parse_selector

__all__ = ["LIVE_SERVERS", "McpRetriever", "make_mcp_retriever"]

#: Personas whose servers are kept running at once in a process (the oldest is stopped).
LIVE_SERVERS = 2
#: The server's own folder under the persona's workdir (emptied before each start).
SERVER_FOLDER = "mcp-server"


@dataclass
class _Live:
    server: Server
    stored: Provenance
    refused: list[str] = field(default_factory=list)
    store_calls: int = 0


class McpRetriever:
    """A memory server over MCP (see the module's docstring). ``name``: the name given up
    front (``mcp:NAME=...``), else the selector."""

    needs_vectors = False  # the server embeds (or not) on its own

    def __init__(self, selector: str, *, timeout: float = 60.0, index_timeout: float = 600.0,
                 rootdir: str | os.PathLike[str] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.selector = selector if selector.startswith(PREFIX) else PREFIX + selector
        self.spec = parse_selector(self.selector)
        for label, value in (("timeout", timeout), ("index timeout", index_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise RetrievalEvalError(
                    f"retriever '{self.selector}': {label} {value!r} must be a finite number "
                    "of seconds above 0")
        self.timeout, self.index_timeout = float(timeout), float(index_timeout)
        self.rootdir = None if rootdir is None else Path(rootdir)
        #: The run's cache, told to the server (a stand-in reads the run's vectors there).
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.mapping: ToolMapping = build_mapping(self.selector, self.spec.options,
                                                  self.rootdir)
        self.name = self.spec.name or self.selector
        #: The command, its words that name a file or folder from the rootdir made absolute
        #: (the server runs in a folder of its own).
        self.argv = _anchored(self.spec.argv, self.rootdir or Path.cwd())
        self.limit_sensitive = self.mapping.limit_sensitive
        self.config: dict[str, Any] = {"server": self.spec.target, **self.mapping.config()}
        self._loop: EventLoop | None = None
        self._live: OrderedDict[str, _Live] = OrderedDict()
        self._broken: str | None = None
        self._startup: dict[str, float] | None = None
        self._facts: dict[str, Any] | None = None
        #: Milliseconds inside tool calls (the server's and the SDK's), and the plugin's side.
        self.server_ms = 0.0
        self.transport_ms = 0.0
        self.last_pid: int | None = None

    # -- what the harness reads ------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The process of the persona indexed last (None: a URL server, or none runs)."""
        return self.last_pid

    def take_startup(self) -> dict[str, float] | None:
        """The last ``index``'s server start-up, ``{"spawn", "hello"}`` ms, once."""
        got, self._startup = self._startup, None
        return got

    def take_facts(self) -> dict[str, Any] | None:
        """What the last ``index`` or ``rank`` counted (calls, refusals, unmatched results),
        once."""
        got, self._facts = self._facts, None
        return got

    def _count(self, **facts: Any) -> None:
        merged = dict(self._facts or {})
        for key, value in facts.items():
            if key == "unmatched":  # per item: the most of its searches (one per k)
                merged[key] = max(value, merged.get(key, 0))
            elif isinstance(value, int) and isinstance(merged.get(key), int):
                merged[key] += value
            else:
                merged[key] = value
        self._facts = merged

    @contextlib.contextmanager
    def _timed(self) -> Iterator[None]:
        begun = time.perf_counter()
        inside = self.server_ms
        try:
            yield
        finally:
            wall = (time.perf_counter() - begun) * 1000.0
            self.transport_ms += max(0.0, wall - (self.server_ms - inside))

    def _call(self, live: _Live, tool: str, arguments: dict[str, Any],
              timeout: float) -> Answer:
        begun = time.perf_counter()
        try:
            return live.server.call(tool, arguments, timeout)
        finally:
            self.server_ms += (time.perf_counter() - begun) * 1000.0

    # -- the lifecycle ---------------------------------------------------------------

    def index(self, persona: Persona) -> None:
        """Start this persona's server and store its history (once per persona)."""
        if self._broken is not None:
            raise RetrieverError(f"{self._broken} (stopped at an earlier item)")
        if persona.key in self._live:
            return
        live = self._start(persona)
        try:
            with self._timed():
                self._ingest(live, persona)
        except RetrieverError:
            self._stop(persona.key)
            raise
        self._count(persona=persona.key[:12], store_calls=live.store_calls,
                    refused=list(live.refused), stored=len(live.stored.units))

    def _start(self, persona: Persona) -> _Live:
        if self._loop is None:
            self._loop = EventLoop()
        while len(self._live) >= LIVE_SERVERS:
            self._stop(next(iter(self._live)))
        folder = self._folder(persona)
        env = None
        if self.spec.url is None:
            env = {**os.environ, "RETRIEVAL_EVAL_WORKDIR": str(folder),
                   **({} if self.cache_dir is None
                      else {"RETRIEVAL_EVAL_CACHE_DIR": str(self.cache_dir)}),
                   **{k: v.replace("{workdir}", str(folder))
                      for k, v in self.mapping.env.items()}}
        server = Server(self._loop, argv=self.argv, url=self.spec.url, cwd=folder,
                        env=env, label=self.selector)
        live = _Live(server, Provenance())
        try:
            server.open(self.timeout)
            wanted = [t for t in (self.mapping.store_tool, self.mapping.search_tool,
                                  self.mapping.reset_tool) if t]
            missing = [t for t in wanted if t not in server.tools]
            if missing:
                has = ", ".join(server.tools) or "none"
                raise Broken(f"server {self.spec.target} has no tool {missing[0]!r}; its "
                             f"tools: {has}; name one with +store_tool:NAME / "
                             "+search_tool:NAME, a preset or +map:PATH")
        except Broken as exc:
            raise self._fail(server, str(exc)) from None
        self._live[persona.key] = live
        self.last_pid = server.pid
        self._startup = {"spawn": server.spawn_ms, "hello": server.hello_ms}
        return live

    def _folder(self, persona: Persona) -> Path | None:
        """The server's own folder, emptied (a stdio server only)."""
        if self.spec.url is not None:
            return None
        base = persona.workdir
        if base is None:
            return self.rootdir
        folder = base / SERVER_FOLDER
        shutil.rmtree(folder, ignore_errors=True)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RetrieverError(f"{self.selector}: cannot make the server's folder {folder} "
                                 f"({exc}); pass a writable --retrieval-eval-cache=DIR") \
                from None
        return folder

    def _ingest(self, live: _Live, persona: Persona) -> None:
        deadline = time.monotonic() + self.index_timeout
        if self.mapping.reset_tool:
            self._checked(live, self.mapping.reset_tool, {}, "reset", deadline)
        for unit in units_of(persona, self.mapping.unit):
            meta: dict[str, Any] = {"session_id": unit.session}
            if unit.turn is not None:
                meta["turn_id"] = unit.turn
            meta["created_at"] = unit.date
            arguments = fill(self.mapping.store_arguments, {
                "text": unit.text, "id": unit.id, "session": unit.session,
                "turn": unit.turn or "", "date": unit.date, "metadata": meta})
            answer = self._checked(live, self.mapping.store_tool, arguments,
                                   f"{unit.id}", deadline)
            live.store_calls += 1
            if answer is None or refused(answer, self.mapping):
                live.refused.append(unit.id)
                continue
            live.stored.units.append(unit)
            new = stored_id(answer, self.mapping)
            if new is not None:
                live.stored.by_server_id[new] = unit

    def _checked(self, live: _Live, tool: str, arguments: dict[str, Any], what: str,
                 deadline: float) -> Answer | None:
        """A store-side call: its answer; None when it was refused as a conflict."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._fail(live.server, f"server {self.spec.target}: ingest took past "
                             f"{self.index_timeout:g} s (killed); raise "
                             "--retrieval-eval-cmd-index-timeout if it needs longer")
        where = f"{self.selector}: {tool} of {what}"
        try:
            answer = self._call(live, tool, arguments, min(self.timeout, left))
        except Broken as exc:
            raise self._fail(live.server, str(exc)) from None
        except ToolError as exc:
            if self._is_conflict(exc.data):
                return None
            raise RetrieverError(f"{where}: error {exc.code}: {one_line(exc.message, 300)}") \
                from None
        if answer.is_error:
            value, is_json = answer.value()
            if is_json and isinstance(value, dict) and self._is_conflict(value):
                return None
            raise RetrieverError(f"{where}: the tool answered an error (isError): "
                                 f"{answer.error_text()}")
        return answer

    def _is_conflict(self, data: Any) -> bool:
        return isinstance(data, dict) and data.get("type") in self.mapping.refusals

    def rank(self, persona: Persona, query: Query, limit: int) -> list[Memory]:
        lim = _check_limit(limit)
        if persona.key not in self._live:  # the harness indexes first; this is a guard
            self.index(persona)
        live = self._live[persona.key]
        self._live.move_to_end(persona.key)
        with self._timed():
            arguments = fill(self.mapping.search_arguments, {
                "query": query.question, "limit": lim, "question_date": query.question_date})
            where = f"{self.selector}: question {query.question_id}: {self.mapping.search_tool}"
            try:
                answer = self._call(live, self.mapping.search_tool, arguments, self.timeout)
            except Broken as exc:
                self._live.pop(persona.key, None)
                raise self._fail(live.server, str(exc)) from None
            except ToolError as exc:
                raise RetrieverError(f"{where}: error {exc.code}: "
                                     f"{one_line(exc.message, 300)}") from None
            if answer.is_error:
                raise RetrieverError(f"{where}: the tool answered an error (isError): "
                                     f"{answer.error_text()}")
            memories, unmatched = read_results(answer, self.mapping, live.stored, where)
        self._count(search_calls=1, unmatched=unmatched)
        return memories

    def _stop(self, key: str) -> None:
        live = self._live.pop(key, None)
        if live is not None:
            live.server.close()

    def _fail(self, server: Server, message: str) -> RetrieverError:
        """Stop the server for good in this process; the error of this and later items."""
        server.kill()
        server.close()
        server.show_stderr()
        self._broken = f"{self.selector}: {message}"
        tail = " (its stderr is in the captured output)" if server.stderr.data else ""
        return RetrieverError(self._broken + tail)

    def close(self) -> None:
        """Stop every server, then the event loop."""
        for key in list(self._live):
            self._stop(key)
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def _anchored(argv: tuple[str, ...], base: Path) -> tuple[str, ...]:
    out = []
    for word in argv:
        path = Path(word).expanduser()
        if not path.is_absolute() and word not in (".", "..") and not word.startswith("-") \
                and (base / path).exists():
            word = str(base / path)
        out.append(word)
    return tuple(out)


def units_of(persona: Persona, unit: str) -> list[Unit]:
    """What one persona's ingest stores, in the history's time order (stable: sessions of
    one date, or with none, keep the store's order): each session, or each of its turns
    (``<session_id>_<n>``, n from 1, text ``role: content``)."""
    order = sorted(range(len(persona.session_ids)), key=lambda i: persona.created_at[i] or "")
    out: list[Unit] = []
    turns = persona.turns if len(persona.turns) == len(persona.session_ids) else None
    for i in order:
        sid, date = persona.session_ids[i], persona.created_at[i] or ""
        if unit == "turn" and turns is not None:
            for n, turn in enumerate(turns[i], start=1):
                text = f"{turn.get('role', '')}: {turn.get('content', '')}"
                out.append(Unit(f"{sid}_{n}", sid, f"{sid}_{n}", text, date))
        else:
            out.append(Unit(sid, sid, None, persona.texts[i], date))
    return out


def make_mcp_retriever(selector: str, options: object) -> McpRetriever:
    """The retriever for ``mcp:...`` with the run's timeouts and rootdir."""
    timeout, index_timeout, rootdir = process_limits(options)
    return McpRetriever(selector, timeout=timeout, index_timeout=index_timeout,
                        rootdir=rootdir, cache_dir=path_option(options, "cache_dir"))

