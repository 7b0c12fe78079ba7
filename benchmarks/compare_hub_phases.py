"""The phases that need no dataset: ``retrieval-eval compare`` of two synthetic full-M-sized
reports, and ``cache push``/``cache pull`` of an M-sized vector cache through the local Hub
stand-in (tests/support/hub_standin.py, on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.measuring import (
    PYTHON,
    ROOT,
    Results,
    Row,
    check,
    du,
    fmt_mem,
    fmt_s,
    measure,
    verdict,
)

# --------------------------------------------------------------------------- hub


#: Unique texts (passages and questions) of the full synthetic M: the prep row's count.
M_VECTORS = 41_140


def hub_phase(base: Path, vectors: int, results: Results) -> None:
    """Push, then pull into an empty cache, a vector cache of ``vectors`` vectors (dim 384)
    through the local Hub stand-in, each a real ``retrieval-eval`` process. The vectors are
    random (a pull moves bytes; their values do not matter) in prep's layout: commits of
    1024, then compacted as prep compacts."""
    from pytest_retrieval_eval.vectors.cache import VectorCache
    from tests.support.hub_standin import WRITE_TOKEN

    work = base / "hub"
    shutil.rmtree(work, ignore_errors=True)
    source, copy = work / "source", work / "copy"
    fingerprint = "bench" + "0" * 59
    cache = VectorCache(source, fingerprint, 384, {"name": "bench-384", "dim": 384})
    rng = np.random.default_rng(0)
    for start in range(0, vectors, 1024):
        n = min(1024, vectors - start)
        cache.add([f"k{i}" for i in range(start, start + n)],
                  rng.standard_normal((n, 384)).astype(np.float32))
    cache.compact()
    shards = len(cache.own_shards())
    size = du(source / "vectors")
    server = subprocess.Popen([PYTHON, "-m", "tests.support.hub_standin"], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        env = {**os.environ, "HF_ENDPOINT": url, "HF_TOKEN": WRITE_TOKEN,
               "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(work / "hf-home")}
        env.pop("HF_HUB_OFFLINE", None)
        cli = [PYTHON, "-m", "pytest_retrieval_eval.cli", "cache"]
        repo = ["--repo", "bench/m-vectors", "--no-progress"]
        push = measure([*cli, "push", *repo, "--cache", str(source)], cwd=work, env=env)
        check(push, "cache push")
        pull = measure([*cli, "pull", *repo, "--cache", str(copy)], cwd=work, env=env)
        check(pull, "cache pull")
        again = measure([*cli, "pull", *repo, "--cache", str(copy)], cwd=work, env=env)
        check(again, "cache pull (again)")
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in (root / "vectors").rglob("*")
                if p.is_file() and not p.name.endswith(".lock")}

    identical = files(source) == files(copy)
    nothing = "0 shards fetched" in again.output
    results.add(Row(
        "hub: push a synthetic-M vector cache to the local Hub stand-in", fmt_s(push.wall),
        fmt_mem(push.tree_peak), f"{size / push.wall / 1e6:.0f} MB/s", "", "",
        f"{vectors:,} vectors, dim 384, {shards} shards, {size / 1e6:.0f} MB; one commit, "
        f"files base64 in it (the stand-in answers every file 'regular': no LFS/Xet); CPU "
        f"{push.cpu:.1f} s"))
    results.add(Row(
        "hub: pull it into an empty cache (checked, committed)", fmt_s(pull.wall),
        fmt_mem(pull.tree_peak), f"{size / pull.wall / 1e6:.0f} MB/s", "identical files",
        verdict(identical),
        f"every file sha256-checked against its sidecar, then committed; the process whole "
        f"(imports included); CPU {pull.cpu:.1f} s"))
    results.add(Row(
        "hub: pull again (nothing missing)", fmt_s(again.wall), fmt_mem(again.tree_peak), "",
        "nothing fetched", verdict(nothing),
        f"a listing at one commit, one manifest; CPU {again.cpu:.1f} s (mostly imports)"))
    results.facts.append(
        f"hub rows: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores when "
        "they ran; the stand-in serves from its own process (its CPU is not counted)")


# --------------------------------------------------------------------------- compare


#: Scored pairs per question type in LongMemEval_M (500 questions less 30 abstention).
M_TYPES = {"single-session-user": 64, "single-session-assistant": 56,
           "single-session-preference": 30, "temporal-reasoning": 127,
           "knowledge-update": 72, "multi-session": 121}
COMPARE_TARGET_S = 5.0


def synthetic_report(seed: int, shift: float) -> dict[str, Any]:
    """A full-M-sized report: 470 pairs x five retrievers, recall at k 1, 5, 10."""
    from pytest_retrieval_eval.reporting.report import SCHEMA_VERSION, summarize

    rng = np.random.default_rng(seed)
    base_rng = np.random.default_rng(0)  # the same "true" difficulty per question
    pairs = []
    retrievers = ["hybrid", "semantic", "fts", "bm25", "vipune"]
    # One id per question: "q" + the type's initials + a number (the first three letters
    # made the three single-session types share ids, which compare now refuses).
    qids = [(f"q{''.join(w[0] for w in t.split('-'))}{i:03d}", t)
            for t, n in M_TYPES.items() for i in range(n)]
    ease = base_rng.random(len(qids))
    for name in retrievers:
        for index, (qid, qtype) in enumerate(qids):
            metrics = {}
            for k in (1, 5, 10):
                p = min(1.0, ease[index] * (0.3 + 0.07 * k) + shift * rng.random())
                value = float(rng.choice([0.0, 0.5, 1.0], p=[1 - p, 0.0, p]) if k == 1
                              else rng.binomial(3, p) / 3)
                for family in ("recall", "recall_any", "recall_all", "ndcg_any"):
                    metrics[f"{family}@{k}"] = value
            pairs.append({"retriever": name, "index": index, "question_id": qid,
                          "question_type": qtype, "metrics": metrics, "ranked": [],
                          "gold": [], "latency_ms": {"retrieval": 1.0}})
    return {"schema_version": SCHEMA_VERSION,
            "dataset": {"name": "longmemeval_m", "sha256": "0" * 64}, "lane": "model-free",
            "model": {"name": "synthetic"}, "ks": [1, 5, 10], "retrievers": retrievers,
            "pairs": pairs, "summary": summarize(pairs, retrievers)}


def compare_phase(results: Results) -> None:
    """`retrieval-eval compare` of two full-M-sized reports, end to end in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        base, new = Path(tmp) / "base.json", Path(tmp) / "new.json"
        base.write_text(json.dumps(synthetic_report(1, 0.0)), encoding="utf-8")
        new.write_text(json.dumps(synthetic_report(2, 0.05)), encoding="utf-8")
        cmd = [PYTHON, "-m", "pytest_retrieval_eval.cli", "compare", str(base), str(new),
               "--json", str(Path(tmp) / "c.json")]
        walls, cpus = [], []
        for _ in range(3):
            m = measure(cmd, Path(tmp))
            check(m, "the compare phase")
            walls.append(m.wall)
            cpus.append(m.cpu)
        saved = json.loads((Path(tmp) / "c.json").read_text())["comparison"]
        from pytest_retrieval_eval.reporting import compare as compare_mod

        started = time.perf_counter()
        compare_mod.compare_reports(json.loads(base.read_text()), json.loads(new.read_text()))
        inside = time.perf_counter() - started
    wall = statistics.median(walls)
    rows = sum(len(r) for r in saved["rows"].values())
    results.add(Row(
        "compare: two full-M reports (470 pairs, 5 retrievers, 10,000 permutations)",
        fmt_s(wall), fmt_mem(m.tree_peak), "", f"< {COMPARE_TARGET_S:.0f} s",
        verdict(wall < COMPARE_TARGET_S),
        f"median of 3 runs of `retrieval-eval compare` (process start, JSON load, "
        f"{rows} rows: 3 metrics x 5 retrievers x 7; bootstrap CI, randomization p, Holm); "
        f"walls {', '.join(f'{w:.2f}' for w in walls)}, CPU {statistics.median(cpus):.2f} s; "
        f"compare_reports alone {inside:.2f} s; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs"))



