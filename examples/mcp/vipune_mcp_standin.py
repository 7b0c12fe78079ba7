"""A stand-in of vipune's MCP server: vipune's tools over stdio, backed by the plugin's own
vipune reference (:mod:`pytest_retrieval_eval.vipune`), so that a store measured over MCP can
be checked against ``hybrid`` pair by pair.

Run it as an MCP stdio server (``python examples/mcp/vipune_mcp_standin.py``); it needs the
``mcp`` SDK (``pip install 'pytest-retrieval-eval[mcp]'``) and the plugin.

What it copies from vipune (repository randomm/vipune; each rule names its commit):

- **Tools and parameters** (``src/mcp/params.rs`` @ 61e21872, ``src/mcp/tools.rs`` as indexed
  with ``ToolHandler::new(store, project_id, config)``, ``src/mcp/helpers.rs`` @ 61e21872):
  ``store_memory {text, metadata, memory_type, status, supersedes, force}``,
  ``search_memories {query, limit, memory_types, statuses, recency_weight, hybrid, no_touch}``,
  ``list_memories {limit, memory_types, statuses, no_touch}``. Answers are one text content,
  compact JSON: ``{"id", "status": "added"}`` for a store; for a search an array, best first,
  of ``format_memory_json``'s objects: ``id, content, similarity, created_at, updated_at,
  project_id, memory_type, status, metadata, retrieval_count, last_retrieved_at``. The
  metadata given to ``store_memory`` comes back in every search result (parsed JSON), so
  provenance (the session or turn id) can travel in it.
- **Errors**: an MCP (JSON-RPC) error, INVALID_REQUEST with data ``{"type": "invalid_input"}``
  for bad input ("Text cannot be empty", "Query cannot be empty", "Limit must be greater than
  0", "Limit exceeds maximum allowed (10000)"), and for a **conflict** (``src/mcp/
  store_wrapper.rs`` @ bad60bbe, ``McpError::conflict``): message "Proposed memory conflicts
  with N existing memory(ies)", data ``{"type": "conflict", "proposed": TEXT, "conflicts":
  [{"id", "content", "similarity"}, ...]}``.
- **Conflict rule** (``IngestPolicy::ConflictAware`` unless ``force``): ``src/memory/crud.rs``
  (``add_with_conflict``) embeds the text and asks ``Database::find_similar(project,
  embedding, config.similarity_threshold)``, which (``src/sqlite/search.rs`` @ c0344e8a,
  lines 102-113) keeps every stored row of the project whose cosine is ``>= threshold``
  (line 111), best first; any such row refuses the store. The threshold defaults to 0.85
  (``src/config/mod.rs`` @ 44be5311, ``Config::default``, line 58; env
  ``VIPUNE_SIMILARITY_THRESHOLD``, as vipune's ``overrides.rs`` reads it).
- **Search** (``src/memory/search.rs`` @ e76afd78): ``hybrid`` is ``search_hybrid`` (pool
  ``limit*10`` clamped to 50..10000, RRF k=25 with the id tie-break, recency, truncate) and
  otherwise ``search`` (cosine top ``limit``, then the recency re-sort of those). Both are the
  reference's own functions (:func:`vipune.search_hybrid_parts`, :func:`vipune.fuse_lists`,
  :func:`vipune.semantic_search`).
- **Recency** (``src/temporal.rs`` @ 21505149: ``apply_recency_weight``, lines 174-185, the
  formula on line 184; ``calculate_decay``, lines 126-157, whole seconds of age from
  ``Utc::now()``, lambda 1e-6 on line 40; as ``pytest_retrieval_eval/vipune/hybrid.py``
  reproduces it): ``(1 - w) * score + w * exp(-1e-6 * age_seconds)``, re-sorted by score,
  stable (``src/memory/search.rs`` @ e76afd78). ``recency_weight`` defaults to the
  config's 0.3 (``src/config/mod.rs`` @ 44be5311 line 59; env ``VIPUNE_RECENCY_WEIGHT``).
  ``hybrid`` defaults to ``VIPUNE_STANDIN_HYBRID`` (``true`` unless set to ``false``: the
  config default was not found in the indexed sources).

Where the stand-in differs from vipune, on purpose (each choice says why):

- **Vectors: the run's vector cache, not a model.** vipune embeds each text with
  bge-small-en-v1.5; the plugin's ``hybrid`` reads the same vectors from its content-addressed
  cache (key = sha256 of the exact text; a query's key is the model's query prefix + the
  question, :func:`pytest_retrieval_eval.vectors.cache.query_key`). The stand-in reads that
  cache too: the root ``RETRIEVAL_EVAL_CACHE_DIR`` (else the plugin's default), with the
  bundled sample's cache behind it, and the model ``RETRIEVAL_EVAL_MODEL_FINGERPRINT`` (else
  the one model in those caches that holds the text). So a stored text must be the exact
  text the plugin embedded (a session's rendered text) and a query the question as given
  (vipune trims it first; the untrimmed question is tried when the trimmed one is not
  cached). A text the cache lacks is an MCP error (INTERNAL_ERROR, ``{"type":
  "internal_error"}``) naming the text's key and the model: no vector is ever guessed. Under
  these rules the stand-in at ``recency_weight 0`` returns ``hybrid``'s ranking.
- **Ids.** vipune names a memory with a fresh UUID, so its RRF tie-break (id ascending) is
  random from run to run. The stand-in, by default (``VIPUNE_STANDIN_IDS=provenance``), names
  a memory by its metadata's ``turn_id``, else ``session_id`` (a string not yet used), else
  a UUID: ties then break as ``hybrid``'s (by session id) do. ``VIPUNE_STANDIN_IDS=uuid``
  gives vipune's random ids.
- **Dates.** vipune's ``store_memory`` takes no date: ``created_at`` is the wall clock at
  the store, so recency over a quick ingest barely moves anything (all ages within seconds).
  ``VIPUNE_STANDIN_CLOCK=metadata:KEY`` instead takes ``created_at`` from the metadata's
  ``KEY`` (an RFC 3339 date, else the wall clock) and measures decay from
  ``VIPUNE_STANDIN_NOW`` (RFC 3339), else the newest stored date: the what-if "vipune, had
  it stored the conversation's dates", which is what ``hybrid+recency:W`` measures.
- **Store file**: ``VIPUNE_DATABASE_PATH`` (vipune's own override name), else
  ``vipune-standin.db`` in ``RETRIEVAL_EVAL_WORKDIR`` (the folder the plugin gives each
  persona's server), else in the working folder, in the v0.1.8 schema of the reference plus a
  side table for type, status and telemetry (FTS5 statistics read only ``memories_fts``).
  It is reopened if present, as vipune's would be: start each persona with a fresh folder.
- **Long texts**: vipune refuses a text past 100,000 bytes (``validate_input_length``, "Input
  too long: N characters (max: 100000)"), ``force`` or not, and so does the stand-in: the
  bundled sample holds such a session. ``VIPUNE_STANDIN_MAX_INPUT=BYTES`` moves the limit
  (``0``: none), for a what-if that stores every session.
- ``supersedes``: the new memory is stored without the conflict check and the old one's
  status becomes ``superseded`` (answer ``{"id", "status": "superseded"}``). ``memory_types``
  and ``statuses`` filter the rows searched; with neither, every row is (vipune's default
  filter was not read). Not needed to measure retrieval.
- The project is ``VIPUNE_PROJECT`` (default ``longmemeval``, the reference's). No token
  limit: later vipune refuses content past 512 tokens (``src/embedding/engine.rs`` @
  ab9a6227, ``embed_role``: ``ContentTooLong``), which the cached vectors cannot tell.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, CallToolResult, TextContent

from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.data.pairs import text_key
from pytest_retrieval_eval.errors import CacheError
from pytest_retrieval_eval.vectors import cache as cache_mod

#: ``src/memory/lifecycle.rs``: the memory types and the statuses a new memory may have.
MEMORY_TYPES = ("fact", "preference", "procedure", "guard", "observation")
STATUSES = ("active", "candidate", "superseded")
INSERT_STATUSES = ("active", "candidate")
DEFAULT_THRESHOLD = 0.85  # src/config/mod.rs @ 44be5311, line 58
DEFAULT_RECENCY = 0.3  # src/config/mod.rs @ 44be5311, line 59
MAX_LIMIT = 10_000

_SIDE_TABLE = """
CREATE TABLE IF NOT EXISTS standin_lifecycle (
    id TEXT PRIMARY KEY, memory_type TEXT NOT NULL, status TEXT NOT NULL,
    retrieval_count INTEGER NOT NULL DEFAULT 0, last_retrieved_at TEXT
)"""


def invalid_input(message: str) -> MCPError:
    """vipune's ``McpError::invalid_input``."""
    return MCPError(INVALID_REQUEST, message, {"type": "invalid_input"})


