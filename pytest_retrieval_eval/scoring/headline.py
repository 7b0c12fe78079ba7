"""The figures of the summary's headline (issue 38, item 1): the best retriever per cut-off,
each retriever's weakest question type and who scores 0 there, the misses a diagnostic
explains, and the question that shows why. Pure functions over a report's summary and pair
results; :mod:`pytest_retrieval_eval.reporting.headline` words them.

The self-check (``oracle`` and its what-ifs: it ranks gold first by construction) is never
"best", never "weakest" and never the retriever a next command points at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SELF_CHECKS", "best_per_cut", "explained_misses", "is_self_check", "misses",
           "next_question", "weakest_types"]

#: Retrievers that rank the gold first by construction (pipeline self-checks).
SELF_CHECKS = ("oracle",)


def is_self_check(name: str) -> bool:
    """Whether ``name`` is a self-check (``oracle``, ``oracle+unit:turn``): its numbers say
    the pipeline works, never that a store is good."""
    return name.partition("+")[0] in SELF_CHECKS


def _shown(value: Any) -> float | None:
    """A metric as the tables print it (three decimals), or None."""
    return None if value is None else round(float(value), 3)


def real_retrievers(summary: Mapping[str, Any], retrievers: Sequence[str]) -> list[str]:
    """The retrievers that scored a pair and are no self-check, in the run's order."""
    return [name for name in retrievers if not is_self_check(name) and name in summary
            and int(summary[name]["overall"].get("n", 0)) > 0]


def best_per_cut(summary: Mapping[str, Any], retrievers: Sequence[str], family: str,
                 cuts: Sequence[int | str]) -> list[dict[str, Any]]:
    """Per cut-off (a k, or a budget ``2000tok``): the highest overall ``family@cut`` as
    printed and every retriever at it (a tie names them all); a cut no real retriever has a
    value for is left out. ``{"metric", "value", "retrievers"}`` each."""
    out: list[dict[str, Any]] = []
    names = real_retrievers(summary, retrievers)
    for cut in cuts:
        metric = f"{family}@{cut}"
        values = {name: _shown(summary[name]["overall"].get(metric)) for name in names}
        present = {name: v for name, v in values.items() if v is not None}
        if not present:
            continue
        top = max(present.values())
        out.append({"metric": metric, "value": top,
                    "retrievers": [name for name, v in present.items() if v == top]})
    return out


def weakest_types(summary: Mapping[str, Any], retrievers: Sequence[str], family: str,
                  ks: Sequence[int]) -> list[dict[str, Any]]:
    """Per question type that is some real retriever's weakest at the largest k (its lowest
    ``family@K`` as printed; a tie names every such type): ``{"question_type",
    "weakest_for" (those retrievers), "values" (their ``family@K`` there), "zero" (the real
    retrievers at 0 at every k there)}``, in the table's type order. [] when no
    retriever scored two types or more."""
    if not ks:
        return []
    top = f"{family}@{max(ks)}"
    names = real_retrievers(summary, retrievers)
    order: list[str] = []
    for name in names:
        order.extend(t for t in summary[name]["by_type"] if t not in order)
    weakest_for: dict[str, list[str]] = {}
    for name in names:
        values = {t: _shown(e.get(top)) for t, e in summary[name]["by_type"].items()}
        present = {t: v for t, v in values.items() if v is not None}
        if len(present) < 2:
            continue
        low = min(present.values())
        for qtype, value in present.items():
            if value == low:
                weakest_for.setdefault(qtype, []).append(name)
    out = []
    for qtype in order:
        if qtype not in weakest_for:
            continue
        entries = {name: summary[name]["by_type"].get(qtype) for name in names}
        zero = [name for name, e in entries.items() if e is not None and all(
            _shown(e.get(f"{family}@{k}")) == 0 for k in ks)]
        out.append({"question_type": qtype, "weakest_for": weakest_for[qtype],
                    "values": {n: float(_shown(entries[n][top]) or 0.0)
                               for n in weakest_for[qtype]}, "zero": zero})
    return out


