"""The pieces of an ``mcp:`` retriever that need no server: the selector, the mapping
(presets, a TOML file, the options over them), a tool answer read into memories with their
provenance, and the one line naming the extra when the SDK is missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_retrieval_eval.errors import RetrievalEvalError, RetrieverError
from pytest_retrieval_eval.mcp.mapping import PRESETS, build_mapping, check_options, fill
from pytest_retrieval_eval.mcp.results import (
    Answer,
    Provenance,
    Unit,
    read_results,
    refused,
    stored_id,
)
from pytest_retrieval_eval.mcp.selector import parse_selector
from pytest_retrieval_eval.retrievers.base import Memory


def test_a_selector_gives_its_name_command_and_options() -> None:
    got = parse_selector("mcp:vip=python 'my server.py' --x=1+preset:vipune+recency:0.3")
    assert (got.name, got.argv, got.url) == ("vip", ("python", "my server.py", "--x=1"), None)
    assert got.options == {"preset": "vipune", "recency": 0.3}
    url = parse_selector("mcp:http://127.0.0.1:8000/mcp+reset_tool:reset")
    assert (url.name, url.url, url.options) == (None, "http://127.0.0.1:8000/mcp",
                                                {"reset_tool": "reset"})
    named = parse_selector("mcp:remote=http://127.0.0.1:1/x")
    assert (named.name, named.url) == ("remote", "http://127.0.0.1:1/x")
    assert parse_selector("mcp:g++ -o x+unit:turn").argv == ("g++", "-o", "x")


@pytest.mark.parametrize(("selector", "words"), [
    ("mcp:", "names no server"),
    ("mcp:python 'open", "cannot be split"),
    ("mcp:x+preset:vipune+preset:generic", "given twice"),
    ("mcp:x+preset:", "is not key:value"),
])
def test_a_bad_selector_is_one_line(selector: str, words: str) -> None:
    with pytest.raises(RetrievalEvalError, match=words) as got:
        parse_selector(selector)
    assert "\n" not in str(got.value)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_any_selector_parses_or_is_one_line(text: str) -> None:
    try:
        parse_selector("mcp:" + text)
    except RetrievalEvalError as exc:
        assert "\n" not in str(exc)


def test_the_vipune_preset_measures_the_seeds_protocol_and_its_options_move_it() -> None:
    plain = build_mapping("s", {"preset": "vipune"})
    assert plain.search_arguments["hybrid"] is True
    assert plain.search_arguments["recency_weight"] == 0.0
    assert "force" not in plain.store_arguments and plain.limit_sensitive
    moved = build_mapping("s", {"preset": "vipune", "recency": 0.3, "hybrid": False,
                                "force": True})
    assert moved.search_arguments["recency_weight"] == 0.3
    assert moved.search_arguments["hybrid"] is False
    assert moved.store_arguments["force"] is True
    with pytest.raises(RetrievalEvalError, match="weight from 0 to 1"):
        build_mapping("s", {"preset": "vipune", "recency": 2})
    with pytest.raises(RetrievalEvalError, match="vipune preset's"):
        build_mapping("s", {"preset": "server-memory", "force": True})


def test_the_generic_preset_takes_tool_and_argument_names() -> None:
    with pytest.raises(RetrievalEvalError, match="no store_tool is named"):
        build_mapping("s", {})
    got = build_mapping("s", {"store_tool": "add", "search_tool": "find", "text_arg": "body",
                              "metadata_arg": "", "query_arg": "q", "limit_arg": "k"})
    assert got.store_arguments == {"body": "{text}"}
    assert got.search_arguments == {"q": "{query}", "k": "{limit}"}


def test_a_toml_mapping_is_read_from_the_rootdir_and_options_win(tmp_path: Path) -> None:
    (tmp_path / "map.toml").write_text(
        'store_tool = "remember"\nsearch_tool = "recall"\nresults = "hits"\n'
        'result_score = ""\n[search_arguments]\nq = "{query}"\nn = "{limit}"\nmode = "x"\n'
        '[env]\nDB = "{workdir}/db"\n')
    got = build_mapping("s", {"map": "map.toml", "search_tool": "find"}, tmp_path)
    assert (got.store_tool, got.search_tool, got.results, got.result_score) == (
        "remember", "find", "hits", "")
    assert got.search_arguments == {"q": "{query}", "n": "{limit}", "mode": "x"}
    assert got.env == {"DB": "{workdir}/db"}
    (tmp_path / "bad.toml").write_text("store_tool = \n")
    with pytest.raises(RetrievalEvalError, match="is not TOML"):
        build_mapping("s", {"map": "bad.toml"}, tmp_path)
    (tmp_path / "odd.toml").write_text('store_tool = "a"\nsearch_tool = "b"\nwhat = 1\n')
    with pytest.raises(RetrievalEvalError, match="has no key 'what'"):
        build_mapping("s", {"map": "odd.toml"}, tmp_path)
    with pytest.raises(RetrievalEvalError, match="cannot read its mapping"):
        build_mapping("s", {"map": "gone.toml"}, tmp_path)


def test_options_are_checked_before_the_run() -> None:
    with pytest.raises(RetrievalEvalError, match="unknown; choose from vipune"):
        check_options("s", {"preset": "chroma"})
    with pytest.raises(RetrievalEvalError, match="no key 'bogus'"):
        check_options("s", {"bogus": 1})
    check_options("s", {"preset": "server-memory", "unit": "turn"})


def test_fill_replaces_whole_placeholders_only() -> None:
    template = {"entities": [{"name": "{id}", "obs": ["{text}"], "k": "{limit}x"}],
                "n": "{limit}"}
    assert fill(template, {"id": "s1", "text": "hi", "limit": 5}) == {
        "entities": [{"name": "s1", "obs": ["hi"], "k": "{limit}x"}], "n": 5}


STORED = Provenance(units=[Unit("s1", "s1", None, "user: I adopted a cat named Tom", ""),
                           Unit("s2", "s2", None, "user: my bike is red", "")],
                    by_server_id={"uuid-2": Unit("s2", "s2", None, "user: my bike is red",
                                                 "")})


def _answer(value: object) -> Answer:
    return Answer(texts=(json.dumps(value),))


def test_results_find_provenance_in_metadata_stored_ids_own_ids_and_text() -> None:
    mapping = build_mapping("s", {"store_tool": "a", "search_tool": "b", "results": "r"})
    got, unmatched = read_results(_answer({"r": [
        {"id": "x", "score": 0.9, "metadata": {"session_id": "s2"}},
        {"id": "uuid-2", "score": 0.8},
        {"id": "s1", "score": 0.7},
        {"id": "y", "score": 0.6, "text": "a cat named Tom"},
        {"id": "z", "score": 0.5, "text": "never said"},
    ]}), mapping, STORED, "w")
    assert [(m.id, m.sessions) for m in got] == [
        ("x", ("s2",)), ("uuid-2", ("s2",)), ("s1", ("s1",)), ("y", ("s1",)), ("z", ())]
    assert unmatched == 1


def test_text_only_results_are_matched_back_and_the_rest_counted() -> None:
    mapping = PRESETS["generic"]
    got, unmatched = read_results(Answer(texts=("my bike is red", "who knows")), mapping,
                                  STORED, "w")
    assert got == [Memory("text-1", None, ("s2",), (), "my bike is red"),
                   Memory("text-2", None, (), (), "who knows")]
    assert unmatched == 1


@pytest.mark.parametrize(("value", "words"), [
    ({"r": 5}, "not a list"),
    ({"other": []}, "has no 'r'"),
    ({"r": [1]}, "not an object or a text"),
    ({"r": [{"id": "a", "score": "high"}]}, "is not a finite number"),
    ({"r": [{"id": "a", "score": 1.0}, {"id": "b"}]}, "some results have a score"),
])
def test_a_malformed_result_is_one_line(value: object, words: str) -> None:
    mapping = build_mapping("s", {"store_tool": "a", "search_tool": "b", "results": "r"})
    with pytest.raises(RetrieverError, match=words) as got:
        read_results(_answer(value), mapping, STORED, "where")
    assert "\n" not in str(got.value)


def test_a_store_answer_gives_its_id_or_its_refusal() -> None:
    vip = PRESETS["vipune"]
    assert stored_id(_answer({"id": "abc", "status": "added"}), vip) == "abc"
    assert not refused(_answer({"id": "abc", "status": "added"}), vip)
    assert refused(_answer({"status": "conflict"}), vip)
    assert stored_id(Answer(texts=("not json",)), vip) is None


def test_a_missing_sdk_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_retrieval_eval.mcp import make_retriever

    for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")
                 or m.startswith("pytest_retrieval_eval.mcp.")]:
        if name not in ("pytest_retrieval_eval.mcp.selector",
                        "pytest_retrieval_eval.mcp.mapping",
                        "pytest_retrieval_eval.mcp.results"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp -> ModuleNotFoundError
    with pytest.raises(RetrievalEvalError, match=r"pip install 'pytest-retrieval-eval\[mcp\]'"):
        make_retriever("mcp:x+preset:vipune", {})


def test_a_bad_option_is_a_usage_error_before_any_work(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--retrieval-eval", "--no-model", "--retrieval-eval-retriever",
                                "mcp:my-server+preset:chroma")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*+preset:chroma is unknown; choose from vipune,*"])
