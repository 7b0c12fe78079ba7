"""Retrieval metrics: small pure functions over a ranked id list and a gold set.

Every function takes the ranking as returned by a retriever (best first) and the pair's gold
session ids. Rankings are deduplicated by id *before* the cut (:func:`dedupe`), so a retriever
that returns a session twice cannot fill its top k with copies.

- :func:`recall` is the scope document's primary number: ``|gold ∩ top-k| / |gold|``.
- :func:`recall_any`, :func:`recall_all` and :func:`ndcg_any` are LongMemEval's own retrieval
  metrics, defined as in its evaluation code (``src/retrieval/eval_utils.py``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

from .longmemeval_metrics import strip_turn


def dedupe(ranked: Iterable[str]) -> list[str]:
    """Drop repeated ids, keeping each id at its best (first) rank."""
    return list(dict.fromkeys(ranked))  # insertion-ordered: each id where it first appears


def recall(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Fraction of the gold ids found in the top ``k``; 0.0 for an empty gold set."""
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    return len(gold_set.intersection(dedupe(ranked)[:k])) / len(gold_set)


def recall_any(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 when at least one gold id is in the top ``k``, else 0.0."""
    gold_set = set(gold)
    return 1.0 if gold_set.intersection(dedupe(ranked)[:k]) else 0.0


def recall_all(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 when every gold id is in the top ``k`` (and there is gold), else 0.0."""
    gold_set = set(gold)
    return 1.0 if gold_set and gold_set.issubset(dedupe(ranked)[:k]) else 0.0


def _dcg(relevances: Sequence[float], k: int) -> float:
    """LongMemEval's DCG: ``rel_1 + sum_{i=2..k} rel_i / log2(i)``."""
    rel = list(relevances[:k])
    if not rel:
        return 0.0
    return rel[0] + sum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2))


def ndcg_any(
    ranked: Sequence[str], gold: Collection[str], k: int, corpus_size: int | None = None
) -> float:
    """LongMemEval's ``ndcg_any@k`` with binary relevance.

    The ideal DCG sorts the relevances of the *whole corpus* (the persona's rows); gold ids
    that are not in the corpus cannot be relevant, so pass ``corpus_size`` and the gold ids
    present in it, or leave ``corpus_size`` out to assume every gold id is rankable.
    """
    gold_set = set(gold)
    top = dedupe(ranked)[:k]
    actual = _dcg([1.0 if item in gold_set else 0.0 for item in top], k)
    n_relevant = len(gold_set) if corpus_size is None else min(len(gold_set), corpus_size)
    ideal = _dcg([1.0] * n_relevant, k)
    return actual / ideal if ideal > 0 else 0.0


#: The metric families a memory ranking adds (``memory_recall@k``, ``turn_recall@k``;
#: :mod:`.memory_metrics`), named here so that a report tells them without loading it.
MEMORY_RECALL = "memory_recall"
TURN_RECALL = "turn_recall"
#: ``recall@500tok``: the family is ``recall``, the cut-off a budget in tokens (:mod:`.budget`).
BUDGET_SUFFIX = "tok"
#: The family of ``tokens@k``: a count of tokens, not a fraction (:mod:`.budget`).
TOKENS = "tokens"


def metric_key(name: str, k: int) -> str:
    """The report's name for a metric at a cut-off, e.g. ``recall@5``."""
    return f"{name}@{k}"


def score_ranking(
    ranked: Sequence[str], gold: Collection[str], ks: Sequence[int], rankable: Collection[str]
) -> dict[str, float]:
    """Every metric at every cut-off for one pair.

    ``rankable`` is the persona's set of session ids: gold ids outside it count against
    recall (the pair is kept and flagged) but cannot raise the ideal DCG.
    """
    ranking = dedupe(ranked)
    present_gold = [g for g in gold if g in rankable]
    out: dict[str, float] = {}
    for k in ks:
        out[metric_key("recall", k)] = recall(ranking, gold, k)
        out[metric_key("recall_any", k)] = recall_any(ranking, gold, k)
        out[metric_key("recall_all", k)] = recall_all(ranking, gold, k)
        out[metric_key("ndcg_any", k)] = ndcg_any(ranking, present_gold, k)
    return out


def score_rankings(rankings: Mapping[int, Sequence[str]], gold: Collection[str],
                   ks: Sequence[int], rankable: Collection[str]) -> dict[str, float]:
    """:func:`score_ranking` of each cut-off's own ranking: ``rankings[k]`` is what a caller
    asking for ``k`` results got (a limit-sensitive search ranks differently per limit)."""
    out: dict[str, float] = {}
    for k in ks:
        out.update(score_ranking(rankings[k], gold, (k,), rankable))
    return out


def session_recall(rankings: Mapping[int, Sequence[str]], gold_turns: Collection[str],
                   ks: Sequence[int]) -> dict[str, float]:
    """``session_recall@k`` of turn rankings: a caller asking vipune for k rows gets k turns,
    and this is the share of the gold sessions with a turn among them (a turn id is its
    session id, ``_`` and the turn's number: :func:`.longmemeval_metrics.strip_turn`)."""
    gold_sessions = {strip_turn(g) for g in gold_turns}
    out: dict[str, float] = {}
    for k in ks:
        found = {strip_turn(x) for x in rankings[k][:k]} & gold_sessions
        out[metric_key("session_recall", k)] = len(found) / len(gold_sessions)
    return out


def mean_metrics(rows: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Average each metric over the pairs that hold it (macro average, as the scope document
    specifies). Every pair of a retriever holds the same metrics, except ``turn_recall@k``
    (only pairs whose gold sessions mark ``has_answer`` turns) and a store that returned
    memories for some questions only (``memory_recall@k`` of those)."""
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in rows:
        for key, value in row.items():
            totals[key] = totals.get(key, 0.0) + value
            counts[key] = counts.get(key, 0) + 1
    return {key: value / counts[key] for key, value in totals.items()}
