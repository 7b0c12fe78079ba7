"""Compare a LongMemEval ``run_retrieval.py`` log (flat-bm25) with the plugin's JSON report.

    python scripts/compare_with_upstream.py UPSTREAM_LOG REPORT.json session|turn

UPSTREAM_LOG is the ``*_retrievallog_<granularity>_flat-bm25`` file that LongMemEval's
``src/retrieval/run_retrieval.py`` writes; REPORT.json comes from ``pytest --retrieval-eval
--retrieval-eval-protocol longmemeval --retrieval-eval-granularity G --retrieval-eval-json
REPORT.json`` on the same data file. Prints, question by question, where the rankings (top
``max k``) or metric values differ, then a summary: the question sets, identical rankings,
differing values, the largest difference of an overall mean, and how many differing
rankings differ only in the order of equal BM25 scores (``rank_bm25`` rescoring the corpus
that the log lists). See docs/protocol.md, "Checking equality with upstream".
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np


def _scored(entry: dict[str, Any]) -> bool:
    users = [t for s in entry["haystack_sessions"] for t in s if t["role"] == "user"]
    return "_abs" not in entry["question_id"] and any(t.get("has_answer") for t in users)


def main(argv: list[str]) -> int:
    log, report, granularity = argv
    with open(log, encoding="utf-8") as fh:
        upstream = [json.loads(line) for line in fh]
    with open(report, encoding="utf-8") as fh:
        ours = json.load(fh)
    mine = {p["question_id"]: p for p in ours["pairs"] if p["retriever"] == "bm25"}
    levels = (("turn", ""), ("session", "session_")) if granularity == "turn" else (
        ("session", ""),)
    kept = [e for e in upstream if _scored(e)]
    same_set = {e["question_id"] for e in kept} == set(mine)
    same_rank = differing_values = tie_only = 0
    for entry in kept:
        qid = entry["question_id"]
        ranked = [x["corpus_id"] for x in entry["retrieval_results"]["ranked_items"]]
        pair = mine[qid]
        n = len(pair["ranked"])
        if ranked[:n] == pair["ranked"]:
            same_rank += 1
        else:
            print(f"ranking differs: {qid}")
            from rank_bm25 import BM25Okapi

            items = entry["retrieval_results"]["ranked_items"]
            scores = BM25Okapi([x["text"].split(" ") for x in items]).get_scores(
                entry["question"].split(" "))
            score_of = {x["corpus_id"]: float(s) for x, s in zip(items, scores, strict=True)}
            tie_only += [score_of[c] for c in ranked[:n]] == [score_of[c] for c in pair["ranked"]]
        for level, prefix in levels:
            for key, value in entry["retrieval_results"]["metrics"][level].items():
                if pair["metrics"][prefix + key] != value:
                    differing_values += 1
                    print(f"value differs: {qid} {level} {key}: upstream {value}, plugin "
                          f"{pair['metrics'][prefix + key]}")
    worst = 0.0
    overall = ours["summary"]["bm25"]["overall"]
    for level, prefix in levels:
        for key in kept[0]["retrieval_results"]["metrics"][level]:
            mean = float(np.mean([e["retrieval_results"]["metrics"][level][key] for e in kept]))
            worst = max(worst, abs(mean - overall[prefix + key]))
    print(f"{granularity}: {len(kept)} questions averaged by upstream, {len(mine)} scored by "
          f"the plugin (same set: {same_set}); identical rankings: {same_rank}; differing "
          f"per-question values: {differing_values}; largest difference of an overall mean: "
          f"{worst:.3g}; differing rankings that differ only in the order of equal scores: "
          f"{tie_only}")
    return 0 if same_set else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
