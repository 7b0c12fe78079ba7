"""THE vipune reference: every rule of vipune's retrieval path, in one place.

vipune (crate ``vipune``, repository randomm/vipune) is a Rust memory CLI: SQLite rows with
384-d bge-small embeddings plus an FTS5 index, searched semantically, by BM25, or by both fused
with Reciprocal Rank Fusion. The harness measures ``MemoryStore::search_hybrid`` with recency
weight 0. This module reproduces the v0.1.8 sources rule by rule so that the *ranking* is the
one vipune would return:

- limits and input validation (``src/memory/store.rs``, ``src/sqlite/search.rs``,
  ``src/temporal.rs``), with vipune's messages;
- the storage DDL (``src/sqlite/mod.rs::create_schema``), verbatim;
- ``Database::search``: float64 cosine of float32 values, summed left to right, stable sort;
- ``Database::search_bm25``: the word escaping and the exact FTS5 statement, run on SQLite;
- ``rrf::rrf_fusion`` with k = 25 and the id tie-break, and ``search_hybrid``'s candidate pool,
  recency decay and truncation;
- the ``--json`` search output of the command line (``src/output.rs``).

Nothing here embeds text; callers pass the query vector (see ``embedding.py``).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from ..errors import RetrievalEvalError, one_line

__all__ = [
    "DDL_STATEMENTS",
    "DECAY_LAMBDA",
    "EMBEDDING_BLOB_SIZE",
    "EMBEDDING_DIM",
    "FTS_MODES",
    "FTS_SQL",
    "INSERT_SQL",
    "MAX_CANDIDATE_POOL",
    "MAX_INPUT_LENGTH",
    "MAX_SEARCH_LIMIT",
    "MIN_CANDIDATE_POOL",
    "MODEL_ID",
    "RRF_K",
    "SCHEMA_SQL",
    "SEMANTIC_SQL",
    "VIPUNE_VERSION",
    "WHITE_SPACE",
    "HybridParts",
    "SearchResult",
    "StoredRows",
    "VipuneInputError",
    "VipuneOutputError",
    "blob_to_vector",
    "candidate_pool",
    "cosine_similarity",
    "escape_fts_query",
    "format_search_json",
    "fts_search",
    "load_rows",
    "master_sql",
    "parse_rfc3339",
    "parse_search_json",
    "recency_decay",
    "rrf_fuse",
    "rust_trim",
    "search_hybrid",
    "search_hybrid_parts",
    "semantic_search",
    "validate_limit",
    "validate_query",
    "validate_recency",
    "vector_to_blob",
]

#: The vipune release these rules were read from.
VIPUNE_VERSION = "0.1.8"
#: ``src/memory/store.rs``: the largest ``limit`` a search accepts.
MAX_SEARCH_LIMIT = 10_000
#: ``src/memory/store.rs``: the largest query (and added content), in UTF-8 *bytes*.
MAX_INPUT_LENGTH = 100_000
#: ``src/memory/search.rs``: hybrid candidate pool bounds (pool = limit * 10, clamped).
MIN_CANDIDATE_POOL = 50
MAX_CANDIDATE_POOL = 10_000
#: ``src/rrf.rs``: ``RrfConfig::default().k``.
RRF_K = 25
#: ``src/sqlite/embedding.rs``: embeddings are exactly 384 little-endian float32 values.
EMBEDDING_DIM = 384
EMBEDDING_BLOB_SIZE = EMBEDDING_DIM * 4
#: ``src/temporal.rs``: exponential decay rate per second of age.
DECAY_LAMBDA = 1e-6
#: ``src/config/mod.rs``: the model vipune embeds with.
MODEL_ID = "BAAI/bge-small-en-v1.5"

#: Rust's ``char::is_whitespace`` (Unicode White_Space), used by ``str::trim`` and
#: ``split_whitespace``. Python's ``str.isspace`` differs (it also counts U+001C..U+001F).
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

#: ``src/sqlite/mod.rs::create_schema``, byte for byte (indentation included: SQLite keeps the
#: statement text in ``sqlite_master``).
SCHEMA_SQL = r"""
        CREATE TABLE IF NOT EXISTS memories (
            id TEXT PRIMARY KEY,
            project_id TEXT NOT NULL,
            content TEXT NOT NULL,
            embedding BLOB NOT NULL,
            metadata TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );

        CREATE INDEX IF NOT EXISTS idx_memories_project ON memories(project_id);

        CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
            content,
            project_id UNINDEXED,
            tokenize='porter unicode61',
            content_rowid='rowid',
            content='memories'
        );

        CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, content, project_id)
            VALUES (new.rowid, new.content, new.project_id);
        END;

CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, project_id)
            VALUES('delete', old.rowid, old.content, old.project_id);
        END;

        CREATE TRIGGER IF NOT EXISTS memories_fts_update AFTER UPDATE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, project_id)
            VALUES('delete', old.rowid, old.content, old.project_id);
            INSERT INTO memories_fts(rowid, content, project_id)
            VALUES (new.rowid, new.content, new.project_id);
        END;
        """


def _split_statements(script: str) -> tuple[str, ...]:
    """Split a SQL script into complete statements (trigger bodies kept whole)."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        raise ValueError("incomplete SQL statement at the end of the schema script")
    return tuple(statements)


#: The six statements of :data:`SCHEMA_SQL`, in order: table, index, FTS5 table, 3 triggers.
DDL_STATEMENTS: tuple[str, ...] = _split_statements(SCHEMA_SQL)

#: ``Database::insert`` (ids are the harness's session ids instead of fresh UUIDs).
INSERT_SQL = (
    "INSERT INTO memories (id, project_id, content, embedding, metadata, created_at, updated_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
)
#: ``Database::search``: every row of the project, in the order SQLite yields them.
SEMANTIC_SQL = (
    "SELECT id, project_id, content, metadata, created_at, updated_at, embedding"
    " FROM memories WHERE project_id = ?1"
)
#: ``Database::search_bm25``'s ranking statement (vipune also selects the other columns).
FTS_SQL = (
    "SELECT m.id, bm25(memories_fts) FROM memories_fts"
    " JOIN memories m ON m.rowid = memories_fts.rowid"
    " WHERE memories_fts MATCH ? AND m.project_id = ?"
    " ORDER BY bm25(memories_fts) LIMIT ?"
)

SearchResult = tuple[str, float]
"""One ranked row: (memory id, score)."""


class VipuneInputError(RetrievalEvalError):
    """vipune would reject this input; ``vipune_message`` is vipune's own error text."""

    def __init__(self, vipune_message: str, fix: str) -> None:
        self.vipune_message = vipune_message
        super().__init__(f"vipune rejects the input: {vipune_message}; {fix}")


class VipuneOutputError(RetrievalEvalError):
    """vipune's ``--json`` search output is not the documented shape."""


# --------------------------------------------------------------------------- validation


def _rust_float(value: float) -> str:
    """Format a float like Rust's ``Display`` for ``f64`` (no exponent, ``2`` not ``2.0``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return np.format_float_positional(value, trim="-")


def validate_limit(limit: int) -> int:
    """``validate_limit``: 1 <= limit <= 10,000, else vipune's message. Returns ``limit``."""
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}")
    limit = int(limit)
    if limit <= 0:
        raise VipuneInputError("Limit must be greater than 0", "ask for at least one result")
    if limit > MAX_SEARCH_LIMIT:
        raise VipuneInputError(
            f"Limit {limit} exceeds maximum allowed ({MAX_SEARCH_LIMIT})",
            f"ask for at most {MAX_SEARCH_LIMIT} results per call",
        )
    return limit


def rust_trim(text: str) -> str:
    """Rust's ``str::trim``: strip Unicode White_Space (not Python's ``isspace`` set)."""
    return text.strip(WHITE_SPACE)


