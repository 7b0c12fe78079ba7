"""``llamaindex``: a LlamaIndex ``VectorStoreIndex`` over one ``Document`` per session, split by
LlamaIndex's own ``SentenceSplitter``, as a LlamaIndex user builds a memory.

``index``: each session is a ``Document`` (its turns ``role: content``, one a line,
:mod:`.sessions`) with ``session_id`` and ``date`` in its metadata; ``SentenceSplitter(
chunk_size, chunk_overlap)`` (LlamaIndex's defaults: 1024 and 200 tokens of its own tokenizer,
tiktoken's ``cl100k_base`` from the copy the library ships) makes its nodes, each keeping in its
metadata the turns its characters cover (from the node's own ``start_char_idx`` and
``end_char_idx``); the nodes, ids ``<session>#<j>``, go into a ``VectorStoreIndex`` (its
in-memory ``SimpleVectorStore``). The provenance keys are excluded from what is embedded
(``excluded_embed_metadata_keys``), so a node embeds its text alone, as ``semantic`` does a
session's.

``rank``: the index's own retriever (``as_retriever(similarity_top_k=k)``) with the question as
the run embedded it (``QueryBundle(embedding=...)``), ``k`` from ``limit`` doubled until the
nodes cover ``limit`` sessions (or hold every node).

The embedder is :class:`RunEmbedding`, LlamaIndex's ``BaseEmbedding`` over ``persona.embed``;
``+embedder:pkg.module.Class`` names a ``BaseEmbedding`` class of the user's (built with no
arguments: its own settings, its own network), which then embeds the question too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import RetrieverError
from ..retrievers.base import Memory, Persona, Query
from .library import RUN, ChunkingStore, library_error, user_class
from .sessions import session_documents, until_covered

__all__ = ["DEFAULT_CHUNK_OVERLAP", "DEFAULT_CHUNK_SIZE", "PROVENANCE", "LlamaIndexStore",
           "nodes_of", "retrieve_covering", "run_embedding"]

#: ``SentenceSplitter``'s own defaults (llama_index/core/constants.py DEFAULT_CHUNK_SIZE,
#: node_parser/text/sentence.py SENTENCE_CHUNK_OVERLAP), in tokens.
DEFAULT_CHUNK_SIZE = 1024
DEFAULT_CHUNK_OVERLAP = 200
#: The metadata keys that carry provenance, never embedded nor shown to an LLM.
PROVENANCE = ["session_id", "date", "turns"]


def run_embedding(persona: Persona) -> Any:
    """A LlamaIndex ``BaseEmbedding`` whose texts are embedded by ``persona.embed`` (the run's
    model and cache); the question comes as the run embedded it, in the ``QueryBundle``."""
    from llama_index.core.base.embeddings.base import BaseEmbedding

    def embed(texts: list[str]) -> list[list[float]]:
        return persona.embed(texts).astype(np.float32).tolist()  # type: ignore[no-any-return]

    def no_query(query: str) -> list[float]:
        raise RetrieverError("llamaindex: the question was to come with the run's vector")

    class RunEmbedding(BaseEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            return embed([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return embed(texts)

        async def _aget_text_embedding(self, text: str) -> list[float]:
            return embed([text])[0]

        def _get_query_embedding(self, query: str) -> list[float]:
            return no_query(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return no_query(query)

    # one persona.embed call per batch: a batch as large as a persona's nodes
    return RunEmbedding(model_name="run", embed_batch_size=2048)


def nodes_of(persona: Persona, chunk_size: int, chunk_overlap: int,
             splitter: Any = None) -> list[Any]:
    """The persona's nodes as :class:`LlamaIndexStore` makes them: ids ``<session>#<j>``,
    metadata ``session_id``, ``date`` and ``turns`` (excluded from embedding). ``splitter``:
    any LlamaIndex node parser (default: ``SentenceSplitter`` of these sizes)."""
    from llama_index.core import Document

    if splitter is None:
        from llama_index.core.node_parser import SentenceSplitter

        splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    out: list[Any] = []
    for doc in session_documents(persona):
        document = Document(text=doc.text, id_=doc.session_id,
                            metadata={"session_id": doc.session_id, "date": doc.date},
                            excluded_embed_metadata_keys=list(PROVENANCE),
                            excluded_llm_metadata_keys=list(PROVENANCE))
        for j, node in enumerate(splitter.get_nodes_from_documents([document])):
            start = getattr(node, "start_char_idx", None)
            end = getattr(node, "end_char_idx", None)
            start = 0 if start is None else int(start)
            end = len(doc.text) if end is None else int(end)
            node.metadata["turns"] = list(doc.turns(start, end))
            node.id_ = f"{doc.session_id}#{j}"
            out.append(node)
    return out


def retrieve_covering(index: Any, bundle: Any, limit: int, total: int) -> list[Any]:
    """The index's retriever's nodes, ``similarity_top_k`` grown from ``limit`` (doubled)
    until they cover ``limit`` sessions and number ``limit``, or are all ``total``."""
    k = min(max(limit, 1), total)
    while True:
        found = index.as_retriever(similarity_top_k=k).retrieve(bundle)
        sessions = {n.node.metadata["session_id"] for n in found}
        if (len(sessions) >= limit and len(found) >= limit) or k >= total:
            return list(found)
        k = min(2 * k, total)


class LlamaIndexStore(ChunkingStore):
    """The ``llamaindex`` retriever (``+chunk_size:``, ``+chunk_overlap:``, ``+embedder:``)."""

    name = "llamaindex"
    library = "llamaindex"

    def __init__(self, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 chunk_overlap: int = DEFAULT_CHUNK_OVERLAP, embedder: str = RUN,
                 name: str = "llamaindex") -> None:
        super().__init__(chunk_size, chunk_overlap, embedder, name)
        self._indexes: dict[str, tuple[Any, int]] = {}

    def splitter(self) -> Any:
        """The node parser (a subclass returns its own: docs/memory-libraries.md); None:
        ``SentenceSplitter`` of the knobs."""
        return None

    def index(self, persona: Persona) -> None:
        try:
            from llama_index.core import VectorStoreIndex

            nodes = nodes_of(persona, self.chunk_size, self.chunk_overlap, self.splitter())
            model = (run_embedding(persona) if self.embedder == RUN
                     else user_class(self.name, self.embedder)())
            index = VectorStoreIndex(nodes, embed_model=model)
        except Exception as exc:
            raise library_error(self.name, f"persona {persona.key[:12]}", exc) from None
        self._indexes[persona.key] = (index, len(nodes))

    def rank(self, persona: Persona, query: Query, limit: int) -> list[Memory]:
        index, total = self._indexes[persona.key]
        if not total:
            return []
        try:
            from llama_index.core import QueryBundle

            if self.embedder == RUN:
                if query.vector is None:
                    raise RetrieverError(f"{self.name}: question {query.question_id} has no "
                                         "query vector; run the model lane once")
                bundle = QueryBundle(query.question, embedding=np.asarray(
                    query.vector, np.float32).tolist())
            else:
                bundle = QueryBundle(query.question)
            found = retrieve_covering(index, bundle, limit, total)
        except Exception as exc:
            raise library_error(self.name, f"question {query.question_id}", exc) from None
        return until_covered(memories_of(found), limit)

    def close(self) -> None:
        self._indexes.clear()


def memories_of(found: Sequence[Any]) -> list[Memory]:
    """LlamaIndex's ``NodeWithScore`` results as memories with their turn provenance."""
    return [Memory(str(n.node.id_), float(n.score or 0.0),
                   (str(n.node.metadata["session_id"]),), tuple(n.node.metadata["turns"]),
                   n.node.get_content()) for n in found]
