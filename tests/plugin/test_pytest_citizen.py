"""The plugin's items are ordinary pytest citizens (issue 21).

They are reached by pytest's own collection, under the rootdir's ``Dir``; their node ids
round-trip through ``NodeId.parse`` (pytest 9.2) and the command line; a skip, a rerun, a
conftest fixture, ``--lf``/``--ff``/``--sw``, ``--co`` and JUnit treat them as any test.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.lme_factory import make_instance, write_dataset

QUESTIONS = [("q1", "multi-session"), ("q2", "multi-session"), ("q3", "temporal-reasoning"),
             ("q4", "temporal-reasoning"), ("q5", "knowledge-update")]

CUSTOM = """
import pytest

class Custom:
    name = "custom"
    needs_vectors = False

    def rank(self, persona, query, limit):
        if query.question_id == "{fail}":
            raise RuntimeError("custom retriever broke on {fail}")
        return list(persona.session_ids)[:limit]

@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever():
    return Custom()
"""


@pytest.fixture
def data(pytester: pytest.Pytester, isolated_cache: Path) -> Path:
    return write_dataset(pytester.path / "lme.json", [
        make_instance(qid, question_type=qtype, n_sessions=3) for qid, qtype in QUESTIONS])


#: The tests read orders (--co trees, --ff, --sw): pytest-randomly, where installed (the CI
#: matrix installs it), is off in these runs but in the one test about it.
IN_ORDER = ("-p", "no:randomly")


def run(pytester: pytest.Pytester, data: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*IN_ORDER, "-W", "ignore::pytest.PytestAssertRewriteWarning",
                              "--retrieval-eval", "--no-model", f"--retrieval-eval-data={data}",
                              *args)


def run_custom(pytester: pytest.Pytester, data: Path, model: Path, *args: str
               ) -> pytest.RunResult:
    """The model lane with the tiny model: a custom retriever may read vectors."""
    return pytester.runpytest(*IN_ORDER, "-W", "ignore::pytest.PytestAssertRewriteWarning",
                              "--retrieval-eval", f"--retrieval-eval-model={model}",
                              f"--retrieval-eval-data={data}", *args)


def report_of(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def ids_of(result: pytest.RunResult) -> list[str]:
    return [line.split(" ")[0] for line in result.stdout.lines
            if line.startswith("retrieval-eval::")]


def test_items_hang_under_the_rootdir_dir_once_per_type(pytester: pytest.Pytester,
                                                        data: Path) -> None:
    result = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle", "--co")
    out = result.stdout.str()
    assert result.ret == 0
    assert out.count("<RetrievalEvalCollector retrieval-eval>") == 1
    for qtype in ("multi-session", "temporal-reasoning", "knowledge-update"):
        assert out.count(f"<QuestionTypeCollector {qtype}>") == 1
    result.stdout.fnmatch_lines([f"<Dir {pytester.path.name}>",
                                 "  <RetrievalEvalCollector retrieval-eval>",
                                 "    <QuestionTypeCollector multi-session>",
                                 "      <QuestionCollector q1>",
                                 "        <PairItem bm25>",
                                 "        <PairItem oracle>"])


def test_node_ids_given_back_on_the_command_line_select_those_items(
        pytester: pytest.Pytester, data: Path) -> None:
    listed = ids_of(run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle",
                        "--co", "-q"))
    assert listed[0] == "retrieval-eval::multi-session::q1::bm25"
    assert len(listed) == 10
    one = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle", "-v", listed[3])
    one.assert_outcomes(passed=1)
    one.stdout.fnmatch_lines([f"{listed[3]} PASSED*"])
    by_type = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle",
                  "retrieval-eval::temporal-reasoning")
    by_type.assert_outcomes(passed=4)
    old_style = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle",
                    "retrieval-eval::knowledge-update::q5[oracle]")
    old_style.assert_outcomes(passed=1)
    missing = run(pytester, data, "--retrieval-eval-retriever", "bm25",
                  "retrieval-eval::temporal-reasoning::q9")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*not found: retrieval-eval::temporal-reasoning::q9*"])


def test_a_question_id_holding_colons_or_brackets_selects_by_its_node_id(
        pytester: pytest.Pytester, isolated_cache: Path) -> None:
    """Issue 27.13: an id is matched whole, as ``--co -q`` prints it; ``q::b`` was read as
    question q, retriever b (or refused as too many parts), ``x[1]`` as x's retriever 1."""
    odd = write_dataset(pytester.path / "odd.json", [
        make_instance(qid, question_type="multi-session", n_sessions=3)
        for qid in ("q::b", "x[1]", "q", "x")])
    listed = ids_of(run(pytester, odd, "--retrieval-eval-retriever", "bm25,oracle",
                        "--co", "-q"))
    assert "retrieval-eval::multi-session::q::b::oracle" in listed
    assert "retrieval-eval::multi-session::x[1]::bm25" in listed and len(listed) == 8
    for node_id in listed:  # each id printed selects its item alone
        one = run(pytester, odd, "--retrieval-eval-retriever", "bm25,oracle", "-v", node_id)
        one.assert_outcomes(passed=1)
        assert any(line.startswith(f"{node_id} PASSED") for line in one.stdout.lines)
    question = run(pytester, odd, "--retrieval-eval-retriever", "bm25,oracle", "-v",
                   "retrieval-eval::multi-session::x[1]")
    question.assert_outcomes(passed=2)
    assert "::x::" not in question.stdout.str()
    old_style = run(pytester, odd, "--retrieval-eval-retriever", "bm25,oracle", "-v",
                    "retrieval-eval::multi-session::x[1][oracle]")
    old_style.assert_outcomes(passed=1)
    assert any(line.startswith("retrieval-eval::multi-session::x[1]::oracle PASSED")
               for line in old_style.stdout.lines)
    missing = run(pytester, odd, "--retrieval-eval-retriever", "bm25",
                  "retrieval-eval::multi-session::q::c")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*not found: retrieval-eval::multi-session::q::c (*"])


def test_paths_on_the_command_line_narrow_the_plugin_items(pytester: pytest.Pytester,
                                                           data: Path) -> None:
    pytester.mkdir("tests").joinpath("test_own.py").write_text("def test_own(): pass\n")
    only_tests = run(pytester, data, "--retrieval-eval-retriever", "bm25", "tests")
    only_tests.assert_outcomes(passed=1)
    both = run(pytester, data, "--retrieval-eval-retriever", "bm25", "tests", "retrieval-eval")
    both.assert_outcomes(passed=6)
    everything = run(pytester, data, "--retrieval-eval-retriever", "bm25")
    everything.assert_outcomes(passed=6)


def test_pytest_randomly_shuffles_the_plugin_items(pytester: pytest.Pytester,
                                                   data: Path) -> None:
    """Real collection: pytest-randomly reorders the items as any test (it never reached
    items appended after collection). Runs where it is installed: the CI matrix."""
    pytest.importorskip("pytest_randomly")

    def order(seed: str) -> list[str]:
        return ids_of(pytester.runpytest("--retrieval-eval", "--no-model",
                                         f"--retrieval-eval-data={data}",
                                         "--retrieval-eval-retriever", "bm25,oracle",
                                         "-p", "randomly", f"--randomly-seed={seed}",
                                         "--co", "-q"))

    in_order = ids_of(run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle",
                          "--co", "-q"))
    one, two = order("1"), order("2")
    assert sorted(one) == sorted(two) == sorted(in_order) and len(one) == 10
    assert one != in_order or two != in_order
    assert one == order("1")  # a seed replays its order


