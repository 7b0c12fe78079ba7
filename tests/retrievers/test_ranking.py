"""retrievers/ranking.py: (id, score) pairs, last_scores, the tie list past the cut, and the
explain facts of fused retrievers."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval import retrievers as r
from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.errors import RetrieverError
from pytest_retrieval_eval.reporting.explain_facts import full_facts
from pytest_retrieval_eval.retrievers.ranked_output import REPEATS_READ
from pytest_retrieval_eval.retrievers.ranking import (
    explain_facts,
    rank_all,
    rank_per_k,
    split_scored,
)
from tests.retrievers.test_retrievers import make_persona, make_query


class Scored:
    name = "scored"

    def __init__(self, items: list[object]) -> None:
        self.items = items

    def rank(self, persona: object, query: object, limit: int) -> list[object]:
        return self.items[:limit]


def test_split_scored_plain_pairs_and_mixed() -> None:
    assert split_scored(["a", "b"], "x", "q") == (["a", "b"], None)
    assert split_scored([("a", 2), ("b", 1.5)], "x", "q") == (["a", "b"], [2.0, 1.5])
    with pytest.raises(RetrieverError, match=r"^x: question q: rank returned ids and \(id, "
                                             r"score\) pairs mixed"):
        split_scored(["a", ("b", 1.0)], "x", "q")


def test_pairs_are_deduplicated_with_their_first_score(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    query = make_query("cat", None)
    items: list[object] = [("a", 3.0), ("b", 2.0), ("a", 9.0), ("c", 2.0), ("d", 1.0)]
    scored: dict[int, tuple[list[str], list[float]]] = {}
    rankings, _ = rank_per_k(Scored(items), persona, query, [1, 2], scored)
    assert rankings == {1: ["a", "b"], 2: ["a", "b"]}
    # The scores of what it returned (limit 2 of the pairs: a, b): no tie seen past the cut.
    assert scored[2] == (["a", "b"], [3.0, 2.0])


def test_last_scores_show_the_tie_past_the_cut(tmp_path: Path) -> None:
    """Three rows with the same vector: their cosines are equal; asked for 2, the semantic
    retriever returns 2 of them, and the tie list holds the third."""
    persona = make_persona(tmp_path)
    vectors = persona.vectors.copy()
    vectors[1] = vectors[2] = vectors[0]
    persona.vectors = vectors
    query = make_query("cat", vectors[0] * 2)
    scored: dict[int, tuple[list[str], list[float]]] = {}
    rankings, _ = rank_per_k(r.SemanticRetriever(), persona, query, [2], scored)
    assert rankings[2] == ["sess_00", "sess_01"]
    ids, scores = scored[2]
    assert ids == ["sess_00", "sess_01", "sess_02"] and len(set(scores)) == 1


def test_rank_all_keeps_repeats_and_scores(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    items: list[object] = [("a", 1.0), ("a", 1.0), ("b", 0.0)]
    scored: dict[int, tuple[list[str], list[float]]] = {}
    rankings = rank_all(Scored(items), persona, make_query("x", None), [1, 3], 3, scored)
    assert rankings[1] == ["a", "a", "b"] and scored[3] == (["a", "a", "b"], [1.0, 1.0, 0.0])


def test_explain_facts_of_hybrid_match_its_lists(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    rng = np.random.default_rng(1)
    query = make_query("  I adopted a cat  ", rng.standard_normal(vipune.EMBEDDING_DIM)
                       .astype(np.float32))
    hybrid = r.HybridRetriever()
    rankings, components = rank_per_k(hybrid, persona, query, [1, 5])
    gold = ("sess_00", "sess_07")
    facts = explain_facts(hybrid, query, gold, rankings, components, [1, 5])
    fusion = facts["fusion"]
    assert fusion["fts_match"] == '"I" "adopted" "a" "cat"'
    assert fusion["rrf_k"] == vipune.RRF_K and fusion["fts_mode"] == "and"
    sem = components[5]["semantic"]
    fts = components[5]["fts"]
    assert fusion["fts_rows"] == len(fts) == 1 and fusion["semantic_rows"] == len(sem)
    for g in gold:
        assert fusion["gold"][g]["semantic"] == sem.index(g) + 1
        assert fusion["gold"][g]["fts"] == (fts.index(g) + 1 if g in fts else None)
    # The rank in the whole fused list: RRF of the two ranks, ids breaking ties.
    fused = vipune.rrf_fuse(sem, fts)
    assert facts["gold_ranks"] == {g: [i for i, _ in fused].index(g) + 1 for g in gold}
    assert facts["searched"] == len(fused)
    assert rankings[5] == [i for i, _ in fused][:5]


@pytest.mark.parametrize("name", ["hybrid", "hybrid+fts:or", "fts", "fts+mode:or"])
def test_explain_facts_record_every_shown_rows_ranks_and_matched_words(
        tmp_path: Path, name: str) -> None:
    """Per shown row (top max-k and gold): its rank in each fused list, and (asked of the
    recorded store when read back) the words whose own FTS5 search (vipune's, one word)
    returns it; bounded words."""
    persona = make_persona(tmp_path)
    rng = np.random.default_rng(2)
    question = "I adopted a cat? the park " + "x" * 500
    query = make_query(question, rng.standard_normal(vipune.EMBEDDING_DIM).astype(np.float32))
    retriever = r.get_retriever(name)
    rankings, components = rank_per_k(retriever, persona, query, [1, 5])
    gold = ("sess_00", "sess_07")
    facts = full_facts({"ranked": rankings[5], "gold": gold, "question": question,
                        "explain": explain_facts(retriever, query, gold, rankings, components,
                                                 [1, 5])})
    shown = list(dict.fromkeys([*rankings[5], *gold]))
    side = facts["fusion"] if name.startswith("hybrid") else facts["fts"]
    if name.startswith("hybrid"):
        sem, fts = components[5]["semantic"], components[5]["fts"]
        assert side["rows"] == {i: {"semantic": sem.index(i) + 1 if i in sem else None,
                                    "fts": fts.index(i) + 1 if i in fts else None}
                                for i in shown}
    words = vipune.fts_words(question)
    assert side["words"] == [w if len(w) <= 40 else w[:39] + "…" for w in words]
    assert side["words_total"] == len(words) and len(side["words"][-1]) == 40
    path = persona.store_path()
    for mem_id in shown:
        expected = [w for w in words if mem_id in
                    {i for i, _ in vipune.fts_search(path, w, vipune.store.PROJECT_ID, 100)}]
        assert side["matched"].get(mem_id, []) == expected, mem_id
    assert any(side["matched"].values())


class Returns:
    """A retriever whose ``rank`` returns ``make(persona)`` and counts what was read."""

    name = "odd"

    def __init__(self, make: object) -> None:
        self.make = make
        self.read = 0

    def counted(self, items: Iterator[object]) -> Iterator[object]:
        for item in items:
            self.read += 1
            yield item

    def rank(self, persona: r.Persona, query: object, limit: int) -> object:
        return self.make(self, persona)  # type: ignore[operator]


def test_an_endless_iterator_is_read_to_the_limit_only(tmp_path: Path) -> None:
    """Issue 27.5: itertools.cycle(ids) hung the run; only ``limit`` distinct ids are read."""
    persona = make_persona(tmp_path)
    ids = list(persona.session_ids)
    retriever = Returns(lambda self, p: self.counted(itertools.cycle(ids)))
    rankings, _ = rank_per_k(retriever, persona, make_query("x", None), [1, 2])
    assert rankings == {1: ids[:2], 2: ids[:2]} and retriever.read == 2
    # Fewer distinct ids than asked for, repeated without end: a bounded read, its ranking.
    few = Returns(lambda self, p: self.counted(itertools.cycle(ids[:1])))
    big = len(ids) + 3
    rankings, _ = rank_per_k(few, persona, make_query("x", None), [big])
    assert rankings[big] == ids[:1] and few.read == REPEATS_READ * big
    # Pairs count by their id; their scores come along.
    scored_cycle = Returns(lambda self, p: itertools.cycle([(ids[0], 2.0), (ids[1], 1.0)]))
    scored: dict[int, tuple[list[str], list[float]]] = {}
    rankings, _ = rank_per_k(scored_cycle, persona, make_query("x", None), [2], scored)
    assert rankings[2] == ids[:2] and scored[2] == (ids[:2], [2.0, 1.0])


def test_an_endless_iterator_under_longmemeval_reads_the_persona_size(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    ids = list(persona.session_ids)
    retriever = Returns(lambda self, p: self.counted(itertools.cycle(ids[:2])))
    rankings = rank_all(retriever, persona, make_query("x", None), [1, 3], len(ids))
    assert retriever.read == len(ids)
    assert rankings[1] == [ids[i % 2] for i in range(len(ids))]


def test_a_finite_list_with_repeats_ranks_as_before(tmp_path: Path) -> None:
    """The bound changes nothing for a list: deduplicated, cut to the limit."""
    persona = make_persona(tmp_path)
    ids = list(persona.session_ids)
    retriever = Returns(lambda self, p: [ids[0], ids[0], ids[1], ids[0], ids[2], ids[3]])
    rankings, _ = rank_per_k(retriever, persona, make_query("x", None), [1, 3])
    assert rankings == {1: ids[:3], 3: ids[:3]}


@pytest.mark.parametrize(("returned", "shown"), [
    (None, "None (NoneType)"), ("s1", "'s1' (str)"), (b"s1", "b's1' (bytes)"),
    (7, "7 (int)"), ({"s1": 1.0}, "{'s1': 1.0} (dict)"),
])
def test_none_or_a_wrong_type_is_one_line_naming_the_retriever(
        tmp_path: Path, returned: object, shown: str) -> None:
    """Issue 27.12: None raised a TypeError from ranking.py; a string ranked its letters."""
    persona = make_persona(tmp_path)
    retriever = Returns(lambda self, p: returned)
    message = (f"^odd: question q1: rank returned {re.escape(shown)}, not a list of ids; "
               r"return a list of session ids, or of \(id, score\) pairs$")
    with pytest.raises(RetrieverError, match=message):
        rank_per_k(retriever, persona, make_query("x", None), [1])
    with pytest.raises(RetrieverError, match=message):
        rank_all(retriever, persona, make_query("x", None), [1], 3)


class MadeUpTies:
    """A Python store whose ``last_scores`` ties three ids that do not exist with its last
    row past the cut (issue 34.3): they once decided the expected recall over tie orders."""

    name = "made-up"

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.last_scores: list[tuple[str, float]] | None = None

    def rank(self, persona: object, query: object, limit: int) -> list[str]:
        ranked = self.ids[:limit]
        scores = [float(-i) for i in range(len(ranked))]
        self.last_scores = [*zip(ranked, scores, strict=True),
                            *((f"made-up-{i}", scores[-1]) for i in range(3))]
        return ranked


def test_last_scores_ids_are_checked_as_a_ranking_is(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    query = make_query("x", None, gold=("sess_02",))
    line = (r"^question q1: last_scores holds 'made-up-0' and 2 more id\(s\), not a session "
            rf"of this question's haystack \({len(persona.session_ids)} sessions\)")
    with pytest.raises(RetrieverError, match=line):
        rank_per_k(MadeUpTies(list(persona.session_ids)), persona, query, [1, 3], {})
    with pytest.raises(RetrieverError, match=line):
        rank_all(MadeUpTies(list(persona.session_ids)), persona, query, [1, 3],
                 len(persona.session_ids), {})
