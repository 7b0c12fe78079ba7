"""Per-persona SQLite stores with vipune's schema, content-addressed and reused.

Each persona (one question's history) gets its own SQLite file built with vipune's exact DDL
(:data:`vipune.SCHEMA_SQL`), so the real ``vipune`` binary opens and searches it unchanged, and
the reference FTS5 search runs on the very same index. One store per persona matters: FTS5's
``bm25()`` takes its statistics from the whole table.

- :func:`build_store` writes one store atomically: a temporary file next to the target, one
  transaction, then ``os.replace``. A killed build leaves only a ``*.tmp-<host>-<pid>-<n>``
  file that nothing trusts (and :meth:`StoreCache.remove_stale_partials` deletes once that
  process is gone).
- :class:`StoreCache` keeps stores at ``<root>/<key[:2]>/<key>.sqlite`` and reuses a file when
  its header marks a complete harness store and its schema is vipune's. Two processes building
  the same key both end with a valid file (each replaces the target with a complete one).
- Build order: table, index and FTS5 table; the rows; one FTS5 ``'rebuild'``; the three
  triggers. The result is the schema (``sqlite_master`` row for row) and the FTS5 content
  that vipune's own inserts would give; only the b-tree page layout differs.
- No table is added (vipune must see its own schema only); the harness's marks are in the
  SQLite header, which vipune neither reads nor writes: ``PRAGMA user_version`` (a complete
  store of this format and kind) and ``PRAGMA application_id`` (:func:`model_mark`: 32 bits
  of the sha256 of the vectors' model fingerprint). :meth:`StoreCache.get_or_build` checks
  the mark whenever it hands out a store: a store built from another model's vectors (copied
  over this persona's, sidecar and all) is moved aside to ``*.foreign`` with a
  :class:`StoreWarning` naming it, and rebuilt. Stores of format 1 (no mark) are never read:
  the format is part of the store key, so they are simply not addressed any more.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import vipune
from ..errors import CacheError, one_line, write_fault
from ..io.checksums import (
    SIDECAR_SUFFIX,
    VERIFIED_SUFFIX,
    check_committed,
    left_by_dead_builder,
    memoised_sha256,
    read_sidecar,
    sqlite_header,
    stamp_matches,
    write_sidecar,
    write_stamp,
)
from .store_build import (  # their home; named here too
    EMPTY_DATE_PLACEHOLDER,
    PROJECT_ID,
    REFERENCE_USER_VERSION,
    STORE_FORMAT,
    VIPUNE_USER_VERSION,
    StoreRow,
    build_store,
    model_mark,
    rows_from_arrays,
)

if TYPE_CHECKING:  # their home; named here too, loaded on first use (__getattr__)
    from .exports import export_name, export_store

__all__ = [
    "EMPTY_DATE_PLACEHOLDER",
    "PROJECT_ID",
    "REFERENCE_USER_VERSION",
    "STORE_FORMAT",
    "VERIFY_LEVELS",
    "VIPUNE_USER_VERSION",
    "StoreCache",
    "StoreRow",
    "StoreWarning",
    "build_store",
    "export_name",
    "export_store",
    "ids_note",
    "is_valid_store",
    "model_mark",
    "persona_key",
    "rows_from_arrays",
    "store_ids",
    "store_key",
    "store_model_mark",
    "store_user_version",
]


def __getattr__(name: str) -> Any:
    """``export_name`` and ``export_store`` from :mod:`.exports`, their home, loaded on first
    use: a run that exports no store never loads it."""
    if name in ("export_name", "export_store"):
        from . import exports

        return getattr(exports, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_KEY_RE = re.compile(r"^[0-9a-f]{16,128}$")
#: Suffix a store built from another model's vectors is renamed to (with its sidecar).
FOREIGN_SUFFIX = ".foreign"
#: ``--retrieval-eval-verify``: ``stamp`` trusts a store version verified before (its
#: ``.verified`` stamp: size, mtime, ctime, inode, SQLite's change counter, the ids checked);
#: ``full`` rehashes every store once per process (bit rot beneath the filesystem).
VERIFY_LEVELS = ("stamp", "full")


class StoreWarning(UserWarning):
    """A persona store was set aside and rebuilt (it held another model's vectors)."""


def _sha256_json(payload: object) -> str:
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def persona_key(
    session_ids: Sequence[str],
    text_keys: Sequence[str],
    created_at: Sequence[str],
    model_fingerprint: str = "",
) -> str:
    """Content address of a persona: sha256 over its ids, text keys and dates, in row order.

    With ``model_fingerprint`` (the vectors' model) the key also addresses the persona's store
    (the format and vipune DDL are folded in), so it can go straight to :class:`StoreCache`.
    """
    if not len(session_ids) == len(text_keys) == len(created_at):
        raise ValueError("session_ids, text_keys and created_at must have the same length")
    base = _sha256_json(["persona", list(session_ids), list(text_keys), list(created_at)])
    return store_key(base, model_fingerprint) if model_fingerprint else base


def store_key(persona: str, model_fingerprint: str, project_id: str = PROJECT_ID) -> str:
    """Content address of a persona's store: the persona, the vectors' model, the format.

    The vipune DDL is part of the address, so a schema change never reuses an old file.
    """
    ddl = hashlib.sha256(vipune.SCHEMA_SQL.encode("utf-8")).hexdigest()
    return _sha256_json(["store", STORE_FORMAT, ddl, project_id, persona, model_fingerprint])


def store_user_version(path: str | Path) -> int | None:
    """The store's ``PRAGMA user_version``, or None when the file is missing or not SQLite."""
    p = Path(path)
    if not p.is_file():
        return None
    try:
        conn = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            row = conn.execute("PRAGMA user_version").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None
    return int(row[0]) if row else None


def store_model_mark(path: str | Path) -> int | None:
    """The store's ``PRAGMA application_id`` (:func:`model_mark`), None when unreadable."""
    try:
        conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
        try:
            row = conn.execute("PRAGMA application_id").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return int(row[0]) if row else None


def store_ids(path: str | Path) -> tuple[str, ...] | None:
    """The store's memory ids in row order, or None when it cannot be read."""
    try:
        conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
        try:
            return tuple(str(row[0]) for row in
                         conn.execute("SELECT id FROM memories ORDER BY rowid"))
        finally:
            conn.close()
    except sqlite3.Error:
        return None


def _expected_master() -> list[tuple[str, str, str, str | None]]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(vipune.SCHEMA_SQL)
        return vipune.master_sql(conn)
    finally:
        conn.close()


_EXPECTED_MASTER: list[tuple[str, str, str, str | None]] | None = None


def is_valid_store(path: str | Path, *, reference_only: bool | None = None) -> bool:
    """True when ``path`` is a complete harness store with vipune's exact schema.

    ``reference_only``: None accepts both kinds; False demands a vipune (384-d) store; True a
    reference-only one.
    """
    return _valid(_header(path), reference_only)


def _header(path: str | Path) -> tuple[int | None, int | None, list[tuple[str, str, str,
                                                                          str | None]] | None]:
    """The store's ``user_version``, ``application_id`` and ``sqlite_master`` rows, read on
    ONE read-only connection (a warm run checks each persona's store once: one open, not
    three); None for what cannot be read (no file, not SQLite)."""
    p = Path(path)
    if not p.is_file():
        return None, None, None
    try:
        conn = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return None, None, None
    try:
        version = conn.execute("PRAGMA user_version").fetchone()
        mark = conn.execute("PRAGMA application_id").fetchone()
        master = vipune.master_sql(conn)
    except sqlite3.Error:
        return None, None, None
    finally:
        conn.close()
    return (int(version[0]) if version else None, int(mark[0]) if mark else None, master)


def _page_one_marks(path: Path) -> tuple[int, int] | None:
    """The store's ``user_version`` and ``application_id`` as page 1 holds them (header
    bytes 60..63 and 68..71, big-endian signed: sqlite.org/fileformat.html, 1.3), read without
    opening SQLite; None when ``path`` holds no SQLite header."""
    head = sqlite_header(path, 72)
    if head is None:
        return None
    return (int.from_bytes(head[60:64], "big", signed=True),
            int.from_bytes(head[68:72], "big", signed=True))


def _kinds(reference_only: bool | None) -> set[int]:
    """The user_versions a store of that kind may hold (None: either kind)."""
    return {
        None: {VIPUNE_USER_VERSION, REFERENCE_USER_VERSION},
        False: {VIPUNE_USER_VERSION},
        True: {REFERENCE_USER_VERSION},
    }[reference_only]


def _valid(header: tuple[int | None, int | None, object], reference_only: bool | None) -> bool:
    """:func:`is_valid_store` of a :func:`_header`: the kind's user_version, vipune's schema."""
    global _EXPECTED_MASTER
    if header[0] not in _kinds(reference_only):
        return False
    if _EXPECTED_MASTER is None:
        _EXPECTED_MASTER = _expected_master()
    return header[2] == _EXPECTED_MASTER


#: A character JSON writes escaped (``ensure_ascii=False``): a quote, a backslash, a control.
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def ids_note(session_ids: Sequence[str] | None) -> str:
    """What a store's stamp records of the ids it was found to hold, in order: their sha256
    ("" when none were checked). The JSON of ids that need no escape is joined at C speed
    (the same text: a turn store's ~9,400 ids checked each warm run, issue 44)."""
    if session_ids is None:
        return ""
    ids = list(session_ids)
    try:
        joined = '","'.join(ids)
    except TypeError:  # not all strings: json's own text
        return "ids:" + _sha256_json(ids)
    if _JSON_ESCAPED.search(joined) is None:
        text = f'["{joined}"]' if ids else "[]"
        return "ids:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return "ids:" + _sha256_json(ids)


def _write_checksum(path: Path, session_ids: Sequence[str] | None = None) -> None:
    """Commit a freshly built store: its sha256 in the sidecar beside it (temp file + rename),
    and this version stamped as verified (with the ids it was built with), so the next run
    need not hash it."""
    try:
        before = path.stat()
        digest = memoised_sha256(path)
    except OSError:  # pragma: no cover - replaced by a concurrent build and gone
        return
    write_sidecar(path, digest, sync=False)
    write_stamp(path, before, digest, ids_note(session_ids))


class StoreCache:
    """Content-addressed store files under ``root``: ``<root>/<key[:2]>/<key>.sqlite``.

    Each store has a ``<key>.sqlite.sha256`` sidecar written after it; a store is reused only
    when it is complete, has vipune's schema and matches that checksum (a truncated or altered
    file, or one without a sidecar, is rebuilt, never trusted).
    A store version once verified (hashed to its sidecar's value, holding the persona's ids)
    is stamped ``<key>.sqlite.verified`` (:func:`checksums.write_stamp`: size, mtime and ctime
    in ns, inode, device, SQLite's change counter, the ids' sha256). ``verify`` (the run's
    ``--retrieval-eval-verify``) says how much a later run trusts it: ``stamp`` (default)
    re-verifies only a store whose stamp differs, as git trusts its index (a warm run reads
    no store's bytes beyond page 1 and the pages its searches touch); ``full`` rehashes every
    store once per process, which also catches a byte changed beneath the filesystem.
    """

    def __init__(self, root: str | Path, verify: str = "stamp") -> None:
        if verify not in VERIFY_LEVELS:
            raise ValueError(f"verify {verify!r} is not one of {', '.join(VERIFY_LEVELS)}")
        self.root = Path(root)
        self.verify = verify

    def path_for(self, key: str) -> Path:
        """Where the store for ``key`` lives (lower-case hex keys only)."""
        if not _KEY_RE.match(key):
            raise ValueError(f"store key {key!r} must be 16-128 lower-case hex digits")
        return self.root / key[:2] / f"{key}.sqlite"

    def get_or_build(
        self,
        key: str,
        rows_fn: Callable[[], Iterable[StoreRow]],
        *,
        project_id: str = PROJECT_ID,
        reference_only: bool | None = None,
        session_ids: Sequence[str] | None = None,
        fingerprint: str | None = None,
    ) -> Path:
        """Return the store for ``key``, building it from ``rows_fn()`` unless a valid one exists.

        ``rows_fn`` is called only when a build is needed. Safe across threads and processes:
        builds go through a private temporary file and ``os.replace``. ``reference_only`` as in
        :func:`build_store` (None: any complete store is reused; a new one's kind follows the
        vectors' width).

        Re-verification: a store is reused only when it is complete with vipune's schema (page
        1) and its version is verified: under ``verify="stamp"`` its ``.verified`` stamp
        matches (same size, times, inode, change counter, and the same ``session_ids``
        checked); otherwise (``full``, or the stamp differs) when the whole file hashes to its
        sidecar's value now (once per process and file version) and, given ``session_ids``,
        it holds exactly those ids in that order (a store copied over another persona's,
        sidecar and all, is rebuilt); that version is then stamped. Given ``fingerprint`` (the
        vectors' model), a store whose :func:`model_mark` is another model's is moved aside
        (``*.foreign``) with a :class:`StoreWarning` line, then rebuilt; a new store records
        ``fingerprint``'s mark.
        """
        target = self.path_for(key)
        marks = self._stamped_marks(target, session_ids)
        if marks is not None and marks[0] in _kinds(reference_only) and (
                fingerprint is None or marks[1] == model_mark(fingerprint)):
            return target.resolve()
        header = _header(target)
        if _valid(header, reference_only) and self._verified(target, session_ids):
            if fingerprint is None or header[1] == model_mark(fingerprint):
                return target.resolve()
            self._set_aside(target, fingerprint)
        try:
            build_store(target, rows_fn(), project_id, reference_only=reference_only,
                        fingerprint=fingerprint or "")
            _write_checksum(target, session_ids)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(
                f"persona store {target} cannot be built ({type(exc).__name__}: "
                f"{one_line(exc)}); {write_fault(exc, self.root)}, or pass another "
                f"--retrieval-eval-cache"
            ) from None
        return target.resolve()

    def _stamped_marks(self, target: Path, session_ids: Sequence[str] | None
                       ) -> tuple[int, int] | None:
        """Under ``stamp``, a store version its stamp vouches for (with these ids): its
        user_version and application_id from page 1, with no SQLite connection (None: no
        such stamp, or ``full``). A stamp is written only for a version found complete with
        vipune's schema (built here, or hashed after :func:`_valid`), and the schema is part
        of the store's key, so the stamp's version needs no schema read (issue 35.1)."""
        if self.verify != "stamp":
            return None
        try:
            st = target.stat()
            expected = read_sidecar(target)
        except (OSError, ValueError):
            return None
        if not stamp_matches(target, st, expected, ids_note(session_ids)):
            return None
        return _page_one_marks(target)

    def _verified(self, target: Path, session_ids: Sequence[str] | None) -> bool:
        """The store's version is verified: by its stamp (``stamp``), else by a rehash and
        an ids check, which stamp it (a store that fails is left to the caller)."""
        wanted = None if session_ids is None else tuple(session_ids)
        return check_committed(
            target, self.verify, note=ids_note(session_ids), drop=False,
            accept=None if wanted is None else (lambda path: store_ids(path) == wanted))

    def _set_aside(self, target: Path, fingerprint: str) -> None:
        """Quarantine a store built from another model's vectors, and say so in one line."""
        import warnings

        found = store_model_mark(target)
        moved = target.with_name(target.name + FOREIGN_SUFFIX)
        for part in (target, *(target.with_name(target.name + s)
                               for s in (SIDECAR_SUFFIX, VERIFIED_SUFFIX))):
            with contextlib.suppress(FileNotFoundError):
                os.replace(part, part.with_name(part.name + FOREIGN_SUFFIX))
        warnings.warn(StoreWarning(
            f"persona store {target} holds vectors of another model (model mark "
            f"{(found or 0) & 0xFFFFFFFF:08x}), not of model {fingerprint[:12]} (mark "
            f"{model_mark(fingerprint) & 0xFFFFFFFF:08x}); moved aside to {moved.name} and "
            f"rebuilt from this model's vectors"), stacklevel=3)

    def remove_stale_partials(self, max_age_s: float = 3600.0) -> int:
        """Delete temporary files of killed builds; return how many.

        A temp name holds its builder's host and pid (``*.tmp-<host>-<pid>-<n>``): a file of
        this host whose builder is no longer alive goes at once; one of another host (a
        shared cache), or of an older name, once it is ``max_age_s`` old."""
        if not self.root.is_dir():
            return 0
        removed = 0
        cutoff = time.time() - max_age_s
        for tmp in [*self.root.glob("*/*.sqlite.tmp-*"), *self.root.glob("*/*.sha256.tmp-*")]:
            try:
                if left_by_dead_builder(tmp.name) or tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
                    removed += 1
            except FileNotFoundError:
                continue
        return removed
