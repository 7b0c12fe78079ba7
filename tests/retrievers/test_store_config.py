"""A store's config (retrievers/store_config.py, issue 37 item 3): read from the attribute and
a dotted path's ``+key:value`` arguments, checked to be small JSON, refused in one line."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.errors import RetrieverError
from pytest_retrieval_eval.retrievers.store_config import (
    MAX_CONFIG_BYTES,
    check_config,
    config_json,
    read_config,
)


class Store:
    name = "store"

    def __init__(self, config: Any = None) -> None:
        if config is not None:
            self.config = config


def test_the_attribute_and_the_arguments_make_the_config() -> None:
    assert read_config(Store(), "mod:Store") is None
    assert read_config(Store({"ef": 10, "M": 4}), "mod:Store") == {"ef": 10, "M": 4}
    # arguments first, the store's own value wins for a key both give
    assert read_config(Store({"ef": 10, "M": 4}), "mod:Store+ef:64+tag:x") == {
        "ef": 10, "tag": "x", "M": 4}
    assert read_config(Store(), "mod:Store+ef:64+on:true+p:0.5") == {
        "ef": 64, "on": True, "p": 0.5}
    # a what-if's or a command's '+' and ':' are no arguments
    assert read_config(Store(), "hybrid+rrf_k:60") is None
    assert read_config(Store(), "cmd:node store.js+x:1") is None
    # numpy's numbers and tuples are plain JSON once recorded
    assert read_config(Store({"ef": np.int64(8), "w": np.float32(0.5), "t": (1, 2)})) == {
        "ef": 8, "w": 0.5, "t": [1, 2]}


@pytest.mark.parametrize(("config", "line"), [
    ({"x": float("inf")}, "retriever 'store': config['x'] is inf, which JSON cannot hold"),
    ({1: "a"}, "retriever 'store': config has the key 1, not a string"),
    ({"s": {1, 2}}, "retriever 'store': config['s'] is of type set, which JSON cannot hold"),
    ({"o": object()}, "config['o'] is of type object, which JSON cannot hold"),
    ({"a": [[[[[[[[[1]]]]]]]]]}, "nests deeper than 8 levels"),
    ("ef=64", "retriever 'store': config is a str, not a mapping"),
])
def test_bad_config_is_one_line(config: Any, line: str) -> None:
    with pytest.raises(RetrieverError, match=line.replace("[", r"\[").replace("]", r"\]")) \
            as caught:
        read_config(Store(config), "mod:Store")
    assert "\n" not in str(caught.value) and "e.g. config = {'ef': 64" in str(caught.value)


def test_the_size_bound_is_the_compact_json_in_bytes() -> None:
    head = len(config_json({"v": ""}))
    fits = {"v": "é" * ((MAX_CONFIG_BYTES - head) // 2)}  # two bytes a character
    assert len(config_json(fits).encode()) <= MAX_CONFIG_BYTES
    assert check_config(fits, "s") == fits
    over = {"v": "x" * (MAX_CONFIG_BYTES - head + 1)}
    with pytest.raises(RetrieverError, match=f"is {MAX_CONFIG_BYTES + 1} bytes of JSON, over "
                                             f"{MAX_CONFIG_BYTES}"):
        check_config(over, "s")
