"""A comparison's agreement: how alike the compared rankings are, pair by pair, in words.

:func:`lane_agreement` computes it (:mod:`pytest_retrieval_eval.scoring.agreement`) from the
matched pairs' ``ranked`` (each report keeps a pair's top max-k): per compared retriever (a
lane: one retriever in two reports, or two retrievers of one), at every shared k, how many
pairs have an identical top k and the mean overlap@k, overall and per question type. It goes
into the comparison as ``"agreement"``; :func:`agreement_lines` prints it beside the metric
tables (per question type under ``-v``), :func:`agreement_markdown` as a folded table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..scoring.agreement import agreement, ranked_of
from .summary_table import type_order

__all__ = ["agreement_lines", "agreement_markdown", "lane_agreement"]


def lane_agreement(common: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]],
                   labels: Sequence[str], ks: Sequence[int]) -> dict[str, Any]:
    """Per lane label: the agreement of its matched ``(label, base pair, new pair)``; a lane
    where some pair has no readable ``ranked`` (a report written before it was kept) is
    left out."""
    by_label: dict[str, list[tuple[str, list[str], list[str]]]] = {}
    broken: set[str] = set()
    for label, bp, np_ in common:
        a, b = ranked_of(bp), ranked_of(np_)
        if a is None or b is None:
            broken.add(label)
            continue
        by_label.setdefault(label, []).append((str(bp.get("question_type", "?")), a, b))
    return {label: agreement(by_label[label], ks, type_order)
            for label in labels if label in by_label and label not in broken}


def _k_list(ks: Sequence[int]) -> str:
    return "/".join(str(k) for k in ks)


def _words(figures: Mapping[str, Any], ks: Sequence[int]) -> str:
    same = "/".join(str(figures[str(k)]["identical"]) for k in ks)
    overlap = "/".join(f"{figures[str(k)]['overlap']:.3f}" for k in ks)
    return (f"top {_k_list(ks)} identical in {same} of {figures['pairs']} pairs, "
            f"mean overlap@{_k_list(ks)} {overlap}")


def agreement_lines(cmp: Mapping[str, Any], verbose: bool = False) -> list[str]:
    """``agreement <lane>: top 1/5/10 identical in a/b/c of n pairs, mean overlap@1/5/10
    x/y/z`` per lane, then (``verbose``) one line per question type, indented two spaces."""
    found = cmp.get("agreement")
    if not isinstance(found, Mapping) or not found:
        return []
    ks = [int(k) for k in cmp["ks"]]
    lines = [""]
    for label, figures in found.items():
        lines.append(f"agreement {label}: {_words(figures['overall'], ks)}")
        if verbose:
            lines.extend(f"  {qtype}: {_words(f, ks)}"
                         for qtype, f in figures["by_type"].items())
    return lines


def agreement_markdown(cmp: Mapping[str, Any], cell: Any, span: Any) -> list[str]:
    """The agreement as Markdown lines (a bullet per lane, its question types nested),
    ``cell`` escaping text for a table cell, ``span`` making a name a code span; [] when the
    comparison holds none."""
    found = cmp.get("agreement")
    if not isinstance(found, Mapping) or not found:
        return []
    ks = [int(k) for k in cmp["ks"]]
    body: list[str] = []
    for label, figures in found.items():
        body.append(f"- {span(label)}: {_words(figures['overall'], ks)}")
        body.extend(f"  - {cell(qtype)}: {_words(f, ks)}"
                    for qtype, f in figures["by_type"].items())
    return body