def internal_error(message: str) -> MCPError:
    """vipune's ``McpError::internal_error``."""
    return MCPError(INTERNAL_ERROR, message, {"type": "internal_error"})


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        sys.exit(f"vipune stand-in: {name}={raw!r} is not a number; set it to e.g. {default}")
    if not 0.0 <= value <= 1.0:
        sys.exit(f"vipune stand-in: {name}={raw!r} must lie in [0, 1]")
    return value


def _now_text() -> str:
    return datetime.now(timezone.utc).isoformat()


class RunVectors:
    """Vectors of exact texts from the plugin's content-addressed vector cache."""

    def __init__(self) -> None:
        self.roots = [cache_mod.default_cache_dir(), cache_mod.bundled_cache_dir()]
        self.fingerprint = os.environ.get("RETRIEVAL_EVAL_MODEL_FINGERPRINT", "").strip()
        self._cache: cache_mod.VectorCache | None = None

    def _open(self, key: str) -> cache_mod.VectorCache:
        if self._cache is not None:
            return self._cache
        if self.fingerprint:
            # Its manifest only (listing every model would read every shard's keys).
            chosen = [m for m in map(self._manifest, self.roots) if m is not None][:1]
            if not chosen:
                raise internal_error(
                    f"Embedding unavailable: no vectors of model {self.fingerprint[:12]} under "
                    f"{', '.join(map(str, self.roots))}; set RETRIEVAL_EVAL_CACHE_DIR to the "
                    "run's cache")
        else:
            chosen = cache_mod.models_holding(self.roots, [key])
            if len(chosen) != 1:
                raise internal_error(
                    f"Embedding unavailable: {len(chosen)} cached models hold text {key[:12]}; "
                    "set RETRIEVAL_EVAL_MODEL_FINGERPRINT to the run's model")
        info = chosen[0]
        root = cache_mod.default_cache_dir()
        self._cache = cache_mod.VectorCache(
            root, str(info["fingerprint"]), int(info["dim"]), info,
            read_only_roots=[cache_mod.bundled_cache_dir()])
        return self._cache

    def _manifest(self, root: Path) -> dict[str, Any] | None:
        path = root / "vectors" / self.fingerprint / "manifest.json"
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return info if isinstance(info, dict) else None

    def _get(self, key: str, what: str) -> np.ndarray:
        cache = self._open(key)
        try:
            return np.asarray(cache.get([key])[0], dtype=np.float32)
        except CacheError:
            raise internal_error(
                f"Embedding unavailable: the {what} (key {key[:12]}) is not in the vector cache "
                f"of model {cache.name} ({cache.fingerprint[:12]}); the stand-in embeds nothing "
                "itself: run once in the plugin's model lane, or prep the dataset") from None

    def passage(self, text: str) -> np.ndarray:
        return self._get(text_key(text), "text")

    def query(self, question: str, trimmed: str) -> np.ndarray:
        cache = self._open(text_key(trimmed))
        info = cache.model_info
        key = cache_mod.query_key(trimmed, info)
        if key not in cache and trimmed != question:
            key = cache_mod.query_key(question, info)
        return self._get(key, "query")


