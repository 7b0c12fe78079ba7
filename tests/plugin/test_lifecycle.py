"""A store's lifecycle and its names (issue 28).

* ``index(persona)`` once per persona, before its first ``rank``, only for selected pairs, in
  the process that ranks (never the xdist controller); its time is ingest, never query
  latency; ``persona.workdir`` is made for it and kept across runs.
* ``close()`` once per process that ranked; one that raises is a warning line.
* Columns: a dotted path keeps its class's ``name``; ``module:Class+key:value`` passes
  arguments (column ``name+key:value``); a conftest's ``pytest_retrieval_eval_retrievers``
  names several stores, each a column selected by ``-k <name>``; a clash is one usage error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.reliability_support import match_errors

STORES = """
import json, os, time
from pathlib import Path

def log(**kw):
    with Path(os.environ["STORE_LOG"]).open("a") as f:
        f.write(json.dumps({"pid": os.getpid(), **kw}) + "\\n")

class Lexical:
    name = "lexical"
    needs_vectors = False

    def __init__(self, boost=1, tag="x"):
        log(event="init", name=self.name, boost=boost, tag=tag)
        self.rows = {}

    def index(self, persona):
        reused = (persona.workdir / "built").exists()
        (persona.workdir / "built").write_text("1")
        log(event="index", name=self.name, key=persona.key, workdir=str(persona.workdir),
            reused=reused, turns=[list(map(dict, t)) for t in persona.turns],
            texts=list(persona.texts))
        time.sleep(float(os.environ["STORE_INDEX_SLEEP"]))  # ingest: never query latency
        self.rows[persona.key] = list(reversed(persona.session_ids))

    def rank(self, persona, query, limit):
        assert persona.workdir is not None
        return self.rows[persona.key][:limit]

    def close(self):
        log(event="close", name=self.name)

class Other(Lexical):
    name = "other"

class Broken(Lexical):
    name = "broken"

    def close(self):
        raise RuntimeError("server gone")

def other3():
    return Other(boost=3)

other3.needs_vectors = False  # a factory says so itself: it is never called to ask

class NoIndex:
    name = "plain"
    needs_vectors = False

    def rank(self, persona, query, limit):
        return list(persona.session_ids)[:limit]
