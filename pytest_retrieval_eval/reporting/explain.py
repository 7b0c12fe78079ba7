"""One question explained from a saved report: why each retriever ranked its rows where it did.

:func:`explain_lines` renders, from a JSON report (``--retrieval-eval-json``) and a question
id: the question, its type and date, its gold sessions; per retriever, every row of the top k
(the largest k), gold marked, with what the run recorded of it: for a fused retriever
(``hybrid`` and its what-ifs) its rank in the semantic and the FTS list and their RRF sum
(``sem 3 + fts 5 = 0.0690``), for ``fts``, ``hybrid`` and their what-ifs the query words it
matched in FTS5 (``matched Emergency, fund``), its score and the facts the retriever gave
(``last_facts``); the rank where each gold session landed (or "not returned"), a gold session
past the top with its own row's parts; for a fused retriever each gold session's RRF
contributions ``1/(k + rank)``; the FTS5 MATCH string vipune sends, with "0 rows" when that
is why FTS did not help, and how FTS5 reads its words; the metrics that depend on the order
of equal scores. :func:`.explain_diff.diff_lines` shows one question of two reports, rows
aligned (``+`` entered the top k, ``-`` left it) and the gold's moves. Everything comes from
the pair's result (``explain``, ``ties``, ``question``), nothing is recomputed but the query
words each row matched, which are asked of the store the run searched
(:mod:`.explain_facts`); a report written before a part was recorded says so, and which
option records it.
``retrieval-eval explain`` prints it; the pytest face may show it for one item under ``-v``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import RetrievalEvalError, printable
from .explain_facts import full_facts
from .memory_lines import SESSION, budget_rules, memory_lines
from .text_width import fit_lines

__all__ = ["ExplainError", "explain_lines", "pair_lines"]

#: How the report is (re)written so that it holds what explain shows.
RECORD_HINT = ("run pytest --retrieval-eval again with --retrieval-eval-json=PATH (this "
               "version records it)")


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


def _word(word: str) -> str:
    """A query word as a list of words shows it: as it is, or in double quotes (FTS5's, a
    quote doubled) where it holds a comma, a quote or a space, so ``first,`` reads
    ``"first,"``, never the ``first,,`` a comma-separated list would make of it."""
    if word and not any(c in word for c in ',"') and not any(c.isspace() for c in word):
        return word
    return '"' + word.replace('"', '""') + '"'


def _fact_text(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(_fact_text(x) for x in value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _fused_text(fusion: Mapping[str, Any], mem_id: str, score: float | None) -> str | None:
    """``sem 3 + fts 5 = 0.0323``: the row's rank in each fused list and their RRF sum
    (``-``: not in that list), then ``score`` where the recorded one differs (recency);
    None when the report holds no ranks for the row."""
    ranks = (fusion.get("rows") or {}).get(mem_id)
    if not isinstance(ranks, Mapping):
        ranks = (fusion.get("gold") or {}).get(mem_id)
    if not isinstance(ranks, Mapping):
        return None
    k = int(fusion["rrf_k"])
    sem, fts = ranks.get("semantic"), ranks.get("fts")
    total = _contribution(sem, k) + _contribution(fts, k)
    text = f"sem {sem or '-'} + fts {fts or '-'} = {total:.4f}"
    if score is not None and abs(score - total) > 5e-5:
        text += f", score {score:.4f}"
    return text


def _matched_text(source: Mapping[str, Any], mem_id: str) -> str | None:
    """The query words the row matched in FTS5 (``matched all 3``: every word FTS5 keeps a
    token of; ``matched Emergency, fund``; ``matched none``); None when the report does not
    hold them."""
    matched = source.get("matched")
    if not isinstance(matched, Mapping):
        return None
    words = [str(w) for w in matched.get(mem_id) or []]
    asked = source.get("words") or []
    live = sum(1 for t in source.get("tokens") or [] if t)  # words FTS5 keeps a token of
    cut = int(source.get("words_total") or len(asked)) > len(asked)  # some not asked about
    if not words:
        return "matched none"
    if len(words) == live > 1 and not cut:
        return f"matched all {live}"
    return "matched " + ", ".join(map(_word, words))


def _row_text(row: object, facts: Mapping[str, Any] | None = None, mem_id: str = "") -> str:
    """A shown row's parts: for a fused retriever its ranks in the fused lists and their RRF
    sum, the query words it matched in FTS5 (``fts``, ``hybrid``), its score (where no sum
    says it) and the facts the retriever gave (``last_facts``):
    ``  sem 3 + fts 5 = 0.0323; matched: paris, trip``; "" when the report holds none."""
    parts = []
    score = _number(row.get("score")) if isinstance(row, Mapping) else None
    fusion = (facts or {}).get("fusion")
    fused = _fused_text(fusion, mem_id, score) if isinstance(fusion, Mapping) else None
    if fused is not None:
        parts.append(fused)
    elif score is not None:
        parts.append(f"score {score:.4f}")
    source = fusion if isinstance(fusion, Mapping) else (facts or {}).get("fts")
    words = _matched_text(source, mem_id) if isinstance(source, Mapping) else None
    if words is not None:
        parts.append(words)
    given = row.get("facts") if isinstance(row, Mapping) else None
    if isinstance(given, Mapping):
        parts.extend(f"{key}: {_fact_text(value)}" for key, value in given.items())
    return ("  " + "; ".join(parts)) if parts else ""


def _tokens_line(source: Mapping[str, Any]) -> list[str]:
    """How FTS5 (``porter unicode61``) reads the query's words: ``months? -> month``."""
    words, tokens = source.get("words"), source.get("tokens")
    if not isinstance(words, list) or not isinstance(tokens, list) or not words:
        return []
    shown = []
    for word, toks in zip(words, tokens, strict=False):
        toks = [str(t) for t in toks or []]
        if not toks:
            shown.append(f"{_word(str(word))} -> (no token: FTS5 ignores it)")
        elif toks != [str(word).lower()]:
            shown.append(f"{_word(str(word))} -> {' '.join(toks)}")
        else:
            shown.append(_word(str(word)))
    total = int(source.get("words_total") or len(words))
    more = f" (the first {len(words)} of {total} distinct words)" if total > len(words) else ""
    return [f"  FTS5 reads the words{more}: " + ", ".join(shown)]


