"""Retrievers: the vipune reference ones, LongMemEval's BM25, the oracle, the real-binary
retriever through a stand-in process, and user retrievers loaded by dotted path."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import stat
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from pytest_retrieval_eval import retrievers as r
from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.errors import RetrievalEvalError, RetrieverError
from pytest_retrieval_eval.retrievers import BM25Index, Persona, Query
from pytest_retrieval_eval.vipune import store
from tests.support import ROOT

DIM = vipune.EMBEDDING_DIM
FAKE = ROOT / "tests" / "support" / "fake_vipune.py"
TOPICS = [
    "user: I adopted a cat named Miso last spring\nassistant: Congratulations on Miso!",
    "user: my budget for the garden party is 300 dollars\nassistant: Let's plan it.",
    "user: I started running three times a week\nassistant: Great habit.",
    "user: what is the capital of France?\nassistant: Paris.",
    "user: I bought a new road bike\nassistant: Which model did you buy?",
    "user: my sister visits in June\nassistant: How nice, family time.",
    "user: the quarterly report is due Friday\nassistant: I can help outline it.",
    "user: I'm learning to bake sourdough bread\nassistant: Start with a starter.",
]


def make_persona(tmp_path: Path, texts: Sequence[str] = TOPICS, seed: int = 0) -> Persona:
    rng = np.random.default_rng(seed)
    n = len(texts)
    ids = tuple(f"sess_{i:02d}" for i in range(n))
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    dates = tuple(f"2023-05-{i % 28 + 1:02d}T10:00:00+00:00" for i in range(n))
    key = store.persona_key(ids, [f"k{i}" for i in range(n)], dates)
    cache = store.StoreCache(tmp_path / "stores")
    skey = store.store_key(key, "test-model")

    def store_path() -> Path:
        return cache.get_or_build(
            skey, lambda: store.rows_from_arrays(ids, list(texts), vectors, dates)
        )

    return Persona(key, ids, dates, vectors, list(texts), store_path)


def make_query(question: str, vector: np.ndarray | None, gold: tuple[str, ...] = ()) -> Query:
    return Query("q1", "single-session-user", question, "2023/06/01 (Thu) 10:00", vector, gold)


# --------------------------------------------------------------------------- protocol, registry


def test_builtins_fit_the_protocol_and_registry() -> None:
    assert sorted(r.REGISTRY) == ["bm25", "fts", "hybrid", "langchain", "llamaindex", "mem0",
                                  "oracle", "semantic", "vipune"]
    for name in ["hybrid", "semantic", "fts", "bm25", "oracle"]:
        retriever = r.get_retriever(name)
        assert isinstance(retriever, r.Retriever) and retriever.name == name
    with pytest.raises(RetrievalEvalError,
                       match="unknown; choose from bm25, fts, hybrid, langchain"):
        r.get_retriever("nope")


def test_hybrid_equals_the_reference(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    qvec = persona.vectors[1] + 0.1 * persona.vectors[4]
    query = make_query("garden budget", qvec)
    got = r.HybridRetriever().rank(persona, query, 5)
    ref = vipune.search_hybrid(
        persona.store_path(),
        persona.vectors,
        persona.session_ids,
        "garden budget",
        qvec,
        5,
        project_id=store.PROJECT_ID,
    )
    assert got == [i for i, _ in ref] and got[0] == "sess_01"
    assert len(got) == len(set(got)) == 5
    everything = r.HybridRetriever().rank(persona, query, 20_000)  # clamped to 10,000
    assert sorted(everything) == sorted(persona.session_ids)


def test_hybrid_and_semantic_need_a_query_vector(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    for retriever in (r.HybridRetriever(), r.SemanticRetriever()):
        with pytest.raises(RetrieverError, match="no query vector"):
            retriever.rank(persona, make_query("x", None), 5)
        with pytest.raises(RetrieverError, match="does not match"):
            retriever.rank(persona, make_query("x", np.ones(8, np.float32)), 5)
    with pytest.raises(RetrieverError, match="Input cannot be empty"):
        r.HybridRetriever().rank(persona, make_query("  ", persona.vectors[0]), 5)


def test_semantic_and_fts(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    query = make_query("running a week", persona.vectors[6])
    assert r.SemanticRetriever().rank(persona, query, 3)[0] == "sess_06"
    assert r.FtsRetriever().rank(persona, query, 3) == ["sess_02"]  # run* + week, stemmed
    assert r.FtsRetriever().rank(persona, make_query('"', None), 3) == []
    with pytest.raises(ValueError):
        r.FtsRetriever().rank(persona, query, 0)


def test_corrupt_store_fails_the_item(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database" * 50)
    persona = make_persona(tmp_path)
    persona.store_path = lambda: bad
    for retriever in (r.HybridRetriever(), r.FtsRetriever()):
        with pytest.raises(RetrieverError, match=r"cannot be searched.*delete the store cache"):
            retriever.rank(persona, make_query("cat", persona.vectors[0]), 5)


def test_lazy_texts_load_once() -> None:
    calls: list[int] = []
    texts = r.LazyTexts(lambda: calls.append(1) or ["a", "b", "c"])
    assert not texts.loaded and calls == []
    assert len(texts) == 3 and texts[1] == "b" and list(texts[1:]) == ["b", "c"]
    assert list(texts) == ["a", "b", "c"] and calls == [1] and texts.loaded


def test_vipune_refuses_a_reference_only_store(tmp_path: Path, fake_vipune: Path) -> None:
    persona = make_persona(tmp_path)
    ref = store.build_store(
        tmp_path / "ref.sqlite",
        store.rows_from_arrays(persona.session_ids, persona.texts, np.ones((8, 16)), ["", ""] * 4),
    )
    persona.store_path = lambda: ref
    retriever = r.VipuneBinaryRetriever(fake_vipune, env=vipune_env(tmp_path))
    with pytest.raises(RetrieverError, match="not a vipune store"):
        retriever.rank(persona, make_query("cat", None), 5)
    assert not (tmp_path / "calls.jsonl").exists()  # never ran


def test_oracle(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    query = make_query("q", None, gold=("sess_05", "missing", "sess_02", "sess_05"))
    got = r.OracleRetriever().rank(persona, query, 100)
    assert got[:2] == ["sess_05", "sess_02"]
    assert got[2:] == [s for s in persona.session_ids if s not in ("sess_05", "sess_02")]
    assert r.OracleRetriever().rank(persona, query, 1) == ["sess_05"]


# --------------------------------------------------------------------------- BM25


def reference_bm25(texts: Sequence[str], question: str) -> np.ndarray:
    return np.asarray(BM25Okapi([t.split() for t in texts]).get_scores(question.split()))


def random_corpus(rng: random.Random, n_docs: int) -> list[str]:
    vocab = [
        "the",
        "a",
        "cat",
        "cats",
        "Cat",
        "run",
        "running",
        "I",
        "my",
        "you",
        "garden",
        "budget",
        "x",
        "caf\u00e9",
        "na\u00efve",
        "\u65e5\u672c",
        "emoji\U0001f600",
        "it's",
        '"quoted"',
        "back\\slash",
        "dots...",
        "-",
        "*",
    ]
    seps = [" ", "  ", "\t", "\n", " \n ", "\u00a0", "\u3000", "\x1c", "\x1f", "\u2028", "\x0b"]
    docs = []
    for _ in range(n_docs):
        k = rng.choice([0, 1, 3, 10, 40, 200])
        words = rng.choices(vocab, weights=[30] * 3 + [3] * (len(vocab) - 3), k=k)
        text = "".join(w + rng.choice(seps) for w in words)
        if rng.random() < 0.3:
            text = rng.choice(seps) + text  # leading white space
        docs.append(text)
    return docs


@pytest.mark.parametrize("seed", range(12))
def test_bm25_identical_to_rank_bm25_random(seed: int) -> None:
    rng = random.Random(seed)
    texts = random_corpus(rng, rng.choice([1, 2, 5, 30, 120]))
    if not any(t.split() for t in texts):
        texts.append("the cat")
    for question in [
        "the cat",
        "cat cat run",
        "my garden budget?",
        "unknown words only",
        "caf\u00e9 \u65e5\u672c the",
        "I",
        "x\u00a0the\u3000cat",
    ]:
        expected = reference_bm25(texts, question)
        for builder in (BM25Index.build, BM25Index.build_reference):
            got = builder(texts).scores(question.split())
            assert np.array_equal(got, expected), (seed, question, builder.__name__)
            assert np.array_equal(
                np.argsort(-got, kind="stable"), np.argsort(-expected, kind="stable")
            )


def test_bm25_generated_persona_and_negative_idf() -> None:
    rng = random.Random(42)
    words = ["".join(rng.choices("abcdefghij", k=rng.randint(1, 6))) for _ in range(3000)]
    weights = [1 / (i + 1) for i in range(len(words))]
    texts = [
        "user: "
        + " ".join(rng.choices(words, weights, k=rng.randint(50, 400)))
        + "\nassistant: "
        + " ".join(rng.choices(words, weights, k=rng.randint(50, 400)))
        for _ in range(150)
    ]
    index = BM25Index.build(texts)
    assert (index.idf == 0.25 * index.average_idf).any()  # words in > half the docs: floored
    for question in ["user: " + " ".join(rng.choices(words, k=8)) for _ in range(10)]:
        assert np.array_equal(index.scores(question.split()), reference_bm25(texts, question))


def test_bm25_degenerate_corpora() -> None:
    assert np.array_equal(BM25Index.build(["", "  \n"]).scores(["a"]), [0.0, 0.0])
    assert BM25Index.build([]).scores(["a"]).size == 0
    same = ["a b", "a b", "a b"]
    assert np.array_equal(BM25Index.build(same).scores(["a"]), reference_bm25(same, "a"))
    surrogate = ["a \ud800 b", "b c"]  # not UTF-8 encodable: the Python path takes over
    assert np.array_equal(BM25Index.build(surrogate).scores(["b"]), reference_bm25(surrogate, "b"))


def test_bm25_retriever_ranking_and_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    persona = make_persona(tmp_path)
    builds: list[int] = []
    real_build = BM25Index.build
    monkeypatch.setattr(
        BM25Index, "build", classmethod(lambda cls, texts: builds.append(1) or real_build(texts))
    )
    retriever = r.BM25Retriever(cache_size=2)
    question = "what did I buy for my road bike?"
    got = retriever.rank(persona, make_query(question, None), 8)
    expected = np.argsort(-reference_bm25(persona.texts, question), kind="stable")
    assert got == [persona.session_ids[i] for i in expected]
    assert got[0] == "sess_04" and len(set(got)) == 8
    retriever.rank(persona, make_query("cat", None), 3)
    assert builds == [1]  # cached per persona key
    for seed in (1, 2):
        other = make_persona(tmp_path / str(seed), texts=TOPICS[: seed + 2])  # other keys
        retriever.rank(other, make_query("x", None), 1)
    retriever.rank(persona, make_query("cat", None), 3)
    assert builds == [1, 1, 1, 1]  # evicted by the LRU of 2, rebuilt


def _keyed(texts: Sequence[str]) -> tuple[str, ...]:
    """``pairs.text_key`` of each text (lone surrogates allowed, as in a Python-made persona)."""
    import hashlib

    return tuple(hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts)


@pytest.mark.parametrize("seed", range(8))
def test_bm25_from_cached_doc_terms_is_rank_bm25_bit_for_bit(seed: int) -> None:
    rng = random.Random(seed)
    shared = random_corpus(rng, 60)
    terms = r.DocTermCache()
    for _ in range(4):  # personas drawing from one pool of texts: later ones mostly cached
        texts = rng.sample(shared, rng.choice([1, 2, 7, 30]))
        texts += random_corpus(rng, rng.choice([0, 1, 3]))
        texts += texts[:1]  # a text twice in one persona
        if not any(t.split() for t in texts):
            texts.append("the cat")
        index = r.BM25Index.from_doc_terms(terms.get(_keyed(texts), lambda t=texts: t),
                                           terms.vocab)
        for question in ["the cat", "cat cat run", "caf\u00e9 \u65e5\u672c the", "nothing here",
                         "x\u00a0the\u3000cat", "a the my I"]:
            expected = reference_bm25(texts, question)
            assert np.array_equal(index.scores(question.split()), expected), (seed, question)
        assert index.average_idf == BM25Index.build(texts).average_idf


def test_bm25_from_cached_doc_terms_degenerate() -> None:
    terms = r.DocTermCache()
    for texts in (["", "  \n"], ["a b", "a b", "a b"], ["a \ud800 b", "b c"], ["x"]):
        index = r.BM25Index.from_doc_terms(terms.get(_keyed(texts), lambda t=texts: t),
                                           terms.vocab)
        for q in (["a"], ["b"], ["x", "x"], []):
            if not any(t.split() for t in texts):  # rank_bm25 divides by zero: all scores 0
                assert np.array_equal(index.scores(q), np.zeros(len(texts)))
                continue
            assert np.array_equal(index.scores(q), reference_bm25(texts, " ".join(q)))
    assert r.BM25Index.from_doc_terms([], terms.vocab).scores(["a"]).size == 0


def test_bm25_retriever_with_text_keys_counts_each_text_once(tmp_path: Path) -> None:
    retriever = r.BM25Retriever()
    loads: list[int] = []

    def persona_of(texts: Sequence[str], seed: int) -> Persona:
        base = make_persona(tmp_path / str(seed), texts=texts, seed=seed)
        lazy = r.LazyTexts(lambda: loads.append(1) or list(texts))
        keys = _keyed(texts)
        key = store.persona_key(base.session_ids, keys, base.created_at)
        return dataclasses.replace(base, key=key, texts=lazy, text_keys=keys)

    first = persona_of(TOPICS, 0)
    question = "what did I buy for my road bike?"
    got = retriever.rank(first, make_query(question, None), 8)
    expected = np.argsort(-reference_bm25(TOPICS, question), kind="stable")
    assert got == [first.session_ids[i] for i in expected]
    assert loads == [1] and len(retriever.terms) == len(set(TOPICS))
    # Another persona of the same texts in another order: nothing left to read or split.
    shuffled = list(reversed(TOPICS))
    second = persona_of(shuffled, 1)
    got = retriever.rank(second, make_query(question, None), 8)
    expected = np.argsort(-reference_bm25(shuffled, question), kind="stable")
    assert got == [second.session_ids[i] for i in expected]
    assert loads == [1]


def test_bm25_makes_only_the_texts_not_counted_yet(tmp_path: Path) -> None:
    """A persona whose texts can be made a few at a time (a turn persona's rows: LazyTexts
    with ``some``) has only the texts not counted yet made, never its every text; the scores
    stay BM25Okapi's."""
    retriever = r.BM25Retriever()
    made: list[list[int]] = []
    loads: list[int] = []

    def persona_of(texts: Sequence[str], seed: int) -> Persona:
        base = make_persona(tmp_path / str(seed), texts=texts, seed=seed)
        lazy = r.LazyTexts(lambda: loads.append(1) or list(texts),
                           lambda rows: made.append(list(rows)) or [texts[i] for i in rows])
        keys = _keyed(texts)
        key = store.persona_key(base.session_ids, keys, base.created_at)
        return dataclasses.replace(base, key=key, texts=lazy, text_keys=keys)

    question = "what did I buy for my road bike?"
    retriever.rank(persona_of(TOPICS[:5], 0), make_query(question, None), 3)
    assert made == [[0, 1, 2, 3, 4]]
    texts = [TOPICS[6], *TOPICS[:5], TOPICS[5]]  # two new texts, first and last
    second = persona_of(texts, 1)
    got = retriever.rank(second, make_query(question, None), 7)
    assert made[1:] == [[0, 6]] and loads == []
    expected = np.argsort(-reference_bm25(texts, question), kind="stable")
    assert got == [second.session_ids[i] for i in expected]
    assert [s for s, _ in retriever.last_scores or []] == got
    with pytest.raises(ValueError, match="2 rows asked, 1 texts made"):
        r.DocTermCache().get(_keyed(["a", "b"]), lambda: ["a", "b"], lambda rows: ["a"])


