"""examples/mcp/vipune_mcp_standin.py, vipune's MCP server stand-in, driven through the
official MCP SDK's stdio client (tests/support/mcp_clients.py), never through the plugin:
vipune's tools and result shapes, the conflict rule and ``force``, recency moving ranks, and
its rankings at recency 0 equal to the plugin's ``hybrid`` reference pair by pair (in
process over generated personas with vectors of their own, and over MCP on the bundled
sample with its cached vectors)."""

from __future__ import annotations

import math
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

pytest.importorskip("mcp", reason="the mcp SDK is in the [mcp] extra")

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST

from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.data import dataset, ingest
from pytest_retrieval_eval.data.dataset import DatasetSource
from pytest_retrieval_eval.data.generator import instances as generator
from pytest_retrieval_eval.data.pairs import text_key
from pytest_retrieval_eval.retrievers import Persona, Query
from pytest_retrieval_eval.retrievers.reference import (
    HybridRetriever,
    SemanticRetriever,
)
from pytest_retrieval_eval.run import lanes, personas
from pytest_retrieval_eval.vectors import cache
from pytest_retrieval_eval.vipune import store as store_mod
from tests.support import mcp_clients

sys.path.insert(0, str(mcp_clients.STANDIN.parent))
import vipune_mcp_standin as standin

FP = "standin-test-model"
DIM = 8
INFO = {"name": "standin-test", "fingerprint": FP, "dim": DIM, "pooling": "mean",
        "max_length": 512, "query_prefix": ""}
#: vipune's tools and their parameters (src/mcp/params.rs @ 61e21872).
STORE_PARAMS = {"text", "metadata", "memory_type", "status", "supersedes", "force"}
SEARCH_PARAMS = {"query", "limit", "memory_types", "statuses", "recency_weight", "hybrid",
                 "no_touch"}
#: src/mcp/helpers.rs @ 61e21872, format_memory_json.
RESULT_KEYS = ["id", "content", "similarity", "created_at", "updated_at", "project_id",
               "memory_type", "status", "metadata", "retrieval_count", "last_retrieved_at"]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


def _unit(*values: float) -> np.ndarray:
    vec = np.zeros(DIM, dtype=np.float32)
    vec[: len(values)] = values
    return vec


#: Four sessions, ten days apart; the query is nearest the OLDEST one, so at recency 0 it
#: leads and at 0.3 (decay from the newest date) the newest one does.
SESSIONS = [
    ("s1", "user: I adopted a cat named Miso", _unit(1.0, 0.2), "2023-05-01T10:00:00+00:00"),
    ("s2", "user: my cat Miso likes tuna", _unit(0.2, 1.0), "2023-05-11T10:00:00+00:00"),
    ("s3", "user: I run every morning", _unit(0.0, 0.0, 1.0), "2023-05-21T10:00:00+00:00"),
    ("s4", "user: the cat needs a vet visit", _unit(0.3, 0.0, 0.0, 1.0),
     "2023-05-31T10:00:00+00:00"),
]
QUESTION = "cat Miso"
QUERY_VECTOR = _unit(1.0, 0.1)
#: Near s1 (cosine about 0.995): vipune refuses it unless ``force``.
DUPLICATE = ("s1b", "user: I adopted a cat, her name is Miso", _unit(1.0, 0.25, 0.05))
#: A text past vipune's 100,000 bytes.
LONG = ("s9", "user: " + "word " * 20_001, _unit(0.0, 0.0, 0.0, 0.0, 1.0))


