"""Content-addressed vector cache: Parquet shards per model fingerprint.

Layout under a cache root::

    <root>/vectors/<fingerprint>/manifest.json             model info + format version
    <root>/vectors/<fingerprint>/shard-<time>-<uuid>.parquet          key, vector
    <root>/vectors/<fingerprint>/shard-<time>-<uuid>.parquet.sha256   written after the shard
    <root>/vectors/<fingerprint>/.lock                     writers only (filelock)
    <root>/vectors/<fingerprint>/.prep.lock                one prep of the model at a time

* A **key** is the sha256 hex of the exact text embedded (:func:`pairs.text_key`), so the same
  text is embedded once whichever persona holds it. A fingerprint directory only ever holds
  vectors of that one model; a manifest that names another fingerprint or dimension is refused.
* Shards are **immutable**. :meth:`VectorCache.add` writes one new shard under the exclusive
  lock: temp file in the same directory, fsync, ``os.replace``, then the ``.sha256`` sidecar the
  same way. The sidecar is the commit mark: readers only see shards that have one, and never
  take the lock. A shard left without a sidecar (a writer killed between the two renames) and
  stale temp files are removed by the next writer.
* A shard is checked against its sidecar (full sha256) before any vector of it is served; a
  truncated or altered shard raises :class:`~pytest_retrieval_eval.errors.CacheError` naming
  the file. :meth:`VectorCache.repair` (used by prep) quarantines such shards instead (renames
  them to ``*.corrupt``) so that prep re-embeds what they held.
* The key index (key -> row) is built lazily from the shards' ``key`` columns only; vectors are
  read per Parquet row group on demand and kept in a bounded LRU.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from filelock import FileLock, Timeout

from .checksums import (
    SIDECAR_SUFFIX,
    read_sidecar,
    sha256_file,
    share_as_umask,
    sidecar_path,
    write_sidecar,
)
from .errors import CacheError, write_fault

__all__ = [
    "FORMAT_VERSION",
    "CacheWarning",
    "ModelInfo",
    "VectorCache",
    "bundled_cache_dir",
    "default_cache_dir",
    "list_models",
    "models_holding",
    "uncommitted_shards",
]

#: Version of the on-disk layout written into every manifest.
FORMAT_VERSION = 1
#: Rows per Parquet row group; the unit in which vectors are read back.
ROW_GROUP_ROWS = 4096
#: Rows a compacted shard aims at (~50 MB at dim 384): a reader hashes a whole shard before
#: serving from it, so shards stay small enough that a run touching few personas stays cheap.
COMPACT_ROWS = 32768
#: Default bound of decoded row groups kept in memory per cache object.
DEFAULT_MAX_CACHED_BYTES = 512 * 1024 * 1024
#: Seconds a writer waits for the lock before giving up with a CacheError.
LOCK_TIMEOUT = 600.0

ModelInfo = dict[str, Any]
"""The model description stored in a manifest (``Embedder.info()`` plus ``format``)."""

_SHARD_RE = re.compile(r"^shard-[0-9A-Za-z_.-]+\.parquet$")
_FINGERPRINT_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.-]*$")
_TMP_PREFIX = ".tmp-"
#: How often a reader starts over from a fresh listing when a compaction removed a shard
#: between listing and opening it (each try pins what it opens, so this only covers that
#: window, never a shard already indexed).
_ATTEMPTS = 50
_FIX_WRITABLE = "delete it; the next prep re-embeds only what it held"
_FIX_READ_ONLY = "this cache is read-only (bundled); reinstall pytest-retrieval-eval"


class CacheWarning(UserWarning):
    """Something in the cache was repaired (a corrupt shard quarantined)."""


def default_cache_dir() -> Path:
    """``$RETRIEVAL_EVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME`` or ``~/.cache``, + our name.

    The directory lies outside any repository, so pytest's ``--cache-clear`` never touches it.
    """
    explicit = os.environ.get("RETRIEVAL_EVAL_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg and Path(xdg).expanduser().is_absolute() else None
    if base is None:
        base = Path.home() / ".cache"
    return base / "pytest-retrieval-eval"


def bundled_cache_dir() -> Path:
    """The read-only cache root shipped inside the package (the bundled sample's vectors)."""
    return Path(__file__).parent / "data" / "sample" / "cache"


# --------------------------------------------------------------------------- small helpers


def _pa() -> Any:
    import pyarrow as pa

    return pa


def _pq() -> Any:
    import pyarrow.parquet as pq

    return pq


def _model_dir(root: Path, fingerprint: str) -> Path:
    return Path(root) / "vectors" / fingerprint


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory, fsync, rename."""
    tmp = path.with_name(f"{_TMP_PREFIX}{uuid.uuid4().hex}-{path.name}")
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _shard_name() -> str:
    # Time first (zero-padded nanoseconds) so names sort by creation; uuid makes them unique.
    return f"shard-{time.time_ns():020d}-{uuid.uuid4().hex}.parquet"


def _committed_shards(directory: Path) -> list[Path]:
    """Shards with a sidecar, sorted by name (creation time). Temp files are ignored."""
    try:
        names = set(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [
        directory / name
        for name in sorted(names)
        if _SHARD_RE.match(name) and name + SIDECAR_SUFFIX in names
    ]


def _read_manifest(directory: Path) -> ModelInfo | None:
    path = directory / "manifest.json"
    try:
        raw = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise CacheError(
            f"cache manifest {path} cannot be read ({exc.strerror or exc}); check its "
            f"permissions or delete {directory}"
        ) from None
    try:
        info = json.loads(raw)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        raise CacheError(
            f"cache manifest {path} is not a JSON object; delete {directory} and run prep again"
        )
    return info


def _describe(info: Mapping[str, Any]) -> str:
    return f"{info.get('name', '?')} (fingerprint {str(info.get('fingerprint', '?'))[:12]})"


def _check_manifest(
    directory: Path, info: Mapping[str, Any], fingerprint: str, dim: int, model_name: str
) -> None:
    found_fp = str(info.get("fingerprint", ""))
    found_dim = info.get("dim")
    fmt = info.get("format", FORMAT_VERSION)
    if isinstance(fmt, int) and fmt > FORMAT_VERSION:
        raise CacheError(
            f"cache at {directory} has format {fmt}, newer than this pytest-retrieval-eval "
            f"reads ({FORMAT_VERSION}); upgrade pytest-retrieval-eval or use another "
            f"--retrieval-eval-cache"
        )
    if found_fp != fingerprint or found_dim != dim:
        raise CacheError(
            f"cache at {directory} was made by model {_describe(info)}, dim {found_dim}, not "
            f"{model_name} (fingerprint {fingerprint[:12]}), dim {dim}; vectors of one model "
            f"are never served for another: delete {directory} and run prep again"
        )


def _corrupt(path: Path, what: str, read_only: bool) -> CacheError:
    fix = _FIX_READ_ONLY if read_only else _FIX_WRITABLE
    return CacheError(f"vector cache shard {path} is corrupt ({what}); {fix}")


def _check_schema(path: Path, schema: Any, dim: int, read_only: bool) -> None:
    pa = _pa()
    names = list(schema.names)
    if names[:2] != ["key", "vector"]:
        raise _corrupt(path, f"columns {names}, expected key and vector", read_only)
    vtype = schema.field("vector").type
    ok = (
        pa.types.is_fixed_size_list(vtype)
        and vtype.list_size == dim
        and pa.types.is_float32(vtype.value_type)
    )
    if not ok:
        raise _corrupt(path, f"vector type {vtype}, expected {dim} float32", read_only)


def _read_keys(path: Path, dim: int | None, read_only: bool,
               source: Any = None) -> tuple[list[str], list[int]]:
    """A shard's keys (its ``key`` column only) and rows per row group, read from ``source``
    (an open handle of it) when given, else from ``path``.

    Raises FileNotFoundError when the shard vanished (compaction), CacheError when it is
    truncated, not Parquet, or has the wrong schema.
    """
    pq = _pq()
    try:
        pf = (pq.ParquetFile(path, memory_map=True) if source is None
              else pq.ParquetFile(source))
        if dim is not None:
            _check_schema(path, pf.schema_arrow, dim, read_only)
        keys = pf.read(columns=["key"], use_threads=False).column(0).to_pylist()
        meta = pf.metadata
        rg_rows = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    except (FileNotFoundError, CacheError):
        raise
    except Exception as exc:  # ArrowInvalid, OSError: truncated or not Parquet
        raise _corrupt(path, f"unreadable: {type(exc).__name__}", read_only) from None
    if len(keys) != sum(rg_rows):
        raise _corrupt(path, "row count disagrees with its footer", read_only)
    return keys, rg_rows


# --------------------------------------------------------------------------- the cache


@dataclass
class _Shard:
    path: Path
    read_only: bool
    start: int  # global row of its first row
    rows: int
    rg_starts: list[int]  # local first row of each row group
    handle: Any = None  # the shard, memory-mapped when indexed: pinned against compaction
    sidecar: str | None = None  # its sidecar's sha256, read when indexed


def _pin(path: Path) -> tuple[Any, str | None]:
    """Open ``path`` memory-mapped and read its sidecar, both now: a reader's generation.

    A compaction that later deletes the shard (and its sidecar) cannot take either from
    this reader: the mapping keeps the unlinked file readable until it is closed. Raises
    FileNotFoundError when the shard is already gone. The sidecar is None when unreadable
    (the shard is then refused as corrupt when first served from)."""
    handle = _pa().memory_map(str(path), "r")
    try:
        sidecar: str | None = read_sidecar(path)
    except FileNotFoundError:
        handle.close()
        raise
    except (OSError, ValueError):
        sidecar = None
    return handle, sidecar


def _sha256_of(handle: Any) -> str:
    """sha256 of a memory-mapped file (no copy)."""
    digest = hashlib.sha256()
    size = handle.size()
    buffer = handle.read_at(size, 0) if size else b""
    view = memoryview(buffer)
    for start in range(0, size, 1 << 20):
        digest.update(view[start : start + (1 << 20)])
    return digest.hexdigest()


class VectorCache:
    """The vectors of one model (fingerprint) across a writable root and read-only roots.

    ``model_info`` is written to the manifest when this cache first writes (it should hold
    ``Embedder.info()``: name, fingerprint, dim, pooling, max_length, query_prefix, hashes).
    ``read_only_roots`` are searched too (the bundled sample's cache) but never written to.
    ``max_cached_bytes`` bounds the decoded row groups kept in memory; ``data`` (the dataset
    spec) only completes the prep command that a "missing vectors" error suggests.
    Not thread-safe: use one object per thread (or a lock around it).
    Reading never takes the lock; writing (:meth:`add`, :meth:`compact`, :meth:`repair`) does.
    """

    def __init__(
        self,
        root: Path,
        fingerprint: str,
        dim: int,
        model_info: Mapping[str, object],
        *,
        read_only_roots: Sequence[Path] = (),
        max_cached_bytes: int = DEFAULT_MAX_CACHED_BYTES,
        data: str | None = None,
    ) -> None:
        if not _FINGERPRINT_RE.match(fingerprint):
            raise ValueError(f"fingerprint {fingerprint!r} is not a safe directory name")
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        self.root = Path(root)
        self.fingerprint = fingerprint
        self.dim = int(dim)
        self.model_info: ModelInfo = dict(model_info)
        self.model_info.setdefault("fingerprint", fingerprint)
        self.model_info.setdefault("dim", self.dim)
        self.name = str(self.model_info.get("name", fingerprint[:12]))
        self.directory = _model_dir(self.root, fingerprint)
        own = self.root.resolve()
        ro: list[Path] = []
        for extra in read_only_roots:
            extra = Path(extra)
            if extra.resolve() != own and extra.resolve() not in [p.resolve() for p in ro]:
                ro.append(extra)
        self.read_only_dirs = [_model_dir(r, fingerprint) for r in ro]
        self.max_cached_bytes = max_cached_bytes
        #: The dataset spec named in the prep command that a "missing vectors" error suggests.
        self.data = data
        #: Vectors this object has committed with :meth:`add` (prep's "saved" count).
        self.added = 0
        for directory in [*self.read_only_dirs, self.directory]:
            self._check_dir(directory)
        #: Shards checked against their sidecar. Kept across re-indexing: a shard is immutable
        #: and its name never reused (a corrupt one is renamed away by :meth:`repair`).
        self._verified: set[Path] = set()
        self._reset()

    # ----------------------------------------------------------------- manifest checks

    def _check_dir(self, directory: Path) -> None:
        info = _read_manifest(directory)
        if info is None:
            if _committed_shards(directory):
                raise CacheError(
                    f"cache at {directory} holds shards but no manifest.json; delete "
                    f"{directory} and run prep again"
                )
            return
        _check_manifest(directory, info, self.fingerprint, self.dim, self.name)

    def _ensure_manifest(self) -> None:
        """Create the directory and its manifest (caller holds the lock)."""
        info = _read_manifest(self.directory)
        if info is not None:
            _check_manifest(self.directory, info, self.fingerprint, self.dim, self.name)
            return
        manifest = {**self.model_info, "fingerprint": self.fingerprint, "dim": self.dim,
                    "format": FORMAT_VERSION}
        data = json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n"
        _write_atomic(self.directory / "manifest.json", data.encode("utf-8"))

    # ----------------------------------------------------------------- index

    def _reset(self) -> None:
        for shard in getattr(self, "_shards", []):
            if shard.handle is not None:
                shard.handle.close()
        self._shards: list[_Shard] = []
        self._known: set[Path] = set()
        self._index: dict[str, int] = {}
        self._rg_global = np.zeros(0, dtype=np.int64)  # global first row per row group
        self._rg_owner: list[tuple[int, int]] = []  # (shard id, row group) per row group
        self._indexed = False
        self._lru: OrderedDict[int, npt.NDArray[np.float32]] = OrderedDict()
        self._lru_bytes = 0

    def _all_dirs(self) -> list[tuple[Path, bool]]:
        return [*((d, True) for d in self.read_only_dirs), (self.directory, False)]

    def _index_shard(self, path: Path, read_only: bool) -> None:
        handle, sidecar = _pin(path)
        try:
            keys, rg_rows = _read_keys(path, self.dim, read_only, handle)
        except BaseException:
            handle.close()
            raise
        start = self._shards[-1].start + self._shards[-1].rows if self._shards else 0
        sid = len(self._shards)
        rg_starts: list[int] = []
        local = 0
        for rg, n in enumerate(rg_rows):
            rg_starts.append(local)
            self._rg_owner.append((sid, rg))
            local += n
        self._shards.append(_Shard(path, read_only, start, len(keys), rg_starts, handle,
                                   sidecar))
        self._index.update(zip(keys, range(start, start + len(keys)), strict=True))
        self._known.add(path)

    def _rebuild_arrays(self) -> None:
        self._rg_global = np.fromiter(
            (self._shards[sid].start + self._shards[sid].rg_starts[rg]
             for sid, rg in self._rg_owner),
            dtype=np.int64, count=len(self._rg_owner),
        )

    def refresh(self) -> None:
        """Index shards committed since the last look (by this or another process).

        Each shard is pinned as it is indexed (:func:`_pin`), so what this reader indexed
        stays readable whatever a concurrent compaction deletes; only a shard deleted
        between the listing and its opening sends the reader back to a fresh listing (the
        compaction committed the merged shard first, so the new listing holds every key)."""
        for attempt in range(_ATTEMPTS):
            try:
                added = False
                for directory, read_only in self._all_dirs():
                    for path in _committed_shards(directory):
                        if path not in self._known:
                            self._index_shard(path, read_only)
                            added = True
                if added or not self._indexed:
                    self._rebuild_arrays()
                self._indexed = True
                return
            except FileNotFoundError:
                # A compaction removed a shard under us: start over from a fresh listing.
                self._reset()
                time.sleep(min(0.001 * attempt, 0.05))
        raise CacheError(  # pragma: no cover - needs a compaction storm
            f"cache at {self.directory} keeps changing while being read; retry when no "
            f"compaction is running"
        )

    def _ensure_index(self) -> None:
        if not self._indexed:
            self.refresh()

    def __len__(self) -> int:
        self._ensure_index()
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        self._ensure_index()
        return key in self._index

    def keys(self) -> list[str]:
        """Every key held (all roots)."""
        self._ensure_index()
        return list(self._index)

    def own_shards(self) -> list[Path]:
        """The committed shards of the writable root (not the read-only roots)."""
        return _committed_shards(self.directory)

    # ----------------------------------------------------------------- reading

    def missing(self, keys: Sequence[str]) -> list[str]:
        """The keys (in the given order, duplicates kept once) that no shard holds."""
        self.refresh()
        index = self._index
        return list(dict.fromkeys(k for k in keys if k not in index))

    def verify(self) -> int:
        """Check every shard (all roots) against its sidecar now; return how many were checked.

        Raises :class:`CacheError` naming the first truncated, altered or unreadable shard. The
        model-free lane calls it before any item runs, so a corrupt cache stops the run with
        one line instead of failing items (prep quarantines such shards: :meth:`repair`).
        """
        for _attempt in range(_ATTEMPTS):
            try:
                self._ensure_index()
                for shard in list(self._shards):
                    self._verify(shard)
                return len(self._shards)
            except FileNotFoundError:
                self._reset()  # a compaction replaced shards under us: re-index
        raise CacheError(  # pragma: no cover - needs a compaction storm
            f"cache at {self.directory} keeps changing while being read; retry when no "
            f"compaction is running"
        )

    def _verify(self, shard: _Shard) -> None:
        if shard.path in self._verified:
            return
        if shard.handle is not None:  # pinned: its sidecar was read when it was indexed
            if shard.sidecar is None:
                raise _corrupt(shard.path, "its .sha256 sidecar is unreadable", shard.read_only)
            expected, actual = shard.sidecar, _sha256_of(shard.handle)
        else:
            try:
                expected = read_sidecar(shard.path)
            except FileNotFoundError:
                raise
            except (OSError, ValueError):
                raise _corrupt(shard.path, "its .sha256 sidecar is unreadable",
                               shard.read_only) from None
            actual = sha256_file(shard.path)
        if actual != expected:
            raise _corrupt(
                shard.path,
                f"sha256 {actual[:12]}... does not match {expected[:12]}... in its sidecar",
                shard.read_only,
            )
        self._verified.add(shard.path)

    def _row_group(self, grg: int) -> npt.NDArray[np.float32]:
        cached = self._lru.get(grg)
        if cached is not None:
            self._lru.move_to_end(grg)
            return cached
        vectors = self._decode(grg)
        self._remember(grg, vectors)
        return vectors

    def _remember(self, grg: int, vectors: npt.NDArray[np.float32]) -> None:
        self._lru[grg] = vectors
        self._lru_bytes += vectors.nbytes
        while self._lru_bytes > self.max_cached_bytes and len(self._lru) > 1:
            _, old = self._lru.popitem(last=False)
            self._lru_bytes -= old.nbytes

    def _decode(self, grg: int) -> npt.NDArray[np.float32]:
        sid, rg = self._rg_owner[grg]
        shard = self._shards[sid]
        self._verify(shard)
        try:
            pf = (_pq().ParquetFile(shard.path, memory_map=True) if shard.handle is None
                  else _pq().ParquetFile(shard.handle))
            column = pf.read_row_group(rg, columns=["vector"], use_threads=False).column(0)
            column = column.combine_chunks()
            if column.null_count:
                raise ValueError("null vectors")
            values = column.flatten()  # float32, honours the array's offset
            vectors = np.frombuffer(
                values.buffers()[1], dtype=np.float32, count=len(values),
                offset=values.offset * 4,
            ).reshape(len(column), self.dim)
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise _corrupt(shard.path, f"unreadable: {type(exc).__name__}",
                           shard.read_only) from None
        vectors.flags.writeable = False
        return vectors

    def _missing_error(self, keys: Sequence[str], absent: int) -> CacheError:
        return CacheError(
            f"vector cache {self.directory} lacks {absent} of {len(keys)} vectors for model "
            f"{self.name}; run `retrieval-eval prep --data {self.data or '<dataset>'} --model "
            f"{self.name} --cache {self.root}` first"
        )

    def get(self, keys: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors for ``keys`` in the given order, shape ``(len(keys), dim)``, float32.

        Raises :class:`CacheError` when any key is missing or a shard fails its check.
        """
        for _attempt in range(_ATTEMPTS):
            try:
                return self._get(keys)
            except FileNotFoundError:
                self._reset()  # a compaction replaced shards under us: re-index
        raise CacheError(  # pragma: no cover - needs a compaction storm
            f"cache at {self.directory} keeps changing while being read; retry when no "
            f"compaction is running"
        )

    def _get(self, keys: Sequence[str]) -> npt.NDArray[np.float32]:
        self._ensure_index()
        n = len(keys)
        out = np.empty((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        index = self._index
        rows = np.fromiter((index.get(k, -1) for k in keys), dtype=np.int64, count=n)
        if (rows < 0).any():
            self.refresh()
            index = self._index
            rows = np.fromiter((index.get(k, -1) for k in keys), dtype=np.int64, count=n)
            absent = int((rows < 0).sum())
            if absent:
                raise self._missing_error(keys, absent)
        groups = np.searchsorted(self._rg_global, rows, side="right") - 1
        order = np.argsort(groups, kind="stable")
        sorted_groups = groups[order]
        bounds = np.flatnonzero(np.diff(sorted_groups)) + 1
        for chunk in np.split(order, bounds):
            grg = int(groups[chunk[0]])
            vectors = self._row_group(grg)
            out[chunk] = vectors[rows[chunk] - self._rg_global[grg]]
        return out

    # ----------------------------------------------------------------- writing

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
                            ("vector", pa.list_(pa.float32(), self.dim))])
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
            _read_keys(path, self.dim, read_only=False)  # the right columns and dimension
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
        _read_keys(path, self.dim, read_only)

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
                for path in group:
                    self._verify(_Shard(path, False, 0, 0, []))
                self._commit(lambda tmp, group=group: self._merge_into(tmp, group, seen))
                for path in group:
                    _unlink(sidecar_path(path))  # uncommit first: readers stop listing it
                    _unlink(path)
                merged += len(group)
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


# --------------------------------------------------------------------------- model listing


def _model_dirs(roots: Iterable[Path]) -> Iterator[tuple[Path, Path]]:
    for root in roots:
        base = Path(root) / "vectors"
        try:
            entries = sorted(os.listdir(base))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in entries:
            if _FINGERPRINT_RE.match(name) and (base / name).is_dir():
                yield Path(root), base / name


def _keys_of(directory: Path, read_only: bool = False) -> set[str]:
    """Every key the committed shards of ``directory`` hold. A shard that a compaction
    removed mid-way sends the count back to a fresh listing (skipping it would drop its
    keys: the merged shard may have been listed before it existed)."""
    for attempt in range(_ATTEMPTS):
        keys: set[str] = set()
        try:
            for path in _committed_shards(directory):
                keys.update(_read_keys(path, None, read_only)[0])
        except FileNotFoundError:
            time.sleep(min(0.001 * attempt, 0.05))
            continue
        return keys
    raise CacheError(  # pragma: no cover - needs a compaction storm
        f"cache at {directory} keeps changing while being read; retry when no compaction "
        f"is running"
    )


def _gather(roots: Sequence[Path]) -> dict[str, tuple[ModelInfo, list[Path], list[Path]]]:
    found: dict[str, tuple[ModelInfo, list[Path], list[Path]]] = {}
    for root, directory in _model_dirs(roots):
        info = _read_manifest(directory)
        if info is None:
            continue
        fingerprint = directory.name
        if str(info.get("fingerprint", "")) != fingerprint:
            raise CacheError(
                f"cache manifest {directory / 'manifest.json'} names fingerprint "
                f"{str(info.get('fingerprint'))[:12]}, not its directory's {fingerprint[:12]}; "
                f"delete {directory} and run prep again"
            )
        entry = found.setdefault(fingerprint, (info, [], []))
        entry[1].append(directory)
        entry[2].append(root)
    return found


def uncommitted_shards(roots: Sequence[Path]) -> list[tuple[Path, ModelInfo | None]]:
    """Shards without a ``.sha256`` sidecar (a deleted sidecar, or a writer killed between
    its two renames), each with its directory's manifest: readers never use them, and an
    error that finds no model should name them."""
    found: list[tuple[Path, ModelInfo | None]] = []
    for _root, directory in _model_dirs(roots):
        try:
            names = set(os.listdir(directory))
        except OSError:
            continue
        orphans = sorted(n for n in names
                         if _SHARD_RE.match(n) and n + SIDECAR_SUFFIX not in names)
        if orphans:
            try:
                info = _read_manifest(directory)
            except CacheError:
                info = None
            found.extend((directory / n, info) for n in orphans)
    return found


def list_models(roots: Sequence[Path]) -> list[ModelInfo]:
    """Model info of every fingerprint present in ``roots``, with ``vectors`` (unique keys)
    and ``roots`` (where it was found) added; sorted by name then fingerprint."""
    models: list[ModelInfo] = []
    for info, directories, found_in in _gather(roots).values():
        keys: set[str] = set()
        for directory in directories:
            keys |= _keys_of(directory)
        models.append({**info, "vectors": len(keys), "roots": [str(r) for r in found_in]})
    return sorted(models, key=lambda m: (str(m.get("name", "")), str(m.get("fingerprint"))))


def models_holding(roots: Sequence[Path], keys: Iterable[str]) -> list[ModelInfo]:
    """The models whose vectors (across ``roots``) cover ALL ``keys``.

    ``--no-model`` uses it to pick the model automatically when exactly one qualifies.
    """
    wanted = set(keys)
    holding: list[ModelInfo] = []
    for info, directories, found_in in _gather(roots).values():
        remaining = set(wanted)
        for directory in directories:
            if not remaining:
                break
            remaining -= _keys_of(directory)
        if not remaining:
            holding.append({**info, "roots": [str(r) for r in found_in]})
    return sorted(holding, key=lambda m: (str(m.get("name", "")), str(m.get("fingerprint"))))
