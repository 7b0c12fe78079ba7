"""No wrong number is ever reported silently (issue 11, "Reliability II").

Bit rot is simulated the way it happens beneath a filesystem: a byte changes while the file's
size, times and inode stay as the ``.verified`` stamp recorded them (the test flips the byte,
then re-stamps the new version as if nothing had happened: exactly what the stamp could not
see). Each check names what it guards: the corpus's pairs (a digest checked at every load),
its texts (their key is their sha256, checked at every read), the persona stores (rehashed
once per process under ``--retrieval-eval-verify full``, and checked against the persona's
session ids), the bm25 terms file (rehashed by the controller under ``full``; under the
default ``stamp``, its members' CRC-32 fail the read), and the dataset's sha256 memo (checked
against a sample of the file).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.data.dataset import DatasetSource
from pytest_retrieval_eval.data.ingest import load_corpus
from pytest_retrieval_eval.errors import CacheError
from pytest_retrieval_eval.io import checksums
from pytest_retrieval_eval.io.checksums import MEMO_DIR, read_sidecar, write_stamp
from pytest_retrieval_eval.retrievers import terms
from pytest_retrieval_eval.vipune.store import StoreCache, persona_key, rows_from_arrays
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.model_factory import make_model_dir
from tests.support.reliability_support import (
    flip_bytes,
    joined_errors,
    match_errors,
    no_traceback,
    run_plugin,
)


def rot(path: Path, needle: bytes | None = None, count: int = 1,
        into: bytes | None = None) -> None:
    """Flip ``count`` bytes of ``path`` (or turn ``needle`` ``into`` another string of its
    length) and stamp the new version verified, as an unchanged stamp would vouch for a file
    whose bytes rotted beneath the filesystem."""
    if into is None:
        flip_bytes(path, needle, count)
    else:
        data = path.read_bytes()
        assert needle is not None and len(into) == len(needle) and needle in data
        path.write_bytes(data.replace(needle, into, 1))
    write_stamp(path, path.stat(), read_sidecar(path))
    checksums._memo.clear()  # a new process: nothing hashed in memory


def instances() -> list[dict[str, Any]]:
    return [make_instance("ok1", question_type="single-session-user"),
            make_instance("ok2", question_type="temporal-reasoning", gold=(0, 2))]


def test_a_rotted_gold_id_in_the_corpus_is_caught_and_rebuilt(
        pytester: pytest.Pytester, isolated_cache: Path, tmp_path: Path) -> None:
    """The issue's case: one byte of a gold id changed; the next run exited 0 and pair
    recall@1 went 1.0 -> 0.0. Now the pairs' digest fails, the corpus is rebuilt, the
    numbers are the same."""
    data = write_dataset(tmp_path / "lme.json", instances())
    out = tmp_path / "r.json"
    args = ("--no-model", "--retrieval-eval-retriever", "oracle,bm25", "--retrieval-eval-data",
            str(data), "--retrieval-eval-json", str(out))
    assert run_plugin(pytester, *args).ret == 0
    first = json.loads(out.read_text(encoding="utf-8"))
    (corpus,) = isolated_cache.glob("corpus/*.sqlite")
    pristine = corpus.read_bytes()
    rot(corpus, b'"ok1_s1"]')  # the gold list of ok1 in the pairs table
    assert run_plugin(pytester, *args).ret == 0
    again = json.loads(out.read_text(encoding="utf-8"))
    assert corpus.read_bytes() == pristine  # rebuilt from the dataset
    assert [p["metrics"] for p in again["pairs"]] == [p["metrics"] for p in first["pairs"]]


def test_a_rotted_text_fails_on_read_naming_the_corpus(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "lme.json", instances())
    corpus = load_corpus(DatasetSource("lme", data), tmp_path / "cache")
    pair = corpus.pairs[0]
    assert corpus.texts(list(pair.text_keys))  # fine before
    corpus.close()
    # A session text, not the question; still valid UTF-8, so SQLite reads it happily.
    rot(corpus.path, b"turn 0 about ok1 topic 1", into=b"turn 0 about ok1 topic 7")
    again = load_corpus(DatasetSource("lme", data), tmp_path / "cache")  # stamp trusted
    with pytest.raises(CacheError, match="does not hash to that key") as exc:
        again.texts(list(pair.text_keys))
    assert str(again.path) in str(exc.value) and "\n" not in str(exc.value)


def test_a_tampered_sha256_memo_never_scores_another_dataset(tmp_path: Path) -> None:
    """Editing the memo of dataset B to name dataset A's sha256 made a run labelled B score
    A's pairs. Now the corpus found must match a sample of the file; B is hashed for real."""
    cache = tmp_path / "cache"
    a = write_dataset(tmp_path / "a.json", [make_instance("a1")])
    b = write_dataset(tmp_path / "b.json", [make_instance("b1")])
    corpus_a = load_corpus(DatasetSource("a", a), cache)
    corpus_b = load_corpus(DatasetSource("b", b), cache)
    for memo in (cache / MEMO_DIR).glob("*.json"):
        record = json.loads(memo.read_text(encoding="utf-8"))
        if record["sha256"] == corpus_b.dataset_sha256:
            record["sha256"] = corpus_a.dataset_sha256  # B's memo now names A
            memo.write_text(json.dumps(record), encoding="utf-8")
    checksums._memo.clear()
    again = load_corpus(DatasetSource("b", b), cache)
    assert [p.question_id for p in again.pairs] == ["b1"]
    assert again.dataset_sha256 == corpus_b.dataset_sha256
    checksums._memo.clear()  # and the memo is right again
    assert checksums.known_sha256(b, cache / MEMO_DIR) == (corpus_b.dataset_sha256, True)


