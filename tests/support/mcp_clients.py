"""Direct MCP SDK clients of the memory servers the ``mcp:`` presets are checked against.

Each client makes, through the official ``mcp`` SDK's stdio client and nothing of the
plugin, the calls a preset makes: the references the plugin's ``mcp:`` columns must equal.

- :func:`vipune_standin_ranking`: ``examples/mcp/vipune_mcp_standin.py`` (vipune's tools);
- :func:`server_memory_ranking`: the real ``@modelcontextprotocol/server-memory``
  (:mod:`tests.support.mcp_servers`).

The SDK's stdio client gives a server only a default environment (``HOME``, ``PATH``, ...,
``mcp.client.stdio.get_default_environment``), so what a server needs (``PYTHONPATH``,
the cache root) is passed by name.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "examples" / "mcp" / "vipune_mcp_standin.py"
#: A bounded wait per call: a stuck server fails the test instead of hanging it.
CALL_TIMEOUT_S = 60.0


def standin_env(cache_dir: Path | None = None, **extra: str) -> dict[str, str]:
    """The stand-in's environment: this tree's package importable, the run's cache root."""
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get(
        "PYTHONPATH", "")) if p)}
    if cache_dir is not None:
        env["RETRIEVAL_EVAL_CACHE_DIR"] = str(cache_dir)
    env.update(extra)
    return env


@asynccontextmanager
async def connect(command: str, args: Sequence[str], env: Mapping[str, str],
                  cwd: Path) -> AsyncIterator[ClientSession]:
    """An initialised client session to a stdio server started in ``cwd``."""
    params = StdioServerParameters(command=command, args=list(args), env=dict(env), cwd=cwd)
    with open(os.environ.get("MCP_TEST_SERVER_LOG", os.devnull), "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), \
                ClientSession(read, write) as session:
            with anyio.fail_after(CALL_TIMEOUT_S):
                await session.initialize()
            yield session


async def call_json(session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    """One tool call; its one text content parsed as JSON. An ``isError`` result raises
    AssertionError with its text; a JSON-RPC error raises :class:`MCPError`."""
    with anyio.fail_after(CALL_TIMEOUT_S):
        result = await session.call_tool(tool, arguments)
    texts = [c.text for c in result.content if isinstance(c, TextContent)]
    if result.is_error:
        raise AssertionError(f"{tool} answered isError: {' '.join(texts)}")
    assert len(texts) == 1, f"{tool}: expected one text content, got {result.content!r}"
    return json.loads(texts[0])


def standin_session(workdir: Path, env: Mapping[str, str]
                    ) -> Any:  # an async context manager of ClientSession
    return connect(sys.executable, [str(STANDIN)], env, workdir)


async def _vipune_standin(workdir: Path, env: Mapping[str, str],
                          sessions: Sequence[tuple[str, str]], question: str, limit: int,
                          search_args: Mapping[str, Any], force: bool,
                          dates: Sequence[str] | None
                          ) -> tuple[list[tuple[str, float]], list[tuple[str, str]]]:
    refused: list[tuple[str, str]] = []
    async with standin_session(workdir, env) as session:
        ids: dict[str, str] = {}
        for n, (session_id, text) in enumerate(sessions):
            meta = {"session_id": session_id}
            if dates is not None:
                meta["created_at"] = dates[n]
            args: dict[str, Any] = {"text": text, "metadata": meta}
            if force:
                args["force"] = True
            try:
                answer = await call_json(session, "store_memory", args)
            except MCPError as exc:
                kind = exc.data.get("type") if isinstance(exc.data, dict) else None
                if kind in ("conflict", "invalid_input"):  # vipune refused to store it
                    refused.append((session_id, str(kind)))
                    continue
                raise
            assert answer["status"] == "added"
            ids[answer["id"]] = session_id
        found = await call_json(session, "search_memories",
                                {"query": question, "limit": limit, **search_args})
    ranking = []
    for item in found:
        by_meta = item["metadata"]["session_id"]
        assert ids[item["id"]] == by_meta  # the id map and the metadata agree
        ranking.append((by_meta, float(item["similarity"])))
    return ranking, refused


def vipune_standin_ranking(workdir: Path, env: Mapping[str, str],
                           sessions: Sequence[tuple[str, str]], question: str, limit: int,
                           *, force: bool = True, dates: Sequence[str] | None = None,
                           **search_args: Any
                           ) -> tuple[list[tuple[str, float]], list[tuple[str, str]]]:
    """The ``vipune`` preset's calls: one ``store_memory`` per session (text, metadata
    ``{"session_id": ...}``, with ``"created_at"`` when ``dates`` gives the sessions' dates;
    ``force`` when asked), then one ``search_memories``. Returns the
    (session id, similarity) ranking, mapped back by metadata, and the sessions vipune
    refused to store, each with the error's type (``conflict``, or ``invalid_input`` for a
    text past vipune's 100,000 bytes)."""
    return anyio.run(_vipune_standin, workdir, env, sessions, question, limit, search_args,
                     force, dates)


async def _server_memory(command: str, args: Sequence[str], workdir: Path,
                         sessions: Sequence[tuple[str, str]], question: str,
                         entity_type: str) -> list[str]:
    env = {"MEMORY_FILE_PATH": str((workdir / "memory.jsonl").resolve())}
    async with connect(command, args, env, workdir) as session:
        for session_id, text in sessions:
            created = await call_json(session, "create_entities", {"entities": [
                {"name": session_id, "entityType": entity_type, "observations": [text]}]})
            assert [e["name"] for e in created] == [session_id], created
        found = await call_json(session, "search_nodes", {"query": question})
    return [str(e["name"]) for e in found["entities"]]


def server_memory_ranking(command: tuple[str, list[str]], workdir: Path,
                          sessions: Sequence[tuple[str, str]], question: str,
                          entity_type: str = "session") -> list[str]:
    """The ``server-memory`` preset's calls: one ``create_entities`` per session (one entity
    named by the session id, ``entityType`` ``session``, observations ``[its text]``), in the
    order given, then ``search_nodes`` with the question. Returns the entity names in the
    order the server answered (its graph's order: it does not rank). Each persona gets its own
    memory file, ``<workdir>/memory.jsonl`` (absolute: a relative ``MEMORY_FILE_PATH`` is
    read from the package's folder)."""
    return anyio.run(_server_memory, command[0], command[1], workdir, sessions, question,
                     entity_type)