def test_doc_term_cache_is_bounded() -> None:
    terms = r.DocTermCache(max_postings=6)
    texts = ["a b c", "d e f", "g h i"]
    keys = _keyed(texts)
    terms.get(keys[:1], lambda: texts[:1])
    terms.get(keys[1:2], lambda: texts[1:2])
    assert len(terms) == 2
    terms.get(keys[2:], lambda: texts[2:])  # 9 postings > 6: the oldest goes
    assert keys[0] not in terms and keys[2] in terms
    assert [d.length for d in terms.get(keys, lambda: texts)] == [3, 3, 3]  # all in hand kept
    with pytest.raises(ValueError, match="text keys"):
        r.DocTermCache().get(keys, lambda: texts[:1])


# --------------------------------------------------------------------------- user retrievers


def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_load_dotted_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = write_module(
        tmp_path,
        monkeypatch,
        "user_ret_forms",
        """
        class ByClass:
            name = "by-class"
            def rank(self, persona, query, limit):
                return list(persona.session_ids)[:limit]

        class Nested:
            class Inner:
                def rank(self, persona, query, limit):
                    return ["inner"]

        def factory():
            return ByClass()

        def plain(persona, query, limit):
            return list(reversed(persona.session_ids))[:limit]

        instance = ByClass()
    """,
    )
    persona = make_persona(tmp_path)
    query = make_query("q", None)
    by_class = r.load_dotted(f"{mod}:ByClass")
    assert by_class.name == "by-class"
    assert by_class.rank(persona, query, 2) == ["sess_00", "sess_01"]
    assert r.load_dotted(f"{mod}:factory").name == "by-class"
    assert r.load_dotted(f"{mod}:instance").rank(persona, query, 1) == ["sess_00"]
    inner = r.load_dotted(f"{mod}:Nested.Inner")
    assert inner.name == "Inner" and inner.rank(persona, query, 1) == ["inner"]
    fn = r.load_dotted(f"{mod}:plain")
    assert fn.name == "plain" and fn.rank(persona, query, 1) == ["sess_07"]
    assert r.get_retriever(f"{mod}:plain").name == "plain"


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("no_colon_here", "is not 'package.module:attr'"),
        ("user_ret_bad:", "is not 'package.module:attr'"),
        ("definitely_not_a_module_xyz:thing", "cannot import module"),
        ("user_ret_bad:missing", "has no attribute 'missing'"),
        ("user_ret_bad:NOT_CALLABLE", "is not a Retriever"),
        ("user_ret_bad:NoRank", "is not a Retriever"),
        ("user_ret_bad:two_args", "is not a Retriever"),
        ("user_ret_bad:Exploding", "creating it failed"),
        ("user_ret_broken:x", "cannot import module"),
    ],
)
def test_load_dotted_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, match: str
) -> None:
    write_module(
        tmp_path,
        monkeypatch,
        "user_ret_bad",
        """
        NOT_CALLABLE = 3
        class NoRank:
            pass
        def two_args(a, b):
            return []
        class Exploding:
            def __init__(self):
                raise RuntimeError("boom\\nsecond line")
            def rank(self, persona, query, limit):
                return []
    """,
    )
    write_module(tmp_path, monkeypatch, "user_ret_broken", "raise SyntaxError('bad\\nworse')\n")
    with pytest.raises(RetrievalEvalError, match=match) as info:
        r.load_dotted(spec)
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- vipune binary