def validate_query(query: str) -> str:
    """``validate_input_length`` on the trimmed query; returns the trimmed query.

    Empty (after trimming) -> "Input cannot be empty"; more than 100,000 UTF-8 bytes ->
    "Input too long: N characters (max: 100000)" (vipune says characters, counts bytes).
    """
    trimmed = rust_trim(query)
    if not trimmed:
        raise VipuneInputError("Input cannot be empty", "give a non-blank query")
    size = len(trimmed.encode("utf-8", "surrogatepass"))
    if size > MAX_INPUT_LENGTH:
        raise VipuneInputError(
            f"Input too long: {size} characters (max: {MAX_INPUT_LENGTH})",
            f"shorten the query to at most {MAX_INPUT_LENGTH} UTF-8 bytes",
        )
    return trimmed


def validate_recency(weight: float) -> float:
    """``validate_recency_weight``: 0.0 <= w <= 1.0 (NaN rejected)."""
    w = float(weight)
    if not 0.0 <= w <= 1.0:
        raise VipuneInputError(
            f"Invalid recency weight: {_rust_float(w)} (must be between 0.0 and 1.0)",
            "use a recency weight between 0 and 1",
        )
    return w


def candidate_pool(limit: int) -> int:
    """Hybrid candidate pool: ``limit * 10`` clamped to [50, 10,000]."""
    return min(max(limit * 10, MIN_CANDIDATE_POOL), MAX_CANDIDATE_POOL)


# --------------------------------------------------------------------------- embeddings


def vector_to_blob(vector: np.ndarray, *, dim: int | None = EMBEDDING_DIM) -> bytes:
    """``vec_to_blob``: little-endian float32 bytes; exactly ``dim`` values (None: any)."""
    arr = np.asarray(vector)
    if arr.ndim != 1:
        raise ValueError(f"an embedding is one vector, got shape {arr.shape}")
    if dim is not None and arr.shape[0] != dim:
        raise ValueError(
            f"Mismatched dimensions: expected {dim} dimensions, got {arr.shape[0]} dimensions"
        )
    return np.ascontiguousarray(arr, dtype="<f4").tobytes()


def blob_to_vector(blob: bytes, *, dim: int | None = EMBEDDING_DIM) -> np.ndarray:
    """``blob_to_vec``: exactly ``dim * 4`` bytes (None: any multiple of 4) -> float32."""
    if dim is not None and len(blob) != dim * 4:
        raise ValueError(f"Invalid BLOB size: expected {dim * 4} bytes, got {len(blob)} bytes")
    if len(blob) % 4:
        raise ValueError(f"Invalid BLOB size: {len(blob)} bytes is not a multiple of 4")
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def _check_finite(arr: np.ndarray) -> None:
    if not np.isfinite(arr).all():
        raise ValueError("Invalid embedding: Vector contains NaN or infinite values")


def cosine_similarity(a: np.ndarray | Sequence[float], b: np.ndarray | Sequence[float]) -> float:
    """``cosine_similarity``: float64 from float32, sums left to right, 0.0 for a zero norm.

    Errors (``ValueError``): an empty vector, a length mismatch, NaN or infinite values.
    """
    va = np.asarray(a, dtype=np.float32)
    vb = np.asarray(b, dtype=np.float32)
    if va.ndim != 1 or vb.ndim != 1:
        raise ValueError("cosine similarity takes two 1-d vectors")
    if va.size == 0 or vb.size == 0:
        raise ValueError("Cannot compute similarity with empty vector")
    if va.size != vb.size:
        raise ValueError(
            f"Mismatched dimensions: expected {va.size} dimensions, got {vb.size} dimensions"
        )
    _check_finite(va)
    _check_finite(vb)
    a64 = va.astype(np.float64)
    b64 = vb.astype(np.float64)
    # float32 x float32 products are exact in float64; only the summation order matters,
    # and ``add.accumulate`` adds strictly left to right, as Rust's ``Iterator::sum`` does.
    dot = float(np.add.accumulate(a64 * b64)[-1])
    norm_a = math.sqrt(float(np.add.accumulate(a64 * a64)[-1]))
    norm_b = math.sqrt(float(np.add.accumulate(b64 * b64)[-1]))
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return dot / (norm_a * norm_b)