def _gold_rank(facts: Mapping[str, Any] | None, ranked: Sequence[str], g: str,
               top: int) -> tuple[int | None, str]:
    """Where gold ``g`` landed (None: not returned, or past the top when the report does not
    say) and the words for it."""
    ranks: Mapping[str, Any] = (facts or {}).get("gold_ranks") or {}
    if facts is not None and g in ranks:
        rank = None if ranks[g] is None else int(ranks[g])
        return rank, _rank_text(rank, top)
    rank = ranked.index(g) + 1 if g in ranked else None
    return rank, (_rank_text(rank, top) if rank else f"not in the top {top}")


def _gold_text(facts: Mapping[str, Any] | None, ranked: Sequence[str], g: str,
               top: int) -> str:
    return _gold_rank(facts, ranked, g, top)[1]


def _missing_lines(facts: Mapping[str, Any] | None, top: int) -> list[str]:
    """What an older report lacks, and the option that records it."""
    if facts is None:
        return [f"  where gold landed past the top {top}, and the semantic and FTS ranks of "
                f"a fused retriever, are not in this report; {RECORD_HINT}"]
    if facts.get("fusion") and "rows" not in facts["fusion"]:
        return ["  each row's semantic and FTS ranks and the query words it matched are "
                f"not in this report; {RECORD_HINT}"]
    for key in ("fusion", "fts"):
        source = facts.get(key)
        if isinstance(source, Mapping) and source.get("store_gone"):
            return [f"  the query words each row matched are asked of the run's store "
                    f"{source['store_gone']}, which is not there now (a cleared cache, or "
                    f"another machine): run explain where the run ran, or run it again"]
    if facts.get("fts") and "matched" not in facts["fts"]:
        return [f"  the query words each row matched are not in this report; {RECORD_HINT}"]
    return []


