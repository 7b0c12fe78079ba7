"""How a persona store is written: vipune's DDL, the rows in one transaction, the harness's
marks in the SQLite header, all through a temporary file and ``os.replace``
(:func:`build_store`); the store format's constants and :func:`model_mark`.
:mod:`.store` (the cache that addresses, reuses and checks stores) names all of it too.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import os
import re
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import overload

import numpy as np

from .. import vipune
from ..errors import CacheError, DataError
from ..io.checksums import owner_tag, share_as_umask

__all__ = [
    "EMPTY_DATE_PLACEHOLDER",
    "PROJECT_ID",
    "REFERENCE_USER_VERSION",
    "STORE_FORMAT",
    "VIPUNE_USER_VERSION",
    "StoreColumns",
    "StoreRow",
    "build_store",
    "model_mark",
    "rows_from_arrays",
]

#: The ``project_id`` of every row of a persona store (vipune's ``--project``).
PROJECT_ID = "longmemeval"
#: Bumped whenever the harness changes what it writes into a store (2: the model mark).
STORE_FORMAT = 2
#: ``PRAGMA user_version`` of a complete store vipune can search (384-d vectors).
VIPUNE_USER_VERSION = 0x52450000 + STORE_FORMAT
#: ``PRAGMA user_version`` of a complete store whose vectors are not vipune's 384-d: the
#: reference FTS/hybrid searches it, the vipune binary must not be pointed at it.
REFERENCE_USER_VERSION = 0x52450100 + STORE_FORMAT
#: ``created_at`` written for a session without a date (only recency > 0 would read it).
EMPTY_DATE_PLACEHOLDER = "1970-01-01T00:00:00+00:00"

#: SQLite's page size for a store without vectors built from columns (SQLite's default,
#: 4096, for any other).
NO_VECTORS_PAGE_SIZE = 16384
#: FTS5's in-memory hash while a store's index is built (its default: 1 MiB).
REBUILD_HASH_BYTES = 64 << 20

StoreRow = tuple[str, str, np.ndarray, str]
"""One memory row: (id = session id, content, vector, created_at RFC 3339 or "")."""

_tmp_counter = itertools.count()


def model_mark(fingerprint: str) -> int:
    """The ``PRAGMA application_id`` of a store whose vectors come from model ``fingerprint``:
    the first 32 bits of the fingerprint's sha256, as SQLite's signed 32-bit integer."""
    value = int.from_bytes(hashlib.sha256(fingerprint.encode("utf-8")).digest()[:4], "big")
    return value - (1 << 32) if value >= (1 << 31) else value


class StoreColumns(Sequence[StoreRow]):
    """A persona's rows as parallel columns (:func:`rows_from_arrays`): each row reads as its
    :data:`StoreRow`; :func:`build_store` checks and writes them a column at a time (a turn
    store's ~8,500 rows: no array made per row)."""

    def __init__(self, ids: Sequence[str], contents: Sequence[str], vectors: np.ndarray,
                 created_at: Sequence[str]) -> None:
        self.ids, self.contents, self.vectors, self.created_at = \
            ids, contents, vectors, created_at

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> StoreRow: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[StoreRow]: ...

    def __getitem__(self, index: int | slice) -> StoreRow | Sequence[StoreRow]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return (self.ids[index], self.contents[index], self.vectors[index],
                self.created_at[index])

    def records(self, reference_only: bool | None
                ) -> tuple[Iterable[tuple[str | bytes, ...]], bool] | None:
        """The records :func:`columns_insert`'s statement binds and the store's kind
        (reference-only or not) when every row passes :func:`build_store`'s checks, else
        None (the row-by-row path then names the first row that fails, as for any rows)."""
        ids, contents, mat = self.ids, self.contents, self.vectors
        if mat.ndim != 2 or mat.shape[0] != len(ids) or not len(ids):
            return None
        width = mat.shape[1]
        reference = width != vipune.EMBEDDING_DIM if reference_only is None else reference_only
        if not reference and width != vipune.EMBEDDING_DIM:
            return None
        # plain strings throughout (a subclass or anything else: the row-by-row checks),
        # each column's types read at C speed; no id empty
        ids, contents, created_at = list(ids), list(contents), list(self.created_at)
        if not {*map(type, ids), *map(type, contents), *map(type, created_at)} <= {str} or \
                not all(ids):
            return None
        if not all(map(_valid_date_or_empty, dict.fromkeys(created_at))):
            return None
        created = [value or EMPTY_DATE_PLACEHOLDER for value in created_at]
        # the insert's records made by zip as SQLite reads them (lengths checked by
        # rows_from_arrays): the values :func:`columns_insert` binds
        if width:
            floats = np.ascontiguousarray(mat, dtype="<f4")
            if not np.isfinite(floats).all():
                return None
            blobs = [row.tobytes() for row in floats]
            return zip(ids, contents, blobs, created, created, strict=True), reference
        return zip(ids, contents, created, created, strict=True), reference


def columns_insert(project_id: str, vectors: bool) -> str | None:
    """vipune's insert (:data:`.schema.INSERT_SQL`) with the columns every row of a store
    built from columns shares written as literals: the project, ``metadata`` NULL and, for a
    store without vectors, the empty ``embedding`` blob; binds id, content, [embedding,]
    created_at, updated_at. The rows it writes are the ones :data:`INSERT_SQL` writes from
    the same values (a test compares the files byte for byte); each value bound costs a
    turn store's insert ~8% (issue 44). None when the project cannot be a plain literal."""
    if not project_id.isprintable():
        return None
    literal = "'" + project_id.replace("'", "''") + "'"
    embedding = "?" if vectors else "X''"  # a zero-length blob, as b"" binds
    return ("INSERT INTO memories (id, project_id, content, embedding, metadata, created_at,"
            f" updated_at) VALUES (?, {literal}, ?, {embedding}, NULL, ?, ?)")


def rows_from_arrays(
    ids: Sequence[str],
    contents: Sequence[str],
    vectors: np.ndarray,
    created_at: Sequence[str],
) -> StoreColumns:
    """Parallel persona arrays as :data:`StoreRow` rows (lengths checked)."""
    mat = np.asarray(vectors)
    if not len(ids) == len(contents) == len(created_at) == mat.shape[0]:
        raise ValueError(
            f"{len(ids)} ids, {len(contents)} contents, {mat.shape[0]} vectors and "
            f"{len(created_at)} dates: one of each per row"
        )
    return StoreColumns(ids, contents, mat, created_at)


#: The form of nearly every date (whole seconds, an offset): ``datetime.fromisoformat`` (C)
#: accepting such a text means :func:`vipune.parse_rfc3339` does (a real date, an offset
#: under a day); any other text, or one it refuses, has the rule's own verdict.
_PLAIN_DATE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{2}:[0-9]{2}")


@functools.lru_cache(maxsize=65536)
def _valid_date(value: str) -> bool:
    """Whether ``value`` is RFC 3339 as vipune parses it (a persona's dates recur in the
    next persona's store: each is parsed once a process; a plain one at C speed, 30x
    faster: a persona's ~500 dates checked for each store built, issue 44)."""
    if _PLAIN_DATE.fullmatch(value):
        with contextlib.suppress(ValueError):
            datetime.fromisoformat(value)
            return True
    try:
        vipune.parse_rfc3339(value)
    except ValueError:
        return False
    return True


def _valid_date_or_empty(value: str) -> bool:
    return value == "" or _valid_date(value)


def _created_at(session_id: str, value: str) -> str:
    if value == "":
        return EMPTY_DATE_PLACEHOLDER
    if not isinstance(value, str) or not _valid_date(value):
        raise DataError(
            f"session {session_id!r}: created_at {value!r} is not RFC 3339; "
            "pass dates like 2023-05-30T23:40:00+00:00 (or '' when unknown)"
        )
    return value


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _rebuild_fts(conn: sqlite3.Connection) -> None:
    """FTS5's ``'rebuild'`` with its in-memory hash allowed :data:`REBUILD_HASH_BYTES`: a
    persona's index is written as one segment, not flushed a megabyte at a time and merged
    (a turn store's build ~6% faster, issue 44). The index holds the same entries (what
    bm25 and MATCH read), so searches are the same; the option is taken out of the store's
    config again, which then holds what vipune's own holds."""
    try:
        conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES('hashsize', ?)",
                     (REBUILD_HASH_BYTES,))
    except sqlite3.OperationalError:  # an SQLite without the option: its default
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES('rebuild')")
        return
    conn.execute("INSERT INTO memories_fts(memories_fts) VALUES('rebuild')")
    conn.execute("DELETE FROM memories_fts_config WHERE k = 'hashsize'")