def test_k_and_m_select_by_type_question_and_retriever(pytester: pytest.Pytester,
                                                       data: Path) -> None:
    base = ("--retrieval-eval-retriever", "bm25,oracle")
    run(pytester, data, *base, "-k", "temporal-reasoning").assert_outcomes(
        passed=4, deselected=6)
    run(pytester, data, *base, "-k", "q5").assert_outcomes(passed=2, deselected=8)
    run(pytester, data, *base, "-k", "oracle").assert_outcomes(passed=5, deselected=5)
    run(pytester, data, *base, "-m", "not retrieval_eval").assert_outcomes(deselected=10)


def test_last_failed_failed_first_and_stepwise_find_a_failed_item(
        pytester: pytest.Pytester, data: Path, tiny_model_dir: Path) -> None:
    """One run with a failed item, then ``--lf``, ``--ff`` and ``--sw`` (twice) after it:
    none of the three changes what the last-failed cache holds (``--sw`` keeps its own)."""
    pytester.makeconftest(CUSTOM.format(fail="q3"))
    select = ("--retrieval-eval-retriever", "custom,bm25")
    first = run_custom(pytester, data, tiny_model_dir, *select)
    first.assert_outcomes(passed=9, failed=1)
    last_failed = run_custom(pytester, data, tiny_model_dir, *select, "--lf", "-v")
    last_failed.assert_outcomes(failed=1, deselected=9)
    failed_first = run_custom(pytester, data, tiny_model_dir, *select, "--ff", "-v")
    failed_first.assert_outcomes(failed=1, passed=9)
    lines = [line for line in failed_first.stdout.lines if line.startswith("retrieval-eval::")]
    assert lines[0].startswith("retrieval-eval::temporal-reasoning::q3::custom FAILED")
    stepwise = run_custom(pytester, data, tiny_model_dir, *select, "--sw", "-v")
    stepwise.assert_outcomes(passed=4, failed=1)  # stops at the failed item
    resumed = run_custom(pytester, data, tiny_model_dir, *select, "--sw")
    resumed.stdout.fnmatch_lines(["*skipping 4 already passed items*"])
    assert "previously failed test not found" not in resumed.stdout.str()
    resumed.assert_outcomes(failed=1, deselected=4)


