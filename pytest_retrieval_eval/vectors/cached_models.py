"""The models a set of cache roots holds: listing, coverage of keys, uncommitted shards, and
model folders that lost their manifest."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ..errors import CacheError
from ..io.checksums import SIDECAR_SUFFIX
from .shards import (
    _ATTEMPTS,
    _FINGERPRINT_RE,
    _SHARD_RE,
    MODEL_NAME_KEY,
    ModelInfo,
    _committed_shards,
    _pq,
    _read_keys,
    _read_manifest,
)


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
                keys.update(_read_keys(path, None, read_only, fingerprint=directory.name)[0])
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


def unlisted_folders(roots: Sequence[Path]) -> list[tuple[Path, int, str | None]]:
    """Model folders holding committed shards but no ``manifest.json``: listings and
    ``--no-model`` leave them out (their model cannot be checked), so what names no model
    names them. Each with its committed shard count and the model its first shard names
    (Parquet metadata; None when unreadable)."""
    found: list[tuple[Path, int, str | None]] = []
    for _root, directory in _model_dirs(roots):
        if (directory / "manifest.json").exists():
            continue
        held = _committed_shards(directory)
        if not held:
            continue
        name: str | None = None
        try:
            meta = _pq().read_schema(held[0]).metadata or {}
            raw = meta.get(MODEL_NAME_KEY)
            name = raw.decode("utf-8", "replace") if raw else None
        except Exception:  # a damaged shard: readers say so where they read it
            name = None
        found.append((directory, len(held), name))
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
