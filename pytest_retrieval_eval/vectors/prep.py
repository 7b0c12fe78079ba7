"""Prep: embed every text of a corpus that the vector cache lacks, resumably.

The texts are the unique session contents (passages, embedded as given) and the unique
questions (queries, embedded with the model's query prefix). A query is cached under the key of
the exact text embedded, ``text_key(prefix + question)`` (:func:`query_key`), so the model-free
lane finds it again from the question and the model's manifest alone, and a prefix change never
serves a stale vector.

Work goes in chunks in pair order (a persona's texts end up next to each other in the cache's
row groups) and every chunk is committed with :meth:`VectorCache.add` as soon as it is embedded:
an interrupted prep (Ctrl-C, SIGKILL) loses at most the chunk in flight, and the next prep embeds
only what is still missing. Two preps of one model on one cache take turns
(:meth:`VectorCache.prep_turn`): the second waits, then embeds only what the first left.
Before anything, :meth:`VectorCache.repair` quarantines corrupt shards (with a
:class:`~pytest_retrieval_eval.vectors.cache.CacheWarning`) so that their vectors are simply
embedded again.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ..data.pairs import text_key
from ..errors import CacheError, ModelError
from .cache import CacheWarning, VectorCache
from .cache import query_key as query_key  # moved to cache.py; kept here by name
from .cache import query_prefix as query_prefix
from .cache import query_text as query_text
from .cached_models import models_holding

__all__ = [
    "CachedOnly",
    "PrepInterrupted",
    "PrepStats",
    "cached_model",
    "cached_stats",
    "needed_keys",
    "query_key",
    "query_prefix",
    "query_text",
    "run_prep",
    "shard_of",
]

Progress = Callable[[str, int, "int | None"], None]
#: Progress label (sent once, as ``(WAIT_LABEL, 0, None)``) while another prep of the same
#: model holds the cache.
WAIT_LABEL = "waiting for another prep of this model"

#: More shards than this in the writable root after a prep, and prep compacts them.
COMPACT_AFTER_SHARDS = 16


class _Pair(Protocol):
    @property
    def question(self) -> str: ...
    @property
    def text_keys(self) -> tuple[str, ...]: ...


class CorpusLike(Protocol):
    """What prep needs of :class:`corpus.Corpus`."""

    @property
    def pairs(self) -> Sequence[_Pair]: ...
    @property
    def stats(self) -> Mapping[str, int]: ...
    def texts(self, keys: Sequence[str]) -> list[str]: ...


class EmbedderLike(Protocol):
    """What prep needs of :class:`embedding.Embedder`."""

    name: str
    fingerprint: str
    dim: int

    def info(self) -> dict[str, object]: ...
    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> npt.NDArray[np.float32]: ...


@dataclass(frozen=True)
class PrepStats:
    """What one prep did."""

    slots: int  # session slots in the dataset (rows over all personas)
    unique_texts: int  # unique session texts + unique queries (keys needed)
    embedded_now: int
    from_cache: int
    seconds: float
    quarantined: tuple[str, ...] = ()  # corrupt shards moved aside (their vectors re-embedded)
    other_shards: int = 0  # missing texts left to the other slices of a --shard I/N prep


EmbedMissing = Callable[[Sequence[str], Mapping[str, "str | None"], CorpusLike], None]
"""An alternative embedding loop for :func:`run_prep`: (missing keys, plan, corpus)."""


class PrepInterrupted(KeyboardInterrupt):
    """Ctrl-C during prep; ``saved`` vectors were committed by this prep before it."""

    def __init__(self, saved: int, remaining: int) -> None:
        super().__init__(f"prep interrupted: {saved} vectors saved, {remaining} still missing")
        self.saved = saved
        self.remaining = remaining


def shard_of(key: str, count: int) -> int:
    """The slice (1..count) of ``retrieval-eval prep --shard I/count`` that embeds the text
    whose content key is ``key``: its sha256 read as a number, modulo ``count``. Fixed by the
    text alone, so N machines that each run one slice embed every missing text exactly once,
    whatever order they run in and whatever each one's cache already holds."""
    return int(key, 16) % count + 1


