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
* Each shard names its model in its Parquet key-value metadata (``FINGERPRINT_KEY``), checked
  whenever the shard is indexed: a shard of another model (or one naming none, written by an
  older release) is refused like a corrupt one, so copying a shard and its sidecar into
  another model's folder never serves its vectors.
* A shard is checked against its sidecar (full sha256) before any vector of it is served; a
  truncated or altered shard raises :class:`~pytest_retrieval_eval.errors.CacheError` naming
  the file. :meth:`VectorCache.repair` (used by prep) quarantines such shards instead (renames
  them to ``*.corrupt``) so that prep re-embeds what they held.
* The key index (key -> row) is built lazily from the shards' ``key`` columns only; vectors are
  read per Parquet row group on demand and kept in a bounded LRU.
* A run's cache (``memo_dir`` given) trusts a shard whose current file version the memo under
  ``memo_dir`` records with its sidecar's digest, as session stores trust their stamps
  (``verify="full"`` rehashes every shard read): a warm run re-reads no shard bytes it has
  verified before. With ``twins``, each own shard a run reads also gets a **dense twin**,
  ``dense/<shard>.f32`` (its vectors as raw little-endian float32, rows x dim, committed with
  a sidecar and a ``.verified`` stamp), built once from the checked shard; lookups then read
  only the rows asked for, a ``pread`` per run of consecutive rows (a persona's ~8,000 turn
  vectors are scattered over most row groups of a ``+unit:turn`` cache: decoding each row
  group per persona cost minutes at LongMemEval_M's scale, keeping them all decoded about a
  gigabyte, and mapping the twins half a gigabyte resident per lookup, by fault-around).
  Writers remove a twin whose shard is gone (:meth:`ShardWriter._sweep`).
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from itertools import pairwise, repeat
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..data.dataset import SAMPLE_DIR
from ..data.pairs import text_key
from ..errors import CacheError
from ..io.checksums import (
    check_committed,
    commit_file,
    memoised_sha256,
    read_sidecar,
    temp_path,
)

# The `X as X` imports re-export names that live in shards.py / shard_writer.py.
from .cached_models import list_models, models_holding, uncommitted_shards, unlisted_folders
from .shard_writer import LOCK_TIMEOUT as LOCK_TIMEOUT
from .shard_writer import ShardWriter
from .shards import (
    _ATTEMPTS,
    _FINGERPRINT_RE,
    DEFAULT_MAX_CACHED_BYTES,
    FORMAT_VERSION,
    TWIN_DIR,
    ModelInfo,
    _check_manifest,
    _committed_shards,
    _corrupt,
    _model_dir,
    _pin,
    _pq,
    _read_keys,
    _read_manifest,
    _sha256_of,
    _Shard,
    _write_atomic,
)
from .shards import COMPACT_ROWS as COMPACT_ROWS
from .shards import FINGERPRINT_KEY as FINGERPRINT_KEY
from .shards import ROW_GROUP_ROWS as ROW_GROUP_ROWS
from .turn_blocks import TurnBlocks

__all__ = [
    "FORMAT_VERSION",
    "CacheWarning",
    "ModelInfo",
    "VectorCache",
    "bundled_cache_dir",
    "default_cache_dir",
    "list_models",
    "models_holding",
    "query_key",
    "query_prefix",
    "query_text",
    "uncommitted_shards",
    "unlisted_folders",
]


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
    return SAMPLE_DIR / "cache"


def query_prefix(model: str | Mapping[str, object] | Any) -> str:
    """The query prefix of ``model``: a prefix string itself, a model-info mapping (a cache
    manifest) or an embedder (its ``info()``). (This and the two below live here, not in
    :mod:`.prep`, so that a ``--no-model`` run reads its query vectors without loading prep.)
    """
    if isinstance(model, str):
        return model
    info = model if isinstance(model, Mapping) else model.info()
    prefix = info.get("query_prefix", "")
    return prefix if isinstance(prefix, str) else ""


def query_text(question: str, model: str | Mapping[str, object] | Any) -> str:
    """The exact text embedded for a question: the query prefix + the question as given
    (what :meth:`Embedder.embed_query` embeds)."""
    return query_prefix(model) + question


def query_key(question: str, model: str | Mapping[str, object] | Any) -> str:
    """The cache key of a question's query vector: ``text_key(prefix + question)``.

    ``model`` is the prefix itself, a model-info mapping, or an embedder. With no prefix this
    equals the pair's ``question_key``.
    """
    return text_key(query_text(question, model))



# --------------------------------------------------------------------------- the cache


#: Rows of a dense twin read in one span when at most this many rows apart (a read call
#: costs about what copying a dozen rows does).
_TWIN_GAP = 8


