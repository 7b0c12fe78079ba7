"""One question explained from a saved report: why each retriever ranked its gold where it did.

:func:`explain_lines` renders, from a JSON report (``--retrieval-eval-json``) and a question
id: the question, its type and date, its gold sessions; per retriever, the top k with the gold
marked and the rank where each gold session landed (or "not returned"); for a fused retriever
(``hybrid`` and its what-ifs) each gold session's semantic rank, FTS rank and RRF
contributions ``1/(k + rank)``, and the FTS5 MATCH string vipune sends, with "0 rows" when
that is why FTS did not help; the metrics that depend on the order of equal scores. Everything
comes from the pair's result (``explain``, ``ties``, ``question``); a report written before
they were recorded says so, and which option records them. ``retrieval-eval explain`` prints
it; the pytest face may show it for one item under ``-v``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import RetrievalEvalError, printable
from .report import fit_lines

__all__ = ["ExplainError", "explain_lines", "pair_lines"]

#: How the report is (re)written so that it holds what explain shows.
RECORD_HINT = ("run pytest --retrieval-eval again with --retrieval-eval-json (this version "
               "records it)")


class ExplainError(RetrievalEvalError):
    """The question or the retriever asked for is not in the report."""


def _listing(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _rank_text(rank: int | None, top: int) -> str:
    if rank is None:
        return "not returned"
    return f"rank {rank}" + (f" (outside the top {top})" if rank > top else "")


def _contribution(rank: int | None, k: int) -> float:
    return 0.0 if rank is None else 1.0 / (k + rank)


def _fusion_lines(fusion: Mapping[str, Any], gold: Sequence[str]) -> list[str]:
    k = int(fusion["rrf_k"])
    rows = int(fusion["fts_rows"])
    match = fusion["fts_match"]
    why = ""
    if rows == 0:
        why = (" (every query word must match: vipune ANDs the quoted words)"
               if fusion.get("fts_mode", "and") == "and" else "")
    lines = [f"  FTS5 MATCH {match!r}: {rows} rows{why}; semantic list: "
             f"{fusion['semantic_rows']} rows; RRF k = {k}"]
    if not match:
        lines[0] = (f"  FTS5 MATCH (none: the question has no words, so vipune runs no FTS "
                    f"query): 0 rows; semantic list: {fusion['semantic_rows']} rows; RRF k = {k}")
    for g in gold:
        ranks = fusion["gold"].get(g) or {}
        sem, fts = ranks.get("semantic"), ranks.get("fts")
        a, b = _contribution(sem, k), _contribution(fts, k)
        sem_text = f"semantic rank {sem}: 1/({k}+{sem}) = {a:.4f}" if sem else \
            "semantic: not in its list (0)"
        fts_text = f"FTS rank {fts}: 1/({k}+{fts}) = {b:.4f}" if fts else \
            "FTS: not in its list (0)"
        lines.append(f"  {g}: {sem_text}; {fts_text}; RRF {a + b:.4f}")
    if float(fusion.get("recency") or 0.0) > 0.0:
        lines.append(f"  then recency weight {fusion['recency']}: score = (1 - w) * RRF + "
                     "w * decay(age)")
    return lines


def pair_lines(pair: Mapping[str, Any], top: int) -> list[str]:
    """One retriever's part: its top ``top`` with the gold marked, each gold session's rank,
    the fusion arithmetic or the FTS query, and the tie-sensitive metrics."""
    name = pair["retriever"]
    gold = [str(g) for g in pair.get("gold") or []]
    gold_set = set(gold)
    ranked = [str(x) for x in pair.get("ranked") or []][:top]
    lines = [f"{name}: top {top}" + ("" if len(ranked) >= top else
                                       f" ({len(ranked)} rows returned)")]
    for i, mem_id in enumerate(ranked, start=1):
        lines.append(f"  {i:>3} {'*' if mem_id in gold_set else ' '} {mem_id}"
                     + ("  (gold)" if mem_id in gold_set else ""))
    facts = pair.get("explain")
    ranks: Mapping[str, Any] = (facts or {}).get("gold_ranks") or {}
    for g in gold:
        if facts is not None and g in ranks:
            text = _rank_text(ranks[g], top)
        else:
            rank = ranked.index(g) + 1 if g in ranked else None
            text = _rank_text(rank, top) if rank else f"not in the top {top}"
        lines.append(f"  gold {g}: {text}")
    if facts is None:
        lines.append(f"  where gold landed past the top {top}, and the semantic and FTS "
                     f"ranks of a fused retriever, are not in this report; {RECORD_HINT}")
    elif facts.get("fusion"):
        lines.extend(_fusion_lines(facts["fusion"], gold))
    elif facts.get("fts"):
        fts = facts["fts"]
        why = (" (every query word must match: vipune ANDs the quoted words)"
               if not fts["fts_rows"] and fts.get("fts_mode", "and") == "and" else "")
        lines.append(f"  FTS5 MATCH {fts['fts_match']!r}: {fts['fts_rows']} rows{why}")
    ties = pair.get("ties")
    if ties and ties.get("sensitive"):
        parts = [f"{key} {pair['metrics'].get(key, 0.0):.3f} as run, {v['expected']:.3f} "
                 f"expected (worst {v['worst']:.3f}, best {v['best']:.3f})"
                 for key, v in ties["sensitive"].items()]
        lines.append("  depends on the order of equal scores: " + "; ".join(parts))
    return lines


def explain_lines(report: Mapping[str, Any], question_id: str, retriever: str | None = None,
                  width: int | None = 80, source: str = "the report") -> list[str]:
    """The explanation of ``question_id`` (every retriever of the report, or ``retriever``),
    lines fitted to ``width``. :class:`ExplainError` (one line) when the question or the
    retriever is not in the report."""
    pairs = [p for p in report.get("pairs") or [] if p.get("question_id") == question_id]
    if not pairs:
        ids = list(dict.fromkeys(str(p.get("question_id")) for p in report.get("pairs") or []))
        raise ExplainError(
            f"question {question_id!r} is not in {source} ({len(ids)} questions scored: "
            f"{_listing(ids)}); give one of its question_ids")
    if retriever is not None:
        mine = [p for p in pairs if p.get("retriever") == retriever]
        if not mine:
            names = [str(p.get("retriever")) for p in pairs]
            raise ExplainError(
                f"retriever {retriever!r} did not rank question {question_id} in {source} "
                f"(it has: {_listing(names)}); give one of them with --retriever")
        pairs = mine
    first = pairs[0]
    top = max(int(k) for k in report.get("ks") or [10])
    gold = [str(g) for g in first.get("gold") or []]
    head = [f"question {question_id} ({first.get('question_type', '?')}"
            + (f", asked {first['question_date']}" if first.get("question_date") else "")
            + ")"]
    if "question" in first:
        head.append(f"  {first['question']}")
    else:
        head.append(f"  (the question's text and date are not in this report; {RECORD_HINT})")
    head.append(f"gold: {', '.join(gold) if gold else 'none'}")
    lines = list(head)
    for pair in pairs:
        lines.append("")
        lines.extend(pair_lines(pair, top))
    # The question, its ids and its sessions' ids are dataset text: no control character
    # of theirs reaches the terminal.
    return fit_lines([printable(line) for line in lines], width)


#: A run that selected at most this many pair items explains each of them under ``-v``.
CHOSEN_ITEMS = 5


def run_explanations(report: Mapping[str, Any], chosen: Sequence[tuple[str, str]],
                     failed: Sequence[tuple[str, str]], width: int | None = 80) -> list[str]:
    """``pytest -v``: the explanation of each failed item's question (what the other
    retrievers of the run did with it) and, in a run that selected at most
    :data:`CHOSEN_ITEMS` items, of each chosen (question, retriever)."""
    lines: list[str] = []
    wanted: list[tuple[str, str | None, str]] = [(qid, None, f"{qid}: {name} failed")
                                                 for qid, name in failed]
    if len(chosen) <= CHOSEN_ITEMS:
        wanted += [(qid, name, f"{qid} [{name}]") for qid, name in chosen
                   if (qid, name) not in set(failed)]
    for qid, name, title in dict.fromkeys(wanted):
        try:
            body = explain_lines(report, qid, name, width, source="this run")
        except ExplainError:
            continue  # nothing of it was scored
        lines.extend(["", printable(f"explain {title}"), *body])
    return lines