def test_a_memo_naming_a_missing_corpus_is_not_trusted_either(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    b = write_dataset(tmp_path / "b.json", [make_instance("b1")])
    real = load_corpus(DatasetSource("b", b), cache).dataset_sha256
    shutil.rmtree(cache / "corpus")
    for memo in (cache / MEMO_DIR).glob("*.json"):
        record = json.loads(memo.read_text(encoding="utf-8"))
        record["sha256"] = "0" * 64
        memo.write_text(json.dumps(record), encoding="utf-8")
    checksums._memo.clear()
    again = load_corpus(DatasetSource("b", b), cache)
    assert again.dataset_sha256 == real  # never labelled with the memo's made-up digest


def _store_rows(n: int, prefix: str) -> tuple[list[str], list[str], np.ndarray, list[str]]:
    ids = [f"{prefix}_{i}" for i in range(n)]
    texts = [f"user: {prefix} text {i}" for i in range(n)]
    vectors = np.eye(n, 8, dtype=np.float32) + 0.1
    return ids, texts, vectors, [""] * n


def test_a_rotted_store_is_trusted_under_stamp_and_rebuilt_under_verify_full(
        tmp_path: Path) -> None:
    """Bit rot beneath an unchanged stamp: only ``--retrieval-eval-verify full`` (a rehash)
    sees it; the default ``stamp`` level trusts the store (docs/reliability.md's policy)."""
    ids, texts, vectors, dates = _store_rows(3, "p")
    key = persona_key(ids, [str(i) for i in range(3)], dates, "f" * 64)
    path = StoreCache(tmp_path / "stores").get_or_build(
        key, lambda: rows_from_arrays(ids, texts, vectors, dates))
    pristine = path.read_bytes()
    rot(path, b"p text 1")
    built: list[int] = []
    for verify in ("stamp", "full"):
        again = StoreCache(tmp_path / "stores", verify=verify).get_or_build(
            key, lambda: built.append(1) or rows_from_arrays(ids, texts, vectors, dates))
        assert built == ([] if verify == "stamp" else [1])
    assert again.read_bytes() == pristine


def test_a_store_copied_over_another_personas_is_rebuilt(tmp_path: Path) -> None:
    """A store copied over another persona's, sidecar and stamp too: its checksum holds, its
    ids do not; a ranking held another haystack's answer session."""
    stores = StoreCache(tmp_path / "stores")
    mine = _store_rows(3, "mine")
    theirs = _store_rows(3, "theirs")
    my_key = persona_key(mine[0], ["a", "b", "c"], mine[3], "f" * 64)
    their_key = persona_key(theirs[0], ["d", "e", "f"], theirs[3], "f" * 64)
    my_path = stores.get_or_build(my_key, lambda: rows_from_arrays(*mine),
                                  session_ids=mine[0])
    their_path = stores.get_or_build(their_key, lambda: rows_from_arrays(*theirs),
                                     session_ids=theirs[0])
    for suffix in ("", ".sha256", ".verified"):
        shutil.copyfile(str(their_path) + suffix, str(my_path) + suffix)
    checksums._memo.clear()
    path = stores.get_or_build(my_key, lambda: rows_from_arrays(*mine), session_ids=mine[0])
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT id FROM memories ORDER BY rowid")] == mine[0]


def test_rotted_bm25_terms_are_rehashed_by_the_controller_under_verify_full(
        tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "lme.json", instances())
    corpus = load_corpus(DatasetSource("lme", data), tmp_path / "cache")
    table = terms.ensure_table(corpus, tmp_path / "cache")
    pristine = table.read_bytes()
    rot(table)
    assert terms.ensure_table(corpus, tmp_path / "cache", rehash=True) == table
    assert table.read_bytes() == pristine


def test_rotted_bm25_terms_under_stamp_fail_on_read_in_one_line(tmp_path: Path) -> None:
    """Under the default ``stamp`` level the controller trusts the terms file's stamp; the
    rot is caught when the arrays are read (each .npz member's CRC-32): one line naming the
    file, never a wrong count."""
    data = write_dataset(tmp_path / "lme.json", instances())
    corpus = load_corpus(DatasetSource("lme", data), tmp_path / "cache")
    table = terms.ensure_table(corpus, tmp_path / "cache")
    with np.load(table) as z:
        offset = table.read_bytes().find(np.ascontiguousarray(z["counts"]).tobytes())
    assert offset > 0
    data_bytes = bytearray(table.read_bytes())
    data_bytes[offset] ^= 0x01  # one count changed
    table.write_bytes(bytes(data_bytes))
    write_stamp(table, table.stat(), read_sidecar(table))
    checksums._memo.clear()
    assert terms.ensure_table(corpus, tmp_path / "cache") == table  # the stamp is trusted
    with pytest.raises(CacheError, match="are damaged") as exc:
        terms.open_table(table, terms.corpus_file_sha256(corpus))
    assert str(table) in str(exc.value) and "\n" not in str(exc.value)


CUSTOM = """
import pytest

class Stranger:
    name = "custom"

    def rank(self, persona, query, limit):
        return [persona.session_ids[0], "answer_e5184712_1"]

class Fails:
    name = "custom"

    def rank(self, persona, query, limit):
        from pytest_retrieval_eval.errors import RetrieverError
        raise RetrieverError("custom: question x: query vector holds NaN")

@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever():
    return {kind}()
"""


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("model"), dim=8).path


