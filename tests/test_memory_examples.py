"""The memory stores of docs/memories.md (examples/memories/): the Python turn store ranks as
the built-in ``semantic+unit:turn`` does, the Node ``cmd:`` store (embed op, memories answer)
as the Python one, and the facts store's memories are checked by hand."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.data import dataset, ingest
from pytest_retrieval_eval.retrievers import Memory, Persona, Query, get_retriever
from pytest_retrieval_eval.run import personas
from pytest_retrieval_eval.vectors import cache
from pytest_retrieval_eval.vectors.store_embedding import StoreEmbedding
from pytest_retrieval_eval.vipune import store as store_mod

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memories"
sys.path.insert(0, str(EXAMPLES))

from facts_store import FactStore, facts  # noqa: E402
from turn_store import TurnStore  # noqa: E402


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Persona, Query]]:
    root = tmp_path_factory.mktemp("memories")
    corpus = ingest.load_corpus(dataset.resolve_dataset("sample"), root)
    model = cache.list_models([cache.bundled_cache_dir()])[0]
    vectors = cache.VectorCache(root / "cache", model["fingerprint"], int(model["dim"]), model,
                                read_only_roots=[cache.bundled_cache_dir()])
    stores = store_mod.StoreCache(root / "stores")
    embed = StoreEmbedding(vectors, None, str(model["name"]))
    out = []
    for pair in [p for p in corpus.pairs if not p.abstention][:6]:
        persona = personas.build_persona(pair, corpus, vectors, stores,
                                         str(model["fingerprint"]), None, embed=embed)
        query, _ = personas.build_query(pair, None, vectors, model)
        out.append((persona, query))
    return out


def test_the_turn_store_ranks_as_semantic_unit_turn(
        sample: list[tuple[Persona, Query]]) -> None:
    store, reference = TurnStore(), get_retriever("semantic+unit:turn")
    for persona, query in sample:
        store.index(persona)
        reference.index(persona)  # type: ignore[attr-defined]
        for limit in (1, 5, 10):
            got = store.rank(persona, query, limit)
            want = reference.rank(persona, query, limit)
            assert [m.id for m in got] == [m.id for m in want], (query.question_id, limit)
            assert [m.score for m in got] == pytest.approx([m.score for m in want], abs=1e-12)
            assert len({m.id.rpartition("_")[0] for m in got}) == limit


def _node_session(persona: Persona, query: Query, limit: int) -> tuple[list[dict[str, Any]],
                                                                     list[list[str]]]:
    """Talk to store.js as the plugin does: hello, index (answering its embed request with
    ``persona.embed``), rank; the memories it answers and the texts it asked to embed."""
    proc = subprocess.Popen(["node", str(EXAMPLES / "store.js")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    asked: list[list[str]] = []

    def ask(request: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        answer: dict[str, Any] = json.loads(proc.stdout.readline())
        while answer.get("op") == "embed":
            asked.append(answer["texts"])
            vectors = persona.embed(answer["texts"]).astype(float).tolist()
            proc.stdin.write(json.dumps({"vectors": vectors}) + "\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
        return answer

    try:
        assert ask({"op": "hello", "protocol": 1}) == {"name": "node-turns", "vectors": True}
        sessions = [{"id": sid, "text": text, "created_at": "", "turns": [dict(t) for t in turns]}
                    for sid, text, turns in zip(persona.session_ids, persona.texts,
                                                persona.turns, strict=True)]
        assert ask({"op": "index", "persona": persona.key, "sessions": sessions}) == {"ok": True}
        answer = ask({"op": "rank", "persona": persona.key, "question_id": query.question_id,
                      "question": query.question, "limit": limit,
                      "vector": np.asarray(query.vector).astype(float).tolist()})
    finally:
        proc.stdin.close()
        proc.wait(10)
    return answer["memories"], asked


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_node_store_answers_the_python_turn_stores_memories(
        sample: list[tuple[Persona, Query]]) -> None:
    store = TurnStore()
    for persona, query in sample[:3]:
        store.index(persona)
        memories, asked = _node_session(persona, query, 5)
        want = store.rank(persona, query, 5)
        assert [m["id"] for m in memories] == [m.id for m in want]
        assert [m["turns"] for m in memories] == [[m.id] for m in want]
        assert [m["score"] for m in memories] == pytest.approx([m.score for m in want],
                                                              abs=1e-12)
        assert len(asked) == 1 and len(asked[0]) == len(store._turns[persona.key][0])


def _hand_persona() -> Persona:
    turns = [
        [{"role": "user", "content": "I adopted a cat named Miso. She is grey! ok"},
         {"role": "assistant", "content": "What a lovely name for a cat."},
         {"role": "user", "content": "   "},
         {"role": "user", "content": "My sister lives in Lisbon now."}],
        [{"role": "user", "content": "The cat Miso hates the vet."}],
    ]
    return Persona(key="hand", session_ids=("s_a", "s_b"), created_at=("", ""),
                   vectors=np.zeros((2, 0), np.float32), texts=["", ""],
                   store_path=lambda: Path("unused"), turns=turns)


def test_the_facts_store_extracts_one_sentence_per_memory_naming_its_turn() -> None:
    persona = _hand_persona()
    assert facts("s_a", [dict(t) for t in persona.turns[0]]) == [
        ("s_a_1#1", "s_a_1", "I adopted a cat named Miso."),
        ("s_a_1#2", "s_a_1", "She is grey!"),  # "ok": under three words; turn 3 is blank
        ("s_a_4#1", "s_a_4", "My sister lives in Lisbon now."),
    ]
    store = FactStore()
    store.index(persona)
    query = Query("q", "single-session-user", "What is the name of my cat?", "", None, ())
    # s_b_1#1 holds "the" and "cat" (2); each fact of s_a holds one question word (1): ties
    # keep history order. Two sessions are covered after two facts.
    assert store.rank(persona, query, 1) == [
        Memory("s_b_1#1", 2.0, turns=("s_b_1",), text="The cat Miso hates the vet.")]
    got = store.rank(persona, query, 2)
    assert [(m.id, m.score, m.turns) for m in got] == [
        ("s_b_1#1", 2.0, ("s_b_1",)), ("s_a_1#1", 1.0, ("s_a_1",))]
    assert [m.id for m in store.rank(persona, query, 3)] == [
        "s_b_1#1", "s_a_1#1", "s_a_1#2", "s_a_4#1"]  # only two sessions exist: all read


def test_the_equal_k_figures_of_the_memories_page(tmp_path: Path) -> None:
    """docs/memories.md's "Why equal k is not equal context" table, recomputed."""
    corpus = ingest.load_corpus(dataset.resolve_dataset("sample"), tmp_path)
    model = cache.list_models([cache.bundled_cache_dir()])[0]
    vectors = cache.VectorCache(tmp_path / "cache", model["fingerprint"], int(model["dim"]),
                                model, read_only_roots=[cache.bundled_cache_dir()])
    stores = store_mod.StoreCache(tmp_path / "stores")
    embed = StoreEmbedding(vectors, None, str(model["name"]))
    semantic, turns = get_retriever("semantic"), get_retriever("semantic+unit:turn")
    figures: dict[str, list[float]] = {}
    for pair in [p for p in corpus.pairs if not p.abstention]:
        persona = personas.build_persona(pair, corpus, vectors, stores,
                                         str(model["fingerprint"]), None, embed=embed)
        query, _ = personas.build_query(pair, None, vectors, model)
        turns.index(persona)  # type: ignore[attr-defined]
        gold = set(pair.gold)
        top = list(semantic.rank(persona, query, 10))
        memories = turns.rank(persona, query, 10)
        sessions = list(dict.fromkeys(m.id.rpartition("_")[0] for m in memories))
        first = {m.id.rpartition("_")[0] for m in memories[:10]}
        text = dict(zip(persona.turn_rows().session_ids,  # type: ignore[misc]
                        persona.turn_rows().texts, strict=True))  # type: ignore[misc]
        own = dict(zip(persona.session_ids, persona.texts, strict=True))
        for name, value in (
                ("session recall", len(gold & set(top)) / len(gold)),
                ("turn recall", len(gold & set(sessions[:10])) / len(gold)),
                ("turn memory recall", len(gold & first) / len(gold)),
                ("turn memories", len(memories)),
                ("session words", sum(len(own[s].split()) for s in top)),
                ("turn words", sum(len(text[m.id].split()) for m in memories[:10]))):
            figures.setdefault(name, []).append(float(value))
    mean = {name: float(np.mean(values)) for name, values in figures.items()}
    assert len(figures["turn memories"]) == 15
    page = (Path(__file__).resolve().parents[1] / "docs" / "memories.md").read_text()
    rows = {
        "| recall@10 (first 10 sessions of the ranking) |":
            f"{mean['session recall']:.3f} | {mean['turn recall']:.3f} |",
        "| memory_recall@10 (first 10 memories) |":
            f"{mean['session recall']:.3f} | {mean['turn memory recall']:.3f} |",
        "| memories read to cover 10 sessions |": f"10 | {mean['turn memories']:.1f} |",
        "| words of the first 10 memories |":
            f"{mean['session words']:.0f} | {mean['turn words']:.0f} |",
    }
    for head, cells in rows.items():
        assert f"{head} {cells}" in page, (head, cells)
