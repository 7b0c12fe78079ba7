"""Asking a retriever for a pair's rankings, as the run scores them.

:func:`rank_per_k` gives the ranking each cut-off k is scored on, and (for a retriever that
fuses lists, :func:`.diagnostics.fused_lists`) the lists fused by the call that gave it. Most
retrievers rank once at the largest k. A ``limit_sensitive`` one (vipune's hybrid search,
whose candidate pool grows with the limit) is asked once per distinct pool size, with the
largest k of that pool, exactly as a caller asking vipune for k results would see them.
Under LongMemEval's protocol, :func:`rank_all` ranks every item once. :func:`check_haystack`
refuses a ranking holding an id outside the pair's haystack. What ``rank`` returned is read
only to a bound (:mod:`.ranked_output`): an endless iterator never hangs the run.

Scores, for the tie-aware metrics (:mod:`pytest_retrieval_eval.scoring.ties`): a retriever
may return ``(id, score)`` pairs instead of ids (higher is better), or expose
``last_scores``, the ``(id, score)`` list of its last ``rank`` best first, of which the
returned ids are the first ones (the built-ins do: it lets a tie running past the cut be
seen). Given a ``scored`` dict, both functions fill ``scored[k]`` with the ids and scores a
tie at k is judged on: the ranking, plus the ids past it whose score equals its last one.
Two more attributes are read after the call is timed (``scored[k]`` is then a callable the
tie report calls): ``last_tied_past`` (``fts``: the rows its LIMIT left out that tie with
the last one) and ``last_fusion`` (``hybrid``: the lists it fused, whose ties the fused
ranking inherits, :mod:`.fused_ties`).
:func:`explain_facts` records what ``retrieval-eval explain`` shows without rerunning.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from .. import vipune
from ..boundary.scores import parse_score
from ..errors import RetrieverError, one_line
from ..scoring.diagnostics import fused_lists
from ..scoring.metrics import dedupe
from ..scoring.ties import TieOrders
from ..vipune.store import PROJECT_ID
from .base import CheckedScores, Memory, Persona, Query, Retriever
from .fused_ties import FusionInputs, tie_orders
from .memories import has_memories, is_plain, read_memories, session_ranking, session_scores
from .ranked_output import read_all_positions, read_distinct
from .reference import FtsRetriever, HybridRetriever
from .row_facts import row_facts

__all__ = ["READ_CUT", "REPEATED_IDS", "check_haystack", "compact_facts", "explain_facts",
           "rank_all", "rank_per_k", "ranked_ids", "split_scored"]

#: The result record's count of ids a retriever returned again (:func:`rank_per_k`).
REPEATED_IDS = "repeated_ids"
#: A pair's count of the items an iterator was read to when the bound cut it (issue 43.4).
READ_CUT = "read_cut"

#: ``scored[k]``: the ids a tie at k is judged on and their scores, or (a fused retriever
#: whose input lists hold ties) the fused rankings it is judged over, or a zero-argument
#: callable giving either (None: no scores), called by the tie report after the timing.
Judged = tuple[list[str], list[float]] | TieOrders
Scored = dict[int, Judged | Callable[[], Judged | None]]


def _is_pair(item: object) -> bool:
    if type(item) is tuple and len(item) == 2 and type(item[1]) in (float, int):
        return True  # the common case, without the ABC's isinstance (a call per row)
    return (isinstance(item, tuple) and len(item) == 2
            and isinstance(item[1], numbers.Real) and not isinstance(item[1], bool))


def split_scored(items: Iterable[object], name: str,
                 question_id: str) -> tuple[list[str], list[float] | None]:
    """A ``rank`` result as ids and, when it gave ``(id, score)`` pairs, their scores."""
    got = list(items)
    pairs = [_is_pair(x) for x in got]
    if not any(pairs):
        return [str(x) for x in got], None
    if not all(pairs):
        raise RetrieverError(
            f"{name}: question {question_id}: rank returned ids and (id, score) pairs "
            "mixed; return all ids, or all (id, score) pairs with a number as score")
    scores = [parse_score(x[1]) for x in got]  # type: ignore[index]
    if None in scores:  # nan, an infinity, 10**400: no score (boundary/scores.py)
        bad = got[scores.index(None)]
        raise RetrieverError(
            f"{name}: question {question_id}: rank returned the pair "
            f"{one_line(repr(bad), 80)}, whose score is not a finite number; give every "
            "(id, score) pair a finite number as score, or return ids alone")
    return [str(x[0]) for x in got], scores  # type: ignore[index,return-value]


def _last_scores(retriever: object) -> list[tuple[str, float]] | None:
    """``retriever.last_scores`` as (id, score) pairs, else None."""
    value = getattr(retriever, "last_scores", None)
    if type(value) is CheckedScores:  # the plugin's own retrievers': read as they are
        return list(value)
    if not isinstance(value, Sequence):
        return None
    out: list[tuple[str, float]] = []
    for x in value:  # one pass; a (str, float) tuple, the built-ins' kind, kept as it is
        if type(x) is tuple and len(x) == 2 and type(x[0]) is str and type(x[1]) is float:
            out.append(x)
        elif _is_pair(x) and (score := parse_score(x[1])) is not None:
            out.append((str(x[0]), score))
        else:  # not a pair, or no finite score: no scores (ties and explain go without)
            return None
    return out


def _checked_scores(retriever: object, persona: Persona,
                    query: Query) -> list[tuple[str, float]] | None:
    """:func:`_last_scores`, every id checked to be one of the persona's sessions: ids past
    the cut decide ties and explain's gold ranks, so one that does not exist is refused as in
    a ranking (issue 34.3)."""
    full = _last_scores(retriever)
    if full is not None:
        check_haystack(query.question_id, {0: [i for i, _ in full]}, persona.session_ids,
                       holder="last_scores")
    return full


def _tie_list(ranked: Sequence[str], own: Sequence[float] | None,
              full: Sequence[tuple[str, float]] | None,
              dedup: bool) -> tuple[list[str], list[float]] | None:
    """``ranked`` with its scores, then the ids of ``full`` past it tied with its last
    score; None when the retriever gave no scores for it (or ones that do not match it)."""
    if full is not None:
        ids_full = [i for i, _ in full]
        scores_full: list[float] = [s for _, s in full]
        if dedup:  # each id where it first appears, as the ranking itself
            ids_full, kept = _dedupe_scored(ids_full, scores_full)
            scores_full = kept if kept is not None else []
        n = len(ranked)
        if ids_full[:n] == list(ranked):
            ids, scores = list(ranked), scores_full[:n]
            for mem_id, score in zip(ids_full[n:], scores_full[n:], strict=True):
                if not scores or score != scores[-1]:
                    break
                ids.append(mem_id)
                scores.append(score)
            return ids, scores
    if own is not None and len(own) == len(ranked):
        return list(ranked), list(own)
    return None


def _dedupe_scored(ids: Sequence[str], scores: Sequence[float] | None,
                   ) -> tuple[list[str], list[float] | None]:
    if scores is None:
        return dedupe(ids), None
    if len(set(ids)) == len(ids):  # the common case: no id repeats (a C-speed check)
        if len(scores) != len(ids):
            raise ValueError("ids and scores differ in length")
        return list(ids), list(scores)
    seen: set[str] = set()
    out_ids: list[str] = []
    out_scores: list[float] = []
    for mem_id, score in zip(ids, scores, strict=True):
        if mem_id not in seen:
            seen.add(mem_id)
            out_ids.append(mem_id)
            out_scores.append(score)
    return out_ids, out_scores


def ranked_ids(got: Sequence[object], persona: Persona, name: str, question_id: str,
               memories: dict[int, list[Memory]] | None, ks: Sequence[int],
               ) -> tuple[list[str], list[float] | None, bool]:
    """What ``rank`` returned as session ids and their scores, and whether it ranked
    memories. A ranking holding :class:`.Memory` items is checked (:mod:`.memories`) and
    turned into its derived session ranking (each session's score its first memory's);
    ``memories[k]`` gets the memories of each of ``ks``, unless they are session ids in
    disguise (:func:`.memories.is_plain`: then scored exactly as those ids). ``memories``
    None: this run's view scores no memories (one line)."""
    if not has_memories(got):
        ids, own = split_scored(got, name, question_id)
        return ids, own, False
    if memories is None:
        raise RetrieverError(
            f"{name}: question {question_id}: rank returned Memory items, which are scored "
            "at session granularity under the vipune protocol only; drop "
            "--retrieval-eval-protocol longmemeval / --retrieval-eval-granularity turn, or "
            "return ids")
    mems = read_memories(got, persona, name, question_id)
    if is_plain(mems):
        ids = [m.id for m in mems]
        own = None if not mems or mems[0].score is None else [float(m.score or 0.0)
                                                            for m in mems]
        return ids, own, False
    memories.update(dict.fromkeys(ks, mems))
    return session_ranking(mems), session_scores(mems), True


