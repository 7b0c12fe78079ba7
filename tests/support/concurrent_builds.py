"""Builders racing for one cache file, each in a process of its own (the tests of concurrent
corpus and store builds).

The processes are *spawned*, never forked: a forked copy of a pytest-xdist worker holds
whatever lock another thread of the worker held at the fork (execnet's IO thread, a thread
pool left by an earlier test), and a child that waits on it never ends. :func:`race` bounds
the whole race by a deadline and kills what is left, so a stuck builder fails its test
instead of hanging the suite. The targets live here, not in the test modules, so that a
child imports only what it runs.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def race(target: Callable[..., None], args: Sequence[tuple[Any, ...]], barrier: Path,
         deadline_s: float = 60.0) -> list[int | None]:
    """Start one spawned process per ``args`` (each calls :func:`wait_for` on ``barrier``),
    create ``barrier`` once they all wait, wait at most ``deadline_s`` for them all and
    return their exit codes (``None``: still running at the deadline, then killed)."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=a, daemon=True) for a in args]
    for proc in procs:
        proc.start()
    end = time.monotonic() + deadline_s
    waiting = barrier.parent.glob
    while (len(list(waiting(barrier.name + ".ready-*"))) < len(procs)
           and time.monotonic() < end and all(p.is_alive() for p in procs)):
        time.sleep(0.01)
    barrier.touch()
    codes: list[int | None] = []
    for proc in procs:
        proc.join(max(0.0, end - time.monotonic()))
        codes.append(proc.exitcode)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join(5)
    return codes


def wait_for(barrier: str) -> None:
    """Start together: each racer says it is ready, then waits for :func:`race` to create
    ``barrier``."""
    Path(f"{barrier}.ready-{os.getpid()}").touch()
    while not os.path.exists(barrier):
        time.sleep(0.001)


def build_store(root: str, key: str, barrier: str, out: str) -> None:
    """Build (or reuse) the store ``key`` under ``root`` from 30 seeded rows; write its path
    to ``out``."""
    from pytest_retrieval_eval import vipune
    from pytest_retrieval_eval.vipune import store

    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((30, vipune.EMBEDDING_DIM)).astype(np.float32)
    contents = [f"memory {i} alpha beta" for i in range(30)]
    dates = [f"2023-05-{1 + i % 28:02d}T08:00:{i % 60:02d}+00:00" for i in range(30)]
    rows = list(store.rows_from_arrays([f"sess_{i}" for i in range(30)], contents, vectors,
                                       dates))
    wait_for(barrier)
    path = store.StoreCache(root).get_or_build(key, lambda: rows)
    Path(out).write_text(str(path), encoding="utf-8")


def build_corpus(source: Any, cache: str, log: str, delay: float, barrier: str) -> None:
    """Load ``source``'s corpus into ``cache``, its JSON streamed ``delay`` seconds an item
    (a wider race); a process that ingests appends its pid to ``log``."""
    from pytest_retrieval_eval.data import ingest, json_stream

    real = json_stream.iter_instances

    def slow(path: Path) -> Any:
        for item in real(path):
            time.sleep(delay)
            yield item

    ingest.iter_instances = slow  # type: ignore[assignment]
    wait_for(barrier)

    def record(label: str, done: int, total: int | None) -> None:
        if label.startswith("ingest") and done == 0:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{os.getpid()}\n")

    corpus = ingest.load_corpus(source, Path(cache), record)
    if len(corpus.pairs) != 4 or corpus.texts([corpus.pairs[0].question_key]) != [
            corpus.pairs[0].question]:
        raise SystemExit(3)