#: Pairs per report of the compare memory rows (one retriever: every pair in one overall row,
#: the bootstrap's and the randomization test's worst case).
COMPARE_MEMORY_PAIRS = (5_000, 50_000)
COMPARE_MEMORY_TARGET = 300 << 20


def scaled_report(pairs: int, seed: int, shift: float) -> dict[str, Any]:
    """One retriever, ``pairs`` questions in LongMemEval_M's type mix, recall at k 1, 5, 10,
    each pair with the fields a real report's pairs carry (ranked ids, gold, fusion...)."""
    from pytest_retrieval_eval.reporting.report import SCHEMA_VERSION

    rng = np.random.default_rng(seed)
    types = [t for t, n in M_TYPES.items() for _ in range(n)]
    out = []
    for index in range(pairs):
        metrics = {}
        for k in (1, 5, 10):
            value = float(rng.random() < 0.3 + 0.05 * k + shift)
            for family in ("recall", "recall_any", "recall_all", "ndcg_any"):
                metrics[f"{family}@{k}"] = value
        # The fields a real pair carries beside its metrics (about 1.2 KB of JSON).
        qid = f"q{index:06d}"
        out.append({"retriever": "hybrid", "index": index, "question_id": qid,
                    "question_type": types[index % len(types)],
                    "gold": [f"answer_{qid}_1", f"answer_{qid}_2"],
                    "gold_source": "answer_session_ids",
                    "ranked": [f"{qid}_s{r}" for r in range(10)], "metrics": metrics,
                    "notes": {}, "latency_ms": {"query_embedding": None, "retrieval": 1.5},
                    "returned": {"1": 1, "5": 5, "10": 10},
                    "fusion": {k: {"semantic": True, "fts": False} for k in ("1", "5", "10")},
                    "component_sizes": {"semantic": 40, "fts": 2},
                    "explain": _explain_facts(qid)})
    return {"schema_version": SCHEMA_VERSION,
            "dataset": {"name": "synthetic", "sha256": "0" * 64}, "lane": "model-free",
            "model": {"name": "synthetic"}, "ks": [1, 5, 10], "retrievers": ["hybrid"],
            "pairs": out}


