"""A dataset streamed once, ever, into its corpus file (:mod:`.corpus`).

``load_corpus`` hashes the dataset file and looks for ``<cache_dir>/corpus/<sha256>.sqlite``.
A complete file is opened read-only; anything else (truncated, a flipped byte, no sidecar) is
rebuilt, never trusted. Building streams the JSON once (:func:`.json_stream.iter_instances`
-> :func:`.protocol.parse_for_view`) into a temp file in the same directory and renames it
into place under a :class:`filelock.FileLock`, so concurrent builders (xdist workers, two
terminals) build it once: the others wait and open the result; the builder first deletes
temp files that a killed build left.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

from filelock import FileLock

from ..errors import CacheError, DataError, write_fault
from ..io.checksums import (
    MEMO_DIR,
    commit_file,
    known_sha256,
    remove_partials,
    sidecar_path,
    temp_path,
)
from .corpus import (
    FORMAT_VERSION,
    PAIR_COLUMNS,
    SCHEMA_SQL,
    STAT_KEYS,
    Corpus,
    Progress,
    corpus_path,
    encode_turns,
    json_text,
    open_if_complete,
    records_digest,
)
from .dataset import DatasetSource, file_sha256, sample_digest
from .pairs import GOLD_FROM_HAS_ANSWER, Instance, Rejection, text_key
from .protocol import View, parse_for_view

__all__ = ["load_corpus", "no_usable_pair"]

_TEXT_BATCH_ROWS = 2000
_TEXT_BATCH_BYTES = 32 << 20
#: Per-pair session counts (``Instance.notes``) that the stats sum over the dataset.
_SUMMED_NOTES = ("repeated_session_ids", "conflicting_repeats", "oversize_sessions",
                 "empty_sessions", "undated_sessions")


class _Builder:
    """Streams instances into a new corpus file."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.batch: list[tuple[str, str]] = []
        self.turn_batch: list[tuple[str, str]] = []
        self.seen: set[str] = set()  # text keys already added
        self.batch_bytes = 0
        self.stats = dict.fromkeys(STAT_KEYS, 0)
        self.first_index: dict[str, int] = {}  # question_id -> index of its first instance

    def add_text(self, key: str, text: str,
                 turns: Sequence[tuple[str, str]] | None = None) -> None:
        if key in self.seen:  # the first row of a text is kept (as INSERT OR IGNORE would)
            return
        self.seen.add(key)  # LongMemEval's haystacks share most sessions: encoded once
        self.batch.append((key, text))
        if turns is not None:
            self.turn_batch.append((key, encode_turns(text, turns)))
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
        if self.turn_batch:
            self.conn.executemany(
                "INSERT OR IGNORE INTO turns(key, turns) VALUES (?, ?)", self.turn_batch)
            self.turn_batch = []

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
            self.add_text(key, row.content, row.turns)
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
            f"INSERT INTO pairs({PAIR_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                parsed.index,
                parsed.question_id,
                parsed.question_type,
                parsed.question,
                parsed.question_date,
                json_text(list(parsed.gold)),
                parsed.gold_source,
                int(parsed.abstention),
                json_text([row.session_id for row in parsed.rows]),
                json_text(keys),
                json_text([row.created_at for row in parsed.rows]),
                json_text(dict(notes)),
                json_text(list(parsed.gold_turns)),
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
            "stats": json_text(stats),
        }
        pair_rows = self.conn.execute(
            f"SELECT {PAIR_COLUMNS} FROM pairs ORDER BY idx").fetchall()
        rejection_rows = self.conn.execute(
            "SELECT idx, question_id, reason FROM rejections ORDER BY idx").fetchall()
        meta["records_sha256"] = records_digest(meta, pair_rows, rejection_rows)
        meta["complete"] = "1"
        self.conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", list(meta.items()))


def iter_instances(path: Path) -> Iterator[tuple[int, object]]:
    """:func:`.json_stream.iter_instances`, loaded when a corpus is built (a run whose corpus
    is in the cache never parses the dataset)."""
    from .json_stream import iter_instances as stream

    return stream(path)


