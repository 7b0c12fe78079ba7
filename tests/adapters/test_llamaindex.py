"""The ``llamaindex`` adapter equals a direct use of LlamaIndex written here without it (the
same SentenceSplitter, embedder and vectors: the same nodes, scores and order, pair by pair,
ties aside, on the bundled sample and a generated set); its retriever grows ``similarity_top_k``
until ``limit`` sessions are covered; and ``llamaindex`` beside ``langchain`` at equal chunking:
the same chunks where both keep a session whole, and how they differ at 256 (tokens against
characters)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_retrieval_eval.adapters.langchain import chunk_documents
from pytest_retrieval_eval.adapters.llamaindex import LlamaIndexStore, nodes_of
from pytest_retrieval_eval.data.pairs import render_session
from pytest_retrieval_eval.retrievers import get_retriever
from pytest_retrieval_eval.retrievers.base import Memory, Persona, Query
from tests.support.adapter_personas import (
    generated_instances,
    hash_embed,
    personas,
    sample_instances,
)

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.node_parser import SentenceSplitter


class HashEmbedding(BaseEmbedding):  # type: ignore[misc]
    def _get_text_embedding(self, text: str) -> list[float]:
        return hash_embed([text])[0].tolist()  # type: ignore[no-any-return]

    def _get_query_embedding(self, query: str) -> list[float]:
        return hash_embed([query])[0].tolist()  # type: ignore[no-any-return]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def direct(persona: Persona, query: Query, chunk_size: int, chunk_overlap: int
           ) -> list[tuple[str, str, float]]:
    """LlamaIndex as its user writes it: (session, node text, score) of every node."""
    docs = [Document(text=render_session(t), metadata={"session": sid},
                     excluded_embed_metadata_keys=["session"],
                     excluded_llm_metadata_keys=["session"])
            for sid, t in zip(persona.session_ids, persona.turns, strict=True)]
    index = VectorStoreIndex.from_documents(
        docs, embed_model=HashEmbedding(),
        transformations=[SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)])
    total = len(index.docstore.docs)
    return [(n.node.metadata["session"], n.node.get_content(), n.score)
            for n in index.as_retriever(similarity_top_k=total).retrieve(query.question)]


def same_ties_aside(got: list[Memory], want: list[tuple[str, str, float]]) -> None:
    """Equal scores in order; the same (session, text) at each score (within a tie, any
    order: the library's heap breaks ties by node id)."""
    assert [m.score for m in got] == pytest.approx([w[2] for w in want[:len(got)]], abs=1e-12)
    for m in got:
        assert any((m.sessions[0], m.text) == w[:2] and abs(m.score - w[2]) < 1e-12  # type: ignore[operator]
                   for w in want), m.id


@pytest.mark.parametrize(("source", "chunk_size", "chunk_overlap"), [
    ("sample", 1024, 200), ("sample", 256, 32), ("generated", 128, 0)])
def test_the_adapter_ranks_as_llamaindex_used_directly(source: str, chunk_size: int,
                                                       chunk_overlap: int) -> None:
    instances = sample_instances(5) if source == "sample" else generated_instances(3)
    store = get_retriever(f"llamaindex+chunk_size:{chunk_size}+chunk_overlap:{chunk_overlap}")
    assert isinstance(store, LlamaIndexStore)
    for persona, query in personas(instances):
        store.index(persona)
        want = direct(persona, query, chunk_size, chunk_overlap)
        for limit in (1, 5, 10):
            got = store.rank(persona, query, limit)
            assert len({m.sessions[0] for m in got}) == min(limit, len(persona.session_ids))
            same_ties_aside(got, want)
        for m in store.rank(persona, query, 10):  # a node's turns: its characters' turns
            row = persona.session_ids.index(m.sessions[0])
            lines = [f"{t['role']}: {t['content']}" for t in persona.turns[row]]
            numbers = [int(t.rpartition("_")[2]) for t in m.turns]
            assert m.text in "\n".join(lines[numbers[0] - 1:numbers[-1]])
    store.close()


def test_similarity_top_k_grows_until_limit_sessions_are_covered() -> None:
    """A session of many nodes fills the first k: the retriever asks again with 2k."""
    asked: list[int] = []
    persona, query = personas(sample_instances(1))[0]
    store = get_retriever("llamaindex+chunk_size:128+chunk_overlap:0")
    store.index(persona)  # type: ignore[attr-defined]
    index, total = store._indexes[persona.key]  # type: ignore[attr-defined]
    original = index.as_retriever

    def spy(**kwargs: Any) -> Any:
        asked.append(kwargs["similarity_top_k"])
        return original(**kwargs)

    index.as_retriever = spy
    got = store.rank(persona, query, 10)
    assert len({m.sessions[0] for m in got}) == 10
    assert asked[0] == 10 and asked == [min(10 * 2 ** i, total) for i in range(len(asked))]
    assert len(asked) > 1  # the first 10 nodes covered fewer than 10 sessions


def test_llamaindex_and_langchain_at_equal_chunking() -> None:
    """A chunk large enough for any session: both keep each session whole, the same chunks
    (the session's text). At 256 they differ by their unit: LangChain's chunk_size counts
    characters, LlamaIndex's tokens (cl100k_base), so LlamaIndex's nodes run past 256
    characters and LangChain makes more, shorter chunks."""
    for persona, _ in personas(sample_instances(3)):
        whole_lc = [c.page_content for c in chunk_documents(persona, 10**6, 0)]
        whole_li = [n.get_content() for n in nodes_of(persona, 10**6, 0)]
        texts = [render_session(t) for t in persona.turns]
        assert whole_lc == whole_li == [t.strip() for t in texts]
        lc = [c.page_content for c in chunk_documents(persona, 256, 0)]
        li = [n.get_content() for n in nodes_of(persona, 256, 0)]
        assert max(map(len, lc)) <= 256 < max(map(len, li))
        assert len(lc) > len(li)