"""


@pytest.fixture
def data(pytester: pytest.Pytester, isolated_cache: Path,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("STORE_LOG", str(pytester.path / "store.log"))
    # An index that takes time, for the test that times it; the others count calls only.
    monkeypatch.setenv("STORE_INDEX_SLEEP", "0")
    pytester.makepyfile(stores=STORES)
    pytester.syspathinsert()
    return write_dataset(pytester.path / "lme.json", [
        make_instance(f"q{i}", question_type=t, n_sessions=5)
        for i, t in enumerate(["multi-session", "multi-session", "temporal-reasoning",
                               "knowledge-update"], start=1)])


def run(pytester: pytest.Pytester, data: Path, *args: str, subprocess: bool = False,
        model: Path | None = None) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = pytester.path / "report.json"
    out.unlink(missing_ok=True)
    lane = "--no-model" if model is None else f"--retrieval-eval-model={model}"
    argv = ["-p", "no:randomly", "-p", "no:cacheprovider", "-W",
            "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval", lane,
            f"--retrieval-eval-data={data}", f"--retrieval-eval-json={out}", *args]
    result = pytester.runpytest_subprocess(*argv) if subprocess else pytester.runpytest(*argv)
    report = json.loads(out.read_text()) if out.exists() else {}
    return result, report


def events(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    path = pytester.path / "store.log"
    lines = path.read_text().splitlines() if path.exists() else []
    (pytester.path / "store.log").unlink(missing_ok=True)
    return [json.loads(line) for line in lines]


def test_index_once_per_persona_before_rank_and_ingest_apart_from_query_latency(
        pytester: pytest.Pytester, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORE_INDEX_SLEEP", "0.2")
    result, report = run(pytester, data, "--retrieval-eval-retriever", "fts,stores:Lexical",
                         "--retrieval-eval-tables=recall,timing")
    result.assert_outcomes(passed=8)
    log = events(pytester)
    indexed = [e for e in log if e["event"] == "index"]
    assert len(indexed) == 4 and len({e["key"] for e in indexed}) == 4
    assert [e["event"] for e in log].count("close") == 1
    assert report["retrievers"] == ["fts", "lexical"]  # the class's name, not stores:Lexical
    assert all(r.get("selector") == "stores:Lexical" for r in report["pairs"]
               if r["retriever"] == "lexical")
    timing = report["timing"]["lexical"]
    assert timing["ingest"]["personas"] == 4 and timing["ingest"]["total_ms"] >= 4 * 200
    assert timing["ingest"]["median"] >= 200
    assert timing["query"]["median"] < 100  # the 0.2 s sleeps are ingest only
    assert report["latency_ms"]["lexical"]["median"] < 100
    assert "overhead" in timing and "ingest" not in report["timing"]["fts"]
    assert timing["startup_ms"] >= 0 and "startup_ms" not in report["timing"]["fts"]
    assert sum("startup" in r["latency_ms"] for r in report["pairs"]) == 1  # built once
    text = result.stdout.str()
    assert "lexical: ingest 0." in text and "for 4 persona(s)" in text
    assert "harness overhead per item (median): fts" in text
    # Each workdir is made under the cache, kept: the next run finds what index left there.
    assert all(Path(e["workdir"]).is_dir() and not e["reused"] for e in indexed)
    # The turns: role/content records that render each row's text exactly.
    for e in indexed:
        assert len(e["turns"]) == len(e["texts"]) and all(len(t) > 1 for t in e["turns"])
        assert ["\n".join(f"{t['role']}: {t['content']}" for t in turns)
                for turns in e["turns"]] == e["texts"]
    assert all(Path(e["workdir"]).parts[-3:-1] == ("workdirs", "lexical") for e in indexed)
    run(pytester, data, "--retrieval-eval-retriever", "stores:Lexical")
    assert all(e["reused"] for e in events(pytester) if e["event"] == "index")


def test_a_pairs_inputs_are_timed_apart_from_the_overhead_of_the_item_that_reads_them(
        pytester: pytest.Pytester, data: Path) -> None:
    """Issue 35.2: a pair's vectors, query vector and store are read by its first item and
    held for the others, so counting them in that item's overhead made the first column's
    overhead look several times the next one's. They are the item's ``inputs``, apart; the
    timing line says how long they took in all."""
    pytester.makeconftest("""
        import time
        import pytest

        @pytest.fixture
        def retrieval_eval_store(retrieval_eval_store):
            time.sleep(0.15)  # a slow disk under the pair's store check
            return retrieval_eval_store
    """)
    result, report = run(pytester, data, "--retrieval-eval-retriever", "fts,stores:NoIndex",
                         "--retrieval-eval-tables=timing", subprocess=True)
    result.assert_outcomes(passed=8)
    fts = [r["latency_ms"] for r in report["pairs"] if r["retriever"] == "fts"]
    assert len(fts) == 4 and all(x["inputs"] >= 150 for x in fts), fts
    assert all(x["overhead"] < 100 for x in fts), fts
    timing = report["timing"]["fts"]
    assert timing["inputs"]["total_ms"] >= 4 * 150 and timing["overhead"]["median"] < 100
    assert all(r["latency_ms"]["inputs"] < 100 for r in report["pairs"]
               if r["retriever"] == "plain")
    text = " ".join(result.stdout.str().split())
    assert "apart: the pairs' vectors and stores, read once a pair," in text


def test_index_only_for_selected_pairs_and_the_column_selects_with_k(
        pytester: pytest.Pytester, data: Path) -> None:
    result, report = run(pytester, data, "--retrieval-eval-retriever", "fts,stores:Lexical",
                         "-k", "lexical and q3")
    result.assert_outcomes(passed=1, deselected=7)
    assert [e["event"] for e in events(pytester)] == ["init", "index", "close"]
    assert [(r["retriever"], r["question_id"]) for r in report["pairs"]] == [("lexical", "q3")]


def test_no_workdir_and_no_build_under_collect_only(pytester: pytest.Pytester,
                                                     data: Path, isolated_cache: Path) -> None:
    result, _ = run(pytester, data, "--retrieval-eval-retriever", "stores:Lexical", "--co")
    assert result.ret == 0
    assert events(pytester) == []  # the class was read, never built
    assert not (isolated_cache / "workdirs").exists()


def test_under_xdist_index_runs_on_workers_only(pytester: pytest.Pytester,
                                                data: Path) -> None:
    pytester.makeconftest("""
