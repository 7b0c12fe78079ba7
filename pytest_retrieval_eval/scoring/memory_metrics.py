"""What a ranking of memories scores: pure functions over each memory's provenance.

A memory (a turn, a chunk, an extracted fact, a summary: ``retrievers.Memory``) names the
sessions and turns it came from. Here a memory is given by that provenance alone, its
``sessions`` and its ``turns`` (turn ids ``<session_id>_<n>``, whose session is
:func:`.longmemeval_metrics.strip_turn` of the id), so these functions need nothing of the
retrievers' wing (docs/memories.md gives the definitions):

* :func:`covered_sessions`: a memory's sessions as listed, then its turns' sessions in
  order, each once;
* :func:`session_ranking`: the derived session ranking, sessions in the order of their first
  memory. Today's metrics score its first k distinct sessions: the set LongMemEval's
  ``evaluate_retrieval_turn2session`` reaches when it grows k until k distinct sessions
  (``src/retrieval/eval_utils.py`` lines 40-44 of xiaowu0162/LongMemEval);
* :func:`memory_recall`: ``|gold ∩ sessions covered by the first k memories| / |gold|``,
  what a reader handed k memories sees (for one-session memories it is ``recall@k``);
* :func:`turn_recall`: the share of the gold turns (``has_answer`` turns of the gold
  sessions) among the turns of the first k memories.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from .longmemeval_metrics import strip_turn

# The metric families a memory ranking adds (``memory_recall@k``, ``turn_recall@k``): named
# in .metrics, which a report reads without loading this module.
from .metrics import MEMORY_RECALL as MEMORY_RECALL
from .metrics import TURN_RECALL as TURN_RECALL
from .metrics import metric_key

__all__ = ["MEMORY_RECALL", "TURN_RECALL", "complete_turn_recall", "covered_sessions",
           "memory_metrics", "memory_recall", "session_ranking", "turn_recall",
           "with_memory_recall"]

Provenance = tuple[Sequence[str], Sequence[str]]  # (sessions, turns) of one memory


def covered_sessions(sessions: Iterable[str], turns: Iterable[str] = ()) -> tuple[str, ...]:
    """A memory's sessions: its ``sessions`` in the order listed, then the session of each
    of its ``turns`` in order, each once."""
    return tuple(dict.fromkeys([*sessions, *(strip_turn(t) for t in turns)]))


def session_ranking(covered: Iterable[Sequence[str]]) -> list[str]:
    """The derived session ranking of memories given by their covered sessions, best first:
    each session at the rank of the first memory covering it."""
    return list(dict.fromkeys(s for sessions in covered for s in sessions))


def memory_recall(covered: Sequence[Sequence[str]], gold: Collection[str], k: int) -> float:
    """The share of the gold sessions covered by the first ``k`` memories; 0.0 without gold."""
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    seen = {s for sessions in covered[:k] for s in sessions}
    return len(gold_set & seen) / len(gold_set)


def turn_recall(turns: Sequence[Sequence[str]], gold_turns: Collection[str], k: int) -> float:
    """The share of ``gold_turns`` among the turns of the first ``k`` memories; 0.0 without
    gold turns."""
    gold_set = set(gold_turns)
    if not gold_set:
        return 0.0
    seen = {t for held in turns[:k] for t in held}
    return len(gold_set & seen) / len(gold_set)


def memory_metrics(memories: Sequence[Provenance], gold: Collection[str], ks: Sequence[int],
                   gold_turns: Collection[str] | None = None) -> dict[str, float]:
    """``memory_recall@k`` of each k and, where a memory carries turns and ``gold_turns``
    are known (non-empty), ``turn_recall@k``."""
    covered = [covered_sessions(s, t) for s, t in memories]
    out = {metric_key(MEMORY_RECALL, k): memory_recall(covered, gold, k) for k in ks}
    if gold_turns and any(t for _, t in memories):
        held = [tuple(t) for _, t in memories]
        out.update({metric_key(TURN_RECALL, k): turn_recall(held, gold_turns, k) for k in ks})
    return out


def complete_turn_recall(results: Iterable[Mapping[str, object]]) -> None:
    """``turn_recall@k`` of every pair whose gold marks turns (issue 43.1), in place: a pair
    of a retriever that reports ``turn_recall@k`` on any pair, whose gold marks turns
    (``gold_turns``) but whose memories named no turn (or which returned nothing), found
    none of them: 0.0, as ``memory_recall@k`` counts such a pair. Without it, answering
    nothing would raise the average."""
    results = list(results)
    keys: dict[object, set[str]] = {}
    for r in results:
        metrics = r.get("metrics")
        if isinstance(metrics, dict):
            keys.setdefault(r.get("retriever"), set()).update(
                key for key in metrics if key.startswith(TURN_RECALL + "@"))
    for r in results:
        metrics, wanted = r.get("metrics"), keys.get(r.get("retriever"))
        if wanted and r.get("gold_turns") and isinstance(metrics, dict):
            for key in sorted(wanted):
                metrics.setdefault(key, 0.0)


def with_memory_recall(metrics: Mapping[str, float]) -> Mapping[str, float]:
    """A pair's metrics with ``memory_recall@k`` where a session store's pair lacks it: there
    each memory is one session, so it is that pair's ``recall@k`` (how ``compare`` and
    ``explain --diff`` set a session store beside a memory store)."""
    if any(key.startswith(MEMORY_RECALL + "@") for key in metrics):
        return metrics
    extra = {MEMORY_RECALL + key[len("recall"):]: value for key, value in metrics.items()
             if key.startswith("recall@") and key[len("recall@"):].isdigit()}  # not @500tok
    return {**metrics, **extra} if extra else metrics