def build_store(
    path: str | Path,
    rows: Iterable[StoreRow],
    project_id: str = PROJECT_ID,
    *,
    reference_only: bool | None = None,
    fingerprint: str = "",
) -> Path:
    """Write a vipune store at ``path`` atomically and return ``path``.

    Schema: vipune's DDL, statement for statement. Rows are inserted in order in one
    transaction through vipune's insert statement: ``embedding`` =
    little-endian float32 bytes, ``metadata`` NULL, ``updated_at`` = ``created_at``. Ids must be
    unique; vectors finite and all of one width.

    ``reference_only``: False demands vipune's 384-d vectors (a store the binary can search);
    True allows any width, zero included (a store only the reference FTS/hybrid searches,
    marked so the vipune binary is never pointed at it); None (default) decides from the first
    row's width (384 -> vipune store, anything else -> reference-only).
    ``fingerprint``: the vectors' model, recorded as :func:`model_mark` (``application_id``).

    (The FTS5 index is filled by one ``'rebuild'`` before the triggers are created, which
    indexes exactly what the insert trigger would; see the module docstring.)
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{owner_tag()}-{next(_tmp_counter)}")
    if tmp.exists():
        tmp.unlink()
    width: list[int] = []
    kind: list[bool] = [] if reference_only is None else [reference_only]

    def records() -> Iterable[tuple[str, str, str, bytes, None, str, str]]:
        for n, row in enumerate(rows):
            if len(row) != 4:
                raise ValueError(f"store row {n} must be (id, content, vector, created_at)")
            session_id, content, vector, created = row
            if not isinstance(session_id, str) or not session_id:
                raise DataError(f"store row {n}: the session id must be a non-empty string")
            if not isinstance(content, str):
                raise DataError(f"session {session_id!r}: content must be a string")
            vec = np.asarray(vector, dtype=np.float32)
            if vec.ndim != 1:
                raise CacheError(
                    f"session {session_id!r}: vector has shape {vec.shape}, expected one 1-d "
                    "vector; re-run prep"
                )
            if not kind:
                kind.append(vec.shape[0] != vipune.EMBEDDING_DIM)
            if not kind[0] and vec.shape[0] != vipune.EMBEDDING_DIM:
                raise CacheError(
                    f"session {session_id!r}: vector has {vec.shape[0]} values but vipune stores "
                    f"exactly {vipune.EMBEDDING_DIM}; use a 384-d model (BAAI/bge-small-en-v1.5)"
                    " for a vipune store"
                )
            if width and vec.shape[0] != width[0]:
                raise CacheError(
                    f"session {session_id!r}: vector has {vec.shape[0]} values, earlier rows "
                    f"{width[0]}; the vectors come from different models, re-run prep"
                )
            if not width:
                width.append(vec.shape[0])
            if vec.shape[0] and not np.isfinite(vec).all():
                raise CacheError(
                    f"session {session_id!r}: vector holds NaN or infinite values (vipune "
                    "would fail every search); clear the vector cache and re-run prep"
                )
            created_text = _created_at(session_id, created)  # each date parsed once
            blob = vipune.vector_to_blob(vec, dim=None) if vec.shape[0] else b""
            yield (session_id, project_id, content, blob, None, created_text, created_text)

    # columns that pass every check are written by the short insert; anything else (rows,
    # a flawed column, a project that is no plain literal) row by row, by vipune's insert
    insert, checked, no_vectors = vipune.INSERT_SQL, None, False
    if isinstance(rows, StoreColumns):
        empty = rows.vectors.shape[-1] == 0  # records() refuses any shape but 2-d
        short = columns_insert(project_id, not empty)
        checked = None if short is None else rows.records(reference_only)
        if short is not None and checked is not None:
            kind[:] = [checked[1]]
            insert, no_vectors = short, empty

    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        if no_vectors:
            # a store without vectors (a turn store: only FTS5 searches it) in 16 KiB pages:
            # its FTS5 index builds ~10% faster (a page size is no part of the schema)
            conn.execute(f"PRAGMA page_size = {NO_VECTORS_PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode = MEMORY")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        # Table, index and FTS5 table first; rows next; then one FTS5 'rebuild' (the index
        # the triggers would have built, about a third faster); the triggers last. The
        # schema ends identical to vipune's, sqlite_master order included.
        for statement in vipune.DDL_STATEMENTS[:3]:
            conn.execute(statement)
        try:
            conn.executemany(insert, records() if checked is None else checked[0])
        except sqlite3.IntegrityError as exc:
            raise DataError(
                f"store {target.name}: two rows share a session id ({exc}); "
                "dedupe the persona's session ids"
            ) from None
        _rebuild_fts(conn)
        for statement in vipune.DDL_STATEMENTS[3:]:
            conn.execute(statement)
        reference = kind[0] if kind else False
        user_version = REFERENCE_USER_VERSION if reference else VIPUNE_USER_VERSION
        conn.execute(f"PRAGMA user_version = {int(user_version)}")
        conn.execute(f"PRAGMA application_id = {model_mark(fingerprint)}")
        conn.execute("COMMIT")
        conn.close()
        _fsync(tmp)
        share_as_umask(tmp)  # SQLite creates 0644 whatever the umask
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        conn.close()
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return target