def rank_per_k(retriever: Retriever, persona: Persona, query: Query, ks: Sequence[int],
               scored: Scored | None = None, counts: dict[str, int] | None = None, *,
               memories: dict[int, list[Memory]] | None = None,
               ) -> tuple[dict[int, list[str]], dict[int, Mapping[str, Sequence[str]]]]:
    """The ranking of each cut-off (deduplicated, at most k ids), and the fused lists;
    ``scored[k]`` filled when the retriever gave scores (see the module's docstring).
    ``counts[REPEATED_IDS]``: how many of the ids the largest k's call was read to (up to its
    ``limit``-th distinct id) repeat an earlier one, set only when some do (issue 34.15).
    Every id of ``last_scores`` must be the persona's (:func:`check_haystack`).
    A memory store's ranking (:mod:`.memories`) is read until its memories cover the
    limit's sessions; its derived session ranking is each k's, and ``memories[k]`` (when
    a dict is given; None: memories are refused in one line) its memories."""
    if getattr(retriever, "limit_sensitive", False):
        groups: dict[int, list[int]] = {}
        for k in ks:
            groups.setdefault(vipune.candidate_pool(k), []).append(k)
    else:
        groups = {0: list(ks)}
    out: dict[int, list[str]] = {}
    fused: dict[int, Mapping[str, Sequence[str]]] = {}
    name = str(getattr(retriever, "name", "retriever"))
    for group in groups.values():
        limit = max(group)
        got = read_distinct(retriever.rank(persona, query, limit), name, query.question_id,
                            limit, len(persona.session_ids))
        ids, own, of_memories = ranked_ids(got, persona, name, query.question_id, memories,
                                           group)
        ranked, own = _dedupe_scored(ids, own)
        if counts is not None and limit == max(ks) and len(ranked) < len(ids):
            counts[REPEATED_IDS] = len(ids) - len(ranked)
        if counts is not None and limit == max(ks) and got.cut_at is not None:
            counts[READ_CUT] = got.cut_at  # an iterator's read stopped short (issue 43.4)
        ranked = ranked[:limit]
        # a memory store's scores are its memories' (last_scores is not read for it)
        full = None if of_memories else _checked_scores(retriever, persona, query)
        out.update(dict.fromkeys(group, ranked))
        lists = fused_lists(retriever)
        if lists is not None:
            fused.update(dict.fromkeys(group, lists))
        if scored is not None:
            own_cut = None if own is None else own[:limit]
            past = getattr(retriever, "last_tied_past", None)
            fusion = getattr(retriever, "last_fusion", None)
            # judged after the timing (pair_ties)
            if not of_memories and (callable(past) or callable(fusion)):
                scored.update(dict.fromkeys(group, partial(
                    _judged, ranked, own_cut, full, past, fusion, query, limit)))
                continue
            tie = _tie_list(ranked, own_cut, full, dedup=True)
            if tie is not None:
                scored.update(dict.fromkeys(group, tie))
    return out, fused


