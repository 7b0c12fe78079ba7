"""The vector cache's writing side: the writers' lock, committing shards, compaction.

:class:`ShardWriter` is a base of :class:`~pytest_retrieval_eval.vectors.cache.VectorCache` holding
its writing methods (:meth:`~ShardWriter.add`, :meth:`~ShardWriter.adopt`,
:meth:`~ShardWriter.repair`, :meth:`~ShardWriter.compact`, :meth:`~ShardWriter.prep_turn`);
the reading side and the index stay in :mod:`~pytest_retrieval_eval.vectors.cache`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from filelock import FileLock, Timeout

from ..errors import CacheError, write_fault
from ..io.checksums import SIDECAR_SUFFIX, sha256_file, share_as_umask, sidecar_path, write_sidecar
from .shards import (
    _SHARD_RE,
    _TMP_PREFIX,
    COMPACT_ROWS,
    ROW_GROUP_ROWS,
    TWIN_DIR,
    _committed_shards,
    _fsync_dir,
    _pa,
    _pq,
    _read_keys,
    _Shard,
    _shard_name,
    _unlink,
    shard_metadata,
)

#: Seconds a writer waits for the lock before giving up with a CacheError.
LOCK_TIMEOUT = 600.0


class ShardWriter:
    """The writing methods of :class:`~pytest_retrieval_eval.vectors.cache.VectorCache`.

    Reading never takes the lock; writing (:meth:`add`, :meth:`compact`, :meth:`repair`) does.
    """

    directory: Path
    dim: int
    fingerprint: str
    name: str
    added: int
    read_only_dirs: list[Path]
    _verified: set[Path]
    _indexed: bool

    if TYPE_CHECKING:  # defined by VectorCache (the reading side)
        def _ensure_manifest(self) -> None: ...
        def _reset(self) -> None: ...
        def _index_shard(self, path: Path, read_only: bool) -> None: ...
        def _rebuild_arrays(self) -> None: ...
        def _verify(self, shard: _Shard) -> None: ...

    def _lock(self, name: str = ".lock") -> FileLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.directory / name), timeout=LOCK_TIMEOUT)

    def _unwritable(self, exc: OSError) -> CacheError:
        return CacheError(
            f"vector cache {self.directory} cannot be written ({exc.strerror or exc}); "
            f"{write_fault(exc, self.directory)}, or pass another --retrieval-eval-cache"
        )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the writers' lock; an OSError while writing becomes one CacheError line."""
        try:
            lock = self._lock()
            try:
                lock.acquire()
            except Timeout:
                raise CacheError(
                    f"vector cache {self.directory} stayed locked for {LOCK_TIMEOUT:.0f}s by "
                    f"another prep; wait for it to finish, or delete "
                    f"{self.directory / '.lock'} if no prep is running"
                ) from None
            try:
                yield
            finally:
                lock.release()
        except OSError as exc:
            raise self._unwritable(exc) from None

    @contextlib.contextmanager
    def prep_turn(self, waiting: Callable[[], None] | None = None) -> Iterator[None]:
        """Held for the embedding part of a prep of this model, so two preps on one cache
        (``retrieval-eval prep`` beside a model-lane pytest run) never embed the same texts:
        the second calls ``waiting()`` once, waits (Ctrl-C works), then embeds only what the
        first left missing. The OS drops the lock of a killed process.
        """
        try:
            lock = self._lock(".prep.lock")
            try:
                lock.acquire(timeout=0)
            except Timeout:
                if waiting is not None:
                    waiting()
                lock.acquire(timeout=-1)  # as long as the other prep takes
        except OSError as exc:
            raise self._unwritable(exc) from None
        try:
            yield
        finally:
            lock.release()

    def _sweep(self) -> None:
        """Remove stale temp files and uncommitted shards (caller holds the lock)."""
        try:
            names = set(os.listdir(self.directory))
        except FileNotFoundError:
            return
        for name in names:
            stale = name.startswith(_TMP_PREFIX)
            uncommitted = bool(_SHARD_RE.match(name)) and name + SIDECAR_SUFFIX not in names
            orphan_sidecar = (
                name.endswith(".parquet" + SIDECAR_SUFFIX)
                and name[: -len(SIDECAR_SUFFIX)] not in names
            )
            if stale or uncommitted or orphan_sidecar:
                _unlink(self.directory / name)
        self._sweep_twins(names)

    def _sweep_twins(self, names: set[str] | None = None) -> None:
        """Remove the dense twins (:mod:`.cache`), with their sidecars, stamps and temp
        files, of shards no longer committed here (caller holds the lock): compacted away or
        quarantined."""
        folder = self.directory / TWIN_DIR
        try:
            twins = os.listdir(folder)
            if names is None:
                names = set(os.listdir(self.directory))
        except OSError:
            return
        for name in twins:
            shard = name.lstrip(".").split(".parquet", 1)[0] + ".parquet"
            if shard not in names or shard + SIDECAR_SUFFIX not in names:
                _unlink(folder / name)

    def _commit(self, write: Any, rows: int = 0) -> Path:
        """Write a shard with ``write(tmp_path)`` and commit it (caller holds the lock).

        ``rows`` new vectors are counted in :attr:`added` the moment the sidecar lands, so an
        interrupt arriving later in :meth:`add` still counts them as saved.
        """
        final = self.directory / _shard_name()
        tmp = self.directory / f"{_TMP_PREFIX}{final.name}"
        side_tmp = self.directory / f"{_TMP_PREFIX}{sidecar_path(final).name}"
        committed = False
        try:
            write(tmp)
            with tmp.open("rb+") as handle:
                os.fsync(handle.fileno())
            digest = sha256_file(tmp)
            share_as_umask(tmp)
            os.replace(tmp, final)
            write_sidecar(final, digest, tmp=side_tmp)  # the commit point
            committed = True
            _fsync_dir(self.directory)
        except BaseException:
            _unlink(tmp)
            _unlink(side_tmp)
            # An interrupt raised as the sidecar's rename returns (Python runs a signal's
            # handler between bytecodes) comes after the commit point: this shard's name is
            # new, so a sidecar under it is its own. Kept and counted, not unlinked under it.
            committed = committed or (final.exists() and sidecar_path(final).exists())
            if not committed:
                _unlink(final)
            raise
        finally:
            if committed:  # counted even when an interrupt lands right after the commit
                self.added += rows
        self._verified.add(final)
        return final

    def _table(self, keys: Sequence[str], vectors: npt.NDArray[np.float32]) -> Any:
        pa = _pa()
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1),
                        type=pa.float32())
        return pa.table({
            "key": pa.array(list(keys), type=pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(flat, self.dim),
        })

    def _writer(self, path: Path) -> Any:
        pa, pq = _pa(), _pq()
        schema = pa.schema([("key", pa.string()),
                            ("vector", pa.list_(pa.float32(), self.dim))],
                           metadata=shard_metadata(self.fingerprint, self.name))
        return pq.ParquetWriter(
            str(path), schema, compression={"key": "zstd", "vector": "none"},
            use_dictionary=False, write_statistics=False,
        )

    def add(self, keys: Sequence[str], vectors: npt.ArrayLike) -> None:
        """Store ``vectors[i]`` under ``keys[i]``: one new shard, atomically, under the lock."""
        array = np.asarray(vectors, dtype=np.float32)
        if array.ndim != 2 or array.shape != (len(keys), self.dim):
            raise ValueError(
                f"vectors of shape {array.shape} do not match {len(keys)} keys x dim {self.dim}"
            )
        if not all(isinstance(k, str) for k in keys):
            raise TypeError("cache keys must be strings")
        if not keys:
            return
        # Keep the last vector of a key given twice.
        positions = dict(zip(keys, range(len(keys)), strict=True))
        if len(positions) != len(keys):
            keys = list(positions)
            array = array[list(positions.values())]
        table = self._table(keys, array)

        def write(path: Path) -> None:
            with self._writer(path) as writer:
                writer.write_table(table, row_group_size=ROW_GROUP_ROWS)

        with self._locked():
            self._ensure_manifest()
            self._sweep()
            final = self._commit(write, len(keys))
        if self._indexed:
            try:
                self._index_shard(final, read_only=False)
                self._rebuild_arrays()
            except FileNotFoundError:  # pragma: no cover - compacted already
                self._reset()

    def adopt(self, shards: Sequence[tuple[Path, str, str]]) -> list[Path]:
        """Commit finished shard files made elsewhere (a pull from the Hub) into this cache.

        Each ``(path, name, sha256)``: a file on this cache's file system, to be committed as
        shard ``name`` (``shard-*.parquet``), whose bytes the caller checked against
        ``sha256``. Every file's schema is checked first (a :class:`CacheError` then commits
        nothing); then, under the writers' lock, the manifest is written if absent and each
        file is renamed in and committed by its sidecar, as :meth:`add` commits. A shard of
        that name already committed is kept (the file given is removed). Returns the paths
        committed now.
        """
        for path, name, _digest in shards:
            if not _SHARD_RE.match(name):
                raise ValueError(f"{name!r} is not a shard name")
            # the right columns, dimension and model
            _read_keys(path, self.dim, read_only=False, fingerprint=self.fingerprint,
                       name=self.name)
        committed: list[Path] = []
        with self._locked():
            self._ensure_manifest()
            self._sweep()
            for path, name, digest in shards:
                final = self.directory / name
                if final.exists() and sidecar_path(final).exists():
                    _unlink(path)
                    continue
                with path.open("rb+") as handle:
                    os.fsync(handle.fileno())
                os.replace(path, final)
                write_sidecar(final, digest)  # the commit point
                self._verified.add(final)
                committed.append(final)
            _fsync_dir(self.directory)
        self._reset()
        return committed

    def repair(self) -> list[Path]:
        """Check every shard in full; quarantine corrupt writable ones (``*.corrupt``).

        Returns the quarantined paths (as they were named). A corrupt shard in a read-only
        root raises :class:`CacheError`. Used by prep; the run phase refuses corrupt shards.
        """
        quarantined: list[Path] = []
        for directory in self.read_only_dirs:
            for path in _committed_shards(directory):
                self._full_check(path, read_only=True)
        if not self.directory.is_dir():
            return quarantined
        with self._locked():
            self._sweep()
            for path in _committed_shards(self.directory):
                try:
                    self._full_check(path, read_only=False)
                except CacheError:
                    for part in (path, sidecar_path(path)):
                        with contextlib.suppress(FileNotFoundError):
                            os.replace(part, part.with_name(part.name + ".corrupt"))
                    quarantined.append(path)
        self._reset()
        return quarantined

    def _full_check(self, path: Path, read_only: bool) -> None:
        self._verify(_Shard(path, read_only, 0, 0, []))
        _read_keys(path, self.dim, read_only, fingerprint=self.fingerprint,
                   name=self.name)

    def compact(self, target_rows: int = COMPACT_ROWS) -> int:
        """Merge the writable root's small shards into shards of about ``target_rows`` rows.

        Atomic and under the lock; readers that indexed the old shards re-index on their next
        read. Shards of at least half the target are left alone. Keys keep their first-written
        order (prep writes persona by persona, so a persona's vectors share row groups), and a
        key written twice is kept once. Returns how many shards were merged away.
        """
        pq = _pq()
        merged = 0
        with self._locked():
            self._sweep()
            small: list[tuple[Path, int]] = []
            for path in _committed_shards(self.directory):
                rows = pq.read_metadata(path).num_rows
                if rows < target_rows // 2:
                    small.append((path, rows))
            groups: list[list[Path]] = [[]]
            total = 0
            for path, rows in small:
                if groups[-1] and total + rows > target_rows:
                    groups.append([])
                    total = 0
                groups[-1].append(path)
                total += rows
            seen: set[str] = set()
            for group in groups:
                if len(group) < 2:
                    continue
                for path in group:  # whole, and of this model, before it is merged
                    self._full_check(path, read_only=False)
                self._commit(lambda tmp, group=group: self._merge_into(tmp, group, seen))
                for path in group:
                    _unlink(sidecar_path(path))  # uncommit first: readers stop listing it
                    _unlink(path)
                merged += len(group)
            if merged:
                self._sweep_twins()
            _fsync_dir(self.directory)
        self._reset()
        return merged

    def _merge_into(self, tmp: Path, shards: Sequence[Path], seen: set[str]) -> None:
        pa, pq = _pa(), _pq()
        pending: list[Any] = []
        pending_rows = 0
        with self._writer(tmp) as writer:
            for path in shards:
                table = pq.read_table(path, memory_map=True)
                keys = table.column("key").to_pylist()
                keep = [i for i, k in enumerate(keys) if k not in seen]
                seen.update(keys)
                if len(keep) != len(keys):
                    table = table.take(pa.array(keep, type=pa.int64()))
                pending.append(table)
                pending_rows += table.num_rows
                if pending_rows >= ROW_GROUP_ROWS:
                    writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
                    pending, pending_rows = [], 0
            if pending_rows:
                writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
