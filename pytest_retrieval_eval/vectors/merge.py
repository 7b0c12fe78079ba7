"""``retrieval-eval cache merge DIR... [--into DIR]``: combine prepared caches, checked.

The vector cache is content-addressed (a key is the sha256 of the text embedded, a model
directory is named by the model's fingerprint), so caches made on different machines, e.g. the
N slices of ``retrieval-eval prep --shard I/N``, combine by copying: a key held twice holds the
same model's vector of the same text.

A merge is a checked copy, in two passes:

1. **Check everything first.** A source that is the target itself, or a model directory
   with shards but no manifest, is refused. For each source and each model directory in it:
   the manifest names the directory's fingerprint, every shard names that model in its
   Parquet metadata, every source (and the target) agrees on the model's
   dimension, and every committed shard matches its ``.sha256`` sidecar and has the cache's
   schema (:meth:`VectorCache.verify`). A failure is one line naming the file; nothing has been
   written yet.
2. **Copy what the target lacks**, through :meth:`VectorCache.add`: one new shard per model
   and source chunk, written to a temp file, fsynced, renamed, then committed by its sidecar,
   under the target's lock. An interrupt leaves only whole, committed shards behind; running
   the merge again copies what is still missing.

Only vectors are merged: the corpus and the bm25 terms of a dataset are rebuilt from the
dataset on first use in a few seconds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CacheError
from .cache import VectorCache, list_models
from .prep import COMPACT_AFTER_SHARDS
from .shards import _committed_shards

__all__ = ["MergeResult", "MergedModel", "merge_caches"]

Progress = Callable[[str, int, "int | None"], None]

#: Vectors read from a source and written to the target at a time (one target shard each).
COPY_ROWS = 32768


@dataclass
class MergedModel:
    """What a merge did for one model (fingerprint)."""

    name: str
    fingerprint: str
    dim: int
    shards: int = 0  # source shards verified
    copied: int = 0  # vectors the target lacked, now copied
    present: int = 0  # vectors the target held already (or an earlier source gave)


@dataclass
class MergeResult:
    models: list[MergedModel] = field(default_factory=list)


def _sources(sources: Sequence[Path], target: Path) -> list[Path]:
    seen: set[Path] = set()
    out: list[Path] = []
    for source in sources:
        path = Path(source)
        if not path.is_dir():
            raise CacheError(f"cache merge: {path} is not a folder; give the cache folders "
                             f"that prep --cache wrote")
        if not (path / "vectors").is_dir():
            raise CacheError(f"cache merge: {path} holds no vectors/ folder, so it is not a "
                             f"prepared cache; give the folder passed to prep --cache")
        resolved = path.resolve()
        if resolved == target.resolve():
            raise CacheError(f"cache merge: source {path} and the target {target} are the same "
                             f"folder; a cache is never merged into itself: pass another "
                             f"--into, or leave {path} out of the sources")
        if resolved in seen:
            continue  # a source named twice: nothing more to copy
        seen.add(resolved)
        out.append(path)
    return out


def _refuse_unlisted(root: Path) -> None:
    """A model folder holding committed shards but no manifest.json cannot be checked, and
    leaving it out would drop its vectors at exit 0: refused in one line."""
    base = root / "vectors"
    for name in sorted(os.listdir(base)):
        directory = base / name
        if not directory.is_dir() or (directory / "manifest.json").exists():
            continue
        held = _committed_shards(directory)
        if held:
            raise CacheError(
                f"cache merge: {directory} holds {len(held)} shard(s) but no manifest.json, so "
                f"its model cannot be checked and its vectors would be left out; copy "
                f"manifest.json back from the cache that made it (or delete {directory} and "
                f"prep that model again), then merge")


def _check_source(root: Path, progress: Progress | None = None
                  ) -> list[tuple[dict[str, Any], VectorCache]]:
    """Every model of ``root``, each shard verified now (CacheError names the first bad
    file)."""
    _refuse_unlisted(root)
    caches = []
    for info in list_models([root]):  # also refuses a manifest naming another fingerprint
        fingerprint = str(info.get("fingerprint", ""))
        try:
            dim = int(info.get("dim", 0))
        except (TypeError, ValueError):
            dim = 0
        if dim < 1:
            raise CacheError(f"cache merge: manifest of model {fingerprint[:12]} in {root} "
                             f"gives no valid dim; delete {root / 'vectors' / fingerprint} "
                             f"and prep it again")
        info = {k: v for k, v in info.items() if k not in ("vectors", "roots", "format")}
        cache = VectorCache(root, fingerprint, dim, info)
        if progress is not None:
            progress(f"verify {root}", 0, None)
        cache.verify()
        caches.append((info, cache))
    return caches


def merge_caches(sources: Sequence[Path], target: Path,
                 progress: Progress | None = None) -> MergeResult:
    """Verify every source, then copy into ``target`` the vectors it lacks.

    ``progress(label, done, total)`` reports each source's check and the vectors copied."""
    target = Path(target)
    roots = _sources(sources, target)
    checked = [(root, _check_source(root, progress)) for root in roots]  # pass 1: no write
    models: dict[str, MergedModel] = {}
    targets: dict[str, VectorCache] = {}
    for _root, caches in checked:
        for info, source in caches:
            fp = source.fingerprint
            merged = models.get(fp)
            if merged is not None and merged.dim != source.dim:
                raise CacheError(
                    f"cache merge: model {fp[:12]} has dim {merged.dim} in one source and "
                    f"{source.dim} in {source.directory}; a fingerprint names one model, so "
                    f"one of them is damaged: delete it and prep again")
            if merged is None:
                models[fp] = MergedModel(source.name, fp, source.dim)
                # Refuses now (before any copy) a target made by another model in this dir.
                targets[fp] = VectorCache(target, fp, source.dim, info)
            models[fp].shards += len(source.own_shards())
    for _root, caches in checked:  # pass 2: copy
        for _info, source in caches:
            into = targets[source.fingerprint]
            merged = models[source.fingerprint]
            keys = source.keys()
            lacking = into.missing(keys)
            merged.present += len(keys) - len(lacking)
            label = f"copy {source.directory}"
            if progress is not None and lacking:
                progress(label, 0, len(lacking))
            for start in range(0, len(lacking), COPY_ROWS):
                chunk = lacking[start : start + COPY_ROWS]
                into.add(chunk, source.get(chunk))
                merged.copied += len(chunk)
                if progress is not None:
                    progress(label, start + len(chunk), len(lacking))
    for into in targets.values():  # many sources, many small shards: merge them (atomic)
        into.create()  # the target exists even when nothing was copied into it
        if len(into.own_shards()) > COMPACT_AFTER_SHARDS:
            into.compact()
    return MergeResult(sorted(models.values(), key=lambda m: (m.name, m.fingerprint)))
