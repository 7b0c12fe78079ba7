"""The per-pair pipeline: what one (pair, retriever) item does, step by step.

:class:`PairRun` walks one item top to bottom (:meth:`PairRun.walk`): the inputs the fixtures
gave, the retriever's ``index`` once per persona, the ranking each k is scored on (timed), the
late name of a ``cmd:`` retriever, the haystack check, the metrics, and the result with its
facts (diagnostics, ties, explain). A new step is a line of ``walk`` and, where it needs one,
a method of its own. :class:`PairMemo` is what the items of one process share (the last few
personas and queries, the live query embeddings' times, the personas indexed, the retrievers
used). :class:`~pytest_retrieval_eval.run.session.EvalSession` makes one ``PairRun`` per item.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config.options import COMMAND_PREFIX
from ..config.settings import Settings
from ..data.protocol import LONGMEMEVAL, View
from ..errors import CacheError
from ..reporting.report import PairResult
from ..retrievers.base import Memory, Persona, Query, part_times
from ..retrievers.memories import (
    has_memories,
    is_plain,
    memory_record,
    pair_memory_metrics,
    read_memories,
)
from ..retrievers.ranked_output import REPEATS_READ
from ..retrievers.ranking import (
    READ_CUT,
    Scored,
    check_haystack,
    explain_facts,
    rank_all,
    rank_per_k,
)
from ..scoring import diagnostics
from ..scoring import longmemeval_metrics as lme_metrics
from ..scoring.metrics import score_rankings, session_recall
from ..scoring.ties import pair_ties
from . import personas, store_costs
from .columns import Columns

if TYPE_CHECKING:
    from ..data.corpus import Corpus, PairRecord
    from ..data.turn_rows import TurnRowsCache
    from ..retrievers.loader import UserRetriever
    from ..vectors.cache import VectorCache
    from ..vectors.embedding import Embedder
    from ..vectors.store_embedding import StoreEmbedding
    from ..vipune.store import StoreCache

#: How many personas, and queries, a process keeps built (the pairs it ranks now).
KEPT = 4


@dataclass(frozen=True)
class PairInputs:
    """What one pair item hands its retriever besides the pair: the values of the public
    fixtures ``retrieval_eval_vectors``, ``retrieval_eval_query_vector`` and
    ``retrieval_eval_store`` (None: the run holds no vectors; the retriever reads no store).
    ``ms``: the milliseconds this item spent getting them: the pair's first item reads them,
    later items of the pair (other columns) find them held, so this is the pair's cost,
    reported as the item's ``inputs`` apart from its overhead (None: not timed)."""

    vectors: np.ndarray | None
    query_vector: np.ndarray | None
    store: Path | None
    ms: float | None = None

    @classmethod
    def timed(cls, vectors: Callable[[], np.ndarray | None],
              query_vector: Callable[[], np.ndarray | None],
              store: Callable[[], Path | None]) -> PairInputs:
        """The inputs the three calls give, with the time they took."""
        begun = time.perf_counter()
        values = vectors(), query_vector(), store()
        return cls(*values, ms=(time.perf_counter() - begun) * 1000.0)