def _explain_facts(qid: str) -> dict[str, Any]:
    """A hybrid pair's explain facts as this version records them (about 1 KB compact):
    compare's slim read skips them while parsing (issue 34, item 16)."""
    shown = [f"{qid}_s{r}" for r in range(10)] + [f"answer_{qid}_1", f"answer_{qid}_2"]
    return {"gold_ranks": {shown[-2]: 12, shown[-1]: None}, "searched": 40,
            "fusion": {"rrf_k": 25, "recency": 0.0, "fts_mode": "and",
                       "fts_match": '"How" "many" "weeks" "ago" "did" "I" "move?"',
                       "semantic_rows": 40, "fts_rows": 2,
                       "gold": {shown[-2]: {"semantic": 12, "fts": None},
                                shown[-1]: {"semantic": None, "fts": None}},
                       "rows": [[r + 1, None] for r in range(len(shown))],
                       "words": ["How", "many", "weeks", "ago", "did", "I", "move?"],
                       "tokens": [["how"], ["mani"], ["week"], ["ago"], ["did"], ["i"],
                                  ["move"]],
                       "words_total": 7, "matched": [r * 7 % 128 for r in range(len(shown))]}}


def compare_memory_phase(results: Results) -> None:
    """Peak memory of `retrieval-eval compare` (10,000 resamples and permutations) of two
    one-retriever reports of 5,000 and 50,000 pairs: the resamples go in chunks, so the
    comparison's memory does not grow with n (issue 23, item 7); what grows is the reports
    held in memory."""
    for pairs in COMPARE_MEMORY_PAIRS:
        with tempfile.TemporaryDirectory() as tmp:
            base, new = Path(tmp) / "base.json", Path(tmp) / "new.json"
            base.write_text(json.dumps(scaled_report(pairs, 1, 0.0)), encoding="utf-8")
            new.write_text(json.dumps(scaled_report(pairs, 2, 0.02)), encoding="utf-8")
            size = base.stat().st_size
            m = measure([PYTHON, "-m", "pytest_retrieval_eval.cli", "compare", str(base),
                         str(new)], Path(tmp))
            check(m, "the compare memory phase")
        results.add(Row(
            f"compare: memory at {pairs:,} pairs (one retriever, 10,000 resamples)",
            fmt_s(m.wall), fmt_mem(m.tree_peak), "",
            f"< {COMPARE_MEMORY_TARGET >> 20} MiB", verdict(m.tree_peak < COMPARE_MEMORY_TARGET),
            f"two reports of {size / 1e6:.1f} MB each (pairs shaped as a run writes them), "
            f"3 metrics x 7 rows; peak RSS of the process (imports and both reports included; "
            f"before chunking, 10,000 resamples x n were held at once: about 200 KB a pair); "
            f"CPU "
            f"{m.cpu:.1f} s; load average {os.getloadavg()[0]:.1f}"))