def _judged(ranked: list[str], own: list[float] | None,
            full: list[tuple[str, float]] | None, past: object, fusion: object,
            query: Query, limit: int) -> tuple[list[str], list[float]] | TieOrders | None:
    """What one call is judged on, computed only when the tie report asks: the tie list,
    with the rows a capped search left out that tie with its last (``last_tied_past``, a
    zero-argument callable), and for a fused retriever (``last_fusion``, a callable giving
    :class:`.FusionInputs`) the fused rankings every order of its input lists' ties gives,
    the run's own among the extremes."""
    if full is not None and callable(past):
        full = [*full, *((str(i), float(s)) for i, s in past())]
    tie = _tie_list(ranked, own, full, dedup=True)
    if tie is None or not callable(fusion):
        return tie
    inputs = fusion()
    if not isinstance(inputs, FusionInputs):
        return tie
    orders = tie_orders(inputs, query.gold, limit, query.question_id)
    if orders is None:
        return tie
    return TieOrders(orders.orders, [tie, *orders.extremes])


def _own_scores(judged: object) -> tuple[list[str], list[float]] | None:
    """The run's own ids and scores of what a cut-off is judged on: a plain tie list as it is,
    the first extreme of a fused ranking's orders (the run's own ranking); None for a judgement
    not computed yet (computing it is the tie report's cost, not explain's)."""
    if isinstance(judged, TieOrders):
        return judged.extremes[0] if judged.extremes else None
    if isinstance(judged, tuple) and len(judged) == 2:
        return judged
    return None


