"""An independent re-implementation of LongMemEval's flat-bm25 retrieval experiment.

Written from upstream's description (``src/retrieval/run_retrieval.py`` and ``eval_utils.py``
of github.com/xiaowu0162/LongMemEval), sharing no code with the plugin: corpus items built
here, scores from ``rank_bm25.BM25Okapi`` (upstream's own scorer), the order from
``np.argsort(scores)[::-1]``, the metrics in plain Python. Tests compare the plugin's
``--retrieval-eval-protocol longmemeval`` report against it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

KS = (1, 3, 5, 10, 30, 50)


def _items(sid: str, turns: list[dict[str, Any]], granularity: str) -> list[tuple[str, str]]:
    users = [(i, t) for i, t in enumerate(turns) if t["role"] == "user"]
    if granularity == "session":
        cid = sid
        if "answer" in sid and not any(t["has_answer"] for _, t in users):
            cid = sid.replace("answer", "noans")
        return [(cid, " ".join(t["content"] for _, t in users))]
    out = []
    for i, t in users:
        cid = f"{sid}_{i + 1}"
        if "answer" in sid and not t["has_answer"]:
            cid = cid.replace("answer", "noans")
        out.append((cid, t["content"]))
    return out


def _dcg(rels: list[int]) -> float:
    return sum(r if i == 0 else r / math.log2(i + 1) for i, r in enumerate(rels))


def _metrics(ranked: list[str], gold: set[str], corpus: list[str], k: int) -> list[float]:
    top = set(ranked[:k])
    ideal = _dcg(sorted((int(c in gold) for c in corpus), reverse=True)[:k])
    actual = _dcg([int(r in gold) for r in ranked[:k]])
    return [float(any(g in top for g in gold)), float(all(g in top for g in gold)),
            actual / ideal if ideal else 0.0]


def _session(cid: str) -> str:
    return cid.rsplit("_", 1)[0]


def run(instances: list[dict[str, Any]], granularity: str) -> dict[str, dict[str, Any]]:
    """{question_id: {"ranked": [...], "metrics": {...}}} for the questions upstream averages."""
    out: dict[str, dict[str, Any]] = {}
    for entry in instances:
        qid = entry["question_id"]
        users = [t for s in entry["haystack_sessions"] for t in s if t["role"] == "user"]
        if "_abs" in qid or not any(t.get("has_answer") for t in users):
            continue
        items = [it for sid, turns in zip(entry["haystack_session_ids"],
                                          entry["haystack_sessions"], strict=True)
                 for it in _items(sid, turns, granularity)]
        ids = [cid for cid, _ in items]
        scores = BM25Okapi([text.split(" ") for _, text in items]).get_scores(
            entry["question"].split(" "))
        ranked = [ids[i] for i in np.argsort(scores)[::-1]]
        gold = {cid for cid in ids if "answer" in cid}
        metrics: dict[str, float] = {}
        for k in KS:
            names = ("recall_any", "recall_all", "ndcg_any")
            metrics.update({f"{n}@{k}": v for n, v in zip(names, _metrics(ranked, gold, ids, k),
                                                          strict=True)})
            if granularity == "turn":
                sessions = [_session(r) for r in ranked]
                k2 = k
                while k2 <= len(ids) and len(set(sessions[:k2])) < k:
                    k2 += 1
                values = _metrics(sessions, {_session(g) for g in gold},
                                  [_session(c) for c in ids], k2)
                metrics.update({f"session_{n}@{k}": v for n, v in zip(names, values,
                                                                      strict=True)})
        out[qid] = {"ranked": ranked, "metrics": metrics}
    return out
