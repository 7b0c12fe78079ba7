"""A store's own texts embedded with the run's model: what ``persona.embed(texts)`` (and a
``cmd:`` store's ``{"op": "embed"}``) answers.

Vectors are read from the run's content-addressed cache (keyed by ``text_key(text)``, the
texts embedded as passages, no query prefix). In the model lane the texts the cache lacks are
embedded once, in one batch, and committed to it, so a later ``--no-model`` run finds them;
under ``--no-model`` (no embedder in hand) a missing text is one line naming the model lane.
The milliseconds spent are kept per process (:attr:`StoreEmbedding.spent_ms`), so the harness
reports them apart from the store's ingest and query times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..data.pairs import text_key
from ..errors import CacheError

if TYPE_CHECKING:
    from .cache import VectorCache
    from .prep import EmbedderLike

__all__ = ["StoreEmbedding"]


class StoreEmbedding:
    """``persona.embed`` of one process: the run's cache and, in the model lane, its embedder."""

    def __init__(self, cache: VectorCache, embedder: EmbedderLike | None,
                 model_name: str) -> None:
        self.cache = cache
        self.embedder = embedder
        self.model_name = model_name
        #: Milliseconds spent answering so far (the harness takes differences per item).
        self.spent_ms = 0.0
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        begun = time.perf_counter()
        try:
            return self._vectors(texts)
        finally:
            with self._lock:
                self.spent_ms += (time.perf_counter() - begun) * 1000.0

    def of_keys(self, keys: Sequence[str],
                texts: Callable[[], Sequence[str]]) -> npt.NDArray[np.float32]:
        """As calling it with the texts whose keys are ``keys`` (the harness's own rows,
        keyed when they were made): ``texts()`` is read only for a text the cache lacks
        (model lane)."""
        begun = time.perf_counter()
        try:
            if keys:
                try:
                    return self.cache.get(keys)  # one lookup of the keys, as a rule
                except CacheError:
                    if not self.cache.missing(keys):
                        raise  # a damaged shard, not a missing vector
            return self._vectors(texts(), list(keys))
        finally:
            with self._lock:
                self.spent_ms += (time.perf_counter() - begun) * 1000.0

    def of_blocks(self, blocks: Sequence[bytes], counts: Sequence[int], keys: Sequence[str],
                  texts: Callable[[], Sequence[str]]) -> npt.NDArray[np.float32]:
        """As :meth:`of_keys` for turn rows laid out a session at a time (``blocks[i]``: a
        session's block digest, ``counts[i]`` its rows, ``keys`` every row's text key):
        read from the cache's turn blocks (:mod:`.turn_blocks`) when it holds every
        session's, else by key, and the blocks it lacked kept for the next run."""
        kept = self.cache.turn_blocks()
        if kept is None:
            return self.of_keys(keys, texts)
        begun = time.perf_counter()
        try:
            got = kept.read(blocks, counts)
        finally:
            with self._lock:
                self.spent_ms += (time.perf_counter() - begun) * 1000.0
        if got is not None:
            return got
        got = self.of_keys(keys, texts)
        kept.add(blocks, counts, got)
        return got

    def flush(self) -> None:
        """Write the turn blocks this process read by key (its end)."""
        kept = self.cache.turn_blocks()
        if kept is not None:
            kept.flush()

    def _vectors(self, texts: Sequence[str],
                 keys: list[str] | None = None) -> npt.NDArray[np.float32]:
        if not all(isinstance(text, str) for text in texts):
            raise TypeError("persona.embed takes a list of strings")
        if keys is None:
            keys = [text_key(text) for text in texts]
        if not keys:
            return np.empty((0, self.cache.dim), dtype=np.float32)
        missing = self.cache.missing(keys)
        if missing:
            if self.embedder is None:
                raise CacheError(
                    f"persona.embed: {len(missing)} of {len(set(keys))} texts are not in the "
                    f"vector cache of {self.model_name}; run once in the model lane (without "
                    f"--no-model) to embed and cache them")
            with self._lock:  # one embedding at a time per process (the model is shared)
                missing = self.cache.missing(keys)
                if missing:
                    wanted = set(missing)
                    chosen = dict.fromkeys(t for t, k in zip(texts, keys, strict=True)
                                           if k in wanted)
                    order = list(chosen)
                    vectors = np.asarray(self.embedder.embed(order), dtype=np.float32)
                    self.cache.add([text_key(t) for t in order], vectors)
        return self.cache.get(keys)
