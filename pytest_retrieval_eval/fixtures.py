"""Public fixtures: the harness's data, stores and vectors in a user's own tests.

Registered by the plugin (always: without ``--retrieval-eval`` a test that requests a pair is
skipped, saying so). The plugin's own pair items get their pair, passage vectors, query
vector and store from these same fixtures, each a thin wrapper over an ``EvalSession``
method (``store_path``, ``passage_vectors``, ``query_vector``).

``retrieval_eval_corpus``        (session) the compact corpus: ``pairs``, ``texts(keys)``
``retrieval_eval_pair``          a test requesting it is parametrized over the usable pairs,
                                 ids ``<question_type>::<question_id>`` (``-k`` selects by
                                 either); the value is a ``corpus.PairRecord``
``retrieval_eval_store``         the pair's vipune SQLite file (built once per persona, shared
                                 by every process; open it read-only)
``retrieval_eval_vectors``       the pair's cached passage vectors with their session ids
``retrieval_eval_query_vector``  the pair's query vector (live in the model lane, else cached)
``retrieval_eval_embedder``      (session) the model lane's embedder; an error with --no-model
``retrieval_eval_record``        ``record(ranked)``: the test's ranking is scored and shown in
                                 the run's summary as a retriever named after the test
``retrieval_eval_custom_retriever``  (session) override it in your root ``conftest.py`` to
                                 score your own store as retriever ``custom``

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

if TYPE_CHECKING:  # numpy and the data wings load only in an enabled run (off means off)
    import numpy as np

    from .data.corpus import Corpus, PairRecord
    from .retrievers import Memory, Retriever
    from .run.session import EvalSession
    from .vectors.embedding import Embedder

__all__ = [
    "PassageVectors",
    "record_ranking",
    "retrieval_eval_corpus",
    "retrieval_eval_custom_retriever",
    "retrieval_eval_embedder",
    "retrieval_eval_pair",
    "retrieval_eval_query_vector",
    "retrieval_eval_record",
    "retrieval_eval_store",
    "retrieval_eval_vectors",
]

#: Where the run's EvalSession lives (``config.stash``); the plugin puts it there.
SESSION_KEY = pytest.StashKey["EvalSession"]()
PAIR_FIXTURE = "retrieval_eval_pair"
#: The marker of the plugin's pair items (registered by the plugin in every run).
MARKER = "retrieval_eval"
OFF = "retrieval_eval_pair needs --retrieval-eval (or retrieval_eval = true in the ini file)"


class PassageVectors(NamedTuple):
    """A pair's memory rows as vectors: ``vectors[i]`` embeds session ``session_ids[i]``."""

    session_ids: tuple[str, ...]
    vectors: np.ndarray  # (n, dim) float32, read-only views of the cache


def _state(config: pytest.Config) -> EvalSession | None:
    state = config.stash.get(SESSION_KEY, None)
    return state if state is not None and state.corpus is not None else None


def _need_state(request: pytest.FixtureRequest) -> EvalSession:
    state = _state(request.config)
    if state is None:
        pytest.skip(OFF)
    return state


def pair_id(pair: PairRecord) -> str:
    """A parametrized test's id for a pair: ``<question_type>::<question_id>``."""
    return f"{pair.question_type}::{pair.question_id}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A user test requesting ``retrieval_eval_pair`` runs once per usable pair."""
    if PAIR_FIXTURE not in metafunc.fixturenames:
        return
    state = _state(metafunc.config)
    if state is None:
        metafunc.parametrize(PAIR_FIXTURE, [pytest.param(None, marks=pytest.mark.skip(
            reason=OFF))], ids=["retrieval-eval-off"], indirect=True)
        return
    assert state.corpus is not None
    positions = state.scored_positions()  # the usable pairs, or --retrieval-eval-subset's
    metafunc.parametrize(PAIR_FIXTURE, positions, indirect=True,
                         ids=[pair_id(state.corpus.pairs[i]) for i in positions])


