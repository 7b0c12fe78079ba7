"""ingest.load_corpus: built once, reused, deduplicated, rebuilt when damaged, safe to race."""

from __future__ import annotations

import os
import pickle
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_retrieval_eval.data import ingest, json_stream
from pytest_retrieval_eval.data.corpus import (
    FORMAT_VERSION,
    Corpus,
    PairRecord,
    corpus_path,
    open_corpus,
)
from pytest_retrieval_eval.data.dataset import (
    SAMPLE_PATH,
    DatasetSource,
    file_sha256,
    resolve_dataset,
)
from pytest_retrieval_eval.data.ingest import load_corpus
from pytest_retrieval_eval.data.pairs import QUESTION_TYPES, Rejection, render_session, text_key
from pytest_retrieval_eval.errors import CacheError, DataError
from pytest_retrieval_eval.io import checksums
from tests.support import concurrent_builds
from tests.support.lme_factory import make_instance, make_turns, write_dataset


def shared_dataset(path: Path) -> DatasetSource:
    """Five instances: two personas share sessions, one abstention, one rejection,
    one has_answer fallback, one repeat, one empty session, one gold outside the haystack."""
    a = make_instance("qa", session_prefix="shared", n_sessions=4, gold=(1,))
    b = make_instance(
        "qb_abs",
        question_type="temporal-reasoning",
        session_prefix="shared",
        n_sessions=5,
        gold=(2,),
    )
    c = make_instance(
        "qc",
        question_type="single-session-user",
        n_sessions=3,
        gold=(0, 2),
        drop=["answer_session_ids"],
    )
    d = make_instance("qd", question_type="knowledge-update", n_sessions=3, gold=(1,))
    d["haystack_session_ids"].append("qd_s0")  # repeat, same content
    d["haystack_dates"].append("2023/06/01 (Thu) 09:00")
    d["haystack_sessions"].append(make_turns("qd topic 0"))
    d["haystack_sessions"][2] = []  # empty session
    d["answer_session_ids"] = ["qd_s1", "not_here"]
    bad = make_instance("qe", question_type="nonsense")
    write_dataset(path, [a, b, c, bad, d])
    return DatasetSource("tiny", path)


@pytest.fixture
def source(tmp_path: Path) -> DatasetSource:
    return shared_dataset(tmp_path / "data" / "tiny.json")


