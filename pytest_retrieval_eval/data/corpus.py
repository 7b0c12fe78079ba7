"""The compact prep output: a dataset streamed once into one SQLite file.

``load_corpus`` hashes the dataset file and looks for ``<cache_dir>/corpus/<sha256>.sqlite``.
A complete file (a ``meta`` row ``complete=1`` with the current format version and the same
sha256, a file size matching its SQLite header, and the whole file matching the sha256 in its
``<sha256>.sqlite.sha256`` sidecar, written after it) is opened read-only; anything else
(truncated, a flipped byte, no sidecar) is rebuilt, never trusted. Building streams the
JSON once (:func:`dataset.iter_instances` -> :func:`pairs.parse_instance`) into a temp file
in the same directory and renames it into place under a :class:`filelock.FileLock`, so
concurrent builders (xdist workers, two terminals) build it once: the others wait and open the
result; the builder first deletes temp files that a killed build left. :func:`open_corpus`
opens a built file by path (xdist workers attach that way) and never rebuilds.

Tables:

* ``texts(key TEXT PRIMARY KEY, text TEXT)``: every unique session content and question text,
  keyed by :func:`pairs.text_key`. Sessions shared by several personas are stored once; the
  primary key does the dedup (``INSERT OR IGNORE`` in batches), so no Python set of texts is
  kept and peak memory stays at about one instance.
* ``pairs``: one row per parsed instance (abstention included), the :class:`PairRecord`
  fields, tuples and notes as JSON text.
* ``rejections(idx, question_id, reason)``.
* ``meta(key, value)``: ``format_version``, ``dataset_name``, ``dataset_sha256``, ``stats``
  (JSON), ``complete``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from ..errors import CacheError, DataError, write_fault
from ..io.checksums import (
    MEMO_DIR,
    commit_file,
    known_sha256,
    matches_sidecar,
    remove_partials,
    sidecar_path,
    temp_path,
)
from .dataset import DatasetSource, file_sha256, iter_instances, sample_digest
from .pairs import (
    GOLD_FROM_HAS_ANSWER,
    Instance,
    PairFacts,
    Rejection,
    text_key,
)
from .protocol import View, parse_for_view

__all__ = [
    "FORMAT_VERSION",
    "Corpus",
    "PairRecord",
    "Progress",
    "corpus_path",
    "load_corpus",
    "open_corpus",
]

Progress = Callable[[str, int, "int | None"], None]
"""(label, done, total): how the plugin and the CLI report progress."""

#: Bumped whenever the file layout or the parsing rules change: older files are rebuilt.
#: 5: an empty session id is rejected; 4: an instance repeating a JSON key is rejected;
#: 3: undated sessions counted; 2: a repeated question_id is rejected; the .sha256 sidecar.
FORMAT_VERSION = 5
_TEXT_BATCH_ROWS = 2000
_TEXT_BATCH_BYTES = 32 << 20
_SELECT_CHUNK = 500

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE texts (key TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE pairs (
    idx INTEGER PRIMARY KEY,
    question_id TEXT NOT NULL,
    question_type TEXT NOT NULL,
    question TEXT NOT NULL,
    question_date TEXT NOT NULL,
    gold TEXT NOT NULL,
    gold_source TEXT NOT NULL,
    abstention INTEGER NOT NULL,
    session_ids TEXT NOT NULL,
    text_keys TEXT NOT NULL,
    created_at TEXT NOT NULL,
    notes TEXT NOT NULL
);
CREATE TABLE rejections (idx INTEGER PRIMARY KEY, question_id TEXT, reason TEXT NOT NULL);
"""

_PAIR_COLUMNS = (
    "idx, question_id, question_type, question, question_date, gold, gold_source, abstention, "
    "session_ids, text_keys, created_at, notes"
)