@dataclass
class PairMemo:
    """What the items of one process share."""

    _personas: OrderedDict[int, Persona] = field(default_factory=OrderedDict)
    _queries: OrderedDict[int, Query] = field(default_factory=OrderedDict)
    #: pair index -> the live query embedding's milliseconds, until its first scored item.
    embed_ms: dict[int, float] = field(default_factory=dict)
    #: column -> persona keys this process has called ``index`` for.
    indexed: dict[str, set[str]] = field(default_factory=dict)
    #: column -> the retriever this process ranked with (closed at session end).
    used: dict[str, Any] = field(default_factory=dict)
    #: ``persona.embed`` of this process (None: the run holds no vectors).
    embedding: StoreEmbedding | None = None

    def persona(self, pair: PairRecord, corpus: Corpus | None, vectors: VectorCache | None,
                stores: StoreCache | None, model: Mapping[str, Any] | None,
                store_dir: Path | None, *, session_rows: bool = True,
                turn_rows: Callable[[], TurnRowsCache] | None = None,
                session_vectors: bool = True) -> Persona:
        """The pair's memory rows, vectors and (lazily built) store; the last few are kept.
        ``session_vectors``: some retriever of the run reads the session matrix (else the
        persona holds none: :func:`.personas.build_persona`).
        ``turn_rows``: the run's kept turn rows (:meth:`.session.EvalSession.turn_rows_cache`),
        asked for only when a ``+unit:turn`` retriever ranks the pair's turns."""
        cached = self._personas.get(pair.index)
        if cached is not None:
            self._personas.move_to_end(pair.index)
            return cached
        assert corpus is not None and stores is not None
        fingerprint = str(model["fingerprint"]) if model else ""
        persona = personas.build_persona(pair, corpus, vectors, stores, fingerprint, store_dir,
                                         embed=self.embedding, session_rows=session_rows,
                                         turn_rows=turn_rows, session_vectors=session_vectors)
        self._personas[pair.index] = persona
        while len(self._personas) > KEPT:
            self._personas.popitem(last=False)
        return persona

    def query(self, pair: PairRecord, embedder: Embedder | None, vectors: VectorCache | None,
              model: dict[str, Any] | None) -> Query:
        """The pair's query; its vector is embedded live (model lane) or read from the cache.

        A live embedding is timed here, whoever asks (a pair item, through the
        ``retrieval_eval_query_vector`` fixture, or a user's test): the time waits in
        :attr:`embed_ms` for the pair's next scored item (:meth:`PairRun.walk`), so each
        question is embedded, and its latency reported, once however many retrievers rank it.
        """
        cached = self._queries.get(pair.index)
        if cached is not None:
            return cached
        query, embed_ms = personas.build_query(pair, embedder, vectors, model)
        if embed_ms is not None:
            self.embed_ms[pair.index] = embed_ms
        self._queries[pair.index] = query
        while len(self._queries) > KEPT:
            self._queries.popitem(last=False)
        return query

    def close_used(self, errors: list[str]) -> None:
        """``close()`` of each retriever this process ranked with, once; one that raises is a
        warning line appended to ``errors``, never a crash."""
        used, self.used = self.used, {}
        for column, retriever in used.items():
            close = getattr(retriever, "close", None)
            if not callable(close):
                continue
            try:
                close()
            except Exception as exc:  # user code: a warning, the run's results stand
                errors.append(f"{column}: close() failed ({type(exc).__name__}: {exc})"[:300])


def needs_store(selector: str, custom: Any, users: Mapping[str, UserRetriever],
                built: Mapping[str, Any]) -> bool:
    """Whether the retriever searches the persona's vipune store (``needs_store``): the
    custom fixture's, else the selector's user retriever (described) or built-in one."""
    if custom is not None:
        return bool(getattr(custom, "needs_store", False))
    user = users.get(selector)
    if user is not None:
        return user.needs_store
    return bool(getattr(built[selector], "needs_store", False))


def build_once(user: UserRetriever | None, started: float | None
               ) -> tuple[dict[str, float] | None, float | None]:
    """Construct a user retriever not yet built in this process: its start-up parts in
    milliseconds (the item's ``startup``, or None when reported already),
    ``{"import": ..., "construct": ...}`` (the import of its own module, measured when the
    selector was described), and when the item began (``started``; for a store built before
    the items, at a serial run's collection, moved back by its build, so the item's overhead
    stays its own)."""
    if user is None:
        return None, started
    built_before = user.built is not None
    user.build()
    construct_ms = user.take_startup()
    if construct_ms is None:
        return None, started
    if built_before and started is not None:
        started -= construct_ms / 1000.0
    return {"import": user.import_ms, "construct": construct_ms}, started


