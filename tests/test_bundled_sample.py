"""The bundled sample and its shipped vectors: they belong together and run offline."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval import cache, corpus, dataset, prep
from pytest_retrieval_eval.pairs import text_key

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def sample_corpus(tmp_path_factory: pytest.TempPathFactory) -> corpus.Corpus:
    return corpus.load_corpus(dataset.resolve_dataset("sample"),
                              tmp_path_factory.mktemp("corpus"))


def test_shipped_vectors_cover_exactly_the_shipped_texts(sample_corpus: corpus.Corpus) -> None:
    models = cache.list_models([cache.bundled_cache_dir()])
    assert [m["name"] for m in models] == [MINILM]
    model = models[0]
    assert model["dim"] == 384 and model["pooling"] == "mean" and model["query_prefix"] == ""
    vectors = cache.VectorCache(cache.bundled_cache_dir(), model["fingerprint"], 384, model)
    wanted = {k for p in sample_corpus.pairs for k in p.text_keys}
    wanted |= {prep.query_key(p.question, model) for p in sample_corpus.pairs}
    assert set(vectors.keys()) == wanted  # nothing missing, nothing stale
    matrix = vectors.get(sorted(wanted))
    norms = np.linalg.norm(matrix.astype(np.float64), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)  # mean-pooled, L2-normalised


def test_shipped_keys_are_content_addresses_of_the_texts(sample_corpus: corpus.Corpus) -> None:
    pair = sample_corpus.pairs[0]
    texts = sample_corpus.texts(list(pair.text_keys))
    assert [text_key(t) for t in texts] == list(pair.text_keys)


def test_shipped_vectors_rank_sensibly(sample_corpus: corpus.Corpus) -> None:
    """A question's own gold session sits near the top for most pairs: real vectors of these
    texts, not noise (noise would put gold in the top 5 of ~40 rows ~12% of the time)."""
    model = cache.list_models([cache.bundled_cache_dir()])[0]
    vectors = cache.VectorCache(cache.bundled_cache_dir(), model["fingerprint"], 384, model)
    hits = 0
    usable = [p for p in sample_corpus.pairs if not p.abstention]
    for pair in usable:
        rows = vectors.get(list(pair.text_keys))
        q = vectors.get([prep.query_key(pair.question, model)])[0]
        top = np.argsort(-(rows @ q), kind="stable")[:5]
        hits += any(pair.session_ids[i] in pair.gold for i in top)
    assert hits / len(usable) >= 0.6


def test_no_model_lane_loads_no_model_and_touches_no_network(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import onnxruntime
    import tokenizers

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model-free lane must not load a model or use the network")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    monkeypatch.setattr(tokenizers.Tokenizer, "from_file", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    out = tmp_path / "r.json"
    result = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                                "--retrieval-eval", "--no-model", "--retrieval-eval-json",
                                str(out), "--retrieval-eval-retriever", "hybrid,semantic")
    assert result.ret == 0, result.stdout.str()
    report = json.loads(out.read_text())
    assert report["lane"] == "model-free" and report["model"]["name"] == MINILM