#: The stats keys, in report order.
STAT_KEYS: tuple[str, ...] = (
    "instances",
    "rejected",
    "abstention",
    "usable",
    "slots",
    "rows",
    "unique_session_texts",
    "unique_texts",
    "repeated_session_ids",
    "conflicting_repeats",
    "histories_with_repeats",
    "gold_ids",
    "gold_not_in_haystack",
    "oversize_sessions",
    "empty_sessions",
    "undated_sessions",
    "gold_from_has_answer",
)
#: Per-pair session counts (``Instance.notes``) that the stats sum over the dataset.
_SUMMED_NOTES = ("repeated_session_ids", "conflicting_repeats", "oversize_sessions",
                 "empty_sessions", "undated_sessions")


@dataclass(frozen=True, kw_only=True)
class PairRecord(PairFacts):
    """What every later phase needs of one parsed instance; texts live in the corpus file."""

    session_ids: tuple[str, ...]
    text_keys: tuple[str, ...]
    created_at: tuple[str, ...]

    @property
    def question_key(self) -> str:
        """Content address of the question text."""
        return text_key(self.question)



def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _record_from_row(row: Sequence[Any]) -> PairRecord:
    return PairRecord(
        index=int(row[0]),
        question_id=str(row[1]),
        question_type=str(row[2]),
        question=str(row[3]),
        question_date=str(row[4]),
        gold=tuple(json.loads(row[5])),
        gold_source=str(row[6]),
        abstention=bool(row[7]),
        session_ids=tuple(json.loads(row[8])),
        text_keys=tuple(json.loads(row[9])),
        created_at=tuple(json.loads(row[10])),
        notes={str(k): int(v) for k, v in json.loads(row[11]).items()},
    )


#: The meta rows the records digest covers (everything but the digest and the completion mark).
_DIGESTED_META = ("format_version", "dataset_name", "dataset_sha256", "dataset_sample", "stats")


def _records_digest(meta: Mapping[str, str], pair_rows: Sequence[Sequence[Any]],
                    rejection_rows: Sequence[Sequence[Any]]) -> str:
    """sha256 over the meta, pairs and rejections rows: what every process loads eagerly,
    checked at every load (the texts are checked against their keys as they are read)."""
    digest = hashlib.sha256()
    digest.update(_dumps([[k, meta.get(k)] for k in _DIGESTED_META]).encode("utf-8"))
    for row in pair_rows:
        digest.update(_dumps(list(row)).encode("utf-8"))
    digest.update(b"rejections")
    for row in rejection_rows:
        digest.update(_dumps(list(row)).encode("utf-8"))
    return digest.hexdigest()