def test_a_returned_id_not_in_the_persona_fails_the_item_in_one_line(
        pytester: pytest.Pytester, isolated_cache: Path, tmp_path: Path,
        tiny_model: Path) -> None:
    data = write_dataset(pytester.path / "lme.json", instances())  # rootdir stays there
    pytester.makeconftest(CUSTOM.format(kind="Stranger"))
    out = pytester.path / "r.json"
    # "--opt=PATH": a path given as its own argument would move pytest's rootdir (and the
    # conftest's fixture out of the items' sight).
    result = run_plugin(pytester, f"--retrieval-eval-model={tiny_model}",
                        "--retrieval-eval-retriever", "custom",
                        f"--retrieval-eval-data={data}", f"--retrieval-eval-json={out}")
    assert result.ret == 1
    no_traceback(result)
    match_errors(result.stdout.str(), [
        "*custom: question ok1: the ranking holds 'answer_e5184712_1', not a session of this "
        "question's haystack (4 sessions); a retriever must rank only persona.session_ids"],
        head="")
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["pairs"] == [] and len(report["errors"]) == 2


def test_a_retrievers_failure_names_it_once(pytester: pytest.Pytester, isolated_cache: Path,
                                            tmp_path: Path, tiny_model: Path) -> None:
    """'hybrid: hybrid: question …': the retriever's own message starts with its name."""
    data = write_dataset(pytester.path / "lme.json", instances())
    pytester.makeconftest(CUSTOM.format(kind="Fails"))
    result = run_plugin(pytester, f"--retrieval-eval-model={tiny_model}",
                        "--retrieval-eval-retriever", "custom", f"--retrieval-eval-data={data}")
    assert result.ret == 1
    text = result.stdout.str()
    assert "custom: question x: query vector holds NaN" in text
    assert "custom: custom:" not in text