def workdir(cache_root: Path, column: str, persona_key: str) -> Path:
    """A persona's own folder for one retriever, kept across runs:
    ``<cache>/workdirs/<column>/<persona key>/`` (a column that is no short, safe file
    name, a ``cmd:`` selector say, is named as store exports are: a prefix and a hash)."""
    plain = re.fullmatch(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,63}", column) is not None
    if plain:
        folder = column
    else:
        from ..vipune.exports import unique_stem

        folder = unique_stem(column)
    return cache_root / "workdirs" / folder / persona_key


def score(settings: Settings, pair: PairRecord, rankings: Mapping[int, list[str]],
          rankable: set[str]) -> dict[str, float]:
    """The pair's metrics under the run's protocol and granularity."""
    ks = settings.ks
    if settings.protocol == LONGMEMEVAL:
        return lme_metrics.score_ranking(rankings[ks[0]], pair.gold, pair.session_ids, ks,
                                         settings.granularity)
    metrics = score_rankings(rankings, pair.gold, ks, rankable)
    if settings.granularity == "turn":
        metrics.update(session_recall(rankings, pair.gold, ks))
    return metrics


def given(persona: Persona, query: Query, inputs: PairInputs) -> tuple[Persona, Query]:
    """The persona and query as the item's fixtures gave their parts (vectors, store,
    query vector)."""
    if inputs.vectors is not None:
        persona = replace(persona, vectors=inputs.vectors)
    if inputs.store is not None:
        store = inputs.store
        persona = replace(persona, store_path=lambda: store)
    if inputs.query_vector is not None:
        query = replace(query, vector=inputs.query_vector)
    return persona, query