def _connect_ro(path: Path) -> sqlite3.Connection:
    # immutable=1: the file is never modified in place (rebuilds rename a new file over it).
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def _header_size_ok(path: Path) -> bool:
    """True when the file is at least as long as its SQLite header says (not truncated)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError:
        return False
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return False
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    return pages > 0 and size >= pages * page_size


class Corpus:
    """A built corpus file, opened read-only.

    ``pairs`` and ``rejections`` are loaded eagerly (small); texts are read on demand through
    one connection per process (opened lazily, reopened after a fork; pickling keeps only the
    path, so a worker that unpickles a Corpus opens its own connection).
    """

    path: Path
    dataset_name: str
    dataset_sha256: str
    dataset_sample: str
    pairs: list[PairRecord]
    rejections: list[Rejection]
    stats: Mapping[str, int]

    def __init__(self, path: Path, dataset_name: str | None = None) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._lock = threading.Lock()
        self._load(dataset_name)

    def _load(self, dataset_name: str | None) -> None:
        conn = self._connection()
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        rows = conn.execute(f"SELECT {_PAIR_COLUMNS} FROM pairs ORDER BY idx").fetchall()
        rejections = conn.execute(
            "SELECT idx, question_id, reason FROM rejections ORDER BY idx").fetchall()
        if meta.get("records_sha256") != _records_digest(meta, rows, rejections):
            raise CacheError(
                f"corpus file {self.path}: its pairs no longer match the digest written with "
                f"them (the file changed on disk); delete it and run again to rebuild it"
            )
        self.dataset_name = dataset_name if dataset_name is not None else str(meta["dataset_name"])
        self.dataset_sha256 = str(meta["dataset_sha256"])
        self.dataset_sample = str(meta["dataset_sample"])
        self.stats = {str(k): int(v) for k, v in json.loads(meta["stats"]).items()}
        self.pairs = [_record_from_row(row) for row in rows]
        self.rejections = [Rejection(int(i), q, str(r)) for i, q, r in rejections]

    def _connection(self) -> sqlite3.Connection:
        pid = os.getpid()
        if self._conn is None or self._pid != pid:
            self._conn = _connect_ro(self.path)
            self._pid = pid
        return self._conn

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_conn"] = None
        state["_pid"] = -1
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close this process's connection (reopened on the next read)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _query(self, sql: str, params: Sequence[str] = ()) -> list[Any]:
        try:
            with self._lock:
                return self._connection().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise CacheError(
                f"corpus file {self.path} cannot be read ({exc}); delete it and run again to "
                f"rebuild it"
            ) from None

    def texts(self, keys: Sequence[str]) -> list[str]:
        """The texts for ``keys``, in order (duplicates allowed); CacheError if one is missing."""
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _SELECT_CHUNK):
            chunk = unique[start : start + _SELECT_CHUNK]
            marks = ",".join("?" * len(chunk))
            found.update(self._query(f"SELECT key, text FROM texts WHERE key IN ({marks})", chunk))
        try:
            texts = [found[key] for key in keys]
        except KeyError as exc:
            raise CacheError(
                f"corpus file {self.path} has no text with key {exc.args[0]}; delete it and run "
                f"again to rebuild it"
            ) from None
        for key, text in found.items():  # a text's key is its sha256: checked at every read
            if text_key(text) != key:
                raise CacheError(
                    f"corpus file {self.path}: the text stored under key {key[:16]}… does not "
                    f"hash to that key (the file changed on disk); delete it and run again "
                    f"to rebuild it"
                )
        return texts

    def all_text_keys(self) -> list[str]:
        """Every stored text key (session contents and questions), unique, sorted."""
        return [str(row[0]) for row in self._query("SELECT key FROM texts ORDER BY key")]

    def __repr__(self) -> str:
        return (
            f"Corpus({self.dataset_name!r}, {len(self.pairs)} pairs, "
            f"{len(self.rejections)} rejections, path={str(self.path)!r})"
        )


def _open_if_complete(
    path: Path, name: str | None, sha256: str | None, *, verify: bool = True
) -> Corpus | None:
    """Open ``path`` if it is a complete corpus (of this dataset, when ``sha256`` is given);
    None if it is absent, incomplete, from another format version or damaged. ``verify``
    also checks the whole file against its ``.sha256`` sidecar (a truncated or altered file
    is rebuilt, never trusted)."""
    if not path.is_file() or not _header_size_ok(path):
        return None
    if verify and not matches_sidecar(path):
        return None
    conn: sqlite3.Connection | None = None
    try:
        conn = _connect_ro(path)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if (
            meta.get("complete") != "1"
            or meta.get("format_version") != str(FORMAT_VERSION)
            or (sha256 is not None and meta.get("dataset_sha256") != sha256)
        ):
            return None
        conn.close()
        conn = None
        return Corpus(path, name)
    except (sqlite3.Error, KeyError, ValueError, TypeError, CacheError):
        return None
    finally:
        if conn is not None:
            conn.close()


def open_corpus(path: Path, dataset_name: str | None = None) -> Corpus:
    """Open a corpus file that :func:`load_corpus` built (how xdist workers attach).

    The dataset name defaults to the one recorded at build time. Raises :class:`CacheError`
    (one line) when the file is missing, incomplete or damaged; it is never rebuilt here. The
    whole-file checksum is not recomputed here: the controller checked it moments before.
    """
    corpus = _open_if_complete(Path(path), dataset_name, None, verify=False)
    if corpus is None:
        raise CacheError(
            f"corpus file {path} is missing, incomplete or damaged; run again without it "
            f"(or delete it) so the controller rebuilds it from the dataset"
        )
    return corpus


class _Builder:
    """Streams instances into a new corpus file."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.batch: list[tuple[str, str]] = []
        self.batch_bytes = 0
        self.stats = dict.fromkeys(STAT_KEYS, 0)
        self.first_index: dict[str, int] = {}  # question_id -> index of its first instance

    def add_text(self, key: str, text: str) -> None:
        self.batch.append((key, text))
        self.batch_bytes += len(text)
        if len(self.batch) >= _TEXT_BATCH_ROWS or self.batch_bytes >= _TEXT_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            self.conn.executemany(
                "INSERT OR IGNORE INTO texts(key, text) VALUES (?, ?)", self.batch
            )
            self.batch = []
            self.batch_bytes = 0

    def add(self, parsed: Instance | Rejection) -> None:
        stats = self.stats
        stats["instances"] += 1
        if isinstance(parsed, Instance):
            first = self.first_index.setdefault(parsed.question_id, parsed.index)
            if first != parsed.index:  # items, reports and drift are keyed by question_id
                parsed = Rejection(
                    parsed.index, parsed.question_id,
                    f"repeated question_id {parsed.question_id!r} (first used by instance "
                    f"{first}); question ids must be unique",
                )
        if isinstance(parsed, Rejection):
            stats["rejected"] += 1
            self.conn.execute(
                "INSERT INTO rejections(idx, question_id, reason) VALUES (?, ?, ?)",
                (parsed.index, parsed.question_id, parsed.reason),
            )
            return
        keys = []
        for row in parsed.rows:
            key = text_key(row.content)
            keys.append(key)
            self.add_text(key, row.content)
        question_key = text_key(parsed.question)
        self.add_text(question_key, parsed.question)
        notes = parsed.notes
        stats["abstention" if parsed.abstention else "usable"] += 1
        stats["slots"] += parsed.slots
        stats["rows"] += len(parsed.rows)
        for name in _SUMMED_NOTES:
            stats[name] += notes.get(name, 0)
        stats["histories_with_repeats"] += 1 if notes.get("repeated_session_ids") else 0
        stats["gold_ids"] += len(parsed.gold)
        stats["gold_not_in_haystack"] += 1 if notes.get("gold_not_in_haystack") else 0
        stats["gold_from_has_answer"] += 1 if parsed.gold_source == GOLD_FROM_HAS_ANSWER else 0
        self.conn.execute(
            f"INSERT INTO pairs({_PAIR_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                parsed.index,
                parsed.question_id,
                parsed.question_type,
                parsed.question,
                parsed.question_date,
                _dumps(list(parsed.gold)),
                parsed.gold_source,
                int(parsed.abstention),
                _dumps([row.session_id for row in parsed.rows]),
                _dumps(keys),
                _dumps([row.created_at for row in parsed.rows]),
                _dumps(dict(notes)),
            ),
        )

    def finish(self, name: str, sha256: str, sample: str) -> None:
        self.flush()
        stats = self.stats
        (stats["unique_session_texts"],) = self.conn.execute(
            "SELECT count(DISTINCT j.value) FROM pairs, json_each(pairs.text_keys) AS j"
        ).fetchone()
        (stats["unique_texts"],) = self.conn.execute("SELECT count(*) FROM texts").fetchone()
        meta = {
            "format_version": str(FORMAT_VERSION),
            "dataset_name": name,
            "dataset_sha256": sha256,
            "dataset_sample": sample,
            "stats": _dumps(stats),
        }
        pair_rows = self.conn.execute(
            f"SELECT {_PAIR_COLUMNS} FROM pairs ORDER BY idx").fetchall()
        rejection_rows = self.conn.execute(
            "SELECT idx, question_id, reason FROM rejections ORDER BY idx").fetchall()
        meta["records_sha256"] = _records_digest(meta, pair_rows, rejection_rows)
        meta["complete"] = "1"
        self.conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", list(meta.items()))