@pytest.fixture
def fake_vipune(tmp_path: Path) -> Path:
    if os.name != "posix":
        pytest.skip("the stand-in wrapper is a POSIX shell script")
    wrapper = tmp_path / "bin" / "vipune"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n', encoding="utf-8")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return wrapper


def vipune_env(
    tmp_path: Path, mode: str = "", vectors: dict[str, list[float]] | None = None, **extra: str
) -> dict[str, str]:
    env = dict(os.environ)
    env["FAKE_VIPUNE_MODE"] = mode
    env["FAKE_VIPUNE_LOG"] = str(tmp_path / "calls.jsonl")
    if vectors is not None:
        path = tmp_path / "vectors.json"
        path.write_text(json.dumps(vectors), encoding="utf-8")
        env["FAKE_VIPUNE_VECTORS"] = str(path)
    env.update(extra)
    return env


def test_vipune_binary_ranks_like_the_reference(tmp_path: Path, fake_vipune: Path) -> None:
    persona = make_persona(tmp_path)
    questions = ["-what is my garden budget?", 'cat "Miso" it\'s']
    qvecs = {q: (persona.vectors[1] + persona.vectors[i]).tolist() for i, q in enumerate(questions)}
    env = vipune_env(
        tmp_path, vectors=qvecs, VIPUNE_EMBEDDING_MODEL="other/model", VIPUNE_RECENCY_WEIGHT="0.9"
    )
    retriever = r.VipuneBinaryRetriever(binary=str(fake_vipune), timeout=30, env=env)
    for question in questions:
        qvec = np.asarray(qvecs[question], dtype=np.float32)
        got = retriever.rank(persona, make_query(question, None), 5)
        assert got == r.HybridRetriever().rank(persona, make_query(question, qvec), 5)
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    argv = calls[0]["argv"]
    db = str(Path(persona.store_path()).resolve())
    assert argv == [
        "--json",
        "--db-path",
        db,
        "--project",
        store.PROJECT_ID,
        "search",
        "--hybrid",
        "--recency",
        "0",
        "--limit",
        "5",
        "--",
        questions[0],
    ]
    assert calls[0]["env"] == {}  # VIPUNE_* settings that change the measurement are scrubbed


