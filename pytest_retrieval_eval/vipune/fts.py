"""vipune's keyword search: ``escape_fts_query`` and ``Database::search_bm25``'s FTS5
statement, run on SQLite itself (``src/sqlite/fts.rs``).
"""

from __future__ import annotations

from .limits import WHITE_SPACE, SearchResult, VipuneInputError, validate_limit
from .schema import FTS_SQL, Connectable, _Conn

__all__ = ["FTS_MODES", "NUL_QUERY_MESSAGE", "escape_fts_query", "fts_search", "fts_tied_past"]

#: What vipune 0.1.8 answers a keyword search whose query holds a NUL (U+0000).
#: ``escape_fts_query`` (src/sqlite/fts.rs, line 189) splits on Rust's ``split_whitespace``,
#: which does not count U+0000, so the NUL stays inside a quoted word; ``search_bm25``
#: (src/sqlite/fts.rs, line 124) binds the whole string, and FTS5's query parser stops at
#: the NUL inside the quotes: rusqlite's "unterminated string", which vipune's
#: ``Error::Sqlite`` displays as below (src/sqlite/mod.rs, line 66). ``search_hybrid``
#: passes the error on (src/memory/search.rs, line 141, ``?``), so vipune's fts and hybrid
#: searches fail on such a query and its semantic search does not. Through vipune's
#: command line the query cannot even be passed (an argument ends at a NUL). The store is
#: not at fault: rebuilding it changes nothing.
NUL_QUERY_MESSAGE = "Database error: unterminated string"

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
    A query holding a NUL fails as vipune's does (:data:`NUL_QUERY_MESSAGE`): a
    :class:`VipuneInputError` saying so, before any SQL.
    """
    validate_limit(limit)
    escaped = escape_fts_query(query, mode=mode)
    if not escaped:
        return []
    if "\x00" in escaped:
        raise VipuneInputError(
            NUL_QUERY_MESSAGE,
            "the question holds a NUL character (U+0000), which vipune's keyword search "
            "cannot take (and its command line cannot carry); remove it from the dataset's "
            "question (the store is fine)")
    with _Conn(conn) as db:
        rows = db.execute(FTS_SQL, (escaped, project_id, limit)).fetchall()
    return [(str(row[0]), float(row[1])) for row in rows]


def fts_tied_past(conn: Connectable, query: str, project_id: str,
                  returned: list[SearchResult], limit: int, *,
                  mode: str = "and") -> list[SearchResult]:
    """The rows :func:`fts_search` left out that score exactly as its last row did (a tie
    cut by ``limit``), best first; [] when it returned fewer than ``limit`` rows. Not
    vipune's: for what the report says of ties past the LIMIT (one more query, unlimited)."""
    if len(returned) < limit or not returned:
        return []
    escaped = escape_fts_query(query, mode=mode)
    last = returned[-1][1]
    seen = {mem_id for mem_id, _ in returned}
    with _Conn(conn) as db:
        rows = db.execute(FTS_SQL, (escaped, project_id, -1)).fetchall()
    return [(str(i), float(s)) for i, s in rows if float(s) == last and str(i) not in seen]