def _instances(source: DatasetSource, view: View) -> Iterator[Instance | Rejection]:
    for index, raw in iter_instances(source.path):
        yield parse_for_view(index, raw, view)


def _build(source: DatasetSource, sha256: str, sample: str, target: Path,
           progress: Progress | None, view: View) -> None:
    tmp = temp_path(target)
    side_tmp = sidecar_path(tmp)
    label = f"ingest {source.name}"
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA cache_size=-65536")  # 64 MiB page cache
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.executescript(_SCHEMA)
            conn.execute("BEGIN")
            builder = _Builder(conn)
            if progress is not None:
                progress(label, 0, None)
            done = 0
            for done, parsed in enumerate(_instances(source, view), start=1):
                builder.add(parsed)
                if progress is not None:
                    progress(label, done, None)
            if progress is not None:
                progress(label, done, done)  # the end of the step, with its count
            if builder.stats["instances"] == 0:
                raise DataError(
                    f"dataset file {source.path} holds no instances (an empty array); pass a "
                    f"LongMemEval file"
                )
            builder.finish(source.name, sha256, sample)
            conn.execute("COMMIT")
        finally:
            conn.close()
        commit_file(tmp, target)  # the sidecar is the commit mark readers check
    finally:
        for leftover in (tmp, side_tmp):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)