@pytest.fixture(scope="module")
def synthetic_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vector cache of a made-up model holding the synthetic texts and the question."""
    root = tmp_path_factory.mktemp("standin-cache")
    vectors = cache.VectorCache(root, FP, DIM, INFO)
    texts = [s[1] for s in SESSIONS] + [DUPLICATE[1], LONG[1]]
    vecs = [s[2] for s in SESSIONS] + [DUPLICATE[2], LONG[2]]
    vectors.add([text_key(t) for t in texts] + [cache.query_key(QUESTION, INFO)],
                np.stack([*vecs, QUERY_VECTOR]))
    return root


async def _synthetic_session(workdir: Path, cache_root: Path) -> dict[str, Any]:
    """Everything the synthetic test asks of one server, gathered for the asserts."""
    env = mcp_clients.standin_env(
        cache_root, RETRIEVAL_EVAL_MODEL_FINGERPRINT=FP,
        VIPUNE_STANDIN_CLOCK="metadata:created_at")
    seen: dict[str, Any] = {"errors": {}}

    async def error(tool: str, args: dict[str, Any], name: str) -> None:
        try:
            await mcp_clients.call_json(session, tool, args)
        except MCPError as exc:
            seen["errors"][name] = exc
        else:
            seen["errors"][name] = None

    async with mcp_clients.standin_session(workdir, env) as session:
        with anyio.fail_after(mcp_clients.CALL_TIMEOUT_S):
            tools = (await session.list_tools()).tools
        seen["tools"] = {t.name: set(t.input_schema.get("properties", {})) for t in tools}
        seen["stored"] = [await mcp_clients.call_json(session, "store_memory", {
            "text": text, "metadata": {"session_id": sid, "created_at": date}})
            for sid, text, _, date in SESSIONS]
        search = {"query": QUESTION, "limit": 10, "hybrid": True}
        seen["w0"] = await mcp_clients.call_json(session, "search_memories",
                                                 {**search, "recency_weight": 0.0})
        seen["w03"] = await mcp_clients.call_json(session, "search_memories",
                                                  {**search, "recency_weight": 0.3})
        seen["default"] = await mcp_clients.call_json(session, "search_memories",
                                                      {"query": QUESTION, "no_touch": True})
        seen["semantic"] = await mcp_clients.call_json(
            session, "search_memories", {**search, "hybrid": False, "recency_weight": 0.0})
        await error("store_memory", {"text": DUPLICATE[1],
                                     "metadata": {"session_id": DUPLICATE[0]}}, "conflict")
        seen["forced"] = await mcp_clients.call_json(session, "store_memory", {
            "text": DUPLICATE[1], "metadata": {"session_id": DUPLICATE[0]}, "force": True})
        await error("store_memory", {"text": LONG[1]}, "long")
        await error("store_memory", {"text": "  "}, "empty text")
        await error("store_memory", {"text": "a text no cache holds"}, "no vector")
        await error("search_memories", {"query": " \n"}, "empty query")
        await error("search_memories", {"query": QUESTION, "limit": 0}, "limit 0")
        await error("search_memories", {"query": QUESTION, "limit": 10_001}, "limit 10001")
        await error("search_memories", {"query": QUESTION, "recency_weight": 1.5}, "recency")
        seen["listed"] = await mcp_clients.call_json(session, "list_memories", {"limit": 2})
    return seen


@pytest.fixture(scope="module")
def synthetic(synthetic_cache: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("standin-synthetic")
    result: dict[str, Any] = anyio.run(_synthetic_session, workdir, synthetic_cache)
    return result


def test_the_tools_are_vipunes(synthetic: dict[str, Any]) -> None:
    tools = synthetic["tools"]
    assert tools["store_memory"] == STORE_PARAMS
    assert tools["search_memories"] == SEARCH_PARAMS
    assert {"limit", "memory_types", "statuses", "no_touch"} == tools["list_memories"]


def test_a_store_answers_its_id_and_added(synthetic: dict[str, Any]) -> None:
    # The stand-in names a memory by its metadata's session id (the id tie-break of RRF is
    # then hybrid's); vipune answers {"id", "status": "added"} either way.
    assert synthetic["stored"] == [{"id": sid, "status": "added"} for sid, *_ in SESSIONS]


def test_a_search_answers_vipunes_objects_best_first(synthetic: dict[str, Any]) -> None:
    results = synthetic["w0"]
    assert [list(r) for r in results] == [RESULT_KEYS] * len(SESSIONS)
    first = results[0]
    assert first["id"] == "s1" and first["content"] == SESSIONS[0][1]
    assert first["metadata"] == {"session_id": "s1", "created_at": SESSIONS[0][3]}
    assert first["memory_type"] == "fact" and first["status"] == "active"
    assert first["project_id"] == "longmemeval" and first["created_at"] == SESSIONS[0][3]
    scores = [r["similarity"] for r in results]
    assert scores == sorted(scores, reverse=True)
    # RRF, k = 25: s1 leads the semantic list and s2 the FTS one (both hold "cat" and "miso";
    # FTS5's bm25 favours the shorter s2), each second in the other: a tie at 1/26 + 1/27,
    # broken by id ascending (src/rrf.rs), so s1 first.
    assert [r["id"] for r in results[:2]] == ["s1", "s2"]
    assert scores[:2] == [1.0 / 26.0 + 1.0 / 27.0] * 2
    # Telemetry: each search counts a retrieval unless no_touch (the counts read before it).
    assert [r["retrieval_count"] for r in synthetic["default"]] == [2] * len(SESSIONS)


def test_recency_moves_ranks_by_vipunes_rule(synthetic: dict[str, Any]) -> None:
    w0 = [(r["id"], r["similarity"]) for r in synthetic["w0"]]
    w03 = [(r["id"], r["similarity"]) for r in synthetic["w03"]]
    dates = {sid: datetime.fromisoformat(date) for sid, _, _, date in SESSIONS}
    now = max(dates.values())  # no VIPUNE_STANDIN_NOW: the newest stored date
    want = sorted(((i, 0.7 * s + 0.3 * math.exp(-1e-6 * (now - dates[i]).total_seconds()))
                   for i, s in w0), key=lambda item: -item[1])
    assert [i for i, _ in w03] == [i for i, _ in want]
    assert [s for _, s in w03] == pytest.approx([s for _, s in want], abs=1e-12)
    assert w0[0][0] == "s1" and w03[0][0] == "s4"  # the oldest led, the newest leads
    # vipune's default weight is its config's 0.3 (and 5 results): the same order.
    assert [r["id"] for r in synthetic["default"]] == [i for i, _ in w03][:5]


def test_hybrid_false_is_the_semantic_search(synthetic: dict[str, Any]) -> None:
    cos = {sid: _cosine(v, QUERY_VECTOR) for sid, _, v, _ in SESSIONS}
    got = [(r["id"], r["similarity"]) for r in synthetic["semantic"]]
    assert [i for i, _ in got] == sorted(cos, key=lambda i: -cos[i])
    assert [s for _, s in got] == pytest.approx([cos[i] for i, _ in got], abs=1e-12)


def test_a_conflict_is_refused_with_vipunes_error_and_force_stores(
        synthetic: dict[str, Any]) -> None:
    error = synthetic["errors"]["conflict"]
    assert isinstance(error, MCPError) and error.code == INVALID_REQUEST
    assert error.message == "Proposed memory conflicts with 1 existing memory(ies)"
    assert error.data["type"] == "conflict" and error.data["proposed"] == DUPLICATE[1]
    (conflict,) = error.data["conflicts"]
    assert conflict["id"] == "s1" and conflict["content"] == SESSIONS[0][1]
    assert conflict["similarity"] == pytest.approx(_cosine(SESSIONS[0][2], DUPLICATE[2]),
                                                   abs=1e-12)
    assert conflict["similarity"] >= standin.DEFAULT_THRESHOLD
    assert synthetic["forced"] == {"id": DUPLICATE[0], "status": "added"}


@pytest.mark.parametrize(("name", "message", "code"), [
    ("long", "Input too long: 100011 characters (max: 100000)", INVALID_REQUEST),
    ("empty text", "Text cannot be empty", INVALID_REQUEST),
    ("empty query", "Query cannot be empty", INVALID_REQUEST),
    ("limit 0", "Limit must be greater than 0", INVALID_REQUEST),
    ("limit 10001", "Limit exceeds maximum allowed (10000)", INVALID_REQUEST),
    ("recency", "Invalid recency weight: 1.5 (must be between 0.0 and 1.0)", INVALID_REQUEST),
    ("no vector", "Embedding unavailable: the text", INTERNAL_ERROR),
])
def test_bad_input_is_an_mcp_error(synthetic: dict[str, Any], name: str, message: str,
                                   code: int) -> None:
    error = synthetic["errors"][name]
    assert isinstance(error, MCPError) and error.code == code
    assert error.message.startswith(message)
    kind = "invalid_input" if code == INVALID_REQUEST else "internal_error"
    assert error.data == {"type": kind}


def test_list_memories_is_newest_first(synthetic: dict[str, Any]) -> None:
    listed = synthetic["listed"]
    assert [r["id"] for r in listed] == ["s1b", "s4"]  # s1b: the wall clock, after 2023
    assert "similarity" not in listed[0]


# ------------------------------------------------------------------ equal to ``hybrid``


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[Path, list[tuple[Persona, Query]]]:
    """Generated personas, each text with a random vector of its own in a fresh cache."""
    root = tmp_path_factory.mktemp("standin-generated")
    path = root / "gen.json"
    generator.write_dataset(generator.SAMPLE.scaled(instances=8, sessions=40), path)
    corpus = ingest.load_corpus(DatasetSource("gen", path), root / "corpus")
    info = {**INFO, "dim": 384}
    vectors = cache.VectorCache(root / "cache", FP, 384, info)
    keys = lanes.needed_keys(corpus)
    pairs = [p for p in corpus.pairs if not p.abstention][:6]
    qkeys = [cache.query_key(p.question, info) for p in pairs]
    rng = np.random.default_rng(45)
    vectors.add(keys + qkeys, rng.standard_normal((len(keys) + len(qkeys), 384)))
    stores = store_mod.StoreCache(root / "stores")
    out = [(personas.build_persona(p, corpus, vectors, stores, FP, None),
            personas.build_query(p, None, vectors, info)[0]) for p in pairs]
    return root / "cache", out


@pytest.fixture
def in_process(generated: tuple[Path, list[tuple[Persona, Query]]], tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(generated[0]))
    monkeypatch.setenv("RETRIEVAL_EVAL_MODEL_FINGERPRINT", FP)
    monkeypatch.delenv("VIPUNE_STANDIN_CLOCK", raising=False)
    # Generated histories hold sessions past vipune's 100,000 bytes: store them all here
    # (the limit itself is checked above, over MCP).
    monkeypatch.setenv("VIPUNE_STANDIN_MAX_INPUT", "0")
    yield tmp_path


def test_at_recency_0_the_ranking_is_hybrids(
        generated: tuple[Path, list[tuple[Persona, Query]]], in_process: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    hybrid, semantic = HybridRetriever(), SemanticRetriever()
    compared = 0
    for n, (persona, query) in enumerate(generated[1]):
        monkeypatch.setenv("VIPUNE_DATABASE_PATH", str(in_process / f"p{n}.db"))
        server = standin.StandIn()
        for sid, text in zip(persona.session_ids, persona.texts, strict=True):
            server.store_memory(text, {"session_id": sid}, force=True)
        for limit in (1, 5, 10, 50):
            got = server.search_memories(query.question, limit, recency_weight=0.0,
                                         hybrid=True, no_touch=True)
            want = hybrid.rank(persona, query, limit)
            assert [r["id"] for r in got] == want, (query.question_id, limit)
            scores = dict(hybrid.last_scores or ())
            assert [r["similarity"] for r in got] == [scores[i] for i in want]
            flat = server.search_memories(query.question, limit, recency_weight=0.0,
                                          hybrid=False, no_touch=True)
            assert [r["id"] for r in flat] == semantic.rank(persona, query, limit)
            compared += 1
    assert compared == 24


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[Persona, Query]]]:
    """A persona of the bundled sample, with its cached vectors (each is a server start)."""
    root = tmp_path_factory.mktemp("standin-sample")
    corpus = ingest.load_corpus(dataset.resolve_dataset("sample"), root)
    model = cache.list_models([cache.bundled_cache_dir()])[0]
    vectors = cache.VectorCache(root / "cache", model["fingerprint"], int(model["dim"]), model,
                                read_only_roots=[cache.bundled_cache_dir()])
    stores = store_mod.StoreCache(root / "stores")
    pairs = [p for p in corpus.pairs if not p.abstention][1:2]
    out = [(personas.build_persona(p, corpus, vectors, stores, str(model["fingerprint"]),
                                   None),
            personas.build_query(p, None, vectors, model)[0]) for p in pairs]
    return root / "cache", out


def test_over_mcp_the_sample_ranks_as_hybrid_and_conflicts_refuse(
        sample: tuple[Path, list[tuple[Persona, Query]]], tmp_path: Path) -> None:
    hybrid = HybridRetriever()
    env = mcp_clients.standin_env(sample[0])
    for n, (persona, query) in enumerate(sample[1]):
        sessions = list(zip(persona.session_ids, persona.texts, strict=True))
        (tmp_path / f"f{n}").mkdir()
        got, refused = mcp_clients.vipune_standin_ranking(
            tmp_path / f"f{n}", env, sessions, query.question, 10, force=True, hybrid=True,
            recency_weight=0.0, dates=persona.created_at)
        assert refused == []
        want = hybrid.rank(persona, query, 10)
        assert [i for i, _ in got] == want
        scores = dict(hybrid.last_scores or ())
        assert [s for _, s in got] == [scores[i] for i in want]
    # Conflict-aware (vipune's default): a session is refused when its cosine with one
    # already stored is at least 0.85, in the order stored.
    persona, query = sample[1][0]
    (tmp_path / "aware").mkdir()
    _, refused = mcp_clients.vipune_standin_ranking(
        tmp_path / "aware", env, list(zip(persona.session_ids, persona.texts, strict=True)),
        query.question, 10, force=False, recency_weight=0.0)
    kept: list[int] = []
    want_refused = []
    for i, sid in enumerate(persona.session_ids):
        if any(_cosine(persona.vectors[i], persona.vectors[j]) >= 0.85 for j in kept):
            want_refused.append((sid, "conflict"))
        else:
            kept.append(i)
    assert refused == want_refused and len(refused) >= 5


@pytest.mark.parametrize("above", [False, True])
def test_the_threshold_refuses_from_its_exact_value_on(
        synthetic_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        above: bool) -> None:
    """find_similar keeps cosine >= threshold (src/sqlite/search.rs @ c0344e8a, line 111):
    a threshold of exactly the pair's cosine refuses, the next float up stores."""
    cosine = vipune.cosine_similarity(DUPLICATE[2], SESSIONS[0][2])
    threshold = float(np.nextafter(cosine, 2.0)) if above else cosine
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(synthetic_cache))
    monkeypatch.setenv("RETRIEVAL_EVAL_MODEL_FINGERPRINT", FP)
    monkeypatch.setenv("VIPUNE_DATABASE_PATH", str(tmp_path / "t.db"))
    monkeypatch.setenv("VIPUNE_SIMILARITY_THRESHOLD", repr(threshold))
    server = standin.StandIn()
    server.store_memory(SESSIONS[0][1], {"session_id": "s1"})
    if above:
        assert server.store_memory(DUPLICATE[1], {"session_id": "s1b"})["status"] == "added"
    else:
        with pytest.raises(MCPError) as refused:
            server.store_memory(DUPLICATE[1], {"session_id": "s1b"})
        assert refused.value.data["conflicts"][0]["similarity"] == cosine