@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever() -> Retriever:
    """Override in your root ``conftest.py`` to score your own store as retriever ``custom``."""
    from .errors import RetrievalEvalError

    raise RetrievalEvalError(
        "retriever 'custom' needs a session fixture named retrieval_eval_custom_retriever in "
        "your root conftest.py returning an object with rank(persona, query, limit)"
    )


@pytest.fixture(scope="session")
def retrieval_eval_corpus(request: pytest.FixtureRequest) -> Corpus:
    """The run's compact corpus (``pairs``, ``texts(keys)``, ``stats``)."""
    corpus = _need_state(request).corpus
    assert corpus is not None
    return corpus


@pytest.fixture
def retrieval_eval_pair(request: pytest.FixtureRequest,
                        retrieval_eval_corpus: Corpus) -> PairRecord:
    """The pair this test (or plugin item) scores: a ``corpus.PairRecord``."""
    position = getattr(request, "param", None)
    if position is None:  # a plugin pair item: its position is its own
        position = getattr(request.node, "position", None)
    if position is None:
        pytest.fail(f"{request.node.name}: {PAIR_FIXTURE} is given only to tests it "
                    "parametrizes; request it as an argument of the test", pytrace=False)
    return retrieval_eval_corpus.pairs[int(position)]


@pytest.fixture
def retrieval_eval_store(request: pytest.FixtureRequest,
                         retrieval_eval_pair: PairRecord) -> Path:
    """The pair's vipune SQLite store (vipune's schema, built once per persona and reused by
    every retriever and process; open it read-only, e.g. ``file:...?mode=ro``)."""
    return _need_state(request).store_path(retrieval_eval_pair)


def _no_vectors(what: str, state: EvalSession) -> str:
    if state.settings.no_model or state.plan is None or state.plan.model is None:
        return (f"{what}: this run holds no vectors (none of its retrievers reads them); "
                "add one that does, e.g. --retrieval-eval-retriever=hybrid")
    return f"{what}: no vectors for this pair; run `retrieval-eval prep` first"


@pytest.fixture
def retrieval_eval_vectors(request: pytest.FixtureRequest,
                           retrieval_eval_pair: PairRecord) -> PassageVectors:
    """The pair's cached passage vectors with their session ids (store order)."""
    state = _need_state(request)
    vectors = state.passage_vectors(retrieval_eval_pair)
    if vectors is None:
        pytest.fail(_no_vectors("retrieval_eval_vectors", state), pytrace=False)
    return PassageVectors(tuple(retrieval_eval_pair.session_ids), vectors)


@pytest.fixture
def retrieval_eval_query_vector(request: pytest.FixtureRequest,
                                retrieval_eval_pair: PairRecord) -> np.ndarray:
    """The pair's query vector: embedded live (model lane) or read from the cache."""
    state = _need_state(request)
    vector = state.query_vector(retrieval_eval_pair)
    if vector is None:
        pytest.fail(_no_vectors("retrieval_eval_query_vector", state), pytrace=False)
    return vector


@pytest.fixture(scope="session")
def retrieval_eval_embedder(request: pytest.FixtureRequest) -> Embedder:
    """The model lane's embedder (``embed(texts)``, ``embed_query(text)``, ``dim``)."""
    state = _need_state(request)
    if state.embedder is None:
        why = ("--no-model loads no model; drop --no-model to embed" if state.settings.no_model
               else "this run loads no model (none of its retrievers reads vectors); add one "
                    "that does, e.g. --retrieval-eval-retriever=hybrid")
        pytest.fail(f"retrieval_eval_embedder: {why}", pytrace=False)
    return state.embedder