@pytest.mark.parametrize(
    ("mode", "match"),
    [
        ("crash", r"exit status 1: stderr: thread 'main' panicked at src/sqlite/search.rs:42"),
        ("garbage", "not JSON"),
        ("unknown_ids", "not rows of this store"),
        ("duplicates", "repeats"),
        ("wrong_shape", "only 'results'"),
        ("json_error", "exit status 1: Inference error: fake model failure"),
    ],
)
def test_vipune_binary_failures_fail_the_item(
    tmp_path: Path, fake_vipune: Path, mode: str, match: str
) -> None:
    persona = make_persona(tmp_path)
    retriever = r.VipuneBinaryRetriever(fake_vipune, timeout=30, env=vipune_env(tmp_path, mode))
    with pytest.raises(RetrieverError, match=match) as info:
        retriever.rank(persona, make_query("garden budget", None), 5)
    assert "\n" not in str(info.value) and "question q1" in str(info.value)


def test_vipune_binary_timeout_kills(tmp_path: Path, fake_vipune: Path) -> None:
    persona = make_persona(tmp_path)
    persona.store_path()
    retriever = r.VipuneBinaryRetriever(fake_vipune, timeout=0.5, env=vipune_env(tmp_path, "hang"))
    start = time.monotonic()
    with pytest.raises(RetrieverError, match=r"no answer within 0\.5 s"):
        retriever.rank(persona, make_query("garden", None), 5)
    assert time.monotonic() - start < 10


