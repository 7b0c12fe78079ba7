"""The diagnostics in words: one line per retriever under the summary tables (under ``-v``
one more per question type), and the JSON report's ``diagnostics`` and ``variants``.

The figures come from :mod:`pytest_retrieval_eval.scoring.diagnostics` (:func:`summarize`).
The words are fixed: a line too long for the terminal is wrapped at spaces (continuation lines
indented four spaces more), never reworded or shortened, so CI logs of any width say the same
thing as the docs once the continuations are joined back with single spaces.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..retrievers.variants import PARAMETERS, is_variant, parse_variant
from ..scoring.diagnostics import summarize

__all__ = ["FTS_AND_HINT", "fts_ands_words", "lines", "no_scores_line", "phrases",
           "report_sections"]

#: Why vipune's FTS returns nothing so often, said on the fts line.
FTS_AND_HINT = "every query word must match: vipune ANDs the quoted words"


def report_sections(results: Sequence[Mapping[str, Any]], retrievers: Sequence[str],
                    ks: Sequence[int], type_order: Callable[[str], Any] | None = None,
                    ) -> dict[str, Any]:
    """The JSON report's ``diagnostics`` (per retriever, and per question type under
    ``by_type``) and ``variants`` (each what-if's parameters)."""
    return {
        "diagnostics": summarize(results, retrievers, ks, type_order),
        "variants": {name: parse_variant(name).to_dict()
                     for name in retrievers  # not a store's column "Store+ef:10"
                     if is_variant(name) and name.partition("+")[0] in PARAMETERS},
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


def phrases(name: str, d: Mapping[str, Any], ks: Sequence[int]) -> list[str]:
    """A retriever's figures (overall or one question type's) as phrases, most telling
    first. Their words never depend on the terminal."""
    n = int(d["pairs"])
    parts: list[str] = []
    k_list = _per_k(ks)
    fusion = d.get("fusion")
    if fusion:
        same = [int(fusion[str(k)]["equals_semantic"]) for k in ks]
        as_fts = [int(fusion[str(k)]["equals_fts"]) for k in ks]
        parts.append(f"top {k_list} equals semantic's in {_per_k(same)} of {n} pairs "
                     f"(fusion changed nothing), FTS's in {_per_k(as_fts)}")
        if d.get("fts_list_empty"):
            parts.append(f"its FTS list was empty in {d['fts_list_empty']} of {n}")
    if d["no_results"]:
        hint = f" ({FTS_AND_HINT})" if fts_ands_words(name) else ""
        parts.append(f"{d['no_results']} of {n} pairs returned no rows{hint}")
    fewer = [int(d["fewer_than_k"][str(k)]) for k in ks]
    if any(fewer):
        parts.append(f"fewer than {k_list} rows in {_per_k(fewer)} of {n}")
    gold = d["first_gold"]
    if gold["pairs_with_gold"]:
        mean = "-" if gold["mean_rank"] is None else f"{gold['mean_rank']:.1f}"
        share = f"{100 * gold['share_not_found']:.0f}%"
        parts.append(f"first gold at mean rank {mean}, not in the top {gold['top']} for "
                     f"{gold['not_found']} of {gold['pairs_with_gold']} ({share})")
    return parts


def wrap(line: str, width: int | None) -> list[str]:
    """``line`` broken at single spaces to ``width`` columns, continuations indented four
    spaces past its own indent (deeper than a per-type line's two); a word longer than the
    room stays whole. Joining each continuation to the line before with one space gives
    ``line`` back."""
    if width is None or len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    indent = line[:len(line) - len(body)]
    return textwrap.wrap(body, width=max(width, len(indent) + 12), initial_indent=indent,
                         subsequent_indent=indent + "    ", break_long_words=False,
                         break_on_hyphens=False) or [line]


def lines(diagnostics: Mapping[str, Any], retrievers: Sequence[str], ks: Sequence[int],
          width: int | None = 80, *, verbose: bool = False) -> list[str]:
    """Per retriever: its phrases joined by ``; `` (``name: nothing to note`` when none),
    wrapped to ``width``; with ``verbose``, then one line per question type, indented two
    spaces (``  temporal-reasoning: ...``)."""
    out: list[str] = []
    for name in retrievers:
        d = diagnostics.get(name)
        if not d:
            continue
        out.extend(wrap(f"{name}: " + ("; ".join(phrases(name, d, ks)) or "nothing to note"),
                        width))
        if verbose:
            for qtype, figures in (d.get("by_type") or {}).items():
                words = "; ".join(phrases(name, figures, ks)) or "nothing to note"
                out.extend(wrap(f"  {qtype}: {words}", width))
    return out


def tie_line(ties: Mapping[str, Any], retrievers: Sequence[str]) -> str | None:
    """The one line under the tables when some pair's metric depends on the order of equal
    scores (the JSON's ``ties``, :func:`pytest_retrieval_eval.scoring.ties.summarize`): per
    such retriever, how many pairs, and the metric the order moves most, as run, expected
    over every order of the tied items, worst and best; None when no pair is tie-sensitive."""
    parts: list[str] = []
    for name in retrievers:
        t = ties.get(name)
        if not t or not t.get("sensitive_pairs"):
            continue
        key, m = max(t["metrics"].items(), key=lambda kv: kv[1]["best"] - kv[1]["worst"])
        parts.append(f"{name}: {t['sensitive_pairs']} of {t['pairs_with_scores']} pairs "
                     f"depend on the order of equal scores, {key} most: {m['as_run']:.3f} as "
                     f"run, {m['expected']:.3f} expected over every order (worst "
                     f"{m['worst']:.3f}, best {m['best']:.3f})")
    if not parts:
        return None
    return "ties: " + "; ".join(parts) + "; every metric in the JSON report's \"ties\""


#: How a retriever gives the scores the tie-aware metrics need (the no-scores line's fix).
SCORES_HINT = ("return (id, score) pairs from rank, or set last_scores to the (id, score) "
               "list ranked, best first (docs/ties.md)")


def no_scores_line(pairs: Sequence[Mapping[str, Any]],
                   retrievers: Sequence[str]) -> str | None:
    """The one line under the tables naming each retriever that ranked pairs without scores
    (its pair results' ``ties`` is null): a tie it broke by its own rule cannot be seen, so
    its zero tie-sensitive pairs mean nothing. Rankings recorded by tests
    (``retrieval_eval_record``, no ``ties`` key) are left out: they carry no scores by
    design. None when every scored retriever gave scores."""
    without: dict[str, int] = {}
    total: dict[str, int] = {}
    for pair in pairs:
        if "ties" not in pair:
            continue
        name = str(pair["retriever"])
        total[name] = total.get(name, 0) + 1
        if pair["ties"] is None:
            without[name] = without.get(name, 0) + 1
    names = [name for name in retrievers if without.get(name)]
    if not names:
        return None
    shown = ", ".join(name if without[name] == total[name]
                      else f"{name} ({without[name]} of {total[name]} pairs)"
                      for name in names)
    verb = "gives" if len(names) == 1 else "give"
    return (f"no scores: {shown} {verb} ranked ids only, so an order of equal scores cannot "
            f"be seen (no tie is counted); {SCORES_HINT}")


def misses_line(diagnostics: Mapping[str, Any], retrievers: Sequence[str]) -> list[str]:
    """The default summary's one diagnostics line: per retriever, the pairs whose gold is
    not in its top max(k) (``-v`` words every figure, per question type too); [] when no
    retriever has pairs with gold."""
    figures = [(name, diagnostics[name]["first_gold"]) for name in retrievers
               if name in diagnostics and diagnostics[name]["first_gold"]["pairs_with_gold"]]
    if not figures:
        return []
    top = figures[0][1]["top"]
    totals = {int(g["pairs_with_gold"]) for _, g in figures}
    if len(totals) == 1:
        parts = [f"{name} {g['not_found']}" for name, g in figures]
        of = f" of {totals.pop()}"
    else:
        parts = [f"{name} {g['not_found']} of {g['pairs_with_gold']}" for name, g in figures]
        of = ""
    return [f"diagnostics: no gold in the top {top} for {', '.join(parts)}{of} pairs; "
            "every figure: -v"]
