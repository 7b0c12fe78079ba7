"""A memory store's part of ``retrieval-eval explain`` (issue 36): the memories the report
recorded (:func:`.retrievers.memories.memory_record`), each with its score, its provenance,
the gold it covers and an excerpt of its text; which memory first covers each gold session;
and, beside another report's pair (``explain --diff``), memory recall at each k of both.

A session store's pair records no memories: each of its rows is one memory, so its
``memory_recall@k`` is its ``recall@k`` (:func:`.scoring.memory_metrics.with_memory_recall`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..scoring.longmemeval_metrics import strip_turn
from ..scoring.memory_metrics import MEMORY_RECALL, with_memory_recall

__all__ = ["EXCERPT", "memory_diff_lines", "memory_lines", "summary_metrics"]

#: Characters of a memory's text shown on its line.
EXCERPT = 60


def _covers(memory: Mapping[str, Any]) -> list[str]:
    sessions = [str(s) for s in memory.get("sessions") or []]
    turns = [strip_turn(str(t)) for t in memory.get("turns") or []]
    return list(dict.fromkeys([*sessions, *turns]))


def _excerpt(text: object) -> str:
    if not isinstance(text, str):
        return ""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= EXCERPT else flat[:EXCERPT - 1] + "…")


def _memory_row(memory: Mapping[str, Any], gold: set[str]) -> str:
    covers = _covers(memory)
    hit = [s for s in covers if s in gold]
    parts = []
    if memory.get("score") is not None:
        parts.append(f"score {float(memory['score']):.4f}")
    if memory.get("sessions"):
        parts.append("sessions " + ",".join(map(str, memory["sessions"])))
    if memory.get("turns"):
        parts.append("turns " + ",".join(map(str, memory["turns"])))
    if hit:
        parts.append("gold " + ",".join(hit))
    text = _excerpt(memory.get("text"))
    if text:
        parts.append(text)
    return (f"  {int(memory.get('rank', 0)):>3} {'*' if hit else ' '} {memory.get('id')}  "
            + "  ".join(parts))


def memory_lines(pair: Mapping[str, Any]) -> list[str]:
    """The recorded memories of a pair (none: a session store's pair), one line each, and
    the memory that first covers each gold session."""
    memories = pair.get("memories")
    if not isinstance(memories, list) or not memories:
        return []
    gold = [str(g) for g in pair.get("gold") or []]
    gold_set = set(gold)
    lines = [f"{pair.get('retriever')}: memories (rank, * covers gold; its sessions, turns, "
             "text) - the ranking above is their sessions in first-memory order"]
    lines.extend(_memory_row(m, gold_set) for m in memories if isinstance(m, Mapping))
    for g in gold:
        first = next((m for m in memories if isinstance(m, Mapping) and g in _covers(m)),
                     None)
        lines.append(f"  gold {g}: " + ("in no recorded memory" if first is None else
                                        f"first in memory {first.get('rank')} "
                                        f"({first.get('id')})"))
    return lines


def memory_diff_lines(base: Mapping[str, Any], new: Mapping[str, Any],
                      ks: Sequence[int]) -> list[str]:
    """For ``explain --diff`` where either side is a memory store: both sides' memories,
    and ``memory_recall@k`` of each k, base -> new (a session store's is its recall@k)."""
    if not base.get("memories") and not new.get("memories"):
        return []
    lines: list[str] = []
    for label, pair in (("base", base), ("new", new)):
        lines.extend(f"  {label}: {line.strip()}" if i == 0 else line
                     for i, line in enumerate(memory_lines(pair)))
    b_metrics = with_memory_recall(base.get("metrics") or {})
    n_metrics = with_memory_recall(new.get("metrics") or {})
    moved = [f"@{k} {b_metrics[key]:.3f} -> {n_metrics[key]:.3f}" for k in ks
             if (key := f"{MEMORY_RECALL}@{k}") in b_metrics and key in n_metrics]
    if moved:
        lines.append(f"  {MEMORY_RECALL} (gold covered by the first k memories): "
                     + "; ".join(moved))
    return lines


def summary_metrics(results: Sequence[Mapping[str, Any]]) -> list[Mapping[str, float]]:
    """Each result's metrics as the summary averages them. Where some pair of the run holds
    ``memory_recall@k`` (a memory store ran), a pair without it (a session store's: each
    memory one session) gets its ``recall@k`` there, so the memory_recall table shows
    session stores beside memory stores rather than ``-``. A run of session stores only is
    summarized as it is (no memory_recall table)."""
    prefix = MEMORY_RECALL + "@"
    if not any(key.startswith(prefix) for r in results for key in r["metrics"]):
        return [r["metrics"] for r in results]
    return [with_memory_recall(r["metrics"]) for r in results]
