"""The door to a library: not installed is one line naming the extra, a version outside the
tested range a warning line (once), the extras in pyproject.toml pin the tested ranges, and a
run's start says both in one line each."""

from __future__ import annotations

import importlib.metadata
import warnings
from pathlib import Path

import pytest
import tomllib

from pytest_retrieval_eval.adapters import library
from pytest_retrieval_eval.errors import LibraryWarning, RetrievalEvalError
from pytest_retrieval_eval.retrievers import get_retriever

ROOT = Path(__file__).resolve().parents[2]


def test_the_extras_pin_the_tested_ranges() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for adapter, dists in library.TESTED.items():
        assert sorted(extras[adapter]) == sorted(f"{d}{r}" for d, _, r in dists)


@pytest.mark.parametrize("name", ["mem0", "llamaindex", "langchain+chunk_size:100"])
def test_a_library_not_installed_is_one_line_naming_the_extra(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(library, "_installed", lambda module: False)
    adapter = name.partition("+")[0]
    with pytest.raises(RetrievalEvalError) as info:
        get_retriever(name)
    dist = library.TESTED[adapter][0][0]
    assert str(info.value) == (f"retriever {adapter!r} needs {dist}, which is not installed; "
                               f"install the extra: pip install "
                               f"'pytest-retrieval-eval[{adapter}]'")


def test_a_version_outside_the_range_is_one_warning_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(library, "_warned", set())
    monkeypatch.setattr(importlib.metadata, "version", lambda dist: "0.0.1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        get_retriever("langchain")
        get_retriever("langchain")  # once per process and distribution
    lines = [str(w.message) for w in caught if w.category is LibraryWarning]
    assert lines == [
        "langchain: langchain-core 0.0.1 is outside the tested range >=1.0,<2; its numbers "
        "may differ: pip install 'pytest-retrieval-eval[langchain]' for a tested one",
        "langchain: langchain-text-splitters 0.0.1 is outside the tested range >=1.0,<2; its "
        "numbers may differ: pip install 'pytest-retrieval-eval[langchain]' for a tested one"]


def test_naming_no_adapter_imports_no_library() -> None:
    """The registry and the what-if grammar know the adapters by name only."""
    from pytest_retrieval_eval.config.options import parse_retrievers

    assert parse_retrievers("semantic,llamaindex+chunk_size:256,mem0+infer:true") == (
        "semantic", "llamaindex+chunk_size:256", "mem0+infer:true")
    with pytest.raises(Exception, match="chunk_size:0 is not allowed"):
        parse_retrievers("langchain+chunk_size:0")


def test_the_run_prints_the_warning_line(pytester: pytest.Pytester,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(library, "_warned", set())
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda dist: "9.0" if dist == "langchain-core" else real(dist))
    result = pytester.runpytest("-p", "no:randomly", "--retrieval-eval", "--no-model",
                                "--retrieval-eval-retriever", "bm25,langchain",
                                "--collect-only", "-q")
    result.stdout.fnmatch_lines(["retrieval-eval: warning: langchain: langchain-core 9.0 is "
                                 "outside the tested range >=1.0,<2; *"])


def test_the_adapters_use_no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With the run's model, no adapter opens a connection (mem0 and LlamaIndex build OpenAI
    clients they never call; LlamaIndex's tokenizer is the copy it ships)."""
    import socket

    from tests.support.adapter_personas import generated_instances, personas

    def refuse(self: socket.socket, address: object) -> None:
        raise AssertionError(f"a connection to {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (persona, query), = personas(generated_instances(1, sessions=6), tmp_path)
    for name in ("langchain", "llamaindex+chunk_size:256", "mem0"):
        store = get_retriever(name)
        store.index(persona)  # type: ignore[attr-defined]
        assert store.rank(persona, query, 3)
        store.close()  # type: ignore[attr-defined]


def test_every_knob_reaches_its_adapter() -> None:
    lc = get_retriever("langchain+chunk_size:300+chunk_overlap:10")
    assert (lc.chunk_size, lc.chunk_overlap) == (300, 10)  # type: ignore[attr-defined]
    li = get_retriever("llamaindex+chunk_size:512+chunk_overlap:0")
    assert (li.chunk_size, li.chunk_overlap) == (512, 0)  # type: ignore[attr-defined]
    m = get_retriever("mem0+infer:true+threshold:0.25+vector_store:qdrant")
    assert (m.infer, m.threshold, m.vector_store) == (True, 0.25, "qdrant")  # type: ignore[attr-defined]
    assert m.name == "mem0+infer:true+threshold:0.25+vector_store:qdrant"
    with pytest.raises(RetrievalEvalError, match="threshold:2 is not allowed"):
        get_retriever("mem0+threshold:2")