def _plan(corpus: CorpusLike, prefix: str) -> tuple[dict[str, str | None], int]:
    """Needed keys -> query text (None for a passage), and the slot count. In pair order,
    each pair's query and session texts first, then every pair's further texts (the turn
    texts of a ``+unit:turn`` prep: :class:`..data.turn_texts.WithTurnTexts` extends each
    pair's keys past its sessions): shards are written in this order, so a run that reads
    session vectors only reads the shards that hold them, never row groups of turns."""
    needed: dict[str, str | None] = {}
    slots = 0
    later: list[Sequence[str]] = []
    for pair in corpus.pairs:
        text = prefix + pair.question
        needed.setdefault(text_key(text), text)
        keys = pair.text_keys
        slots += len(keys)
        sessions = len(getattr(pair, "session_ids", keys))
        for key in keys[:sessions]:
            # A passage whose text equals a (prefixed) query's is one text: one vector.
            needed.setdefault(key, None)
        if len(keys) > sessions:
            later.append(keys[sessions:])
    for rest in later:
        for key in rest:
            needed.setdefault(key, None)
    return needed, slots


def needed_keys(corpus: CorpusLike, embedder: EmbedderLike) -> list[str]:
    """Every key a prep of ``corpus`` with ``embedder`` needs: passages and prefixed queries."""
    return list(_plan(corpus, query_prefix(embedder))[0])


