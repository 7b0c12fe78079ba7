"""The embedding phase: :meth:`Embedder.embed` against onnxruntime called directly on the same
batches (the tiny model, and MiniLM when an ONNX export is given), MiniLM's prep throughput
and the model lane's per-query latency."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.data_setup import Scale
from benchmarks.measuring import EMBED_EFFICIENCY, Results, Row, fmt_duration, fmt_s, verdict
from pytest_retrieval_eval.data import corpus as corpus_mod
from pytest_retrieval_eval.vectors.embedding import EmbedConfig, Embedder, load_embedder


def sample_sessions(cache: Path, count: int) -> tuple[list[str], list[str]]:
    """The first ``count`` distinct session texts in file order, and every question."""
    corpus = corpus_mod.open_corpus(next((cache / "corpus").glob("*.sqlite")))
    keys: dict[str, None] = {}
    for pair in corpus.pairs:
        keys.update(dict.fromkeys(pair.text_keys))
        if len(keys) >= count:
            break
    return corpus.texts(list(keys)[:count]), [p.question for p in corpus.pairs]


def raw_batches(embedder: Embedder, texts: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """The very batches :meth:`Embedder.embed` runs (same tokens, order, padding)."""
    encodings = embedder._tokenizer.encode_batch(list(texts))
    ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
    order = [j for j in sorted(range(len(ids)), key=lambda j: len(ids[j])) if len(ids[j])]
    batches = []
    for members in embedder._batches(order, [len(x) for x in ids]):
        width = len(ids[members[-1]])
        batch_ids = np.full((len(members), width), embedder._pad_id, dtype=np.int64)
        mask = np.zeros((len(members), width), dtype=np.int64)
        for row, j in enumerate(members):
            batch_ids[row, : len(ids[j])] = ids[j]
            mask[row, : len(ids[j])] = 1
        feeds = {"input_ids": batch_ids, "attention_mask": mask}
        if embedder._token_type:
            feeds["token_type_ids"] = np.zeros_like(batch_ids)
        batches.append(feeds)
    return batches


def embed_vs_raw(embedder: Embedder, texts: Sequence[str], chunk: int) -> tuple[float, float]:
    """Seconds for embed() and for session.run alone on the same batches, interleaved chunk by
    chunk so that other load on the machine hits both alike."""
    session, output = embedder._session, embedder._output
    embedder.embed(texts[:2])  # warm-up (first runs allocate)
    ours = raw = 0.0
    for start in range(0, len(texts), chunk):
        part = texts[start : start + chunk]
        batches = raw_batches(embedder, part)
        began = time.perf_counter()
        for feeds in batches:
            session.run([output], feeds)
        raw += time.perf_counter() - began
        began = time.perf_counter()
        embedder.embed(part)
        ours += time.perf_counter() - began
    return ours, raw


def embedding_phase(cache: Path, tiny: Path, minilm: Path | None, scale: Scale,
                    unique_texts: int, results: Results) -> None:
    texts, questions = sample_sessions(cache, scale.embed_sessions)
    models: list[tuple[str, Path]] = [("tiny model", tiny)]
    if minilm is not None:
        models.insert(0, ("MiniLM-L6 (ONNX)", minilm))
    else:
        results.facts.append("MiniLM checks skipped: no ONNX export (pass --minilm DIR; "
                             "make one with scripts/export_minilm_onnx.py)")
    for label, path in models:
        embedder = load_embedder(str(path), EmbedConfig())
        tokens = [len(e.ids) for e in embedder._tokenizer.encode_batch(list(texts))]
        ours, raw = embed_vs_raw(embedder, texts, chunk=max(1, len(texts) // 10))
        efficiency = raw / ours
        n = len(texts)
        is_minilm = label.startswith("MiniLM")
        results.add(Row(
            f"embed: {label}, Embedder.embed vs onnxruntime direct",
            fmt_s(ours), "", f"{n / ours:.2f} sessions/s",
            ">= 90% of direct" if is_minilm else "(no target: the model is a lookup)",
            verdict(efficiency >= EMBED_EFFICIENCY) if is_minilm else "",
            (f"{efficiency:.1%} of direct ({fmt_s(raw)})" if is_minilm else
             f"onnxruntime {fmt_s(raw)} of it: tokenizing the texts dominates")
            + f"; {n} sessions, mean {statistics.mean(tokens):.0f} tokens"))
        if is_minilm:
            per_1000 = ours / n * 1000
            results.add(Row(
                "prep throughput: MiniLM on CPU", "", "", f"{n / ours:.2f} sessions/s",
                "", "", f"{per_1000:.0f} s per 1,000 sessions; the {unique_texts:,} unique "
                f"texts of this dataset: ~{fmt_duration(per_1000 * unique_texts / 1000)}"))
            latencies = []
            for question in questions[: scale.queries]:
                began = time.perf_counter()
                embedder.embed_query(question)
                latencies.append(time.perf_counter() - began)
            results.add(Row(
                "model lane: per-query embedding (MiniLM, CPU)",
                f"{statistics.median(latencies) * 1000:.1f} ms", "", "", "", "",
                f"median of {len(latencies)} questions, p95 "
                f"{np.percentile(latencies, 95) * 1000:.1f} ms"))

