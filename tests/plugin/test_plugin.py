"""The plugin end to end, through pytester: items, selection, the table, JSON, xdist, errors."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.data.generator.instances import SAMPLE, iter_instances
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.model_factory import make_model_dir
from tests.support.reliability_support import joined_errors, match_errors

SAMPLE_INSTANCES = list(iter_instances(SAMPLE))
SAMPLE_USABLE = [i for i in SAMPLE_INSTANCES if not i["question_id"].endswith("_abs")]
SAMPLE_ABSTENTION = len(SAMPLE_INSTANCES) - len(SAMPLE_USABLE)
USAGE_ERROR = 4


pytestmark = pytest.mark.usefixtures("isolated_cache")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning", *args)


def report_of(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    out = pytester.path / "report.json"
    result = run(pytester, "--retrieval-eval", "--retrieval-eval-json", str(out), *args)
    assert result.ret == 0, result.stdout.str()
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_without_the_flag_the_plugin_adds_nothing(pytester: pytest.Pytester,
                                                  isolated_cache: Path) -> None:
    pytester.makepyfile("def test_own(): pass")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "= retrieval-eval =" not in result.stdout.str()
    assert not isolated_cache.exists()


def test_sample_no_model_prints_the_table(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--retrieval-eval", "--no-model")
    result.assert_outcomes(passed=len(SAMPLE_USABLE))
    result.stdout.fnmatch_lines([
        "*= retrieval-eval =*",
        "dataset: sample (sha256 *",
        "lane: model-free  model: sentence-transformers/all-MiniLM-L6-v2*",
        f"pairs: {len(SAMPLE_USABLE)} scored of {len(SAMPLE_USABLE)} usable; skipped "
        f"{SAMPLE_ABSTENTION} abstention, 0 rejected, 0 not selected",
        "question type * n * R@1 * R@5 * R@10",  # recall@k alone: one table (-v: the rest)
        "temporal-reasoning *", "overall *",
        "best: @1 hybrid *",
    ])


def test_beside_the_projects_own_tests_and_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_own(): pass")
    result = run(pytester, "--retrieval-eval", "--no-model")
    result.assert_outcomes(passed=len(SAMPLE_USABLE) + 1)
    marked = run(pytester, "--retrieval-eval", "--no-model", "-m", "retrieval_eval")
    marked.assert_outcomes(passed=len(SAMPLE_USABLE), deselected=1)


def test_k_selects_one_question_type(pytester: pytest.Pytester) -> None:
    wanted = [i for i in SAMPLE_USABLE if i["question_type"] == "temporal-reasoning"]
    result = run(pytester, "--retrieval-eval", "--no-model", "-k", "temporal-reasoning")
    result.assert_outcomes(passed=len(wanted), deselected=len(SAMPLE_USABLE) - len(wanted))
    table = result.stdout.str().split("= retrieval-eval =")[1]
    assert "temporal-reasoning" in table and "multi-session" not in table


def test_a_k_selecting_nothing_points_to_the_item_list(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--retrieval-eval", "--no-model", "-k", "no-such-type")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["no pair was scored: -k, -m or node ids chose none (list the "
                                 "items: --co -q)"])


def test_no_model_without_the_plugin_on_says_what_is_missing(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = run(pytester, "--no-model")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([
        "retrieval-eval: --no-model picks the model-free lane of the evaluation, which is",
        "  off: add --retrieval-eval (or retrieval_eval = true in the ini file)"])
    plain = run(pytester)
    assert "--no-model picks" not in plain.stdout.str()


def test_any_plugin_option_without_the_plugin_on_says_nothing_reads_it(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = run(pytester, "--no-model", "--retrieval-eval-k=3", "--retrieval-eval-subset=2")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([
        "retrieval-eval: --no-model, --retrieval-eval-k, --retrieval-eval-subset are",
        "  options of the evaluation, which is off, so nothing reads them: add",
        "  --retrieval-eval (or retrieval_eval = true in the ini file)"])
    assert all(len(line) <= 80 for line in result.stdout.lines  # pytest's own header aside
               if not line.startswith(("platform ", "rootdir: ", "plugins: ")))
    one = run(pytester, "--retrieval-eval-json=r.json")
    one.stdout.fnmatch_lines(["retrieval-eval: --retrieval-eval-json is an option of the*"])
    assert not (pytester.path / "r.json").exists()


def test_plain_pytest_where_the_ini_sets_the_plugins_keys_says_it_is_off(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, item 7: plain ``pytest`` in a folder whose ini file sets
    ``retrieval_eval_*`` keys (examples/vipune) says the evaluation is off; an ini file that
    says ``retrieval_eval = false`` itself, or sets none of its keys, gets no note."""
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makeini("[pytest]\nretrieval_eval_k = 1,5\nretrieval_eval_retriever = hybrid\n")
    result = run(pytester)
    result.stdout.fnmatch_lines([
        "retrieval-eval: tox.ini sets retrieval_eval_k, retrieval_eval_retriever, but the "
        "evaluation is off: add --retrieval-eval to score retrieval (pytest --retrieval-eval "
        "--no-model)"])
    pytester.makeini("[pytest]\nretrieval_eval = false\nretrieval_eval_k = 1,5\n")
    assert "evaluation is off" not in run(pytester).stdout.str()
    pytester.makeini("[pytest]\nmarkers = slow\n")
    assert "evaluation is off" not in run(pytester).stdout.str()