def test_a_skip_is_reported_counted_and_named_in_the_json(pytester: pytest.Pytester,
                                                          data: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the header on one line
    pytester.makeconftest("""
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid.endswith("::q2::bm25"):
            item.add_marker(pytest.mark.skip(reason="not today"))

@pytest.fixture(autouse=True)
def skip_q4(request):
    if request.node.nodeid.endswith("::q4::bm25"):
        pytest.skip("q4 is out")
""")
    out = pytester.path / "r.json"
    result = run(pytester, data, "--retrieval-eval-retriever", "bm25",
                 f"--retrieval-eval-json={out}", "-rs")
    assert result.ret == 0
    result.assert_outcomes(passed=3, skipped=2)
    assert "INTERNALERROR" not in result.stdout.str()
    report = report_of(out)
    assert sorted(p["question_id"] for p in report["pairs"]) == ["q1", "q3", "q5"]
    assert report["skipped_items"] == [
        {"retriever": "bm25", "question_id": "q2", "reason": "not today"},
        {"retriever": "bm25", "question_id": "q4", "reason": "q4 is out"}]
    assert report["skipped"]["items_skipped"] == 2
    assert not report["errors"]
    result.stdout.fnmatch_lines(["*3 scored of 5 usable*2 item(s) skipped by pytest*"])


def test_root_conftest_fixtures_reach_every_item(pytester: pytest.Pytester, data: Path,
                                                 tiny_model_dir: Path) -> None:
    """pytest 9.1 scopes a root conftest's fixtures to the rootdir's Dir node: the items must
    hang under it (they used to hang off the Session, and 9.1 gave them none)."""
    pytester.makeconftest(CUSTOM.format(fail="none") + """
SEEN = []

@pytest.fixture(autouse=True)
def host_fixture(request):
    SEEN.append(request.node.nodeid)

def pytest_sessionfinish(session):
    print(f"\\nautouse ran on {len(SEEN)} items")
""")
    result = run_custom(pytester, data, tiny_model_dir, "--retrieval-eval-retriever",
                        "custom,bm25", "-s")
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(["*autouse ran on 10 items*"])


@pytest.mark.parametrize("mode", ["--co", "--setup-plan", "--setup-only"])
def test_collection_only_modes_write_no_report(pytester: pytest.Pytester, data: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               mode: str) -> None:
    out = pytester.path / "r.json"
    out.write_text('{"schema_version": 1, "kept": true}\n')  # a report of ours (43.11)
    md = pytester.path / "r.md"
    summary = pytester.path / "step-summary.md"
    summary.write_text("before\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = run(pytester, data, "--retrieval-eval-retriever", "bm25", mode,
                 f"--retrieval-eval-json={out}", f"--retrieval-eval-markdown={md}")
    assert result.ret == 0
    assert out.read_text() == '{"schema_version": 1, "kept": true}\n'
    assert not md.exists()
    assert summary.read_text() == "before\n"
    assert "No pair was scored" not in result.stdout.str()


def test_rerun_item_counts_its_final_outcome(pytester: pytest.Pytester, data: Path,
                                             tiny_model_dir: Path) -> None:
    pytester.makeconftest("""
import pytest

class Flaky:
    name = "custom"
    needs_vectors = False
    calls = 0

    def rank(self, persona, query, limit):
        if query.question_id == "q2":
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise RuntimeError("flaky once")
        return list(persona.session_ids)[:limit]

@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever():
    return Flaky()
""")
    out = pytester.path / "r.json"
    result = run_custom(pytester, data, tiny_model_dir, "--retrieval-eval-retriever", "custom",
                        "--reruns", "1", f"--retrieval-eval-json={out}")
    assert result.ret == 0
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("rerun")) == (5, 1)
    report = report_of(out)
    assert report["errors"] == []
    assert len(report["pairs"]) == 5
    assert "item(s) failed" not in result.stdout.str()


