"""Small JSON reports with chosen per-pair scores, for comparison and publishing tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_retrieval_eval.reporting.report import SCHEMA_VERSION, summarize

SHA = "a" * 64


def make_report(scores: Mapping[str, Sequence[tuple[str, str, float]]], *,
                ks: Sequence[int] = (1, 5), sha256: str = SHA, lane: str = "model-free",
                model: str | None = "test/model", **extra: Any) -> dict[str, Any]:
    """``scores``: retriever -> [(question_id, question_type, recall at every k)]."""
    pairs = []
    for retriever, rows in scores.items():
        for index, (qid, qtype, value) in enumerate(rows):
            metrics = {}
            for k in ks:
                for family in ("recall", "recall_any", "recall_all", "ndcg_any"):
                    metrics[f"{family}@{k}"] = float(value)
            pairs.append({"retriever": retriever, "index": index, "question_id": qid,
                          "question_type": qtype, "metrics": metrics,
                          "latency_ms": {"retrieval": 1.0, "query_embedding": None}})
    retrievers = list(scores)
    return {"schema_version": SCHEMA_VERSION,
            "dataset": {"name": "sample", "sha256": sha256}, "lane": lane,
            "model": {"name": model} if model else None, "ks": list(ks),
            "retrievers": retrievers, "pairs": pairs,
            "summary": summarize(pairs, retrievers), **extra}


def write_report(path: Path, report: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(report), encoding="utf-8")
    return path