import os

def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        with open("controller.pid", "w") as f:
            f.write(str(os.getpid()))
""")
    result, report = run(pytester, data, "--retrieval-eval-retriever", "stores:Lexical",
                         "-n", "2", subprocess=True)
    result.assert_outcomes(passed=4)
    log = events(pytester)
    controller = int((pytester.path / "controller.pid").read_text())
    assert log and all(e["pid"] != controller for e in log)  # nothing built there
    built = {e["pid"] for e in log if e["event"] == "init"}
    indexed = [e for e in log if e["event"] == "index"]
    assert len(indexed) == 4 and {e["pid"] for e in indexed} <= built
    assert {e["pid"] for e in log if e["event"] == "close"} == built  # each worker closes
    assert report["timing"]["lexical"]["ingest"]["personas"] == 4


def test_arguments_name_the_column_and_reach_the_constructor(pytester: pytest.Pytester,
                                                             data: Path) -> None:
    result, report = run(pytester, data, "--retrieval-eval-retriever",
                         "stores:Lexical,stores:Lexical+boost:2+tag:big", "-k", "q1")
    result.assert_outcomes(passed=2, deselected=6)
    assert report["retrievers"] == ["lexical", "lexical+boost:2+tag:big"]
    inits = [e for e in events(pytester) if e["event"] == "init"]
    assert sorted((e["boost"], e["tag"]) for e in inits) == [(1, "x"), (2, "big")]
    assert "variants" not in report or "lexical+boost:2+tag:big" not in report["variants"]


def test_arguments_to_what_takes_none_are_one_usage_error(pytester: pytest.Pytester,
                                                          data: Path) -> None:
    pytester.makepyfile(fn="def rank(persona, query, limit):\n    return []\n")
    result, _ = run(pytester, data, "--retrieval-eval-retriever", "fn:rank+ef:10")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(), ["*'fn:rank+ef:10' takes no parameters*"])
    result, _ = run(pytester, data, "--retrieval-eval-retriever", "stores:Lexical+ef")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(), ["*'ef' is not key:value*"])


def test_a_close_that_raises_is_one_warning_line(pytester: pytest.Pytester,
                                                  data: Path) -> None:
    result, report = run(pytester, data, "--retrieval-eval-retriever", "stores:Broken")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ["retrieval-eval: warning: broken: close() failed (RuntimeError: server gone)"])
    assert report["summary"]["broken"]["overall"]["n"] == 4


def test_a_retriever_without_index_keeps_its_numbers(pytester: pytest.Pytester,
                                                     data: Path) -> None:
    _, report = run(pytester, data, "--retrieval-eval-retriever", "stores:NoIndex,fts")
    assert report["retrievers"] == ["plain", "fts"]
    assert all("ingest" not in r["latency_ms"] for r in report["pairs"])
    assert "ingest" not in report["timing"]["plain"]


HOOK = """
import stores

def pytest_retrieval_eval_retrievers(config):
    return {stores_spec}