class CountingIter:
    """Wraps json_stream.iter_instances and counts how often the JSON is streamed."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = json_stream.iter_instances

    def __call__(self, path: Path) -> Iterator[tuple[int, object]]:
        self.calls += 1
        yield from self.real(path)


def test_build_pairs_rejections_and_stats(source: DatasetSource, tmp_path: Path) -> None:
    corpus = load_corpus(source, tmp_path / "cache")
    assert isinstance(corpus, Corpus)
    assert corpus.dataset_name == "tiny"
    assert corpus.dataset_sha256 == file_sha256(source.path)
    assert corpus.path == corpus_path(tmp_path / "cache", corpus.dataset_sha256)
    assert [p.question_id for p in corpus.pairs] == ["qa", "qb_abs", "qc", "qd"]
    assert [p.index for p in corpus.pairs] == [0, 1, 2, 4]
    assert corpus.rejections == [Rejection(3, "qe", corpus.rejections[0].reason)]
    assert "unknown question_type" in corpus.rejections[0].reason
    assert dict(corpus.stats) == {
        "instances": 5,
        "rejected": 1,
        "abstention": 1,
        "usable": 3,
        "slots": 4 + 5 + 3 + 4,
        "rows": 4 + 5 + 3 + 2,
        "unique_session_texts": 5 + 3 + 2,
        "unique_texts": 5 + 3 + 2 + 4,
        "repeated_session_ids": 1,
        "conflicting_repeats": 0,
        "histories_with_repeats": 1,
        "gold_ids": 1 + 1 + 2 + 2,
        "gold_not_in_haystack": 1,
        "oversize_sessions": 0,
        "empty_sessions": 1,
        "undated_sessions": 0,
        "gold_from_has_answer": 1,
    }


def test_pair_record_fields(source: DatasetSource, tmp_path: Path) -> None:
    corpus = load_corpus(source, tmp_path / "cache")
    qa, qb, qc, qd = corpus.pairs
    assert isinstance(qa, PairRecord)
    assert qa.session_ids == ("shared_s0", "shared_s1", "shared_s2", "shared_s3")
    assert qa.gold == ("shared_s1",) and qa.gold_source == "answer_session_ids"
    assert qa.created_at[0] == "2023-05-10T10:00:00+00:00"
    assert qa.question_date == "2023-05-30T23:40:00+00:00"
    assert qa.text_keys == tuple(
        text_key(render_session(make_turns(f"shared topic {i}", evidence=i == 1))) for i in range(4)
    )
    assert qa.question_key == text_key(qa.question)
    assert qb.abstention and not qa.abstention
    assert qc.gold == ("qc_s0", "qc_s2") and qc.gold_source == "has_answer"
    assert qc.notes == {"turn_level_gold": 1}
    assert qd.session_ids == ("qd_s0", "qd_s1")
    assert qd.notes == {"repeated_session_ids": 1, "empty_sessions": 1, "gold_not_in_haystack": 1}


def test_texts_round_trip_in_order(source: DatasetSource, tmp_path: Path) -> None:
    corpus = load_corpus(source, tmp_path / "cache")
    qa = corpus.pairs[0]
    keys = [qa.text_keys[2], qa.question_key, qa.text_keys[0], qa.text_keys[2]]
    texts = corpus.texts(keys)
    assert [text_key(t) for t in texts] == keys
    assert texts[1] == qa.question
    assert corpus.texts([]) == []


def test_texts_missing_key_is_cache_error(source: DatasetSource, tmp_path: Path) -> None:
    corpus = load_corpus(source, tmp_path / "cache")
    with pytest.raises(CacheError) as excinfo:
        corpus.texts([corpus.pairs[0].question_key, "0" * 64])
    assert "0" * 64 in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_texts_many_keys_are_batched(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "wide.json", [make_instance("q", n_sessions=1200)])
    corpus = load_corpus(DatasetSource("wide", path), tmp_path / "cache")
    keys = list(reversed(corpus.pairs[0].text_keys))
    assert [text_key(t) for t in corpus.texts(keys)] == keys


def test_shared_sessions_stored_once(source: DatasetSource, tmp_path: Path) -> None:
    corpus = load_corpus(source, tmp_path / "cache")
    qa, qb = corpus.pairs[0], corpus.pairs[1]
    assert qa.text_keys == qb.text_keys[:4]  # personas share sessions shared_s0..s3
    keys = corpus.all_text_keys()
    assert keys == sorted(set(keys))
    assert len(keys) == corpus.stats["unique_texts"]
    with sqlite3.connect(corpus.path) as conn:
        (stored,) = conn.execute("SELECT count(*) FROM texts").fetchone()
    session_keys = {k for p in corpus.pairs for k in p.text_keys}
    question_keys = {p.question_key for p in corpus.pairs}
    assert stored == len(session_keys | question_keys) == len(keys)
    assert len(session_keys) == corpus.stats["unique_session_texts"]


def test_all_text_keys_cover_sessions_and_questions(source: DatasetSource, tmp_path: Path) -> None:
    corpus = load_corpus(source, tmp_path / "cache")
    keys = set(corpus.all_text_keys())
    for pair in corpus.pairs:
        assert pair.question_key in keys
        assert set(pair.text_keys) <= keys


def test_corpus_built_once_then_reused(
    source: DatasetSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = CountingIter()
    monkeypatch.setattr(ingest, "iter_instances", counter)
    seen: list[tuple[str, int, int | None]] = []
    first = load_corpus(source, tmp_path / "cache", lambda *a: seen.append(a))
    assert counter.calls == 1
    assert ("ingest tiny", 5, None) in seen
    assert seen[-1] == ("ingest tiny", 5, 5)  # the step's end, with its count
    second = load_corpus(source, tmp_path / "cache")
    assert counter.calls == 1  # the JSON was not read again
    assert second.pairs == first.pairs
    assert second.stats == first.stats
    assert second.rejections == first.rejections


def test_later_processes_neither_read_the_dataset_nor_rehash_the_corpus(
    source: DatasetSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = load_corpus(source, tmp_path / "cache")
    # The build stamps what it hashed: no later process reads the whole corpus again.
    assert first.path.with_name(first.path.name + ".verified").is_file()
    # A later process: nothing memoised in memory, only what the cache holds on disk.
    checksums._memo.clear()
    opened: list[str] = []
    real_open = open

    def spying_open(file: object, *args: object, **kwargs: object) -> object:
        opened.append(os.fspath(file))  # type: ignore[arg-type]
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    hashed: list[Path] = []
    monkeypatch.setattr(checksums, "sha256_file", lambda path, *_: hashed.append(path) or "0")
    monkeypatch.setattr("builtins.open", spying_open)
    again = load_corpus(source, tmp_path / "cache")
    monkeypatch.undo()
    assert again.pairs == first.pairs
    # sha256 from the on-disk memo: the dataset is opened once, for its 2 MiB sample
    # (dataset.sample_digest), which the corpus must match; never hashed in full.
    assert opened.count(str(source.path)) == 1
    assert hashed == []  # the stamp vouched for the corpus file
    again.close()
    data = bytearray(first.path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped byte still never passes
    first.path.write_bytes(bytes(data))
    checksums._memo.clear()
    counter = CountingIter()
    monkeypatch.setattr(ingest, "iter_instances", counter)
    load_corpus(source, tmp_path / "cache")
    assert counter.calls == 1  # rebuilt


def test_corpus_reused_under_another_name(
    source: DatasetSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_corpus(source, tmp_path / "cache")
    counter = CountingIter()
    monkeypatch.setattr(ingest, "iter_instances", counter)
    again = load_corpus(DatasetSource("renamed", source.path), tmp_path / "cache")
    assert counter.calls == 0
    assert again.dataset_name == "renamed"


def test_changed_dataset_gets_a_new_corpus(source: DatasetSource, tmp_path: Path) -> None:
    first = load_corpus(source, tmp_path / "cache")
    write_dataset(source.path, [make_instance("only")])
    second = load_corpus(source, tmp_path / "cache")
    assert second.path != first.path
    assert [p.question_id for p in second.pairs] == ["only"]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "incomplete", "old_version", "empty"])
def test_corrupt_corpus_file_rebuilt(
    source: DatasetSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    good = load_corpus(source, tmp_path / "cache")
    path = good.path
    good.close()
    if damage == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"this is not a database" * 100)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        with sqlite3.connect(path) as conn:
            if damage == "incomplete":
                conn.execute("DELETE FROM meta WHERE key = 'complete'")
            else:
                conn.execute(
                    "UPDATE meta SET value = ? WHERE key = 'format_version'",
                    (str(FORMAT_VERSION - 1),),
                )
        conn.close()
    counter = CountingIter()
    monkeypatch.setattr(ingest, "iter_instances", counter)
    rebuilt = load_corpus(source, tmp_path / "cache")
    assert counter.calls == 1
    assert rebuilt.path == path
    assert rebuilt.pairs == good.pairs
    assert rebuilt.texts([p.question_key for p in rebuilt.pairs])


def test_no_temp_files_left_behind(source: DatasetSource, tmp_path: Path) -> None:
    corpus = load_corpus(source, tmp_path / "cache")
    leftovers = [p.name for p in corpus.path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_bad_dataset_file_raises_and_leaves_no_corpus(tmp_path: Path) -> None:
    data = tmp_path / "cut.json"
    full = write_dataset(tmp_path / "full.json", [make_instance(f"q{i}") for i in range(3)])
    data.write_bytes(full.read_bytes()[:-40])
    with pytest.raises(DataError) as excinfo:
        load_corpus(DatasetSource("cut", data), tmp_path / "cache")
    assert "ends early" in str(excinfo.value)
    assert list((tmp_path / "cache" / "corpus").glob("*.sqlite")) == []
    assert list((tmp_path / "cache" / "corpus").glob("*.tmp")) == []


def test_the_cycle_collector_is_paused_while_streaming_and_back_after(
        source: DatasetSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35.4 (the cold build): the collector traversed the parser's millions of dicts
    for about 2 s of a 30 s full-M build. It is off while instances stream in, and on
    again after a build, a failed one included."""
    import gc

    seen: list[bool] = []
    add = ingest._Builder.add
    monkeypatch.setattr(ingest._Builder, "add",
                        lambda self, parsed: (seen.append(gc.isenabled()), add(self, parsed)))
    assert gc.isenabled()
    load_corpus(source, tmp_path / "cache")
    assert seen and not any(seen) and gc.isenabled()
    cut = tmp_path / "cut.json"
    cut.write_bytes(source.path.read_bytes()[:-40])
    with pytest.raises(DataError):
        load_corpus(DatasetSource("cut", cut), tmp_path / "cache")
    assert gc.isenabled()