def corpus_path(cache_dir: Path, sha256: str, view: View | None = None) -> Path:
    """Where the corpus of the dataset with this sha256 lives under ``cache_dir``; a view other
    than the default (:mod:`.protocol`) has its own file, ``<sha256>.<view>.sqlite``."""
    suffix = "" if view is None or view.is_default else f".{view.name}"
    return Path(cache_dir) / "corpus" / f"{sha256}{suffix}.sqlite"


def load_corpus(source: DatasetSource, cache_dir: Path, progress: Progress | None = None,
                view: View | None = None) -> Corpus:
    """Open the corpus of ``source`` under ``cache_dir``, building it first if needed.

    The dataset is streamed once, ever, per content hash; later calls (and other processes)
    open the SQLite file. The dataset's sha256 is memoised under ``<cache_dir>/sha256/`` per
    file version (path, size, mtime, ctime, inode), so later runs do not read the file at all.
    Raises :class:`DataError` for an unusable dataset file and
    :class:`CacheError` when the cache directory cannot be written. ``view`` (a protocol and
    granularity, :mod:`.protocol`) chooses the memory rows and gold; default: vipune sessions.
    """
    view = view or View()
    memo_dir = Path(cache_dir) / MEMO_DIR  # hashed once per file version, ever
    hashing = None if progress is None else (
        lambda done, total: progress(f"sha256 {source.name}", done, total))
    sample = sample_digest(source.path)  # also refuses a FIFO or device before any read
    try:
        known = known_sha256(source.path, memo_dir)
    except OSError:
        known = None  # file_sha256 words the error
    if known is not None:
        corpus = _open_if_complete(corpus_path(cache_dir, known[0], view), source.name,
                                   known[0])
        if corpus is not None and corpus.dataset_sample == sample:
            return corpus
    # No corpus of the memo's sha256, or one of another file (a wrong memo): a build reads
    # the whole file anyway, so a digest only the on-disk memo vouches for is recomputed.
    sha256 = file_sha256(source.path, hashing, memo_dir=memo_dir,
                         fresh=known is not None and known[1])
    target = corpus_path(cache_dir, sha256, view)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{target}.lock")
        with lock:
            corpus = _open_if_complete(target, source.name, sha256)
            if corpus is not None and corpus.dataset_sample == sample:
                return corpus
            remove_partials(target)
            _build(source, sha256, sample, target, progress, view)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        raise CacheError(
            f"cache directory {cache_dir} cannot be written ({exc.strerror or exc}{where}); "
            f"make it writable or choose another (--retrieval-eval-cache DIR, "
            f"RETRIEVAL_EVAL_CACHE_DIR, or prep --cache DIR)"
        ) from None
    except sqlite3.Error as exc:
        raise CacheError(
            f"corpus file {target} could not be built ({exc}); "
            f"{write_fault(exc, target.parent)}, and run again"
        ) from None
    corpus = _open_if_complete(target, source.name, sha256, verify=False)
    if corpus is None:
        raise CacheError(
            f"corpus file {target} is unreadable right after it was built; "
            f"check the disk and run again"
        )
    return corpus
