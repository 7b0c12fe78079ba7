"""LongMemEval's retrieval metrics, as its ``src/retrieval/eval_utils.py`` computes them.

Used by ``--retrieval-eval-protocol longmemeval``. They differ from :mod:`.metrics` (the vipune
protocol) on purpose:

* a ranking is a list of corpus *positions* given by their ids; ids may repeat (a repeated
  session slot is a second item) and nothing is deduplicated before the cut
  (eval_utils.py line 25: the set of the ids at the first k positions);
* ``recall_all`` of an empty gold list is 1 (``all([])``, line 27), ``recall_any`` 0 (line 26);
* ``ndcg_any``'s ideal DCG sorts the relevance of *every* corpus position, repeats included
  (lines 14-17), and is 0 when no position is relevant (lines 19-20);
* turn rankings also give session metrics (``evaluate_retrieval_turn2session``, lines 32-46):
  ids lose their last ``_`` part, and k grows until the first k' positions hold k distinct
  sessions (or the corpus ends).

The DCG is computed with numpy float64 in the same order (lines 4-9), so the floats match.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

__all__ = ["dcg", "evaluate", "evaluate_turn2session", "ndcg_any", "recall_all",
           "recall_any", "score_ranking", "strip_turn"]

FAMILIES: tuple[str, ...] = ("recall_any", "recall_all", "ndcg_any")
#: Prefix of the session metrics derived from a turn ranking.
SESSION_PREFIX = "session_"


def strip_turn(turn_id: str) -> str:
    """The session id of a turn id: everything before the last ``_`` (eval_utils.py line 35:
    the parts of a split at ``_`` joined again without the last, i.e. "" for an id without
    one)."""
    return turn_id.rpartition("_")[0]


def recall_any(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 when a gold id is among the ids at the first ``k`` positions (eval_utils.py 25-26)."""
    top = set(ranked[:k])
    return float(any(g in top for g in gold))


def recall_all(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 when every gold id is there; 1.0 for no gold at all (``all([])``, line 27)."""
    top = set(ranked[:k])
    return float(all(g in top for g in gold))


def dcg(relevances: Sequence[float], k: int) -> float:
    """``rel_1 + sum_{i>=2} rel_i / log2(i)`` over the first ``k``, numpy float64 (lines 4-9)."""
    rel = np.asarray(relevances, dtype=np.float64)[:k]
    if rel.size == 0:
        return 0.0
    return float(rel[0] + np.sum(rel[1:] / np.log2(np.arange(2, rel.size + 1))))


def ndcg_any(ranked: Sequence[str], gold: Collection[str], corpus_ids: Sequence[str],
             k: int) -> float:
    """Binary-relevance nDCG@k; the ideal sorts every corpus position (lines 12-21)."""
    gold_set = set(gold)
    ideal = dcg(sorted((1 if c in gold_set else 0 for c in corpus_ids), reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg([1 if r in gold_set else 0 for r in ranked[:k]], k) / ideal


def evaluate(ranked: Sequence[str], gold: Collection[str], corpus_ids: Sequence[str],
             k: int) -> tuple[float, float, float]:
    """(recall_any, recall_all, ndcg_any) at ``k`` (``evaluate_retrieval``, lines 24-29)."""
    return (recall_any(ranked, gold, k), recall_all(ranked, gold, k),
            ndcg_any(ranked, gold, corpus_ids, k))


def evaluate_turn2session(ranked: Sequence[str], gold: Collection[str],
                          corpus_ids: Sequence[str], k: int) -> tuple[float, float, float]:
    """Session metrics of a turn ranking (``evaluate_retrieval_turn2session``, lines 32-46).

    ``ranked`` must be the whole ranking (every corpus position): k grows past the first k
    positions until they hold k distinct sessions.
    """
    sessions = [strip_turn(r) for r in ranked]
    session_gold = {strip_turn(g) for g in gold}
    session_corpus = [strip_turn(c) for c in corpus_ids]
    effective = k
    seen = set(sessions[:effective])
    # Upstream's loop (lines 42-44): grow while k' <= the corpus size and too few sessions.
    while effective <= len(session_corpus) and len(seen) < k:
        effective += 1
        seen = set(sessions[:effective])
    return evaluate(sessions, session_gold, session_corpus, effective)


def score_ranking(ranked: Sequence[str], gold: Collection[str], corpus_ids: Sequence[str],
                  ks: Sequence[int], granularity: str) -> dict[str, float]:
    """Every metric at every k for one question: ``recall_any@k``… at the run's granularity,
    plus ``session_recall_any@k``… derived from a turn ranking (run_retrieval.py 316-329)."""
    out: dict[str, float] = {}
    for k in ks:
        for name, value in zip(FAMILIES, evaluate(ranked, gold, corpus_ids, k), strict=True):
            out[f"{name}@{k}"] = value
        if granularity == "turn":
            values = evaluate_turn2session(ranked, gold, corpus_ids, k)
            for name, value in zip(FAMILIES, values, strict=True):
                out[f"{SESSION_PREFIX}{name}@{k}"] = value
    return out