def test_empty_array_dataset_is_data_error(tmp_path: Path) -> None:
    path = tmp_path / "none.json"
    path.write_text("[]")
    with pytest.raises(DataError) as excinfo:
        load_corpus(DatasetSource("none", path), tmp_path / "cache")
    assert "no instances" in str(excinfo.value)


def test_all_instances_rejected_still_builds(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "bad.json", [1, {"question_id": "q"}])
    corpus = load_corpus(DatasetSource("bad", path), tmp_path / "cache")
    assert corpus.pairs == []
    assert [r.index for r in corpus.rejections] == [0, 1]
    assert corpus.stats["rejected"] == 2 and corpus.stats["usable"] == 0


def test_unwritable_cache_dir_is_cache_error(source: DatasetSource, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CacheError) as excinfo:
        load_corpus(source, blocker / "cache")
    assert "\n" not in str(excinfo.value)


def test_corpus_pickles_by_path_and_reopens(source: DatasetSource, tmp_path: Path) -> None:
    corpus = load_corpus(source, tmp_path / "cache")
    corpus.texts([corpus.pairs[0].question_key])  # open the connection
    clone = pickle.loads(pickle.dumps(corpus))
    assert clone.pairs == corpus.pairs
    assert clone.texts([corpus.pairs[0].question_key]) == [corpus.pairs[0].question]