# =========================================================================== messages


@pytest.mark.parametrize(("fault", "said"), [
    (PermissionError(13, "Permission denied"), "permission denied; make"),
    (OSError(30, "Read-only file system"), "is on a read-only file system"),
    (OSError(28, "No space left on device"), "the disk is full; free disk space in"),
    (sqlite3.OperationalError("attempt to write a readonly database"), "permission denied"),
])
def test_a_store_that_cannot_be_written_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 fault: Exception, said: str) -> None:
    """Permission errors and a read-only file system said 'check free disk space'."""
    from pytest_retrieval_eval.vipune import store as store_mod

    def failing(*args: object, **kwargs: object) -> Path:
        raise fault

    monkeypatch.setattr(store_mod, "build_store", failing)
    ids, texts, vectors, dates = _store_rows(2, "p")
    with pytest.raises(CacheError) as exc:
        StoreCache(tmp_path / "stores").get_or_build(
            "ab" * 32, lambda: rows_from_arrays(ids, texts, vectors, dates))
    message = str(exc.value)
    assert said in message and "\n" not in message
    if "disk is full" not in said:
        assert "disk space" not in message


def test_a_deleted_shard_sidecar_names_the_shard_and_the_cached_model(
        pytester: pytest.Pytester, isolated_cache: Path, tiny_model: Path) -> None:
    """It said 'holds no vectors of any model' and suggested bge-small."""
    from pytest_retrieval_eval.cli import console as cli

    data = write_dataset(pytester.path / "lme.json", instances())
    assert cli.main(["prep", "--data", str(data), "--model", str(tiny_model), "--cache",
                     str(isolated_cache), "--no-progress"]) == 0
    (shard,) = isolated_cache.glob("vectors/*/shard-*.parquet")
    Path(str(shard) + ".sha256").unlink()
    result = run_plugin(pytester, "--no-model", f"--retrieval-eval-data={data}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in joined_errors(result.stderr.str()) if "--no-model" in x]
    assert f"vector cache shard {shard} has no .sha256 sidecar" in line
    assert "of model tiny-model" in line and "bge-small" not in line
    # 27.13: the local model by its folder (found through the cache's hash memo), not by its
    # display name, so the suggested command runs; then the run scores again.
    assert f"--model {tiny_model} " in line and "--model tiny-model " not in line
    command = shlex.split(line.split("`")[1])
    assert command[:2] == ["retrieval-eval", "prep"]
    assert cli.main([*command[1:], "--no-progress"]) == 0
    assert run_plugin(pytester, "--no-model", f"--retrieval-eval-data={data}").ret == 0


def test_a_deleted_sidecar_of_a_local_model_seen_nowhere_names_a_placeholder(
        pytester: pytest.Pytester, isolated_cache: Path, tiny_model: Path) -> None:
    """Without the hash memo that saw its folder, a local model's name is no runnable
    --model: the command says DIR and what DIR is."""
    from pytest_retrieval_eval.cli import console as cli

    data = write_dataset(pytester.path / "lme.json", instances())
    assert cli.main(["prep", "--data", str(data), "--model", str(tiny_model), "--cache",
                     str(isolated_cache), "--no-progress"]) == 0
    (shard,) = isolated_cache.glob("vectors/*/shard-*.parquet")
    Path(str(shard) + ".sha256").unlink()
    shutil.rmtree(isolated_cache / MEMO_DIR)
    checksums._memo.clear()
    result = run_plugin(pytester, "--no-model", f"--retrieval-eval-data={data}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in joined_errors(result.stderr.str()) if "--no-model" in x]
    assert "--model DIR " in line and "(DIR: the folder of local model tiny-model)" in line
