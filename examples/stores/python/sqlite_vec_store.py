"""A sqlite-vec store: a ``vec0`` virtual table with cosine distance, one SQLite file per
persona in its work folder (kept across runs: the same history is never ingested twice).

Python's own ``sqlite3`` may not load extensions; ``pysqlite3`` (``pysqlite3-binary``) can.
Measured as: ``--retrieval-eval-retriever sqlite_vec_store:SqliteVecCosine``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlite_vec

try:
    from pysqlite3 import dbapi2 as sqlite3
except ImportError:  # a Python whose sqlite3 loads extensions
    import sqlite3  # type: ignore[no-redef]

from pytest_retrieval_eval.retrievers import Persona, Query

SCHEMA = ("CREATE VIRTUAL TABLE memories USING vec0("
          "embedding float[{dim}] distance_metric=cosine, +session_id text)")


def _connect(path: str) -> Any:
    conn = sqlite3.connect(path)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    return conn


class SqliteVecCosine:
    name = "sqlite-vec"

    def __init__(self) -> None:
        self._conns: dict[str, Any] = {}

    def index(self, persona: Persona) -> None:
        workdir = persona.workdir
        path = str(workdir / "memories.sqlite") if workdir is not None else ":memory:"
        if workdir is not None and (workdir / "memories.sqlite").exists():
            self._conns[persona.key] = _connect(path)
            return
        partial = path + ".partial" if workdir is not None else path
        if workdir is not None:
            Path(partial).unlink(missing_ok=True)
        conn = _connect(partial)
        conn.execute(SCHEMA.format(dim=persona.vectors.shape[1]))
        conn.executemany(
            "INSERT INTO memories(rowid, embedding, session_id) VALUES (?, ?, ?)",
            [(row + 1, json.dumps([float(x) for x in vector]), session_id)
             for row, (session_id, vector) in enumerate(zip(persona.session_ids,
                                                            persona.vectors, strict=True))])
        conn.commit()
        if workdir is not None:  # committed whole, then renamed: never half an ingest
            conn.close()
            Path(partial).replace(path)
            conn = _connect(path)
        self._conns[persona.key] = conn

    def rank(self, persona: Persona, query: Query, limit: int) -> list[tuple[str, float]]:
        rows = self._conns[persona.key].execute(
            "SELECT session_id, distance FROM memories WHERE embedding MATCH ? AND k = ? "
            "ORDER BY distance",
            (json.dumps([float(x) for x in query.vector]), min(limit, len(persona.session_ids))),
        ).fetchall()
        return [(str(session_id), 1.0 - float(distance)) for session_id, distance in rows]

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
