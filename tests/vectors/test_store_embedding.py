"""``persona.embed`` (issue 36 section 5): the run's model and cache for a store's own texts.
Model lane: missing texts embedded once and cached, so a later model-free run finds them;
model-free: a text the cache lacks is one line naming the model lane."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.data.pairs import text_key
from pytest_retrieval_eval.errors import CacheError, RetrievalEvalError
from pytest_retrieval_eval.retrievers import Persona
from pytest_retrieval_eval.vectors.cache import VectorCache
from pytest_retrieval_eval.vectors.store_embedding import StoreEmbedding
from tests.vectors.test_prep import FakeEmbedder, fake_vector


def open_cache(root: Path, embedder: FakeEmbedder) -> VectorCache:
    return VectorCache(root, embedder.fingerprint, embedder.dim, embedder.info())


def test_the_model_lane_embeds_missing_texts_once_and_caches_them(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    embed = StoreEmbedding(open_cache(tmp_path, embedder), embedder, "fake-model")
    got = embed(["a fact", "another fact", "a fact"])
    assert embedder.embedded == ["a fact", "another fact"]  # once each, one batch
    assert np.array_equal(got, np.stack([fake_vector(t) for t in
                                         ["a fact", "another fact", "a fact"]]))
    assert got.dtype == np.float32
    embed(["another fact", "a third"])
    assert embedder.embedded == ["a fact", "another fact", "a third"]
    assert embed.spent_ms > 0.0
    # A later model-free run (a fresh cache object, no embedder) reads them.
    later = StoreEmbedding(open_cache(tmp_path, embedder), None, "fake-model")
    assert np.array_equal(later(["a third"]), fake_vector("a third")[None, :])
    assert open_cache(tmp_path, embedder).missing([text_key("a fact")]) == []


def test_model_free_a_missing_text_is_one_line_naming_the_model_lane(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    cache = open_cache(tmp_path, embedder)
    cache.add([text_key("known")], fake_vector("known")[None, :])
    embed = StoreEmbedding(cache, None, "fake-model")
    assert embed(["known"]).shape == (1, embedder.dim)
    with pytest.raises(CacheError) as caught:
        embed(["known", "unknown"])
    line = str(caught.value)
    assert "\n" not in line
    assert "1 of 2 texts are not in the vector cache of fake-model" in line
    assert "model lane (without --no-model)" in line
    assert embed([]).shape == (0, embedder.dim)


def test_persona_embed_without_vectors_is_one_line() -> None:
    persona = Persona(key="k", session_ids=(), created_at=(), vectors=np.zeros((0, 0)),
                      texts=[], store_path=lambda: Path("unused"))
    with pytest.raises(RetrievalEvalError, match="holds no vectors"):
        persona.embed(["x"])
