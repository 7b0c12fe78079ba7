"""The model lane for +unit:turn and persona.embed (issue 36 sections 4, 5): prep embeds the
sessions' turn texts when a +unit:turn retriever runs (and only then), and persona.embed
embeds what the cache lacks once, into the run's cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.data.pairs import text_key
from pytest_retrieval_eval.data.turn_texts import WithTurnTexts
from pytest_retrieval_eval.run.session import EvalSession
from pytest_retrieval_eval.vectors.store_embedding import StoreEmbedding
from tests.support.model_factory import make_model_dir
from tests.test_reliability import run_settings


def _session(tmp_path: Path, model: Path, *retrievers: str) -> EvalSession:
    settings: Any = run_settings(enabled=True, retrievers=retrievers, data="sample",
                                 model=str(model), cache_dir=tmp_path / "cache")
    session = EvalSession(settings)
    session.prepare()
    session.finish_setup()
    return session


def test_prep_embeds_the_turn_texts_only_when_a_unit_turn_retriever_runs(
        tmp_path: Path) -> None:
    model = make_model_dir(tmp_path / "models", dim=8).path
    plain = _session(tmp_path / "plain", model, "semantic")
    assert plain.corpus is not None and plain.vectors is not None
    turn_keys = {k for p in WithTurnTexts(plain.corpus).pairs for k in p.text_keys} - {
        k for p in plain.corpus.pairs for k in p.text_keys}
    assert len(turn_keys) > 1000
    assert set(plain.vectors.missing(sorted(turn_keys))) == turn_keys  # no turn embedded
    turned = _session(tmp_path / "turned", model, "semantic", "semantic+unit:turn")
    assert turned.vectors is not None
    assert turned.vectors.missing(sorted(turn_keys)) == []
    # persona.embed reads them from the cache: nothing left for the model to embed.
    embedding = turned.pairs.embedding
    assert isinstance(embedding, StoreEmbedding) and embedding.embedder is not None
    pair = next(p for p in turned.corpus.pairs if not p.abstention)  # type: ignore[union-attr]
    persona = turned.persona(pair)
    rows = persona.turn_rows()  # type: ignore[misc]
    assert rows.vectors.shape == (len(rows.session_ids), 8)
    # A text no prep saw is embedded once, into the run's cache (a later --no-model run
    # finds it).
    fresh = "user: a fact no session holds"
    assert turned.vectors.missing([text_key(fresh)]) == [text_key(fresh)]
    vector = persona.embed([fresh])
    assert vector.shape == (1, 8)
    assert turned.vectors.missing([text_key(fresh)]) == []


def test_retrieval_eval_prep_turns_embeds_what_unit_turn_reads(tmp_path: Path) -> None:
    """`retrieval-eval prep --turns` fills the cache a --no-model run of +unit:turn needs,
    and the model-free lane's refusal suggests that very prep."""
    import pytest

    from pytest_retrieval_eval.cli import console
    from pytest_retrieval_eval.errors import RetrievalEvalError
    from pytest_retrieval_eval.run import lanes

    model = make_model_dir(tmp_path / "models", dim=8).path
    cache = tmp_path / "cache"
    settings: Any = run_settings(enabled=True, no_model=True, data="sample", model=str(model),
                                 retrievers=("semantic+unit:turn",), cache_dir=cache)
    assert lanes.view_args(settings) == " --turns"
    assert lanes.view_args(run_settings(retrievers=("semantic", "fts+mode:or"))) == ""
    base = ["prep", "--data", "sample", "--model", str(model), "--cache", str(cache),
            "--no-progress", "--offline"]
    assert console.main(base) == 0  # sessions only
    assert not (cache / "turns").exists()  # a prep without --turns keeps no turn rows
    with pytest.raises(RetrievalEvalError, match=r"retrieval-eval prep .* --turns`"):
        EvalSession(settings).prepare()
    assert console.main([*base, "--turns"]) == 0
    session = EvalSession(settings)
    session.prepare()
    session.finish_setup()
    assert session.corpus is not None and session.vectors is not None
    wanted = {k for p in WithTurnTexts(session.corpus).pairs for k in p.text_keys}
    assert session.vectors.missing(sorted(wanted)) == []
    # prep kept each persona's turn rows: the first +unit:turn run reads them back (no turn
    # decoded or keyed again), the same rows it would have built
    kept = session.turn_rows_cache()
    personas = len(session.corpus.pairs)
    assert kept.built == 0 and kept.read == personas
    pair = next(p for p in session.corpus.pairs if not p.abstention)
    rows = session.persona(pair).turn_rows()  # type: ignore[misc]
    fresh = _session(tmp_path / "fresh", model, "semantic+unit:turn")
    assert fresh.corpus is not None
    again = fresh.persona(next(p for p in fresh.corpus.pairs if p.question_id ==
                               pair.question_id)).turn_rows()  # type: ignore[misc]
    assert (rows.session_ids, rows.text_keys) == (again.session_ids, again.text_keys)


