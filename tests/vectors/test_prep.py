"""Prep: embed what the cache lacks, chunk by chunk, resumable after Ctrl-C and SIGKILL."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from pytest_retrieval_eval.data.pairs import text_key
from pytest_retrieval_eval.vectors.cache import CacheWarning, VectorCache
from pytest_retrieval_eval.vectors.prep import (
    WAIT_LABEL,
    PrepInterrupted,
    PrepStats,
    query_key,
    query_prefix,
    run_prep,
)
from tests.support import ROOT

DIM = 8


# --------------------------------------------------------------------------- fakes


@dataclass(frozen=True)
class FakePair:
    question: str
    text_keys: tuple[str, ...]

    @property
    def question_key(self) -> str:
        return text_key(self.question)


@dataclass
class FakeCorpus:
    """Personas as lists of session texts; the same text may appear in several personas."""

    personas: list[tuple[str, list[str]]]
    pairs: list[FakePair] = field(init=False)
    stats: dict[str, int] = field(init=False)
    store: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.store = {}
        self.pairs = []
        for question, sessions in self.personas:
            for text in sessions:
                self.store[text_key(text)] = text
            self.store[text_key(question)] = question
            self.pairs.append(FakePair(question, tuple(text_key(t) for t in sessions)))
        self.stats = {"slots": sum(len(s) for _, s in self.personas)}

    def texts(self, keys: Sequence[str]) -> list[str]:
        return [self.store[k] for k in keys]


def fake_vector(text: str, dim: int = DIM) -> npt.NDArray[np.float32]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    out: npt.NDArray[np.float32] = (v / np.linalg.norm(v)).astype(np.float32)
    return out


class FakeEmbedder:
    """Deterministic vectors from the text's hash; records every text it embeds."""

    def __init__(self, *, prefix: str = "", dim: int = DIM, fail_on_call: int | None = None,
                 delay: float = 0.0) -> None:
        self.name = "fake-model"
        self.dim = dim
        self.prefix = prefix
        self.fingerprint = hashlib.sha256(f"fake|{dim}|{prefix}".encode()).hexdigest()
        self.embedded: list[str] = []
        self.calls = 0
        self.fail_on_call = fail_on_call
        self.delay = delay

    def info(self) -> dict[str, object]:
        return {"name": self.name, "fingerprint": self.fingerprint, "dim": self.dim,
                "pooling": "mean", "max_length": 512, "query_prefix": self.prefix}

    def embed(self, texts: Sequence[str],
              progress: Callable[[int], None] | None = None) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self.fail_on_call is not None and self.calls == self.fail_on_call:
            raise KeyboardInterrupt
        time.sleep(self.delay)
        self.embedded.extend(texts)
        if progress is not None:
            progress(len(texts))
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            out[i] = fake_vector(text, self.dim)
        return out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        vector: npt.NDArray[np.float32] = self.embed([self.prefix + text])[0]
        return vector


def make_corpus(n_personas: int = 6, sessions: int = 10, shared: int = 3) -> FakeCorpus:
    personas = []
    for p in range(n_personas):
        texts = [f"shared session {i}" for i in range(shared)]
        texts += [f"persona {p} session {i}" for i in range(sessions - shared)]
        personas.append((f"what did persona {p} say?", texts))
    return FakeCorpus(personas)


def open_cache(root: Path, embedder: FakeEmbedder) -> VectorCache:
    return VectorCache(root, embedder.fingerprint, embedder.dim, embedder.info())


def all_vectors(corpus: FakeCorpus, cache: VectorCache, prefix: str) -> np.ndarray:
    keys = sorted({k for p in corpus.pairs for k in p.text_keys}
                  | {query_key(p.question, prefix) for p in corpus.pairs})
    return cache.get(keys)


# --------------------------------------------------------------------------- query keys


