"""The vector cache's on-disk format: layout constants, paths, manifests, shard reading.

What :mod:`~pytest_retrieval_eval.vectors.cache` builds on (its module docstring describes the
layout): the manifest read and checked against a model, a shard's ``key`` column and row
groups read and checked, a shard pinned (memory-mapped, sidecar read) for one reader's
generation, and the atomic small-file write.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CacheError
from ..io.checksums import SIDECAR_SUFFIX, read_sidecar
from ..io.user_files import TargetRefused, parse_json, read_small

#: Version of the on-disk layout written into every manifest.
FORMAT_VERSION = 1
#: Rows per Parquet row group; the unit in which vectors are read back.
ROW_GROUP_ROWS = 4096
#: Rows a compacted shard aims at (~50 MB at dim 384): a reader hashes a whole shard before
#: serving from it, so shards stay small enough that a run touching few personas stays cheap.
COMPACT_ROWS = 32768
#: The most bytes a cache manifest may hold (one is about 400 bytes): a bigger one is refused.
MANIFEST_LIMIT = 256 * 1024
#: Default bound of decoded row groups kept in memory per cache object.
DEFAULT_MAX_CACHED_BYTES = 512 * 1024 * 1024
#: The folder (in a model folder) of the shards' dense twins (:mod:`.cache`).
TWIN_DIR = "dense"

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
#: Parquet key-value metadata of every shard: the fingerprint (and name) of the model whose
#: vectors it holds, checked on every read, so a shard copied into another model's folder
#: is never served (issue 23.4). A shard without it (written by an older release) is refused
#: like a corrupt one: prep quarantines it and re-embeds what it held.
FINGERPRINT_KEY = b"pytest_retrieval_eval.fingerprint"
MODEL_NAME_KEY = b"pytest_retrieval_eval.model"

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
    """The manifest of a model folder, None when it has none. Read with bounds: a regular
    file of at most :data:`MANIFEST_LIMIT` bytes (a FIFO never blocks), any nesting refused
    in one line."""
    path = directory / "manifest.json"
    try:
        raw = read_small(path, MANIFEST_LIMIT)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except TargetRefused as exc:
        raise CacheError(f"cache manifest {path} cannot be read ({exc.reason}); delete "
                         f"{directory} and run prep again") from None
    except ValueError as exc:
        raise CacheError(f"cache manifest {path} is no manifest ({exc}); delete {directory} "
                         f"and run prep again") from None
    except OSError as exc:
        raise CacheError(
            f"cache manifest {path} cannot be read ({exc.strerror or exc}); check its "
            f"permissions or delete {directory}"
        ) from None
    try:
        info = parse_json(raw)
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


def shard_metadata(fingerprint: str, name: str) -> dict[bytes, bytes]:
    """The key-value metadata a shard of model ``name`` (``fingerprint``) is written with."""
    return {FINGERPRINT_KEY: fingerprint.encode("utf-8"), MODEL_NAME_KEY: name.encode("utf-8")}


def _check_model(path: Path, schema: Any, fingerprint: str, read_only: bool,
                 name: str | None = None) -> None:
    """Refuse (as corrupt) a shard that names another model, or none, in its metadata."""
    meta = schema.metadata or {}
    found = meta.get(FINGERPRINT_KEY)
    fix = _FIX_READ_ONLY if read_only else _FIX_WRITABLE
    if found is None:
        raise CacheError(
            f"vector cache shard {path} does not record which model made it (written before "
            f"shards named their model, or not by pytest-retrieval-eval), so its vectors "
            f"cannot be trusted for model {fingerprint[:12]}; {fix}")
    found_fp = found.decode("utf-8", "replace")
    if found_fp != fingerprint:
        found_name = meta.get(MODEL_NAME_KEY, b"?").decode("utf-8", "replace")
        expected = f"{name} " if name else ""
        raise CacheError(
            f"vector cache shard {path} holds vectors of model {found_name} (fingerprint "
            f"{found_fp[:12]}), not of this folder's model {expected}(fingerprint "
            f"{fingerprint[:12]}); vectors of one model are never served for another: {fix}")


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
               source: Any = None, *, fingerprint: str,
               name: str | None = None, keys_too: bool = True
               ) -> tuple[list[str], list[int]]:
    """A shard's keys (its ``key`` column only) and rows per row group, read from ``source``
    (an open handle of it) when given, else from ``path``; ``keys_too`` False: only its
    footer is read and checked (model, schema), and nothing is returned.

    Raises FileNotFoundError when the shard vanished (compaction), CacheError when it is
    truncated, not Parquet, has the wrong schema, or names another model than
    ``fingerprint`` (model ``name``, for the message) or none in its metadata.
    """
    pq = _pq()
    try:
        pf = (pq.ParquetFile(path, memory_map=True) if source is None
              else pq.ParquetFile(source))
        _check_model(path, pf.schema_arrow, fingerprint, read_only, name)
        if dim is not None:
            _check_schema(path, pf.schema_arrow, dim, read_only)
        if keys_too is False:
            return [], []
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


# --------------------------------------------------------------------------- pinned shards


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