class Store:
    """One project's memories in a vipune-schema SQLite file (the reference's DDL)."""

    def __init__(self, path: Path, project_id: str) -> None:
        self.path = path
        self.project_id = project_id
        self.conn = sqlite3.connect(path, check_same_thread=False)  # one request at a time
        # A stand-in's file need not survive a power cut: no fsync per stored memory.
        self.conn.execute("PRAGMA synchronous = OFF")
        self.conn.executescript(vipune.SCHEMA_SQL)
        self.conn.execute(_SIDE_TABLE)
        self.conn.commit()
        rows = vipune.load_rows(self.conn, project_id, dim=None)
        self.ids: list[str] = list(rows.ids)
        self.vectors: list[np.ndarray] = list(rows.vectors)

    def matrix(self, keep: Sequence[int] | None = None) -> tuple[np.ndarray, list[str]]:
        index = range(len(self.ids)) if keep is None else keep
        ids = [self.ids[i] for i in index]
        if not ids:
            return np.zeros((0, 1), dtype=np.float32), ids
        return np.stack([self.vectors[i] for i in index]), ids

    def insert(self, mem_id: str, text: str, vector: np.ndarray, metadata: str,
               created_at: str, memory_type: str, status: str) -> None:
        blob = vipune.vector_to_blob(vector, dim=None)
        with self.conn:
            self.conn.execute(vipune.INSERT_SQL, (mem_id, self.project_id, text, blob, metadata,
                                                  created_at, created_at))
            self.conn.execute("INSERT INTO standin_lifecycle (id, memory_type, status)"
                              " VALUES (?, ?, ?)", (mem_id, memory_type, status))
        self.ids.append(mem_id)
        self.vectors.append(np.asarray(vector, dtype=np.float32))

    def rows(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``format_memory_json``'s fields of ``ids`` (similarity left out)."""
        found: dict[str, dict[str, Any]] = {}
        marks = ",".join("?" * len(ids))
        if not ids:
            return found
        sql = ("SELECT m.id, m.content, m.created_at, m.updated_at, m.project_id, "
               "l.memory_type, l.status, m.metadata, l.retrieval_count, l.last_retrieved_at "
               "FROM memories m JOIN standin_lifecycle l ON l.id = m.id "
               f"WHERE m.id IN ({marks})")
        for row in self.conn.execute(sql, tuple(ids)):
            found[row[0]] = {
                "id": row[0], "content": row[1], "created_at": row[2], "updated_at": row[3],
                "project_id": row[4], "memory_type": row[5], "status": row[6],
                "metadata": _metadata_value(row[7]), "retrieval_count": row[8],
                "last_retrieved_at": row[9]}
        return found

    def lifecycle(self) -> dict[str, tuple[str, str]]:
        return {row[0]: (row[1], row[2]) for row in
                self.conn.execute("SELECT id, memory_type, status FROM standin_lifecycle")}

    def created_at(self) -> dict[str, str]:
        return {row[0]: row[1] for row in self.conn.execute(
            "SELECT id, created_at FROM memories WHERE project_id = ?", (self.project_id,))}

    def touch(self, ids: Sequence[str]) -> None:
        now = _now_text()
        with self.conn:
            self.conn.executemany(
                "UPDATE standin_lifecycle SET retrieval_count = retrieval_count + 1, "
                "last_retrieved_at = ? WHERE id = ?", [(now, i) for i in ids])

    def supersede(self, old_id: str) -> None:
        with self.conn:
            cur = self.conn.execute(
                "UPDATE standin_lifecycle SET status = 'superseded' WHERE id = ?", (old_id,))
        if cur.rowcount == 0:
            raise MCPError(INVALID_REQUEST, f"memory not found: {old_id}", {"type": "not_found"})


def _metadata_value(raw: str | None) -> Any:
    """``helpers.rs::parse_metadata``: JSON, else the raw string; null when absent."""
    if raw is None or raw.strip() == "null":
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _dumps(value: Any) -> str:
    """serde_json's compact form (UTF-8 kept, no spaces)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _text(value: Any) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=_dumps(value))])


class StandIn:
    """The tools' behaviour, apart from the MCP plumbing (unit-testable in process)."""

    def __init__(self) -> None:
        folder = os.environ.get("RETRIEVAL_EVAL_WORKDIR", "").strip() or "."
        db = (os.environ.get("VIPUNE_DATABASE_PATH", "").strip()
              or os.path.join(folder, "vipune-standin.db"))
        self.store = Store(Path(db), os.environ.get("VIPUNE_PROJECT", "").strip()
                           or "longmemeval")
        self.vectors = RunVectors()
        self.threshold = _env_float("VIPUNE_SIMILARITY_THRESHOLD", DEFAULT_THRESHOLD)
        self.recency = _env_float("VIPUNE_RECENCY_WEIGHT", DEFAULT_RECENCY)
        raw_max = os.environ.get("VIPUNE_STANDIN_MAX_INPUT", "").strip()
        if raw_max and not raw_max.isdigit():
            sys.exit(f"vipune stand-in: VIPUNE_STANDIN_MAX_INPUT={raw_max!r} is not a whole "
                     "number of bytes (0: no limit)")
        self.max_input = int(raw_max) if raw_max else vipune.MAX_INPUT_LENGTH
        self.hybrid = os.environ.get("VIPUNE_STANDIN_HYBRID", "true").strip().lower() != "false"
        self.ids_mode = os.environ.get("VIPUNE_STANDIN_IDS", "provenance").strip() or "provenance"
        if self.ids_mode not in ("provenance", "uuid"):
            sys.exit(f"vipune stand-in: VIPUNE_STANDIN_IDS={self.ids_mode!r} is not "
                     "'provenance' or 'uuid'")
        clock = os.environ.get("VIPUNE_STANDIN_CLOCK", "").strip() or "wall"
        if clock != "wall" and not clock.startswith("metadata:"):
            sys.exit(f"vipune stand-in: VIPUNE_STANDIN_CLOCK={clock!r} is not 'wall' or "
                     "'metadata:KEY'")
        self.date_key = clock.split(":", 1)[1] if clock != "wall" else None
        now = os.environ.get("VIPUNE_STANDIN_NOW", "").strip()
        try:
            self.now = vipune.parse_rfc3339(now) if now else None
        except ValueError as exc:
            sys.exit(f"vipune stand-in: VIPUNE_STANDIN_NOW: {exc}")

    # ------------------------------------------------------------------ store_memory
    def store_memory(self, text: str, metadata: Any = None, memory_type: str | None = None,
                     status: str | None = None, supersedes: str | None = None,
                     force: bool | None = None) -> dict[str, Any]:
        if not text.strip():
            raise invalid_input("Text cannot be empty")
        kind = memory_type if memory_type is not None else "fact"
        if kind not in MEMORY_TYPES:
            raise invalid_input(f"Invalid memory type: unknown memory type '{kind}' (expected "
                                f"one of: {', '.join(MEMORY_TYPES)})")
        state = status if status is not None else "active"
        if state not in STATUSES:
            raise invalid_input(f"Invalid status: unknown status '{state}'")
        if state not in INSERT_STATUSES:
            raise invalid_input(f"Status '{state}' is not valid for new memory. Must be "
                                "'active' or 'candidate'.")
        meta_text = "null" if metadata is None else _dumps(metadata)
        size = len(text.encode("utf-8"))
        if 0 < self.max_input < size:  # MemoryStore::validate_input_length
            raise invalid_input(f"Input too long: {size} characters "
                                f"(max: {self.max_input})")
        if supersedes is not None and supersedes not in self.store.ids:
            raise MCPError(INVALID_REQUEST, f"memory not found: {supersedes}",
                           {"type": "not_found"})
        vector = self.vectors.passage(text)
        if supersedes is None and not force:
            conflicts = self.conflicts(vector)
            if conflicts:
                raise MCPError(
                    INVALID_REQUEST,
                    f"Proposed memory conflicts with {len(conflicts)} existing memory(ies)",
                    {"type": "conflict", "proposed": text, "conflicts": conflicts})
        mem_id = self._new_id(metadata)
        self.store.insert(mem_id, text, vector, meta_text, self._created_at(metadata), kind,
                          state)
        if supersedes is not None:
            self.store.supersede(supersedes)
            return {"id": mem_id, "status": "superseded"}
        return {"id": mem_id, "status": "added"}

    def conflicts(self, vector: np.ndarray) -> list[dict[str, Any]]:
        """``Database::find_similar``: stored rows with cosine >= threshold, best first."""
        matrix, ids = self.store.matrix()
        if not ids:
            return []
        similar = vipune.semantic_search(matrix, ids, vector, min(len(ids), MAX_LIMIT))
        hits = [(i, s) for i, s in similar if s >= self.threshold]
        rows = self.store.rows([i for i, _ in hits])
        return [{"id": i, "content": rows[i]["content"], "similarity": s} for i, s in hits]

    def _new_id(self, metadata: Any) -> str:
        if self.ids_mode == "provenance" and isinstance(metadata, dict):
            for key in ("turn_id", "session_id"):
                value = metadata.get(key)
                if isinstance(value, str) and value and value not in self.store.ids:
                    return value
        return str(uuid.uuid4())

    def _created_at(self, metadata: Any) -> str:
        if self.date_key is not None and isinstance(metadata, dict):
            value = metadata.get(self.date_key)
            if isinstance(value, str):
                try:
                    vipune.parse_rfc3339(value)
                except ValueError:
                    pass
                else:
                    return value
        return _now_text()

    # ------------------------------------------------------------------ search_memories
    def search_memories(self, query: str, limit: int | None = None,
                        memory_types: list[str] | None = None,
                        statuses: list[str] | None = None,
                        recency_weight: float | None = None, hybrid: bool | None = None,
                        no_touch: bool | None = None) -> list[dict[str, Any]]:
        if not query.strip():
            raise invalid_input("Query cannot be empty")
        lim = 5 if limit is None else limit
        if lim <= 0:
            raise invalid_input("Limit must be greater than 0")
        if lim > MAX_LIMIT:
            raise invalid_input("Limit exceeds maximum allowed (10000)")
        weight = self.recency if recency_weight is None else recency_weight
        use_hybrid = self.hybrid if hybrid is None else hybrid
        try:
            trimmed = vipune.validate_query(query)
            weight = vipune.validate_recency(weight)
        except vipune.VipuneInputError as exc:
            raise invalid_input(exc.vipune_message) from None
        keep = self._kept(memory_types, statuses)
        matrix, ids = self.store.matrix(keep)
        if not ids:
            return []
        qvec = self.vectors.query(query, trimmed)
        dates = self.store.created_at() if weight > 0.0 else None
        now = self._now(dates) if dates is not None else None
        if use_hybrid:
            parts = vipune.search_hybrid_parts(
                self.store.conn, matrix, ids, trimmed, qvec, lim, weight,
                project_id=self.store.project_id, created_at=dates, now=now)
            allowed = set(ids)  # the filters (none: every row, and this is parts.fused)
            ranked = [(i, s) for i, s in parts.candidates if i in allowed][:lim]
        else:
            ranked = vipune.semantic_search(matrix, ids, qvec, lim)
            if weight > 0.0 and dates is not None and now is not None:
                ranked = sorted(
                    ((i, (1.0 - weight) * s + weight * vipune.recency_decay(dates[i], now))
                     for i, s in ranked), key=lambda item: -item[1])
        rows = self.store.rows([i for i, _ in ranked])
        results = [{**rows[i], "similarity": s} for i, s in ranked]
        if not no_touch and ranked:
            self.store.touch([i for i, _ in ranked])
        return [_field_order(r) for r in results]

    def _kept(self, memory_types: list[str] | None,
              statuses: list[str] | None) -> list[int] | None:
        if memory_types is None and statuses is None:
            return None
        life = self.store.lifecycle()
        keep = []
        for index, mem_id in enumerate(self.store.ids):
            kind, state = life.get(mem_id, ("fact", "active"))
            if memory_types is not None and kind not in memory_types:
                continue
            if statuses is not None and state not in statuses:
                continue
            keep.append(index)
        return keep

    def _now(self, dates: dict[str, str]) -> datetime:
        if self.now is not None:
            return self.now
        if self.date_key is None:
            return datetime.now(timezone.utc)
        parsed = [vipune.parse_rfc3339(d) for d in dates.values() if d]
        return max(parsed) if parsed else datetime.now(timezone.utc)

    # ------------------------------------------------------------------ list_memories
    def list_memories(self, limit: int | None = None, memory_types: list[str] | None = None,
                      statuses: list[str] | None = None,
                      no_touch: bool | None = None) -> list[dict[str, Any]]:
        lim = 10 if limit is None else limit
        if lim <= 0:
            raise invalid_input("Limit must be greater than 0")
        if lim > MAX_LIMIT:
            raise invalid_input("Limit exceeds maximum allowed (10000)")
        keep = self._kept(memory_types, statuses)
        index = range(len(self.store.ids)) if keep is None else keep
        ids = [self.store.ids[i] for i in index]
        rows = self.store.rows(ids)
        newest = sorted(ids, key=lambda i: (rows[i]["created_at"], ids.index(i)), reverse=True)
        return [{k: v for k, v in _field_order(rows[i]).items() if k != "similarity"}
                for i in newest[:lim]]


_FIELDS = ("id", "content", "similarity", "created_at", "updated_at", "project_id",
           "memory_type", "status", "metadata", "retrieval_count", "last_retrieved_at")


def _field_order(row: dict[str, Any]) -> dict[str, Any]:
    """``format_memory_json``'s key order."""
    return {k: row[k] for k in _FIELDS if k in row}


def build_server(standin: StandIn | None = None) -> MCPServer:
    """The MCP server over a :class:`StandIn` (made from the environment when not given)."""
    impl = standin if standin is not None else StandIn()
    server = MCPServer("vipune", log_level="WARNING")

    @server.tool(name="store_memory", description=(
        "Store information for later recall. Use this when you learn something worth "
        "remembering: facts, decisions, preferences, or context about a project."))
    async def store_memory(text: str, metadata: Any = None, memory_type: str | None = None,
                           status: str | None = None, supersedes: str | None = None,
                           force: bool | None = None) -> CallToolResult:
        return _text(impl.store_memory(text, metadata, memory_type, status, supersedes, force))

    @server.tool(name="search_memories", description=(
        "Search memories by meaning. Describe what you are looking for in natural language."))
    async def search_memories(query: str, limit: int | None = None,
                              memory_types: list[str] | None = None,
                              statuses: list[str] | None = None,
                              recency_weight: float | None = None, hybrid: bool | None = None,
                              no_touch: bool | None = None) -> CallToolResult:
        return _text(impl.search_memories(query, limit, memory_types, statuses,
                                          recency_weight, hybrid, no_touch))

    @server.tool(name="list_memories", description=(
        "List recent memories. Use this to review what was recently stored."))
    async def list_memories(limit: int | None = None, memory_types: list[str] | None = None,
                            statuses: list[str] | None = None,
                            no_touch: bool | None = None) -> CallToolResult:
        return _text(impl.list_memories(limit, memory_types, statuses, no_touch))

    return server


def main() -> None:
    build_server().run("stdio")


if __name__ == "__main__":
    main()