def test_vipune_binary_fts_only_fallback_and_limit_clamp(tmp_path: Path, fake_vipune: Path) -> None:
    persona = make_persona(tmp_path)
    retriever = r.VipuneBinaryRetriever(fake_vipune, env=vipune_env(tmp_path))
    assert retriever.rank(persona, make_query("bike", None), 50_000) == ["sess_04"]
    assert retriever.command(Path("/db"), "-q", 10)[-4:] == ["--limit", "10", "--", "-q"]
    argv = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[0])["argv"]
    assert argv[argv.index("--limit") + 1] == "10000"


def test_vipune_binary_missing(tmp_path: Path) -> None:
    with pytest.raises(RetrievalEvalError) as info:
        r.VipuneBinaryRetriever(binary="vipune-definitely-missing-xyz")
    assert str(info.value) == (
        "vipune binary 'vipune-definitely-missing-xyz' not found on PATH; "
        "install vipune or pass --retrieval-eval-vipune=PATH"
    )
    not_exec = tmp_path / "vipune"
    not_exec.write_text("#!/bin/sh\n")
    with pytest.raises(RetrievalEvalError, match="is not executable"):
        r.VipuneBinaryRetriever(binary=str(not_exec))
    with pytest.raises(RetrievalEvalError, match="does not exist"):
        r.get_retriever("vipune", {"binary": str(tmp_path / "nope")})


