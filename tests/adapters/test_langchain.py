"""The ``langchain`` adapter equals a direct use of LangChain written here without it: the
same splitter, embedder and vectors give the same chunks, scores and order, pair by pair, on
the bundled sample and on a generated set; each chunk's turns are the turns its characters
cover."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.adapters.langchain import LangChainStore
from pytest_retrieval_eval.data.pairs import render_session
from pytest_retrieval_eval.errors import RetrievalEvalError, RetrieverError
from pytest_retrieval_eval.retrievers import get_retriever
from pytest_retrieval_eval.retrievers.base import Memory, Persona, Query
from tests.support.adapter_personas import (
    generated_instances,
    hash_embed,
    personas,
    sample_instances,
)

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_text_splitters")

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter


class HashEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return hash_embed(texts).tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return hash_embed([text])[0].tolist()  # type: ignore[no-any-return]


def direct(persona: Persona, query: Query, chunk_size: int, chunk_overlap: int
           ) -> list[tuple[str, str, float]]:
    """LangChain as its user writes it: (session, chunk text, score), best first."""
    splitter = RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    docs = splitter.create_documents(
        [render_session(t) for t in persona.turns],
        metadatas=[{"session": sid} for sid in persona.session_ids])
    store = InMemoryVectorStore(HashEmbeddings())
    store.add_documents(docs)
    return [(d.metadata["session"], d.page_content, s)
            for d, s in store.similarity_search_with_score(query.question, k=len(docs))]


def covers(persona: Persona, memory: Memory) -> bool:
    """The memory's text lies within its turns' lines, and not within fewer of them."""
    row = persona.session_ids.index(memory.sessions[0])
    numbers = [int(t.rpartition("_")[2]) for t in memory.turns]
    lines = [f"{t['role']}: {t['content']}" for t in persona.turns[row]]
    assert numbers == list(range(numbers[0], numbers[-1] + 1))

    def within(a: int, b: int) -> bool:
        return memory.text is not None and memory.text in "\n".join(lines[a - 1:b])
    first, last = numbers[0], numbers[-1]
    return within(first, last) and (first == last or (
        not within(first + 1, last) and not within(first, last - 1)))


@pytest.mark.parametrize(("source", "chunk_size", "chunk_overlap"), [
    ("sample", 4000, 200), ("sample", 256, 32), ("generated", 300, 0),
    ("generated", 4000, 200)])
def test_the_adapter_ranks_as_langchain_used_directly(source: str, chunk_size: int,
                                                      chunk_overlap: int) -> None:
    instances = sample_instances(6) if source == "sample" else generated_instances(3)
    store = get_retriever(f"langchain+chunk_size:{chunk_size}+chunk_overlap:{chunk_overlap}")
    assert isinstance(store, LangChainStore)
    for persona, query in personas(instances):
        store.index(persona)
        want = direct(persona, query, chunk_size, chunk_overlap)
        for limit in (1, 5, 10):
            got = store.rank(persona, query, limit)
            assert len({m.sessions[0] for m in got}) == min(limit, len(persona.session_ids))
            assert [(m.sessions[0], m.text) for m in got] == [w[:2] for w in want[:len(got)]]
            assert [m.score for m in got] == [w[2] for w in want[:len(got)]]
        assert all(covers(persona, m) for m in store.rank(persona, query, 10))
    store.close()


def test_the_knobs_and_the_header_config() -> None:
    plain = get_retriever("langchain")
    assert isinstance(plain, LangChainStore)
    assert (plain.chunk_size, plain.chunk_overlap) == (4000, 200)  # LangChain's own defaults
    assert plain.config["embedder"] == "run" and "langchain-core" in plain.config
    with pytest.raises(RetrievalEvalError, match="chunk_overlap 300 is not below chunk_size"):
        get_retriever("langchain+chunk_size:300+chunk_overlap:300")
    with pytest.raises(RetrievalEvalError, match=r"chunk_size:x is not allowed"):
        get_retriever("langchain+chunk_size:x")


def test_a_named_embedder_of_langchain_embeds_instead_of_the_run(tmp_path: Any) -> None:
    store = get_retriever("langchain+embedder:tests.adapters.test_langchain.HashEmbeddings")
    assert store.needs_vectors is False
    persona, query = personas(generated_instances(1))[0]
    persona = Persona(**{**persona.__dict__, "text_vectors": None})  # the run's never asked
    query = Query(**{**query.__dict__, "vector": None})
    store.index(persona)  # type: ignore[attr-defined]
    got = store.rank(persona, query, 5)
    want = direct(persona, query, 4000, 200)
    assert [(m.sessions[0], m.text, m.score) for m in got] == want[:len(got)]  # type: ignore[union-attr]


def test_a_library_failure_is_one_line_with_its_type() -> None:
    def broken(texts: Any) -> np.ndarray:
        raise ValueError("boom\nsecond line")

    persona, _ = personas(generated_instances(1))[0]
    persona = Persona(**{**persona.__dict__, "text_vectors": broken})
    store = get_retriever("langchain")
    with pytest.raises(RetrieverError) as info:
        store.index(persona)  # type: ignore[attr-defined]
    assert str(info.value) == (f"langchain: persona {persona.key[:12]}: the library raised "
                               "ValueError: boom second line")


def test_a_subclass_with_its_own_splitter_as_the_docs_conftest_writes_it() -> None:
    """docs/memory-libraries.md's conftest: LineChunks splits at lines, 1000 characters; a
    splitter that drops text (CharacterTextSplitter collapses blank lines) is one line."""
    from langchain_text_splitters import CharacterTextSplitter

    class LineChunks(LangChainStore):
        def splitter(self) -> Any:
            return RecursiveCharacterTextSplitter(separators=["\n", " ", ""], chunk_size=1000,
                                                  chunk_overlap=0, add_start_index=True)

    class Dropping(LangChainStore):
        def splitter(self) -> Any:
            return CharacterTextSplitter(separator="\n", chunk_size=1000, chunk_overlap=0,
                                         add_start_index=True)

    with pytest.raises(RetrieverError, match=r"is not a piece of the session's text"):
        Dropping().index(personas(generated_instances(1))[0][0])

    store = LineChunks()
    for persona, query in personas(generated_instances(2)):
        store.index(persona)
        got = store.rank(persona, query, 5)
        assert got and all(covers(persona, m) for m in got)
        assert all(len(m.text or "") <= 1000 or "\n" not in (m.text or "") for m in got)