def test_k_selects_one_pair(pytester: pytest.Pytester) -> None:
    qid = SAMPLE_USABLE[0]["question_id"]
    result = run(pytester, "--retrieval-eval", "--no-model", "-k", qid, "-v")
    result.assert_outcomes(passed=1, deselected=len(SAMPLE_USABLE) - 1)
    result.stdout.fnmatch_lines([
        f"retrieval-eval::{SAMPLE_USABLE[0]['question_type']}::{qid}::hybrid PASSED*"])


def test_collect_only_lists_items_in_file_order(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--retrieval-eval", "--no-model", "--collect-only", "-q")
    ids = [line for line in result.stdout.lines if line.startswith("retrieval-eval::")]
    order = list(dict.fromkeys(i["question_type"] for i in SAMPLE_USABLE))  # first seen
    assert ids == [f"retrieval-eval::{i['question_type']}::{i['question_id']}::hybrid"
                   for t in order for i in SAMPLE_USABLE if i["question_type"] == t]


def test_json_report_has_the_documented_fields(pytester: pytest.Pytester) -> None:
    data = report_of(pytester, "--no-model", "--retrieval-eval-k", "1,3")
    assert data["schema_version"] == 1
    assert data["dataset"]["name"] == "sample" and len(data["dataset"]["sha256"]) == 64
    assert data["dataset"]["gold_source"] in ("answer_session_ids", "mixed")
    assert data["lane"] == "model-free"
    assert data["model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert data["ks"] == [1, 3] and data["retrievers"] == ["hybrid"]
    assert len(data["pairs"]) == len(SAMPLE_USABLE)
    pair = data["pairs"][0]
    assert {"retriever", "question_id", "question_type", "gold", "ranked",
            "metrics"} <= set(pair)
    assert len(pair["ranked"]) == 3
    assert set(pair["metrics"]) == {f"{m}@{k}" for m in ("recall", "recall_any",
                                                           "recall_all", "ndcg_any")
                                    for k in (1, 3)}
    overall = data["summary"]["hybrid"]["overall"]
    assert overall["n"] == len(SAMPLE_USABLE)
    assert overall["recall@3"] == pytest.approx(
        sum(p["metrics"]["recall@3"] for p in data["pairs"]) / len(data["pairs"]))
    assert data["skipped"]["abstention"] == SAMPLE_ABSTENTION


def test_several_retrievers_side_by_side_and_oracle_is_perfect(
        pytester: pytest.Pytester) -> None:
    names = "hybrid,semantic,fts,bm25,oracle"
    data = report_of(pytester, "--no-model", "--retrieval-eval-retriever", names)
    assert list(data["summary"]) == names.split(",")
    oracle = data["summary"]["oracle"]["overall"]
    for k in (1, 5, 10):
        assert oracle[f"recall_any@{k}"] == 1.0
    assert oracle["recall@10"] == 1.0
    # the retrievers really differ on the sample
    distinct = {round(data["summary"][n]["overall"]["recall@5"], 6) for n in names.split(",")}
    assert len(distinct) >= 3


def test_xdist_prints_the_same_numbers(pytester: pytest.Pytester, isolated_cache: Path) -> None:
    # -n 2 first, on an empty cache: the controller builds the corpus and the bm25 counts,
    # the workers build the stores; the serial run after it reuses all of them.
    out = pytester.path / "xdist.json"
    result = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-retriever",
                 "hybrid,bm25", "-n", "2", "--retrieval-eval-json", str(out))
    assert result.ret == 0, result.stdout.str()
    assert len(list((isolated_cache / "terms").glob("*.npz"))) == 1
    parallel = json.loads(out.read_text())
    serial = report_of(pytester, "--no-model", "--retrieval-eval-retriever", "hybrid,bm25")
    assert parallel["summary"] == serial["summary"]
    # What is measured, not computed, differs run to run: times and the memory a store took.
    measured = ("latency_ms", "footprint")
    strip = [{k: v for k, v in p.items() if k not in measured} for p in parallel["pairs"]]
    assert strip == [{k: v for k, v in p.items() if k not in measured} for p in serial["pairs"]]


def test_store_builds_are_not_query_latency(pytester: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_retrieval_eval.vipune import store as store_mod

    real = store_mod.build_store

    def slow_build(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.2)  # a store build, once per persona
        return real(*args, **kwargs)

    monkeypatch.setattr(store_mod, "build_store", slow_build)
    data = report_of(pytester, "--no-model", "--retrieval-eval-retriever", "hybrid,fts",
                     "-k", "temporal-reasoning")
    for name in ("hybrid", "fts"):
        assert data["latency_ms"][name]["p95"] < 150, data["latency_ms"]


def test_model_lane_loads_no_model_when_no_retriever_reads_vectors(
        pytester: pytest.Pytester) -> None:
    # Offline, without --no-model: the default model is not cached, and none is needed.
    data = report_of(pytester, "--retrieval-eval-retriever", "bm25,oracle,fts")
    assert data["lane"] == "model" and data["model"] is None
    assert data["summary"]["oracle"]["overall"]["recall_any@10"] == 1.0


def test_a_bad_retriever_is_refused_before_any_data_is_read(
        pytester: pytest.Pytester, isolated_cache: Path) -> None:
    result = run(pytester, "--retrieval-eval", "--no-model",
                 "--retrieval-eval-retriever", "hybrid,nosuch.module:rank")
    assert result.ret == USAGE_ERROR
    assert "nosuch.module" in result.stderr.str()
    assert not (isolated_cache / "corpus").exists()


def test_undated_sessions_are_counted_in_the_header(pytester: pytest.Pytester,
                                                    tmp_path: Path) -> None:
    raw = make_instance("q1", question_type="single-session-user")
    raw["haystack_dates"][0] = None
    raw["haystack_dates"][2] = None
    data_file = write_dataset(tmp_path / "lme.json", [raw])
    result = run(pytester, "--retrieval-eval", "--retrieval-eval-data", str(data_file),
                 "--retrieval-eval-retriever", "bm25")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["notes: *2 session(s) without a date*"])


def test_bm25_counts_are_saved_once_per_corpus(pytester: pytest.Pytester,
                                               isolated_cache: Path) -> None:
    first = report_of(pytester, "--no-model", "--retrieval-eval-retriever", "bm25")
    (table,) = (isolated_cache / "terms").glob("*.npz")
    assert table.stem == first["dataset"]["sha256"]
    built = table.stat().st_mtime_ns
    again = report_of(pytester, "--no-model", "--retrieval-eval-retriever", "bm25")
    assert table.stat().st_mtime_ns == built  # read, not rebuilt
    assert again["summary"] == first["summary"]
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0x01  # a damaged table is rebuilt, never served
    table.write_bytes(bytes(data))
    third = report_of(pytester, "--no-model", "--retrieval-eval-retriever", "bm25")

    def facts(pair: dict[str, Any]) -> dict[str, Any]:
        """A pair's record but what is measured each run: its latencies and the memory its
        index grew by (footprint.rss_growth_bytes: 0 or 900 KB for the same pair, run to
        run, in one process)."""
        footprint = {k: v for k, v in pair.get("footprint", {}).items()
                     if k != "rss_growth_bytes"}
        return {**{k: v for k, v in pair.items() if k != "latency_ms"}, "footprint": footprint}

    assert [facts(p) for p in third["pairs"]] == [facts(p) for p in first["pairs"]]
    assert not list((isolated_cache / "terms").glob(".*tmp"))


def test_model_lane_with_a_local_model(pytester: pytest.Pytester, tmp_path: Path) -> None:
    model = make_model_dir(tmp_path, dim=16)
    data_file = write_dataset(tmp_path / "lme.json", [
        make_instance("q1", question_type="single-session-user"),
        make_instance("q2", question_type="temporal-reasoning", gold=(0, 2)),
        make_instance("q3_abs", question_type="temporal-reasoning"),
    ])
    data = report_of(pytester, "--retrieval-eval-data", str(data_file),
                     "--retrieval-eval-model", str(model.path),
                     "--retrieval-eval-retriever", "hybrid,semantic,oracle")
    assert data["lane"] == "model" and data["model"]["dim"] == 16
    assert data["skipped"]["abstention"] == 1
    assert data["latency_ms"]["query_embedding"]["n"] == 2  # once per question, not per item
    # the same cache now serves the model-free lane, no model loaded
    again = report_of(pytester, "--retrieval-eval-data", str(data_file), "--no-model",
                      "--retrieval-eval-retriever", "hybrid,semantic,oracle")
    assert again["model"] == data["model"]  # the same description in both lanes
    assert again["summary"] == data["summary"]


def test_has_answer_fallback_is_reported(pytester: pytest.Pytester, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # whole summary lines (test_fit_lines: the wrapping)
    data_file = write_dataset(tmp_path / "lme.json", [
        make_instance("q1", drop=["answer_session_ids"], gold=(2,)),
        make_instance("q2"),
    ])
    result = run(pytester, "--retrieval-eval", "--retrieval-eval-data", str(data_file),
                 "--retrieval-eval-retriever", "oracle,bm25", "--no-model",
                 "--retrieval-eval-json", "r.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["gold: answer_session_ids absent for some pairs*has_answer*"])
    data = json.loads((pytester.path / "r.json").read_text())
    assert data["dataset"]["gold_source"] == "mixed"
    by_id = {p["question_id"]: p for p in data["pairs"] if p["retriever"] == "oracle"}
    assert by_id["q1"]["gold_source"] == "has_answer" and by_id["q1"]["gold"] == ["q1_s2"]


def test_custom_retriever_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import pytest

        class Reverse:
            name = "reverse"
            def rank(self, persona, query, limit):
                return list(reversed(persona.session_ids))[:limit]

        @pytest.fixture(scope="session")
        def retrieval_eval_custom_retriever():
            return Reverse()
    """)
    data = report_of(pytester, "--no-model", "--retrieval-eval-retriever", "custom")
    # Its name heads the column (issue 22.5); "custom" stays the selector.
    assert data["retrievers"] == ["reverse"] and len(data["pairs"]) == len(SAMPLE_USABLE)


def test_custom_retriever_without_fixture_is_one_usage_error_before_any_item(
        pytester: pytest.Pytester) -> None:
    """Issue 22.5: once, before any work, not one failure per item."""
    out = pytester.path / "report.json"
    result = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-json", str(out),
                 "--retrieval-eval-retriever", "custom")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(), [
        "ERROR: retriever 'custom' needs a session fixture named "
        "retrieval_eval_custom_retriever in your root conftest.py*"])
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "def retrieval_eval_custom_retriever" not in text
    assert not out.exists()


def test_any_failing_item_is_listed_as_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(badstore="""
        def broken(persona, query, limit):
            return 1 / 0
    """)
    pytester.syspathinsert()
    out = pytester.path / "report.json"
    result = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-json", str(out),
                 "--retrieval-eval-retriever", "badstore:broken", "--tb=line")
    result.assert_outcomes(failed=len(SAMPLE_USABLE))
    data = json.loads(out.read_text())
    assert data["skipped"]["not_selected"] == 0  # they ran; they failed
    assert len(data["errors"]) == len(SAMPLE_USABLE)
    assert data["errors"][0]["error"] == "ZeroDivisionError: division by zero"


def test_dotted_path_retriever(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(mystore="""
        def first_rows(persona, query, limit):
            return list(persona.session_ids[:limit])
    """)
    pytester.syspathinsert()
    data = report_of(pytester, "--no-model", "--retrieval-eval-retriever",
                     "mystore:first_rows,oracle")
    assert data["retrievers"] == ["mystore:first_rows", "oracle"]


def test_a_retriever_error_fails_that_item_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(flaky="""
        from pytest_retrieval_eval.errors import RetrieverError
        def rank(persona, query, limit):
            if query.question_type == "temporal-reasoning":
                raise RetrieverError("store exploded on " + query.question_id)
            return list(persona.session_ids[:limit])
    """)
    pytester.syspathinsert()
    n_temporal = sum(1 for i in SAMPLE_USABLE if i["question_type"] == "temporal-reasoning")
    result = run(pytester, "--retrieval-eval", "--no-model",
                 "--retrieval-eval-retriever", "flaky:rank")
    result.assert_outcomes(passed=len(SAMPLE_USABLE) - n_temporal, failed=n_temporal)
    result.stdout.fnmatch_lines(["*flaky:rank: store exploded on *",
                                 f"errors: {n_temporal} item(s) failed*"])
    assert "Traceback" not in result.stdout.str()


def test_a_retriever_returning_none_or_an_endless_iterator(pytester: pytest.Pytester) -> None:
    """Issue 27.5 and 27.12: ``None`` fails each item in one line naming the retriever and
    what it returned (was a TypeError from ranking.py); ``itertools.cycle`` does not hang."""
    pytester.makepyfile(oddstore="""
        import itertools
        def nothing(persona, query, limit):
            return None
        def endless(persona, query, limit):
            return itertools.cycle(persona.session_ids)
    """)
    pytester.syspathinsert()
    result = run(pytester, "--retrieval-eval", "--no-model",
                 "--retrieval-eval-retriever", "oddstore:nothing,oddstore:endless")
    result.assert_outcomes(passed=len(SAMPLE_USABLE), failed=len(SAMPLE_USABLE))
    match_errors(result.stdout.str(), ["oddstore:nothing: nothing: question *: rank returned "
                                       "None (NoneType), not a list of ids; return a list of "
                                       "session ids, or of (id, score) pairs*"],
                 head="oddstore:")
    assert "Traceback" not in result.stdout.str() and "TypeError" not in result.stdout.str()


def test_ini_settings_are_read(pytester: pytest.Pytester) -> None:
    pytester.makeini("""
        [pytest]
        retrieval_eval = true
        retrieval_eval_no_model = true
        retrieval_eval_k = 2,4
        retrieval_eval_retriever = bm25
        retrieval_eval_tables = all
    """)
    result = run(pytester)
    result.assert_outcomes(passed=len(SAMPLE_USABLE))
    # k 2,4 and bm25: four families (ndcg_any too) of two columns each, a block per family.
    result.stdout.fnmatch_lines(["recall@k * bm25", "question type * n * @2 * @4",
                                 "ndcg_any@k * bm25"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--retrieval-eval-k", "0"], "*k 0 is out of range*1..10000*"),
        (["--retrieval-eval-k", "10001"], "*k 10001 is out of range*"),
        (["--retrieval-eval-k", "-3"], "*out of range*"),
        (["--retrieval-eval-k", "five"], "*'five' is not a whole number*"),
        (["--retrieval-eval-k", "\u0665"], "*'\u0665' is not a whole number*"),
        (["--retrieval-eval-json="], "ERROR: --retrieval-eval-json: the value is empty; give "
                                     "one, or leave the option out"),
        (["--retrieval-eval-cache", ""], "ERROR: --retrieval-eval-cache: the value is empty*"),
        (["--retrieval-eval-vipune-timeout", "inf"], "*'inf' is not a finite number*"),
        (["--retrieval-eval-retriever", "nope"], "*unknown retriever 'nope'*"),
        (["--retrieval-eval-data", "longmemeval_xl"], "*longmemeval_xl*"),
        (["--retrieval-eval-data", "missing/file.json"], "*missing/file.json*"),
    ],
)
def test_bad_options_are_one_line_usage_errors(pytester: pytest.Pytester, args: list[str],
                                               message: str) -> None:
    result = run(pytester, "--retrieval-eval", "--no-model", *args)
    assert result.ret == USAGE_ERROR
    match_errors(result.stderr.str(), [message])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    # One line, without pytest's usage banner ("usage: pytest [options] ...").
    lines = [line for line in joined_errors(result.stderr.str()) if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), lines
    assert "usage:" not in result.stderr.str()


@pytest.mark.parametrize(("ini", "message"), [
    ("retrieval_eval_k = 1,zero", "ini option retrieval_eval_k: k 'zero' is not a whole number*"),
    ("retrieval_eval_no_model = maybe",
     "ini option retrieval_eval_no_model: *'maybe'*; give true or false"),
])
def test_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester, ini: str,
                                        message: str) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    result = run(pytester, "--retrieval-eval")
    assert result.ret == USAGE_ERROR
    match_errors(result.stderr.str(), [f"*{message}"])


def test_file_with_no_usable_pair_is_a_usage_error(pytester: pytest.Pytester,
                                                   tmp_path: Path) -> None:
    data_file = write_dataset(tmp_path / "abs.json", [make_instance("q1_abs")])
    result = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-data",
                 str(data_file))
    assert result.ret == USAGE_ERROR
    match_errors(result.stderr.str(), ["*no usable pair*"])


def test_no_model_without_cached_vectors_names_the_prep_command(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    data_file = write_dataset(tmp_path / "lme.json", [make_instance("q1")])
    result = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-data",
                 str(data_file))
    assert result.ret == USAGE_ERROR
    match_errors(result.stderr.str(), ["*--no-model*retrieval-eval prep --data*"])


def test_store_dir_keeps_vipune_shaped_stores(pytester: pytest.Pytester, tmp_path: Path) -> None:
    import sqlite3

    from pytest_retrieval_eval import vipune

    stores = tmp_path / "stores"
    qid = SAMPLE_USABLE[0]["question_id"]
    result = run(pytester, "--retrieval-eval", "--no-model", "-k", qid,
                 "--retrieval-eval-store-dir", str(stores))
    assert result.ret == 0, result.stdout.str()
    name = vipune.store.export_name(qid)
    assert sorted(p.name for p in stores.iterdir()) == sorted(
        [name, "stores.json", ".stores.json.lock"])
    assert json.loads((stores / "stores.json").read_text()) == {qid: name}
    with sqlite3.connect(stores / name) as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM memories ORDER BY rowid")]
        blob_sizes = {row[0] for row in conn.execute("SELECT length(embedding) FROM memories")}
    assert ids == list(dict.fromkeys(SAMPLE_USABLE[0]["haystack_session_ids"]))
    assert blob_sizes == {vipune.EMBEDDING_BLOB_SIZE}


def test_no_model_with_two_models_in_the_cache_asks_for_one(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    data_file = write_dataset(tmp_path / "lme.json", [make_instance("q1"), make_instance("q2")])
    for seed in (1, 2):
        model = make_model_dir(tmp_path, dim=8, seed=seed, name=f"tiny-{seed}")
        prepped = run(pytester, "--retrieval-eval", "--retrieval-eval-data", str(data_file),
                      "--retrieval-eval-model", str(model.path))  # --co writes nothing
        assert prepped.ret == 0, prepped.stdout.str()
    result = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-data",
                 str(data_file))
    assert result.ret == USAGE_ERROR
    match_errors(result.stderr.str(), ["*several models*tiny-1*tiny-2*--retrieval-eval-model*"])
    named = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-data",
                str(data_file), "--retrieval-eval-model", "tiny-2")
    named.assert_outcomes(passed=2)
    named.stdout.fnmatch_lines(["lane: model-free  model: tiny-2 *"])


def test_model_lane_shows_prep_progress_then_embeds_nothing_the_second_time(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_retrieval_eval.run.terminal_progress import Progress as _Progress

    # These steps end within a second, which shows no progress (tests/cli/test_progress.py).
    monkeypatch.setattr(_Progress, "GRACE", 0.0)
    model = make_model_dir(tmp_path, dim=8)
    data_file = write_dataset(tmp_path / "lme.json", [make_instance("q1", n_sessions=6),
                                                      make_instance("q2", n_sessions=5)])
    args = ("--retrieval-eval", "--retrieval-eval-data", str(data_file),
            "--retrieval-eval-model", str(model.path))
    first = run(pytester, *args)
    first.assert_outcomes(passed=2)
    # 11 session texts + 2 questions, each embedded once; start and end lines in a log
    first.stdout.fnmatch_lines(["retrieval-eval: embed 0/13", "retrieval-eval: embed 13/13*"])
    second = run(pytester, *args)
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines(["retrieval-eval: embed 0/0"])
    assert first.stdout.str().count("retrieval-eval: embed 13/13") == 1


def test_an_in_run_comparison_maps_a_renamed_retriever(pytester: pytest.Pytester,
                                                       tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    report_of(pytester, "--no-model", "--retrieval-eval-retriever", "hybrid")
    (pytester.path / "report.json").rename(base)
    refused = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-retriever",
                  "hybrid+fts:or", f"--retrieval-eval-compare={base}")
    # the advice names the run's option, in the = form, with the mapping that pairs them
    # (each side holds one retriever: issue 38, stumble 6)
    assert "--retrieval-eval-compare-retrievers=hybrid=hybrid+fts:or" in " ".join(
        line.strip() for line in refused.stdout.lines)
    data = report_of(pytester, "--no-model", "--retrieval-eval-retriever", "hybrid+fts:or",
                     f"--retrieval-eval-compare={base}",
                     "--retrieval-eval-compare-retrievers=hybrid=hybrid+fts:or")
    cmp = data["comparison"]
    assert "refused" not in cmp, cmp
    assert cmp["matched"] == len(SAMPLE_USABLE)
    assert {r["retriever"] for r in cmp["rows"]["recall@1"]} == {"hybrid+fts:or vs hybrid"}
    lonely = run(pytester, "--retrieval-eval", "--no-model",
                 "--retrieval-eval-compare-retrievers=a=b")
    assert lonely.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(lonely.stderr.str(), ["ERROR: --retrieval-eval-compare-retrievers maps * add "
                                 "--retrieval-eval-compare=BASE.json"])
