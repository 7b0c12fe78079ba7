"""``retrieval-eval explain REPORT QUESTION_ID --diff NEW``: one question of two reports, per
retriever, the rows aligned (``+`` entered the top k, ``-`` left it), what each report
recorded of them, the gold's moves and the metrics that changed. Read from the reports'
pairs as :mod:`.explain` reads one, nothing recomputed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..scoring.budget import is_budget_key
from .explain import (
    ExplainError,
    _fit,
    _gold_rank,
    _listing,
    _missing_lines,
    _pairs_of,
    _question_head,
    _row_text,
    _rows_of,
)
from .explain_facts import full_facts
from .memory_lines import budget_diff_lines, memory_diff_lines

__all__ = ["diff_lines", "lane_diff_lines"]


def _lanes(base: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]],
           question_id: str, retrievers: Sequence[tuple[str, str]] | None,
           base_source: str, new_source: str) -> list[tuple[Any, Any]]:
    """The (base pair, new pair) of each retriever compared: those named (``BASE=NEW``), else
    every retriever that ranked the question in both reports."""
    by_base = {str(p.get("retriever")): p for p in base}
    by_new = {str(p.get("retriever")): p for p in new}
    if retrievers is None:
        both = [(by_base[n], by_new[n]) for n in by_base if n in by_new]
        if not both:
            raise ExplainError(
                f"no retriever ranked question {question_id} in both {base_source} (it has: "
                f"{_listing(list(by_base))}) and {new_source} (it has: "
                f"{_listing(list(by_new))}); map them with --retrievers BASE=NEW")
        return both
    lanes = []
    for b, n in retrievers:
        for name, by, source in ((b, by_base, base_source), (n, by_new, new_source)):
            if name not in by:
                raise ExplainError(
                    f"retriever {name!r} did not rank question {question_id} in {source} "
                    f"(it has: {_listing(list(by))}); give one of them with --retrievers")
        lanes.append((by_base[b], by_new[n]))
    return lanes


def _move_text(before: int | None, after: int | None) -> str:
    if before == after:
        return "unchanged"
    if before is None or after is None:
        return "entered the list" if before is None else "left the list"
    return f"up {before - after}" if after < before else f"down {after - before}"


def _match_line(label: str, facts: Mapping[str, Any] | None) -> list[str]:
    source = (facts or {}).get("fusion") or (facts or {}).get("fts")
    if not isinstance(source, Mapping):
        return []
    return [f"  {label} FTS5 MATCH {source['fts_match']!r}: {source['fts_rows']} rows"]


def lane_diff_lines(base: Mapping[str, Any], new: Mapping[str, Any], top: int) -> list[str]:
    """One retriever of two reports, aligned: the union of both top ``top`` (the new's order,
    then the rows that left), each row's base and new rank, ``+`` for a row that entered the
    top, ``-`` for one that left, and beside it what the report it is shown from recorded of
    it (the new one's, the base one's for a row that left); each gold session's move; the
    metrics that changed."""
    b_name, n_name = str(base["retriever"]), str(new["retriever"])
    gold = [str(g) for g in new.get("gold") or base.get("gold") or []]
    gold_set = set(gold)
    b_top = [str(x) for x in base.get("ranked") or []][:top]
    n_top = [str(x) for x in new.get("ranked") or []][:top]
    b_facts, n_facts = full_facts(base), full_facts(new)
    title = b_name if b_name == n_name else f"{b_name} -> {n_name}"
    lines = [f"{title}: top {top} (base, new rank; + entered, - left; * gold)"]
    order = [*n_top, *(x for x in b_top if x not in set(n_top))]
    width = max((len(x) for x in order), default=0)
    digits = len(str(top))
    for mem_id in order:
        b_rank = b_top.index(mem_id) + 1 if mem_id in b_top else None
        n_rank = n_top.index(mem_id) + 1 if mem_id in n_top else None
        mark = "+" if b_rank is None else "-" if n_rank is None else " "
        facts = n_facts if n_rank is not None else b_facts
        row = _row_text(_rows_of(facts).get(mem_id), facts, mem_id)
        if n_rank is None and row:
            row = "  base:" + row[1:]
        lines.append(f"  {mark} {b_rank or '-':>{digits}} {n_rank or '-':>{digits}} "
                     f"{'*' if mem_id in gold_set else ' '} " + (f"{mem_id:<{width}}{row}"
                                                                if row else mem_id))
    for g in gold:
        b_rank, b_text = _gold_rank(b_facts, b_top, g, top)
        n_rank, n_text = _gold_rank(n_facts, n_top, g, top)
        lines.append(f"  gold {g}: {b_text} -> {n_text} ({_move_text(b_rank, n_rank)})")
        for label, facts in (("base", b_facts), ("new", n_facts)):
            row = _row_text(_rows_of(facts).get(g), facts, g)
            if row:
                lines.append(f"    {label}:{row[1:]}")
    lines.extend(_match_line("base", b_facts) + _match_line("new ", n_facts))
    fusions = [f["fusion"] for f in (b_facts, n_facts)
               if isinstance(f, Mapping) and isinstance(f.get("fusion"), Mapping)]
    if any("rows" in fusion for fusion in fusions):
        rrf = sorted({int(fusion["rrf_k"]) for fusion in fusions})
        lines.append(f"  sem + fts: a row's ranks in the semantic and FTS lists (-: not in "
                     f"it), each adding 1/({' or '.join(map(str, rrf))} + rank)")
    for facts in (b_facts, n_facts):
        missing = _missing_lines(facts, top)
        if missing:
            lines.append(("  base:" if facts is b_facts else "  new:") + missing[0][1:])
    b_metrics, n_metrics = base.get("metrics") or {}, new.get("metrics") or {}
    moved = [f"{key} {b_metrics[key]:.3f} -> {n_metrics[key]:.3f}" for key in b_metrics
             if key.startswith("recall@") and key in n_metrics and not is_budget_key(key)
             and b_metrics[key] != n_metrics[key]]
    lines.append("  " + ("; ".join(moved) if moved else "recall@k: unchanged at every k"))
    ks = sorted({int(key.partition("@")[2]) for key in b_metrics
                 if key.startswith("recall@") and key.partition("@")[2].isdigit()})
    lines.extend(memory_diff_lines(base, new, ks))  # a session store beside a memory store
    lines.extend(budget_diff_lines(base, new))  # each budget's context on both sides
    return lines


def diff_lines(base: Mapping[str, Any], new: Mapping[str, Any], question_id: str,
               retriever: str | None = None,
               retrievers: Sequence[tuple[str, str]] | None = None, width: int | None = 80,
               base_source: str = "the base report",
               new_source: str = "the new report") -> list[str]:
    """``explain BASE QUESTION_ID --diff NEW``: the question in both reports, per retriever
    present in both (or ``retriever``, or the ``(base, new)`` names of ``retrievers``), the
    rows aligned (:func:`lane_diff_lines`), fitted to ``width``. :class:`ExplainError` (one
    line) when the question or a retriever is missing from either report."""
    b_pairs = _pairs_of(base, question_id, base_source)
    n_pairs = _pairs_of(new, question_id, new_source)
    question_id = str(n_pairs[0].get("question_id"))  # the whole id, given a part of it
    if retriever is not None and retrievers is None:
        retrievers = [(retriever, retriever)]
    lanes = _lanes(b_pairs, n_pairs, question_id, retrievers, base_source, new_source)
    top = max(int(k) for k in [*(base.get("ks") or [10]), *(new.get("ks") or [10])])
    lines = [*_question_head(n_pairs[0], question_id, say_missing=False),
             f"base: {base_source}", f"new:  {new_source}"]
    for b, n in lanes:
        lines.append("")
        lines.extend(lane_diff_lines(b, n, top))
    return _fit(lines, width)