def test_vipune_from_registry_on_path(
    tmp_path: Path, fake_vipune: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fake_vipune.parent) + os.pathsep + os.environ["PATH"])
    retriever = r.get_retriever("vipune", {"timeout": 12})
    assert isinstance(retriever, r.VipuneBinaryRetriever)
    assert retriever.binary == fake_vipune.resolve() and retriever.timeout == 12.0
    with pytest.raises(RetrievalEvalError, match="must be a number"):
        r.get_retriever("vipune", {"timeout": "soon"})

    class Settings:  # settings.Settings-like object
        vipune = "vipune"
        vipune_timeout = 7.5

    from_settings = r.get_retriever("vipune", Settings())
    assert isinstance(from_settings, r.VipuneBinaryRetriever) and from_settings.timeout == 7.5


@pytest.mark.parametrize(
    ("info", "ok"),
    [
        (
            {"model": "BAAI/bge-small-en-v1.5", "pooling": "mean", "query_prefix": "", "dim": 384},
            True,
        ),
        ({"name": "BAAI/bge-small-en-v1.5"}, True),
        (
            {"model": "BAAI/bge-small-en-v1.5", "config": {"pooling": "mean", "query_prefix": ""}},
            True,
        ),
        ({"model": "BAAI/bge-small-en-v1.5", "pooling": "cls"}, False),
        ({"model": "BAAI/bge-small-en-v1.5", "query_prefix": "Represent this: "}, False),
        ({"model": "BAAI/bge-small-en-v1.5", "dim": 768}, False),
        ({"model": "sentence-transformers/all-MiniLM-L6-v2", "dim": 384}, False),
        ({}, False),
    ],
)
def test_check_compatible(info: dict[str, object], ok: bool) -> None:
    if ok:
        r.check_compatible(info)
        return
    with pytest.raises(RetrievalEvalError, match="cannot use these vectors") as err:
        r.check_compatible(info)
    assert "\n" not in str(err.value)