def test_query_key_includes_prefix() -> None:
    embedder = FakeEmbedder(prefix="Represent: ")
    assert query_prefix(embedder) == "Represent: "
    assert query_prefix(embedder.info()) == "Represent: "
    assert query_prefix("x: ") == "x: "
    assert query_key("why?", embedder) == text_key("Represent: why?")
    assert query_key("why?", "Represent: ") == query_key("why?", embedder.info())
    assert query_key("why?", "") == text_key("why?")


# --------------------------------------------------------------------------- prep


def test_prep_embeds_once_then_nothing(tmp_path: Path) -> None:
    corpus = make_corpus()
    embedder = FakeEmbedder()
    cache = open_cache(tmp_path, embedder)
    seen: list[tuple[str, int, int | None]] = []
    stats = run_prep(corpus, embedder, cache, lambda *a: seen.append(a), chunk_size=7)
    unique = 3 + 6 * 7 + 6  # shared sessions + own sessions + questions
    assert stats == PrepStats(slots=60, unique_texts=unique, embedded_now=unique, from_cache=0,
                              seconds=stats.seconds)
    # Content addressing: a session shared by six personas is embedded once.
    assert len(embedder.embedded) == unique == len(set(embedder.embedded))
    assert seen[0] == ("embed", 0, unique) and seen[-1] == ("embed", unique, unique)
    assert all(label == "embed" for label, _, _ in seen)

    again = FakeEmbedder()
    stats2 = run_prep(corpus, again, open_cache(tmp_path, again))
    assert (stats2.embedded_now, stats2.from_cache) == (0, unique)
    assert again.embedded == []

    for pair in corpus.pairs:
        np.testing.assert_array_equal(
            cache.get(list(pair.text_keys)),
            np.stack([fake_vector(t) for t in corpus.texts(pair.text_keys)]))


def test_a_second_prep_waits_and_embeds_only_what_is_left(tmp_path: Path) -> None:
    corpus = make_corpus()
    first, second = FakeEmbedder(delay=0.05), FakeEmbedder()
    started = threading.Event()
    errors: list[BaseException] = []

    def first_progress(label: str, done: int, total: int | None) -> None:
        if label == "embed":
            started.set()  # inside its turn: it holds the prep lock now

    def run_first() -> None:
        try:
            run_prep(corpus, first, open_cache(tmp_path, first), first_progress, chunk_size=5)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=run_first)
    thread.start()
    try:
        assert started.wait(30)
        seen: list[tuple[str, int, int | None]] = []
        stats = run_prep(corpus, second, open_cache(tmp_path, second),
                         lambda *a: seen.append(a))
    finally:
        thread.join(60)
    assert not errors
    unique = 3 + 6 * 7 + 6
    assert len(first.embedded) == unique  # the first prep did all the work, once
    assert second.embedded == [] and (stats.embedded_now, stats.from_cache) == (0, unique)
    assert seen[0] == (WAIT_LABEL, 0, None)  # it said why it waited
    assert seen[-1] == ("embed", 0, 0)


def test_prep_embeds_queries_with_prefix(tmp_path: Path) -> None:
    corpus = make_corpus(2, 3, 1)
    embedder = FakeEmbedder(prefix="query: ")
    cache = open_cache(tmp_path, embedder)
    run_prep(corpus, embedder, cache)
    q = corpus.pairs[0].question
    assert "query: " + q in embedder.embedded and q not in embedder.embedded
    np.testing.assert_array_equal(cache.get([query_key(q, embedder)])[0],
                                  embedder.embed_query(q))
    assert cache.missing([text_key(q)]) == [text_key(q)]
    # Passages carry no prefix.
    assert not any(t.startswith("query: shared") for t in embedder.embedded)


