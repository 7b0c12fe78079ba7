"""The diagnostics in words: one plain line per retriever under the summary tables, and the
JSON report's ``diagnostics`` and ``variants`` sections.

The figures come from :mod:`pytest_retrieval_eval.scoring.diagnostics` (:func:`summarize`);
:func:`lines` words each retriever's figures as one line fitting the terminal, each phrase in
the longest of its forms that fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..retrievers.variants import is_variant, parse_variant
from ..scoring.diagnostics import summarize

__all__ = ["FTS_AND_HINT", "FTS_AND_HINT_SHORT", "fts_ands_words", "lines", "report_sections"]

#: Why vipune's FTS returns nothing so often, said on the fts line (long and short form).
FTS_AND_HINT = "every query word must match: vipune ANDs the quoted words"
FTS_AND_HINT_SHORT = "vipune ANDs the quoted words"


def report_sections(results: Sequence[Mapping[str, Any]], retrievers: Sequence[str],
                    ks: Sequence[int]) -> dict[str, Any]:
    """The JSON report's ``diagnostics`` and ``variants`` (each what-if's parameters)."""
    return {
        "diagnostics": summarize(results, retrievers, ks),
        "variants": {name: parse_variant(name).to_dict()
                     for name in retrievers if is_variant(name)},
    }


def fts_ands_words(name: str) -> bool:
    """Whether ``name`` ranks by vipune's FTS alone with its words ANDed (``fts``, not
    ``fts+mode:or``)."""
    if name == "fts":
        return True
    if name.startswith("fts+") and is_variant(name):
        return bool(parse_variant(name).params.get("mode", "and") == "and")
    return False


def _per_k(values: Sequence[int]) -> str:
    return "/".join(str(v) for v in values)


def _parts(name: str, d: Mapping[str, Any], ks: Sequence[int]) -> list[tuple[str, ...]]:
    """A retriever's figures as phrases, most telling first; each in its long, then shorter
    forms."""
    n = int(d["pairs"])
    parts: list[tuple[str, ...]] = []
    k_list = _per_k(ks)
    fusion = d.get("fusion")
    if fusion:
        same = [int(fusion[str(k)]["equals_semantic"]) for k in ks]
        as_fts = [int(fusion[str(k)]["equals_fts"]) for k in ks]
        parts.append((f"top {k_list} equals semantic's in {_per_k(same)} of {n} pairs "
                      f"(fusion changed nothing), FTS's in {_per_k(as_fts)}",
                      f"top {k_list} = semantic's in {_per_k(same)} of {n}, "
                      f"FTS's in {_per_k(as_fts)}"))
        if d.get("fts_list_empty"):
            parts.append((f"its FTS list was empty in {d['fts_list_empty']} of {n}",))
    if d["no_results"]:
        hint = (f" ({FTS_AND_HINT})", f" ({FTS_AND_HINT_SHORT})", "") if fts_ands_words(
            name) else ("",)
        parts.append(tuple(f"{d['no_results']} of {n} pairs returned no rows{h}"
                           for h in hint))
    fewer = [int(d["fewer_than_k"][str(k)]) for k in ks]
    if any(fewer):
        parts.append((f"fewer than {k_list} rows in {_per_k(fewer)} of {n}",))
    gold = d["first_gold"]
    if gold["pairs_with_gold"]:
        mean = "-" if gold["mean_rank"] is None else f"{gold['mean_rank']:.1f}"
        share = f"{100 * gold['share_not_found']:.0f}%"
        parts.append((f"first gold at mean rank {mean}, not in the top {gold['top']} for "
                      f"{gold['not_found']} of {gold['pairs_with_gold']} ({share})",
                      f"first gold: mean rank {mean}, {share} not in top {gold['top']}"))
    return parts


def lines(diagnostics: Mapping[str, Any], retrievers: Sequence[str], ks: Sequence[int],
          width: int = 80) -> list[str]:
    """One plain line per retriever: its phrases joined by ``; ``, each in the longest form
    that still fits ``width`` or left out (the first always; cut with ``…`` if too long)."""
    out: list[str] = []
    for name in retrievers:
        d = diagnostics.get(name)
        if not d:
            continue
        line = ""
        for forms in _parts(name, d, ks):
            sep = f"{name}: " if not line else "; "
            fits = [f for f in forms if len(line) + len(sep) + len(f) <= width]
            if fits or not line:  # the first phrase always, in its shortest form if need be
                line += sep + (fits[0] if fits else forms[-1])
        line = line or f"{name}: nothing to note"
        if len(line) > width:
            line = line[: max(width - 1, 10)] + "…"
        out.append(line)
    return out
