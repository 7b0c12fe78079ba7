"""Stratified subsets: the allocation, the choice, the plugin's header and JSON, prep's texts."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.data import subset as subset_mod
from pytest_retrieval_eval.data.generator.instances import SAMPLE, iter_instances
from pytest_retrieval_eval.data.pairs import QUESTION_TYPES, text_key
from pytest_retrieval_eval.errors import DataError
from pytest_retrieval_eval.vectors.cache import VectorCache
from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder
from pytest_retrieval_eval.vectors.prep import query_key
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.model_factory import make_model_dir
from tests.support.plugin_runs import run_with_report
from tests.support.reliability_support import match_errors
from tests.support.wrapped import unwrap

SAMPLE_INSTANCES = list(iter_instances(SAMPLE))
SAMPLE_USABLE = [i for i in SAMPLE_INSTANCES if not i["question_id"].endswith("_abs")]


# --------------------------------------------------------------------------- allocation


def test_allocate_by_hand() -> None:
    # Quotas 8*3/15 = 1.6 (three types) and 8*2/15 = 1.07 (three): floors give 6, and the
    # two largest remainders (0.6, ties in card order) get the two left.
    sizes = {t: (3 if i < 3 else 2) for i, t in enumerate(QUESTION_TYPES)}
    alloc = subset_mod.allocate(sizes, 8)
    assert alloc == {t: (2 if i < 2 else 1) for i, t in enumerate(QUESTION_TYPES)}


def test_allocate_gives_a_rare_type_one_taken_from_the_largest() -> None:
    # Quotas 9.90 and 0.099: largest remainder alone would give 10 and 0.
    assert subset_mod.allocate({"multi-session": 100, "knowledge-update": 1}, 10) == {
        "multi-session": 9, "knowledge-update": 1}


@given(st.lists(st.integers(1, 60), min_size=1, max_size=6), st.data())
def test_allocate_properties(sizes_list: list[int], data: st.DataObject) -> None:
    sizes = dict(zip(QUESTION_TYPES, sizes_list, strict=False))
    total = sum(sizes.values())
    n = data.draw(st.integers(len(sizes), total))
    alloc = subset_mod.allocate(sizes, n)
    assert sum(alloc.values()) == n
    assert all(1 <= alloc[t] <= sizes[t] for t in sizes)
    quota = {t: Fraction(n * sizes[t], total) for t in sizes}
    if all(q >= 1 for q in quota.values()):
        # Hamilton: each type within one of its exact quota, and every type rounded up has a
        # remainder at least that of every type rounded down.
        assert all(abs(alloc[t] - quota[t]) < 1 for t in sizes)
        up = [quota[t] - math.floor(quota[t]) for t in sizes if alloc[t] > math.floor(quota[t])]
        down = [quota[t] - math.floor(quota[t]) for t in sizes
                if alloc[t] == math.floor(quota[t])]
        assert not up or not down or min(up) >= max(down)


# --------------------------------------------------------------------------- choice


def fake_corpus(sha: str, types: list[str], abstention: int = 0) -> Any:
    pairs = [SimpleNamespace(question_id=f"q{i}", question_type=t, abstention=False)
             for i, t in enumerate(types)]
    pairs += [SimpleNamespace(question_id=f"a{i}_abs", question_type=types[0], abstention=True)
              for i in range(abstention)]
    return SimpleNamespace(pairs=pairs, dataset_sha256=sha)


def test_choice_is_deterministic_per_sha_and_seed_and_stratified() -> None:
    types = [QUESTION_TYPES[i % 3] for i in range(60)]
    corpus = fake_corpus("a" * 64, types, abstention=5)
    first = subset_mod.choose(corpus, 12, seed=0)
    assert first == subset_mod.choose(corpus, 12, seed=0)
    assert list(first.positions) == sorted(first.positions)
    chosen = Counter(corpus.pairs[i].question_type for i in first.positions)
    assert chosen == {t: 4 for t in QUESTION_TYPES[:3]} == dict(first.by_type)
    assert not any(corpus.pairs[i].abstention for i in first.positions)
    assert subset_mod.choose(corpus, 12, seed=1).positions != first.positions
    other = fake_corpus("b" * 64, types, abstention=5)
    assert subset_mod.choose(other, 12, seed=0).positions != first.positions
    # The file order does not matter: the same question ids are chosen from a shuffled file.
    shuffled = SimpleNamespace(pairs=list(reversed(corpus.pairs)), dataset_sha256="a" * 64)
    ids = {corpus.pairs[i].question_id for i in first.positions}
    assert {shuffled.pairs[i].question_id
            for i in subset_mod.choose(shuffled, 12, seed=0).positions} == ids


def test_subset_at_least_all_is_every_usable_pair_and_too_small_is_one_line() -> None:
    corpus = fake_corpus("c" * 64, list(QUESTION_TYPES) * 2, abstention=2)
    everything = subset_mod.choose(corpus, 500)
    assert len(everything.positions) == 12
    with pytest.raises(DataError) as info:
        subset_mod.choose(corpus, 5)
    assert str(info.value) == (
        "--retrieval-eval-subset 5: the dataset has 6 question types and a subset holds at "
        "least one pair of each; give N of at least 6")


def test_ci_width_against_the_normal_formula() -> None:
    assert subset_mod.worst_case_ci95_width(50) == pytest.approx(2 * 1.96 * 0.5 / math.sqrt(49),
                                                                 rel=1e-3)
    # The worst case bounds every observed width of values in 0..1.
    half = [0.0] * 4 + [1.0] * 4
    assert subset_mod.ci95_width(half) == pytest.approx(subset_mod.worst_case_ci95_width(8))
    values = [1.0] * 30 + [0.0] * 20  # p = 0.6, sample sd = sqrt(0.24 * 50 / 49)
    assert subset_mod.ci95_width(values) == pytest.approx(
        2 * 1.95996 * math.sqrt(0.24 * 50 / 49) / math.sqrt(50), rel=1e-4)
    assert subset_mod.ci95_width([1.0]) is None


# --------------------------------------------------------------------------- the plugin


pytest_plugins = ["pytester"]


report_of = run_with_report


@pytest.mark.usefixtures("isolated_cache")
def test_plugin_scores_the_subset_and_states_it(pytester: pytest.Pytester,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # whole summary lines (test_fit_lines: the wrapping)
    result, data = report_of(pytester, "--retrieval-eval-subset", "8",
                             "--retrieval-eval-subset-seed", "3")
    result.assert_outcomes(passed=8)
    subset = data["subset"]
    assert (subset["n"], subset["seed"], subset["chosen"], subset["of_usable"]) == (
        8, 3, 8, len(SAMPLE_USABLE))
    scored = Counter(p["question_type"] for p in data["pairs"])
    assert scored == subset["by_type"] and all(v >= 1 for v in scored.values())
    assert len(scored) == 6
    ci = subset["ci95_recall_at_5"]
    assert ci["worst_case_width"] == pytest.approx(2 * 1.96 * 0.5 / math.sqrt(7), abs=1e-3)
    assert ci["metric"] == "recall@5" and ci["width"] <= ci["worst_case_width"]
    recalls = [p["metrics"]["recall@5"] for p in data["pairs"]]
    assert ci["width"] == pytest.approx(subset_mod.ci95_width(recalls), abs=1e-4)
    result.stdout.fnmatch_lines([
        "pairs: 8 scored of 15 usable, 8 in the subset; *",
        f"subset: 8 of {len(SAMPLE_USABLE)} usable pairs (asked 8, seed 3), stratified by "
        "question type (n per type: the table)",
        "subset: 95% CI of overall recall@5 at n=8: *at worst (normal approximation)",
    ])
    # The same pairs again (ini twins), and other pairs with another seed.
    pytester.makeini("[pytest]\nretrieval_eval_subset = 8\nretrieval_eval_subset_seed = 3\n")
    _, again = report_of(pytester)
    assert [p["question_id"] for p in again["pairs"]] == [
        p["question_id"] for p in data["pairs"]]
    pytester.makeini("[pytest]\n")
    _, other = report_of(pytester, "--retrieval-eval-subset", "8",
                         "--retrieval-eval-subset-seed", "4")
    assert {p["question_id"] for p in other["pairs"]} != {
        p["question_id"] for p in data["pairs"]}


@pytest.mark.usefixtures("isolated_cache")
def test_plugin_subset_under_xdist_scores_the_same_pairs(pytester: pytest.Pytester) -> None:
    _, serial = report_of(pytester, "--retrieval-eval-subset", "7")
    result, spread = report_of(pytester, "--retrieval-eval-subset", "7", "-n", "2")
    result.assert_outcomes(passed=7)
    assert [p["question_id"] for p in spread["pairs"]] == [
        p["question_id"] for p in serial["pairs"]]
    assert spread["summary"] == serial["summary"]
    assert spread["subset"]["ci95_recall_at_5"] == serial["subset"]["ci95_recall_at_5"]


@pytest.mark.usefixtures("isolated_cache")
def test_without_subset_the_json_says_none(pytester: pytest.Pytester) -> None:
    _, data = report_of(pytester)
    assert data["subset"] is None


@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize(("args", "needle"), [
    (("--retrieval-eval-subset", "0"), "0 must be at least 1"),
    (("--retrieval-eval-subset-seed", "-1"), "-1 must be at least 0"),
    (("--retrieval-eval-subset", "3"), "give N of at least 6"),
])
def test_bad_subsets_are_usage_errors(pytester: pytest.Pytester, args: tuple[str, ...],
                                      needle: str) -> None:
    result = pytester.runpytest("--retrieval-eval", "--no-model", *args)
    assert result.ret == 4
    assert needle in result.stderr.str()
    assert "Traceback" not in result.stderr.str()


# --------------------------------------------------------------------------- prep


def test_prep_under_a_subset_embeds_only_its_pairs_texts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = make_model_dir(tmp_path / "model", dim=8).path
    instances = [make_instance(f"q{i}", question_type=QUESTION_TYPES[i % 3], n_sessions=3)
                 for i in range(12)]
    data = write_dataset(tmp_path / "data.json", instances)
    cache = tmp_path / "cache"
    code = cli.main(["prep", "--data", str(data), "--model", str(model), "--cache", str(cache),
                     "--no-progress", "--subset", "4", "--subset-seed", "2"])
    out = unwrap(capsys.readouterr().out)
    assert code == 0, out
    assert "subset: 4 pairs, seed 2" in out
    # The chosen pairs, computed independently of prep: 4 of 12 over 3 types -> 2, 1, 1.
    from pytest_retrieval_eval.data.dataset import DatasetSource
    from pytest_retrieval_eval.data.ingest import load_corpus

    corpus = load_corpus(DatasetSource("data", data), cache)
    chosen = subset_mod.choose(corpus, 4, 2)
    assert sorted(chosen.by_type.values()) == [1, 1, 2]
    expected = set()
    for i in chosen.positions:
        pair = corpus.pairs[i]
        expected |= set(pair.text_keys) | {query_key(pair.question, "")}
    embedder = load_embedder(str(model), EmbedConfig())
    vectors = VectorCache(cache, embedder.fingerprint, embedder.dim, embedder.info())
    assert set(vectors.keys()) == expected
    # Each session text is its persona's own: the other 8 pairs' texts are absent.
    other = corpus.pairs[next(i for i in range(12) if i not in chosen.positions)]
    assert text_key(corpus.texts([other.text_keys[0]])[0]) not in set(vectors.keys())


def test_no_model_run_on_a_subset_prep(pytester: pytest.Pytester, tmp_path: Path,
                                       isolated_cache: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A cache prepped for a subset serves the model-free lane for that subset only; for
    another, the one line names the prep command with its --subset."""
    model = make_model_dir(tmp_path / "model", dim=8).path
    instances = [make_instance(f"q{i}", question_type=QUESTION_TYPES[i % 3], n_sessions=3)
                 for i in range(9)]
    data = write_dataset(tmp_path / "data.json", instances)
    assert cli.main(["prep", "--data", str(data), "--model", str(model), "--cache",
                     str(isolated_cache), "--no-progress", "--subset", "3"]) == 0
    capsys.readouterr()
    args = ("--retrieval-eval", "--no-model", "--retrieval-eval-data", str(data),
            "--retrieval-eval-model", "tiny-model")
    ok = pytester.runpytest(*args, "--retrieval-eval-subset", "3")
    ok.assert_outcomes(passed=3)
    bad = pytester.runpytest(*args, "--retrieval-eval-subset", "3",
                             "--retrieval-eval-subset-seed", "1")
    assert bad.ret == 4
    match_errors(bad.stderr.str(), ["*run `retrieval-eval prep --data * --model tiny-model "
                                    "--cache * --subset 3 --subset-seed 1` first"])


