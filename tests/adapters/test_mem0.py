"""The ``mem0`` adapter: ``+infer:false`` equals an exact cosine over the very messages mem0
stores (each message's content, embedded alone), ties aside, and equals mem0 used directly;
``+infer:true`` runs against an OpenAI-compatible stand-in on 127.0.0.1, its calls and tokens
counted; an LLM that fails or times out is one line naming the provider and the fix; mem0
writes nothing outside the persona's workdir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.adapters.mem0 import Mem0Store, import_mem0
from pytest_retrieval_eval.errors import RetrieverError
from pytest_retrieval_eval.retrievers import get_retriever
from pytest_retrieval_eval.retrievers.base import Memory, Persona
from tests.support.adapter_personas import generated_instances, hash_embed, personas
from tests.support.llm_standin import llm_standin

pytest.importorskip("mem0")
pytest.importorskip("qdrant_client")
ROOT = Path(__file__).resolve().parents[2]


def hybrid_off() -> bool:
    """mem0 scores by semantic similarity alone without spaCy (entities) and fastembed
    (BM25); with them it adds their boosts."""
    import importlib.util

    return importlib.util.find_spec("spacy") is None and \
        importlib.util.find_spec("fastembed") is None


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    return personas(generated_instances(2), tmp_path_factory.mktemp("mem0"))


def exact(persona: Persona, question_vector: np.ndarray, threshold: float
          ) -> list[tuple[str, float]]:
    """(turn id, cosine) of every stored message, float64 cosine of the float32 vectors,
    best first, those under mem0's threshold left out."""
    ids, texts = [], []
    for sid, turns in zip(persona.session_ids, persona.turns, strict=True):
        for n, turn in enumerate(turns, start=1):
            if turn["role"] != "system":
                ids.append(f"{sid}_{n}")
                texts.append(turn["content"])
    vectors = hash_embed(texts).astype(np.float64)
    q = question_vector.astype(np.float64)
    sims = vectors @ q / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(q))
    order = np.argsort(-sims, kind="stable")
    return [(ids[i], float(sims[i])) for i in order if sims[i] >= threshold]


def same_ties_aside(got: list[Memory], want: list[tuple[str, float]]) -> None:
    """Scores equal in order (qdrant computes in float32); at each score the same turns."""
    assert [m.score for m in got] == pytest.approx([w[1] for w in want[:len(got)]], abs=2e-6)
    for m in got:
        assert any(m.turns == (w[0],) and abs(m.score - w[1]) < 2e-6  # type: ignore[operator]
                   for w in want), m


@pytest.mark.skipif(not hybrid_off(), reason="spaCy or fastembed installed: mem0 boosts scores")
def test_infer_false_equals_an_exact_cosine_over_the_stored_messages(small: list[Any]) -> None:
    store = get_retriever("mem0")
    assert isinstance(store, Mem0Store) and store.infer is False
    try:
        for persona, query in small:
            store.index(persona)
            want = exact(persona, np.asarray(query.vector), 0.1)
            for limit in (1, 5, 10):
                got = store.rank(persona, query, limit)
                above = {w[0].rpartition("_")[0] for w in want}  # mem0's threshold cuts
                assert len({m.sessions[0] for m in got}) == min(limit, len(above))
                same_ties_aside(got, want)
                assert all(m.text == persona.turns[persona.session_ids.index(m.sessions[0])][
                    int(m.turns[0].rpartition("_")[2]) - 1]["content"] for m in got)
    finally:
        store.close()


@pytest.mark.skipif(not hybrid_off(), reason="spaCy or fastembed installed: mem0 boosts scores")
def test_the_adapter_ranks_as_mem0_used_directly(small: list[Any], tmp_path: Path) -> None:
    """mem0 as its user writes it: a Memory with an embedder of mem0's interface, each session
    added with user_id, search; the same texts and scores as the adapter's, ties aside."""
    from mem0.embeddings.base import EmbeddingBase

    class HashEmbedder(EmbeddingBase):  # type: ignore[misc]
        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            return hash_embed([str(text)])[0].tolist()  # type: ignore[no-any-return]

    memory_class = import_mem0(tmp_path / "home")
    store = get_retriever("mem0")
    try:
        for i, (persona, query) in enumerate(small):
            direct = memory_class.from_config({
                "vector_store": {"provider": "qdrant", "config": {
                    "path": str(tmp_path / f"q{i}"), "embedding_model_dims": 32}},
                "embedder": {"provider": "openai", "config": {"api_key": "unused"}},
                "llm": {"provider": "openai", "config": {"api_key": "unused"}},
                "history_db_path": str(tmp_path / f"h{i}.db")})
            direct.embedding_model = HashEmbedder()
            for sid, turns in sorted(zip(persona.session_ids, persona.turns, strict=True),
                                     key=lambda x: persona.created_at[
                                         persona.session_ids.index(x[0])]):
                direct.add([dict(t) for t in turns], user_id="u", infer=False,
                           metadata={"session": sid})
            want = [(r["memory"], r["score"]) for r in direct.search(
                query.question, filters={"user_id": "u"}, top_k=1000)["results"]]
            direct.vector_store.client.close()
            store.index(persona)
            got = store.rank(persona, query, 10)
            # qdrant's float32 arithmetic moves a score in its 8th digit between collections
            assert [m.score for m in got] == pytest.approx([w[1] for w in want[:len(got)]],
                                                           abs=1e-6)
            assert all(any(m.text == w[0] and abs(m.score - w[1]) < 1e-6  # type: ignore[operator]
                           for w in want) for m in got)
    finally:
        store.close()


