"""``mem0``: mem0's open-source ``Memory`` with ``user_id`` = the persona, as a mem0 user
builds a memory.

``index``: a fresh ``Memory`` in the persona's workdir (its vector store: mem0's default,
qdrant in local mode, at ``<workdir>/mem0/qdrant``; its history database and its home
folder, ``MEM0_DIR``, there too; telemetry off), then each session, in time order, is added
as its messages (``{"role", "content"}``, one per turn) with ``metadata`` holding the session
id, its turn ids and its date:

- ``+infer:false`` (the default): mem0 stores each message as it is: one memory per
  non-system message, its text the message's content (without the role), embedded alone; the
  adapter keeps which turn each memory is (mem0's ``add`` answers them in message order).
- ``+infer:true``: mem0's LLM extracts facts from the session (the user's LLM settings,
  :mod:`.mem0_llm`); each fact names its session (mem0 does not say which turn).

A later run with the same settings (and the same persona key: texts and model) reopens the
memory its workdir holds instead of adding every session again.

``rank``: mem0's ``search(question, filters={"user_id": persona}, top_k=k)``, ``k`` from
``limit`` doubled until the memories cover ``limit`` sessions (or mem0 has no more above its
``threshold``, 0.1 by default, ``+threshold:``). Without spaCy and fastembed installed, mem0's
score is the semantic one alone (qdrant's cosine); with them it adds BM25 and entity boosts
(and fastembed downloads its BM25 model).

The embedder is :func:`run_embedder`, mem0's ``EmbeddingBase`` over ``persona.embed`` (the
question: as the run embedded it); ``+embedder:PROVIDER`` keeps mem0's own embedder of that
provider, configured as mem0 configures it (its environment variables).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import RetrievalEvalError, RetrieverError
from ..retrievers.base import Memory, Persona, Query
from .library import RUN, check_library, expect_query, library_error
from .mem0_llm import LlmMeter, llm_config, llm_settings
from .sessions import session_documents, until_covered

__all__ = ["DEFAULT_THRESHOLD", "Mem0Store", "import_mem0", "run_embedder"]

#: mem0's own default ``threshold`` of ``Memory.search`` (mem0/memory/main.py).
DEFAULT_THRESHOLD = 0.1
#: The folder of a persona's workdir that holds all mem0 writes.
FOLDER = "mem0"
#: The file that marks a finished ingest (its settings, each memory's turn): a later run
#: with the same settings reopens the memory instead of adding every session again.
DONE = "ingested.json"


def import_mem0(home: Path) -> Any:
    """``mem0.Memory``, imported with telemetry off and mem0's home folder (``MEM0_DIR``,
    read once, at import) at ``home``; both set again on an already imported mem0."""
    saved = {k: os.environ.get(k) for k in ("MEM0_DIR", "MEM0_TELEMETRY")}
    os.environ["MEM0_DIR"], os.environ["MEM0_TELEMETRY"] = str(home), "False"
    try:
        import mem0.memory.main as main
        import mem0.memory.setup as setup
        import mem0.memory.telemetry as telemetry
        from mem0 import Memory
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    telemetry.MEM0_TELEMETRY = False
    main.MEM0_TELEMETRY = False
    setup.mem0_dir = main.mem0_dir = str(home)  # config.json and migrations: under home
    return Memory


def run_embedder(persona: Persona) -> Any:
    """mem0's ``EmbeddingBase`` over ``persona.embed``; the question (``search`` of the text
    set by ``expect``) as the run embedded it."""
    from mem0.embeddings.base import EmbeddingBase

    class RunEmbedder(EmbeddingBase):  # type: ignore[misc]
        question: str | None = None
        vector: list[float] = []  # noqa: RUF012 - set per question by expect

        def expect(self, question: str, vector: np.ndarray) -> None:
            self.question = question
            self.vector = np.asarray(vector, np.float32).tolist()

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            if memory_action == "search" and text == self.question:
                return self.vector
            return persona.embed([str(text)])[0].astype(np.float32).tolist()  # type: ignore[no-any-return]

        def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
            return persona.embed([str(t) for t in texts]).astype(  # type: ignore[no-any-return]
                np.float32).tolist()

    return RunEmbedder()


class Mem0Store:
    """The ``mem0`` retriever (``+infer:``, ``+embedder:``, ``+vector_store:``,
    ``+threshold:``)."""

    name = "mem0"
    takes_settings = True

    def __init__(self, infer: bool | str = False, embedder: str = RUN,
                 vector_store: str = "qdrant", threshold: float = DEFAULT_THRESHOLD,
                 name: str = "mem0", settings: object = None) -> None:
        versions = check_library("mem0")
        self.name = name
        self.infer = infer in (True, "true")
        self.embedder, self.vector_store = str(embedder), str(vector_store)
        if not 0.0 <= float(threshold) <= 1.0:
            raise RetrievalEvalError(f"retriever {name!r}: threshold {threshold} is not in "
                                     "0..1; give +threshold:0.1 (mem0's default)")
        self.threshold = float(threshold)
        self.llm = llm_settings(settings)
        self.needs_vectors = self.embedder == RUN
        self.config: dict[str, Any] = {
            "infer": self.infer, "embedder": self.embedder, "vector_store": self.vector_store,
            "threshold": self.threshold,
            **({"llm": self.llm.label()} if self.infer else {}), **versions}
        self._held: dict[str, tuple[Any, Any, dict[str, tuple[str, str | None]]]] = {}
        self._costs: dict[str, dict[str, Any]] = {}

    def _memory(self, persona: Persona, folder: Path) -> Any:
        memory_class = import_mem0(folder / "home")
        return memory_class.from_config(self.memory_config(persona, folder))

    def memory_config(self, persona: Persona, folder: Path) -> dict[str, Any]:
        """mem0's config for this persona, every path under ``folder`` (a subclass may
        change it: docs/memory-libraries.md)."""
        dim = int(np.asarray(persona.vectors).shape[1]) if np.asarray(
            persona.vectors).ndim == 2 else None
        store: dict[str, Any] = {"collection_name": "memories"}
        if dim:
            store["embedding_model_dims"] = dim
        if self.vector_store == "qdrant":
            store.update(path=str(folder / "qdrant"))
        embedder: dict[str, Any] = {"provider": self.embedder, "config": {}}
        if self.embedder == RUN:  # built by mem0, then replaced: no call is ever made
            embedder = {"provider": "openai", "config": {"api_key": "unused-run-model"}}
        return {"vector_store": {"provider": self.vector_store, "config": store},
                "embedder": embedder, "llm": llm_config(self.llm, self.infer),
                "history_db_path": str(folder / "history.db")}

    def index(self, persona: Persona) -> None:
        if persona.workdir is None:
            raise RetrieverError(f"{self.name}: persona {persona.key[:12]} has no workdir")
        folder = persona.workdir / FOLDER
        kept = self._reopen(persona, folder)
        if kept is not None:
            self._held[persona.key] = kept
            self._costs[persona.key] = {}
            return
        shutil.rmtree(folder, ignore_errors=True)  # a fresh memory each ingest
        (folder / "home").mkdir(parents=True)
        meter = LlmMeter(self.llm)
        turn_of: dict[str, tuple[str, str | None]] = {}
        try:
            memory, embedding = self._open(persona, folder)
            if self.infer:
                meter.attach(memory.llm)
            docs = session_documents(persona)
            for doc in sorted(docs, key=lambda d: d.date):  # time order (stable)
                row = persona.session_ids.index(doc.session_id)
                turns = [dict(t) for t in persona.turns[row]]
                ids = [f"{doc.session_id}_{n}" for n in range(1, len(turns) + 1)]
                messages = [{"role": t["role"], "content": t["content"]} for t in turns]
                added = memory.add(messages, user_id=persona.key, infer=self.infer, metadata={
                    "session_id": doc.session_id, "turn_ids": ids, "date": doc.date})
                stored = [i for i, m in zip(ids, messages, strict=True)
                          if m["role"] != "system" and m["content"] is not None]
                for j, item in enumerate(added.get("results", [])):
                    turn = stored[j] if not self.infer and j < len(stored) else None
                    turn_of[str(item["id"])] = (doc.session_id, turn)
        except Exception as exc:
            if self.infer and _llm_failed(exc):
                raise meter.failure(self.name, persona.key[:12], exc) from None
            raise library_error(self.name, f"persona {persona.key[:12]}", exc) from None
        finally:
            self._costs[persona.key] = meter.record() if self.infer else {}
        (folder / DONE).write_text(json.dumps({"settings": self._fingerprint(),
                                               "turns": turn_of}), encoding="utf-8")
        self._held[persona.key] = (memory, embedding, turn_of)

    def _fingerprint(self) -> dict[str, Any]:
        """What an ingest depends on besides the persona (its key: its texts and model)."""
        return {"format": 1, "infer": self.infer, "embedder": self.embedder,
                "vector_store": self.vector_store, "mem0": self.config.get("mem0ai"),
                **({"llm": self.llm.label()} if self.infer else {})}

    def _open(self, persona: Persona, folder: Path) -> tuple[Any, Any]:
        memory = self._memory(persona, folder)
        embedding = memory.embedding_model
        if self.embedder == RUN:
            memory.embedding_model = embedding = run_embedder(persona)
        return memory, embedding

    def _reopen(self, persona: Persona, folder: Path
                ) -> tuple[Any, Any, dict[str, tuple[str, str | None]]] | None:
        """An earlier run's memory of this persona with the same settings, reopened (its
        LLM costs were that run's); None when there is none to reuse."""
        try:
            done = json.loads((folder / DONE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(done, dict) or done.get("settings") != self._fingerprint() or \
                not isinstance(done.get("turns"), dict):
            return None
        turn_of = {str(k): (str(v[0]), None if v[1] is None else str(v[1]))
                   for k, v in done["turns"].items()
                   if isinstance(v, list) and len(v) == 2}
        try:
            memory, embedding = self._open(persona, folder)
        except Exception:  # a damaged store: ingest again
            return None
        return memory, embedding, turn_of

    def ingest_costs(self, persona_key: str) -> dict[str, Any] | None:
        """The LLM calls and tokens of this persona's ``index`` (None: no LLM used)."""
        return self._costs.get(persona_key) or None

    def rank(self, persona: Persona, query: Query, limit: int) -> list[Memory]:
        memory, embedding, turn_of = self._held[persona.key]
        try:
            if self.embedder == RUN:
                expect_query(self.name, embedding, query.question, query.vector,
                             query.question_id)
            k = max(limit, 1)
            while True:
                found = memory.search(query.question, filters={"user_id": persona.key},
                                      top_k=k, threshold=self.threshold)["results"]
                got = self._memories(found, turn_of)
                sessions = {m.sessions[0] for m in got}
                if (len(sessions) >= limit and len(got) >= limit) or len(found) < k:
                    break
                k *= 2
        except Exception as exc:
            raise library_error(self.name, f"question {query.question_id}", exc) from None
        return until_covered(got, limit)

    @staticmethod
    def _memories(found: list[dict[str, Any]],
                  turn_of: dict[str, tuple[str, str | None]]) -> list[Memory]:
        out = []
        for item in found:
            sid, turn = turn_of.get(str(item["id"]), (None, None))
            if sid is None:
                sid = str((item.get("metadata") or {}).get("session_id"))
            out.append(Memory(str(item["id"]), float(item.get("score") or 0.0), (sid,),
                              (turn,) if turn else (), str(item.get("memory", ""))))
        return out

    def close(self) -> None:
        held, self._held = self._held, {}
        for memory, _, _ in held.values():
            for closing in (getattr(getattr(memory, "vector_store", None), "client", None),
                            getattr(memory, "db", None)):
                close = getattr(closing, "close", None)
                if callable(close):
                    with contextlib.suppress(Exception):  # at the end: nothing to do
                        close()


def _llm_failed(exc: BaseException) -> bool:
    """Whether mem0 raised for its LLM (its ``LLMError``, or the client's own error)."""
    seen: BaseException | None = exc
    while seen is not None:
        kind = type(seen)
        if kind.__name__ in ("LLMError", "APIConnectionError", "APITimeoutError",
                             "APIStatusError", "AuthenticationError", "RateLimitError") or \
                kind.__module__.startswith("openai"):
            return True
        seen = seen.__cause__
    return False