def test_model_lane_under_a_subset_embeds_only_its_pairs(
        pytester: pytest.Pytester, tmp_path: Path, isolated_cache: Path) -> None:
    model = make_model_dir(tmp_path / "model", dim=8).path
    instances = [make_instance(f"q{i}", question_type=QUESTION_TYPES[i % 3], n_sessions=3)
                 for i in range(9)]
    data = write_dataset(tmp_path / "data.json", instances)
    result = pytester.runpytest("--retrieval-eval", "--retrieval-eval-data", str(data),
                                "--retrieval-eval-model", str(model),
                                "--retrieval-eval-subset", "4")
    result.assert_outcomes(passed=4)
    from pytest_retrieval_eval.data.corpus import open_corpus

    corpus = open_corpus(next((isolated_cache / "corpus").glob("*.sqlite")))
    chosen = subset_mod.choose(corpus, 4, 0)
    expected = set()
    for i in chosen.positions:
        expected |= set(corpus.pairs[i].text_keys) | {query_key(corpus.pairs[i].question, "")}
    embedder = load_embedder(str(model), EmbedConfig())
    held = VectorCache(isolated_cache, embedder.fingerprint, embedder.dim, embedder.info())
    assert set(held.keys()) == expected and len(expected) < 9 * 4


def test_ci_uses_recall_all_at_5_under_the_longmemeval_protocol() -> None:
    results = [{"retriever": "bm25", "metrics": {"recall_any@5": 1.0, "recall_all@5": v}}
               for v in (0.0, 1.0, 1.0, 0.5)]
    info = subset_mod.subset_info({"chosen": 4}, results, "bm25")["ci95_recall_at_5"]
    assert info["metric"] == "recall_all@5"
    assert info["width"] == pytest.approx(subset_mod.ci95_width([0.0, 1.0, 1.0, 0.5]), abs=1e-4)
    line = subset_mod.subset_lines({"chosen": 4, "of_usable": 9, "n": 4, "seed": 0,
                                    "ci95_recall_at_5": info})[1]
    assert line.startswith("subset: 95% CI of overall recall_all@5 at n=4: ±")
