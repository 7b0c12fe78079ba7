"""A store's config recorded with its numbers (issue 37 item 3): a Python attribute (set in
``__init__`` or on the class), a dotted path's ``+key:value`` arguments, a ``cmd:`` store's
hello ``"config"``; in the JSON per retriever, the header's retriever line, the Markdown and
compare's header (which says when two runs differ only in it); bad config is one line."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.lme_factory import make_instance, write_dataset

STORES = """
import os

class Tuned:
    name = "tuned"
    needs_vectors = False

    def __init__(self, ef=int(os.environ.get("TUNED_EF", "10")), M=4):
        self.config = {"ef": ef, "M": M, "metric": "cosine"}

    def rank(self, persona, query, limit):
        return list(persona.session_ids)[:limit]

class Declared(Tuned):
    name = "declared"
    config = {"model": "bge-small", "chunk": [256, 32]}

    def __init__(self):
        pass

class NotJson(Declared):
    name = "notjson"
    config = {"x": float("nan")}

class Huge(Declared):
    name = "huge"
    config = {"vocabulary": "w" * 5000}

class NotMapping(Declared):
    name = "notmapping"
    config = ["ef", 64]
"""

COMMAND = """
import json, sys
personas = {}
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "hello":
        answer = {"name": "cmdcfg", "vectors": False, "config": {"engine": "toy", "ef": 8}}
    elif request["op"] == "index":
        personas[request["persona"]] = [s["id"] for s in request["sessions"]]
        answer = {"ok": True}
    else:
        answer = {"ids": personas[request["persona"]][: request["limit"]]}
    sys.stdout.write(json.dumps(answer) + "\\n")
    sys.stdout.flush()
"""


@pytest.fixture
def data(pytester: pytest.Pytester, isolated_cache: Path,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makepyfile(stores=STORES)
    pytester.syspathinsert()
    return write_dataset(pytester.path / "lme.json", [
        make_instance("q1", question_type="multi-session", n_sessions=4),
        make_instance("q2", question_type="temporal-reasoning", n_sessions=3)])


def run(pytester: pytest.Pytester, data: Path, *args: str,
        out: str = "report.json") -> tuple[pytest.RunResult, dict[str, Any]]:
    path = pytester.path / out
    path.unlink(missing_ok=True)
    result = pytester.runpytest(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-W",
        "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval", "--no-model",
        f"--retrieval-eval-data={data}", f"--retrieval-eval-json={path}", *args)
    report = json.loads(path.read_text()) if path.exists() else {}
    return result, report


def test_config_is_recorded_per_retriever_and_shown(pytester: pytest.Pytester,
                                                     data: Path) -> None:
    markdown = pytester.path / "summary.md"
    result, report = run(pytester, data, "--retrieval-eval-retriever",
                         "fts,stores:Tuned+ef:64,stores:Declared",
                         f"--retrieval-eval-markdown={markdown}")
    assert result.ret == 0, result.stdout.str()
    assert report["config"] == {
        "tuned+ef:64": {"ef": 64, "M": 4, "metric": "cosine"},
        "declared": {"model": "bge-small", "chunk": [256, 32]},
    }
    assert all("config" not in p for p in report["pairs"])  # once per retriever
    result.stdout.fnmatch_lines([
        "retrievers: fts, tuned+ef:64 [[]ef:64, M:4, metric:cosine[]], declared "
        "[[]model:bge-small, chunk:[[]256,32[]][]]  k: 1, 5, 10"])
    text = markdown.read_text()
    assert "Configuration of the stores:" in text
    assert "- `tuned+ef:64`: `ef:64, M:4, metric:cosine`" in text


def test_a_cmd_stores_hello_gives_its_config(pytester: pytest.Pytester,
                                             isolated_cache: Path) -> None:
    (pytester.path / "cmdstore.py").write_text(COMMAND)
    out = pytester.path / "report.json"
    result = pytester.runpytest(  # the bundled sample: a cmd: store is sent vectors
        "-p", "no:randomly", "-p", "no:cacheprovider", "--retrieval-eval", "--no-model",
        f"--retrieval-eval-json={out}", "--retrieval-eval-retriever",
        f"cmd:{shlex.quote(sys.executable)} cmdstore.py")
    assert result.ret == 0, result.stdout.str()
    assert json.loads(out.read_text())["config"] == {"cmdcfg": {"engine": "toy", "ef": 8}}
    result.stdout.fnmatch_lines(["retrievers: cmdcfg [[]engine:toy, ef:8[]]  k: 1, 5, 10"])


def test_compare_says_when_two_runs_differ_only_in_config(
        pytester: pytest.Pytester, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(pytester, data, "--retrieval-eval-retriever", "stores:Tuned", out="base.json")
    monkeypatch.setenv("TUNED_EF", "64")
    markdown = pytester.path / "cmp.md"
    result, report = run(pytester, data, "--retrieval-eval-retriever", "stores:Tuned",
                         f"--retrieval-eval-compare={pytester.path / 'base.json'}",
                         f"--retrieval-eval-markdown={markdown}")
    assert result.ret == 0, result.stdout.str()
    assert "config tuned differs: base ef:10, M:4, metric:cosine -&gt; new ef:64, M:4, " \
        "metric:cosine  \n" in markdown.read_text()
    result.stdout.fnmatch_lines([
        "config tuned differs: base ef:10, M:4, metric:cosine -> new ef:64, M:4, "
        "metric:cosine",
        "the runs' only recorded difference is the config of tuned (same data, lane, model "
        "and protocol)"])
    assert report["comparison"]["config"] == {"tuned": {
        "base": {"ef": 10, "M": 4, "metric": "cosine"},
        "new": {"ef": 64, "M": 4, "metric": "cosine"}, "same": False}}
    monkeypatch.setenv("TUNED_EF", "10")
    result, _ = run(pytester, data, "--retrieval-eval-retriever", "stores:Tuned",
                    f"--retrieval-eval-compare={pytester.path / 'base.json'}")
    result.stdout.fnmatch_lines(["config tuned: ef:10, M:4, metric:cosine (both)"])
    assert "only recorded difference" not in result.stdout.str()


@pytest.mark.parametrize(("store", "line"), [
    ("NotJson", "retriever 'notjson': config['x'] is nan, which JSON cannot hold; give config "
                "as a small mapping"),
    ("Huge", "retriever 'huge': config is 5017 bytes of JSON, over 2048; record only the "
             "parameters that set what is measured"),
    ("NotMapping", "retriever 'notmapping': config is a list, not a mapping; give config"),
])
def test_bad_config_fails_its_items_in_one_line(pytester: pytest.Pytester, data: Path,
                                                store: str, line: str) -> None:
    result, report = run(pytester, data, "--retrieval-eval-retriever", f"fts,stores:{store}")
    result.assert_outcomes(passed=2, failed=2)
    assert sum(line in x for x in result.stdout.lines) >= 2, result.stdout.str()
    assert report["config"] == {}
    assert {p["retriever"] for p in report["pairs"]} == {"fts"}