def _fts_lines(facts: Mapping[str, Any], gold: Sequence[str]) -> list[str]:
    """The FTS5 MATCH string, how FTS5 reads its words, and for a fused retriever the
    legend of the rows' ``sem + fts`` column and each gold session's RRF arithmetic."""
    if facts.get("fusion"):
        fusion = facts["fusion"]
        lines = _fusion_lines(fusion, gold)
        lines[1:1] = _tokens_line(fusion)
        if "rows" in fusion:
            lines.insert(1, f"  sem + fts: a row's ranks in the semantic and FTS lists (-: "
                            f"not in it), each adding 1/({fusion['rrf_k']} + rank)")
        return lines
    if facts.get("fts"):
        fts = facts["fts"]
        why = (" (every query word must match: vipune ANDs the quoted words)"
               if not fts["fts_rows"] and fts.get("fts_mode", "and") == "and" else "")
        return [f"  FTS5 MATCH {fts['fts_match']!r}: {fts['fts_rows']} rows{why}",
                *_tokens_line(fts)]
    return []


def _ties_lines(pair: Mapping[str, Any]) -> list[str]:
    ties = pair.get("ties")
    if not (ties and ties.get("sensitive")):
        return []
    parts = [f"{key} {pair['metrics'].get(key, 0.0):.3f} as run, {v['expected']:.3f} "
             f"expected (worst {v['worst']:.3f}, best {v['best']:.3f})"
             for key, v in ties["sensitive"].items()]
    return ["  depends on the order of equal scores: " + "; ".join(parts)]


def _rows_of(facts: Mapping[str, Any] | None) -> Mapping[str, Any]:
    rows = (facts or {}).get("rows")
    return rows if isinstance(rows, Mapping) else {}


def _session_tokens(pair: Mapping[str, Any]) -> dict[int, int]:
    """Rank -> tokens of a session store's first rows (the pair's ``budget.tokens``)."""
    budget = pair.get("budget")
    listed = budget.get("tokens") if isinstance(budget, Mapping) else None
    return {i: c for i, c in enumerate(listed if isinstance(listed, list) else [], start=1)
            if isinstance(c, int) and not isinstance(c, bool)}


def pair_lines(pair: Mapping[str, Any], top: int) -> list[str]:
    """One retriever's part: its top ``top`` with the gold marked, each row with what the
    report recorded of it (fused ranks and RRF sum, matched query words, score, facts), each
    gold session's rank (and its row's parts when it is past the top), the fusion arithmetic
    or the FTS query, and the tie-sensitive metrics."""
    name = pair["retriever"]
    gold = [str(g) for g in pair.get("gold") or []]
    gold_set = set(gold)
    ranked = [str(x) for x in pair.get("ranked") or []][:top]
    lines = [f"{name}: top {top}" + ("" if len(ranked) >= top else
                                       f" ({len(ranked)} rows returned)")]
    facts = full_facts(pair)
    rows = _rows_of(facts)
    # a session store's rows are its memories: their tokens, where the run had a budget (a
    # memory store's are on its memories' lines, memory_lines)
    tokens = {} if pair.get("memories") else _session_tokens(pair)
    said = [_row_text(rows.get(mem_id), facts, mem_id) for mem_id in ranked]
    digits = len(str(max(tokens.values(), default=0)))
    said = [f"  {tokens[i]:>{digits}} tok" + (f"  {row.strip()}" if row else "")
            if i in tokens else row for i, row in enumerate(said, start=1)]
    # "(gold)" beside a bare id; where the rows' parts stand in a column, "*" alone says it
    shown = [mem_id + ("  (gold)" if mem_id in gold_set and not any(said) else "")
             for mem_id in ranked]
    width = max((len(x) for x in shown), default=0) if any(said) else 0  # facts in a column
    numbered = [(i, f"  {i:>3} {'*' if mem_id in gold_set else ' '} "
                    + (f"{text:<{width}}{row}" if row else text))
                for i, (mem_id, text, row) in enumerate(zip(ranked, shown, said, strict=True),
                                                        start=1)]
    lines.extend(budget_rules(numbered, pair, tokens, SESSION) if not pair.get("memories")
                 else [line for _, line in numbered])
    for g in gold:
        lines.append(f"  gold {g}: {_gold_text(facts, ranked, g, top)}"
                     + ("" if g in ranked else _row_text(rows.get(g), facts, g)))
    lines.extend(_missing_lines(facts, top))
    if facts is not None:
        lines.extend(_fts_lines(facts, gold))
    lines.extend(_ties_lines(pair))
    lines.extend(memory_lines(pair))  # a memory store's memories (none for a session store)
    return lines


