"""Every bad input ends in one clear line; no fault loses work (issue 6).

Each test goes through the user's surface (the plugin via pytester, or the ``retrieval-eval``
CLI) and checks the exit code, the ONE message line (no traceback), that nothing half-written
is left behind, and, for faults inside one instance, that the pair is rejected (or scored with
a flag) and counted in the summary and the JSON report while the other pairs are scored.

The test names read as the table of what is covered: ``test_data_file_*`` (file-level faults:
usage errors), ``test_instance_*`` (one bad pair among good ones), ``test_option_*`` and
``test_env_*`` (options and environment), ``test_fault_*`` (kills, corruption, concurrency,
a misbehaving vipune).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.config.options import OPTIONS
from pytest_retrieval_eval.config.settings import Settings
from pytest_retrieval_eval.data.dataset import DatasetSource
from pytest_retrieval_eval.data.ingest import load_corpus
from pytest_retrieval_eval.errors import RetrievalEvalError
from pytest_retrieval_eval.reporting.report import build_report, terminal_lines
from pytest_retrieval_eval.run.session import EvalSession
from pytest_retrieval_eval.vectors.cache import VectorCache
from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder, resolve_model
from tests.data.test_pairs import mutated_instances
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.processes import default_sigint
from tests.support.reliability_support import (
    BGE,
    SNAPSHOT,
    TESTS_FAILED,
    fake_hf_cache,
    fake_vipune_wrapper,
    flip_bytes,
    joined_errors,
    no_traceback,
    partials,
    run_plugin,
    subprocess_env,
    table_lines,
    truncate,
    usage_error_line,
    write_query_vectors,
)
from tests.support.wrapped import unwrap

ROOT = Path(__file__).resolve().parent.parent
PREP_SUMMARY = re.compile(
    r"^prep: (\d+) slots, (\d+) unique texts, (\d+) embedded now, (\d+) from cache, "
    r"\d+\.\ds \(model tiny-model, fingerprint [0-9a-f]{12}"
    r"(?:; not loaded: every vector needed was "
    r"cached)?\)$"
)
INTERRUPTED = re.compile(
    r"retrieval-eval: interrupted; (\d+) vectors saved, run the same command to resume\n")


@pytest.fixture(autouse=True)
def cache(isolated_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The isolated cache (root conftest), with the stand-in vipune behaving normally, and a
    wide terminal: these tests match whole summary lines, which a narrow one would wrap
    (test_fit_lines.py checks the wrapping)."""
    for name in ("FAKE_VIPUNE_MODE", "FAKE_VIPUNE_VECTORS", "FAKE_VIPUNE_LOG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return isolated_cache


def good_instances() -> list[dict[str, Any]]:
    return [make_instance("ok1", question_type="single-session-user"),
            make_instance("ok2", question_type="temporal-reasoning", gold=(0, 2))]


# =========================================================================== data: the file


def file_fault(pytester: pytest.Pytester, cache: Path, path: Path, *needles: str) -> str:
    """The dataset at ``path`` stops the run: one usage-error line, no corpus, no temp file."""
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever", "bm25",
                        "--retrieval-eval-data", str(path))
    line = usage_error_line(result, *needles)
    assert str(path.name) in line
    assert partials(cache) == []
    assert list(cache.glob("corpus/*.sqlite")) == []
    return line


def good_bytes(tmp_path: Path) -> bytes:
    return write_dataset(tmp_path / "good.json", good_instances()).read_bytes()