def run_prep(
    corpus: CorpusLike,
    embedder: EmbedderLike,
    cache: VectorCache,
    progress: Progress | None = None,
    *,
    chunk_size: int = 1024,
    shard: tuple[int, int] | None = None,
    embed: EmbedMissing | None = None,
) -> PrepStats:
    """Embed what ``cache`` lacks of ``corpus`` with ``embedder``; commit chunk by chunk.

    ``progress("embed", done, total)`` reports texts embedded so far of those missing. A
    KeyboardInterrupt becomes :class:`PrepInterrupted` (still a KeyboardInterrupt) carrying
    how many vectors this call saved; nothing half-written stays behind.

    ``shard=(i, n)`` embeds only the missing texts of slice ``i`` of ``n`` (:func:`shard_of`).
    ``embed`` replaces the local embedding loop (``retrieval-eval prep --ray``): it is called
    with the missing keys, the plan (key -> query text, None for a passage) and the corpus,
    under the same turn lock, and commits through ``cache.add`` itself.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    if embedder.fingerprint != cache.fingerprint or embedder.dim != cache.dim:
        raise ValueError(
            f"embedder {embedder.name} ({embedder.fingerprint[:12]}, dim {embedder.dim}) does "
            f"not match the cache ({cache.fingerprint[:12]}, dim {cache.dim})"
        )
    start = time.perf_counter()
    added_before = cache.added
    total = 0
    try:
        quarantined = cache.repair()
        for path in quarantined:
            warnings.warn(
                f"vector cache shard {path} was corrupt; moved it to {path.name}.corrupt and "
                f"re-embedding what it held",
                CacheWarning,
                stacklevel=2,
            )
        needed, slots = _plan(corpus, query_prefix(embedder))
        missing = _slice(cache.missing(list(needed)), shard)
        total = len(missing)
        if missing:

            def waiting() -> None:
                if progress is not None:
                    progress(WAIT_LABEL, 0, None)

            # One prep of a model at a time: a second one waits, then embeds what is left.
            with cache.prep_turn(waiting):
                missing = _slice(cache.missing(list(needed)), shard)
                total = len(missing)
                if embed is not None:
                    embed(missing, needed, corpus)
                else:
                    _embed_missing(missing, needed, corpus, embedder, cache, progress,
                                   chunk_size)
        elif progress is not None:
            progress("embed", 0, 0)
        saved = cache.added - added_before
        if saved and len(cache.own_shards()) > COMPACT_AFTER_SHARDS:
            cache.compact()  # atomic: an interrupt leaves the small shards in place
    except KeyboardInterrupt as exc:
        # Counted by the cache at its commit point: right even when Ctrl-C lands in add().
        saved = cache.added - added_before
        raise PrepInterrupted(saved, max(total - saved, 0)) from exc
    others = 0 if shard is None else len(cache.missing(list(needed)))
    return PrepStats(
        slots=int(corpus.stats.get("slots", slots)),
        unique_texts=len(needed),
        embedded_now=saved,
        from_cache=len(needed) - total - others,
        seconds=time.perf_counter() - start,
        quarantined=tuple(str(p) for p in quarantined),
        other_shards=others,
    )


def _slice(missing: list[str], shard: tuple[int, int] | None) -> list[str]:
    if shard is None:
        return missing
    index, count = shard
    return [key for key in missing if shard_of(key, count) == index]


def _embed_missing(missing: Sequence[str], needed: Mapping[str, str | None], corpus: CorpusLike,
                   embedder: EmbedderLike, cache: VectorCache, progress: Progress | None,
                   chunk_size: int) -> None:
    total = len(missing)
    if progress is not None:
        progress("embed", 0, total)
    with _ctrl_c_kept() as interrupted:
        for offset in range(0, total, chunk_size):
            chunk = list(missing[offset : offset + chunk_size])
            vectors = _embed_chunk(chunk, needed, corpus, embedder, progress, offset, total)
            cache.add(chunk, vectors)
            if progress is not None:
                progress("embed", offset + len(chunk), total)
            if interrupted():
                raise KeyboardInterrupt


@contextlib.contextmanager
def _ctrl_c_kept() -> Iterator[Callable[[], bool]]:
    """Ctrl-C during the embedding loop is never lost: Python raises it wherever the main
    thread is, and one raised in a finalizer (a dropped file lock's ``__del__``: "Exception
    ignored in ...") is swallowed, so the prep ran on to the end. The handler also records
    it; the loop then raises it after the chunk it was in. Only on the main thread, and only
    over Python's own handler (a program's handler stays as it is)."""
    hit: list[bool] = []
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield lambda: False
        return

    def handler(signum: int, frame: object) -> None:
        hit.append(True)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: bool(hit)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _embed_chunk(
    chunk: Sequence[str],
    needed: Mapping[str, str | None],
    corpus: CorpusLike,
    embedder: EmbedderLike,
    progress: Progress | None,
    done: int,
    total: int,
) -> npt.NDArray[np.float32]:
    """Vectors for ``chunk`` in its order: passages' texts come from the corpus, queries'
    texts (prefix included) from the plan."""
    passages = [i for i, key in enumerate(chunk) if needed[key] is None]
    queries = [i for i, key in enumerate(chunk) if needed[key] is not None]
    texts: list[str] = [""] * len(chunk)
    if passages:
        for i, text in zip(passages, corpus.texts([chunk[i] for i in passages]), strict=True):
            texts[i] = text
    for i in queries:
        texts[i] = needed[chunk[i]] or ""
    counter = [done]

    def tick(n: int) -> None:
        counter[0] += n
        if progress is not None:
            progress("embed", min(counter[0], total), total)

    vectors = np.asarray(embedder.embed(texts, tick if progress is not None else None),
                         dtype=np.float32)
    if vectors.shape != (len(chunk), embedder.dim):
        raise ValueError(
            f"embedder {embedder.name} returned shape {vectors.shape} for {len(chunk)} texts"
        )
    return vectors


# --------------------------------------------------------------------------- no model needed


def cached_stats(corpus: CorpusLike, cache: VectorCache, prefix: str,
                 shard: tuple[int, int] | None = None) -> PrepStats | None:
    """What a prep would report when ``cache`` holds every vector it needs, without writing
    or repairing anything (no model in hand); None when some vector is missing, or when the
    cache does not read back whole (every shard checked against its sidecar, one vector read
    at the manifest's width): then the caller loads the model and runs :func:`run_prep`,
    which repairs what can be repaired and names what cannot."""
    start = time.perf_counter()
    needed, slots = _plan(corpus, prefix)
    keys = list(needed)
    try:
        cache.verify()
        missing = cache.missing(keys)
        if _slice(missing, shard) or not keys:
            return None
        absent = set(missing)
        held = next((k for k in keys if k not in absent), None)  # one vector reads back
        if held is None or cache.get([held]).shape != (1, cache.dim):
            return None
    except (CacheError, ValueError):
        return None
    return PrepStats(slots=int(corpus.stats.get("slots", slots)), unique_texts=len(keys),
                     embedded_now=0, from_cache=len(keys) - len(missing),
                     seconds=time.perf_counter() - start, other_shards=len(missing))


class CachedOnly:
    """An :class:`EmbedderLike` standing for a model whose vectors the cache already holds
    (:func:`cached_model`, :func:`cached_stats`): its name, fingerprint, dim and manifest,
    nothing loaded; it never embeds."""

    def __init__(self, info: Mapping[str, object]) -> None:
        self._info = {k: v for k, v in info.items() if k not in ("roots", "vectors")}
        self.name = str(info.get("name", "?"))
        self.fingerprint = str(info["fingerprint"])
        self.dim = int(info["dim"])  # type: ignore[call-overload]

    def info(self) -> dict[str, object]:
        return dict(self._info)

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None,
              ) -> npt.NDArray[np.float32]:
        raise RuntimeError(f"{self.name}: not loaded, so {len(texts)} text(s) cannot be "
                           "embedded; load the model (load_embedder)")


def _scope(corpus: CorpusLike, config: Any, shard: tuple[int, int] | None) -> list[str]:
    """The keys of every text this prep needs (of its ``shard``, if any)."""
    needed = list(_plan(corpus, str(getattr(config, "query_prefix", "")))[0])
    return needed if shard is None else _slice(needed, shard)


def models_ready(roots: Sequence[Any], config: Any, corpus: CorpusLike, *,
                 shard: tuple[int, int] | None = None) -> list[str]:
    """The names of the models whose vectors ``roots`` hold for every text this prep needs
    (of its ``shard``): what to suggest when the asked model cannot be loaded."""
    try:
        holding = models_holding(roots, _scope(corpus, config, shard))
    except CacheError:
        return []
    return sorted({str(info["name"]) for info in holding if info.get("name")})


def cached_model(roots: Sequence[Any], spec: str, config: Any, corpus: CorpusLike, *,
                 shard: tuple[int, int] | None = None,
                 memo_dir: Any = None) -> dict[str, object] | None:
    """The model ``spec`` under ``config`` when ``roots`` already hold every vector this prep
    needs (of its ``shard``, if any), else None: then the model must be loaded.

    When the model's files are on this machine (a folder, or the local Hugging Face cache:
    looked up offline, no socket), their hashes give the exact fingerprint
    (:func:`.embedding.recipe_fingerprint`) without loading the model. When they are not, a
    cached model of that name with the same pooling, max length and query prefix stands for
    it (its vectors are what this spec made when they were embedded)."""
    from .embedding import recipe_fingerprint, resolve_model, resolved

    scope = _scope(corpus, config, shard)
    fingerprint: str | None = None
    try:
        files = resolve_model(spec, offline=True, memo_dir=memo_dir)
        fingerprint = recipe_fingerprint(files.model_sha256, files.tokenizer_sha256,
                                         resolved(config, files)[0])
    except ModelError:
        fingerprint = None
    try:
        holding = models_holding(roots, scope)
    except CacheError:
        return None  # a damaged cache: the model lane's prep repairs it or names it
    for info in holding:
        if fingerprint is not None:
            if info.get("fingerprint") == fingerprint:
                return dict(info)
        elif (info.get("name") == spec.strip()
              and info.get("pooling") == config.pooling
              and (config.max_length is None  # the model's own: whatever it named
                   or info.get("max_length") == config.max_length)
              and info.get("query_prefix", "") == config.query_prefix):
            return dict(info)
    return None
