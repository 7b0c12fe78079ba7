"""Which cached models cover a corpus's texts, remembered per cache listing.

``--no-model`` picks the one model whose vectors cover every text the run reads
(:func:`.cached_models.models_holding`). Asking means listing every key the corpus needs
(with ``+unit:turn``, every turn of every persona: about 4.5 million slots on LongMemEval_M,
read from each persona's kept turn rows) and every key the shards hold: seconds, and most of a
turn run's peak memory, spent at every start on an answer that only changes when the corpus
or the cache does.

:func:`covering_models` keeps the answer in ``<memo>/coverage/<id>.json``, where ``<id>``
names the corpus as built (the corpus file's version, its format, the subset's pairs, whether
turn texts are asked for) and the record holds the cache's listing when it was asked: every
model folder of every root, its manifest's file version and its committed shard names. Shards
are immutable and their names never reused, so while the listing is the same, so is what they
hold: the answer is read back. Any change (a prep, a compaction, a pull, another model)
changes the listing, and the answer is computed again. What the answer trusts is the listing,
not the shards' bytes: those are checked as every run checks them (:meth:`.cache.
VectorCache.verify`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..io.checksums import file_version
from .cached_models import _model_dirs, models_holding
from .shards import ModelInfo, _committed_shards

__all__ = ["COVERAGE_DIR", "covering_models", "listing"]

#: The folder of the answers, under the cache's memo folder.
COVERAGE_DIR = "coverage"
#: Bumped whenever what an answer's id or record holds changes.
FORMAT = 1


def listing(roots: Sequence[Path]) -> list[list[Any]]:
    """Every model folder of ``roots`` with its manifest's file version (None: none) and its
    committed shard names, in a stable order."""
    out: list[list[Any]] = []
    for _root, directory in _model_dirs(roots):
        try:
            manifest: list[Any] | None = list(file_version(directory / "manifest.json"))
        except OSError:
            manifest = None
        out.append([str(directory), manifest, [p.name for p in _committed_shards(directory)]])
    return out


def corpus_id(corpus: Any) -> str | None:
    """The id of the texts ``corpus`` needs vectors for: the corpus file's version and
    format, the subset's pairs, and whether turn texts are added (``adds_turns``, with the
    turn rows' format); None when the corpus has no file to name it by."""
    from ..data.corpus import FORMAT_VERSION

    turns: int | None = None
    subset: list[int] | None = None
    node = corpus
    for _ in range(8):  # a corpus wraps at most a couple of others
        if getattr(node, "adds_turns", False):
            turns = int(getattr(node, "turns_format", 0))
        positions = getattr(getattr(node, "subset", None), "positions", None)
        if positions is not None and subset is None:
            subset = [int(i) for i in positions]
        inner = getattr(node, "corpus", None)
        if inner is None:
            break
        node = inner
    path = getattr(node, "path", None)
    if path is None:
        return None
    try:
        version = list(file_version(Path(path)))
    except OSError:
        return None
    payload = json.dumps(["coverage", FORMAT, FORMAT_VERSION, version, turns, subset],
                         separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def covering_models(roots: Sequence[Path], corpus: Any, needed: Any,
                    memo_dir: Path | None) -> tuple[list[ModelInfo], list[str] | None]:
    """The models whose vectors across ``roots`` cover every key ``needed(corpus)`` lists,
    and those keys (None when the answer was read back: the keys were not listed).
    ``memo_dir``: the cache's memo folder (None: always computed, nothing written)."""
    record = None
    cid = corpus_id(corpus) if memo_dir is not None else None
    now = listing(roots) if cid is not None else None
    if cid is not None and memo_dir is not None:
        record = Path(memo_dir) / COVERAGE_DIR / f"{cid}.json"
        try:
            kept = json.loads(record.read_text(encoding="utf-8"))
            if isinstance(kept, dict) and kept.get("listing") == now and isinstance(
                    kept.get("holding"), list):
                return [dict(m) for m in kept["holding"] if isinstance(m, dict)], None
        except (OSError, ValueError):
            pass
    keys: list[str] = needed(corpus)
    holding = models_holding(roots, keys)
    if record is not None:
        tmp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
        try:  # best effort: an answer not kept is only asked again
            record.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"listing": now, "holding": holding, "keys": len(keys)},
                                      default=str), encoding="utf-8")
            os.replace(tmp, record)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
    return holding, keys
