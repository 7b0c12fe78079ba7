"""vipune's storage: the DDL of ``src/sqlite/mod.rs::create_schema`` byte for byte, the
statements its searches run, and the rows of one project as ``Database::search`` scans them.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .semantic import EMBEDDING_DIM, blob_to_vector

__all__ = [
    "DDL_STATEMENTS",
    "FTS_SQL",
    "INSERT_SQL",
    "SCHEMA_SQL",
    "SEMANTIC_SQL",
    "Connectable",
    "StoreConnection",
    "StoredRows",
    "load_rows",
    "master_sql",
]

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

#: ``Database::insert`` (ids are the harness's session ids instead of fresh UUIDs). vipune
#: writes ``?1``..``?7`` (rusqlite); here plain ``?`` in the same order binds the same values:
#: Python 3.12+ warns (DeprecationWarning) when numbered placeholders get a sequence.
INSERT_SQL = (
    "INSERT INTO memories (id, project_id, content, embedding, metadata, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
#: ``Database::search``: every row of the project, in the order SQLite yields them.
SEMANTIC_SQL = (
    "SELECT id, project_id, content, metadata, created_at, updated_at, embedding"
    " FROM memories WHERE project_id = ?"
)
#: ``Database::search_bm25``'s ranking statement (vipune also selects the other columns).
FTS_SQL = (
    "SELECT m.id, bm25(memories_fts) FROM memories_fts"
    " JOIN memories m ON m.rowid = memories_fts.rowid"
    " WHERE memories_fts MATCH ? AND m.project_id = ?"
    " ORDER BY bm25(memories_fts) LIMIT ?"
)


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


class StoreConnection:
    """One read-only connection to the store last asked for, kept while the file is the same
    one (path, device, inode, size, mtime in ns): the searches of a persona's items and the
    facts read after them share it, instead of each opening the file and parsing its schema
    again (a third of a small FTS5 search's time). A file replaced or written since is
    opened afresh; :meth:`close` ends the kept one. Not vipune's: the harness's reuse."""

    def __init__(self) -> None:
        self._key: tuple[str, int, int, int, int] | None = None
        self._conn: sqlite3.Connection | None = None

    def get(self, path: str | Path) -> Connectable:
        """The kept connection to ``path``'s store, opened read-only when it is another file
        (or the file changed); ``path`` itself when it cannot be stat'ed, so that opening it
        fails as a path's open would."""
        try:
            st = os.stat(path)
        except OSError:
            return path
        key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if self._conn is None or self._key != key:
            self.close()
            self._conn = _connect_ro(path)
            self._key = key
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn, self._key = self._conn, None, None
            conn.close()


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
