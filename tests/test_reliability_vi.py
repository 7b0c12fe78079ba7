"""Issue 43 ("Reliability VI"), items 1-11: one reading of every value, and no output written
over a file that is not the plugin's own. Each test here failed on the code before its fix;
the doors' property test is tests/test_boundary_doors.py."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.boundary.turn_ids import parse_turn_id
from pytest_retrieval_eval.data.pairs import render_session
from pytest_retrieval_eval.errors import RetrieverError
from pytest_retrieval_eval.reporting import report
from pytest_retrieval_eval.retrievers import Memory, Persona, Query
from pytest_retrieval_eval.retrievers.memories import read_memories
from pytest_retrieval_eval.retrievers.memory_tokens import memory_text
from pytest_retrieval_eval.retrievers.ranked_output import REPEATS_READ
from pytest_retrieval_eval.retrievers.ranking import READ_CUT, rank_per_k
from tests.support.reliability_support import joined_errors


def persona(turns: dict[str, int]) -> Persona:
    ids = tuple(turns)
    rows = [[{"role": "user", "content": f"{sid} turn {n}"} for n in range(1, k + 1)]
            for sid, k in turns.items()]
    return Persona(key="p", session_ids=ids, created_at=("",) * len(ids),
                   vectors=np.zeros((len(ids), 2), dtype=np.float32),
                   texts=[render_session(r) for r in rows],
                   store_path=lambda: Path("/nonexistent"), turns=rows)


# 43.2: one grammar of a turn id, refused in one line wherever Python's int() reads more.
@pytest.mark.parametrize("number", ["01", "0", "\u0661", "\uff11", "\u00b2", "1" * 5000,
                                    "1_0", " 1", "+1", "1\n"])
def test_a_turn_number_outside_the_grammar_is_refused_in_one_line(number: str) -> None:
    tid = f"s_1_{number}"
    assert parse_turn_id(tid) is None
    with pytest.raises(RetrieverError) as err:
        read_memories([Memory("m", turns=(tid,))], persona({"s_1": 3}), "store", "q1")
    message = str(err.value)
    assert "\n" not in message and message.startswith("store: question q1: memory 'm' names")
    assert "ASCII digits without a leading zero" in message


def test_the_grammar_reads_the_session_up_to_the_last_underscore() -> None:
    assert parse_turn_id("a_b_12") == ("a_b", 12)
    assert parse_turn_id("s_" + "9" * 9) == ("s", 999_999_999)
    assert parse_turn_id("s_" + "1" * 10) is None and parse_turn_id("_1") is None
    got = read_memories([Memory("m", turns=("s_1_3",))], persona({"s_1": 3}), "store", "q1")
    assert got[0].turns == ("s_1_3",)


# 43.3: one reading of an id: turn a_1 of session a, never session a_1's text.
def test_a_turn_id_that_is_also_a_session_id_is_refused_in_one_line() -> None:
    with pytest.raises(RetrieverError, match=r"names turn 'a_1', which is also a session id"):
        read_memories([Memory("m", turns=("a_1",))], persona({"a": 2, "a_1": 40}), "store",
                      "q1")


def test_tokens_and_excerpts_read_a_turn_as_the_provenance_check_does() -> None:
    p = persona({"a": 2, "a_1": 40})
    assert memory_text(Memory("m", turns=("a_1",)), p) == render_session([p.turns[0][0]])
    assert memory_text(Memory("m", turns=("a_2",)), p) == render_session([p.turns[0][1]])


class Store:
    name = "store"

    def __init__(self, items: object) -> None:
        self.items = items

    def rank(self, persona: object, query: object, limit: int) -> object:
        return self.items


def query() -> Query:
    return Query("q1", "single-session-user", "what?", "", None, ("b",))


# 43.5: an (id, nan) pair from rank is refused in one line, as a Memory's NaN already was.
@pytest.mark.parametrize("score", [float("nan"), float("inf"), -float("inf"), 10**400],
                         ids=["nan", "inf", "-inf", "10**400"])
@pytest.mark.parametrize("memory", [False, True])
def test_a_pair_without_a_finite_score_is_refused_in_one_line(score: float,
                                                              memory: bool) -> None:
    items: list[object] = [("a", 1.0), ("b", score)]
    if memory:  # beside a memory: read as memories
        items.append(Memory("m", 0.5, ("c",), text="x"))
    with pytest.raises(RetrieverError) as err:
        rank_per_k(Store(items), persona({"a": 1, "b": 1, "c": 1}), query(), [2],  # type: ignore[arg-type]
                   {}, memories={})
    message = str(err.value)
    assert "\n" not in message and message.startswith("store: question q1: rank returned ")
    assert "whose score is not a finite number" in message


# 43.4: a finite list is read until it covers limit sessions, however long; an iterator's
# bound, where it cuts the read, is said in the JSON (read_cut) and under the summary.
def test_a_long_finite_memory_list_is_read_until_it_covers_limit_sessions() -> None:
    p = persona({f"s{i}": 1 for i in range(15)})
    items = [Memory(f"m{i}", None, ("s0",), text="x") for i in range(330)]
    items += [Memory(f"n{i}", None, (f"s{i}",), text="x") for i in range(1, 15)]
    counts: dict[str, int] = {}
    rankings, _ = rank_per_k(Store(items), p, query(), [10], {},  # type: ignore[arg-type]
                             memories={}, counts=counts)
    assert rankings[10] == [f"s{i}" for i in range(10)]
    assert READ_CUT not in counts
    counts.clear()
    rank_per_k(Store(iter(items)), p, query(), [10], {}, memories={},  # type: ignore[arg-type]
               counts=counts)
    assert counts[READ_CUT] == REPEATS_READ * 15
    line = report._cut_lines({"pairs": [{"retriever": "store", "read_cut": 120}]})
    assert line == ["read cut: store: 1 pair(s) ranked from the first 120 items of an "
                    "iterator, short of max-k sessions; return a list to be read to the end"]


# 43.10: a pytest usage error writes no report (it replaced an existing one with an empty one).
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("args", [("no_such_dir/",), ("-k", "a and (")],
                         ids=["missing-path", "bad-k"])
def test_a_usage_error_leaves_the_existing_report_alone(pytester: pytest.Pytester,
                                                       args: tuple[str, ...]) -> None:
    out = pytester.path / "report.json"
    out.write_text('{"schema_version": 1, "mine": true}\n')
    result = pytester.runpytest_inprocess("--retrieval-eval", "--no-model",
                                          f"--retrieval-eval-json={out}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert out.read_text() == '{"schema_version": 1, "mine": true}\n'


# 43.11: an output is written only where no file is, or over a file this plugin wrote.
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("option", ["--retrieval-eval-json", "--retrieval-eval-markdown"])
def test_an_output_over_a_file_not_ours_is_refused_in_one_line(pytester: pytest.Pytester,
                                                               option: str) -> None:
    mine = pytester.makepyfile(test_mine="def test_x():\n    assert True\n")
    before = mine.read_bytes()
    result = pytester.runpytest_inprocess("--retrieval-eval", "--no-model",
                                          f"{option}={mine}", str(mine))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert mine.read_bytes() == before
    errors = [line for line in joined_errors(result.stderr.str()) if line.startswith("ERROR:")]
    assert len(errors) == 1 and f"{option} {mine} is a file this plugin did not write" in \
        errors[0], result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_every_writer_keeps_to_the_rule(tmp_path: Path) -> None:
    import copy

    from tests.reporting.test_report import RESULTS, info

    markdown_report = report.build_report(info(["a", "b"]), copy.deepcopy(RESULTS), [])
    from pytest_retrieval_eval.boundary.outputs import (
        MARKDOWN_MARKER,
        foreign_output,
        output_refusal,
    )
    from pytest_retrieval_eval.errors import CacheError, RetrievalEvalError
    from pytest_retrieval_eval.reporting import badge, publish, trec_files

    theirs = tmp_path / "store.py"
    theirs.write_text("print('a store')\n")
    for kind in ("json", "markdown", "svg", "png", "pdf", "badge-json", "trec", "dataset"):
        assert foreign_output(theirs, kind), kind
        line = output_refusal("--out", theirs, kind)
        assert line is not None and "\n" not in line and str(theirs) in line
    empty = tmp_path / "empty"
    empty.touch()
    assert not foreign_output(empty, "json") and not foreign_output(tmp_path / "none", "json")
    # the JSON report: refused over a file not ours, written again over its own
    rep = {"schema_version": 1, "pairs": [], "summary": {}}
    with pytest.raises(CacheError, match="is a file this plugin did not write"):
        report.write_json(rep, theirs)
    out = tmp_path / "r.json"
    report.write_json(rep, out)
    report.write_json(rep, out)
    assert not foreign_output(out, "json")
    # Markdown: its marker line first, the step summary appended as before
    md = tmp_path / "s.md"
    lines = publish.publish_markdown(markdown_report, md, False)
    assert md.read_text().splitlines()[0] == MARKDOWN_MARKER and not foreign_output(md, "markdown")
    assert publish.publish_markdown(markdown_report, md, False) == lines
    refused = publish.publish_markdown(markdown_report, theirs, False)
    assert len(refused) == 1 and "is a file this plugin did not write" in refused[0]
    assert theirs.read_text() == "print('a store')\n"
    # a badge's SVG names the plugin
    svg = tmp_path / "b.svg"
    svg.write_text(badge.badge_svg("recall@10 x", 0.5))
    assert not foreign_output(svg, "svg")
    # TREC export: its own files replaced, another file of the same name refused
    export = trec_files.TrecExport({"qrels": "q1 0 s1 1\n", "a.run": "q1 Q0 s1 1 1 a\n"},
                                   1, 1, 0, {})
    trec_files.write_trec_files(export, tmp_path / "trec")
    trec_files.write_trec_files(export, tmp_path / "trec")
    (tmp_path / "trec" / "qrels").write_text("my own notes\n")
    with pytest.raises(RetrievalEvalError, match="is a file this plugin did not write"):
        trec_files.write_trec_files(export, tmp_path / "trec")
    assert (tmp_path / "trec" / "qrels").read_text() == "my own notes\n"


@pytest.mark.usefixtures("isolated_cache")
def test_the_script_of_a_cmd_store_inside_sh_c_is_not_replaced(
        pytester: pytest.Pytester) -> None:
    store = pytester.path / "store.py"
    store.write_text("import sys\n")
    result = pytester.runpytest_inprocess(
        "--retrieval-eval", "--no-model", "--retrieval-eval-json=store.py",
        "--retrieval-eval-retriever=cmd:sh -c 'python3 store.py'")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert store.read_text() == "import sys\n"
    assert "--retrieval-eval-json store.py is a file this plugin did not write" in \
        " ".join(joined_errors(result.stderr.str()))


# 43.7: persona.embed("text") is refused in one line (it embedded each character and cached
# the vectors); non-str items get the same one line, never a traceback.
@pytest.mark.parametrize("texts", ["a text", b"bytes", [1], [None], [b"x"], ["ok", "\ud800"],
                                   {"a": "b"}, 5],
                         ids=["str", "bytes", "int", "None", "bytes-item", "surrogate",
                              "mapping", "int-alone"])
def test_persona_embed_takes_a_list_of_str_only(texts: object) -> None:
    asked: list[list[str]] = []

    def vectors(given: object) -> np.ndarray:
        asked.append(list(given))  # type: ignore[call-overload]
        return np.zeros((len(asked[-1]), 2), dtype=np.float32)

    p = persona({"s": 1})
    object.__setattr__(p, "text_vectors", vectors)
    with pytest.raises(RetrieverError) as err:
        p.embed(texts)  # type: ignore[arg-type]
    assert str(err.value).startswith("persona.embed: ") and "\n" not in str(err.value)
    assert "persona.embed([text])" in str(err.value)
    assert asked == []
    got = p.embed(iter(["a", "b"]))  # type: ignore[arg-type]
    assert got.shape == (2, 2) and asked == [["a", "b"]]


# 43.6: the footprint counts allocated blocks, each (device, inode) once.
def test_the_footprint_counts_allocated_blocks_each_file_once(tmp_path: Path) -> None:
    from pytest_retrieval_eval.run.store_costs import folder_bytes

    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as fh:
        fh.write(b"x" * 65536)
        fh.truncate(1 << 40)  # 1 TiB, 64 KiB of it written
    dense = tmp_path / "sub" / "dense"
    dense.parent.mkdir()
    dense.write_bytes(b"y" * 65536)
    for i in range(3):
        (tmp_path / f"link{i}").hardlink_to(dense)
    blocks = sum(os.stat(p).st_blocks * 512 for p in (sparse, dense))
    assert folder_bytes(tmp_path) == blocks
    assert folder_bytes(tmp_path) < 1 << 20


# 43.8: the budget tokenizer is pinned by its sha256, as run: files are: a worker whose file
# was replaced after the controller read it never counts with the new bytes.
def test_a_tokenizer_replaced_after_the_pin_counts_nothing_and_stops_the_run(
        tmp_path: Path) -> None:
    import hashlib

    from pytest_retrieval_eval.errors import StopRun
    from pytest_retrieval_eval.vectors import token_counts as tc
    from tests.support.model_factory import build_wordpiece_tokenizer

    path = tmp_path / "tokenizer.json"
    build_wordpiece_tokenizer(path)
    pin = hashlib.sha256(path.read_bytes()).hexdigest()
    counts = tc.run_counts(str(path), tmp_path / "cache", pin=pin)  # the controller's read
    assert counts.counter.identity["sha256"] == pin
    first = counts.counter.count("hello world")
    build_wordpiece_tokenizer(path, ["other", "words"])  # replaced as the workers start
    assert hashlib.sha256(path.read_bytes()).hexdigest() != pin
    worker = tc.run_counts(str(path), tmp_path / "cache", pin=pin)
    assert worker.counter.identity == counts.counter.identity  # the same cache of counts
    with pytest.raises(StopRun, match=r"changed since the run started \(sha256 "):
        worker.counter.count("hello world")
    assert first >= 1


# 43.9: a budget metric is never compared across reports counted by different tokenizers.
def test_compare_and_history_refuse_tokens_of_two_tokenizers(tmp_path: Path) -> None:
    import copy

    from pytest_retrieval_eval.reporting.compare import CompareError, compare_reports
    from pytest_retrieval_eval.reporting.history import HistoryError, choose, entries
    from tests.reporting.test_report import KS, RESULTS, info

    results = copy.deepcopy(RESULTS)
    for i, r in enumerate(results):
        r["metrics"].update({f"tokens@{k}": 100.0 + i for k in KS})
    base = report.build_report(info(["a", "b"]), results, [])
    new = copy.deepcopy(base)
    base["budget"] = {"budgets": [500], "tokenizer": {"name": "o200k_base",
                                                      "library": "bpe-openai", "version": "1"}}
    new["budget"] = {"budgets": [500], "tokenizer": {"name": "cl100k_base",
                                                     "library": "bpe-openai", "version": "1"}}
    with pytest.raises(CompareError, match=r"counted tokens with different tokenizers "
                       r"\(o200k_base \(bpe-openai 1\) vs cl100k_base \(bpe-openai 1\)\): "
                       r"tokens@1 cannot be compared"):
        compare_reports(base, new, metrics=["tokens"])
    assert compare_reports(base, new, metrics=["recall"])["matched"]  # not in tokens: fine
    assert compare_reports(base, copy.deepcopy(base), metrics=["tokens"])["matched"]
    (tmp_path / "a.json").touch()
    (tmp_path / "b.json").touch()
    history = entries([(tmp_path / "a.json", base), (tmp_path / "b.json", new)])
    with pytest.raises(HistoryError, match="counted tokens with different tokenizers"):
        choose(history, new, "tokens", None)
    assert choose(history, new, "recall", None)[0]