def test_prep_picks_up_only_new_texts(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    cache = open_cache(tmp_path, embedder)
    run_prep(make_corpus(3), embedder, cache)
    bigger = make_corpus(4)
    later = FakeEmbedder()
    stats = run_prep(bigger, later, open_cache(tmp_path, later))
    assert stats.embedded_now == 7 + 1  # persona 3's own sessions and question
    assert sorted(later.embedded) == sorted(
        [f"persona 3 session {i}" for i in range(7)] + ["what did persona 3 say?"])


def test_interrupted_prep_resumes(tmp_path: Path) -> None:
    corpus = make_corpus(8, 12, 2)
    reference = FakeEmbedder()
    ref_cache = open_cache(tmp_path / "ref", reference)
    run_prep(corpus, reference, ref_cache, chunk_size=10)

    broken = FakeEmbedder(fail_on_call=3)
    cache = open_cache(tmp_path / "cache", broken)
    with pytest.raises(PrepInterrupted) as info:
        run_prep(corpus, broken, cache, chunk_size=10)
    assert isinstance(info.value, KeyboardInterrupt)
    assert info.value.saved == 20  # two chunks committed, the third lost
    assert info.value.remaining == 2 + 8 * 10 + 8 - 20
    leftovers = [p.name for p in cache.directory.iterdir() if p.name.startswith(".tmp-")]
    assert leftovers == []

    resumed = FakeEmbedder()
    stats = run_prep(corpus, resumed, open_cache(tmp_path / "cache", resumed), chunk_size=10)
    assert stats.from_cache == 20 and stats.embedded_now == stats.unique_texts - 20
    assert not set(resumed.embedded) & set(broken.embedded)  # nothing embedded twice
    np.testing.assert_array_equal(
        all_vectors(corpus, open_cache(tmp_path / "cache", resumed), ""),
        all_vectors(corpus, ref_cache, ""))


def test_prep_quarantines_corrupt_shard_and_reembeds(tmp_path: Path) -> None:
    corpus = make_corpus(3, 5, 1)
    embedder = FakeEmbedder()
    cache = open_cache(tmp_path, embedder)
    run_prep(corpus, embedder, cache, chunk_size=5)
    shard = sorted(cache.directory.glob("shard-*.parquet"))[1]
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(Exception, match="corrupt"):  # the run phase refuses it
        all_vectors(corpus, open_cache(tmp_path, embedder), "")
    again = FakeEmbedder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = run_prep(corpus, again, open_cache(tmp_path, again), chunk_size=5)
    assert [w.category for w in caught] == [CacheWarning]
    assert str(shard) in str(caught[0].message)
    assert stats.quarantined == (str(shard),)
    assert stats.embedded_now == 5
    assert shard.with_name(shard.name + ".corrupt").exists()
    all_vectors(corpus, open_cache(tmp_path, again), "")


def test_prep_compacts_many_small_chunks(tmp_path: Path) -> None:
    corpus = make_corpus(6, 10, 3)
    embedder = FakeEmbedder()
    cache = open_cache(tmp_path, embedder)
    run_prep(corpus, embedder, cache, chunk_size=2)  # 26 chunks
    assert len(cache.own_shards()) == 1
    reference = FakeEmbedder()
    ref = open_cache(tmp_path / "ref", reference)
    run_prep(corpus, reference, ref)
    np.testing.assert_array_equal(all_vectors(corpus, cache, ""), all_vectors(corpus, ref, ""))


def test_prep_refuses_mismatched_cache(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    other = FakeEmbedder(prefix="x")
    with pytest.raises(ValueError, match="does not match"):
        run_prep(make_corpus(1), embedder, open_cache(tmp_path, other))


# --------------------------------------------------------------------------- SIGKILL

_KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from tests.vectors.test_prep import FakeEmbedder, make_corpus, open_cache
    from pytest_retrieval_eval.vectors.prep import run_prep
    embedder = FakeEmbedder(delay=0.05)
    corpus = make_corpus(10, 12, 2)
    print("ready", flush=True)
    run_prep(corpus, embedder, open_cache(Path({cache!r}), embedder), chunk_size=4)
    print("done", flush=True)
    """
)


def test_sigkill_mid_prep_then_resume(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    script = _KILL_SCRIPT.format(root=str(ROOT), cache=str(cache_dir))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    embedder = FakeEmbedder()
    directory = cache_dir / "vectors" / embedder.fingerprint
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if len(list(directory.glob("shard-*.parquet.sha256"))) >= 3:
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    committed = len(list(directory.glob("shard-*.parquet.sha256")))
    assert 3 <= committed < 31  # killed mid-way

    corpus = make_corpus(10, 12, 2)
    resumed = FakeEmbedder()
    stats = run_prep(corpus, resumed, open_cache(cache_dir, resumed), chunk_size=4)
    assert stats.from_cache >= 4 * committed - 4  # what was committed is not embedded again
    assert stats.from_cache + stats.embedded_now == stats.unique_texts
    reference = FakeEmbedder()
    ref = open_cache(tmp_path / "ref", reference)
    run_prep(corpus, reference, ref)
    np.testing.assert_array_equal(all_vectors(corpus, open_cache(cache_dir, resumed), ""),
                                  all_vectors(corpus, ref, ""))
    assert not [p for p in directory.iterdir() if p.name.startswith(".tmp-")]


# --------------------------------------------------------------------------- real modules


def test_real_corpus_and_model(tmp_path: Path) -> None:
    from pytest_retrieval_eval.data.dataset import DatasetSource
    from pytest_retrieval_eval.data.ingest import load_corpus
    from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder
    from tests.support.lme_factory import make_instance, write_dataset
    from tests.support.model_factory import make_model_dir

    instances = [make_instance("q1", session_prefix="shared", n_sessions=5),
                 make_instance("q2_abs", session_prefix="shared", n_sessions=6, gold=(2,)),
                 make_instance("q3", n_sessions=4, gold=(0, 3))]
    source = DatasetSource("tiny", write_dataset(tmp_path / "data.json", instances))
    corpus = load_corpus(source, tmp_path / "cache")
    model = make_model_dir(tmp_path, dim=16)
    embedder = load_embedder(str(model.path), EmbedConfig(query_prefix="query: "))
    cache = VectorCache(tmp_path / "cache", embedder.fingerprint, embedder.dim, embedder.info())
    stats = run_prep(corpus, embedder, cache, chunk_size=3)
    assert stats.slots == 15
    assert stats.unique_texts == 6 + 4 + 3  # shared personas' sessions are the same texts
    assert (stats.embedded_now, stats.from_cache) == (13, 0)
    for pair in corpus.pairs:
        np.testing.assert_allclose(cache.get(list(pair.text_keys)),
                                   embedder.embed(corpus.texts(pair.text_keys)), atol=1e-6)
        np.testing.assert_allclose(cache.get([query_key(pair.question, embedder)])[0],
                                   embedder.embed_query(pair.question), atol=1e-6)
        np.testing.assert_allclose(
            cache.get([query_key(pair.question, embedder)])[0],
            model.expected("query: " + pair.question), atol=1e-5)
    fresh = load_embedder(str(model.path), EmbedConfig(query_prefix="query: "))
    again = run_prep(corpus, fresh, VectorCache(tmp_path / "cache", fresh.fingerprint,
                                                fresh.dim, fresh.info()))
    assert (again.embedded_now, again.from_cache) == (0, 13)


def test_shards_checked_by_prep_are_not_hashed_again_when_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_retrieval_eval.io import checksums

    corpus = make_corpus()
    first = FakeEmbedder()
    run_prep(corpus, first, open_cache(tmp_path, first), chunk_size=7)
    again = FakeEmbedder()
    cache = open_cache(tmp_path, again)  # a later run: prep checks every shard in full
    run_prep(corpus, again, cache)
    hashed: list[Path] = []
    real = checksums.sha256_file
    monkeypatch.setattr(checksums, "sha256_file", lambda p, *a: hashed.append(p) or real(p, *a))
    all_vectors(corpus, cache, "")  # the run then reads through the same object
    assert hashed == []