def test_check_compatible_accepts_objects() -> None:
    class Info:
        name = "BAAI/bge-small-en-v1.5"
        dim = 384

    r.check_compatible(Info())
    r.VipuneBinaryRetriever.check_compatible({"model": "BAAI/bge-small-en-v1.5"})


def test_the_wing_exports_each_public_name_from_its_home_module() -> None:
    """``pytest_retrieval_eval.retrievers`` loads its names on first use: each resolves to the
    object of the module that defines it, and nothing is exported that has no home."""
    homes = r._HOMES  # type: ignore[attr-defined]
    assert sorted(r.__all__) == sorted(homes)
    for name in r.__all__:
        value = getattr(r, name)
        assert getattr(sys.modules[f"pytest_retrieval_eval.retrievers.{homes[name]}"],
                       name) is value
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        r.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_the_what_if_grammar_loads_without_numpy() -> None:
    """The option validators read ``retrievers.variants``: importing it (and so the wing)
    loads no numpy and none of the retrievers."""
    import subprocess

    code = ("import sys; import pytest_retrieval_eval.retrievers.variants; "
            "print(sorted(m for m in ('numpy', 'sqlite3', 'pytest_retrieval_eval.retrievers.base')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_a_nul_in_the_question_fails_fts_and_hybrid_naming_the_question(
        tmp_path: Path) -> None:
    """Issue 23: vipune's FTS5 query fails on a NUL (vipune/fts.py cites where); semantic
    ranks it. The line names the question and never says to delete the store."""
    persona = make_persona(tmp_path)
    query = make_query("running\x00 a week", persona.vectors[6])
    for retriever in (r.HybridRetriever(), r.FtsRetriever()):
        with pytest.raises(RetrieverError) as info:
            retriever.rank(persona, query, 5)
        line = str(info.value)
        assert line.startswith(f"{retriever.name}: question ")
        assert "unterminated string" in line and "NUL" in line and "delete" not in line
    assert r.SemanticRetriever().rank(persona, query, 3)[0] == "sess_06"


def test_vipune_binary_cannot_be_asked_a_question_holding_a_nul(
        tmp_path: Path, fake_vipune: Path) -> None:
    persona = make_persona(tmp_path)
    retriever = r.VipuneBinaryRetriever(binary=str(fake_vipune), timeout=30,
                                        env=vipune_env(tmp_path))
    with pytest.raises(RetrieverError, match=r"NUL character .* no command-line argument"):
        retriever.rank(persona, make_query("cat\x00", None), 5)
    assert not (tmp_path / "calls.jsonl").exists()  # never ran