def test_open_corpus_by_path_uses_recorded_name(source: DatasetSource, tmp_path: Path) -> None:
    built = load_corpus(source, tmp_path / "cache")
    opened = open_corpus(built.path)
    assert opened.dataset_name == "tiny"
    assert open_corpus(built.path, "other").dataset_name == "other"
    assert opened.pairs == built.pairs and opened.stats == built.stats
    assert opened.dataset_sha256 == built.dataset_sha256


@pytest.mark.parametrize("damage", ["missing", "garbage", "incomplete"])
def test_open_corpus_damaged_is_one_line_cache_error(
    source: DatasetSource, tmp_path: Path, damage: str
) -> None:
    path = load_corpus(source, tmp_path / "cache").path
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"x" * 5000)
    else:
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM meta WHERE key = 'complete'")
        conn.close()
    with pytest.raises(CacheError) as excinfo:
        open_corpus(path)
    assert str(path) in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_corpus_file_is_opened_read_only(source: DatasetSource, tmp_path: Path) -> None:
    corpus = load_corpus(source, tmp_path / "cache")
    with pytest.raises(CacheError):
        corpus._query("DELETE FROM texts")
    assert corpus.texts([corpus.pairs[0].question_key])


def test_concurrent_builders_finish_with_one_valid_file(
    source: DatasetSource, tmp_path: Path
) -> None:
    log = tmp_path / "builds.log"
    cache = tmp_path / "cache"
    barrier = tmp_path / "go"
    racers = [(source, str(cache), str(log), 0.05, str(barrier)) for _ in range(3)]
    assert concurrent_builds.race(concurrent_builds.build_corpus, racers, barrier) == [0, 0, 0]
    assert len(log.read_text().split()) == 1  # built by exactly one process
    files = sorted(p.name for p in (cache / "corpus").iterdir()
                   if not p.name.endswith((".lock", ".verified")))  # lock, checksum stamp
    sha = file_sha256(source.path)
    assert files == [f"{sha}.sqlite", f"{sha}.sqlite.sha256"]  # the file and its checksum
    corpus = load_corpus(source, cache)
    assert len(corpus.pairs) == 4


@pytest.mark.skipif(not SAMPLE_PATH.is_file(), reason="bundled sample not written yet")
def test_bundled_sample_builds_without_rejections(tmp_path: Path) -> None:
    corpus = load_corpus(resolve_dataset("sample"), tmp_path / "cache")
    assert corpus.rejections == []
    assert corpus.stats["usable"] > 0 and corpus.stats["abstention"] > 0
    assert {p.question_type for p in corpus.pairs} == set(QUESTION_TYPES)