@dataclass
class PairRun:
    """One (pair, retriever) item: :meth:`walk` ranks, scores and describes it."""

    settings: Settings
    cache_root: Path
    memo: PairMemo
    names: Columns
    pair: PairRecord
    selector: str
    retriever: Any
    column: str
    #: The custom fixture's retriever: its column fixed by the item, never named late.
    custom: bool = False
    #: The ids the retriever returned again (``repeated_ids``, only when some), for the result.
    counts: dict[str, int] = field(default_factory=dict)
    #: --retrieval-eval-budget's counts (vectors/token_counts.TokenCounts); None: no budget.
    token_counts: Any = None
    #: A memory store's memories per k, as :meth:`rank` read them (empty: the store ranked
    #: session ids, or this view scores no memories): :mod:`.retrievers.memories`.
    memories: dict[int, list[Memory]] = field(default_factory=dict)
    #: What this item's ``index`` call left (:func:`.store_costs.footprint`); None: no call.
    footprint: dict[str, Any] | None = None
    #: Whether the result records explain facts (none read them without a JSON report or -v).
    explain: bool = True

    def walk(self, persona: Persona, query: Query, inputs: PairInputs,
             startup: Mapping[str, float] | None = None,
             started: float | None = None) -> PairResult:
        """The item's steps, in order. ``startup``: a user store's start-up parts in this
        item (:func:`build_once`); ``started``: when the item's call began
        (``time.perf_counter``), for the harness's overhead per item."""
        pair = self.pair
        persona, query = given(persona, query, inputs)
        embed_ms = self.memo.embed_ms.pop(pair.index, None)  # the pair's first scored item's
        startup_parts = {**(startup or {}), **(self.start() or {})}
        spent = self.embedding_spent()
        part_times(self.retriever)  # a fused store's parts: what an earlier failure left
        carried = store_costs.transport_ms(self.retriever)
        indexes, ingest_ms = self.index(persona)
        server_startup = store_costs.server_startup(self.retriever)  # mcp: one per persona
        if server_startup:
            startup_parts.update(server_startup)
            if ingest_ms is not None:
                ingest_ms = max(0.0, ingest_ms - sum(server_startup.values()))
        spent_indexing = self.embedding_spent()
        carried_indexing = store_costs.transport_ms(self.retriever)
        if indexes:
            persona = replace(persona, workdir=self.workdir(persona.key))
        start = time.perf_counter()
        rankings, components, scored = self.rank(persona, query)
        retrieval_ms = (time.perf_counter() - start) * 1000.0
        parts_ms = part_times(self.retriever)  # a fused store's parts (retrievers/fusion.py)
        server = store_costs.server_facts(self.retriever)  # an mcp: store's calls and misses
        transport: dict[str, float] = {}
        if carried is not None and carried_indexing is not None:  # a cmd: store's own time
            transport["transport"] = (store_costs.transport_ms(self.retriever) or 0.0) \
                - carried_indexing
            retrieval_ms = max(0.0, retrieval_ms - transport["transport"])
            if ingest_ms is not None:
                transport["ingest_transport"] = carried_indexing - carried
                ingest_ms = max(0.0, ingest_ms - transport["ingest_transport"])
        store_embedding = self.embedding_spent() - spent
        if store_embedding:  # what the store embedded: apart from its ingest and query time
            if ingest_ms is not None:
                ingest_ms = max(0.0, ingest_ms - (spent_indexing - spent))
            retrieval_ms = max(0.0, retrieval_ms - (store_embedding - spent_indexing + spent))
        self.name_late()
        check_haystack(pair.question_id, rankings, pair.session_ids)
        rankable = set(pair.session_ids)
        metrics = score(self.settings, pair, rankings, rankable)
        if self.memories:  # memory_recall@k, turn_recall@k
            metrics.update(pair_memory_metrics(self.memories, pair.gold, self.settings.ks,
                                               pair.gold_turns))
        startup_ms = sum(startup_parts.values()) if startup_parts else None
        latency: dict[str, Any] = {
            "query_embedding": embed_ms, "retrieval": retrieval_ms,
            **({"ingest": ingest_ms} if indexes else {}),
            **({} if startup_ms is None
               else {"startup": startup_ms, "startup_parts": startup_parts}),
            **({"store_embedding": store_embedding} if store_embedding else {}),
            **transport}
        result = self.result(query, rankings, components, scored, rankable, metrics, latency,
                             longer=self.longer_sessions(persona, query))
        if parts_ms:
            result["latency_ms"]["parts"] = parts_ms
        if server:
            result["server"] = server
        if self.footprint is not None:
            result["footprint"] = self.footprint
        # After the result's facts (explain reads the retriever's last call): the budget may
        # read the store once more, past k, untimed as query latency.
        begun = time.perf_counter()
        budget = self.budget(persona, query, rankings)
        if budget is not None:
            metrics.update(budget[0])
            result["budget"] = budget[1]
            if READ_CUT in self.counts:  # the longer read of an iterator stopped short
                result.setdefault(READ_CUT, self.counts[READ_CUT])
        if "memories" in result:  # explain's tokens and excerpts of the recorded memories
            from ..retrievers.memory_tokens import describe_record

            describe_record(result["memories"], self.memories[self.settings.max_k], persona,
                            self.token_counts)
        if budget is not None:
            latency["budget"] = (time.perf_counter() - begun) * 1000.0
        if inputs.ms is not None:
            latency["inputs"] = inputs.ms
        if started is not None:  # the item's own wall time less the store's and the model's
            total = (time.perf_counter() - started) * 1000.0
            # the import happened before the item; the pair's inputs are the pair's
            in_item = sum(v for k, v in startup_parts.items() if k != "import")
            result["latency_ms"]["overhead"] = max(0.0, total - retrieval_ms - (
                ingest_ms or 0.0) - (embed_ms or 0.0) - in_item - (
                latency.get("budget") or 0.0) - store_embedding - sum(transport.values())
                - (inputs.ms or 0.0))
        return result

    def start(self) -> dict[str, float] | None:
        """A ``cmd:`` store's spawn and hello, timed apart from its first ``index`` (its
        start-up), then its column named from hello, so that its workdir and the personas it
        indexed are kept under one name from its first item."""
        parts = store_costs.start_command(self.retriever)
        self.name_late()
        return parts

    def embedding_spent(self) -> float:
        """Milliseconds ``persona.embed`` has spent in this process so far."""
        embedding = self.memo.embedding
        return 0.0 if embedding is None else embedding.spent_ms

    def workdir(self, persona_key: str) -> Path:
        return workdir(self.cache_root, self.column, persona_key)

    def index(self, persona: Persona) -> tuple[bool, float | None]:
        """Call the retriever's ``index(persona)`` once per persona in this process, its
        workdir made first: whether it has ``index``, and the milliseconds this call took
        (None: the persona was indexed already)."""
        index = getattr(self.retriever, "index", None)
        if not callable(index):
            return False, None
        done = self.memo.indexed.setdefault(self.column, set())
        if persona.key in done:
            return True, None
        folder = self.workdir(persona.key)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"{self.column}: cannot make its workdir {folder} ({exc}); pass "
                             "a writable --retrieval-eval-cache=DIR") from None
        before = store_costs.resident_bytes(store_costs.process_of(self.retriever))
        start = time.perf_counter()
        index(replace(persona, workdir=folder))
        took = (time.perf_counter() - start) * 1000.0
        done.add(persona.key)
        self.footprint = store_costs.footprint(self.retriever, persona.key, folder, before)
        return True, took

    def rank(self, persona: Persona, query: Query) -> tuple[
            dict[int, list[str]], dict[int, Mapping[str, Sequence[str]]], Scored]:
        """The ranking each k is scored on, the fused lists per k (diagnostics) and the ids
        and scores ties are judged on, per k."""
        components: dict[int, Mapping[str, Sequence[str]]] = {}
        scored: Scored = {}
        if self.settings.protocol == LONGMEMEVAL:
            rankings = rank_all(self.retriever, persona, query, self.settings.ks,
                                len(self.pair.session_ids), scored)
        else:
            rankings, components = rank_per_k(
                self.retriever, persona, query, self.settings.ks, scored, self.counts,
                memories=self.memories if View(self.settings.protocol,
                                               self.settings.granularity).is_default else None)
        return rankings, components, scored

    def budget(self, persona: Persona, query: Query, rankings: Mapping[int, list[str]]
               ) -> tuple[dict[str, float], dict[str, Any]] | None:
        """``recall@<B>tok`` and ``tokens@k`` and the pair's budget facts, only with a budget
        asked (None, at the cost of one test, otherwise): the context is the ranking of the
        largest k, read on to the persona's size when that ends before the largest budget is
        filled; tokens@k each k's own ranking (docs/budget.md)."""
        if self.token_counts is None:
            return None
        from ..retrievers.memory_tokens import budget_step

        # a memory store's context is its memories; a session store's its session ranking
        per_k: Mapping[int, Sequence[str | Memory]] = self.memories or rankings

        cap = 0
        first = getattr(self.retriever, "first_memories", None)
        reader: Callable[[int], list[Memory]] | None = None
        if getattr(self.retriever, "unit", None) == "turn" and callable(first):
            # a built-in turn what-if: the longer read's first memories alone, as many as
            # the budget needs (sized from the tokens a memory, grown until a read passes
            # the largest budget), at most read_distinct's bound
            reader = partial(self.read_first, persona, query, first)
            cap = REPEATS_READ * max(len(self.pair.session_ids), 1)
        return budget_step(per_k[self.settings.max_k], per_k, persona, self.pair.gold,
                           self.settings.budgets, self.token_counts,
                           more=lambda: self.read_all(persona, query), first=reader,
                           cap=cap)

    def longer_sessions(self, persona: Persona, query: Query) -> Callable[[], list[str]] | None:
        """For a built-in turn what-if (``session_order``), the sessions of its whole turn
        ranking in order, read only when explain facts place a gold session past the top
        (where it went, for ``next:`` and ``retrieval-eval explain``): None for any other
        retriever."""
        order = getattr(self.retriever, "session_order", None)
        if not callable(order) or not self.explain:
            return None
        return lambda: list(order(persona, query))

    def read_first(self, persona: Persona, query: Query,
                   first: Callable[[Persona, Query, int], list[Memory]],
                   count: int) -> list[Memory]:
        """The first ``count`` memories of :meth:`read_all`'s ranking (a built-in turn
        what-if's ``first_memories``). Not read through :func:`read_memories`: no door is
        crossed (the memories are made by the harness, from the persona's turn rows and the
        ranking it checked in :meth:`rank`), and a growing read asks for the same first
        memories again (checking them cost a fifth of a budget run at M's scale)."""
        return list(first(persona, query, count))

    def read_all(self, persona: Persona, query: Query) -> list[str] | list[Memory]:
        """The store's ranking at the persona's size (the budget's longer read), checked as
        every ranking is: a memory store's memories, read to cover every session."""
        from ..retrievers.ranked_output import read_distinct
        from ..retrievers.ranking import split_scored
        from ..scoring.metrics import dedupe

        n = len(self.pair.session_ids)
        name = str(getattr(self.retriever, "name", "retriever"))
        read = read_distinct(self.retriever.rank(persona, query, n), name,
                             query.question_id, n, n)
        if read.cut_at is not None:  # an iterator's longer read stopped short (issue 43.4)
            self.counts.setdefault(READ_CUT, read.cut_at)
        got: list[Any] = read
        if self.memories or has_memories(got):  # checked as rank_per_k checks them
            memories = read_memories(got, persona, name, query.question_id)
            if self.memories or not is_plain(memories):
                return memories
            # session ids in disguise: read as those ids (their scores as pairs)
            got = [m.id if m.score is None else (m.id, m.score) for m in memories]
        ranked = dedupe(split_scored(got, name, query.question_id)[0])[:n]
        check_haystack(self.pair.question_id, {n: ranked}, self.pair.session_ids)
        return ranked

    def name_late(self) -> None:
        """A ``cmd:`` retriever knows its name once started: its column from then on."""
        if not self.custom and self.column == self.selector and \
                self.selector.startswith(COMMAND_PREFIX):
            self.column = self.names.named_late(self.selector, self.retriever,
                                                self.settings.retrievers)

    def result(self, query: Query, rankings: dict[int, list[str]],
               components: dict[int, Mapping[str, Sequence[str]]], scored: Scored,
               rankable: set[str], metrics: dict[str, float],
               latency: dict[str, float | None],
               longer: Callable[[], list[str]] | None = None) -> PairResult:
        """The item's result: the pair, its ranking and metrics, and the facts the report's
        diagnostics, ties and explain read (``longer``: :meth:`longer_sessions`)."""
        pair, ks = self.pair, self.settings.ks
        return {
            "retriever": self.column,
            **({"selector": self.selector} if self.column != self.selector else {}),
            "index": pair.index,
            "question_id": pair.question_id,
            "question_type": pair.question_type,
            "question": pair.question,
            "question_date": pair.question_date,
            "gold": list(pair.gold),
            "gold_source": pair.gold_source,
            # the gold sessions' has_answer turns, where the data marks them (the view shows them)
            **({"gold_turns": list(pair.gold_turns)} if pair.gold_turns else {}),
            "ranked": rankings[self.settings.max_k][: self.settings.max_k],
            **({"memories": memory_record(self.memories[self.settings.max_k], pair.gold,
                                          self.settings.max_k)} if self.memories else {}),
            "metrics": metrics,
            "notes": {k: v for k, v in pair.notes.items() if v},
            "latency_ms": latency,
            **diagnostics.pair_facts(components, rankings, ks),
            **self.counts,
            "ties": pair_ties(scored or None, pair.gold, ks, protocol=self.settings.protocol,
                              rankable=rankable, corpus_ids=pair.session_ids),
            **({"explain": explain_facts(self.retriever, query, pair.gold, rankings,
                                         components, ks, scored, longer=longer)}
               if self.explain else {}),
        }
