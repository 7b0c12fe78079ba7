"""The bundled sample at turn granularity runs offline with the shipped turn vectors
(pytester): semantic's turn rankings equal a plain float64 cosine of those vectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.data import dataset, ingest
from pytest_retrieval_eval.data.protocol import View
from pytest_retrieval_eval.vectors import cache, prep

pytestmark = pytest.mark.usefixtures("isolated_cache")


def test_no_model_turn_granularity_runs_on_the_shipped_vectors(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    out = pytester.path / "r.json"
    res = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                             "--retrieval-eval", "--no-model", "--retrieval-eval-granularity",
                             "turn", "--retrieval-eval-retriever", "hybrid,semantic",
                             "--retrieval-eval-json", str(out))
    assert res.ret == 0, res.stdout.str()
    report = json.loads(out.read_text())
    assert report["granularity"] == "turn"
    assert report["model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    turns = ingest.load_corpus(dataset.resolve_dataset("sample"), tmp_path,
                               view=View("vipune", "turn"))
    model = cache.list_models([cache.bundled_cache_dir()])[0]
    vectors = cache.VectorCache(cache.bundled_cache_dir(), model["fingerprint"], 384, model)
    by_id = {p.question_id: p for p in turns.pairs}
    semantic = [p for p in report["pairs"] if p["retriever"] == "semantic"]
    assert len(semantic) == len([p for p in turns.pairs if not p.abstention])
    for pair in semantic:
        record = by_id[pair["question_id"]]
        rows = vectors.get(list(record.text_keys)).astype(np.float64)
        q = vectors.get([prep.query_key(record.question, model)])[0].astype(np.float64)
        sims = rows @ q / (np.linalg.norm(rows, axis=1) * np.linalg.norm(q))
        order = np.argsort(-sims, kind="stable")[:10]
        assert pair["ranked"] == [record.session_ids[i] for i in order], pair["question_id"]
    assert "session_recall@k" in res.stdout.str()
