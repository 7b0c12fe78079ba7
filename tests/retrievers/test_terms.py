"""terms: a corpus's bm25 term counts, saved once, read back exactly, rebuilt when damaged."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from pytest_retrieval_eval import retrievers as r
from pytest_retrieval_eval.data.corpus import Corpus
from pytest_retrieval_eval.data.dataset import DatasetSource
from pytest_retrieval_eval.data.generator import instances as generator
from pytest_retrieval_eval.data.ingest import load_corpus
from pytest_retrieval_eval.errors import CacheError
from pytest_retrieval_eval.io import checksums
from pytest_retrieval_eval.retrievers import terms as terms_mod
from pytest_retrieval_eval.retrievers.bm25_index import stable_order
from pytest_retrieval_eval.retrievers.terms import count_terms, ensure_table, open_table, table_path
from tests.support.lme_factory import make_instance, make_turns, write_dataset

ODD_TEXTS = [
    "caf\u00e9 \u65e5\u672c the the",  # non-ASCII tokens, a repeat
    "x\u00a0the\u3000cat\u2028dog",  # white space str.split knows beyond ASCII
    "emoji \U0001F600 pair",  # a surrogate pair in the JSON (a lone one is refused)
    "",  # an empty turn still renders "user: " in the session text
    "a" * 300,  # one long token
]


def corpus_of(tmp_path: Path, instances: list[dict[str, object]]) -> Corpus:
    path = write_dataset(tmp_path / "data" / "d.json", instances)
    return load_corpus(DatasetSource("d", path), tmp_path / "cache")


@pytest.fixture
def odd_corpus(tmp_path: Path) -> Corpus:
    turns = [{"role": "user", "content": text} for text in ODD_TEXTS]
    a = make_instance("qa", n_sessions=3)
    a["haystack_sessions"][0] = turns
    b = make_instance("qb", n_sessions=3, session_prefix="qa")  # shares qa's sessions
    b["haystack_sessions"][0] = turns
    b["haystack_sessions"].append(make_turns("only in qb"))
    b["haystack_session_ids"].append("qb_extra")
    b["haystack_dates"].append(b["haystack_dates"][0])
    return corpus_of(tmp_path, [a, b])


def tokens_and_counts(table: terms_mod.TermTable, key: str) -> list[tuple[str, int]]:
    doc = table.doc_terms(key)
    assert doc is not None
    return [(table.tokens[int(g)], int(c)) for g, c in zip(doc.terms[0], doc.terms[1],
                                                           strict=True)]


def test_saved_counts_are_text_split_counts(odd_corpus: Corpus, tmp_path: Path) -> None:
    path = ensure_table(odd_corpus, tmp_path / "cache")
    assert path == table_path(tmp_path / "cache", odd_corpus.dataset_sha256)
    table = open_table(path)
    keys = odd_corpus.all_text_keys()
    assert len(table) == len(keys)
    for key, text in zip(keys, odd_corpus.texts(keys), strict=True):
        expected = list(Counter(text.split()).items())  # first-appearance order
        assert tokens_and_counts(table, key) == expected
        doc = table.doc_terms(key)
        assert doc is not None and doc.length == len(text.split())
        assert doc.terms.dtype == np.int32 and doc.terms.shape == (2, len(expected))
    assert table.doc_terms("no such key") is None


def test_vocab_ids_follow_first_appearance_and_extend(odd_corpus: Corpus, tmp_path: Path) -> None:
    table = open_table(ensure_table(odd_corpus, tmp_path / "cache"))
    vocab = table.vocab()
    assert list(vocab.values()) == list(range(len(table.tokens)))
    fresh: dict[str, int] = {}
    for text in odd_corpus.texts(odd_corpus.all_text_keys()):
        count_terms(text, fresh)
    assert list(fresh) == table.tokens  # the same ids a fresh count gives
    doc = count_terms("brand-new-token the", vocab)
    assert int(doc.terms[0][0]) == len(table.tokens)  # new ids go past the table's
    assert "brand-new-token" not in table.vocab()  # each call is a fresh mapping


def test_bm25_from_the_table_is_rank_bm25(tmp_path: Path) -> None:
    config = generator.SAMPLE.scaled(instances=12, sessions=30)
    path = tmp_path / "data" / "gen.json"
    generator.write_dataset(config, path)
    corpus = load_corpus(DatasetSource("gen", path), tmp_path / "cache")
    table_file = ensure_table(corpus, tmp_path / "cache")
    retriever = r.BM25Retriever()
    loads: list[Path] = []
    retriever.use_table(lambda: loads.append(table_file) or open_table(table_file))
    texts_read: list[int] = []
    scored = 0
    for pair in corpus.pairs:
        if pair.abstention:
            continue
        texts = corpus.texts(list(pair.text_keys))
        persona = r.Persona(
            key=pair.question_id, session_ids=tuple(pair.session_ids),
            created_at=tuple(pair.created_at),
            vectors=np.zeros((len(texts), 0), dtype=np.float32),
            texts=r.LazyTexts(lambda t=texts: texts_read.append(1) or t),
            store_path=lambda: Path("unused"), text_keys=tuple(pair.text_keys))
        query = r.Query(pair.question_id, pair.question_type, pair.question,
                        pair.question_date, None, ())
        got = retriever.rank(persona, query, len(texts))
        scores = BM25Okapi([t.split() for t in texts]).get_scores(pair.question.split())
        assert got == [pair.session_ids[i] for i in np.argsort(-scores, kind="stable")]
        scored += 1
    assert scored >= 10
    assert loads == [table_file]  # read once
    assert texts_read == [] and len(retriever.terms) == 0  # no text was split


def test_a_saved_table_is_reused_not_rebuilt(odd_corpus: Corpus, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = ensure_table(odd_corpus, cache)
    before = path.stat().st_mtime_ns
    seen: list[tuple[object, ...]] = []
    assert ensure_table(odd_corpus, cache, lambda *a: seen.append(a)) == path
    assert path.stat().st_mtime_ns == before and seen == []


def test_building_shows_progress(odd_corpus: Corpus, tmp_path: Path) -> None:
    seen: list[tuple[str, int, int | None]] = []
    ensure_table(odd_corpus, tmp_path / "cache", lambda *a: seen.append(a))
    n = len(odd_corpus.all_text_keys())
    assert seen[0] == ("bm25 term counts", 0, n) and seen[-1] == ("bm25 term counts", n, n)


def test_a_damaged_table_is_refused_then_rebuilt(odd_corpus: Corpus, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = ensure_table(odd_corpus, cache)
    good = path.read_bytes()
    data = bytearray(good)
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError) as info:
        open_table(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and "delete the file" in message
    ensure_table(odd_corpus, cache)  # a run that ranks with bm25 rebuilds it
    assert path.read_bytes() == good and open_table(path).tokens


def test_a_new_table_is_stamped_so_no_process_rehashes_it(
        odd_corpus: Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = ensure_table(odd_corpus, tmp_path / "cache")
    checksums._memo.clear()  # a later process
    hashed: list[Path] = []
    monkeypatch.setattr(checksums, "sha256_file", lambda p, *a: hashed.append(p) or "0")
    assert open_table(path).tokens
    assert hashed == []


def test_a_broken_archive_with_a_matching_sidecar_is_one_line(odd_corpus: Corpus,
                                                              tmp_path: Path) -> None:
    path = ensure_table(odd_corpus, tmp_path / "cache")
    path.write_bytes(b"PK\x03\x04 not really a zip archive")
    checksums.write_sidecar(path, checksums.sha256_file(path))  # copied along with it
    with pytest.raises(CacheError) as info:
        open_table(path)
    assert "\n" not in str(info.value) and "damaged (unreadable" in str(info.value)


def test_a_table_of_another_corpus_file_is_rebuilt(odd_corpus: Corpus, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = ensure_table(odd_corpus, cache)
    with pytest.raises(CacheError, match="another corpus file"):
        open_table(path, "0" * 64)
    sidecar = odd_corpus.path.with_name(odd_corpus.path.name + ".sha256")
    sidecar.write_text("f" * 64 + "  x\n", encoding="ascii")  # as if the corpus were rebuilt
    before = path.stat().st_mtime_ns
    ensure_table(odd_corpus, cache)
    assert path.stat().st_mtime_ns != before
    assert open_table(path, "f" * 64).tokens


def test_a_missing_table_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match=r"bm25 term counts .* are missing; run again"):
        open_table(tmp_path / "terms" / "nothing.npz")


def test_an_interrupted_build_leaves_nothing_behind(odd_corpus: Corpus, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    target = table_path(cache, odd_corpus.dataset_sha256)
    target.parent.mkdir(parents=True)
    stale = target.with_name(f".{target.stem}.999.dead.tmp")  # a build killed earlier
    stale.write_bytes(b"half")
    real = terms_mod.count_terms
    calls = []

    def interrupted(text: str, vocab: dict[str, int]) -> terms_mod.DocTerms:
        calls.append(1)
        if len(calls) > 3:
            raise KeyboardInterrupt
        return real(text, vocab)

    monkeypatch.setattr(terms_mod, "count_terms", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ensure_table(odd_corpus, cache)
    assert not target.exists() and not stale.exists()
    monkeypatch.setattr(terms_mod, "count_terms", real)
    ensure_table(odd_corpus, cache)  # the next run builds it whole
    assert not list(target.parent.glob(".*.tmp"))
    assert open_table(target).tokens


def test_an_unwritable_place_is_one_line(odd_corpus: Corpus, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "terms").write_text("a file where the folder should be", encoding="utf-8")
    with pytest.raises(CacheError, match=r"bm25 term counts .* cannot be written"):
        ensure_table(odd_corpus, cache)


def test_a_full_disk_is_named_as_such(odd_corpus: Corpus, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27.13: ENOSPC while saving says the disk is full (not "make DIR writable"),
    and leaves no temp file behind."""
    import errno

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(terms_mod.np, "savez", full)
    cache = tmp_path / "cache"
    with pytest.raises(CacheError) as caught:
        ensure_table(odd_corpus, cache)
    message = str(caught.value)
    assert "\n" not in message and "writable" not in message
    assert re.search(r"^bm25 term counts .* cannot be written \(No space left on device\); "
                     r"the disk is full; free disk space in .*terms, or choose another "
                     r"--retrieval-eval-cache$", message), message
    assert not list((cache / "terms").glob(".*.tmp"))


