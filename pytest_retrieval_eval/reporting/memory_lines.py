"""A memory store's part of ``retrieval-eval explain`` (issue 36): the memories the report
recorded (:func:`.retrievers.memories.memory_record`), each with its score, its tokens (a run
with a budget), its provenance, the gold it covers and an excerpt of its text; where each
budget's context ends among them; which memory first covers each gold session; and, beside
another report's pair (``explain --diff``), memory recall at each k and what each budget's
context holds on both sides.

A session store's pair records no memories: each of its rows is one memory, so its
``memory_recall@k`` is its ``recall@k`` (:func:`.scoring.memory_metrics.with_memory_recall`),
and its budget rules stand among the rows of its ranking (:func:`budget_rules`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..scoring.budget import budget_key
from ..scoring.longmemeval_metrics import strip_turn
from ..scoring.memory_metrics import MEMORY_RECALL, with_memory_recall

__all__ = ["EXCERPT", "MEMORY", "SESSION", "budget_diff_lines", "budget_rules", "memory_diff_lines",
           "memory_lines", "summary_metrics"]

#: Characters of a memory's text shown on its line.
EXCERPT = 60
#: The memories' id column is at most this wide (a longer id pushes its own row's parts).
ID_COLUMN = 24


def _covers(memory: Mapping[str, Any]) -> list[str]:
    sessions = [str(s) for s in memory.get("sessions") or []]
    turns = [strip_turn(str(t)) for t in memory.get("turns") or []]
    return list(dict.fromkeys([*sessions, *turns]))


def _excerpt(text: object) -> str:
    if not isinstance(text, str):
        return ""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= EXCERPT else flat[:EXCERPT - 1] + "…")


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _provenance(memory: Mapping[str, Any]) -> list[str]:
    """``sessions a,b`` and ``turns a_1,b_2``, each left out where it only repeats the id
    (a turn store's memory is its turn)."""
    own = [str(memory.get("id"))]
    parts = []
    for field in ("sessions", "turns"):
        ids = [str(x) for x in memory.get(field) or []]
        if ids and ids != own:
            parts.append(f"{field} " + ",".join(ids))
    return parts


def _memory_row(memory: Mapping[str, Any], gold: set[str], id_w: int) -> str:
    covers = _covers(memory)
    hit = [s for s in covers if s in gold]
    parts = []
    if memory.get("score") is not None:
        parts.append(f"score {float(memory['score']):.4f}")
    tokens = _count(memory.get("tokens"))
    if tokens is not None:
        parts.append(f"{tokens} tok")
    parts.extend(_provenance(memory))
    if hit:
        parts.append("gold " + ",".join(hit))
    text = _excerpt(memory.get("text") if memory.get("text") is not None
                    else memory.get("excerpt"))
    if text:
        parts.append(text)
    return (f"  {int(memory.get('rank', 0)):>3} {'*' if hit else ' '} "
            f"{memory.get('id')!s:<{id_w}}  " + "  ".join(parts)).rstrip()


def _cuts(pair: Mapping[str, Any]) -> list[tuple[int, int, bool, int | None]]:
    """(budget, memories its context holds, whether the ranking ran out first, the tokens
    of that context where recorded) of each budget the pair records, smallest first."""
    facts = pair.get("budget")
    if not isinstance(facts, Mapping) or not isinstance(facts.get("fit"), Mapping):
        return []
    ended: Mapping[str, Any] = facts.get("ended") or {}
    held: Mapping[str, Any] = facts.get("held") or {}
    if not isinstance(ended, Mapping) or not isinstance(held, Mapping):
        ended, held = {}, {}
    out = []
    for b, n in facts["fit"].items():
        if str(b).isdigit() and _count(n) is not None:
            out.append((int(b), int(n), ended.get(b) == "ranking", _count(held.get(b))))
    return sorted(out)


def _held(tokens: Mapping[int, int], n: int, recorded: int | None = None) -> int | None:
    """The tokens of memories 1..n: as recorded (``held``), else their sum where each of
    them is known."""
    if recorded is not None:
        return recorded
    counts = [tokens.get(rank) for rank in range(1, n + 1)]
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


#: What a row of the context is, one and several.
MEMORY, SESSION = ("memory", "memories"), ("session", "sessions")


def _rule_text(budget: int, n: int, by_ranking: bool, tokens: Mapping[int, int],
               unit: tuple[str, str], recorded: int | None) -> str:
    held = _held(tokens, n, recorded)
    total = "" if held is None else f", {held} tok"
    if by_ranking:
        return f"budget {budget} tok: the whole ranking fits ({n} {unit[n != 1]}{total})"
    after = tokens.get(n + 1)
    nxt = "" if after is None else f" (next: {after})"
    if n == 0:
        return f"budget {budget} tok holds nothing{nxt}"
    return (f"budget {budget} tok ends here: {unit[0]} 1" if n == 1 else
            f"budget {budget} tok ends here: {unit[1]} 1-{n}") + total + nxt


def budget_rules(rows: Sequence[tuple[int, str]], pair: Mapping[str, Any],
                 tokens: Mapping[int, int], unit: tuple[str, str] = MEMORY) -> list[str]:
    """``rows`` (rank, line) with a rule line where each budget's context ends: after the
    last row it holds (``---- budget 2000 tok ends here: memories 1-7, 1934 tok (next:
    412) ----``: the next memory, of 412 tokens, did not fit); a context that ends past the
    rows shown says so under them.
    ``tokens``: each rank's tokens where known; ``unit``: what a row is (:data:`SESSION`)."""
    out = [line for _, line in rows]
    cuts = _cuts(pair)
    if not cuts or not rows:  # no row, nothing to cut (a store that returned nothing)
        return out
    ranks = [rank for rank, _ in rows]
    placed: list[tuple[int, int, str]] = []  # (index in out to insert before, budget, rule)
    for budget, n, by_ranking, recorded in cuts:
        text = _rule_text(budget, n, by_ranking, tokens, unit, recorded)
        if n > max(ranks, default=0):  # the context holds more than the rows shown
            held = _held(tokens, n, recorded)
            text = (f"budget {budget} tok " + ("takes the whole ranking" if by_ranking
                                               else "ends") + f" after {unit[0]} {n}, past "
                    "the rows shown" + ("" if held is None else f" ({held} tok)"))
        index = next((i for i, rank in enumerate(ranks) if rank > n), len(rows))
        placed.append((index, budget, text))
    for index, _, text in sorted(placed, reverse=True):  # a smaller budget above a larger
        out.insert(index, f"      ---- {text} ----")
    return out


def memory_lines(pair: Mapping[str, Any]) -> list[str]:
    """The recorded memories of a pair (none: a session store's pair), one line each, the
    rules where each budget's context ends, and the memory that first covers each gold
    session."""
    memories = [m for m in pair.get("memories") or [] if isinstance(m, Mapping)]
    if not memories:
        return []
    gold = [str(g) for g in pair.get("gold") or []]
    gold_set = set(gold)
    id_w = min(ID_COLUMN, max(len(str(m.get("id"))) for m in memories))
    tokened = any(_count(m.get("tokens")) is not None for m in memories)
    lines = [f"{pair.get('retriever')}: memories (rank, * covers gold; score, "
             + ("tokens, " if tokened else "") + "sessions and turns where not the id, text) "
             "- the ranking above is their sessions in first-memory order"]
    tokens = {int(m["rank"]): int(m["tokens"]) for m in memories
              if _count(m.get("rank")) is not None and _count(m.get("tokens")) is not None}
    rows = [(int(m.get("rank") or 0), _memory_row(m, gold_set, id_w)) for m in memories]
    lines.extend(budget_rules(rows, pair, tokens))
    for g in gold:
        first = next((m for m in memories if g in _covers(m)), None)
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


def _context(pair: Mapping[str, Any], n: int, by_ranking: bool, recorded: int | None) -> str:
    """What a budget's context of ``n`` memories is on one side: ``3 sessions, 1890 tok``."""
    memories = [m for m in pair.get("memories") or [] if isinstance(m, Mapping)]
    if memories:
        unit = MEMORY
        tokens = {int(m["rank"]): int(m["tokens"]) for m in memories
                  if _count(m.get("rank")) is not None and _count(m.get("tokens")) is not None}
    else:
        unit = SESSION
        listed = (pair.get("budget") or {}).get("tokens") or []
        tokens = {i: int(c) for i, c in enumerate(listed, start=1) if _count(c) is not None}
    held = _held(tokens, n, recorded)
    return (f"{n} {unit[n != 1]}" + ("" if held is None else f", {held} tok")
            + (", the whole ranking" if by_ranking else ""))


def budget_diff_lines(base: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """For ``explain --diff`` where both sides ran with a budget: each budget's recall,
    base -> new, and what its context holds on each side (``recall@2000tok 0.500 -> 1.000:
    base 3 sessions, 1890 tok; new 31 memories, 1990 tok``)."""
    b_cuts = {b: (n, r, h) for b, n, r, h in _cuts(base)}
    n_cuts = {b: (n, r, h) for b, n, r, h in _cuts(new)}
    b_metrics, n_metrics = base.get("metrics") or {}, new.get("metrics") or {}
    lines = []
    for budget in sorted(set(b_cuts) & set(n_cuts)):
        key = budget_key(budget)
        if key not in b_metrics or key not in n_metrics:
            continue
        lines.append(f"  {key} {float(b_metrics[key]):.3f} -> {float(n_metrics[key]):.3f}: "
                     f"base {_context(base, *b_cuts[budget])}; "
                     f"new {_context(new, *n_cuts[budget])}")
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
