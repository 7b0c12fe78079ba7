"""Why a number is what it is: per-retriever diagnostics under the summary tables.

Per pair (:func:`pair_facts`, kept in the pair's result so it rides to the xdist controller
with it): how many ids the retriever returned at each k and, for a fused retriever (``hybrid``
and its what-ifs, which expose the two lists they fused as ``last_components``), whether the
fused top k equals the semantic top k and the FTS top k.

Per retriever (:func:`summarize`, the JSON report's ``diagnostics``): pairs that returned fewer
than k ids, and none; the mean rank of the first gold session within the top max(k), and the
share of pairs whose gold is not there at all; for a fused retriever, per k, the pairs where
fusion changed nothing (fused top k = semantic top k) and where it equals the FTS top k.
:func:`lines` words each retriever's figures as one plain line fitting the terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..retrievers.variants import is_variant, parse_variant

__all__ = ["fts_ands_words", "fused_lists", "lines", "pair_facts", "report_sections",
           "summarize"]

#: Why vipune's FTS returns nothing so often, said on the fts line (long and short form).
FTS_AND_HINT = "every query word must match: vipune ANDs the quoted words"
FTS_AND_HINT_SHORT = "vipune ANDs the quoted words"


def pair_facts(components: Mapping[int, Mapping[str, Sequence[str]]],
               rankings: Mapping[int, Sequence[str]], ks: Sequence[int]) -> dict[str, Any]:
    """What one pair's rankings say beyond its metrics: ``returned`` (ids returned, per k)
    and, when the retriever fused lists (``components[k]``: the semantic and FTS lists, ids
    best first, of the very call that ranking ``k`` came from), ``fusion`` (per k: fused top
    k equals semantic's / FTS's) and ``component_sizes`` (those of the largest k's call).

    Keys are strings (``"10"``): the facts cross xdist's wire and JSON unchanged."""
    facts: dict[str, Any] = {"returned": {str(k): len(rankings[k]) for k in ks}}
    if ks and all(k in components for k in ks):
        facts["fusion"] = {
            str(k): {"semantic": list(rankings[k][:k]) == list(components[k]["semantic"])[:k],
                     "fts": list(rankings[k][:k]) == list(components[k]["fts"])[:k]}
            for k in ks}
        largest = components[max(ks)]
        facts["component_sizes"] = {"semantic": len(largest["semantic"]),
                                    "fts": len(largest["fts"])}
    return facts


def fused_lists(retriever: object) -> Mapping[str, Sequence[str]] | None:
    """The semantic and FTS lists ``retriever``'s last ``rank`` fused (``last_components`` of
    ``hybrid`` and its what-ifs), else None."""
    components = getattr(retriever, "last_components", None)
    if isinstance(components, Mapping) and {"semantic", "fts"} <= set(components):
        return components
    return None


def _first_gold_rank(ranked: Sequence[str], gold: Iterable[str]) -> int | None:
    wanted = set(gold)
    return next((rank for rank, mem_id in enumerate(ranked, start=1) if mem_id in wanted),
                None)


def summarize(results: Sequence[Mapping[str, Any]], retrievers: Sequence[str],
              ks: Sequence[int]) -> dict[str, Any]:
    """Per retriever: the figures :func:`lines` words (plain data, JSON-able)."""
    top = max(ks)
    out: dict[str, Any] = {}
    for name in retrievers:
        mine = [r for r in results if r["retriever"] == name]
        if not mine:
            continue
        returned = [r.get("returned") or {} for r in mine]
        ranks = [_first_gold_rank(list(r["ranked"])[:top], r["gold"])
                 for r in mine if r.get("gold")]
        found = [x for x in ranks if x is not None]
        entry: dict[str, Any] = {
            "pairs": len(mine),
            "no_results": sum(1 for r in mine if not r["ranked"]),
            "fewer_than_k": {str(k): sum(1 for got, r in zip(returned, mine, strict=True)
                                         if int(got.get(str(k), len(r["ranked"]))) < k)
                             for k in ks},
            "first_gold": {
                "top": top,
                "pairs_with_gold": len(ranks),
                "mean_rank": sum(found) / len(found) if found else None,
                "not_found": len(ranks) - len(found),
                "share_not_found": (len(ranks) - len(found)) / len(ranks) if ranks else None,
            },
        }
        fused = [r for r in mine if r.get("fusion")]
        if fused:
            entry["fusion"] = {str(k): {
                "pairs": len(fused),
                "equals_semantic": sum(1 for r in fused if r["fusion"][str(k)]["semantic"]),
                "equals_fts": sum(1 for r in fused if r["fusion"][str(k)]["fts"]),
            } for k in ks}
            entry["fts_list_empty"] = sum(
                1 for r in fused if not (r.get("component_sizes") or {}).get("fts"))
        out[name] = entry
    return out


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