def test_a_host_owning_no_model_still_starts(pytester: pytest.Pytester, data: Path) -> None:
    pytester.makeconftest("""
def pytest_addoption(parser):
    parser.addoption("--no-model", action="store", default="host", help="the host's own")
""")
    help_text = pytester.runpytest("--help")
    assert help_text.ret == 0
    words = " ".join(" ".join(help_text.stdout.lines).split())
    assert "--retrieval-eval-no-model model-free lane" in words
    assert "also spelled --no-model, unless another plugin or a conftest owns that name" in words
    result = pytester.runpytest("--retrieval-eval", "--retrieval-eval-no-model",
                                "--retrieval-eval-retriever", "bm25",
                                f"--retrieval-eval-data={data}", "--no-model", "mine")
    assert result.ret != pytest.ExitCode.USAGE_ERROR, result.stderr.str()
    result.assert_outcomes(passed=5)


def test_no_model_is_a_twin_when_free(pytester: pytest.Pytester, data: Path) -> None:
    result = pytester.runpytest("--retrieval-eval", "--no-model",
                                "--retrieval-eval-retriever", "bm25",
                                f"--retrieval-eval-data={data}")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*lane: model-free*"])


def test_ini_paths_are_read_from_the_ini_files_folder(pytester: pytest.Pytester,
                                                      data: Path) -> None:
    pytester.makeini(f"""
[pytest]
retrieval_eval = true
retrieval_eval_no_model = true
retrieval_eval_retriever = bm25
retrieval_eval_data = {data.name}
retrieval_eval_json = out/R.json
""")
    sub = pytester.mkdir("sub")
    sub.joinpath("test_here.py").write_text("def test_here(): pass\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)
        result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    assert (pytester.path / "out" / "R.json").is_file()
    assert not (sub / "out").exists()


def test_boolean_ini_options_are_typed_bool_in_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    for line in ("  retrieval_eval (bool):*", "  retrieval_eval_no_model (bool):*",
                 "  retrieval_eval_no_step_summary (bool):*", "  retrieval_eval_k (string):*"):
        result.stdout.fnmatch_lines([line])


def test_report_header_and_qq(pytester: pytest.Pytester, data: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the terminal's width, on every pytest version
    result = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle")
    result.stdout.fnmatch_lines(["retrieval-eval: lme, 5 usable pairs, lane model-free, "
                                 "model none, retrievers",
                                 "  bm25, oracle, k 1,5,10"])  # fitted to pytester's 80
    wide = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle",
               "--retrieval-eval-k", "1,5,10,20,50,100,200,500")
    header = wide.stdout.str().split("rootdir:")[0].splitlines()
    assert max(map(len, header)) <= 80, header
    quiet = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle", "-qq")
    lines = quiet.stdout.lines
    assert not [line for line in lines if line.startswith(("multi-session", "lane:",
                                                           "median latency"))]
    assert len([line for line in lines if line.startswith("overall")]) == 1  # recall@k's
    every = run(pytester, data, "--retrieval-eval-retriever", "bm25,oracle", "-qq",
                "--retrieval-eval-tables=all").stdout.lines
    assert len([line for line in every if line.startswith("overall")]) == 4  # 4 families


def test_junit_xml_validates_as_xunit2(pytester: pytest.Pytester, data: Path) -> None:
    """No <properties> under xunit2 (its schema has none for a testcase); the classname is
    the path to the question and the name the retriever."""
    xml = pytester.path / "j.xml"
    run(pytester, data, "--retrieval-eval-retriever", "bm25", f"--junitxml={xml}")
    cases = list(ET.parse(xml).getroot().iter("testcase"))
    assert next((c.get("classname"), c.get("name")) for c in cases) == (
        "retrieval-eval.multi-session.q1", "bm25")
    assert all(not list(c.iter("properties")) for c in cases)


def test_no_numbered_sql_placeholders() -> None:
    """Python 3.12 warns for each ``?NNN`` placeholder bound from a sequence; the store's
    statements use plain ``?`` (vipune's ``?1..?7`` bind the same values in order)."""
    import re

    from pytest_retrieval_eval.vipune import schema

    for name in dir(schema):
        value = getattr(schema, name)
        if isinstance(value, str) and name.endswith("_SQL"):
            assert not re.search(r"\?\d", value), name


def test_hybrid_first_run_under_w_error(pytester: pytest.Pytester, data: Path) -> None:
    """An empty cache, stores built during the run, every warning an error: no item fails."""
    result = pytester.runpytest_subprocess(  # in-process, -W error trips on pytester's imports
        "-W", "error", "--retrieval-eval", "--no-model", f"--retrieval-eval-data={data}",
        "--retrieval-eval-retriever", "fts")
    result.assert_outcomes(passed=5)


def test_pytest_repeat_count_says_the_pairs_are_scored_once(pytester: pytest.Pytester,
                                                            data: Path) -> None:
    pytest.importorskip("pytest_repeat")
    pytester.makepyfile("def test_own(): pass")
    result = run(pytester, data, "--retrieval-eval-retriever", "bm25",
                 "--count", "3")
    result.assert_outcomes(passed=5 + 3)  # the 5 pairs once, the user's test three times
    result.stdout.fnmatch_lines(["retrieval-eval: pytest-repeat's --count 3 repeats your own "
                                 "tests, not the*"])
    once = run(pytester, data, "--retrieval-eval-retriever", "bm25")
    assert "pytest-repeat's" not in once.stdout.str()


def _passed_ids(result: pytest.RunResult) -> list[str]:
    """The ids ``-rA`` lists as passed, serially and under xdist alike."""
    return sorted(line.split(" ", 1)[1] for line in result.stdout.lines
                  if line.startswith("PASSED "))


def _run_listing_passed(pytester: pytest.Pytester, data: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        *IN_ORDER, "-p", "no:cacheprovider", "-rA", "-W",
        "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval", "--no-model",
        f"--retrieval-eval-data={data}", "--retrieval-eval-retriever", "bm25,oracle", *args)


#: What ``tests retrieval-eval::temporal-reasoning`` selects, serially.
TEMPORAL_AND_OWN = ["retrieval-eval::temporal-reasoning::q3::bm25",
                    "retrieval-eval::temporal-reasoning::q3::oracle",
                    "retrieval-eval::temporal-reasoning::q4::bm25",
                    "retrieval-eval::temporal-reasoning::q4::oracle",
                    "tests/test_own.py::test_own"]


@pytest.mark.parametrize(("args", "dist"), [
    (("retrieval-eval::temporal-reasoning",), "load"),
    (("retrieval-eval::knowledge-update::q5::oracle",), "loadscope"),
    (("retrieval-eval",), "loadfile"),
    (("tests", "retrieval-eval::knowledge-update"), "worksteal"),
    (("tests", "retrieval-eval::temporal-reasoning"), "each"),
], ids=["type-load", "full-id-loadscope", "root-loadfile", "path-and-type-worksteal",
        "path-and-type-each"])
def test_node_ids_select_the_same_items_under_xdist_in_every_dist_mode(
        pytester: pytest.Pytester, data: Path, args: tuple[str, ...], dist: str) -> None:
    """Issue 29.1: a worker parses the controller's command line again, so the plugin's
    node ids must come off its args too (they selected nothing: ``2 workers [0 items]``).
    Each form of node id is run under another ``--dist`` mode (every mode is run once):
    ``-n 2`` passes exactly the items the serial run passes (``each``: on both workers)."""
    pytest.importorskip("xdist")
    pytester.mkdir("tests").joinpath("test_own.py").write_text("def test_own(): pass\n")
    serial = _run_listing_passed(pytester, data, *args)
    assert serial.ret == 0, serial.stdout.str()
    expected = _passed_ids(serial)
    assert expected
    if args == ("tests", "retrieval-eval::temporal-reasoning"):
        assert expected == TEMPORAL_AND_OWN
    parallel = _run_listing_passed(pytester, data, "-n", "2", "--dist", dist, *args)
    assert parallel.ret == 0, parallel.stdout.str()
    # --dist each runs every item on each worker
    assert _passed_ids(parallel) == (sorted(expected * 2) if dist == "each" else expected)


OPEN_CONNECTIONS = """
import gc
import os
import sqlite3

import pytest


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    gc.collect()
    opened = 0
    for obj in gc.get_objects():
        if isinstance(obj, sqlite3.Connection):
            try:
                obj.total_changes
            except sqlite3.ProgrammingError:  # closed
                continue
            opened += 1
    name = getattr(config, "workerinput", {}).get("workerid", "controller")
    with open(os.path.join(os.path.dirname(__file__), f"open-{name}.txt"), "w") as f:
        f.write(str(opened))
"""


@pytest.mark.parametrize("extra", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_the_corpus_connection_is_closed_at_the_end(pytester: pytest.Pytester, data: Path,
                                                    extra: tuple[str, ...],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29.2: each process closes its corpus connection when pytest unconfigures (on
    Python 3.13+ an unclosed one is a ``ResourceWarning: unclosed database``), and in
    Python's development mode (``-X dev``: every ResourceWarning shown, an unclosed file's
    too) nothing is left open."""
    if extra:
        pytest.importorskip("xdist")
    monkeypatch.setenv("PYTHONDEVMODE", "1")  # -X dev, for the run and its workers
    pytester.makeconftest(OPEN_CONNECTIONS)
    # pytest-rerunfailures (the test extra's) leaves its own socket to the controller open
    # in each xdist worker at exit (its ClientStatusDB): not this plugin's to close.
    result = pytester.runpytest_subprocess(
        *IN_ORDER, "-p", "no:cacheprovider", "-p", "no:rerunfailures",
        "-W", "error::ResourceWarning", "--retrieval-eval", "--no-model",
        f"--retrieval-eval-data={data}", "--retrieval-eval-retriever", "bm25", *extra)
    result.assert_outcomes(passed=5)
    assert "ResourceWarning" not in result.stdout.str() + result.stderr.str()
    counts = {p.name: p.read_text() for p in pytester.path.glob("open-*.txt")}
    assert counts == ({"open-controller.txt": "0", "open-gw0.txt": "0", "open-gw1.txt": "0"}
                      if extra else {"open-controller.txt": "0"})