def rank_all(retriever: Retriever, persona: Persona, query: Query, ks: Sequence[int],
             n: int, scored: Scored | None = None) -> dict[int, list[str]]:
    """LongMemEval's protocol: every one of the ``n`` corpus items ranked, repeats kept, the
    same ranking for every k (its turn metrics grow k past the cut-off)."""
    name = str(getattr(retriever, "name", "retriever"))
    got = read_all_positions(retriever.rank(persona, query, n), name, query.question_id, n)
    whole, own, _ = ranked_ids(got, persona, name, query.question_id, None, ks)
    full = _checked_scores(retriever, persona, query)
    if scored is not None:
        tie = _tie_list(whole, own, full, dedup=False)
        if tie is not None:
            scored.update(dict.fromkeys(ks, tie))
    return dict.fromkeys(ks, whole)


def _rank_of(ranked: Sequence[str], wanted: str) -> int | None:
    return next((i for i, x in enumerate(ranked, start=1) if x == wanted), None)


def explain_facts(retriever: object, query: Query, gold: Sequence[str],
                  rankings: Mapping[int, Sequence[str]],
                  components: Mapping[int, Mapping[str, Sequence[str]]],
                  ks: Sequence[int], scored: Scored | None = None,
                  longer: Callable[[], Sequence[str]] | None = None) -> dict[str, Any]:
    """What ``retrieval-eval explain`` shows of one (pair, retriever), JSON-able.

    ``gold_ranks``: where each gold session landed in the largest k's call (the whole list
    the retriever scored when it exposed one, ``searched`` long; None: not returned); when
    a gold session is not in it and ``longer`` is given (a built-in turn what-if: its whole
    ranking's sessions, read only then), in that longer list. For a
    fused retriever, ``fusion``: the RRF constant, the FTS5 MATCH string vipune sends, the
    rows each list returned, and each gold session's semantic and FTS rank. For ``fts``:
    its MATCH string and rows. ``rows`` (:mod:`.row_facts`): per row shown (the top max-k,
    the gold), its score (from ``scored[top]`` or ``last_scores``) and the retriever's
    ``last_facts``, bounded; absent when the retriever gave neither.

    Per row shown, too: a fused retriever's ``fusion.rows`` (``{id: {"semantic": rank,
    "fts": rank}}``, None: not in that list). For one that exposes ``last_store`` (``fts``,
    ``hybrid`` and their what-ifs), ``store`` under ``fusion`` or ``fts``: the persona store
    it searched (and ``project_id`` when not vipune's default), where ``retrieval-eval
    explain`` asks SQLite's FTS5 which query words each shown row matched
    (:func:`.vipune.fts_matched`, :mod:`..reporting.explain_facts`) when it shows them: the
    run pays nothing for them (issue 48, item 11; reports before it recorded ``words``,
    ``tokens``, ``words_total`` and ``matched`` bitmasks, which explain still reads). All of
    it is recorded, bounded by the rows shown, in the compact form of
    :func:`compact_facts`."""
    top = max(ks)
    full = _last_scores(retriever)
    searched = dedupe(i for i, _ in full) if full is not None else list(rankings[top])
    if searched[:len(rankings[top])] != list(rankings[top]):
        searched = list(rankings[top])  # the last call was not the largest k's
    ranks = {g: _rank_of(searched, g) for g in gold}
    if longer is not None and any(r is None for r in ranks.values()):
        whole = list(longer())
        if whole[:len(searched)] == searched:  # the same ranking, read further
            searched = whole
            ranks = {g: _rank_of(searched, g) for g in gold}
    facts: dict[str, Any] = {"gold_ranks": ranks, "searched": len(searched)}
    shown = list(dict.fromkeys([*list(rankings[top])[:top], *gold]))
    rows = row_facts(retriever, shown,
                     [_own_scores(None if scored is None else scored.get(top)),
                      None if full is None else ([i for i, _ in full], [x for _, x in full])])
    if rows:
        facts["rows"] = rows
    if isinstance(retriever, HybridRetriever) and top in components:
        lists = components[top]
        facts["fusion"] = {
            "rrf_k": int(retriever.rrf_k),
            "recency": float(retriever.recency),
            "fts_mode": retriever.fts_mode,
            "fts_match": vipune.escape_fts_query(vipune.rust_trim(query.question),
                                                 mode=retriever.fts_mode),
            "semantic_rows": len(lists["semantic"]),
            "fts_rows": len(lists["fts"]),
            "gold": {g: {"semantic": _rank_of(lists["semantic"], g),
                         "fts": _rank_of(lists["fts"], g)} for g in gold},
            "rows": _list_ranks(lists, shown),
            **_match_source(retriever),
        }
    elif isinstance(retriever, FtsRetriever):
        facts["fts"] = {
            "fts_mode": retriever.mode,
            "fts_match": vipune.escape_fts_query(vipune.rust_trim(query.question),
                                                 mode=retriever.mode),
            "fts_rows": len(rankings[top]),
            **_match_source(retriever),
        }
    return compact_facts(facts, shown)