def test_data_file_missing(pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    file_fault(pytester, cache, tmp_path / "nowhere.json",
               "neither a known name nor an existing file", "pass one of")


def test_data_file_empty(pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    file_fault(pytester, cache, path, "is empty (0 bytes)", "download it again")


def test_data_file_not_json(pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "page.json"
    path.write_text("<!DOCTYPE html><html>rate limited</html>", encoding="utf-8")
    file_fault(pytester, cache, path, "is not JSON", "pass a LongMemEval JSON file")


def test_data_file_truncated_mid_stream(pytester: pytest.Pytester, cache: Path,
                                        tmp_path: Path) -> None:
    data = good_bytes(tmp_path)
    for keep in (0.3, 0.77):  # inside a string, and elsewhere: both read as truncation
        path = tmp_path / f"cut{keep}.json"
        path.write_bytes(data[: int(len(data) * keep)])
        file_fault(pytester, cache, path, f"ends early at byte {path.stat().st_size}",
                   "interrupted download", "download it again")


def test_data_file_not_an_array(pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "object.json"
    path.write_text(json.dumps({"data": good_instances()}), encoding="utf-8")
    file_fault(pytester, cache, path, "not an array of instances", "one JSON array")


def test_data_file_not_utf8(pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(good_bytes(tmp_path).replace(b"topic 1", "topic \xe9".encode("latin-1")))
    file_fault(pytester, cache, path, "is not valid UTF-8 (at byte", "re-save it as UTF-8")
    utf16 = tmp_path / "utf16.json"
    utf16.write_bytes(good_bytes(tmp_path).decode("utf-8").encode("utf-16"))
    file_fault(pytester, cache, utf16, "is not UTF-8 (it looks like UTF-16)", "re-save")


def test_data_file_gzip_compressed_by_mistake(pytester: pytest.Pytester, cache: Path,
                                              tmp_path: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_bytes(gzip.compress(good_bytes(tmp_path)))
    line = file_fault(pytester, cache, path, "is gzip-compressed", "gunzip -c lme.json >")
    assert "> lme.json" not in line  # the fix must not overwrite the file it reads


def test_data_file_with_no_usable_pair(pytester: pytest.Pytester, cache: Path,
                                       tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "bad.json", [
        make_instance("a1", drop=["question"]),
        make_instance("a2_abs"),
    ])
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever", "bm25",
                        "--retrieval-eval-data", str(path))
    usage_error_line(result, "no usable pair", "of 2 instance(s), 1 rejected and 1 abstention",
                     "first rejection: instance 0 (a1): missing field 'question'",
                     "--retrieval-eval-data")
    assert partials(cache) == []


# =========================================================================== data: one instance


def run_with(pytester: pytest.Pytester, cache: Path, tmp_path: Path,
             *faulty: dict[str, Any]) -> tuple[pytest.RunResult, dict[str, Any]]:
    """Score two good pairs plus ``faulty`` (bm25 and oracle, model-free); the JSON report."""
    data = write_dataset(tmp_path / "lme.json", [*good_instances(), *faulty])
    out = tmp_path / "out" / "report.json"
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever", "bm25,oracle",
                        "--retrieval-eval-data", str(data), "--retrieval-eval-json", str(out))
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    no_traceback(result)
    assert partials(cache, out.parent) == []
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result, report


def literal(text: str) -> str:
    """``text`` as an fnmatch pattern matching itself (``[``, ``]``, ``*``, ``?`` escaped)."""
    return re.sub(r"([\[\]*?])", r"[\1]", text)


def rejected(pytester: pytest.Pytester, cache: Path, tmp_path: Path, faulty: dict[str, Any],
             reason: str) -> None:
    """``faulty`` is rejected with ``reason``, counted and listed; the good pairs are scored."""
    result, report = run_with(pytester, cache, tmp_path, faulty)
    qid = faulty.get("question_id")
    assert {p["question_id"] for p in report["pairs"]} == {"ok1", "ok2"}
    assert report["skipped"]["rejected"] == 1
    (rejection,) = report["rejections"]
    assert rejection["index"] == 2 and rejection["question_id"] == qid
    assert reason in rejection["reason"] and "\n" not in rejection["reason"]
    result.stdout.fnmatch_lines([
        "pairs: 2 scored of 2 usable; skipped 0 abstention, 1 rejected, 0 not selected",
        "rejected: 1 instance(s) not scored, each with its reason:",
        f"  instance 2 ({qid}): *{literal(reason)}*",
    ])
    result.assert_outcomes(passed=4)


def flagged(pytester: pytest.Pytester, cache: Path, tmp_path: Path, faulty: dict[str, Any],
            note: str, count: int, summary: str) -> dict[str, Any]:
    """``faulty`` is scored, its anomaly counted in the summary's notes and in the report."""
    result, report = run_with(pytester, cache, tmp_path, faulty)
    qid = faulty["question_id"]
    assert report["rejections"] == [] and report["skipped"]["rejected"] == 0
    mine = [p for p in report["pairs"] if p["question_id"] == qid]
    assert [p["retriever"] for p in mine] == ["bm25", "oracle"]
    assert mine[0]["notes"][note] == count
    assert report["notes"][note] >= 1
    result.stdout.fnmatch_lines([
        "pairs: 3 scored of 3 usable; skipped 0 abstention, 0 rejected, 0 not selected",
        f"notes: *{literal(summary)}*",
    ])
    result.assert_outcomes(passed=6)
    return {p["retriever"]: p for p in mine}


def test_instance_missing_field_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    rejected(pytester, cache, tmp_path, make_instance("bad", drop=["haystack_dates"]),
             "missing field 'haystack_dates'")


def test_instance_question_not_a_string_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    rejected(pytester, cache, tmp_path, make_instance("bad", question=["what?"]),
             "field 'question' is a list, not a string")


def test_instance_sessions_not_lists_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    raw = make_instance("bad")
    raw["haystack_sessions"][1] = "user: hello"
    rejected(pytester, cache, tmp_path, raw, "haystack_sessions[1] (session 'bad_s1') is a "
             "string, not a list of turns")


def test_instance_turn_without_role_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    raw = make_instance("bad")
    del raw["haystack_sessions"][2][1]["role"]
    rejected(pytester, cache, tmp_path, raw, "haystack_sessions[2][1] (session 'bad_s2') has "
             "no 'role'")


def test_instance_turn_without_content_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    raw = make_instance("bad")
    del raw["haystack_sessions"][0][0]["content"]
    rejected(pytester, cache, tmp_path, raw, "has no 'content'")


def test_instance_haystack_lists_of_different_lengths_are_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    raw = make_instance("bad", n_sessions=4)
    raw["haystack_dates"].pop()
    rejected(pytester, cache, tmp_path, raw,
             "haystack lists differ in length: 4 session ids, 3 dates, 4 sessions")


def test_instance_empty_session_is_dropped_counted_and_the_pair_scored(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    raw = make_instance("bad", n_sessions=4, gold=(1,))
    raw["haystack_sessions"][3] = []
    pairs = flagged(pytester, cache, tmp_path, raw, "empty_sessions", 1,
                    "1 empty session(s) dropped")
    assert "bad_s3" not in pairs["bm25"]["ranked"]
    assert pairs["oracle"]["metrics"]["recall@1"] == 1.0


def test_instance_oversize_session_is_scored_and_counted_as_vipune_refusing_it(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    raw = make_instance("bad", n_sessions=3)
    raw["haystack_sessions"][2] = [{"role": "user", "content": "é" * 50_001}]  # 100,008 bytes
    flagged(pytester, cache, tmp_path, raw, "oversize_sessions", 1,
            "1 session(s) over vipune's 100000-byte input limit (scored; vipune's add would "
            "refuse them)")


def test_instance_repeated_session_id_is_scored_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    raw = make_instance("bad", n_sessions=4)
    raw["haystack_session_ids"][3] = raw["haystack_session_ids"][0]
    pairs = flagged(pytester, cache, tmp_path, raw, "repeated_session_ids", 1,
                    "1 repeated session id(s) (first occurrence kept)")
    assert sorted(pairs["bm25"]["ranked"]) == ["bad_s0", "bad_s1", "bad_s2"]


def test_instance_repeated_question_id_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    rejected(pytester, cache, tmp_path, make_instance("ok1", question_type="multi-session"),
             "repeated question_id 'ok1' (first used by instance 0); question ids must be "
             "unique")


def test_instance_gold_id_absent_from_haystack_is_scored_with_a_flag(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    raw = make_instance("bad", n_sessions=3, answer_session_ids=["bad_s1", "elsewhere"])
    pairs = flagged(pytester, cache, tmp_path, raw, "gold_not_in_haystack", 1,
                    "1 pair(s) with gold ids not in the haystack (scored; those ids count "
                    "as misses)")
    assert pairs["oracle"]["metrics"]["recall@10"] == 0.5  # the absent id is a miss
    assert pairs["oracle"]["metrics"]["ndcg_any@10"] == 1.0  # but not an unreachable ideal


def test_instance_empty_gold_list_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    rejected(pytester, cache, tmp_path, make_instance("bad", answer_session_ids=[]),
             "empty gold list: answer_session_ids is []")


def test_instance_unknown_question_type_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    rejected(pytester, cache, tmp_path, make_instance("bad", question_type="trivia"),
             "unknown question_type 'trivia' (expected one of: single-session-user")


def test_instance_empty_question_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    rejected(pytester, cache, tmp_path, make_instance("bad", question=" \n\t "),
             "question is empty")


def test_instance_over_long_question_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    rejected(pytester, cache, tmp_path, make_instance("bad", question="why " * 25_001),
             "question is 100003 bytes, over vipune's 100000-byte input limit")


def test_instance_date_that_does_not_parse_is_rejected_and_counted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    raw = make_instance("bad")
    raw["haystack_dates"][1] = "last Tuesday"
    rejected(pytester, cache, tmp_path, raw,
             "haystack_dates[1] 'last Tuesday' is not a date like '2023/05/30 (Tue) 23:40'")
    rejected(pytester, cache, tmp_path, make_instance("bad", question_date="2023/13/45"),
             "question_date '2023/13/45' is not a date")


def test_instance_rejections_are_counted_by_the_prep_cli_too(
        tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_dataset(tmp_path / "lme.json", [
        *good_instances(), make_instance("bad", question_type="trivia"),
        make_instance("worse", drop=["question"])])
    assert cli.main(prep_argv(data, tiny_model_dir, tmp_path / "cache")) == 0
    out, err = capsys.readouterr()
    assert err == (
        "retrieval-eval: warning: 2 of 4 instances of lme are rejected (not embedded, not "
        "scored), e.g. instance 2 (bad): unknown question_type 'trivia' (expected one of: "
        "single-session-user, single-session-assistant, single-session-preference, "
        "temporal-reasoning, knowledge-update, multi-session); `pytest --retrieval-eval "
        "--retrieval-eval-json=PATH` lists them all\n")
    assert unwrap(out).startswith("prep: 8 slots, 10 unique texts, 10 embedded now, 0 from cache")


# --------------------------------------------------------------------------- fuzz, plugin core


def run_settings(**changes: Any) -> Settings:
    """The plugin's settings with every option at its default, then ``changes``."""
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        name = opt.dest.removeprefix("retrieval_eval_") or "enabled"
        values["enabled" if name == "retrieval_eval" else name] = opt.default
    values.update(cache=None, json=None, store_dir=None)
    values["cache_dir"] = values.pop("cache")
    values["json_path"] = values.pop("json")
    values["ks"] = tuple(values.pop("k"))
    values["retrievers"] = tuple(values.pop("retriever"))
    values.update(changes)
    return Settings(**values)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(mutated_instances(), min_size=1, max_size=4), st.booleans())
def test_fuzz_mutated_instances_are_scored_pairs_or_counted_rejections(
        tmp_path: Path, raws: list[object], with_good: bool) -> None:
    """Random damage to valid instances, through the corpus, the session and the report:
    every instance is a scored pair (every retriever ranks it) or a one-line rejection,
    counted; a file with no usable pair is one usage-error line."""
    instances = [*raws, *([make_instance("good")] if with_good else [])]
    try:
        text = json.dumps(instances, allow_nan=False)
    except (ValueError, TypeError):
        assume(False)  # NaN and friends are not JSON: a file-level fault, tested above
    # An integer beyond 64 bits is a file-level fault too (the C JSON reader cannot read it).
    assume(all(abs(int(n)) < 2**63 for n in re.findall(r"(?<![\w.])-?\d{19,}", text)))
    work = Path(os.environ.get("PYTEST_XDIST_WORKER", "w"))
    run_dir = tmp_path / "fuzz" / work / str(time.monotonic_ns())
    run_dir.mkdir(parents=True)
    data = run_dir / "lme.json"
    data.write_text(text, encoding="utf-8")
    names = ("bm25", "oracle", "fts")
    session = EvalSession(run_settings(enabled=True, no_model=True, retrievers=names,
                                       data=str(data), cache_dir=run_dir / "cache"))
    try:
        session.prepare()
    except RetrievalEvalError as exc:
        assert "no usable pair" in str(exc) and "\n" not in str(exc), exc
        assert not with_good
        return
    session.finish_setup()
    corpus = session.corpus
    assert corpus is not None
    indexes = sorted([p.index for p in corpus.pairs] + [r.index for r in corpus.rejections])
    assert indexes == list(range(len(instances)))  # each instance: one outcome, none lost
    assert corpus.stats["rejected"] == len(corpus.rejections)
    for rejection in corpus.rejections:
        assert rejection.reason and "\n" not in rejection.reason
        assert not rejection.reason.startswith("unreadable instance"), rejection.reason
    usable = [i for i, p in enumerate(corpus.pairs) if not p.abstention]
    for position in usable:
        for name in names:
            result = session.run_pair(position, name)
            assert set(result["ranked"]) <= set(corpus.pairs[position].session_ids)
            assert all(0.0 <= v <= 1.0 and not math.isnan(v) for v in result["metrics"].values())
    from pytest_retrieval_eval.run.run_facts import run_info

    report = build_report(run_info(session), session.results, session.errors)
    assert report["skipped"]["rejected"] == len(corpus.rejections)
    assert len(report["rejections"]) == len(corpus.rejections)
    lines = terminal_lines(report)
    assert any(line.startswith(f"pairs: {len(usable)} scored of {len(usable)} usable")
               for line in lines)
    if corpus.rejections:
        assert f"rejected: {len(corpus.rejections)} instance(s) not scored" in "\n".join(lines)


# =========================================================================== options


def option_fault(pytester: pytest.Pytester, cache: Path, *args_and_needles: str) -> None:
    *args, needle = args_and_needles
    result = run_plugin(pytester, "--no-model", *args)
    usage_error_line(result, needle)
    assert not cache.exists()  # refused before anything was written


def test_option_k_zero(pytester: pytest.Pytester, cache: Path) -> None:
    option_fault(pytester, cache, "--retrieval-eval-k", "0",
                 "k 0 is out of range; each k must lie in 1..10000")


def test_option_k_negative(pytester: pytest.Pytester, cache: Path) -> None:
    option_fault(pytester, cache, "--retrieval-eval-k=-5", "k -5 is out of range")


def test_option_k_above_10000(pytester: pytest.Pytester, cache: Path) -> None:
    option_fault(pytester, cache, "--retrieval-eval-k", "1,10001",
                 "k 10001 is out of range; each k must lie in 1..10000 (vipune's "
                 "MAX_SEARCH_LIMIT)")


def test_option_k_not_a_number(pytester: pytest.Pytester, cache: Path) -> None:
    option_fault(pytester, cache, "--retrieval-eval-k", "1,ten",
                 "k 'ten' is not a whole number; give a comma list such as 1,5,10")


def test_option_unknown_retriever(pytester: pytest.Pytester, cache: Path) -> None:
    option_fault(pytester, cache, "--retrieval-eval-retriever", "hybrid,vipun",
                 "unknown retriever 'vipun'; did you mean 'vipune'? choose from hybrid")


def test_option_json_path_inside_a_file(pytester: pytest.Pytester, cache: Path,
                                        tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    option_fault(pytester, cache, "--retrieval-eval-json", str(blocker / "r.json"),
                 f"{blocker} is a file, not a folder; give a path in a writable folder")


def test_option_store_dir_is_a_file(pytester: pytest.Pytester, cache: Path,
                                    tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    option_fault(pytester, cache, "--retrieval-eval-store-dir", str(blocker),
                 f"--retrieval-eval-store-dir {blocker}: {blocker} is a file, not a folder")


# =========================================================================== environment


def test_env_no_model_with_a_cache_that_lacks_vectors(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "lme.json", good_instances())
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-data", str(data))
    usage_error_line(result, "--no-model: the cache at", "holds no vectors",
                     f"run `retrieval-eval prep --data {data}")
    assert partials(cache) == []


def test_env_cache_directory_cannot_be_written(pytester: pytest.Pytester,
                                               tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")  # root ignores chmod; a file does not
    target = blocker / "cache"
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-cache", str(target))
    usage_error_line(result, f"cache directory {target} cannot be written",
                     "--retrieval-eval-cache=DIR")
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_env_model_directory_without_tokenizer_json(
        pytester: pytest.Pytester, tmp_path: Path, tiny_model_dir: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "tokenizer.json").unlink()
    data = write_dataset(tmp_path / "lme.json", good_instances())
    result = run_plugin(pytester, "--retrieval-eval-data", str(data),
                        "--retrieval-eval-model", str(model))
    usage_error_line(result, "no tokenizer.json in it", "copy the model's tokenizer.json")


def test_env_model_file_that_is_not_onnx(
        pytester: pytest.Pytester, tmp_path: Path, tiny_model_dir: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "onnx" / "model.onnx").write_bytes(b"<html>Git LFS pointer, not a model</html>")
    data = write_dataset(tmp_path / "lme.json", good_instances())
    result = run_plugin(pytester, "--retrieval-eval-data", str(data),
                        "--retrieval-eval-model", str(model))
    usage_error_line(result, "onnxruntime cannot load it as an ONNX model",
                     "give a folder whose onnx/model.onnx is an ONNX export")


def test_env_hub_unreachable_for_a_named_dataset(pytester: pytest.Pytester,
                                                 cache: Path) -> None:
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-data", "longmemeval_s")
    usage_error_line(result, "dataset longmemeval_s", "not in the local Hugging Face cache",
                     "--no-model never downloads", "pass the path to a local copy")
    assert not cache.exists()


def test_env_hub_unreachable_for_the_default_model(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "lme.json", good_instances())
    result = run_plugin(pytester, "--retrieval-eval-data", str(data))
    usage_error_line(result, f"model '{BGE}': not in the local Hugging Face cache",
                     str(tmp_path / "hf-empty" / "hub"), "download it once with network",
                     "--retrieval-eval-model=DIR")
    assert partials(cache) == []


def test_env_cuda_asked_for_but_absent(pytester: pytest.Pytester, tmp_path: Path,
                                       tiny_model_dir: Path) -> None:
    import onnxruntime

    data = write_dataset(tmp_path / "lme.json", good_instances())
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-device", "cuda")
    usage_error_line(result, "--retrieval-eval-device cuda has nothing to run with --no-model")
    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has CUDA: the absent-CUDA line cannot be provoked here")
    result = run_plugin(pytester, "--retrieval-eval-data", str(data), "--retrieval-eval-model",
                        str(tiny_model_dir), "--retrieval-eval-device", "cuda")
    usage_error_line(result, "device 'cuda': onnxruntime here has no CUDAExecutionProvider",
                     "--retrieval-eval-device=cpu")


# =========================================================================== faults: prep


KILL_INSTANCES = 12
KILL_SESSIONS = 15
KILL_TEXTS = KILL_INSTANCES * (KILL_SESSIONS + 1)


@pytest.fixture(scope="module")
def kill_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    instances = [make_instance(f"k{i}", n_sessions=KILL_SESSIONS) for i in range(KILL_INSTANCES)]
    return write_dataset(tmp_path_factory.mktemp("kill") / "lme.json", instances)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, kill_data: Path,
                  tiny_model_dir: Path) -> np.ndarray:
    """The vectors of an uninterrupted prep of ``kill_data`` (all text keys, sorted)."""
    cache = tmp_path_factory.mktemp("clean") / "cache"
    assert cli.main(prep_argv(kill_data, tiny_model_dir, cache)) == 0
    return cached_vectors(cache, kill_data, tiny_model_dir)[0]


def prep_argv(data: Path, model: Path, cache: Path, *extra: str) -> list[str]:
    return ["prep", "--data", str(data), "--model", str(model), "--cache", str(cache),
            "--no-progress", *extra]


def cached_vectors(cache: Path, data: Path, model: Path) -> tuple[np.ndarray, int]:
    """(vectors of every text key in key order, how many keys the cache still lacks)."""
    embedder = load_embedder(str(model), EmbedConfig())
    keys = load_corpus(DatasetSource("lme", data), cache).all_text_keys()
    vectors = VectorCache(cache, embedder.fingerprint, embedder.dim, embedder.info())
    missing = len(vectors.missing(keys))
    return (vectors.get(keys) if not missing else np.zeros(0)), missing


def start_prep(data: Path, model: Path, cache: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_retrieval_eval.cli",
         *prep_argv(data, model, cache, "--chunk-size", "2")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(),
        preexec_fn=default_sigint,
    )


def shards(cache: Path) -> int:
    return len(list(cache.glob("vectors/*/shard-*.parquet.sha256")))


def wait_for_shards(proc: subprocess.Popen[str], cache: Path, target: int) -> bool:
    """Wait until ``target`` shards are committed; False if prep ended first."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if shards(cache) >= target:
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.002)
    raise AssertionError("prep stalled")


def resume_and_compare(cache: Path, data: Path, model: Path, expected: np.ndarray,
                       capsys: pytest.CaptureFixture[str]) -> None:
    """The next prep embeds exactly what is missing; the vectors equal an uninterrupted
    prep's; no temp file is left anywhere in the cache."""
    _, missing = cached_vectors(cache, data, model)
    assert 0 < missing < KILL_TEXTS, "the kills should land mid-prep"
    capsys.readouterr()
    assert cli.main(prep_argv(data, model, cache)) == 0
    out = unwrap(capsys.readouterr().out).strip()
    match = PREP_SUMMARY.match(out)
    assert match, out
    _, unique, now, from_cache = map(int, match.groups())
    assert (unique, now, from_cache) == (KILL_TEXTS, missing, KILL_TEXTS - missing)
    vectors, missing_after = cached_vectors(cache, data, model)
    assert missing_after == 0
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert partials(cache) == []


def test_fault_prep_sigkill_at_random_points_resumes(
        tmp_path: Path, kill_data: Path, tiny_model_dir: Path, uninterrupted: np.ndarray,
        capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(os.environ.get("RELIABILITY_SEED", "sigkill"))
    cache = tmp_path / "kill-cache"
    # One kill at a random moment (startup, corpus build, model load or embedding), then
    # kills after a random number of committed chunks, each with a random jitter so that
    # SIGKILL lands anywhere in a chunk, including between a shard's two renames.
    proc = start_prep(kill_data, tiny_model_dir, cache)
    time.sleep(rng.uniform(0.0, 0.4))
    proc.kill()
    proc.communicate(timeout=60)
    for _ in range(3):
        proc = start_prep(kill_data, tiny_model_dir, cache)
        assert wait_for_shards(proc, cache, shards(cache) + rng.randint(1, 10))
        time.sleep(rng.uniform(0.0, 0.01))
        proc.kill()
        proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
    resume_and_compare(cache, kill_data, tiny_model_dir, uninterrupted, capsys)


def test_fault_prep_ctrl_c_at_random_points_resumes(
        tmp_path: Path, kill_data: Path, tiny_model_dir: Path, uninterrupted: np.ndarray,
        capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(os.environ.get("RELIABILITY_SEED", "ctrl-c"))
    cache = tmp_path / "int-cache"
    def present() -> int:
        if not shards(cache):
            return 0
        return KILL_TEXTS - cached_vectors(cache, kill_data, tiny_model_dir)[1]

    for _ in range(3):
        before = present()
        proc = start_prep(kill_data, tiny_model_dir, cache)
        assert wait_for_shards(proc, cache, shards(cache) + rng.randint(1, 10))
        time.sleep(rng.uniform(0.0, 0.01))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        match = INTERRUPTED.fullmatch(err)  # one line: how many saved, how to resume
        assert match and out == "", err
        assert int(match.group(1)) == present() - before  # the count it reports is true
        assert partials(cache) == []  # Ctrl-C cleans up its own temp files
    resume_and_compare(cache, kill_data, tiny_model_dir, uninterrupted, capsys)


# =========================================================================== faults: cache files


@pytest.fixture(scope="module")
def prepped(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> tuple[Path, Path]:
    """(dataset, a cache holding its corpus and vectors), made once; tests copy the cache."""
    base = tmp_path_factory.mktemp("prepped")
    data = write_dataset(base / "lme.json", [*good_instances(), make_instance("ok3")])
    assert cli.main(prep_argv(data, tiny_model_dir, base / "cache")) == 0
    return data, base / "cache"


def copy_cache(prepped: tuple[Path, Path], cache: Path) -> tuple[Path, Path]:
    data, template = prepped
    shutil.copytree(template, cache)
    (shard,) = cache.glob("vectors/*/shard-*.parquet")
    return data, shard


def test_fault_cache_shard_truncated_is_refused_naming_the_file(
        pytester: pytest.Pytester, cache: Path, prepped: tuple[Path, Path]) -> None:
    data, shard = copy_cache(prepped, cache)
    truncate(shard, 0.6)
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-data", str(data))
    usage_error_line(result, f"vector cache shard {shard} is corrupt",
                     "delete it; the next prep re-embeds only what it held")
    assert shard.exists() and partials(cache) == []  # refused, left for the user to see


def test_fault_cache_shard_bytes_flipped_is_refused_then_repaired_by_prep(
        pytester: pytest.Pytester, cache: Path, prepped: tuple[Path, Path],
        tiny_model_dir: Path) -> None:
    data, shard = copy_cache(prepped, cache)
    clean = run_plugin(pytester, "--no-model", "--retrieval-eval-data", str(data))
    assert clean.ret == 0
    flip_bytes(shard)  # same size, same footer: only the checksum can tell
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-data", str(data))
    usage_error_line(result, f"vector cache shard {shard} is corrupt (sha256",
                     "does not match", "delete it; the next prep re-embeds only what it held")
    # The model lane's prep quarantines it and re-embeds what it held; then all is well.
    healed = run_plugin(pytester, "--retrieval-eval-data", str(data),
                        "--retrieval-eval-model", str(tiny_model_dir))
    assert healed.ret == 0, healed.stdout.str()
    healed.stdout.fnmatch_lines([f"retrieval-eval: warning: vector cache shard {shard} was "
                                 "corrupt; moved it to *.corrupt and re-embedding what it held"])
    assert (shard.parent / (shard.name + ".corrupt")).exists()
    again = run_plugin(pytester, "--no-model", "--retrieval-eval-data", str(data),
                       "--retrieval-eval-model", str(tiny_model_dir))  # a folder: named as one
    assert again.ret == 0, again.stdout.str() + again.stderr.str()
    assert table_lines(again.stdout.str()) == table_lines(clean.stdout.str())


def test_fault_corpus_file_corrupted_is_rebuilt_never_trusted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "lme.json", good_instances())
    args = ("--no-model", "--retrieval-eval-retriever", "bm25,fts", "--retrieval-eval-data",
            str(data))
    first = run_plugin(pytester, *args)
    assert first.ret == 0
    (corpus,) = cache.glob("corpus/*.sqlite")
    pristine = corpus.read_bytes()
    for damage in (lambda: flip_bytes(corpus, b"ok2 topic 2"), lambda: truncate(corpus, 0.7)):
        damage()
        assert corpus.read_bytes() != pristine
        again = run_plugin(pytester, *args)
        assert again.ret == 0, again.stdout.str()
        assert corpus.read_bytes() == pristine  # rebuilt from the dataset, bit for bit
        assert table_lines(again.stdout.str()) == table_lines(first.stdout.str())
    assert partials(cache) == []


def test_fault_persona_store_corrupted_is_rebuilt_never_trusted(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path) -> None:
    """Caught at the default ``--retrieval-eval-verify stamp``: the writes moved each store's
    mtime and ctime, so their stamps no longer match; they are rehashed and rebuilt."""
    data = write_dataset(tmp_path / "lme.json", good_instances())
    args = ("--no-model", "--retrieval-eval-retriever", "fts", "--retrieval-eval-data",
            str(data), "--retrieval-eval-json", str(tmp_path / "r.json"))
    assert run_plugin(pytester, *args).ret == 0
    first = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    stores = sorted(cache.glob("stores/*/*.sqlite"))
    assert len(stores) == 2
    pristine = [s.read_bytes() for s in stores]
    flip_bytes(stores[0], b"ok1 topic 1")  # a memory's content: the schema still looks fine
    truncate(stores[1], 0.5)
    assert run_plugin(pytester, *args).ret == 0
    again = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [s.read_bytes() for s in stores] == pristine  # both rebuilt, bit for bit
    strip = [{k: v for k, v in p.items() if k != "latency_ms"} for p in again["pairs"]]
    assert strip == [{k: v for k, v in p.items() if k != "latency_ms"} for p in first["pairs"]]
    assert partials(cache) == []


@pytest.mark.parametrize("verify", ["stamp", "full"])
def test_fault_persona_store_rot_beneath_its_stamp_is_caught_by_verify_full(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path, verify: str) -> None:
    """A byte flipped beneath the filesystem keeps the stamp's size, times, inode and change
    counter (the test re-stamps the flipped store): ``stamp`` trusts it (and reads no store
    in full), ``--retrieval-eval-verify=full`` rehashes it and rebuilds it bit for bit."""
    from pytest_retrieval_eval.io.checksums import read_sidecar, write_stamp

    data = write_dataset(tmp_path / "lme.json", good_instances())
    args = ("--no-model", "--retrieval-eval-retriever", "fts", "--retrieval-eval-data",
            str(data), f"--retrieval-eval-verify={verify}")
    assert run_plugin(pytester, *args).ret == 0
    store = sorted(cache.glob("stores/*/*.sqlite"))[0]
    pristine = store.read_bytes()
    note = json.loads(Path(f"{store}.verified").read_text(encoding="ascii"))["note"]
    flip_bytes(store, b"ok1 topic 1")
    write_stamp(store, store.stat(), read_sidecar(store), note)  # what bit rot leaves behind
    assert run_plugin(pytester, *args).ret == 0
    assert (store.read_bytes() == pristine) is (verify == "full")


def test_option_verify_takes_stamp_or_full(pytester: pytest.Pytester, cache: Path) -> None:
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-verify=quick")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--retrieval-eval-verify*'quick' is not one of stamp, full*"])


# =========================================================================== faults: sharing


def test_fault_two_pytest_processes_share_one_cache(
        pytester: pytest.Pytester, cache: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    """Two model-lane runs (one with two xdist workers) start at once on one fresh cache:
    both finish with identical summaries, the cache stays whole, the model-free lane works."""
    data = write_dataset(tmp_path / "lme.json", [
        make_instance(f"c{i}", n_sessions=6, question_type="multi-session",
                      session_prefix="shared" if i % 2 else None) for i in range(6)])
    args = ["-p", "no:cacheprovider", "--retrieval-eval", "--retrieval-eval-data", str(data),
            "--retrieval-eval-model", str(tiny_model_dir), "--retrieval-eval-retriever",
            "hybrid,fts", "--retrieval-eval-json", "report.json"]
    env = subprocess_env(RETRIEVAL_EVAL_CACHE_DIR=str(cache),
                         HF_HOME=str(tmp_path / "hf-empty"))
    procs = []
    for name, extra in (("serial", []), ("xdist", ["-n", "2"])):
        where = tmp_path / name
        where.mkdir()
        procs.append((where, subprocess.Popen(
            [sys.executable, "-m", "pytest", *args, *extra], cwd=where, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    outputs = []
    for where, proc in procs:
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, out
        assert "Traceback" not in out
        outputs.append((out, json.loads((where / "report.json").read_text(encoding="utf-8"))))
    (serial_out, serial), (xdist_out, xdist) = outputs
    assert serial["summary"] == xdist["summary"]
    assert table_lines(serial_out) == table_lines(xdist_out)
    assert partials(cache) == []
    (fingerprint,) = [p.name for p in (cache / "vectors").iterdir()]
    model = serial["model"]
    assert VectorCache(cache, fingerprint, model["dim"], model).verify() >= 1  # every shard
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-data", str(data),
                        "--retrieval-eval-retriever", "hybrid,fts")
    assert result.ret == 0, result.stdout.str()
    assert "lane: model-free  model: tiny-model" in result.stdout.str()
    lanes = ("lane: ",)
    assert [line for line in table_lines(result.stdout.str()) if not line.startswith(lanes)] \
        == [line for line in table_lines(serial_out) if not line.startswith(lanes)]


# =========================================================================== faults: vipune


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face home whose BAAI/bge-small-en-v1.5 is a tiny 384-d stand-in."""
    home = tmp_path_factory.mktemp("hf")
    fake_hf_cache(home, tmp_path_factory.mktemp("bge"))
    return home


@pytest.fixture
def vipune_lane(tmp_path: Path, hf_home: Path,
                monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(dataset, fake vipune wrapper): the model lane resolves vipune's model offline, and
    the fake vipune knows each question's query vector."""
    monkeypatch.setenv("HF_HOME", str(hf_home))
    instances = [*good_instances(), make_instance("ok3", question_type="knowledge-update")]
    data = write_dataset(tmp_path / "lme.json", instances)
    embedder = load_embedder(BGE, EmbedConfig())
    questions = [str(i["question"]) for i in instances]
    vectors = write_query_vectors(tmp_path / "qvec.json", questions,
                                  [embedder.embed_query(q) for q in questions])
    monkeypatch.setenv("FAKE_VIPUNE_VECTORS", str(vectors))
    return data, fake_vipune_wrapper(tmp_path / "bin")


def run_vipune(pytester: pytest.Pytester, lane: tuple[Path, Path], *extra: str,
               binary: Path | None = None) -> pytest.RunResult:
    data, wrapper = lane
    return run_plugin(pytester, "--retrieval-eval-data", str(data),
                      "--retrieval-eval-retriever", "hybrid,vipune",
                      "--retrieval-eval-vipune", str(binary or wrapper), *extra)


def test_env_fake_hf_cache_resolves_vipunes_model_offline(
        hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(hf_home))
    files = resolve_model(BGE)
    snapshot = hf_home / "hub" / "models--BAAI--bge-small-en-v1.5" / "snapshots" / SNAPSHOT
    assert files.name == BGE
    assert files.model_path == snapshot / "onnx" / "model.onnx"
    assert files.tokenizer_path == snapshot / "tokenizer.json"
    assert load_embedder(BGE, EmbedConfig()).dim == 384


def test_fault_vipune_lane_scores_and_prints_drift(
        pytester: pytest.Pytester, vipune_lane: tuple[Path, Path]) -> None:
    result = run_vipune(pytester, vipune_lane, "--retrieval-eval-json", "r.json")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines([
        f"lane: model  model: {BGE} (fingerprint *, mean pooling, 512 tokens (*), dim 384)",
        "drift hybrid vs vipune: 3 of 3 pairs have an identical top 10",
    ])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert report["drift"] == [{"a": "hybrid", "b": "vipune", "k": 10, "pairs": 3,
                                "identical": 3}]


def test_fault_vipune_binary_missing(pytester: pytest.Pytester, vipune_lane: tuple[Path, Path],
                                     tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "vipune"
    result = run_vipune(pytester, vipune_lane, binary=missing)
    usage_error_line(result, f"vipune binary '{missing}' does not exist",
                     "install vipune or pass --retrieval-eval-vipune=PATH")


def test_fault_vipune_binary_cannot_run(pytester: pytest.Pytester,
                                        vipune_lane: tuple[Path, Path], tmp_path: Path) -> None:
    binary = tmp_path / "vipune"
    binary.write_bytes(b"\x7fELF but not for this machine\x00\x01")
    binary.chmod(0o755)
    result = run_vipune(pytester, vipune_lane, binary=binary)
    result.assert_outcomes(passed=3, failed=3)
    no_traceback(result)
    result.stdout.fnmatch_lines([f"vipune: vipune ({binary}) on question ok1: cannot run it "
                                 "(*); pass a vipune binary built for this machine*"])


def vipune_misbehaves(pytester: pytest.Pytester, lane: tuple[Path, Path],
                      monkeypatch: pytest.MonkeyPatch, mode: str, *extra: str) -> str:
    """vipune misbehaves on every call: each vipune item fails with one line (the reason and
    vipune's stderr), every hybrid item passes, the summary counts the failures."""
    monkeypatch.setenv("FAKE_VIPUNE_MODE", mode)
    result = run_vipune(pytester, lane, "--retrieval-eval-json", "r.json", *extra)
    assert result.ret == TESTS_FAILED
    result.assert_outcomes(passed=3, failed=3)
    no_traceback(result)
    out = result.stdout.str()
    lines = [line for line in joined_errors(out, "vipune: vipune (")  # cut to the terminal
             if line.startswith("vipune: vipune (")]
    assert len(lines) == 3, out
    for qid in ("ok1", "ok2", "ok3"):
        assert f"_ {qid}::vipune _" in out  # each failure is headed by its item
    result.stdout.fnmatch_lines(["errors: 3 item(s) failed; see their failures above"])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert [e["question_id"] for e in report["errors"]] == ["ok1", "ok2", "ok3"]
    assert report["summary"]["hybrid"]["overall"]["n"] == 3
    assert "stderr: " in lines[0]
    return lines[0]


def test_fault_vipune_exits_non_zero(pytester: pytest.Pytester, vipune_lane: tuple[Path, Path],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    line = vipune_misbehaves(pytester, vipune_lane, monkeypatch, "crash")
    assert "on question ok1: exit status 1: stderr: thread 'main' panicked at" in line


def test_fault_vipune_hangs_past_timeout(pytester: pytest.Pytester,
                                         vipune_lane: tuple[Path, Path],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    start = time.monotonic()
    # The stand-in sleeps an hour on every call: any timeout is the one it runs past.
    line = vipune_misbehaves(pytester, vipune_lane, monkeypatch, "hang",
                             "--retrieval-eval-vipune-timeout", "0.2")
    assert time.monotonic() - start < 30
    assert "no answer within 0.2 s (killed); stderr: (empty); raise " \
           "--retrieval-eval-vipune-timeout" in line


def test_fault_vipune_prints_output_that_is_not_its_json(
        pytester: pytest.Pytester, vipune_lane: tuple[Path, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    line = vipune_misbehaves(pytester, vipune_lane, monkeypatch, "garbage")
    assert "printed output that is not JSON" in line and "Downloading model" in line
    shape = vipune_misbehaves(pytester, vipune_lane, monkeypatch, "wrong_shape")
    assert "must be an object with only 'results'" in shape