def test_a_corpus_of_one_text(tmp_path: Path) -> None:
    # Empty sessions are not memory rows, so the corpus holds the question alone.
    blank = make_instance("qa", n_sessions=2)
    blank["haystack_sessions"] = [[], []]
    blank["question"] = "?"
    corpus = corpus_of(tmp_path, [blank])
    table = open_table(ensure_table(corpus, tmp_path / "cache"))
    keys = corpus.all_text_keys()
    for key, text in zip(keys, corpus.texts(keys), strict=True):
        assert tokens_and_counts(table, key) == list(Counter(text.split()).items())
    assert len(table) == 1 and table.tokens == ["?"]  # the question's one token


def test_doc_term_cache_serves_the_table_and_counts_the_rest(odd_corpus: Corpus,
                                                             tmp_path: Path) -> None:
    table = open_table(ensure_table(odd_corpus, tmp_path / "cache"))
    cache = r.DocTermCache(table=table)
    keys = odd_corpus.all_text_keys()[:2]
    outside = "words never seen before the"
    outside_key = "k-outside"
    docs = cache.get([*keys, outside_key], lambda: [*odd_corpus.texts(keys), outside])
    assert len(cache) == 1  # only the text outside the table was split and kept
    assert [cache.vocab[t] for t in outside.split()[:3]] == [
        len(table.tokens), len(table.tokens) + 1, len(table.tokens) + 2]
    assert docs[0].length == len(odd_corpus.texts(keys[:1])[0].split())
    assert docs[2].length == 5 and docs[2].terms[1].tolist() == [1, 1, 1, 1, 1]