def _similarities(vectors: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """Cosine of every row against the query, bit-identical to the per-row rule."""
    q = np.asarray(query_vector, dtype=np.float32)
    mat = np.asarray(vectors, dtype=np.float32)
    if q.ndim != 1:
        raise ValueError("the query vector must be 1-d")
    if q.size == 0:
        raise ValueError("Cannot compute similarity with empty vector")
    if mat.ndim != 2:
        raise ValueError(f"the stored vectors must form a 2-d array, got shape {mat.shape}")
    if mat.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    if mat.shape[1] != q.size:
        raise ValueError(
            f"Mismatched dimensions: expected {q.size} dimensions, got {mat.shape[1]} dimensions"
        )
    _check_finite(q)
    _check_finite(mat)
    q64 = q.astype(np.float64)
    # Column-major float64 copy: one vector operation per dimension, adding the products
    # (exact: float32 x float32 fits float64) left to right, as Rust's per-row ``sum`` does.
    cols = np.ascontiguousarray(mat.T, dtype=np.float64)
    dots = np.zeros(mat.shape[0], dtype=np.float64)
    squares = np.zeros(mat.shape[0], dtype=np.float64)
    tmp = np.empty(mat.shape[0], dtype=np.float64)
    for j in range(cols.shape[0]):
        col = cols[j]
        np.multiply(col, q64[j], out=tmp)
        dots += tmp
        np.multiply(col, col, out=tmp)
        squares += tmp
    row_norms = np.sqrt(squares)
    query_norm = math.sqrt(float(np.add.accumulate(q64 * q64)[-1]))
    sims = np.zeros(mat.shape[0], dtype=np.float64)
    if query_norm == 0.0:
        return sims
    nonzero = row_norms != 0.0
    sims[nonzero] = dots[nonzero] / (query_norm * row_norms[nonzero])
    return sims


def semantic_search(
    vectors: np.ndarray,
    ids: Sequence[str],
    query_vector: np.ndarray,
    limit: int,
) -> list[SearchResult]:
    """``Database::search``: cosine of every row, stable sort (ties keep row order), top ``limit``.

    ``vectors[i]`` is the embedding of ``ids[i]``, rows in the store's scan order.
    """
    validate_limit(limit)
    if len(ids) != np.asarray(vectors).shape[0]:
        raise ValueError(f"{len(ids)} ids for {np.asarray(vectors).shape[0]} vectors")
    if len(ids) == 0:
        return []
    sims = _similarities(vectors, query_vector)
    order = np.argsort(-sims, kind="stable")[:limit]
    return [(ids[i], float(sims[i])) for i in order.tolist()]


# --------------------------------------------------------------------------- full text


def escape_fts_query(query: str, *, mode: str = "and") -> str:
    """``escape_fts_query``: each white-space separated word ``\\`` and ``"`` doubled, quoted.

    The quoted words are joined with single spaces, so FTS5 ANDs them as phrases; FTS5 syntax
    (AND, OR, NOT, NEAR, ``*``, ``column:``) inside a word is plain text. "" when no words.

    ``mode="or"`` is not vipune's: the same quoted words joined with `` OR `` (a row matching
    any word), what a one-line change to the ``join(" ")`` of vipune's ``src/sqlite/fts.rs``
    would do. The what-if retrievers ``fts+mode:or`` and ``hybrid+fts:or`` use it.
    """
    if mode not in FTS_MODES:
        raise ValueError(f"FTS mode {mode!r} is not one of {', '.join(FTS_MODES)}")
    words = query.translate(_WS_TO_SPACE).split(" ")
    return (" " if mode == "and" else " OR ").join(
        '"' + word.replace("\\", "\\\\").replace('"', '""') + '"' for word in words if word
    )


#: How the quoted words of an FTS5 query are joined: ``and`` (vipune) or ``or`` (what-if).
FTS_MODES = ("and", "or")
_WS_TO_SPACE = {ord(ch): " " for ch in WHITE_SPACE}


Connectable = sqlite3.Connection | str | Path


def _connect_ro(path: str | Path) -> sqlite3.Connection:
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


class _Conn:
    """Context manager: use a connection as given, or open a path read-only and close it."""

    def __init__(self, target: Connectable) -> None:
        self._target = target
        self._owned: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        if isinstance(self._target, sqlite3.Connection):
            return self._target
        self._owned = _connect_ro(self._target)
        return self._owned

    def __exit__(self, *exc: object) -> None:
        if self._owned is not None:
            self._owned.close()


def fts_search(conn: Connectable, query: str, project_id: str, limit: int, *,
               mode: str = "and") -> list[SearchResult]:
    """``Database::search_bm25``: escaped query, FTS5 MATCH, ``bm25()`` ascending, ``limit``.

    Returns (id, bm25) with bm25 lower-is-better, as SQLite computes it. An empty escaped
    query returns no rows without running SQL. ``mode``: see :func:`escape_fts_query`.
    """
    validate_limit(limit)
    escaped = escape_fts_query(query, mode=mode)
    if not escaped:
        return []
    with _Conn(conn) as db:
        rows = db.execute(FTS_SQL, (escaped, project_id, limit)).fetchall()
    return [(str(row[0]), float(row[1])) for row in rows]


# --------------------------------------------------------------------------- stored rows


@dataclass(frozen=True)
class StoredRows:
    """The rows of one project as ``Database::search`` scans them."""

    ids: tuple[str, ...]
    contents: tuple[str, ...]
    created_at: tuple[str, ...]
    vectors: np.ndarray  # (n, dim) float32


def load_rows(conn: Connectable, project_id: str, *, dim: int | None = EMBEDDING_DIM) -> StoredRows:
    """Read a project's rows with vipune's own scan statement (no ORDER BY: SQLite's order)."""
    with _Conn(conn) as db:
        rows = db.execute(SEMANTIC_SQL, (project_id,)).fetchall()
    vecs = [blob_to_vector(bytes(r[6]), dim=dim) for r in rows]
    width = vecs[0].shape[0] if vecs else (dim or EMBEDDING_DIM)
    matrix = np.stack(vecs) if vecs else np.zeros((0, width), dtype=np.float32)
    return StoredRows(
        ids=tuple(str(r[0]) for r in rows),
        contents=tuple(str(r[2]) for r in rows),
        created_at=tuple(str(r[4]) for r in rows),
        vectors=matrix,
    )


def master_sql(conn: Connectable) -> list[tuple[str, str, str, str | None]]:
    """``sqlite_master`` rows (type, name, tbl_name, sql) in creation order."""
    with _Conn(conn) as db:
        rows = db.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid"
        ).fetchall()
    return [(str(r[0]), str(r[1]), str(r[2]), None if r[3] is None else str(r[3])) for r in rows]


