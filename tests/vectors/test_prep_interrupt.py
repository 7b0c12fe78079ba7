"""Ctrl-C during prep's embedding loop is never lost (tests/test_reliability.py's Ctrl-C test
once saw a prep exit 0): a KeyboardInterrupt raised inside a finalizer, which Python
ignores, is raised again after the chunk it landed in."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest

from pytest_retrieval_eval.vectors import prep


class _Texts:
    def texts(self, keys: Sequence[str]) -> list[str]:
        return [f"text {k}" for k in keys]


class _Embedder:
    name = "fake"
    dim = 2

    def embed(self, texts: Sequence[str], tick: Callable[[int], None] | None) -> np.ndarray:
        return np.zeros((len(texts), 2), dtype=np.float32)


class _Dropped:
    """Sends this process SIGINT from its finalizer and runs on there: the handler's
    KeyboardInterrupt is raised inside ``__del__``, where Python ignores it."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):
            pass


class _Cache:
    def __init__(self) -> None:
        self.added: list[str] = []

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        self.added.extend(keys)
        if len(self.added) == 2:
            _Dropped()  # made and dropped at once: its finalizer runs here


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """SIGINT raising KeyboardInterrupt in this process, as in a terminal's pytest: a suite
    started in the background (``&``, nohup) inherits it ignored."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_ctrl_c_swallowed_by_a_finalizer_stops_prep_after_its_chunk(
        recwarn: pytest.WarningsRecorder, sigint_raises: None) -> None:
    keys = [f"k{i}" for i in range(10)]
    cache = _Cache()
    with pytest.raises(KeyboardInterrupt):
        prep._embed_missing(keys, dict.fromkeys(keys), _Texts(), _Embedder(),  # type: ignore[arg-type]
                            cache, None, 2)  # type: ignore[arg-type]
    assert cache.added == keys[:2]  # the chunk it landed in was committed, no more
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored
