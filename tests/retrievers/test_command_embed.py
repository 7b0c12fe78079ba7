"""A ``cmd:`` store's ``{"op": "embed", "texts": [...]}`` (issue 36 section 5): served with the
run's model while the plugin waits for the store's answer, and the wait goes on."""

from __future__ import annotations

import hashlib
import shlex
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.errors import CacheError, RetrieverError
from pytest_retrieval_eval.retrievers import Persona, Query
from pytest_retrieval_eval.retrievers.command import CommandRetriever

STORE = Path(__file__).resolve().parents[1] / "support" / "embed_store.py"


def vector(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(8).astype(np.float32)


class Embedding:
    """A stand-in for ``persona.embed``: hash vectors; ``refuse`` texts are not cached."""

    def __init__(self, refuse: Sequence[str] = ()) -> None:
        self.asked: list[list[str]] = []
        self.refuse = set(refuse)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.asked.append(list(texts))
        if self.refuse & set(texts):
            raise CacheError("persona.embed: 1 of 1 texts are not in the vector cache of m; "
                             "run once in the model lane (without --no-model)")
        return np.stack([vector(t) for t in texts]) if texts else np.empty((0, 8), np.float32)


def persona(embed: Embedding | None, n: int = 6) -> Persona:
    texts = [f"user: topic {i}" for i in range(n)]
    return Persona(key="p1", session_ids=tuple(f"s{i}" for i in range(n)),
                   created_at=("",) * n, vectors=np.zeros((n, 0), np.float32), texts=texts,
                   store_path=lambda: Path("unused"), text_vectors=embed)


def query(text: str = "which topic?", qid: str = "q1") -> Query:
    return Query(qid, "multi-session", text, "", None, ())


@pytest.fixture
def store() -> Iterator[list[CommandRetriever]]:
    made: list[CommandRetriever] = []
    yield made
    for r in made:
        r.close()


def make(made: list[CommandRetriever], mode: str = "good",
         timeout: float = 20.0) -> CommandRetriever:
    r = CommandRetriever(f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(STORE))} {mode}",
                         timeout=timeout, index_timeout=20.0)
    made.append(r)
    return r


def cosine_order(p: Persona, question: str) -> list[str]:
    q = vector(question).astype(np.float64)
    rows = np.stack([vector(t) for t in p.texts]).astype(np.float64)
    sims = rows @ q / (np.linalg.norm(rows, axis=1) * np.linalg.norm(q))
    return [p.session_ids[i] for i in np.argsort(-sims, kind="stable")]


def test_embed_requests_are_served_and_the_answer_still_comes(
        store: list[CommandRetriever]) -> None:
    embed = Embedding()
    p = persona(embed)
    r = make(store)
    r.index(p)
    assert embed.asked == [list(p.texts)]
    got = r.rank(p, query(), 3)
    assert embed.asked[-1] == ["which topic?"]
    assert got == cosine_order(p, "which topic?")[:3]  # the vectors came back exact
    assert r.rank(p, query("another one", "q2"), 2) == cosine_order(p, "another one")[:2]


def test_a_text_the_cache_lacks_fails_the_item_and_the_store_goes_on(
        store: list[CommandRetriever]) -> None:
    embed = Embedding(refuse=["not cached"])
    p = persona(embed)
    r = make(store)
    r.index(p)
    with pytest.raises(RetrieverError) as caught:
        r.rank(p, query("not cached"), 3)
    line = str(caught.value)
    assert "\n" not in line and "rank of question q1" in line and "model lane" in line
    assert r.rank(p, query("cached", "q2"), 2) == cosine_order(p, "cached")[:2]


def test_a_run_without_vectors_answers_the_store_with_an_error(
        store: list[CommandRetriever]) -> None:
    r = make(store)
    with pytest.raises(RetrieverError, match="this run holds no vectors"):
        r.index(persona(None))
    assert r._broken is None  # the exchange stayed in step


def test_an_embed_request_without_texts_stops_the_command(
        store: list[CommandRetriever]) -> None:
    r = make(store, "bad")
    with pytest.raises(RetrieverError, match='without a "texts" list of strings'):
        r.index(persona(Embedding()))
    assert r._broken is not None


def test_one_deadline_covers_a_request_and_its_embed_exchanges(
        store: list[CommandRetriever]) -> None:
    """Issue 43.13: each embed exchange restarted the timeout, so a store answering rank with
    endless embed requests ran forever. The store here asks for 8 s (each exchange takes
    milliseconds) before it answers; the request's one deadline of 1 s (only waited out:
    the index has its own 20 s) stops it first."""
    p = persona(Embedding())
    r = make(store, "endless", timeout=1.0)
    r.index(p)
    with pytest.raises(RetrieverError) as caught:
        r.rank(p, query(), 3)
    line = str(caught.value)
    assert "did not answer rank of question q1 within 1 s" in line, line
    assert "embed" in line, line