class VectorCache(ShardWriter):
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
        memo_dir: Path | None = None,
        verify: str = "stamp",
        twins: bool = False,
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
        #: Where shard digests are memoised per file version (None: every shard read is
        #: hashed by this process); ``verify="full"`` hashes them whatever the memo says.
        self.memo_dir = None if memo_dir is None else Path(memo_dir)
        self.verify_mode = verify
        #: Dense twins of own shards are read, and built where missing (module docstring).
        self.twins = twins
        self._twin_ok: set[Path] = set()
        self._twin_off: set[Path] = set()
        self._blocks: TurnBlocks | None = None
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

    def create(self) -> None:
        """Create this model's folder and manifest if absent (a cache holding no vectors yet,
        as ``cache merge`` leaves its target when the sources hold none)."""
        with self._locked():
            self._ensure_manifest()

    def _ensure_manifest(self) -> None:
        """Create the directory and its manifest (caller holds the lock)."""
        info = _read_manifest(self.directory)
        if info is not None:
            _check_manifest(self.directory, info, self.fingerprint, self.dim, self.name)
            return
        manifest = {**self.model_info, "fingerprint": self.fingerprint, "dim": self.dim,
                    "format": FORMAT_VERSION}
        data = json.dumps(manifest, indent=2, sort_keys=True, default=str,
                          allow_nan=False) + "\n"
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
        #: Committed shards listed but not indexed yet (:meth:`_get` indexes them in order
        #: only as far as the keys it is asked for need: a run reading sessions never reads
        #: the key columns of the turn shards after them).
        self._pending: list[tuple[Path, bool]] = []
        self._lru: OrderedDict[int, npt.NDArray[np.float32]] = OrderedDict()
        self._lru_bytes = 0

    def _all_dirs(self) -> list[tuple[Path, bool]]:
        return [*((d, True) for d in self.read_only_dirs), (self.directory, False)]

    def _index_shard(self, path: Path, read_only: bool) -> None:
        handle, sidecar = _pin(path)
        try:
            keys, rg_rows = _read_keys(path, self.dim, read_only, handle,
                                        fingerprint=self.fingerprint, name=self.name)
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

    def _list(self) -> None:
        """Note the shards committed since the last look, to be indexed when needed."""
        listed = self._known | {path for path, _ in self._pending}
        for directory, read_only in self._all_dirs():
            for path in _committed_shards(directory):
                if path not in listed:
                    self._pending.append((path, read_only))
        if not self._indexed:
            self._rebuild_arrays()
        self._indexed = True

    def _index_next(self) -> None:
        """Index the first shard listed and not indexed yet."""
        path, read_only = self._pending[0]
        self._index_shard(path, read_only)
        del self._pending[0]
        self._rebuild_arrays()

    def refresh(self) -> None:
        """Index shards committed since the last look (by this or another process).

        Each shard is pinned as it is indexed (:func:`_pin`), so what this reader indexed
        stays readable whatever a concurrent compaction deletes; only a shard deleted
        between the listing and its opening sends the reader back to a fresh listing (the
        compaction committed the merged shard first, so the new listing holds every key)."""
        for attempt in range(_ATTEMPTS):
            try:
                self._list()
                while self._pending:
                    self._index_next()
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
            self._list()

    def _ensure_all(self) -> None:
        """Every listed shard indexed (listed first if nothing was yet)."""
        if not self._indexed or self._pending:
            self.refresh()

    def __len__(self) -> int:
        self._ensure_all()
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        self._ensure_all()
        return key in self._index

    def keys(self) -> list[str]:
        """Every key held (all roots)."""
        self._ensure_all()
        return list(self._index)

    def own_shards(self) -> list[Path]:
        """The committed shards of the writable root (not the read-only roots)."""
        return _committed_shards(self.directory)

    # ----------------------------------------------------------------- reading

    def missing(self, keys: Sequence[str]) -> list[str]:
        """The keys (in the given order, duplicates kept once) that no shard holds: the
        shards listed are indexed in order only as far as the keys need, and those
        committed since the last look are looked at before a key is said missing."""
        for _attempt in range(_ATTEMPTS):
            try:
                self._ensure_index()
                absent = [k for k in dict.fromkeys(keys) if k not in self._index]
                while absent and self._pending:
                    self._index_next()
                    absent = [k for k in absent if k not in self._index]
                if absent:
                    self.refresh()
                    absent = [k for k in absent if k not in self._index]
                return absent
            except FileNotFoundError:
                self._reset()  # a compaction replaced shards under us: re-index
        raise CacheError(  # pragma: no cover - needs a compaction storm
            f"cache at {self.directory} keeps changing while being read; retry when no "
            f"compaction is running"
        )

    def verify(self, keys: Sequence[str] | None = None) -> int:
        """Check every shard (all roots) against its sidecar now, or, given ``keys``, every
        shard holding one of them (the shards a run reads); return how many were checked.

        Raises :class:`CacheError` naming the first truncated, altered or unreadable shard. The
        model-free lane calls it before any item runs, so a corrupt cache stops the run with
        one line instead of failing items (prep quarantines such shards: :meth:`repair`). A
        shard not checked here is checked before its first vector is served, as every shard.
        """
        for _attempt in range(_ATTEMPTS):
            try:
                if keys is not None:
                    self._ensure_all()
                    shards = [self._shards[i] for i in self._shards_of(keys)]
                else:  # every shard, indexed or only listed (its key column is not read)
                    self._ensure_index()
                    shards = [*self._shards, *(_Shard(path, read_only, 0, 0, [])
                                               for path, read_only in self._pending)]
                for shard in shards:
                    self._verify(shard)
                    if shard.handle is None:  # listed only: its model checked as indexing would
                        _read_keys(shard.path, self.dim, shard.read_only,
                                   fingerprint=self.fingerprint, name=self.name,
                                   keys_too=False)
                return len(shards)
            except FileNotFoundError:
                self._reset()  # a compaction replaced shards under us: re-index
        raise CacheError(  # pragma: no cover - needs a compaction storm
            f"cache at {self.directory} keeps changing while being read; retry when no "
            f"compaction is running"
        )

    def _shards_of(self, keys: Sequence[str]) -> list[int]:
        """The shards (positions in ``_shards``) holding any of ``keys`` (held ones)."""
        index = self._index
        rows = np.fromiter((index[k] for k in dict.fromkeys(keys) if k in index),
                           dtype=np.int64)
        starts = np.fromiter((sh.start for sh in self._shards), dtype=np.int64,
                             count=len(self._shards))
        return [int(i) for i in np.unique(np.searchsorted(starts, rows, side="right") - 1)]

    def _verify(self, shard: _Shard) -> None:
        if shard.path in self._verified:
            return
        if shard.handle is not None:  # pinned: its sidecar was read when it was indexed
            if shard.sidecar is None:
                raise _corrupt(shard.path, "its .sha256 sidecar is unreadable", shard.read_only)
            expected = shard.sidecar
            try:
                # read through the file, not the mapping (whose pages would stay resident:
                # a run's peak memory); the shard is immutable and its name never reused
                actual = self._file_digest(shard.path)
            except OSError:  # compacted away since it was pinned: its mapping is what is read
                actual = _sha256_of(shard.handle)
        else:
            try:
                expected = read_sidecar(shard.path)
            except FileNotFoundError:
                raise
            except (OSError, ValueError):
                raise _corrupt(shard.path, "its .sha256 sidecar is unreadable",
                               shard.read_only) from None
            actual = self._file_digest(shard.path)  # FileNotFoundError: listed again
        if actual != expected:
            raise _corrupt(
                shard.path,
                f"sha256 {actual[:12]}... does not match {expected[:12]}... in its sidecar",
                shard.read_only,
            )
        self._verified.add(shard.path)

    def _file_digest(self, path: Path) -> str:
        """``path``'s sha256: the memo's for its current version when this run trusts the
        memo (a ``memo_dir``, ``verify`` not "full"), else hashed (and remembered)."""
        return memoised_sha256(path, memo_dir=self.memo_dir,
                               fresh=self.memo_dir is None or self.verify_mode == "full")

    # ----------------------------------------------------------------- dense twins

    def turn_blocks(self) -> TurnBlocks | None:
        """The model folder's turn blocks (:mod:`.turn_blocks`), for a run's cache (the one
        with ``twins``); None for prep's and the tools'."""
        if not self.twins:
            return None
        if self._blocks is None:
            self._blocks = TurnBlocks(self.directory, self.dim,
                                      "full" if self.verify_mode == "full" else "stamp")
        return self._blocks

    def _twin_path(self, shard: _Shard) -> Path:
        return self.directory / TWIN_DIR / f"{shard.path.name}.f32"

    def _twin(self, sid: int) -> Path | None:
        """Shard ``sid``'s dense twin, checked once a process (its stamp, or a rehash under
        ``verify="full"``) and built from the checked shard where missing or failing; None
        where the run reads the shard itself (twins off, a read-only root's shard, a twin
        that cannot be written)."""
        shard = self._shards[sid]
        if not self.twins or shard.read_only or shard.path in self._twin_off:
            return None
        path = self._twin_path(shard)
        if shard.path not in self._twin_ok:
            if not (self._twin_matches(path, shard) or self._build_twin(path, sid)):
                self._twin_off.add(shard.path)
                return None
            self._twin_ok.add(shard.path)
        return path

    def _twin_rows(self, path: Path, local: npt.NDArray[np.int64]) -> \
            npt.NDArray[np.float32] | None:
        """Rows ``local`` of a twin, read with one ``pread`` per span of rows at most
        :data:`_TWIN_GAP` apart (not mapped: a mapping's fault-around would make ~64 KB
        resident per row asked for, half a gigabyte for a persona's turns); None when it
        cannot be read whole (removed since: its shard compacted away; the caller then
        reads the shard)."""
        unique, inverse = np.unique(local, return_inverse=True)
        block = np.empty((len(unique), self.dim), dtype="<f4")
        width = self.dim * 4
        cuts = [0, *(np.flatnonzero(np.diff(unique) > _TWIN_GAP) + 1).tolist(), len(unique)]
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            for a, b in pairwise(cuts):
                low, high = int(unique[a]), int(unique[b - 1]) + 1
                if high - low == b - a:  # consecutive rows: straight into the block
                    if os.preadv(fd, [block[a:b].data], low * width) != (b - a) * width:
                        return None
                    continue
                span = np.empty((high - low, self.dim), dtype="<f4")
                if os.preadv(fd, [span.data], low * width) != (high - low) * width:
                    return None
                block[a:b] = span[unique[a:b] - low]
        except OSError:
            return None
        finally:
            os.close(fd)
        return block[inverse.reshape(-1)]

    def _twin_matches(self, path: Path, shard: _Shard) -> bool:
        """Whether the twin may be read (a damaged or wrong-sized one is removed: built
        again)."""
        return check_committed(path, "full" if self.verify_mode == "full" else "stamp",
                               size=shard.rows * self.dim * 4)

    def _build_twin(self, path: Path, sid: int) -> bool:
        """Write shard ``sid``'s vectors, decoded from the checked shard, as its twin;
        False when it cannot be written (the run then reads the shard)."""
        shard = self._shards[sid]
        self._verify(shard)
        first = int(np.searchsorted(self._rg_global, shard.start))
        groups = range(first, first + len(shard.rg_starts))
        tmp = temp_path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as out:
                for grg in groups:
                    out.write(np.ascontiguousarray(self._decode(grg), dtype="<f4").tobytes())
            commit_file(tmp, path)
            return True
        except OSError:
            tmp.unlink(missing_ok=True)
            return False

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
        rows = np.fromiter(map(index.get, keys, repeat(-1, n)), dtype=np.int64, count=n)
        if (rows < 0).any():  # the shards listed next, in order, as far as the keys need
            absent = np.flatnonzero(rows < 0)
            while len(absent) and self._pending:
                self._index_next()
                index = self._index
                found = np.fromiter((index.get(keys[i], -1) for i in absent.tolist()),
                                    dtype=np.int64, count=len(absent))
                rows[absent] = found
                absent = absent[found < 0]
        if (rows < 0).any():
            self.refresh()
            index = self._index
            rows = np.fromiter(map(index.get, keys, repeat(-1, n)), dtype=np.int64, count=n)
            absent_count = int((rows < 0).sum())
            if absent_count:
                raise self._missing_error(keys, absent_count)
        groups = np.searchsorted(self._rg_global, rows, side="right") - 1
        order = np.argsort(groups, kind="stable")
        sorted_groups = groups[order]
        bounds = np.flatnonzero(np.diff(sorted_groups)) + 1
        twins: dict[int, Path | None] = {}
        by_twin: dict[int, list[npt.NDArray[np.int64]]] = {}
        for chunk in np.split(order, bounds):
            grg = int(groups[chunk[0]])
            sid = self._rg_owner[grg][0]
            if sid not in twins:
                twins[sid] = self._twin(sid)
            if twins[sid] is not None:
                by_twin.setdefault(sid, []).append(chunk)  # read below, a shard at a time
            else:
                vectors = self._row_group(grg)
                out[chunk] = vectors[rows[chunk] - self._rg_global[grg]]
        for sid, chunks in by_twin.items():
            where = np.concatenate(chunks)
            path = twins[sid]
            got = None if path is None else self._twin_rows(
                path, rows[where] - self._shards[sid].start)
            if got is None:  # gone since it was checked: the shard, row group by row group
                self._twin_off.add(self._shards[sid].path)
                for chunk in chunks:
                    grg = int(groups[chunk[0]])
                    out[chunk] = self._row_group(grg)[rows[chunk] - self._rg_global[grg]]
            else:
                out[where] = got
        return out