"""


def test_a_conftest_names_several_stores_each_its_own_column(pytester: pytest.Pytester,
                                                             data: Path) -> None:
    pytester.makeconftest(HOOK.format(stores_spec="[stores.Lexical, stores.Other]"))
    result, report = run(pytester, data, "--retrieval-eval-retriever", "fts,custom")
    result.assert_outcomes(passed=12)
    assert report["retrievers"] == ["fts", "lexical", "other"]
    assert {r["selector"] for r in report["pairs"] if "selector" in r} == set()
    log = events(pytester)
    assert sorted(e["name"] for e in log if e["event"] == "close") == ["lexical", "other"]
    result, report = run(pytester, data, "--retrieval-eval-retriever", "fts,custom",
                         "-k", "other")
    result.assert_outcomes(passed=4, deselected=8)
    assert report["retrievers"] == ["other"]  # the others deselected whole (38.12)
    assert {r["retriever"] for r in report["pairs"]} == {"other"}
    assert [e["name"] for e in events(pytester) if e["event"] == "init"] == ["other"]
    result, _ = run(pytester, data, "--retrieval-eval-retriever", "custom", "--co", "-q")
    result.stdout.fnmatch_lines(["retrieval-eval::multi-session::q1::lexical",
                                 "retrieval-eval::multi-session::q1::other"])


def test_a_mapping_names_its_stores_and_a_clash_is_one_usage_error(
        pytester: pytest.Pytester, data: Path) -> None:
    pytester.makeconftest(HOOK.format(
        stores_spec="{'a': stores.Lexical, 'b': stores.other3}"))
    result, report = run(pytester, data, "--retrieval-eval-retriever", "custom", "-k", "q1")
    result.assert_outcomes(passed=2, deselected=6)
    assert report["retrievers"] == ["a", "b"]
    assert sorted(e["boost"] for e in events(pytester) if e["event"] == "init") == [1, 3]
    pytester.makeconftest(HOOK.format(stores_spec="[stores.Lexical, stores.Lexical]"))
    result, _ = run(pytester, data, "--retrieval-eval-retriever", "custom")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(), ["ERROR: store name 'lexical' is given twice*"])
    pytester.makeconftest(HOOK.format(stores_spec="{'fts': stores.Lexical}"))
    result, _ = run(pytester, data, "--retrieval-eval-retriever", "custom")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_two_dotted_paths_of_one_name_keep_their_selectors(pytester: pytest.Pytester,
                                                           data: Path) -> None:
    pytester.makepyfile(more="from stores import Lexical\n")
    _, report = run(pytester, data, "--retrieval-eval-retriever",
                    "stores:Lexical,more:Lexical", "-k", "q1")
    assert report["retrievers"] == ["lexical", "more:Lexical"]


FIXTURE = """
import pytest
import stores

@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever():
    return {value}
"""


def test_the_custom_fixture_may_return_several_stores(pytester: pytest.Pytester,
                                                      data: Path, tiny_model_dir: Path,
                                                      ) -> None:
    """Their names are known only at run time: one ``custom`` item per pair ranks each,
    a column each (``-k <name>`` per store needs the hook)."""
    pytester.makeconftest(FIXTURE.format(value="[stores.Lexical(), stores.Other(boost=2)]"))
    result, report = run(pytester, data, "--retrieval-eval-retriever", "fts,custom",
                         model=tiny_model_dir)
    result.assert_outcomes(passed=8)
    assert report["retrievers"] == ["fts", "lexical", "other"]
    assert report["summary"]["other"]["overall"]["n"] == 4
    assert report["timing"]["other"]["ingest"]["personas"] == 4
    _, parallel = run(pytester, data, "--retrieval-eval-retriever", "fts,custom", "-n", "2",
                      model=tiny_model_dir)
    assert parallel["summary"] == report["summary"]
    pytester.makeconftest(FIXTURE.format(value="{'fts': stores.Lexical()}"))
    result, _ = run(pytester, data, "--retrieval-eval-retriever", "fts,custom",
                    model=tiny_model_dir)
    result.stdout.fnmatch_lines(["*store name 'fts' is not usable or taken*"])
    assert result.parseoutcomes()["failed"] == 1  # the same for every pair: it stops (34.13)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
