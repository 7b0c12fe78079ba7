"""A pair's persona and query, built from what the run holds: the corpus, the vector cache,
the persona stores and (model lane) the embedder.

:class:`~pytest_retrieval_eval.run.session.EvalSession` keeps the last few of each and times the
live query embedding; these functions only build. A persona's texts are read from the corpus
on first use, and its vipune store is built (or found and checked) on first use, once however
many searches use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import retrievers as retrievers_mod
from ..retrievers.base import LazySequence, TurnLists
from ..vectors.cache import query_key
from ..vipune import store as store_mod

if TYPE_CHECKING:
    from ..data.corpus import Corpus, PairRecord
    from ..data.turn_rows import TurnRowsCache
    from ..vectors.cache import VectorCache
    from ..vectors.embedding import Embedder

__all__ = ["build_persona", "build_query"]


Embed = Callable[[Sequence[str]], np.ndarray]


def build_persona(pair: PairRecord, corpus: Corpus, vectors: VectorCache | None,
                  stores: store_mod.StoreCache, fingerprint: str,
                  store_dir: Path | None, *, embed: Embed | None = None,
                  session_rows: bool = True,
                  turn_rows: Callable[[], TurnRowsCache] | None = None,
                  session_vectors: bool = True) -> retrievers_mod.Persona:
    """The pair's memory rows: vectors from the cache (none: zero-width rows), texts from the
    corpus and a vipune store, both on first use; ``store_dir`` also gets an export of the
    store (``--retrieval-eval-store-dir``). ``embed``: ``persona.embed`` (the run's model for
    a store's own texts); ``session_rows``: the rows are sessions, so the persona also gives
    its turns as rows (``turn_rows``, for the ``+unit:turn`` what-ifs), kept in the run's
    ``turn_rows()`` cache (none given: one of its own beside ``stores``).
    ``session_vectors`` False: no retriever of the run reads the session matrix (its vector
    readers are turn what-ifs, which read their turns' own): the persona's rows are then
    zero-width, as in a run without vectors, and nothing is read for them."""
    if vectors is not None and session_vectors:
        matrix = vectors.get(list(pair.text_keys))
    else:
        matrix = np.zeros((len(pair.session_ids), 0), dtype=np.float32)
    key = store_mod.persona_key(pair.session_ids, pair.text_keys, pair.created_at, fingerprint)
    texts: list[str] | None = None

    def load_texts() -> list[str]:
        nonlocal texts
        if texts is None:
            texts = corpus.texts(list(pair.text_keys))
        return texts

    built: list[Path] = []

    def store_path() -> Path:
        if built:  # checked (or built) once per persona, however many searches use it
            return built[0]
        path = stores.get_or_build(key, lambda: store_mod.rows_from_arrays(
            pair.session_ids, load_texts(), matrix, pair.created_at),
            session_ids=pair.session_ids, fingerprint=fingerprint)
        if store_dir is not None:
            from ..vipune import exports

            exports.export_persona_store(path, store_dir, pair.question_id)
        built.append(path)
        return path

    def load_turns() -> list[list[dict[str, str]]]:
        return corpus.turns(list(pair.text_keys))

    turn_texts = getattr(corpus, "turn_texts", None)
    session_turns = TurnLists(load_turns,
                              lambda row: corpus.turns([pair.text_keys[row]])[0],
                              len(pair.text_keys), corpus.turns,
                              lambda rows: corpus.turns([pair.text_keys[r] for r in rows]),
                              None if turn_texts is None else
                              lambda rows: turn_texts([pair.text_keys[r] for r in rows]))
    turned: dict[bool, retrievers_mod.Persona] = {}
    blocks: tuple[tuple[bytes, ...], list[int]] = ((), [])  # made with turned[False]

    def turn_rows_of(*, vectors: bool = True) -> retrievers_mod.Persona:
        nonlocal blocks
        # one per persona, however many +unit:turn retrievers ask; its vectors read only
        # for a retriever that reads them
        wanted = vectors and embed is not None
        if wanted not in turned:
            base = turned.get(False)
            if base is None:  # a run with no +unit:turn retriever never loads turn_rows
                if turn_rows is not None:
                    kept = turn_rows()
                else:
                    from ..data.turn_rows import TurnRowsCache

                    kept = TurnRowsCache(stores.root.parent / "turns", stores.verify)
                base, blocks = turn_persona(pair, session_turns, stores, kept)
                turned[False] = base
            turned[wanted] = base if not wanted else replace(
                base, vectors=_turn_vectors(embed, base, blocks), text_vectors=embed)
        return turned[wanted]

    return retrievers_mod.Persona(
        key=key, session_ids=tuple(pair.session_ids), created_at=tuple(pair.created_at),
        vectors=matrix, texts=retrievers_mod.LazyTexts(load_texts), store_path=store_path,
        text_keys=tuple(pair.text_keys), turns=session_turns, text_vectors=embed,
        turn_rows=turn_rows_of if session_rows else None)


def _turn_vectors(embed: Embed | None, turns: retrievers_mod.Persona,
                  blocks: tuple[tuple[bytes, ...], list[int]]) -> np.ndarray:
    """The turn rows' vectors, read from the run's vector cache as one array: its turn
    blocks (``blocks``: each session's digest and row count, :mod:`..vectors.turn_blocks`),
    else by their text keys (each text keyed once, when its rows were built)."""
    n = len(turns.session_ids)
    if embed is None:
        return np.zeros((n, 0), dtype=np.float32)
    by_blocks = getattr(embed, "of_blocks", None)
    by_keys = getattr(embed, "of_keys", None)
    if callable(by_blocks):
        got = by_blocks(blocks[0], blocks[1], turns.text_keys, lambda: turns.texts)
    elif callable(by_keys):
        got = by_keys(turns.text_keys, lambda: turns.texts)
    else:
        got = embed(list(turns.texts))
    out = np.asarray(got, dtype=np.float32)
    out.flags.writeable = False  # read-only: a ranking may keep facts of it (semantic_top)
    return out.reshape(n, -1)


def turn_persona(pair: PairRecord, turns: TurnLists, stores: store_mod.StoreCache,
                 kept: TurnRowsCache
                 ) -> tuple[retrievers_mod.Persona, tuple[tuple[bytes, ...], list[int]]]:
    """The pair's turns as rows, named and rendered as the turn granularity's rows
    (:func:`.data.turn_texts.turn_items`), kept per persona (:mod:`.data.turn_rows`: built
    once, read back by later runs); no vectors (zero-width: :func:`_turn_vectors` reads
    them), texts rendered from the corpus's turns when first read, a vipune store of the turn
    rows (no vectors in it: only FTS5 searches it), built on first use like the session
    store."""
    from ..data.turn_rows import persona_turn_rows

    rows, built_texts = persona_turn_rows(kept, pair.session_ids, pair.text_keys,
                                          pair.created_at, turns.of_keys)
    turns.counts = rows.turn_counts
    ids = rows.ids(pair.session_ids)
    created = list(map(pair.created_at.__getitem__, rows.session_rows.tolist()))
    session_rows, numbers = rows.session_rows.tolist(), rows.numbers.tolist()
    texts: Sequence[str] = built_texts if built_texts is not None else \
        retrievers_mod.LazyTexts(lambda: rows.texts_from(turns.rendered()),
                                 lambda wanted: rows.texts_of(wanted, turns.rendered))

    def load_records() -> list[tuple[Mapping[str, str]]]:
        every = turns.every()
        return [(every[s][n - 1],) for s, n in zip(session_rows, numbers, strict=True)]

    records = LazySequence(load_records)
    store_key = rows.extra["store"]
    built: list[Path] = []

    def store_path() -> Path:
        if not built:
            empty = np.zeros((len(ids), 0), dtype=np.float32)
            built.append(stores.get_or_build(store_key, lambda: store_mod.rows_from_arrays(
                ids, texts, empty, created), session_ids=ids, fingerprint=""))
        return built[0]

    persona = retrievers_mod.Persona(
        key=rows.extra["key"], session_ids=tuple(ids), created_at=tuple(created),
        vectors=np.zeros((len(ids), 0), dtype=np.float32), texts=texts,
        store_path=store_path, text_keys=rows.keys, turns=records,
        row_sessions=rows.session_rows)
    counts = np.bincount(rows.session_rows, minlength=len(pair.session_ids)).tolist()
    return persona, (rows.blocks, counts)


def build_query(pair: PairRecord, embedder: Embedder | None, vectors: VectorCache | None,
                model: Mapping[str, Any] | None) -> tuple[retrievers_mod.Query, float | None]:
    """The pair's query and, when it was embedded live (model lane), the milliseconds that
    took; else its vector is the cached one of ``model`` (with the model's query prefix), or
    None when the run holds no vectors."""
    vector: np.ndarray | None = None
    embed_ms: float | None = None
    if embedder is not None:
        start = time.perf_counter()
        vector = embedder.embed_query(pair.question)
        embed_ms = (time.perf_counter() - start) * 1000.0
    elif vectors is not None and model is not None:
        prefix = str(model.get("query_prefix", ""))
        vector = vectors.get([query_key(pair.question, prefix)])[0]
    query = retrievers_mod.Query(
        question_id=pair.question_id, question_type=pair.question_type,
        question=pair.question, question_date=pair.question_date, vector=vector,
        gold=tuple(pair.gold))
    return query, embed_ms
