"""vipune's keyword search: ``escape_fts_query`` and ``Database::search_bm25``'s FTS5
statement, run on SQLite itself (``src/sqlite/fts.rs``).
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .limits import WHITE_SPACE, SearchResult, VipuneInputError, rust_trim, validate_limit
from .schema import FTS_SQL, Connectable, _Conn

__all__ = ["FTS_MODES", "FTS_TOKENIZE", "MAX_MATCH_WORDS", "NUL_QUERY_MESSAGE", "FtsMatch",
           "FtsTokenizer", "escape_fts_query", "fts_matched", "fts_search", "fts_tied_past",
           "fts_tokens", "fts_words"]

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
    return (" " if mode == "and" else " OR ").join(_quoted(word) for word in fts_words(query))


def fts_words(query: str) -> list[str]:
    """The words :func:`escape_fts_query` quotes, in order, repeats kept (split on Rust's
    white space, as vipune's ``split_whitespace``)."""
    return [word for word in query.translate(_WS_TO_SPACE).split(" ") if word]


def _quoted(word: str) -> str:
    """One word as vipune's FTS5 query holds it: ``\\`` and ``"`` doubled, quoted."""
    return '"' + word.replace("\\", "\\\\").replace('"', '""') + '"'


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


#: The tokenizer of vipune's ``memories_fts`` table (:data:`.schema.SCHEMA_SQL`).
FTS_TOKENIZE = "porter unicode61"
#: :func:`fts_matched` asks about at most this many distinct words of a question (one small
#: query each): a question of thousands of words costs no more.
MAX_MATCH_WORDS = 64


def fts_tokens(words: Sequence[str]) -> list[list[str]]:
    """Each word's tokens as vipune's FTS5 table sees them (``tokenize='porter unicode61'``),
    asked of SQLite itself: the words written to an in-memory FTS5 table with that tokenizer
    and read back through its ``fts5vocab`` instance table. [] for a word FTS5 keeps no token
    of (``"?"``: alone it matches no row, beside other words it is ignored). Not vipune's:
    for ``retrieval-eval explain``."""
    return [list(t) for t in _tokens(tuple(words))]


@lru_cache(maxsize=512)
def _tokens(words: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """:func:`fts_tokens`, kept per question (every retriever of a run asks the same)."""
    db = _tokenizer_db()
    try:
        return _tokenize(db, words)
    finally:
        db.close()


def _tokenizer_db() -> sqlite3.Connection:
    """An in-memory FTS5 table with vipune's tokenizer, and its ``fts5vocab`` instance table.
    Contentless (``content=''``): only the index is kept, which ``delete-all`` empties at
    once, where a content table's DELETE reads and tokenizes each row again (a third of the
    cost; the same tokens: the index is what both tables read back)."""
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute(f"CREATE VIRTUAL TABLE q USING fts5(c, tokenize='{FTS_TOKENIZE}', content='')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(q, 'instance')")
    return db


def _tokenize(db: sqlite3.Connection, words: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Each word written as its own row of ``db``'s (empty) table, its tokens read back in
    order; the table is left empty."""
    db.executemany("INSERT INTO q(rowid, c) VALUES (?, ?)",
                   [(i, w.replace("\x00", " ")) for i, w in enumerate(words, start=1)])
    try:
        out: list[list[str]] = [[] for _ in words]
        for rowid, term in db.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
            out[int(rowid) - 1].append(str(term))
        return tuple(tuple(t) for t in out)
    finally:
        db.execute("INSERT INTO q(q) VALUES ('delete-all')")


class FtsTokenizer:
    """:func:`fts_tokens` for one owner (a retriever): the in-memory FTS5 table made once and
    kept (making it is most of a call's cost), each question's answer kept for the last
    ``keep`` questions. The same tokens as :func:`fts_tokens`; :meth:`close` ends the table.
    Not vipune's: for ``retrieval-eval explain``."""

    def __init__(self, keep: int = 64) -> None:
        self._db: sqlite3.Connection | None = None
        self._keep = keep
        self._memo: OrderedDict[tuple[str, ...], tuple[tuple[str, ...], ...]] = OrderedDict()

    def tokens(self, words: Sequence[str]) -> list[list[str]]:
        key = tuple(words)
        got = self._memo.get(key)
        if got is None:
            if self._db is None:
                self._db = _tokenizer_db()
            got = self._memo[key] = _tokenize(self._db, key)
            while len(self._memo) > self._keep:
                self._memo.popitem(last=False)
        else:
            self._memo.move_to_end(key)
        return [list(t) for t in got]

    def close(self) -> None:
        self._memo.clear()
        if self._db is not None:
            db, self._db = self._db, None
            db.close()


@dataclass(frozen=True)
class FtsMatch:
    """Which query words matched which rows (:func:`fts_matched`)."""

    words: list[str]  # the distinct words asked about, in the question's order
    tokens: list[list[str]]  # each word's FTS5 tokens ([]: FTS5 ignores the word)
    matched: dict[str, list[str]] = field(default_factory=dict)  # id -> its matched words
    total: int = 0  # the question's distinct words (more than ``words`` when cut)


def fts_matched(conn: Connectable, query: str, project_id: str, ids: Sequence[str], *,
                max_words: int = MAX_MATCH_WORDS, matched_all: Collection[str] = (),
                tokenizer: FtsTokenizer | None = None) -> FtsMatch:
    """For each of ``ids``, the words of ``query`` (trimmed as vipune does) whose quoted
    FTS5 phrase, exactly as vipune's query holds it, matches that row: SQLite's FTS5 asked
    each distinct word's own ``MATCH '"word"'``, in ONE statement per call that joins the
    words' hits to the rows of those ids in the project and gives each row's matched words
    (only those rows' hits reach Python). A row of vipune's AND query matched every word
    with a token; one of the OR what-if, any. ``matched_all``: ids the caller knows matched
    every such word (the rows of vipune's AND list: FTS5 ANDs the same phrases), answered
    without asking. At most ``max_words`` distinct words are asked about; a word holding a
    NUL (which vipune's search refuses) never matches. ``tokenizer``: the caller's kept
    :class:`FtsTokenizer` (default: :func:`fts_tokens`). Not vipune's: for
    ``retrieval-eval explain``."""
    distinct = list(dict.fromkeys(fts_words(rust_trim(query))))
    words = distinct[:max_words]
    tokens = fts_tokens(words) if tokenizer is None else tokenizer.tokens(words)
    asked = [n for n, (w, t) in enumerate(zip(words, tokens, strict=True))
             if t and "\x00" not in w]
    wanted = list(dict.fromkeys(ids))
    known = set(matched_all)
    matched: dict[str, list[int]] = {i: list(asked) for i in wanted if i in known}
    ask = [i for i in wanted if i not in known]
    if ask and asked:
        with _Conn(conn) as db:
            for start in range(0, len(ask), 500):  # under any SQLite variable limit
                chunk = ask[start:start + 500]
                for mem_id, hit in db.execute(_matched_sql(len(asked), len(chunk)),
                                              (project_id, *chunk,
                                               *(_quoted(words[n]) for n in asked))):
                    matched[str(mem_id)] = sorted(asked[int(x)] for x in str(hit).split(","))
    return FtsMatch(words, tokens,
                    {i: [words[n] for n in matched[i]] for i in wanted if matched.get(i)},
                    len(distinct))


@lru_cache(maxsize=256)
def _matched_sql(n_words: int, n_ids: int) -> str:
    """:func:`fts_matched`'s statement: each word's own MATCH (its doclist read whole, in C:
    a rowid filter inside FTS5 costs a seek per row and word), joined to the rows asked
    about, the positions of the words each row matched gathered per row."""
    hits = " UNION ALL ".join(
        f"SELECT {n} AS n, rowid AS r FROM memories_fts WHERE memories_fts MATCH ?"
        for n in range(n_words))
    return ("WITH shown(r, id) AS (SELECT rowid, id FROM memories WHERE project_id = ? AND "
            f"id IN ({', '.join('?' * n_ids)})) SELECT shown.id, group_concat(hits.n) "
            f"FROM ({hits}) AS hits JOIN shown ON shown.r = hits.r GROUP BY shown.id")
