"""``langchain``: LangChain's ``InMemoryVectorStore`` over the chunks of its
``RecursiveCharacterTextSplitter``, as a LangChain user builds a memory.

``index``: each session becomes one document (its turns ``role: content``, one a line,
:mod:`.sessions`), split by ``RecursiveCharacterTextSplitter(chunk_size, chunk_overlap,
add_start_index=True)`` (LangChain's defaults: 4000 and 200 characters); each chunk keeps in
its metadata its session, its date and the turns its characters cover (from the splitter's own
``start_index``), and is added to an ``InMemoryVectorStore`` with the id ``<session>#<j>``.
``rank``: the store's ``similarity_search_with_score`` over every chunk (its cosine and its
order, ties included), read until ``limit`` sessions are covered.

The embedder is :class:`RunEmbeddings`, LangChain's ``Embeddings`` interface over the run's
model: documents through ``persona.embed`` (the run's vector cache), the question as the run
embedded it (``query.vector``). ``+embedder:pkg.module.Class`` names a LangChain embeddings
class of the user's instead (built with no arguments: its own settings, its own network).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import RetrieverError
from ..retrievers.base import Memory, Persona, Query
from .library import RUN, ChunkingStore, expect_query, library_error, user_class
from .sessions import session_documents, until_covered

__all__ = ["DEFAULT_CHUNK_OVERLAP", "DEFAULT_CHUNK_SIZE", "LangChainStore", "chunk_documents",
           "run_embeddings", "user_class"]

#: ``RecursiveCharacterTextSplitter``'s own defaults (langchain_text_splitters/base.py,
#: ``TextSplitter.__init__``), in characters.
DEFAULT_CHUNK_SIZE = 4000
DEFAULT_CHUNK_OVERLAP = 200
def run_embeddings(persona: Persona) -> Any:
    """A LangChain ``Embeddings`` over the run's model (:class:`RunEmbeddings`)."""
    from langchain_core.embeddings import Embeddings

    class RunEmbeddings(Embeddings):
        """Documents by ``persona.embed`` (the run's model and cache); the query as the run
        embedded it, set by :meth:`expect` before each search."""

        def __init__(self) -> None:
            self.question: str | None = None
            self.vector: list[float] = []

        def expect(self, question: str, vector: np.ndarray) -> None:
            self.question, self.vector = question, np.asarray(vector, np.float32).tolist()

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return persona.embed(texts).astype(np.float32).tolist()  # type: ignore[no-any-return]

        def embed_query(self, text: str) -> list[float]:
            if text != self.question:
                raise RetrieverError("langchain: a query other than the question was embedded")
            return self.vector

    return RunEmbeddings()


def chunk_documents(persona: Persona, chunk_size: int, chunk_overlap: int,
                    splitter: Any = None) -> list[Any]:
    """The persona's sessions split as :class:`LangChainStore` splits them: LangChain
    ``Document`` chunks, each with ``id`` ``<session>#<j>`` and metadata ``session_id``,
    ``date``, ``start_index`` and ``turns``. ``splitter``: any LangChain text splitter made
    with ``add_start_index=True`` (default: ``RecursiveCharacterTextSplitter`` of these
    sizes)."""
    if splitter is None:
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter(
            chunk_size=chunk_size, chunk_overlap=chunk_overlap, add_start_index=True)
    out: list[Any] = []
    for doc in session_documents(persona):
        chunks = splitter.create_documents([doc.text], metadatas=[
            {"session_id": doc.session_id, "date": doc.date}])
        for j, chunk in enumerate(chunks):
            start = int(chunk.metadata.get("start_index", -1))
            if start < 0 or doc.text[start:start + len(chunk.page_content)] != \
                    chunk.page_content:
                raise RetrieverError(
                    f"langchain: a chunk of session {doc.session_id} is not a piece of the "
                    "session's text, so the turns it covers cannot be named; give a splitter "
                    "that keeps the text and says where (add_start_index=True, separators "
                    "kept, as RecursiveCharacterTextSplitter does)")
            chunk.metadata["turns"] = list(doc.turns(start, start + len(chunk.page_content)))
            chunk.id = f"{doc.session_id}#{j}"
            out.append(chunk)
    return out


class LangChainStore(ChunkingStore):
    """The ``langchain`` retriever (``+chunk_size:``, ``+chunk_overlap:``, ``+embedder:``)."""

    name = "langchain"
    library = "langchain"

    def __init__(self, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 chunk_overlap: int = DEFAULT_CHUNK_OVERLAP, embedder: str = RUN,
                 name: str = "langchain") -> None:
        super().__init__(chunk_size, chunk_overlap, embedder, name)
        self._stores: dict[str, tuple[Any, Any, int]] = {}

    def splitter(self) -> Any:
        """The text splitter (a subclass returns its own, made with ``add_start_index=True``:
        docs/memory-libraries.md); None: ``RecursiveCharacterTextSplitter`` of the knobs."""
        return None

    def index(self, persona: Persona) -> None:
        try:
            from langchain_core.vectorstores import InMemoryVectorStore

            chunks = chunk_documents(persona, self.chunk_size, self.chunk_overlap,
                                     self.splitter())
            embedding = (run_embeddings(persona) if self.embedder == RUN
                         else user_class(self.name, self.embedder)())
            store = InMemoryVectorStore(embedding)
            if chunks:
                store.add_documents(chunks)
        except Exception as exc:
            raise library_error(self.name, f"persona {persona.key[:12]}", exc) from None
        self._stores[persona.key] = (store, embedding, len(chunks))

    def rank(self, persona: Persona, query: Query, limit: int) -> list[Memory]:
        store, embedding, n = self._stores[persona.key]
        try:
            if self.embedder == RUN:
                expect_query(self.name, embedding, query.question, query.vector,
                             query.question_id)
            found = store.similarity_search_with_score(query.question, k=n) if n else []
        except Exception as exc:
            raise library_error(self.name, f"question {query.question_id}", exc) from None
        return until_covered(memories_of(found), limit)

    def close(self) -> None:
        self._stores.clear()


def memories_of(found: Sequence[tuple[Any, float]]) -> list[Memory]:
    """LangChain's ``(Document, score)`` results as memories with their turn provenance."""
    return [Memory(str(doc.id), float(score), (str(doc.metadata["session_id"]),),
                   tuple(doc.metadata["turns"]), doc.page_content) for doc, score in found]