def _first_gold_in(ranked: Sequence[str], gold: Sequence[str], k: int) -> bool:
    wanted = set(gold)
    return any(mem_id in wanted for mem_id in list(ranked)[:k])


def misses(results: Sequence[Mapping[str, Any]], retrievers: Sequence[str],
           ks: Sequence[int]) -> dict[str, dict[str, int]]:
    """Per real retriever: ``pairs`` (scored, with gold), ``missed`` (no gold in the top
    largest k), and of those ``no_rows`` (nothing returned) and ``fewer_rows`` (some rows,
    fewer than that k)."""
    top = max(ks)
    out: dict[str, dict[str, int]] = {}
    for name in retrievers:
        if is_self_check(name):
            continue
        mine = [r for r in results if r["retriever"] == name and r.get("gold")]
        if not mine:
            continue
        missed = [r for r in mine if not _first_gold_in(r["ranked"], r["gold"], top)]
        out[name] = {"pairs": len(mine), "missed": len(missed),
                     "no_rows": sum(1 for r in missed if not r["ranked"]),
                     "fewer_rows": sum(1 for r in missed if 0 < len(r["ranked"]) < top)}
    return out


def explained_misses(missed: Mapping[str, Mapping[str, int]]) -> dict[str, Any] | None:
    """The retriever and the reason (``no_rows``, ``fewer_rows``) that explain the most
    misses (``{"retriever", "reason", "count", "missed", "pairs"}``; the first in the run's
    order on a tie), or None when no miss came with fewer rows than asked for."""
    best: dict[str, Any] | None = None
    for name, m in missed.items():
        for reason in ("no_rows", "fewer_rows"):
            if m[reason] and (best is None or m[reason] > best["count"]):
                best = {"retriever": name, "reason": reason, "count": m[reason],
                        "missed": m["missed"], "pairs": m["pairs"]}
    return best


def next_question(results: Sequence[Mapping[str, Any]], family: str, retriever: str,
                  ks: Sequence[int], types: Sequence[str]) -> dict[str, str] | None:
    """The question a reader looks at first: ``retriever``'s first pair (in the run's order)
    of the first of ``types`` (its weakest) whose ``family@K`` (K the largest k) is below 1,
    else its first such pair of any type (either way one whose recorded explain facts rank
    a gold session past K first, when any does); None when it missed nothing.
    ``{"question_id", "question_type", "retriever"}``, with ``selector`` where the item's
    word is not the column's name, ``gold`` and ``gold_rank`` where a gold ranked past K."""
    top = max(ks)
    metric = f"{family}@{top}"
    mine = [r for r in results if r["retriever"] == retriever
            and float((r.get("metrics") or {}).get(metric, 1.0)) < 1.0]
    # a pair whose recorded explain facts place a gold session past the top k first: its
    # explanation shows where the gold went, not only that it was missed
    past = [r for r in mine if _gold_past(r, top) is not None]
    for qtype in [*types, None]:
        for r in [*past, *mine]:
            if qtype is None or r.get("question_type") == qtype:
                out = {"question_id": str(r["question_id"]),
                       "question_type": str(r.get("question_type")), "retriever": retriever}
                if r.get("selector"):  # the item's own word (a node id's, -k's)
                    out["selector"] = str(r["selector"])
                gold = _gold_past(r, top)
                if gold is not None:
                    out["gold"], out["gold_rank"] = gold[0], str(gold[1])
                return out
    return None


def _gold_past(result: Mapping[str, Any], top: int) -> tuple[str, int] | None:
    """The gold session of a pair's explain facts that ranked best past the top ``top``
    (None: the facts are not recorded, or no gold was returned past it)."""
    facts = result.get("explain")
    ranks = facts.get("gold_ranks") if isinstance(facts, Mapping) else None
    if not isinstance(ranks, Mapping):
        return None
    past = sorted((int(rank), str(g)) for g, rank in ranks.items()
                  if isinstance(rank, int) and not isinstance(rank, bool) and rank > top)
    return (past[0][1], past[0][0]) if past else None