def record_ranking(state: EvalSession, pair: PairRecord, name: str,
                   ranked: Sequence[str]) -> dict[str, Any]:
    """Score a ranking handed in by a test exactly as a retriever's (one ranking serves
    every k) and keep it in the run's results under retriever ``name``."""
    from .data.protocol import LONGMEMEVAL
    from .errors import RetrieverError
    from .retrievers import memories as memories_mod
    from .retrievers.ranked_output import read_all_positions, read_distinct
    from .scoring import diagnostics
    from .scoring.metrics import dedupe

    n, verb = len(pair.session_ids), "retrieval_eval_record was given"
    memories = None  # Memory items handed in (issue 36): scored as a memory store's
    try:  # read to a bound, as a retriever's output (an endless iterator never hangs)
        if state.settings.protocol == LONGMEMEVAL:  # positions count as given, as run_pair's
            ranking = [str(x) for x in read_all_positions(ranked, name, pair.question_id, n,
                                                          verb)]
        else:
            got = list(read_distinct(ranked, name, pair.question_id, state.settings.max_k, n,
                                     verb))
            if memories_mod.has_memories(got):
                memories, got = recorded_memories(state, pair, name, got)
            ranking = dedupe(str(x) for x in got)[: state.settings.max_k]
    except RetrieverError as exc:
        pytest.fail(str(exc), pytrace=False)
    rankable = set(pair.session_ids)
    strangers = [x for x in ranking if x not in rankable]
    if strangers:
        pytest.fail(f"{name}: question {pair.question_id}: the ranking holds {strangers[0]!r}, "
                    "not a session of this question's haystack; rank only "
                    "retrieval_eval_pair.session_ids", pytrace=False)
    ks = state.settings.ks
    metrics = state.score(pair, dict.fromkeys(ks, ranking), rankable)
    if memories:
        metrics.update(memories_mod.pair_memory_metrics(dict.fromkeys(ks, memories), pair.gold,
                                                        ks, pair.gold_turns))
    result: dict[str, Any] = {
        "retriever": name,
        "index": pair.index,
        "question_id": pair.question_id,
        "question_type": pair.question_type,
        "gold": list(pair.gold),
        "gold_source": pair.gold_source,
        # the gold sessions' has_answer turns, where the data marks them (the view shows them)
        **({"gold_turns": list(pair.gold_turns)} if pair.gold_turns else {}),
        "ranked": ranking[: state.settings.max_k],
        **({"memories": memories_mod.memory_record(memories, pair.gold, state.settings.max_k)}
           if memories else {}),
        "metrics": metrics,
        "notes": {k: v for k, v in pair.notes.items() if v},
        "latency_ms": {"query_embedding": None, "retrieval": None},
        **diagnostics.pair_facts({}, dict.fromkeys(ks, ranking), ks),
    }
    if memories:  # explain's excerpts of the recorded memories, as a store's get them
        from .retrievers.memory_tokens import describe_record

        describe_record(result["memories"], memories, state.persona(pair), None)
    state.add_result(result)
    return result


def recorded_memories(state: EvalSession, pair: PairRecord, name: str,
                      got: Sequence[object]) -> tuple[list[Memory] | None, list[object]]:
    """Memory items a test handed to ``retrieval_eval_record``: checked against the pair's
    persona, as a retriever's are; the memories (None: ids in disguise) and the ids their
    derived session ranking gives. One :class:`RetrieverError` line where the run's view
    scores no memories."""
    from .errors import RetrieverError
    from .retrievers import memories as memories_mod

    if not state.view.is_default:
        raise RetrieverError(f"{name}: question {pair.question_id}: Memory items are scored "
                             "at session granularity under the vipune protocol only; record "
                             "session ids")
    checked = memories_mod.read_memories(got, state.persona(pair), name, pair.question_id)
    if memories_mod.is_plain(checked):
        return None, [m.id for m in checked]
    return checked, list(memories_mod.session_ranking(checked))


@pytest.fixture
def retrieval_eval_record(request: pytest.FixtureRequest, retrieval_eval_pair: PairRecord,
                          ) -> Callable[[Sequence[str]], dict[str, Any]]:
    """``record(ranked)``: score this test's ranking (session ids, best first) and show it in
    the summary as a retriever named after the test function (its own parameters in brackets;
    its node id where two tests would share a name, :mod:`.record_columns`); returns the scored
    result."""
    state = _need_state(request)
    name = state.record_columns.get(request.node.nodeid) or (
        getattr(request.node, "originalname", None) or request.node.name)

    def record(ranked: Sequence[str]) -> dict[str, Any]:
        return record_ranking(state, retrieval_eval_pair, name, ranked)

    return record
