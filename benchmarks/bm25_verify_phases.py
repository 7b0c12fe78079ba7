"""In-process phases on the built corpus: the ``bm25`` retriever against LongMemEval's own
baseline (``rank_bm25.BM25Okapi`` per question, rankings asserted identical), and what the
re-verification policy's checks cost (docs/reliability.md)."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.measuring import BM25_SPEEDUP, MiB, Results, Row, fmt_mem, fmt_s, verdict
from pytest_retrieval_eval import retrievers as retrievers_mod
from pytest_retrieval_eval.data import corpus as corpus_mod

# --------------------------------------------------------------------------- bm25


def bm25_phase(cache: Path, results: Results) -> None:
    from rank_bm25 import BM25Okapi

    from pytest_retrieval_eval.retrievers import terms as terms_mod

    corpus = corpus_mod.open_corpus(next((cache / "corpus").glob("*.sqlite")))
    pairs = [p for p in corpus.pairs if not p.abstention]
    table_file = terms_mod.table_path(cache, corpus.dataset_sha256)
    shutil.rmtree(table_file.parent, ignore_errors=True)
    start = time.perf_counter()
    terms_mod.ensure_table(corpus, cache)
    build = time.perf_counter() - start
    texts_total = len(corpus.all_text_keys())
    fresh = retrievers_mod.BM25Retriever()  # counts in memory: starts empty, splits each text
    saved = retrievers_mod.BM25Retriever()
    saved.use_table(lambda: terms_mod.open_table(table_file))
    ref_times: list[float] = []
    times: dict[str, list[float]] = {"fresh": [], "saved": []}
    for pair in pairs:
        texts = corpus.texts(list(pair.text_keys))
        question = pair.question
        start = time.perf_counter()
        scores = BM25Okapi([t.split() for t in texts]).get_scores(question.split())
        expected = np.argsort(-scores, kind="stable")
        ref_times.append(time.perf_counter() - start)
        want = [pair.session_ids[i] for i in expected.tolist()]
        persona = retrievers_mod.Persona(
            key=pair.question_id, session_ids=tuple(pair.session_ids),
            created_at=tuple(pair.created_at),
            vectors=np.zeros((len(texts), 0), dtype=np.float32), texts=texts,
            store_path=lambda: Path("unused"), text_keys=tuple(pair.text_keys))
        query = retrievers_mod.Query(pair.question_id, pair.question_type, question,
                                     pair.question_date, None, ())
        for name, retriever in (("fresh", fresh), ("saved", saved)):
            start = time.perf_counter()
            got = retriever.rank(persona, query, len(texts))
            times[name].append(time.perf_counter() - start)
            if got != want:
                raise SystemExit(f"benchmark: bm25 ({name} counts) ranking differs from "
                                 f"rank_bm25 on {pair.question_id}")
    ref = sum(ref_times)
    n = len(pairs)
    results.add(Row(
        "bm25: LongMemEval's way (BM25Okapi rebuilt per question)", fmt_s(ref), "",
        f"{n / ref:.1f} q/s", "", "",
        f"median {statistics.median(ref_times) * 1000:.0f} ms per question"))
    for name, label in (("fresh", "text counts kept in memory, first run"),
                        ("saved", "the corpus's saved term counts")):
        ours = sum(times[name])
        results.add(Row(
            f"bm25: retriever `bm25` ({label})", fmt_s(ours), "", f"{n / ours:.1f} q/s",
            ">= 5x faster, same rankings", verdict(ref / ours >= BM25_SPEEDUP),
            f"{ref / ours:.1f}x; full rankings identical on {n} pairs; median "
            f"{statistics.median(times[name]) * 1000:.1f} ms, first "
            f"{times[name][0] * 1000:.0f} ms"))
    results.add(Row(
        "bm25: term counts saved once per corpus", fmt_s(build), "",
        f"{texts_total / build:.0f} texts/s", "", "",
        f"{texts_total:,} texts split and counted; {table_file.stat().st_size / 1e6:.0f} MB; "
        "every later run (and each xdist worker) reads them instead"))
    bm25_memory_row(results)


#: A child that counts one 100 MB session's terms and prints its peak RSS before and after.
_HUGE_SESSION = """
from pytest_retrieval_eval.retrievers import terms
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
words = " ".join(f"w{i % 997}x{i % 13}" for i in range(20000)) + " "
text = words * (100_000_000 // len(words))
before = hwm()
doc = terms.count_terms(text, {})
print(len(text), before, hwm(), doc.length)
"""


def bm25_memory_row(results: Results) -> None:
    """Issue 23.9: what counting the terms of one 100 MB session costs beyond the text."""
    out = subprocess.run([sys.executable, "-c", _HUGE_SESSION], capture_output=True,
                         text=True, check=True).stdout.split()
    size, before, after, tokens = (int(v) for v in out)
    extra = after - before
    results.add(Row(
        "bm25: term counts of one 100 MB session (peak memory)", "", fmt_mem(after),
        "", "<= 5x the text", verdict(after - before <= 5 * size),
        f"{size / 1e6:.0f} MB text, {tokens:,} tokens: +{extra / MiB:.0f} MiB over the "
        f"process with the text in it ({fmt_mem(before)}); split whole it took +1 GiB"))


# --------------------------------------------------------------------------- re-verification


def verify_phase(data: Path, cache: Path, results: Results) -> None:
    """What the re-verification policy (docs/reliability.md) costs: the checks that catch bit
    rot beneath an unchanged ``.verified`` stamp, timed one by one."""
    from pytest_retrieval_eval.data import dataset as dataset_mod
    from pytest_retrieval_eval.data.pairs import text_key
    from pytest_retrieval_eval.io.checksums import sha256_file
    from pytest_retrieval_eval.retrievers import terms as terms_mod
    from pytest_retrieval_eval.vipune import store as store_mod

    path = next((cache / "corpus").glob("*.sqlite"))
    start = time.perf_counter()
    corpus = corpus_mod.open_corpus(path)  # loads the pairs and checks their digest
    load = time.perf_counter() - start
    results.add(Row("verify: corpus pairs digest, every process at every load", fmt_s(load),
                    "", "", "", "", f"{len(corpus.pairs)} pairs loaded and checked; corpus "
                    f"file {path.stat().st_size / 1e6:.0f} MB (not rehashed)"))
    start = time.perf_counter()
    sample = dataset_mod.sample_digest(data)
    results.add(Row("verify: dataset sample against the sha256 memo, each controller run",
                    fmt_s(time.perf_counter() - start), "", "", "", "",
                    f"2 MiB of {data.stat().st_size / 1e9:.2f} GB read ({sample[:8]})"))
    pairs = [p for p in corpus.pairs if not p.abstention]
    hashed = 0
    hash_s = 0.0
    for pair in pairs:
        texts = corpus.texts(list(pair.text_keys))  # verified against their keys
        start = time.perf_counter()
        for text in texts:  # the check alone, timed apart from SQLite
            text_key(text)
        hash_s += time.perf_counter() - start
        hashed += sum(len(t.encode("utf-8")) for t in texts)
    results.add(Row("verify: texts against their keys (sha256), at every read", fmt_s(hash_s),
                    "", f"{hashed / hash_s / 1e6:.0f} MB/s" if hash_s else "", "", "",
                    f"{len(pairs)} personas' texts, {hashed / 1e6:.0f} MB; "
                    f"{hash_s / max(len(pairs), 1) * 1000:.1f} ms a persona"))
    stores = sorted((cache / "stores").glob("*/*.sqlite"))
    if not stores:  # the run phase was skipped: build reference stores for the personas
        built = store_mod.StoreCache(cache / "stores")
        for pair in pairs:
            texts = corpus.texts(list(pair.text_keys))
            key = store_mod.persona_key(pair.session_ids, pair.text_keys, pair.created_at,
                                        "bench")
            built.get_or_build(key, lambda pair=pair, texts=texts: store_mod.rows_from_arrays(
                pair.session_ids, texts, np.zeros((len(texts), 0), np.float32),
                pair.created_at))
        stores = sorted((cache / "stores").glob("*/*.sqlite"))
    size = sum(p.stat().st_size for p in stores)
    start = time.perf_counter()
    for store in stores:
        sha256_file(store)
    stores_s = time.perf_counter() - start
    results.add(Row("verify: persona stores rehashed (--retrieval-eval-verify full), per process",
                    fmt_s(stores_s), "", f"{size / stores_s / 1e6:.0f} MB/s", "", "",
                    f"{len(stores)} stores, {size / 1e6:.0f} MB; "
                    f"{stores_s / len(stores) * 1000:.1f} ms a store"))
    table = terms_mod.table_path(cache, corpus.dataset_sha256)
    if table.is_file():
        start = time.perf_counter()
        digest = sha256_file(table)
        results.add(Row("verify: bm25 terms file rehashed, each controller run",
                        fmt_s(time.perf_counter() - start), "", "", "", "",
                        f"{table.stat().st_size / 1e6:.0f} MB ({digest[:8]})"))