# --------------------------------------------------------------------------- fusion


def rrf_fuse(
    semantic_ids: Sequence[str], fts_ids: Sequence[str], k: int = RRF_K
) -> list[SearchResult]:
    """``rrf_fusion``: each list adds ``1 / (k + rank)`` (rank from 1); sort by score, then id.

    Ties are broken by id ascending, byte-wise (Rust ``String`` order = UTF-8 byte order).
    """
    scores: dict[str, float] = {}
    for ranked in (semantic_ids, fts_ids):
        for rank, mem_id in enumerate(ranked, start=1):
            contribution = 1.0 / (float(k) + float(rank))
            scores[mem_id] = scores.get(mem_id, 0.0) + contribution
    fused = sorted(scores.items(), key=lambda item: (-item[1], item[0].encode("utf-8")))
    return [(mem_id, score) for mem_id, score in fused]


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})"
)


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with an offset (chrono ``DateTime<Utc>`` ``FromStr``).

    Any number of fractional digits (vipune writes nanoseconds); precision past microseconds
    is dropped, which cannot change a whole-second age.
    """
    match = _RFC3339.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"Invalid timestamp format: {text!r} is not RFC 3339")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    micro = int((match.group(7) or "0")[:6].ljust(6, "0"))
    zone = match.group(8)
    if zone in ("Z", "z"):
        tz = timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
        if offset >= timedelta(hours=24):
            raise ValueError(f"Invalid timestamp format: {text!r} has an impossible offset")
        tz = timezone(sign * offset)
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError:
        raise ValueError(f"Invalid timestamp format: {text!r} is not a real date") from None


def recency_decay(created_at: str, now: datetime) -> float:
    """``DecayConfig::calculate_decay`` (exponential, lambda 1e-6/s, whole seconds of age)."""
    created = parse_rfc3339(created_at)
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    age = now - created
    age_seconds = age.days * 86_400 + age.seconds  # whole seconds (age >= 0 is all that counts)
    exponent = -DECAY_LAMBDA * float(max(age_seconds, 0))
    if exponent < -700.0:
        return 0.0
    if exponent > 700.0:
        return 1.0
    return math.exp(exponent)


@dataclass(frozen=True)
class HybridParts:
    """One hybrid search: the fused result and the two lists that were fused."""

    fused: list[SearchResult]  # truncated to the limit
    semantic: list[SearchResult]  # the semantic candidate list, ``pool`` long at most
    fts: list[SearchResult]  # the FTS5 candidate list, ``pool`` long at most


def search_hybrid(
    conn: Connectable,
    vectors: np.ndarray,
    ids: Sequence[str],
    query: str,
    query_vector: np.ndarray,
    limit: int,
    recency_weight: float = 0.0,
    *,
    project_id: str,
    created_at: Mapping[str, str] | None = None,
    now: datetime | None = None,
    semantic_ranking: Sequence[SearchResult] | None = None,
) -> list[SearchResult]:
    """``MemoryStore::search_hybrid`` with a precomputed query vector.

    ``semantic_ranking``, when given, is this query's full :func:`semantic_search` ranking
    (every row): the stable sort makes its first ``pool`` entries exactly the semantic list,
    so a caller searching one query at several limits computes the cosine scan once.

    1. trim + validate the query, then the recency weight, then the limit (vipune's order);
    3. pool = clamp(limit * 10, 50, 10,000);
    4. semantic list over ``vectors``/``ids`` (the project's rows, scan order) and the BM25 list
       from the store's FTS5 index, each ``pool`` long;
    5. RRF (k = 25, id tie-break); 6. recency decay only when the weight is > 0
       (``created_at`` maps id -> RFC 3339, ``now`` defaults to the current time; the re-sort is
       stable, by score only); 7. truncate to ``limit``.
    """
    return search_hybrid_parts(
        conn, vectors, ids, query, query_vector, limit, recency_weight, project_id=project_id,
        created_at=created_at, now=now, semantic_ranking=semantic_ranking).fused


def search_hybrid_parts(
    conn: Connectable,
    vectors: np.ndarray,
    ids: Sequence[str],
    query: str,
    query_vector: np.ndarray,
    limit: int,
    recency_weight: float = 0.0,
    *,
    project_id: str,
    created_at: Mapping[str, str] | None = None,
    now: datetime | None = None,
    semantic_ranking: Sequence[SearchResult] | None = None,
    rrf_k: int = RRF_K,
    pool: int | None = None,
    fts_mode: str = "and",
) -> HybridParts:
    """:func:`search_hybrid`, keeping the two fused lists (for diagnostics).

    The defaults are vipune's. The what-if knobs (``hybrid+...`` retrievers) change one rule
    each: ``rrf_k`` the RRF constant (vipune: 25, ``src/rrf.rs``), ``pool`` a fixed candidate
    pool instead of ``clamp(limit * 10, 50, 10000)`` (``src/memory/search.rs``), ``fts_mode``
    ``"or"`` the FTS5 query's operator (:func:`escape_fts_query`). With a recency weight, a row
    whose ``created_at`` is missing or empty decays to 0 (the oldest possible).
    """
    trimmed = validate_query(query)
    weight = validate_recency(recency_weight)
    validate_limit(limit)
    size = candidate_pool(limit) if pool is None else validate_limit(pool)
    if semantic_ranking is not None:
        semantic = list(semantic_ranking[:size])
    else:
        semantic = semantic_search(vectors, ids, query_vector, size)
    bm25 = fts_search(conn, trimmed, project_id, size, mode=fts_mode)
    fused = rrf_fuse([i for i, _ in semantic], [i for i, _ in bm25], rrf_k)
    if weight > 0.0:
        if created_at is None:
            raise ValueError("a recency weight above 0 needs created_at for every row")
        when = now if now is not None else datetime.now(timezone.utc)
        rescored = [
            (mem_id, (1.0 - weight) * score + weight * (
                recency_decay(created_at[mem_id], when) if created_at.get(mem_id) else 0.0))
            for mem_id, score in fused
        ]
        fused = sorted(rescored, key=lambda item: -item[1])
    return HybridParts(fused[:limit], semantic, bm25)


# --------------------------------------------------------------------------- CLI output


def format_search_json(results: Sequence[tuple[str, str, float, str]]) -> str:
    """The ``--json`` search output for (id, content, similarity, created_at) rows.

    serde_json's pretty printer: two-space indent, ``": "`` separators, non-ASCII kept.
    """
    payload = {
        "results": [
            {"id": i, "content": c, "similarity": float(s), "created_at": t}
            for i, c, s, t in results
        ]
    }
    return json.dumps(payload, indent=2, ensure_ascii=False)


_RESULT_KEYS = frozenset({"id", "content", "similarity", "created_at"})


def parse_search_json(stdout: str | bytes) -> list[str]:
    """Ids, best first, from ``vipune --json search`` output; anything else -> VipuneOutputError.

    The documented shape is ``{"results": [{"id", "content", "similarity", "created_at"}...]}``.
    vipune's JSON error form ``{"error": "..."}`` raises with that message.
    """
    text = stdout.decode("utf-8", "replace") if isinstance(stdout, bytes) else stdout
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VipuneOutputError(
            f"vipune printed output that is not JSON ({exc.msg} at char {exc.pos}): "
            f"{one_line(text, 120)!r}; check the binary is vipune and supports --json"
        ) from None
    if isinstance(payload, dict) and set(payload) == {"error"}:
        raise VipuneOutputError(f"vipune reported an error: {one_line(payload['error'], 300)}")
    if not isinstance(payload, dict) or set(payload) != {"results"}:
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise VipuneOutputError(
            f"vipune --json search output must be an object with only 'results', got {keys}; "
            "check the vipune version (the harness reads v0.1.8 output)"
        )
    results = payload["results"]
    if not isinstance(results, list):
        raise VipuneOutputError(
            "vipune --json search output: 'results' is not a list; check the vipune version"
        )
    ids: list[str] = []
    for n, item in enumerate(results):
        if not isinstance(item, dict) or set(item) != _RESULT_KEYS:
            got = sorted(item) if isinstance(item, dict) else type(item).__name__
            raise VipuneOutputError(
                f"vipune --json search result {n} must have exactly id, content, similarity, "
                f"created_at, got {got}; check the vipune version"
            )
        sim = item["similarity"]
        if (
            not isinstance(item["id"], str)
            or not isinstance(item["content"], str)
            or not isinstance(item["created_at"], str)
            or isinstance(sim, bool)
            or not isinstance(sim, (int, float))
        ):
            raise VipuneOutputError(
                f"vipune --json search result {n} has a field of the wrong type "
                "(id/content/created_at must be strings, similarity a number)"
            )
        ids.append(item["id"])
    return ids