def _settings(url: str, timeout: float = 30.0) -> Any:
    return SimpleNamespace(llm="openai:standin-model", llm_base_url=url, llm_timeout=timeout)


def test_infer_true_against_the_standin_counts_its_calls_and_tokens(
        small: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "standin-key")
    persona, query = small[0]
    with llm_standin() as (url, tally):
        store = Mem0Store(infer=True, name="mem0+infer:true", settings=_settings(url))
        try:
            store.index(persona)
            costs = store.ingest_costs(persona.key)
            got = store.rank(persona, query, 5)
        finally:
            store.close()
    assert costs is not None
    assert (costs["calls"], costs["prompt_tokens"], costs["completion_tokens"]) == (
        tally.calls, tally.prompt_tokens, tally.completion_tokens)
    assert tally.calls == len(persona.session_ids)  # one extraction per session added
    assert costs["provider"] == f"openai:standin-model at {url}"
    facts = {f["text"] for a in tally.answers for f in json.loads(a)["memory"]}
    assert facts
    assert got and all(m.text in facts and not m.turns and len(m.sessions) == 1 for m in got)


@pytest.mark.parametrize(("mode", "timeout", "said"), [
    ("fail", 30.0, "InternalServerError"), ("slow", 0.5, "APITimeoutError|ReadTimeout: timed out"),
    ("nokey", 30.0, "OpenAIError: Missing credentials")])
def test_an_llm_that_fails_is_one_line_naming_the_provider_and_the_fix(
        small: list[Any], mode: str, timeout: float, said: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "standin-key")
    persona, _ = small[1]
    if mode == "nokey":
        monkeypatch.delenv("OPENAI_API_KEY")
    with llm_standin(mode, delay=3.0) as (url, _):
        store = Mem0Store(infer=True, settings=_settings(url, timeout))
        with pytest.raises(RetrieverError) as info:
            store.index(persona)
        store.close()
    line = str(info.value)
    assert "\n" not in line
    head = (f"mem0: persona {persona.key[:12]}: the LLM (openai:standin-model at {url}) "
            "failed: ")
    assert line.startswith(head)
    # a timeout reaches mem0 as openai's APITimeoutError or as the transport's own
    assert any(line[len(head):].startswith(cause) for cause in said.split("|")), line
    assert line.endswith("--retrieval-eval-llm-base-url, or measure +infer:false")


PROBE = """
import os, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.support.adapter_personas import generated_instances, personas
from pytest_retrieval_eval.retrievers import get_retriever
(persona, query), = personas(generated_instances(1), Path({work!r}))
store = get_retriever("mem0")
store.index(persona)
assert store.rank(persona, query, 3)
store.close()
"""


def test_mem0_writes_nothing_outside_the_workdir(tmp_path: Path) -> None:
    """A fresh process whose HOME and TMPDIR are empty folders: after index and rank, they
    are still empty, and every file mem0 wrote is under the persona's workdir."""
    home, tmp, work = tmp_path / "home", tmp_path / "tmp", tmp_path / "work"
    for folder in (home, tmp, work):
        folder.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    env.pop("MEM0_DIR", None)
    script = textwrap.dedent(PROBE.format(root=str(ROOT), work=str(work)))
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=240,
                   capture_output=True)
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []
    written = [p.relative_to(work) for p in work.rglob("*") if p.is_file()]
    assert written and all(p.parts[1] == "mem0" for p in written)
    assert any(p.parts[2] == "qdrant" for p in written)


def test_a_later_run_reopens_the_memory_its_workdir_holds(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (persona, query), = personas(generated_instances(1, sessions=6), tmp_path)
    first = get_retriever("mem0")
    first.index(persona)  # type: ignore[attr-defined]
    want = first.rank(persona, query, 5)
    first.close()  # type: ignore[attr-defined]
    assert (persona.workdir / "mem0" / "ingested.json").is_file()  # type: ignore[operator]
    memory_class = import_mem0(tmp_path / "unused")

    def no_add(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("added again")

    monkeypatch.setattr(memory_class, "add", no_add)
    again = get_retriever("mem0")
    again.index(persona)  # type: ignore[attr-defined]
    got = again.rank(persona, query, 5)
    assert [(m.id, m.turns, m.text) for m in got] == [(m.id, m.turns, m.text) for m in want]
    assert [m.score for m in got] == pytest.approx([m.score for m in want], abs=1e-6)
    again.close()  # type: ignore[attr-defined]
    other = Mem0Store(threshold=0.1, vector_store="qdrant", embedder="run", infer=False)
    other._fingerprint = lambda: {"format": 0}  # type: ignore[method-assign]
    with pytest.raises(RetrieverError, match="AssertionError: added again"):
        other.index(persona)  # other settings: ingested again
