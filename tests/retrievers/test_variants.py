"""What-if retrievers: the name grammar, its errors, and that each variant really ranks
differently from its plain retriever (a variant that silently fell back would fail here)."""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval import retrievers as r
from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.config import options
from pytest_retrieval_eval.errors import RetrievalEvalError
from pytest_retrieval_eval.retrievers import whatif
from pytest_retrieval_eval.retrievers.variants import PARAMETERS, VariantError, parse_variant
from pytest_retrieval_eval.vipune import store
from tests.retrievers.test_retrievers import make_persona, make_query

# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(("name", "base", "params"), [
    ("hybrid+rrf_k:60+fts:or", "hybrid", {"rrf_k": 60, "fts": "or"}),
    ("hybrid+pool:100", "hybrid", {"pool": 100}),
    ("hybrid+recency:0.3", "hybrid", {"recency": 0.3}),
    ("fts+mode:or", "fts", {"mode": "or"}),
    ("semantic+dtype:float32", "semantic", {"dtype": "float32"}),
])
def test_names_parse(name: str, base: str, params: dict[str, Any]) -> None:
    spec = parse_variant(name)
    assert (spec.name, spec.base, spec.params) == (name, base, params)
    assert spec.to_dict() == {"retriever": base, "params": params}
    assert options.parse_retrievers(f"hybrid,{name}") == ("hybrid", name)


@pytest.mark.parametrize(("name", "message"), [
    ("hybrid+foo:1", "unknown parameter 'foo'; hybrid takes rrf_k (a whole number in "
                     "1..1000000), pool (a whole number in 1..10000), fts (and|or), recency"),
    ("hybrid+pool:0", "pool must be a whole number in 1..10000"),
    ("hybrid+pool:20000", "pool must be a whole number in 1..10000"),
    ("hybrid+recency:1.5", "recency must be a number in 0..1"),
    ("hybrid+recency:nan", "recency must be a number in 0..1"),
    ("hybrid+fts:maybe", "fts must be and|or"),
    ("fts+mode:xor", "mode must be and|or"),
    ("fts+rrf_k:3", "unknown parameter 'rrf_k'; fts takes mode (and|or)"),
    ("semantic+dtype:float16", "dtype must be float64|float32"),
    ("oracle+k1:2", "'oracle' takes no parameters; what-if parameters go on hybrid, fts, semantic"),
    ("bm25+k1:2", "unknown parameter 'k1'; bm25 takes unit (session|turn)"),
    ("hybrid+pool", "'pool' is not param:value"),
    ("hybrid+pool:5+pool:6", "parameter 'pool' is given twice"),
])
def test_bad_names_are_one_line_naming_the_allowed(name: str, message: str) -> None:
    with pytest.raises(VariantError) as info:
        parse_variant(name)
    assert message in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(argparse.ArgumentTypeError, match="retriever"):
        options.parse_retrievers(name)
    with pytest.raises(RetrievalEvalError, match="retriever"):
        r.get_retriever(name)


def test_every_parameter_default_is_vipunes() -> None:
    # The plain retrievers' class attributes are vipune's rules, and the variants' defaults.
    plain = r.HybridRetriever()
    assert (plain.rrf_k, plain.pool, plain.fts_mode, plain.recency) == (25, None, "and", 0.0)
    assert PARAMETERS["hybrid"]["rrf_k"].default == vipune.RRF_K == 25
    assert r.FtsRetriever().mode == "and" == PARAMETERS["fts"]["mode"].default


# --------------------------------------------------------------------------- FTS OR


def test_escape_or_quotes_like_vipune_and_joins_with_or() -> None:
    assert vipune.escape_fts_query('cat "Miso" a\\b') == '"cat" """Miso""" "a\\\\b"'
    assert vipune.escape_fts_query('cat "Miso" a\\b', mode="or") == (
        '"cat" OR """Miso""" OR "a\\\\b"')
    assert vipune.escape_fts_query("  ", mode="or") == ""
    with pytest.raises(ValueError, match="not one of and, or"):
        vipune.escape_fts_query("x", mode="near")


def test_fts_or_matches_any_word_on_sqlite(tmp_path: Path) -> None:
    # Independent check: FTS5 itself, with a hand-written OR query.
    persona = make_persona(tmp_path)
    db = sqlite3.connect(persona.store_path())
    expected = {row[0] for row in db.execute(
        "SELECT m.id FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid "
        "WHERE memories_fts MATCH 'miso OR sourdough'")}
    db.close()
    assert expected == {"sess_00", "sess_07"}
    query = make_query("Miso sourdough", None)
    assert r.FtsRetriever().rank(persona, query, 5) == []  # vipune ANDs: no row has both
    variant = r.get_retriever("fts+mode:or")
    got = variant.rank(persona, query, 5)
    assert set(got) == expected and variant.name == "fts+mode:or"


def spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[dict[str, Any]]:
    """Record the keyword arguments of every call to ``vipune.<name>``."""
    calls: list[dict[str, Any]] = []
    real = getattr(vipune, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(vipune, name, wrapper)
    return calls


def test_variants_pass_their_parameter_to_the_reference(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    persona = make_persona(tmp_path)
    query = make_query("garden budget", persona.vectors[1])
    hybrid_calls = spy(monkeypatch, "search_hybrid_parts")
    r.get_retriever("hybrid+rrf_k:60+fts:or+pool:70").rank(persona, query, 5)
    r.get_retriever("hybrid").rank(persona, query, 5)
    assert [(c["rrf_k"], c["fts_mode"], c["pool"]) for c in hybrid_calls] == [
        (60, "or", 70), (25, "and", None)]
    fts_calls = spy(monkeypatch, "fts_search")
    r.get_retriever("fts+mode:or").rank(persona, query, 5)
    r.get_retriever("fts").rank(persona, query, 5)
    assert [c["mode"] for c in fts_calls] == ["or", "and"]


# --------------------------------------------------------------------------- rankings differ


def rrf(lists: Sequence[Sequence[str]], k: int) -> list[str]:
    """Reciprocal rank fusion written from its definition (ties by id)."""
    scores: dict[str, float] = {}
    for ranked in lists:
        for rank, mem_id in enumerate(ranked, start=1):
            scores[mem_id] = scores.get(mem_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda m: (-scores[m], m))


def test_hybrid_fts_or_fuses_the_or_list(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    query = make_query("Miso sourdough", persona.vectors[3])
    plain = r.get_retriever("hybrid").rank(persona, query, 8)
    variant = r.get_retriever("hybrid+fts:or")
    got = variant.rank(persona, query, 8)
    semantic = [i for i, _ in vipune.semantic_search(persona.vectors, persona.session_ids,
                                                     persona.vectors[3], 8)]
    assert plain == semantic  # vipune: the FTS list is empty, fusion changes nothing
    fts_or = ["sess_00", "sess_07"] if got.index("sess_00") < got.index("sess_07") else [
        "sess_07", "sess_00"]
    assert got == rrf([semantic, fts_or], 25) and got != plain


def test_hybrid_rrf_k_changes_the_order(tmp_path: Path) -> None:
    texts = ["apple " * (i + 1) + "filler" for i in range(8)]  # FTS ranks by term frequency
    persona = make_persona(tmp_path, texts)
    qvec = persona.vectors[0]
    query = make_query("apple", qvec)
    semantic = [i for i, _ in vipune.semantic_search(persona.vectors, persona.session_ids,
                                                     qvec, 8)]
    fts = [i for i, _ in vipune.fts_search(persona.store_path(), "apple", store.PROJECT_ID, 8)]
    plain = r.get_retriever("hybrid").rank(persona, query, 8)
    variant = r.get_retriever("hybrid+rrf_k:1").rank(persona, query, 8)
    assert plain == rrf([semantic, fts], 25)
    assert variant == rrf([semantic, fts], 1)
    assert variant != plain


def test_hybrid_pool_caps_each_list(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    query = make_query("garden budget", persona.vectors[1])
    plain = r.get_retriever("hybrid").rank(persona, query, 5)
    variant = r.get_retriever("hybrid+pool:1")
    assert not getattr(variant, "limit_sensitive", True)  # a fixed pool serves every k
    got = variant.rank(persona, query, 5)
    assert len(plain) == 5 and 1 <= len(got) <= 2 and got[0] == "sess_01"


def test_hybrid_recency_decays_from_the_question_date(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)  # sess_i dated 2023-05-(i+1); question 2023-06-01
    query = make_query("garden budget", persona.vectors[1])
    plain = r.get_retriever("hybrid").rank(persona, query, 8)
    newest_first = [f"sess_{i:02d}" for i in range(7, -1, -1)]
    assert r.get_retriever("hybrid+recency:1").rank(persona, query, 8) == newest_first
    assert plain != newest_first
    half = r.get_retriever("hybrid+recency:0.5").rank(persona, query, 8)
    assert sorted(half) == sorted(plain) and half != plain


def test_semantic_float32_breaks_a_float64_near_tie() -> None:
    q = np.array([1.0, 1e-4, 0, 0], np.float32)
    worse = np.array([1.0, 0.5e-4, 0, 0], np.float32)
    best = np.array([1.0, 1e-4, 0, 0], np.float32)
    persona = r.Persona("k", ("worse", "best"), ("", ""), np.stack([worse, best]),
                        ["", ""], lambda: Path("unused"))
    query = make_query("q", q)
    assert r.get_retriever("semantic").rank(persona, query, 2) == ["best", "worse"]
    # In float32 both cosines round to 1.0: the stable sort keeps the row order.
    assert r.get_retriever("semantic+dtype:float32").rank(persona, query, 2) == [
        "worse", "best"]
    assert whatif.float32_search(np.zeros((0, 4), np.float32), [], q, 3) == []