def test_turn_rows_the_start_read_are_handed_to_the_ranking_then_dropped(
        tmp_path: Path) -> None:
    """The start reads every persona's turn rows (for their turn keys) through the run's
    one turn-rows cache and hands them on: a persona's ranking takes its rows there, not a
    second read (data/turn_rows.py); the start's extended pairs are not kept past the lane;
    rows no pair took are dropped when the session closes its corpus."""
    model = make_model_dir(tmp_path / "models", dim=8).path
    session = _session(tmp_path, model, "semantic+unit:turn")
    kept = session.turn_rows_cache()
    assert session._turn_corpus is None  # the lane read it; its turn keys are not held
    personas = len(session.corpus.pairs)  # type: ignore[union-attr]
    assert kept.built == personas and len(kept._handed) == personas  # a first run builds
    pair = next(p for p in session.corpus.pairs if not p.abstention)  # type: ignore[union-attr]
    rows = session.persona(pair).turn_rows()  # type: ignore[misc]
    assert len(rows.session_ids) > 0
    assert kept.read == 0 and len(kept._handed) == personas - 1  # taken, not read
    session.close_corpus()
    assert not kept._handed


def test_a_later_run_reads_turn_vectors_from_the_blocks_the_first_wrote(
        tmp_path: Path) -> None:
    """A persona's turn vectors read by key are kept as turn blocks at the session's end
    (vectors/turn_blocks.py); a later run reads the same vectors from the blocks, a session
    at a time, and writes none again."""
    import numpy as np

    model = make_model_dir(tmp_path / "models", dim=8).path
    first = _session(tmp_path, model, "semantic+unit:turn")
    assert first.corpus is not None and first.vectors is not None
    pairs = [p for p in first.corpus.pairs if not p.abstention][:4]
    expected = [first.persona(p).turn_rows().vectors for p in pairs]  # type: ignore[misc]
    blocks = first.vectors.turn_blocks()
    assert blocks is not None and blocks.served == 0 and blocks.written == 0
    first.flush_kept()  # the session's end, in every process
    assert blocks.written == 1
    later = _session(tmp_path, model, "semantic+unit:turn")
    assert later.corpus is not None and later.vectors is not None
    kept = later.vectors.turn_blocks()
    assert kept is not None
    got = [later.persona(p).turn_rows().vectors for p in pairs]  # type: ignore[misc]
    assert kept.served == len(pairs)
    from pytest_retrieval_eval.vipune.semantic import _writeable_base

    for a, b in zip(expected, got, strict=True):
        assert a.shape[0] > 0 and np.array_equal(a, b)
        # read-only all the way down: a ranking keeps its row facts once a persona
        assert not b.flags.writeable and not _writeable_base(b)
    later.flush_kept()
    assert kept.written == 0


def test_a_run_whose_vector_readers_are_turn_what_ifs_reads_no_session_matrix(
        tmp_path: Path) -> None:
    """Issue 44: a +unit:turn what-if ranks its turns' own vectors; a run whose every vector
    reader is one reads no session matrix (its personas' rows are zero-width), ranks the
    turns as a run that also reads sessions does, and a user's test asking for
    retrieval_eval_vectors still gets the pair's session vectors (read from the cache)."""
    from pytest_retrieval_eval.retrievers.base import Query

    model = make_model_dir(tmp_path / "models", dim=8).path
    mixed = _session(tmp_path / "mixed", model, "semantic", "semantic+unit:turn")
    alone = _session(tmp_path / "alone", model, "semantic+unit:turn")
    assert mixed.corpus is not None and alone.corpus is not None
    assert not alone.reads_session_vectors("semantic+unit:turn")
    assert alone.reads_session_vectors("semantic+unit:turn", custom=object())
    assert mixed.reads_session_vectors("semantic")
    bm25 = _session(tmp_path / "bm25", model, "bm25", "semantic+unit:turn")
    assert not bm25.reads_session_vectors("bm25")  # reads no vectors at all
    assert bm25.corpus is not None
    assert bm25.persona(bm25.corpus.pairs[0]).vectors.shape[1] == 0
    for pair, other in list(zip(mixed.corpus.pairs, alone.corpus.pairs, strict=True))[:4]:
        full, bare = mixed.persona(pair), alone.persona(other)
        assert full.vectors.shape == (len(pair.session_ids), 8)
        assert bare.vectors.shape == (len(pair.session_ids), 0)
        given = alone.passage_vectors(other)
        assert given is not None and np.array_equal(given, full.vectors)
        query: Query = mixed.query(pair)
        turned = mixed._retrievers["semantic+unit:turn"]
        assert [m.id for m in turned.rank(full, query, 10)] == \
            [m.id for m in alone._retrievers["semantic+unit:turn"].rank(bare, query, 10)]