def compact_facts(facts: dict[str, Any], shown: Sequence[str]) -> dict[str, Any]:
    """``facts`` in the form a report records (issue 35, item 3): what is kept per shown row
    as lists in the order of ``shown`` (the pair's ``ranked``, then its gold not in it)
    instead of objects keyed by id. ``rows``: per row null, its score, or ``{"score",
    "facts"}``, a fused row's score left out where it is the RRF sum of its ranks (what
    explain adds up); ``fusion.rows``: ``[semantic rank, FTS rank]``; ``matched``: a
    bitmask over ``words`` (bit n: the row matched ``words[n]``; 0: none).
    :func:`..reporting.explain.full_facts` gives the long form back."""
    out = dict(facts)
    fusion = facts.get("fusion")
    ranks = fusion.get("rows", {}) if isinstance(fusion, dict) else {}
    rows = facts.get("rows")
    if isinstance(rows, dict):
        kept = [_compact_row(rows.get(mem_id), ranks.get(mem_id), fusion)
                for mem_id in shown]
        if any(row is not None for row in kept):
            out["rows"] = kept
        else:
            del out["rows"]
    for key in ("fusion", "fts"):
        source = facts.get(key)
        if not isinstance(source, dict):
            continue
        source = out[key] = dict(source)
        if key == "fusion" and "rows" in source:
            source["rows"] = [[(ranks.get(i) or {}).get("semantic"),
                               (ranks.get(i) or {}).get("fts")] for i in shown]
        if "matched" in source:
            source["matched"] = [source["matched"].get(i, 0) for i in shown]
    return out


def _compact_row(row: dict[str, Any] | None, ranks: Mapping[str, int | None] | None,
                 fusion: Mapping[str, Any] | None) -> Any:
    """One shown row's ``rows`` entry: None (nothing), its score, or the object."""
    if not row:
        return None
    row = dict(row)
    if ranks is not None and fusion is not None and "score" in row:
        rrf_k = int(fusion["rrf_k"])
        total = sum(1.0 / (rrf_k + r) for r in (ranks.get("semantic"), ranks.get("fts")) if r)
        if math.isclose(row["score"], total, rel_tol=1e-9, abs_tol=1e-12):
            del row["score"]  # explain adds it up from the ranks
    if not row:
        return None
    return row["score"] if list(row) == ["score"] else row


def _list_ranks(lists: Mapping[str, Sequence[str]],
                shown: Sequence[str]) -> dict[str, dict[str, int | None]]:
    """Each shown row's rank in the semantic and the FTS list a fusion fused."""
    where = {name: {mem_id: i for i, mem_id in reversed(list(enumerate(lists[name], 1)))}
             for name in ("semantic", "fts")}
    return {mem_id: {name: where[name].get(mem_id) for name in ("semantic", "fts")}
            for mem_id in shown}


def _match_source(retriever: object) -> dict[str, Any]:
    """``store`` (and ``project_id`` when not vipune's default): the persona store the
    retriever's last search read (``last_store``), where explain asks which query words each
    shown row matched; {} when it exposes none. A path, not an FTS5 query: the run asks
    nothing more of the store."""
    where = getattr(retriever, "last_store", None)
    if not callable(where):
        return {}
    project = getattr(retriever, "project_id", PROJECT_ID)
    return {"store": str(where()),
            **({} if project == PROJECT_ID else {"project_id": str(project)})}


def check_haystack(question_id: str, rankings: Mapping[int, Sequence[str]],
                   session_ids: Sequence[str], holder: str = "the ranking") -> None:
    """Refuse (one :class:`RetrieverError` line) a ranking (or, ``holder``, the
    ``last_scores`` ties are judged on) holding an id that is not one of the pair's sessions:
    another persona's store, or a retriever's bug, is never scored."""
    rankable = set(session_ids)
    for ranked in rankings.values():
        if rankable.issuperset(ranked):
            continue
        strangers = [x for x in ranked if x not in rankable]
        if strangers:
            raise RetrieverError(
                f"question {question_id}: {holder} holds {strangers[0]!r}"
                f"{f' and {len(strangers) - 1} more id(s)' if len(strangers) > 1 else ''}"
                f", not a session of this question's haystack "
                f"({len(session_ids)} sessions); a retriever must rank only "
                f"persona.session_ids"
            )
