"""The state of one evaluation run, kept in ``config.stash`` (never in globals).

:class:`EvalSession` is made in ``pytest_configure``. On the controller (or a serial run) it
*prepares*: resolves the dataset, loads or builds the compact corpus, chooses the lane and the
model, preps missing vectors, and fixes a JSON-able :class:`Plan`. xdist workers receive that
plan through ``workerinput`` and only *attach* to it, so the dataset is read once and the model
is never loaded twice for prep. Each item then calls :meth:`EvalSession.run_pair`.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from . import lanes, personas
from . import retrievers as retrievers_mod
from .data import corpus as corpus_mod
from .data import dataset as dataset_mod
from .data import ingest
from .data import subset as subset_mod
from .data.protocol import LONGMEMEVAL, NO_USER_EVIDENCE, REPEATED_SLOTS_KEPT, View
from .errors import CacheError, DataError, ModelError
from .io.checksums import MEMO_DIR
from .options import BUILTIN_RETRIEVERS, COMMAND_PREFIX, CUSTOM_RETRIEVER, DEFAULT_MODEL
from .reporting.report import NOTE_TEXT, PairResult
from .retrievers import terms as terms_mod
from .retrievers.loader import UserRetriever, describe_dotted, is_dotted, usable_name
from .retrievers.ranking import Scored, check_haystack, explain_facts, rank_all, rank_per_k
from .retrievers.variants import is_variant
from .scoring import diagnostics
from .scoring import longmemeval_metrics as lme_metrics
from .scoring.metrics import score_rankings, session_recall
from .scoring.ties import pair_ties
from .settings import Settings
from .vectors import cache as cache_mod
from .vectors import prep as prep_mod
from .vectors.embedding import EmbedConfig, Embedder, load_embedder
from .vipune import exports as store_exports
from .vipune import store as store_mod

Progress = Callable[[str, int, "int | None"], None]


@dataclass(frozen=True)
class Plan:
    """What the controller decided; crosses to xdist workers as a plain dict."""

    corpus_path: str
    cache_root: str
    lane: str  # "model" or "model-free"
    model: dict[str, Any] | None  # the embedder's info(): name, fingerprint, dim, pooling…
    model_spec: str | None  # what to load for live query embedding (model lane only)
    dataset_path: str = ""  # the dataset file: where items' reports point (collection.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        return cls(**data)


@dataclass(frozen=True)
class PairInputs:
    """What one pair item hands its retriever besides the pair: the values of the public
    fixtures ``retrieval_eval_vectors``, ``retrieval_eval_query_vector`` and
    ``retrieval_eval_store`` (None: the run holds no vectors; the retriever reads no store)."""

    vectors: np.ndarray | None
    query_vector: np.ndarray | None
    store: Path | None


@dataclass
class EvalSession:
    """One run's settings, plan, loaded resources and results."""

    settings: Settings
    plan: Plan | None = None
    corpus: corpus_mod.Corpus | None = None
    results: list[PairResult] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    embedder: Embedder | None = None
    vectors: cache_mod.VectorCache | None = None
    dataset_info: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    json_error: str | None = None  # why the JSON report could not be written
    _retrievers: dict[str, retrievers_mod.Retriever] = field(default_factory=dict)
    #: User retrievers by selector (dotted paths, a conftest's named stores): described on
    #: every process, built only where an item uses one (never on the xdist controller).
    _users: dict[str, UserRetriever] = field(default_factory=dict)
    #: Every selector's column (its retriever's ``name`` where usable and free).
    columns: dict[str, str] = field(default_factory=dict)
    #: column -> the retriever this process ranked with (closed at session end).
    _used: dict[str, Any] = field(default_factory=dict)
    #: column -> persona keys this process has called ``index`` for.
    _indexed: dict[str, set[str]] = field(default_factory=dict)
    #: One line per ``close()`` that raised (shown as a warning on the controller).
    close_errors: list[str] = field(default_factory=list)
    _stores: store_mod.StoreCache | None = None
    #: (pair position, retriever) of every item selected to run; None until collected.
    selected: list[tuple[int, str]] | None = None
    _seen_results: set[tuple[str, int]] = field(default_factory=set)
    _seen_errors: set[tuple[str, str]] = field(default_factory=set)
    _personas: OrderedDict[int, retrievers_mod.Persona] = field(default_factory=OrderedDict)
    _queries: OrderedDict[int, retrievers_mod.Query] = field(default_factory=OrderedDict)
    #: pair index -> the live query embedding's milliseconds, until its first scored item.
    _embed_ms: dict[int, float] = field(default_factory=dict)
    #: --retrieval-eval-subset: the chosen pairs (None: every usable pair).
    subset: subset_mod.Subset | None = None
    #: Which plugin items pytest collects (collection.Selection); set at session start.
    selection: Any = None
    #: The plugin's node in the collection tree (collection.RetrievalEvalCollector).
    collector: Any = None
    #: Whether pair items carry JUnit properties (--junitxml under junit_family=xunit1).
    junit_properties: bool = False
    #: Recording tests' columns: node id -> retriever name (record_columns.column_names).
    record_columns: dict[str, str] = field(default_factory=dict)
    #: The custom retriever's own name, once an item has used it (its column and JSON name).
    custom_name: str | None = None
    #: Every column the custom fixture's stores filled (it may return several), in order.
    custom_names: list[str] = field(default_factory=list)
    #: Pair items skipped (a skip mark, pytest.skip in a fixture, a plugin's skip).
    skips: list[dict[str, Any]] = field(default_factory=list)
    #: ``--co``, ``--setup-plan``, ``--setup-only``: nothing under the cache is created,
    #: changed or locked; a corpus the cache lacks is built in :attr:`_scratch` instead.
    read_only: bool = False
    #: The temp folder (outside the cache) of a read-only run; removed at close_corpus.
    _scratch: Path | None = None

    # -- preparing (controller or serial run) ---------------------------------------------

    @property
    def cache_root(self) -> Path:
        return self.settings.cache_dir or cache_mod.default_cache_dir()

    def embed_config(self) -> EmbedConfig:
        s = self.settings
        return EmbedConfig(pooling=s.pooling,  # type: ignore[arg-type]
                           max_length=s.max_length, query_prefix=s.query_prefix,
                           device=s.device,  # type: ignore[arg-type]
                           threads=s.threads, batch_size=s.batch_size)

    @property
    def view(self) -> View:
        """The run's protocol and granularity (:mod:`.protocol`)."""
        return View(self.settings.protocol, self.settings.granularity)

    def prepare(self, progress: Progress | None = None) -> Plan:
        """Resolve data and model, build the corpus and the missing vectors; fix the plan."""
        s = self.settings
        self._make_retrievers()  # a bad retriever fails now, not after an hour of prep
        # --no-model never opens a socket: a named dataset comes from the local Hub cache only.
        source = dataset_mod.resolve_dataset(
            s.data, repo=s.data_repo, filename=s.data_file, offline=s.no_model,
            offline_reason="--no-model never downloads", deadline=s.network_deadline)
        if self.read_only and self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="retrieval-eval-readonly-"))
        corpus = ingest.load_corpus(source, self.cache_root, progress, view=self.view,
                                    scratch=self._scratch)
        if not any(not p.abstention for p in corpus.pairs):
            raise DataError(ingest.no_usable_pair(source, corpus))
        self.corpus = corpus
        self._choose_subset()
        if "bm25" in s.retrievers and self.view.is_default and not self.read_only:
            # Saved once per corpus, before any worker starts: no process splits texts again.
            terms_mod.ensure_table(corpus, self.cache_root, progress)
        if not self._needs_vectors():
            plan = Plan(str(corpus.path), str(self.cache_root),
                        "model-free" if s.no_model else "model", None, None)
        elif s.no_model:
            try:
                model = lanes.choose_cached_model(s, self.cache_root, self.vector_corpus())
            except CacheError:
                if s.cache_repo is None:
                    raise
                # What the repo has, then choose again.
                lanes.pull(s, self.cache_root, progress, model=s.model)
                model = lanes.choose_cached_model(s, self.cache_root, self.vector_corpus())
            # Every shard checked now: a corrupt one is a usage error naming the file, never
            # a vector served (the model lane's prep quarantines and re-embeds).
            self.vectors = lanes.vector_cache(self.cache_root, model)
            if not self.read_only:
                self.vectors.verify()
            plan = Plan(str(corpus.path), str(self.cache_root), "model-free", model, None)
        elif self.read_only:
            # Listing scores nothing, so it needs no model: none is loaded, none downloaded
            # (a Hub-named one would land in the HF cache, outside this run's cache).
            plan = Plan(str(corpus.path), str(self.cache_root), "model", None,
                        s.model or DEFAULT_MODEL)
        else:
            spec = s.model or DEFAULT_MODEL
            try:
                embedder = load_embedder(spec, self.embed_config(),
                                         memo_dir=self.cache_root / MEMO_DIR,
                                         deadline=s.network_deadline)
            except ModelError as exc:
                hint = lanes.no_model_hint(s, self.cache_root, corpus)
                if hint is None:
                    raise
                raise ModelError(f"{exc}; {hint}") from None
            self.embedder = embedder
            self.vectors = lanes.vector_cache(self.cache_root, embedder.info())
            if s.cache_repo is not None and self.vectors.missing(
                    prep_mod.needed_keys(self.vector_corpus(), embedder)):
                lanes.pull(s, self.cache_root, progress,
                           fingerprint=embedder.fingerprint, model=embedder.name)
            prep_mod.run_prep(self.vector_corpus(), embedder, self.vectors, progress)
            plan = Plan(str(corpus.path), str(self.cache_root), "model", embedder.info(), spec)
        plan = replace(plan, dataset_path=str(source.path.resolve()))
        self.plan = plan
        # Temp files of store builds killed over an hour ago (live builders are younger).
        if not self.read_only:
            with contextlib.suppress(OSError):
                store_mod.StoreCache(self.cache_root / "stores").remove_stale_partials()
        return plan

    def _choose_subset(self) -> None:
        assert self.corpus is not None
        if self.settings.subset is not None:
            self.subset = subset_mod.choose(self.corpus, self.settings.subset,
                                            self.settings.subset_seed)

    def vector_corpus(self) -> corpus_mod.Corpus | subset_mod.SubsetCorpus:
        """The corpus whose texts need vectors: the subset's pairs only under a subset."""
        assert self.corpus is not None
        if self.subset is None:
            return self.corpus
        return subset_mod.SubsetCorpus(self.corpus, self.subset)

    def scored_positions(self) -> list[int]:
        """Positions (into ``corpus.pairs``) of the pairs this run scores: the usable ones,
        or the subset's."""
        assert self.corpus is not None
        if self.subset is not None:
            return list(self.subset.positions)
        return [i for i, p in enumerate(self.corpus.pairs) if not p.abstention]

    def _make_retrievers(self) -> None:
        """The built-in retrievers, built; user ones (dotted paths) only described: their
        module imported, their class's ``name``, ``needs_vectors`` and ``needs_store`` read,
        nothing constructed (that happens where an item first ranks with one)."""
        for name in self.settings.retrievers:
            if name == CUSTOM_RETRIEVER or name in self._retrievers or name in self._users:
                continue
            if is_dotted(name):
                self._users[name] = describe_dotted(name)
            elif name == "bm25" and self.settings.protocol == LONGMEMEVAL:
                self._retrievers[name] = retrievers_mod.LongMemEvalBM25Retriever()
            else:
                self._retrievers[name] = retrievers_mod.get_retriever(name, self.settings)
        self._name_columns()

    def add_stores(self, stores: Sequence[UserRetriever]) -> None:
        """A conftest's named stores (``pytest_retrieval_eval_retrievers``) take the place of
        ``custom`` in the retriever list: each its own column and item per pair."""
        if not stores or CUSTOM_RETRIEVER not in self.settings.retrievers:
            return
        names = [store.selector for store in stores]
        others = [r for r in self.settings.retrievers if r != CUSTOM_RETRIEVER]
        clash = next((n for i, n in enumerate(names) if n in names[:i] or n in others
                      or n in BUILTIN_RETRIEVERS), None)
        if clash is not None:
            raise DataError(
                f"store name {clash!r} is given twice (by pytest_retrieval_eval_retrievers, "
                "or as another retriever of the run); give each store a name of its own")
        where = self.settings.retrievers.index(CUSTOM_RETRIEVER)
        listed = list(self.settings.retrievers)
        listed[where:where + 1] = names
        self.settings = replace(self.settings, retrievers=tuple(listed))
        for store in stores:
            self._users[store.selector] = store

    def _name_columns(self) -> None:
        """Each selector's column: its retriever's ``name`` when that is usable and no
        other retriever's selector, column or a built-in; else the selector."""
        taken = {*self.settings.retrievers, *BUILTIN_RETRIEVERS, CUSTOM_RETRIEVER}
        columns: dict[str, str] = {}
        for selector in self.settings.retrievers:
            user = self._users.get(selector)
            if user is not None:  # its name read without building it ("Class+ef:10" too)
                own = user.name
            else:
                own = usable_name(getattr(self._retrievers.get(selector), "name", None))
            free = own is not None and (own == selector or (
                own not in taken and own not in columns.values()))
            columns[selector] = own if free and own is not None else selector
        self.columns = columns

    def retriever(self, selector: str) -> retrievers_mod.Retriever:
        """The retriever of a selector, built on first use in this process."""
        built = self._retrievers.get(selector)
        if built is not None:
            return built
        return self._users[selector].build()

    def _named_late(self, selector: str, retriever: retrievers_mod.Retriever) -> str:
        """The column of a retriever that learns its ``name`` as it runs (``cmd:``, from its
        hello): that name where it is usable and free, else the selector."""
        own = usable_name(getattr(retriever, "name", None))
        taken = {*self.settings.retrievers, *BUILTIN_RETRIEVERS, CUSTOM_RETRIEVER,
                 *self.record_columns.values(),
                 *(c for s, c in self.columns.items() if s != selector)}
        if own is not None and own != selector and own not in taken:
            self.columns[selector] = own
            return own
        return selector

    def column(self, selector: str) -> str:
        return self.columns.get(selector, selector)

    def _needs_vectors(self) -> bool:
        """Whether any retriever reads vectors (``needs_vectors``, default yes: the custom
        one and dotted paths may): if none does, no model is loaded and nothing embedded."""
        return CUSTOM_RETRIEVER in self.settings.retrievers or any(
            getattr(r, "needs_vectors", True)
            for r in [*self._retrievers.values(), *self._users.values()])

    # -- attaching (xdist worker) ----------------------------------------------------------

    def attach(self, plan: Plan) -> None:
        """Open what the controller prepared; load the model only for live query embedding."""
        self.plan = plan
        self.corpus = corpus_mod.open_corpus(Path(plan.corpus_path))
        self._choose_subset()  # deterministic: the controller's very pairs
        if plan.lane == "model" and plan.model_spec is not None and not self.read_only:
            self.embedder = load_embedder(plan.model_spec, self.embed_config(),
                                          memo_dir=Path(plan.cache_root) / MEMO_DIR,
                                          deadline=self.settings.network_deadline)

    def finish_setup(self) -> None:
        """Resources every process needs once the plan is fixed."""
        assert self.plan is not None and self.corpus is not None
        corpus = self.corpus
        if self.plan.model is not None and self.vectors is None:
            self.vectors = lanes.vector_cache(self.cache_root, self.plan.model)
        self._stores = store_mod.StoreCache(Path(self.plan.cache_root) / "stores")
        self.dataset_info = {
            "name": corpus.dataset_name,
            "sha256": corpus.dataset_sha256,
            "gold_source": corpus_mod.gold_source(corpus),
        }
        self._make_retrievers()  # workers make theirs here
        bm25 = self._retrievers.get("bm25")
        if isinstance(bm25, retrievers_mod.BM25Retriever) and self.view.is_default:
            table = terms_mod.table_path(Path(self.plan.cache_root), corpus.dataset_sha256)
            corpus_sha = terms_mod.corpus_file_sha256(corpus)  # counts of this very corpus
            bm25.use_table(lambda: terms_mod.open_table(table, corpus_sha))
        if "vipune" in self._retrievers and not (self.read_only and self.plan.model is None):
            retrievers_mod.check_compatible(self.plan.model)

    # -- items ------------------------------------------------------------------------------

    def persona(self, pair: corpus_mod.PairRecord) -> retrievers_mod.Persona:
        """The pair's memory rows, vectors and (lazily built) store; the last few are kept."""
        cached = self._personas.get(pair.index)
        if cached is not None:
            self._personas.move_to_end(pair.index)
            return cached
        assert self.corpus is not None and self._stores is not None
        fingerprint = str(self.plan.model["fingerprint"]) if self.plan and self.plan.model else ""
        persona = personas.build_persona(pair, self.corpus, self.vectors, self._stores,
                                         fingerprint, self.settings.store_dir)
        self._personas[pair.index] = persona
        while len(self._personas) > 4:
            self._personas.popitem(last=False)
        return persona

    def query(self, pair: corpus_mod.PairRecord) -> retrievers_mod.Query:
        """The pair's query; its vector is embedded live (model lane) or read from the cache.

        A live embedding is timed here, whoever asks (a pair item, through the
        ``retrieval_eval_query_vector`` fixture, or a user's test): the time waits for the
        pair's next scored item (:meth:`run_pair`), so each question is embedded, and its
        latency reported, once however many retrievers rank it.
        """
        cached = self._queries.get(pair.index)
        if cached is not None:
            return cached
        model = self.plan.model if self.plan is not None else None
        query, embed_ms = personas.build_query(pair, self.embedder, self.vectors, model)
        if embed_ms is not None:
            self._embed_ms[pair.index] = embed_ms
        self._queries[pair.index] = query
        while len(self._queries) > 4:
            self._queries.popitem(last=False)
        return query

    def holds_vectors(self) -> bool:
        """Whether this run holds passage and query vectors (some retriever reads them)."""
        return self.vectors is not None

    def passage_vectors(self, pair: corpus_mod.PairRecord) -> np.ndarray | None:
        """The pair's passage vectors (``retrieval_eval_vectors``); None when the run holds
        none."""
        return self.persona(pair).vectors if self.holds_vectors() else None

    def query_vector(self, pair: corpus_mod.PairRecord) -> np.ndarray | None:
        """The pair's query vector (``retrieval_eval_query_vector``); None without vectors."""
        return self.query(pair).vector

    def store_path(self, pair: corpus_mod.PairRecord) -> Path:
        """The pair's vipune store (``retrieval_eval_store``): built once per persona."""
        return self.persona(pair).store_path()

    def needs_store(self, retriever_name: str,
                    custom: retrievers_mod.Retriever | None = None) -> bool:
        """Whether the retriever searches the persona's vipune store (``needs_store``)."""
        if custom is not None:
            return bool(getattr(custom, "needs_store", False))
        user = self._users.get(retriever_name)
        if user is not None:
            return user.needs_store
        return bool(getattr(self._retrievers[retriever_name], "needs_store", False))

    def pair_inputs(self, pair: corpus_mod.PairRecord, retriever_name: str,
                    custom: retrievers_mod.Retriever | None = None) -> PairInputs:
        """What a retriever is handed for the pair, from the methods the public fixtures
        wrap (a pair item gets these through the fixtures themselves)."""
        return PairInputs(
            vectors=self.passage_vectors(pair),
            query_vector=self.query_vector(pair) if self.holds_vectors() else None,
            store=self.store_path(pair) if self.needs_store(retriever_name, custom) else None)

    def run_pair(self, index: int, retriever_name: str,
                 custom: retrievers_mod.Retriever | None = None,
                 inputs: PairInputs | None = None,
                 started: float | None = None, column: str | None = None) -> PairResult:
        """Rank one pair with one retriever, score it, and keep the result.

        ``inputs``: the pair's vectors, query vector and store as the public fixtures gave
        them (a pair item's); by default from :meth:`pair_inputs`, the methods those fixtures
        wrap. Either way the store is built (or checked) before the query is timed.
        A retriever's ``index(persona)`` runs before its first ``rank`` of the persona, timed
        as ingest. ``started``: when the item's call began (``time.perf_counter``), for the
        harness's overhead per item.
        """
        assert self.corpus is not None
        pair = self.corpus.pairs[index]
        user = self._users.get(retriever_name) if custom is None else None
        startup_ms = None
        if user is not None and user.built is None:  # its constructor: once per process
            begun = time.perf_counter()
            user.build()
            startup_ms = (time.perf_counter() - begun) * 1000.0
        retriever = custom if custom is not None else self.retriever(retriever_name)
        if column is None:
            column = self._custom_column(custom) if custom is not None else self.column(
                retriever_name)
        self._used.setdefault(column, retriever)
        if inputs is None:
            inputs = self.pair_inputs(pair, retriever_name, custom)
        persona, query = self.persona(pair), self.query(pair)
        if inputs.vectors is not None:
            persona = replace(persona, vectors=inputs.vectors)
        if inputs.store is not None:
            store = inputs.store
            persona = replace(persona, store_path=lambda: store)
        if inputs.query_vector is not None:
            query = replace(query, vector=inputs.query_vector)
        embed_ms = self._embed_ms.pop(pair.index, None)  # the pair's first scored item's
        indexes, ingest_ms = self._index(retriever, column, persona)
        if indexes:
            persona = replace(persona, workdir=self.workdir(column, persona.key))
        start = time.perf_counter()
        components: dict[int, Mapping[str, Sequence[str]]] = {}
        scored: Scored = {}  # the ids and scores ties are judged on, per k
        if self.settings.protocol == LONGMEMEVAL:
            rankings = rank_all(retriever, persona, query, self.settings.ks,
                                len(pair.session_ids), scored)
        else:
            rankings, components = rank_per_k(retriever, persona, query, self.settings.ks,
                                              scored)
        retrieval_ms = (time.perf_counter() - start) * 1000.0
        if custom is None and column == retriever_name and \
                retriever_name.startswith(COMMAND_PREFIX):  # cmd: knows its name once started
            column = self._named_late(retriever_name, retriever)
        check_haystack(pair.question_id, rankings, pair.session_ids)
        rankable = set(pair.session_ids)
        metrics = self.score(pair, rankings, rankable)
        result: PairResult = {
            "retriever": column,
            **({"selector": retriever_name} if column != retriever_name else {}),
            "index": pair.index,
            "question_id": pair.question_id,
            "question_type": pair.question_type,
            "question": pair.question,
            "question_date": pair.question_date,
            "gold": list(pair.gold),
            "gold_source": pair.gold_source,
            "ranked": rankings[self.settings.max_k][: self.settings.max_k],
            "metrics": metrics,
            "notes": {k: v for k, v in pair.notes.items() if v},
            "latency_ms": {"query_embedding": embed_ms, "retrieval": retrieval_ms,
                           **({"ingest": ingest_ms} if indexes else {}),
                           **({} if startup_ms is None else {"startup": startup_ms})},
            **diagnostics.pair_facts(components, rankings, self.settings.ks),
            "ties": pair_ties(scored or None, pair.gold, self.settings.ks,
                              protocol=self.settings.protocol, rankable=rankable,
                              corpus_ids=pair.session_ids),
            "explain": explain_facts(retriever, query, pair.gold, rankings, components,
                                     self.settings.ks, scored),
        }
        if started is not None:  # the item's own wall time less the store's and the model's
            total = (time.perf_counter() - started) * 1000.0
            result["latency_ms"]["overhead"] = max(0.0, total - retrieval_ms - (
                ingest_ms or 0.0) - (embed_ms or 0.0) - (startup_ms or 0.0))
        self.add_result(result)
        return result

    def workdir(self, column: str, persona_key: str) -> Path:
        """A persona's own folder for one retriever, kept across runs:
        ``<cache>/workdirs/<column>/<persona key>/`` (a column that is no short, safe file
        name, a ``cmd:`` selector say, is named as store exports are: a prefix and a hash)."""
        plain = re.fullmatch(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,63}", column) is not None
        folder = column if plain else store_exports.unique_stem(column)
        return self.cache_root / "workdirs" / folder / persona_key

    def _index(self, retriever: Any, column: str,
               persona: retrievers_mod.Persona) -> tuple[bool, float | None]:
        """Call the retriever's ``index(persona)`` once per persona in this process, its
        workdir made first: whether it has ``index``, and the milliseconds this call took
        (None: the persona was indexed already)."""
        index = getattr(retriever, "index", None)
        if not callable(index):
            return False, None
        done = self._indexed.setdefault(column, set())
        if persona.key in done:
            return True, None
        workdir = self.workdir(column, persona.key)
        try:
            workdir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"{column}: cannot make its workdir {workdir} ({exc}); pass a "
                             "writable --retrieval-eval-cache DIR") from None
        start = time.perf_counter()
        index(replace(persona, workdir=workdir))
        done.add(persona.key)
        return True, (time.perf_counter() - start) * 1000.0

    def close_corpus(self) -> None:
        """Close this process's corpus connection (at pytest's unconfigure, on the
        controller and on each worker); a later read would open it again."""
        if self.corpus is not None:
            self.corpus.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def close_retrievers(self) -> None:
        """``close()`` of each retriever this process ranked with, once; one that raises is a
        warning line (:attr:`close_errors`), never a crash."""
        used, self._used = self._used, {}
        for column, retriever in used.items():
            close = getattr(retriever, "close", None)
            if not callable(close):
                continue
            try:
                close()
            except Exception as exc:  # user code: a warning, the run's results stand
                self.close_errors.append(
                    f"{column}: close() failed ({type(exc).__name__}: {exc})"[:300])

    def score(self, pair: corpus_mod.PairRecord, rankings: Mapping[int, list[str]],
               rankable: set[str]) -> dict[str, float]:
        """The pair's metrics under the run's protocol and granularity."""
        ks = self.settings.ks
        if self.settings.protocol == LONGMEMEVAL:
            return lme_metrics.score_ranking(rankings[ks[0]], pair.gold, pair.session_ids, ks,
                                             self.settings.granularity)
        metrics = score_rankings(rankings, pair.gold, ks, rankable)
        if self.settings.granularity == "turn":
            metrics.update(session_recall(rankings, pair.gold, ks))
        return metrics

    def worker_output(self) -> dict[str, Any]:
        """xdist worker side: what goes into ``config.workeroutput``."""
        return {"results": self.results, "errors": self.errors,
                "close_errors": self.close_errors}

    def _custom_column(self, custom: retrievers_mod.Retriever) -> str:
        """The custom retriever's column: its own ``name`` when that is free (no other
        retriever or recording test of the run has it), else ``custom``."""
        own = getattr(custom, "name", None)
        taken = {*self.settings.retrievers, *self.record_columns.values(), *BUILTIN_RETRIEVERS,
                 *self.columns.values()}
        if isinstance(own, str) and own.strip() and own == own.strip() and own not in taken \
                and "," not in own and not is_variant(own):
            return own
        return CUSTOM_RETRIEVER

    def custom_stores(self, value: Any) -> list[tuple[str, Any]]:
        """The custom fixture's value as (column, retriever) pairs: one retriever (its column
        as :meth:`_custom_column` names it), or a list (each named by its ``name``) or a
        mapping name -> retriever, each its own column. Raises :class:`DataError` (one line)
        for a store without a usable, free name, or two of one name."""
        if isinstance(value, Mapping):
            named = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            named = [(str(getattr(v, "name", "")), v) for v in value]
        else:
            return [(self._custom_column(value), value)]
        taken = {*self.settings.retrievers, *self.record_columns.values(), *BUILTIN_RETRIEVERS,
                 *self.columns.values()}
        seen: set[str] = set()
        for name, store in named:
            if not callable(getattr(store, "rank", None)):
                raise DataError(f"retrieval_eval_custom_retriever: store {name!r} has no "
                                "rank(persona, query, limit); return retrievers")
            if usable_name(name) is None or name in taken or name in seen:
                raise DataError(
                    f"retrieval_eval_custom_retriever: store name {name!r} is "
                    f"{'given twice' if name in seen else 'not usable or taken'}; give each "
                    "store a name of its own (no ',' or '+', none of the run's retrievers)")
            seen.add(name)
        return named

    def display_name(self, retriever: str) -> str:
        """A retriever's column: the custom retriever's own name once known."""
        if retriever == CUSTOM_RETRIEVER:
            return self.custom_name or retriever
        return self.column(retriever)

    def add_result(self, result: PairResult) -> None:
        """Keep a scored (pair, retriever) once, however it arrived (its own item here, an
        xdist item report, a worker's final output)."""
        if result.get("selector") == CUSTOM_RETRIEVER:
            self.custom_name = self.custom_name or str(result["retriever"])
            if result["retriever"] not in self.custom_names:
                self.custom_names.append(str(result["retriever"]))
        selector = result.get("selector")
        if isinstance(selector, str) and selector.startswith(COMMAND_PREFIX) and \
                self.columns.get(selector, selector) == selector:
            self.columns[selector] = str(result["retriever"])  # named as it ran (cmd:)
        key = (result["retriever"], result["index"])
        if key not in self._seen_results:
            self._seen_results.add(key)
            self.results.append(result)

    def add_error(self, error: Mapping[str, Any]) -> None:
        """Keep a failed (pair, retriever) once."""
        key = (str(error.get("retriever")), str(error.get("question_id")))
        if key not in self._seen_errors:
            self._seen_errors.add(key)
            self.errors.append(dict(error))

    def add_skip(self, skip: Mapping[str, Any]) -> None:
        """Keep a skipped (pair, retriever) once: not scored, named in the report."""
        if not any(s["retriever"] == skip.get("retriever")
                   and s["question_id"] == skip.get("question_id") for s in self.skips):
            self.skips.append(dict(skip))

    def merge_worker_output(self, output: Mapping[str, Any]) -> None:
        """xdist controller side: add what one worker published (most of it arrived already
        with the items' reports: an interrupted worker publishes nothing)."""
        for result in output.get("results", []):
            self.add_result(result)
        for error in output.get("errors", []):
            self.add_error(error)
        self.close_errors.extend(str(e) for e in output.get("close_errors", []))

    def select(self, items: Sequence[tuple[int, str]]) -> None:
        """The (pair position, retriever) items left after ``-k``/``-m`` deselection."""
        self.selected = list(items)

    def select_node_ids(self, ids: Sequence[str]) -> None:
        """xdist controller: the selection from a worker's collected node ids."""
        assert self.corpus is not None
        names = {(self.corpus.pairs[position].question_id, name): (position, name)
                 for position in self.scored_positions()
                 for name in self.settings.retrievers}
        tails = (tuple(node.split("::")[-2:]) for node in ids
                 if node.startswith("retrieval-eval::"))
        self.select([names[tail] for tail in tails if tail in names])

    def run_info(self, *, stopped: bool = False, interrupted: bool = False) -> dict[str, Any]:
        """Header facts of the run for the report (plain data).

        ``interrupted``: Ctrl-C; ``stopped``: the run ended before its last item (``-x``,
        ``--maxfail``): either way the report says how many selected items ran."""
        assert self.plan is not None and self.corpus is not None
        corpus = self.corpus
        selection: dict[str, Any] = {"stopped": stopped, "interrupted": interrupted}
        if self.selected is not None:
            selection["selected"] = [[corpus.pairs[i].question_id, self.display_name(name)]
                                     for i, name in self.selected]
        selection["skipped_items"] = sorted(
            ({**s, "retriever": self.display_name(s["retriever"])} for s in self.skips),
            key=lambda s: (s["retriever"], s["question_id"]))
        abstention = sum(1 for p in corpus.pairs if p.abstention)
        no_evidence = sum(1 for p in corpus.pairs if p.notes.get(NO_USER_EVIDENCE))
        stats = dict(corpus.stats)
        notes = {name: stats.get(name, 0) for name in NOTE_TEXT}  # the header's notes
        subset = {} if self.subset is None else {"subset": self.subset.to_dict()}
        if self.settings.protocol == LONGMEMEVAL:  # every slot kept: nothing was dropped
            repeats = [p.notes.get(REPEATED_SLOTS_KEPT, 0) for p in corpus.pairs]
            notes = {REPEATED_SLOTS_KEPT: sum(repeats),
                     "histories_with_repeats": sum(1 for n in repeats if n)}
        return {
            **subset,
            "dataset": {**self.dataset_info, "stats": stats},
            "lane": self.plan.lane,
            "model": self.plan.model,
            "ks": list(self.settings.ks),
            "retrievers": [name for r in self.settings.retrievers for name in (
                self.custom_names or [r] if r == CUSTOM_RETRIEVER else [self.column(r)])],
            "protocol": self.settings.protocol,
            "granularity": self.settings.granularity,
            "usable": len(self.scored_positions()),
            "skipped": {"abstention": abstention - no_evidence, "rejected": len(corpus.rejections),
                        **({NO_USER_EVIDENCE: no_evidence} if no_evidence else {})},
            "rejections": [asdict(r) for r in corpus.rejections],
            "notes": notes,
            "selection": selection,
            # When the report was made (UTC): `retrieval-eval plot` tells BASE from NEW by it.
            "created": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        }
