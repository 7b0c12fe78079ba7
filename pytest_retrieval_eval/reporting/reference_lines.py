"""``ref_recall@k`` against ``--retrieval-eval-reference`` in the report, the terminal and
Markdown (the figures: :mod:`pytest_retrieval_eval.scoring.reference_recall`).

:func:`reference_section` gives the JSON's ``reference`` (the aggregates) and the pairs with
their own ``ref_recall`` (``{"<k>": value}``); :func:`reference_lines` the summary's table,
one row per retriever, shown only when the option is given; :func:`reference_markdown` the
same as a Markdown table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..scoring.reference_recall import METRIC, reference_recall
from .text_width import fit_lines

__all__ = ["reference_column", "reference_lines", "reference_markdown", "reference_section"]


def reference_column(results: Sequence[Mapping[str, Any]], reference: str) -> str:
    """The column the reference's results carry: ``reference`` itself, or the column of the
    retriever it selects (``pkg.mod:Class``'s class name, a ``cmd:`` store's hello name)."""
    for r in results:
        if r.get("selector") == reference:
            return str(r["retriever"])
    return reference


def reference_section(results: list[dict[str, Any]], reference: str,
                      retrievers: Sequence[str], ks: Sequence[int],
                      type_order: Callable[[str], Any]
                      ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(section, results)``: the JSON's ``reference`` (``retriever``, ``asked``, ``ks``,
    ``summary``) and the results, each scored pair of another retriever a copy with its
    ``ref_recall``."""
    column = reference_column(results, reference)
    figures = reference_recall(results, column, retrievers, ks, type_order)
    per_pair = figures.pop("pairs")
    out = []
    for r in results:
        got = per_pair.get(str(r["retriever"]), {}).get(str(r["question_id"]))
        out.append({**r, METRIC: got} if got is not None else r)
    section = {"retriever": column, "asked": reference, "ks": figures["ks"],
               "ranked": any(r["retriever"] == column for r in results),
               "summary": figures["summary"]}
    return section, out


def _cell(value: object) -> str:
    return "-" if value is None else f"{float(value):.3f}"  # type: ignore[arg-type]


def reference_lines(section: Mapping[str, Any] | None, width: int = 80) -> list[str]:
    """The summary's ``ref_recall@k`` table (a heading line, then a row per retriever:
    pairs and one value per k); [] without ``--retrieval-eval-reference``."""
    if not isinstance(section, Mapping):
        return []
    ref = str(section.get("retriever"))
    head = [f"ref_recall@k against {ref}: the share of {ref}'s top k that each retriever "
            "also returns in its top k (ann-benchmarks' recall against exact search)"]
    summary = section.get("summary") or {}
    if not section.get("ranked"):
        return fit_lines([f"ref_recall@k: the reference {ref} ranked no pair of this run; "
                          "name one of its retrievers with --retrieval-eval-reference"], width)
    if not summary:
        return fit_lines([*head, "  (no other retriever ranked a pair it ranked)"], width)
    ks = [int(k) for k in section.get("ks") or []]
    names = list(summary)
    w = max(len("retriever"), *(len(n) for n in names))
    rows = [f"{'retriever':<{w}}  {'pairs':>5}" + "".join(f"  {'@' + str(k):>6}" for k in ks)]
    for name in names:
        overall = summary[name]["overall"]
        rows.append(f"{name:<{w}}  {overall['pairs']:>5}" + "".join(
            f"  {_cell(overall.get(f'{METRIC}@{k}')):>6}" for k in ks))
    return [*fit_lines(head, width), *rows]


def reference_markdown(report: Mapping[str, Any], inert: Callable[[object], str],
                       code: Callable[[object], str]) -> list[str]:
    """The table as Markdown lines; [] without a reference."""
    section = report.get("reference")
    if not isinstance(section, Mapping) or not section.get("summary"):
        return []
    ks = [int(k) for k in section.get("ks") or []]
    ref = code(section.get("retriever"))
    lines = [f"ref_recall@k against {ref}: the share of its top k each retriever also "
             "returns in its top k (ann-benchmarks' recall)", "",
             "| retriever | pairs | " + " | ".join(f"@{k}" for k in ks) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in ks) + " |"]
    for name, figures in section["summary"].items():
        overall = figures["overall"]
        lines.append(f"| {inert(name)} | {overall['pairs']} | " + " | ".join(
            _cell(overall.get(f"{METRIC}@{k}")) for k in ks) + " |")
    return [*lines, ""]
