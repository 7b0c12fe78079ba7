"""A store's costs apart from its work (issue 37 items 1, 2 and 4), measured where a pair
item runs (:mod:`.pair_run`):

- **start-up**: a ``cmd:`` store's spawn and hello, timed before its first ``index``; a Python
  store's module import (:attr:`.UserRetriever.import_ms`, measured around that store's own
  import) and construction, once per process;
- **transport**: the plugin's side of a ``cmd:`` store's requests (encoding, writing, reading,
  decoding; :mod:`.retrievers.command_transport`), taken out of ingest and query latency;
- **LLM**: what a store's ``index`` spent on an LLM (``ingest_costs(persona_key)`` of the
  store: calls, prompt and completion tokens; the mem0 adapter's ``+infer:true``), kept with
  that index call's footprint;
- **footprint**: the bytes in the persona's workdir after ``index`` (disk), the resident
  memory ``index`` added to this process (RSS growth, from ``/proc/self/statm``: approximate,
  since an allocator may keep or return pages as it likes), and a ``cmd:`` store's child RSS
  after the call (``/proc/<pid>/statm``). Where ``/proc`` is not there (macOS), RSS is None.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..mcp.retriever import McpRetriever
    from ..retrievers.command import CommandRetriever

__all__ = ["folder_bytes", "footprint", "ingest_costs", "process_of", "resident_bytes",
           "server_facts", "server_startup", "start_command", "transport_ms"]

_COMMAND_MODULE = "pytest_retrieval_eval.retrievers.command"
_MCP_MODULE = "pytest_retrieval_eval.mcp.retriever"


def _as_command(retriever: Any) -> CommandRetriever | None:
    """``retriever`` when it is a ``cmd:`` store, else None. A run with no ``cmd:`` store
    never imports :mod:`.retrievers.command` (and then holds none of its retrievers)."""
    command = sys.modules.get(_COMMAND_MODULE)
    if command is None or not isinstance(retriever, command.CommandRetriever):
        return None
    return retriever  # type: ignore[no-any-return]


def _as_server(retriever: Any) -> McpRetriever | None:
    """``retriever`` when it is an ``mcp:`` store, else None (a run with none never imports
    :mod:`.mcp.retriever`, nor the SDK)."""
    module = sys.modules.get(_MCP_MODULE)
    if module is None or not isinstance(retriever, module.McpRetriever):
        return None
    return retriever  # type: ignore[no-any-return]


def server_startup(retriever: Any) -> dict[str, float] | None:
    """An ``mcp:`` store's server start-up in the ``index`` that just ran (a fresh server per
    persona), ``{"spawn": ..., "hello": ...}`` ms, inside that ``index``'s time; None when it
    started none."""
    server = _as_server(retriever)
    return None if server is None else server.take_startup()


def server_facts(retriever: Any) -> dict[str, Any] | None:
    """What an ``mcp:`` store counted in this item: store and search calls, sessions refused
    as conflicts, results that matched no session (None: not one, or nothing)."""
    server = _as_server(retriever)
    return None if server is None else server.take_facts()


def start_command(retriever: Any) -> dict[str, float] | None:
    """Start a ``cmd:`` store not yet started in this process (spawn and hello): its start-up
    parts in milliseconds, ``{"spawn": ..., "hello": ...}``; None when there was nothing to
    start. A command that fails to start raises its one line, as its first ``index`` did."""
    retriever = _as_command(retriever)
    if retriever is None or retriever.started:
        return None
    begun = time.perf_counter()
    retriever.start()
    clock = retriever.clock
    spawn = clock.spawn_ms or 0.0
    return {"spawn": spawn,
            "hello": max(0.0, (time.perf_counter() - begun) * 1000.0 - spawn)}


def transport_ms(retriever: Any) -> float | None:
    """The plugin's side of a ``cmd:`` store's calls so far (None: not a ``cmd:`` store)."""
    command = _as_command(retriever) or _as_server(retriever)
    return None if command is None else command.transport_ms


def resident_bytes(pid: int | str = "self") -> int | None:
    """The resident set of a process (``/proc/<pid>/statm``'s second field, in pages); None
    where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            fields = f.read().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def folder_bytes(folder: Path) -> int:
    """The bytes the regular files under ``folder`` take on disk (links not followed), 0 when
    it is gone: their allocated blocks (``st_blocks``, 512 bytes each, as ``du`` counts), each
    file (device, inode) once (issue 43.6: a sparse file of 1 TiB holding 64 KiB counts 64
    KiB, not its size; hard links count once). Where a filesystem reports no blocks, the
    size stands."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(folder)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)
            elif stat.S_ISREG(info.st_mode):
                file_id = (info.st_dev, info.st_ino)
                if file_id in seen:
                    continue
                seen.add(file_id)
                blocks = getattr(info, "st_blocks", None)
                total += info.st_size if blocks is None else blocks * 512
    return total


def process_of(retriever: Any) -> int | str:
    """The process a store's ``index`` runs in: a ``cmd:`` store's child, else this one."""
    command = _as_command(retriever) or _as_server(retriever)
    if command is not None and command.pid is not None:
        return command.pid
    return "self"


def _held_bytes(retriever: Any) -> int:
    """What a built-in store keeps for the persona it just indexed outside its workdir
    (``held_bytes``: a turn what-if's turn store, issue 44), else 0."""
    held = getattr(retriever, "held_bytes", 0)
    return held if isinstance(held, int) and not isinstance(held, bool) and held > 0 else 0


def footprint(retriever: Any, persona_key: str, folder: Path,
              rss_before: int | None) -> dict[str, Any]:
    """What one ``index`` call left: ``disk_bytes`` in its workdir (and what a built-in
    store keeps for it elsewhere: :func:`_held_bytes`), ``rss_growth_bytes`` of
    the store's process (:func:`process_of`; None without ``/proc``) and, for a ``cmd:``
    store, ``child_rss_bytes``: its child's resident memory after the call."""
    after = resident_bytes(process_of(retriever))
    record: dict[str, Any] = {
        "persona": persona_key,
        "disk_bytes": folder_bytes(folder) + _held_bytes(retriever),
        "rss_growth_bytes": None if after is None or rss_before is None
        else after - rss_before,
    }
    if _as_command(retriever) is not None or _as_server(retriever) is not None:
        record["child_rss_bytes"] = after
    if _as_server(retriever) is not None:  # a fresh server per persona: all of it is new
        record["rss_growth_bytes"] = None
    spent = ingest_costs(retriever, persona_key)
    if spent:
        record["llm"] = spent
    return record


def ingest_costs(retriever: Any, persona_key: str) -> dict[str, Any] | None:
    """What the store's ``index`` of this persona spent on an LLM (``ingest_costs`` of the
    store: ``calls``, ``prompt_tokens``, ``completion_tokens``, ...); None when it says
    nothing, or says something that is not a mapping of those counts."""
    take = getattr(retriever, "ingest_costs", None)
    if not callable(take):
        return None
    got = take(persona_key)
    if not isinstance(got, dict) or not all(
            isinstance(got.get(k), int) and not isinstance(got.get(k), bool) and got[k] >= 0
            for k in ("calls", "prompt_tokens", "completion_tokens")):
        return None
    return dict(got)