#: A row of a ranking (``  10 * id``), of --diff's aligned table (``  + -  3 * id``) or of
#: the memories; its end is the column where the row's id starts.
_ROW = re.compile(r"  (?:[+-] )? *(?:\d+|-)(?: +(?:\d+|-))? [* ] (?=\S)")


def _fit(lines: Iterable[str], width: int | None) -> list[str]:
    """The lines made printable (dataset text: no control character reaches the terminal)
    and fitted to ``width``; a row that wraps continues under its id, whatever the width
    of its rank (row 10 as rows 1-9)."""
    out: list[str] = []
    for line in map(printable, lines):
        row = _ROW.match(line)
        out.extend(fit_lines([line], width, hang=row.end() if row else None))
    return out


def _question_head(pair: Mapping[str, Any], question_id: str, *,
                   say_missing: bool) -> list[str]:
    """The question's lines: its id, type and date, its text (or, with ``say_missing``, a
    line saying the report lacks it), its gold sessions."""
    gold = [str(g) for g in pair.get("gold") or []]
    lines = [f"question {question_id} ({pair.get('question_type', '?')}"
             + (f", asked {pair['question_date']}" if pair.get("question_date") else "") + ")"]
    if "question" in pair:
        lines.append(f"  {pair['question']}")
    elif say_missing:
        lines.append(f"  (the question's text and date are not in this report; {RECORD_HINT})")
    lines.append(f"gold: {', '.join(gold) if gold else 'none'}")
    return lines


def explain_lines(report: Mapping[str, Any], question_id: str, retriever: str | None = None,
                  width: int | None = 80, source: str = "the report") -> list[str]:
    """The explanation of ``question_id`` (every retriever of the report, or ``retriever``),
    lines fitted to ``width``. :class:`ExplainError` (one line) when the question or the
    retriever is not in the report."""
    pairs = _pairs_of(report, question_id, source)
    question_id = str(pairs[0].get("question_id"))  # the whole id, given a part of it
    if retriever is not None:
        mine = [p for p in pairs if p.get("retriever") == retriever]
        if not mine:
            names = [str(p.get("retriever")) for p in pairs]
            raise ExplainError(
                f"retriever {retriever!r} did not rank question {question_id} in {source} "
                f"(it has: {_listing(names)}); give one of them with --retriever")
        pairs = mine
    top = max(int(k) for k in report.get("ks") or [10])
    lines = _question_head(pairs[0], question_id, say_missing=True)
    for pair in pairs:
        lines.append("")
        lines.extend(pair_lines(pair, top))
    # The question, its ids and its sessions' ids are dataset text: no control character
    # of theirs reaches the terminal.
    return _fit(lines, width)


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


def _pairs_of(report: Mapping[str, Any], question_id: str, source: str) -> list[Any]:
    """The pairs of ``question_id``; a part of one id (as ``-k fa1b838c`` selects
    ``gpt4_fa1b838c``, case aside) stands for it, a part of several is one line naming them
    (issue 48, item 7)."""
    pairs = [p for p in report.get("pairs") or [] if p.get("question_id") == question_id]
    if not pairs:
        ids = list(dict.fromkeys(str(p.get("question_id")) for p in report.get("pairs") or []))
        near = [i for i in ids if question_id and question_id.lower() in i.lower()]
        if len(near) == 1:
            return [p for p in report.get("pairs") or [] if p.get("question_id") == near[0]]
        if near:
            raise ExplainError(
                f"question {question_id!r} is not in {source}; did you mean "
                f"{_listing(near)}? give one of them whole")
        raise ExplainError(
            f"question {question_id!r} is not in {source} ({len(ids)} questions scored: "
            f"{_listing(ids)}); give one of its question_ids")
    return pairs
