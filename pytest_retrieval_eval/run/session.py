"""The state of one evaluation run, kept in ``config.stash`` (never in globals).

:class:`EvalSession` is made in ``pytest_configure``. On the controller (or a serial run) it
*prepares*: resolves the dataset, loads or builds the compact corpus, chooses the lane and the
model, preps missing vectors, and fixes a JSON-able :class:`Plan`. xdist workers receive that
plan through ``workerinput`` and only *attach* to it, so the dataset is read once and the model
is never loaded twice for prep. Each item then calls :meth:`EvalSession.run_pair`, whose walk
is :mod:`.pair_run`'s; columns are named in :mod:`.columns`, results kept in :mod:`.worker_results`.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import retrievers as retrievers_mod
from ..config.options import CUSTOM_RETRIEVER, DEFAULT_MODEL, RUN_PREFIX
from ..config.settings import Settings, check_reference
from ..data import corpus as corpus_mod
from ..data import dataset as dataset_mod
from ..data import ingest
from ..data.protocol import LONGMEMEVAL, View
from ..errors import DataError, RetrievalEvalError
from ..io.checksums import MEMO_DIR
from ..reporting.report import PairResult
from ..retrievers.loader import UserRetriever, describe_dotted, is_dotted
from ..retrievers.store_config import read_config
from ..vectors import cache as cache_mod
from ..vipune import store as store_mod
from . import lanes, pair_run
from .columns import Columns, stores_in_place
from .pair_run import PairInputs, PairMemo
from .plan import Plan
from .worker_results import WorkerResults

if TYPE_CHECKING:  # loaded where a run needs them: a subset, turns, bm25, run files, a model
    from ..data import subset as subset_mod
    from ..data.turn_rows import TurnRowsCache
    from ..data.turn_texts import WithTurnTexts
    from ..vectors.embedding import EmbedConfig, Embedder

__all__ = ["EvalSession", "PairInputs", "Plan", "Progress"]

Progress = Callable[[str, int, "int | None"], None]


@dataclass
class EvalSession:
    """One run's settings, plan, loaded resources and results."""

    settings: Settings
    plan: Plan | None = None
    corpus: corpus_mod.Corpus | None = None
    embedder: Embedder | None = None
    vectors: cache_mod.VectorCache | None = None
    dataset_info: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    json_error: str | None = None  # why the JSON report could not be written
    #: A StopRun's line (a user store that cannot be made...): exit 4, no report written.
    fatal: str | None = None
    _retrievers: dict[str, retrievers_mod.Retriever] = field(default_factory=dict)
    #: Whether some retriever of the run reads the session matrix (:meth:`_session_vectors`).
    _reads_matrix: bool | None = None
    #: User retrievers by selector (dotted paths, a conftest's named stores): described on
    #: every process, built only where an item uses one (never on the xdist controller).
    _users: dict[str, UserRetriever] = field(default_factory=dict)
    _imports: dict[str, float] = field(default_factory=dict)  # their modules' import ms
    #: The column and store naming (:mod:`.columns`).
    names: Columns = field(default_factory=Columns)
    #: Results, errors, skips and close() failures, each kept once (:mod:`.worker_results`).
    outcomes: WorkerResults = field(init=False)
    #: The last few personas and queries, what was indexed and used (:mod:`.pair_run`).
    pairs: PairMemo = field(default_factory=PairMemo)
    _stores: store_mod.StoreCache | None = None
    #: (pair position, retriever) of every item selected to run; None until collected.
    selected: list[tuple[int, str]] | None = None
    #: --retrieval-eval-subset: the chosen pairs (None: every usable pair).
    subset: subset_mod.Subset | None = None
    #: Which plugin items pytest collects (collection.Selection); set at session start.
    selection: Any = None
    #: The plugin's node in the collection tree (collection.RetrievalEvalCollector).
    collector: Any = None
    #: Whether pair results carry explain facts (run_hooks.start: a JSON report, or -v).
    explain: bool = True
    #: Whether pair items carry JUnit properties (--junitxml under junit_family=xunit1).
    junit_properties: bool = False
    #: ``--co``, ``--setup-plan``, ``--setup-only``: nothing under the cache is created,
    #: changed or locked; a corpus the cache lacks is built in :attr:`_scratch` instead.
    read_only: bool = False
    #: The temp folder (outside the cache) of a read-only run; removed at close_corpus.
    _scratch: Path | None = None
    #: --retrieval-eval-budget: the reader's tokenizer and its counts (None: no budget asked,
    #: no tokenizer loaded, nothing counted).
    token_counts: Any = None
    #: The corpus prep embeds with its turn texts (:meth:`prep_corpus`), made once; dropped
    #: once the run's lane is chosen (it holds every persona's turn keys).
    _turn_corpus: WithTurnTexts | None = None
    #: Each persona's kept turn rows (:meth:`turn_rows_cache`), one cache a run.
    _turn_rows: TurnRowsCache | None = None

    def __post_init__(self) -> None:
        self.outcomes = WorkerResults(self.names)

    # -- what other modules read: kept by the parts ---------------------------------------

    @property
    def results(self) -> list[PairResult]:
        return self.outcomes.results

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self.outcomes.errors

    @property
    def close_errors(self) -> list[str]:
        """One line per ``close()`` that raised (shown as a warning on the controller)."""
        return self.outcomes.close_errors

    @property
    def columns(self) -> dict[str, str]:
        """Every selector's column (its retriever's ``name`` where usable and free)."""
        return self.names.by_selector

    @property
    def record_columns(self) -> dict[str, str]:
        """Recording tests' columns: node id -> retriever name (record_columns.py)."""
        return self.names.record

    @record_columns.setter
    def record_columns(self, value: dict[str, str]) -> None:
        self.names.record = value

    # -- preparing (controller or serial run) ---------------------------------------------

    @property
    def cache_root(self) -> Path:
        return self.settings.cache_dir or cache_mod.default_cache_dir()

    def embed_config(self) -> EmbedConfig:
        from ..vectors.embedding import EmbedConfig

        s = self.settings
        # A max length not asked for is the model's own, else vipune's (embedding.resolved).
        length = s.max_length if "max_length" in s.explicit else None
        return EmbedConfig(pooling=s.pooling,  # type: ignore[arg-type]
                           max_length=length, query_prefix=s.query_prefix,
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
        check_reference(self.settings, self.names.listed(self.settings.retrievers))
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
            from ..retrievers import terms as terms_mod

            # Saved once per corpus, before any worker starts: no process splits texts again.
            terms_mod.ensure_table(corpus, self.cache_root, progress,
                                   rehash=s.verify == "full")
        if not self._needs_vectors():
            plan = Plan(str(corpus.path), str(self.cache_root),
                        "model-free" if s.no_model else "model", None, None)
        elif s.no_model:
            plan = lanes.cached_lane(self, progress)
        elif self.read_only:
            # Listing scores nothing, so it needs no model: none is loaded, none downloaded
            # (a Hub-named one would land in the HF cache, outside this run's cache).
            plan = Plan(str(corpus.path), str(self.cache_root), "model", None,
                        s.model or DEFAULT_MODEL)
        else:
            plan = lanes.model_lane(self, progress)
        self._turn_corpus = None  # the lane has read it: its turn keys need not stay
        if _reads_runs(self._retrievers):
            from ..retrievers import trec_run

            plan = replace(plan, runs=trec_run.run_pins(self._retrievers))
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
            from ..data import subset as subset_mod

            self.subset = subset_mod.choose(self.corpus, self.settings.subset,
                                            self.settings.subset_seed)

    def vector_corpus(self) -> corpus_mod.Corpus | subset_mod.SubsetCorpus:
        """The corpus whose texts need vectors: the subset's pairs only under a subset."""
        assert self.corpus is not None
        if self.subset is None:
            return self.corpus
        from ..data import subset as subset_mod

        return subset_mod.SubsetCorpus(self.corpus, self.subset)

    def prep_corpus(self) -> Any:
        """The corpus whose texts prep embeds: :meth:`vector_corpus`, with its sessions' turn
        texts when a ``+unit:turn`` retriever ranks turns (:mod:`.data.turn_texts`)."""
        corpus = self.vector_corpus()
        if not any(getattr(r, "unit", None) == "turn" for r in self._retrievers.values()):
            return corpus
        if self._turn_corpus is None or self._turn_corpus.corpus is not corpus:
            from ..data.turn_texts import WithTurnTexts

            self._turn_corpus = WithTurnTexts(corpus, self.turn_rows_cache())
        return self._turn_corpus

    def turn_rows_cache(self) -> TurnRowsCache:
        """The run's kept turn rows (:mod:`.data.turn_rows`), made on first use (a run that
        ranks no turns never loads the module): the start's key check and each persona's
        ranking read them through this one cache, which hands the rows the start read to
        the persona that ranks them."""
        if self._turn_rows is None:
            from ..data.turn_rows import TurnRowsCache

            root = Path(self.plan.cache_root) if self.plan is not None else self.cache_root
            self._turn_rows = TurnRowsCache(root / "turns", self.settings.verify)
        return self._turn_rows

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
                self._users[name] = describe_dotted(name, self._imports)
            elif _reads_runs([name]):  # read once per process, checked against the pin
                from ..retrievers import trec_run

                self._retrievers[name] = trec_run.run_retriever(
                    name, self.plan.runs if self.plan is not None else {})
            elif name == "bm25" and self.settings.protocol == LONGMEMEVAL:
                self._retrievers[name] = retrievers_mod.LongMemEvalBM25Retriever()
            else:
                self._retrievers[name] = retrievers_mod.get_retriever(name, self.settings)
        self.names.name_all(self.settings.retrievers, self._users, self._retrievers)
        turned = [n for n, r in self._retrievers.items() if getattr(r, "unit", None) == "turn"]
        if turned and not self.view.is_default:
            raise RetrievalEvalError(
                f"retriever {turned[0]!r} ranks the turns of session rows, but under "
                f"--retrieval-eval-protocol {self.settings.protocol} --retrieval-eval-"
                f"granularity {self.settings.granularity} the rows are not vipune sessions; "
                f"drop +unit:turn there, or score the vipune protocol's sessions")

    def add_stores(self, stores: Sequence[UserRetriever]) -> None:
        """A conftest's named stores (``pytest_retrieval_eval_retrievers``) take the place of
        ``custom`` in the retriever list: each its own column and item per pair."""
        if not stores or CUSTOM_RETRIEVER not in self.settings.retrievers:
            return
        listed = stores_in_place([store.selector for store in stores], self.settings.retrievers)
        self.settings = replace(self.settings, retrievers=listed)
        for store in stores:
            self._users[store.selector] = store

    def build_users(self, selectors: Iterable[str]) -> None:
        """The user retrievers of ``selectors`` built now (serial, before any item): StopRun."""
        for selector in dict.fromkeys(selectors):
            if selector in self._users:
                self.pairs.used.setdefault(self.column(selector), self._users[selector].build())

    def retriever(self, selector: str) -> retrievers_mod.Retriever:
        """The retriever of a selector, built on first use in this process."""
        built = self._retrievers.get(selector)
        if built is not None:
            return built
        return self._users[selector].build()

    def run_files(self) -> dict[str, dict[str, Any]]:
        """Per ``run:PATH`` selector, what its file held (:func:`.trec_run.run_files`)."""
        assert self.corpus is not None
        if not _reads_runs(self._retrievers):
            return {}
        from ..retrievers import trec_run

        return trec_run.run_files(self._retrievers, self.corpus, self.column)

    def column(self, selector: str) -> str:
        return self.names.column(selector)

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
            from ..vectors.embedding import load_embedder

            self.embedder = load_embedder(plan.model_spec, self.embed_config(),
                                          memo_dir=Path(plan.cache_root) / MEMO_DIR,
                                          deadline=self.settings.network_deadline)

    def finish_setup(self) -> None:
        """Resources every process needs once the plan is fixed."""
        assert self.plan is not None and self.corpus is not None
        corpus = self.corpus
        if self.plan.model is not None and self.vectors is None:
            self.vectors = lanes.vector_cache(self.cache_root, self.plan.model,
                                              verify=self.settings.verify,
                                              writes=not self.read_only)
        self._stores = store_mod.StoreCache(Path(self.plan.cache_root) / "stores",
                                            verify=self.settings.verify)
        if self.vectors is not None and self.pairs.embedding is None:
            from ..vectors.store_embedding import StoreEmbedding

            name = str((self.plan.model or {}).get("name", "the run's model"))
            self.pairs.embedding = StoreEmbedding(self.vectors, self.embedder, name)
        self.dataset_info = {
            "name": corpus.dataset_name,
            "sha256": corpus.dataset_sha256,
            "gold_source": corpus_mod.gold_source(corpus),
        }
        self._make_retrievers()  # workers make theirs here
        bm25 = self._retrievers.get("bm25")
        if (bm25 is not None  # first: naming BM25Retriever loads its module (a bm25 run's)
                and isinstance(bm25, retrievers_mod.BM25Retriever) and self.view.is_default):
            from ..retrievers.terms import use_term_table

            use_term_table(bm25, Path(self.plan.cache_root), corpus)
        if "vipune" in self._retrievers and not (self.read_only and self.plan.model is None):
            retrievers_mod.check_compatible(self.plan.model)
        if self.settings.budgets and self.token_counts is None:
            from ..vectors.token_counts import run_counts  # the tokenizer: only when asked

            pinned = (self.plan.tokenizer or {}).get("sha256")
            self.token_counts = run_counts(self.settings.tokenizer, Path(self.plan.cache_root),
                                           read_only=self.read_only, pin=pinned)
            if self.plan.tokenizer is None:  # the controller (or a serial run): the pin
                self.plan = replace(self.plan,
                                    tokenizer=dict(self.token_counts.counter.identity))

    # -- items ------------------------------------------------------------------------------

    def persona(self, pair: corpus_mod.PairRecord) -> retrievers_mod.Persona:
        """The pair's memory rows, vectors and (lazily built) store; the last few are kept."""
        model = self.plan.model if self.plan else None
        return self.pairs.persona(pair, self.corpus, self.vectors, self._stores, model,
                                  self.settings.store_dir, session_rows=self.view.is_default,
                                  turn_rows=self.turn_rows_cache,
                                  session_vectors=self._session_vectors())

    def query(self, pair: corpus_mod.PairRecord) -> retrievers_mod.Query:
        """The pair's query, its vector embedded live (timed: :meth:`.PairMemo.query`) or
        read from the cache."""
        model = self.plan.model if self.plan is not None else None
        return self.pairs.query(pair, self.embedder, self.vectors, model)

    def holds_vectors(self) -> bool:
        """Whether this run holds passage and query vectors (some retriever reads them)."""
        return self.vectors is not None

    def reads_session_vectors(self, selector: str, custom: Any = None) -> bool:
        """Whether the retriever reads a persona's session vectors: a built-in one that
        reads vectors (``needs_vectors``) unless it says it does not (a ``+unit:turn``
        what-if ranks its turns' own); a user's or the custom fixture's store may. Its item
        asks for ``retrieval_eval_vectors`` only then."""
        built = self._retrievers.get(selector)
        if custom is not None or built is None:
            return True  # the custom fixture's stores, a user's retriever: they may
        return bool(getattr(built, "reads_session_vectors",
                            getattr(built, "needs_vectors", True)))

    def _session_vectors(self) -> bool:
        """Whether some retriever of the run reads the session matrix (then each persona
        reads it as it is made; else none does: :meth:`passage_vectors` reads it)."""
        if self._reads_matrix is None:
            self._reads_matrix = any(self.reads_session_vectors(name)
                                     for name in self.settings.retrievers)
        return self._reads_matrix

    def passage_vectors(self, pair: corpus_mod.PairRecord) -> np.ndarray | None:
        """The pair's passage vectors (``retrieval_eval_vectors``); None when the run holds
        none. Read from the cache when the run's personas hold none (no retriever of the
        run reads them; a test of the user's asks)."""
        if self.vectors is None:
            return None
        if self._session_vectors():
            return self.persona(pair).vectors
        return self.vectors.get(list(pair.text_keys))

    def query_vector(self, pair: corpus_mod.PairRecord) -> np.ndarray | None:
        """The pair's query vector (``retrieval_eval_query_vector``); None without vectors."""
        return self.query(pair).vector

    def store_path(self, pair: corpus_mod.PairRecord) -> Path:
        """The pair's vipune store (``retrieval_eval_store``): built once per persona."""
        return self.persona(pair).store_path()

    def needs_store(self, retriever_name: str,
                    custom: retrievers_mod.Retriever | None = None) -> bool:
        """Whether the retriever searches the persona's vipune store (``needs_store``)."""
        return pair_run.needs_store(retriever_name, custom, self._users, self._retrievers)

    def pair_inputs(self, pair: corpus_mod.PairRecord, retriever_name: str,
                    custom: retrievers_mod.Retriever | None = None) -> PairInputs:
        """What a retriever is handed for the pair, from the methods the public fixtures
        wrap (a pair item gets these through the fixtures themselves), timed."""
        return PairInputs.timed(
            lambda: self.passage_vectors(pair),
            lambda: self.query_vector(pair) if self.holds_vectors() else None,
            lambda: self.store_path(pair) if self.needs_store(retriever_name, custom) else None)

    def run_pair(self, index: int, retriever_name: str,
                 custom: retrievers_mod.Retriever | None = None,
                 inputs: PairInputs | None = None,
                 started: float | None = None, column: str | None = None) -> PairResult:
        """Rank one pair with one retriever, score it, and keep the result (the walk:
        :class:`.pair_run.PairRun`).

        ``inputs``: the pair's vectors, query vector and store as the public fixtures gave
        them (a pair item's); by default from :meth:`pair_inputs`, the methods those fixtures
        wrap. Either way the store is built (or checked) before the query is timed.
        A retriever's ``index(persona)`` runs before its first ``rank`` of the persona, timed
        as ingest. ``started``: when the item's call began (``time.perf_counter``), for the
        harness's overhead per item.
        """
        assert self.corpus is not None
        pair = self.corpus.pairs[index]
        # A user store's import and constructor, once per process: the item's startup.
        startup, started = pair_run.build_once(
            self._users.get(retriever_name) if custom is None else None, started)
        retriever = custom if custom is not None else self.retriever(retriever_name)
        if column is None:
            column = self.names.custom_column(custom, self.settings.retrievers) \
                if custom is not None else self.column(retriever_name)
        self.pairs.used.setdefault(column, retriever)
        if inputs is None:
            inputs = self.pair_inputs(pair, retriever_name, custom)
        walk = pair_run.PairRun(self.settings, self.cache_root, self.pairs, self.names, pair,
                                retriever_name, retriever, column, custom=custom is not None,
                                token_counts=self.token_counts, explain=self.explain)
        result = walk.walk(self.persona(pair), self.query(pair), inputs, startup, started)
        config = read_config(retriever, retriever_name if custom is None else "")
        if config is not None:  # the report keeps one per retriever (store_config.py)
            result["config"] = config
        self.add_result(result)
        return result

    def flush_kept(self) -> None:
        """Write what this process made to keep: its token counts and the turn blocks it
        read by key (session end, every process)."""
        if self.token_counts is not None:
            self.token_counts.flush()
        if self.pairs.embedding is not None:  # the turn blocks it read by key
            self.pairs.embedding.flush()

    def close_corpus(self) -> None:
        """Close this process's corpus connection (at pytest's unconfigure, on the
        controller and on each worker); a later read would open it again."""
        if self.corpus is not None:
            self.corpus.close()
        if self._turn_rows is not None:  # turn rows its start read that no pair took
            self._turn_rows.release()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def close_retrievers(self) -> None:
        """``close()`` of each retriever this process ranked with, once; one that raises is a
        warning line (:attr:`close_errors`), never a crash."""
        self.pairs.close_used(self.close_errors)

    # -- delegated to the parts: pair_run.py, columns.py, worker_results.py -------------

    def score(self, pair: corpus_mod.PairRecord, rankings: Mapping[int, list[str]],
              rankable: set[str]) -> dict[str, float]:
        return pair_run.score(self.settings, pair, rankings, rankable)

    def worker_output(self) -> dict[str, Any]:
        return self.outcomes.worker_output()

    def custom_stores(self, value: Any) -> list[tuple[str, Any]]:
        return self.names.custom_stores(value, self.settings.retrievers)

    def display_name(self, retriever: str) -> str:
        return self.names.display_name(retriever)

    def add_result(self, result: PairResult) -> None:
        self.outcomes.add_result(result)

    def add_error(self, error: Mapping[str, Any]) -> None:
        self.outcomes.add_error(error)

    def add_skip(self, skip: Mapping[str, Any]) -> None:
        self.outcomes.add_skip(skip)

    def merge_worker_output(self, output: Mapping[str, Any]) -> None:
        self.outcomes.merge_worker_output(output)

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


def _reads_runs(selectors: Iterable[str]) -> bool:
    """Whether a retriever of the run reads a TREC run file (``run:PATH``): only then is
    :mod:`.retrievers.trec_run` imported."""
    return any(name.startswith(RUN_PREFIX) for name in selectors)
