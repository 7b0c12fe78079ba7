"""User retrievers described without building them, and constructor arguments (issue 28)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from pytest_retrieval_eval.errors import RetrievalEvalError
from pytest_retrieval_eval.retrievers.loader import (
    describe_dotted,
    describe_object,
    get_retriever,
    is_dotted,
)
from pytest_retrieval_eval.retrievers.variants import (
    VariantError,
    is_variant,
    parse_keywords,
    split_dotted,
)


def test_keyword_values_are_read_as_the_what_if_values() -> None:
    assert parse_keywords("m:C+ef:10+w:0.5+neg:-3+on:true+off:false+metric:cosine") == {
        "ef": 10, "w": 0.5, "neg": -3, "on": True, "off": False, "metric": "cosine"}
    assert parse_keywords("m:C") == {}
    assert parse_keywords("m:C+x:nan") == {"x": "nan"}  # never a NaN constructor argument


def test_keyword_numbers_are_ascii_digits_as_docs_your_store_says() -> None:
    """docs/your-store.md's table: Python's int()/float() would read 1_000, U+0665 and 1e400."""
    assert parse_keywords("m:C+a:1_000+b:\u0665+c:1e400+d:True+e:1e-3+f:.5+g:007+h:a:b") == {
        "a": "1_000", "b": "\u0665", "c": "1e400", "d": "True", "e": 0.001, "f": 0.5, "g": 7,
        "h": "a:b"}
    assert split_dotted("a.b:C+ef:10") == ("a.b:C", "ef:10")


@pytest.mark.parametrize(("name", "wrong"), [
    ("m:C+ef", "'ef' is not key:value"),
    ("m:C+ef:", "'ef:' is not key:value"),
    ("m:C+1x:2", "'1x:2' is not key:value"),
    ("m:C+ef:1+ef:2", "argument 'ef' is given twice"),
])
def test_bad_arguments_are_one_line(name: str, wrong: str) -> None:
    with pytest.raises(VariantError, match=wrong):
        parse_keywords(name)


def test_a_dotted_path_with_arguments_is_no_what_if() -> None:
    assert is_variant("hybrid+rrf_k:60") and is_variant("nope+x:1")
    assert not is_variant("stores:Faiss+ef:64")
    assert is_dotted("stores:Faiss+ef:64") and is_dotted("a.b:c")
    assert not is_dotted("hybrid+fts:or") and not is_dotted("cmd:python x.py")
    assert not is_dotted("run:runs/a.trec")


@pytest.fixture
def module() -> Iterator[types.ModuleType]:
    mod = types.ModuleType("user_stores_28")
    built: list[dict[str, object]] = []

    class Store:
        name = "store"
        needs_vectors = False

        def __init__(self, ef: int = 1) -> None:
            built.append({"ef": ef})

        def rank(self, persona: object, query: object, limit: int) -> list[str]:
            return []

    class Broken(Store):
        def __init__(self) -> None:
            raise RuntimeError("no server")

    def fn(persona: object, query: object, limit: int) -> list[str]:
        return []

    mod.Store, mod.Broken, mod.fn, mod.built = Store, Broken, fn, built  # type: ignore[attr-defined]
    sys.modules[mod.__name__] = mod
    yield mod
    del sys.modules[mod.__name__]


def test_a_class_is_named_and_read_without_being_built(module: types.ModuleType) -> None:
    user = describe_dotted("user_stores_28:Store+ef:7")
    assert user.name == "store+ef:7" and user.needs_vectors is False
    assert module.built == [] and user.built is None
    store = user.build()
    assert module.built == [{"ef": 7}] and user.build() is store  # built once
    assert describe_dotted("user_stores_28:fn").name is None  # its column: the selector
    broken = describe_dotted("user_stores_28:Broken")  # nothing raised until built
    with pytest.raises(RetrievalEvalError, match=r"creating it failed \(RuntimeError: no server"):
        broken.build()


def test_arguments_only_go_to_a_class_or_a_factory(module: types.ModuleType) -> None:
    with pytest.raises(RetrievalEvalError, match="'user_stores_28:fn\\+ef:1' takes no param"):
        describe_dotted("user_stores_28:fn+ef:1")
    with pytest.raises(RetrievalEvalError, match="Store takes no argument 'nope'; it takes "):
        get_retriever("user_stores_28:Store+nope:1")  # said before anything is built


def test_a_hook_store_needs_a_usable_name(module: types.ModuleType) -> None:
    assert describe_object(None, module.Store, "hook").name == "store"
    assert describe_object("a", module.Store, "hook").selector == "a"
    with pytest.raises(RetrievalEvalError, match="hook: a store has no usable name"):
        describe_object("a+b", module.Store, "hook")
    with pytest.raises(RetrievalEvalError, match="is not a Retriever"):
        describe_object("x", 42, "hook")


@pytest.mark.parametrize("name", ["a\nb", "a\x1b[31mb", "a\u202eb", "a\tb"])
def test_a_hook_store_name_with_control_characters_is_one_line(module: types.ModuleType,
                                                                name: str) -> None:
    """34.10: a newline would break the terminal's lines, the node ids and the Markdown."""
    with pytest.raises(RetrievalEvalError, match="no usable name") as caught:
        describe_object(name, module.Store, "hook")
    message = str(caught.value)
    assert message.isprintable() and "control characters" in message
