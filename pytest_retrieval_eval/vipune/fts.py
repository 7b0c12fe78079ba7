"""vipune's keyword search: ``escape_fts_query`` and ``Database::search_bm25``'s FTS5
statement, run on SQLite itself (``src/sqlite/fts.rs``).
"""

from __future__ import annotations

from .limits import WHITE_SPACE, SearchResult, validate_limit
from .schema import FTS_SQL, Connectable, _Conn

__all__ = ["FTS_MODES", "escape_fts_query", "fts_search"]

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