def test_split_pieces_gives_the_texts_tokens_for_both_splits() -> None:
    import random
    import re

    from pytest_retrieval_eval.retrievers.terms import split_pieces

    rng = random.Random(7)
    alphabet = ["a", "b", " ", "  ", "\n", "\u3000", "\x1c", "xyz", "\u00a0", "\u2028"]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        for piece in (1, 2, 3, 7):
            parts = list(split_pieces(text, piece=piece))
            assert [t for p in parts for t in p.split()] == text.split(), (text, piece)
            spaced = list(split_pieces(text, re.compile(" "), piece))
            assert [t for p in spaced for t in p.split(" ")] == text.split(" "), (text, piece)


_HUGE_SESSION = """
import sys
from pytest_retrieval_eval.retrievers import terms
words = " ".join(f"w{i % 997}x{i % 13}" for i in range(20000)) + " "
text = words * (100_000_000 // len(words))
doc = terms.count_terms(text, {})
assert doc.length == 20000 * (100_000_000 // len(words)), doc.length
print(doc.terms.shape[1], doc.length)
"""


def test_counting_a_100_mb_session_stays_in_bounded_memory(tmp_path: Path) -> None:
    """Issue 23.9: ``text.split()`` of a whole 100 MB session held ~16 M token strings at once
    (+1 GB; bm25 took 1.2 GB where the run's ingest took 0.6 GB). Split a piece at a time,
    the count costs no more than the text: it runs under an address-space cap of 800 MB."""
    import resource
    import subprocess
    import sys

    cap = 800 << 20

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _HUGE_SESSION], preexec_fn=limit, env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    distinct, length = map(int, proc.stdout.split())
    assert distinct == 997 * 13 and length > 10_000_000


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(st.sampled_from("ab c\n\t\u00a0x"), max_size=30), max_size=6),
       known=st.lists(st.sampled_from(["a", "b", "ab", "x", "c"]), max_size=4, unique=True))
def test_count_terms_gives_ids_as_setdefault_per_token_would(texts: list[str],
                                                             known: list[str]) -> None:
    """Each text's new tokens get the next vocabulary ids in order of first appearance
    (the order a saved table and a kept index record), known ones keep theirs; the counts
    and length are str.split()'s."""
    vocab = {token: i for i, token in enumerate(known)}
    reference = dict(vocab)
    for text in texts:
        doc = count_terms(text, vocab)
        counts = Counter(text.split())
        ids = [reference.setdefault(token, len(reference)) for token in counts]
        assert doc.terms[0].tolist() == ids and doc.terms[1].tolist() == list(counts.values())
        assert doc.length == len(text.split())
        assert vocab == reference


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 70_000), st.integers(0, (1 << 48) + 5),
                          st.sampled_from([0, 1, 0xFFFF, 0x10000, (1 << 32) - 1, 1 << 32])),
                max_size=300))
def test_stable_order_is_a_stable_argsort(values: list[int]) -> None:
    """The index's radix sort (one stable pass per 16 bits) orders postings as numpy's stable
    argsort does: equal term ids keep their document order, at any width of id."""
    keys = np.array(values, dtype=np.int64)
    assert np.array_equal(stable_order(keys), np.argsort(keys, kind="stable"))