def _instances(source: DatasetSource, view: View) -> Iterator[Instance | Rejection]:
    for index, raw in iter_instances(source.path):
        yield parse_for_view(index, raw, view)


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the streaming loop, as it was before.

    The parser builds about 9 million dicts and lists on full LongMemEval_M, each instance
    alive while it is checked, so the collector's generations fill and it traverses them
    again and again: about 2 s of a 30 s build (``benchmarks/run.py --against``, issue 35).
    The loop makes no reference cycles (a ``gc.collect()`` after a full-M build finds about
    ten objects), so its memory is freed by reference counts alone and its peak is the same.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
            conn.executescript(SCHEMA_SQL)
            conn.execute("BEGIN")
            builder = _Builder(conn)
            if progress is not None:
                progress(label, 0, None)
            done = 0
            with _cycle_collector_paused():
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


def load_corpus(source: DatasetSource, cache_dir: Path, progress: Progress | None = None,
                view: View | None = None, *, scratch: Path | None = None) -> Corpus:
    """Open the corpus of ``source`` under ``cache_dir``, building it first if needed.

    The dataset is streamed once, ever, per content hash; later calls (and other processes)
    open the SQLite file. The dataset's sha256 is memoised under ``<cache_dir>/sha256/`` per
    file version (path, size, mtime, ctime, inode), so later runs do not read the file at all.
    Raises :class:`DataError` for an unusable dataset file and
    :class:`CacheError` when the cache directory cannot be written. ``view`` (a protocol and
    granularity, :mod:`.protocol`) chooses the memory rows and gold; default: vipune sessions.
    ``scratch`` (a folder outside the cache) makes the call read-only (``--co`` and the other
    runs that score nothing): a complete corpus in the cache is opened without a stamp, the
    sha256 memo is read but never written, and a missing corpus is built under ``scratch``.
    """
    view = view or View()
    read_only = scratch is not None  # the one switch: scratch given
    memo_dir = Path(cache_dir) / MEMO_DIR  # hashed once per file version, ever
    hashing = None if progress is None else (
        lambda done, total: progress(f"sha256 {source.name}", done, total))
    sample = sample_digest(source.path)  # also refuses a FIFO or device before any read
    try:
        known = known_sha256(source.path, memo_dir)
    except OSError:
        known = None  # file_sha256 words the error
    if known is not None:
        corpus = open_if_complete(corpus_path(cache_dir, known[0], view), source.name,
                                   known[0], stamp=not read_only)
        if corpus is not None and corpus.dataset_sample == sample:
            return corpus
    # No corpus of the memo's sha256, or one of another file (a wrong memo): a build reads
    # the whole file anyway, so a digest only the on-disk memo vouches for is recomputed.
    sha256 = file_sha256(source.path, hashing, memo_dir=None if read_only else memo_dir,
                         fresh=known is not None and known[1])
    if scratch is not None:
        cached = open_if_complete(corpus_path(cache_dir, sha256, view), source.name, sha256,
                                  stamp=False)
        if cached is not None and cached.dataset_sample == sample:
            return cached
        cache_dir = scratch  # built where nothing outlives the run
    target = corpus_path(cache_dir, sha256, view)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{target}.lock")
        with lock:
            corpus = open_if_complete(target, source.name, sha256)
            if corpus is not None and corpus.dataset_sample == sample:
                return corpus
            remove_partials(target)
            _build(source, sha256, sample, target, progress, view)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        raise CacheError(
            f"cache directory {cache_dir} cannot be written ({exc.strerror or exc}{where}); "
            f"make it writable or choose another (--retrieval-eval-cache=DIR, "
            f"RETRIEVAL_EVAL_CACHE_DIR, or prep --cache DIR)"
        ) from None
    except sqlite3.Error as exc:
        raise CacheError(
            f"corpus file {target} could not be built ({exc}); "
            f"{write_fault(exc, target.parent)}, and run again"
        ) from None
    corpus = open_if_complete(target, source.name, sha256, verify=False)
    if corpus is None:
        raise CacheError(
            f"corpus file {target} is unreadable right after it was built; "
            f"check the disk and run again"
        )
    return corpus


def no_usable_pair(source: DatasetSource, corpus: Corpus) -> str:
    """The one line for a dataset whose every instance is rejected or an abstention."""
    abstention = sum(1 for p in corpus.pairs if p.abstention)
    total = len(corpus.pairs) + len(corpus.rejections)
    first = ""
    if corpus.rejections:
        r = corpus.rejections[0]
        first = f"; first rejection: instance {r.index} ({r.question_id or 'no id'}): {r.reason}"
    return (
        f"dataset {source.name} ({source.path}): no usable pair: of {total} instance(s), "
        f"{len(corpus.rejections)} rejected and {abstention} abstention{first}; fix the file "
        "or pick another --retrieval-eval-data"
    )
