"""Which cached model covers a corpus is remembered per cache listing
(pytest_retrieval_eval/vectors/coverage.py): a warm start lists no key; a prep, a compaction,
another model or another corpus asks again; a read-only run keeps nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.data import ingest
from pytest_retrieval_eval.data.dataset import resolve_dataset
from pytest_retrieval_eval.io.checksums import MEMO_DIR
from pytest_retrieval_eval.run import lanes
from pytest_retrieval_eval.vectors import coverage
from pytest_retrieval_eval.vectors.cache import bundled_cache_dir
from tests.test_reliability import run_settings
from tests.vectors.test_cache import fill, open_cache


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return ingest.load_corpus(resolve_dataset("sample"), tmp_path_factory.mktemp("c"))


def _listed(calls: list[int]) -> Any:
    def needed(corpus: Any) -> list[str]:
        calls.append(1)
        return lanes.needed_keys(corpus)
    return needed


def test_the_answer_is_read_back_while_the_listing_is_the_same(corpus: Any,
                                                               tmp_path: Path) -> None:
    roots = [tmp_path, bundled_cache_dir()]
    memo = tmp_path / MEMO_DIR
    calls: list[int] = []
    first, keys = coverage.covering_models(roots, corpus, _listed(calls), memo)
    assert len(first) == 1 and keys is not None and len(calls) == 1
    again, keys = coverage.covering_models(roots, corpus, _listed(calls), memo)
    assert again == first and keys is None and len(calls) == 1  # no key listed
    # A new shard (a prep, a pull) changes the listing: asked again.
    fill(open_cache(tmp_path), ["a text of another model"])
    _, keys = coverage.covering_models(roots, corpus, _listed(calls), memo)
    assert keys is not None and len(calls) == 2
    # So does another corpus (here the sample under a subset), and no memo folder at all.
    from pytest_retrieval_eval.data import subset as subset_mod

    part = subset_mod.SubsetCorpus(corpus, subset_mod.choose(corpus, 12, 0))
    _, keys = coverage.covering_models(roots, part, _listed(calls), memo)
    assert keys is not None and len(calls) == 3
    _, keys = coverage.covering_models(roots, corpus, _listed(calls), None)
    assert keys is not None and len(calls) == 4


def test_a_damaged_answer_is_asked_again(corpus: Any, tmp_path: Path) -> None:
    roots = [tmp_path, bundled_cache_dir()]
    memo = tmp_path / MEMO_DIR
    calls: list[int] = []
    coverage.covering_models(roots, corpus, _listed(calls), memo)
    (record,) = (memo / coverage.COVERAGE_DIR).iterdir()
    record.write_text("{not json")
    held, keys = coverage.covering_models(roots, corpus, _listed(calls), memo)
    assert keys is not None and len(calls) == 2 and len(held) == 1


def test_the_lane_verifies_every_shard_when_the_answer_is_read_back(
        corpus: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm --no-model start: the model chosen from the memo, no key listed, every shard
    of the cache checked (by the shards' memo: a changed shard still stops the run)."""
    settings: Any = run_settings(enabled=True, no_model=True, data="sample",
                                 cache_dir=tmp_path)
    keys: list[str] = []
    model = lanes.choose_cached_model(settings, tmp_path, corpus, keys)
    assert keys  # listed the first time
    keys.clear()
    monkeypatch.setattr(lanes, "needed_keys", lambda c: pytest.fail("listed"))
    assert lanes.choose_cached_model(settings, tmp_path, corpus, keys) == model
    assert keys == []  # read back: the lane then verifies every shard
    keys.clear()
    with pytest.raises(BaseException, match="listed"):  # a read-only run keeps nothing
        lanes.choose_cached_model(settings, tmp_path, corpus, keys, memo=False)