def test_supersedes_and_the_filters(synthetic_cache: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(synthetic_cache))
    monkeypatch.setenv("RETRIEVAL_EVAL_MODEL_FINGERPRINT", FP)
    monkeypatch.setenv("RETRIEVAL_EVAL_WORKDIR", str(tmp_path))
    monkeypatch.delenv("VIPUNE_DATABASE_PATH", raising=False)
    server = standin.StandIn()
    assert server.store.path == tmp_path / "vipune-standin.db"
    server.store_memory(SESSIONS[0][1], {"session_id": "s1"})
    server.store_memory(SESSIONS[1][1], {"session_id": "s2"}, memory_type="preference")
    with pytest.raises(MCPError, match="memory not found: nope"):
        server.store_memory(DUPLICATE[1], {"session_id": "s1b"}, supersedes="nope")
    assert server.store.ids == ["s1", "s2"]  # nothing stored by the refused call
    # Near s1, but a supersede is not conflict-checked.
    assert server.store_memory(DUPLICATE[1], {"session_id": "s1b"}, supersedes="s1") == {
        "id": "s1b", "status": "superseded"}

    def ids(**filters: Any) -> list[str]:
        found = server.search_memories(QUESTION, 10, recency_weight=0.0, no_touch=True,
                                       **filters)
        return sorted(r["id"] for r in found)

    assert ids() == ["s1", "s1b", "s2"]
    assert ids(statuses=["active"]) == ["s1b", "s2"]
    assert ids(memory_types=["preference"]) == ["s2"]
    assert ids(memory_types=["fact"], statuses=["superseded"]) == ["s1"]


def test_uuid_ids_as_vipune_names_them(synthetic_cache: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """VIPUNE_STANDIN_IDS=uuid: vipune's random ids; provenance comes back in metadata."""
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(synthetic_cache))
    monkeypatch.setenv("RETRIEVAL_EVAL_MODEL_FINGERPRINT", FP)
    monkeypatch.setenv("VIPUNE_DATABASE_PATH", str(tmp_path / "u.db"))
    monkeypatch.setenv("VIPUNE_STANDIN_IDS", "uuid")
    server = standin.StandIn()
    ids = [server.store_memory(text, {"session_id": sid})["id"] for sid, text, _, _ in SESSIONS]
    assert all(str(uuid.UUID(i)) == i for i in ids) and len(set(ids)) == len(SESSIONS)
    found = server.search_memories(QUESTION, 10, recency_weight=0.0, no_touch=True)
    back = {r["id"]: r["metadata"]["session_id"] for r in found}
    assert back == {i: sid for i, (sid, *_) in zip(ids, SESSIONS, strict=True)}
