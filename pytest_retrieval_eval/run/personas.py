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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import retrievers as retrievers_mod
from ..data.pairs import text_key
from ..retrievers.base import LazySequence
from ..vectors.cache import query_key
from ..vipune import store as store_mod

if TYPE_CHECKING:
    from ..data.corpus import Corpus, PairRecord
    from ..vectors.cache import VectorCache
    from ..vectors.embedding import Embedder

__all__ = ["build_persona", "build_query"]


Embed = Callable[[Sequence[str]], np.ndarray]


def build_persona(pair: PairRecord, corpus: Corpus, vectors: VectorCache | None,
                  stores: store_mod.StoreCache, fingerprint: str,
                  store_dir: Path | None, *, embed: Embed | None = None,
                  session_rows: bool = True) -> retrievers_mod.Persona:
    """The pair's memory rows: vectors from the cache (none: zero-width rows), texts from the
    corpus and a vipune store, both on first use; ``store_dir`` also gets an export of the
    store (``--retrieval-eval-store-dir``). ``embed``: ``persona.embed`` (the run's model for
    a store's own texts); ``session_rows``: the rows are sessions, so the persona also gives
    its turns as rows (``turn_rows``, for the ``+unit:turn`` what-ifs)."""
    if vectors is not None:
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

    turned: list[retrievers_mod.Persona] = []

    def turn_rows() -> retrievers_mod.Persona:
        if not turned:  # one per persona, however many +unit:turn retrievers ask
            turned.append(turn_persona(pair, load_turns(), stores, embed))
        return turned[0]

    return retrievers_mod.Persona(
        key=key, session_ids=tuple(pair.session_ids), created_at=tuple(pair.created_at),
        vectors=matrix, texts=retrievers_mod.LazyTexts(load_texts), store_path=store_path,
        text_keys=tuple(pair.text_keys), turns=LazySequence(load_turns), text_vectors=embed,
        turn_rows=turn_rows if session_rows else None)


def turn_persona(pair: PairRecord, turns: Sequence[Sequence[Mapping[str, str]]],
                 stores: store_mod.StoreCache,
                 embed: Embed | None) -> retrievers_mod.Persona:
    """The pair's turns as rows, named and rendered as the turn granularity's rows
    (:func:`.data.turn_texts.turn_items`): vectors through ``embed`` (none: zero-width), a
    vipune store of the turn rows (no vectors in it: only FTS5 searches it), built on first
    use like the session store."""
    ids: list[str] = []
    texts: list[str] = []
    created: list[str] = []
    records: list[tuple[Mapping[str, str]]] = []
    from ..data.turn_texts import turn_items

    for sid, date, own in zip(pair.session_ids, pair.created_at, turns, strict=True):
        for turn_id, text in turn_items(sid, own):
            ids.append(turn_id)
            texts.append(text)
            created.append(date)
            records.append((own[int(turn_id.rpartition("_")[2]) - 1],))
    keys = [text_key(text) for text in texts]
    if embed is not None:
        matrix = np.asarray(embed(texts), dtype=np.float32).reshape(len(texts), -1)
    else:
        matrix = np.zeros((len(texts), 0), dtype=np.float32)
    store_key = store_mod.persona_key(ids, keys, created, "")
    key = store_mod.persona_key(ids, keys, created, "turns")
    built: list[Path] = []

    def store_path() -> Path:
        if not built:
            empty = np.zeros((len(texts), 0), dtype=np.float32)
            built.append(stores.get_or_build(store_key, lambda: store_mod.rows_from_arrays(
                ids, texts, empty, created), session_ids=ids, fingerprint=""))
        return built[0]

    return retrievers_mod.Persona(
        key=key, session_ids=tuple(ids), created_at=tuple(created), vectors=matrix,
        texts=tuple(texts), store_path=store_path, text_keys=tuple(keys),
        turns=tuple(records), text_vectors=embed)


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
