"""Helpers for ``test_reliability.py``: one-line error checks, leftovers, corruption, fakes.

* :func:`usage_error_line` checks a pytester run ended in ONE readable usage-error line
  (exit code 4, no traceback) and returns that line.
* :func:`partials` lists half-written files (temp files of any writer) under a folder.
* :func:`truncate` and :func:`flip_bytes` damage a file the way a crash or a bad disk would.
* :func:`fake_hf_cache` lays out a Hugging Face cache holding a tiny stand-in for
  ``BAAI/bge-small-en-v1.5`` (384-d), so vipune's model resolves offline.
* :func:`fake_vipune_wrapper` writes an executable ``vipune`` that runs ``fake_vipune.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT
from tests.support.model_factory import TinyModel, make_model_dir

USAGE_ERROR = 4
TESTS_FAILED = 1
FAKE_VIPUNE = Path(__file__).with_name("fake_vipune.py")
BGE = "BAAI/bge-small-en-v1.5"
SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"  # any 40-hex commit hash


def run_plugin(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytest --retrieval-eval ARGS`` in-process, asserting nothing."""
    return pytester.runpytest("-p", "no:cacheprovider", "-W",
                              "ignore::pytest.PytestAssertRewriteWarning",
                              "--retrieval-eval", *args)


def no_traceback(result: pytest.RunResult) -> None:
    """Neither Python's traceback nor pytest's (``E   ...`` lines, ``file.py:12: in``)."""
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text, text
    assert not any(line.startswith("E   ") or (".py:" in line and ": in " in line)
                   for line in text.splitlines()), text


def joined_errors(text: str, head: str = "ERROR: ") -> list[str]:
    """``text``'s lines with each error message whole again: the lines that continue a line
    starting with ``head`` (indented two spaces: the plugin fits its errors to the terminal,
    issue 38.3) joined to it with one space each."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if inside and line.startswith("  "):
            out[-1] += " " + line[2:]
            continue
        inside = line.startswith(head)
        out.append(line)
    return out


def match_errors(text: str, patterns: list[str], head: str = "ERROR: ") -> None:
    """Each of ``patterns`` (fnmatch) matches a line of ``text`` with its error messages
    (lines starting with ``head``: an item's failure starts with its retriever's name) joined
    back into one line each (:func:`joined_errors`)."""
    import fnmatch

    lines = joined_errors(text, head)
    for pattern in patterns:
        # as pytest's fnmatch_lines: equal, or matching (a literal "[8]" is equal only)
        assert any(line == pattern or fnmatch.fnmatch(line, pattern) for line in lines), (
            pattern, text)


def usage_error_line(result: pytest.RunResult, *needles: str) -> str:
    """The run ended as a usage error (exit 4) with exactly one line carrying the message.

    ``needles[0]`` picks the message line out of stderr; every needle must be on that one line,
    nothing may be a traceback, and pytest's usage banner must not precede it.
    """
    err = result.stderr.str()
    assert result.ret == USAGE_ERROR, result.stdout.str() + err
    no_traceback(result)
    lines = [line for line in joined_errors(err) if needles[0] in line]
    assert len(lines) == 1, err
    line = lines[0]
    for needle in needles:
        assert needle in line, line
    # pytest's UsageError; a bad option value too (options.py raises it from its type=)
    assert line.startswith("ERROR: "), line
    assert "usage:" not in err, err
    return line


def partials(*roots: Path) -> list[Path]:
    """Half-written files: any writer's temp file (``*.tmp*``, ``.tmp-*``) under ``roots``."""
    found: list[Path] = []
    for root in roots:
        if root.is_dir():
            found.extend(p for p in root.rglob("*") if p.is_file() and ".tmp" in p.name)
    return sorted(found)


def truncate(path: Path, keep: float = 0.5) -> None:
    """Cut ``path`` to ``keep`` of its length (a crash mid-write, an interrupted copy)."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def flip_bytes(path: Path, needle: bytes | None = None, count: int = 4) -> int:
    """Invert ``count`` bytes of ``path`` (at ``needle`` if given, else mid-file); the offset.

    Size and layout stay the same: only a checksum (or a check of the content) can tell.
    """
    data = bytearray(path.read_bytes())
    at = data.find(needle) if needle is not None else len(data) // 2
    assert at >= 0, f"{needle!r} not in {path}"
    for i in range(at, at + count):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return at


def fake_hf_cache(hf_home: Path, model_root: Path) -> TinyModel:
    """A Hugging Face cache under ``hf_home`` whose ``BAAI/bge-small-en-v1.5`` is a tiny
    384-d model: ``hub/models--BAAI--bge-small-en-v1.5/snapshots/<hash>/{onnx/model.onnx,
    tokenizer.json}`` and ``refs/main`` naming that hash."""
    model = make_model_dir(model_root, dim=384, name="tiny-bge")
    repo = hf_home / "hub" / "models--BAAI--bge-small-en-v1.5"
    snapshot = repo / "snapshots" / SNAPSHOT
    (snapshot / "onnx").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model.path / "onnx" / "model.onnx", snapshot / "onnx" / "model.onnx")
    shutil.copyfile(model.path / "tokenizer.json", snapshot / "tokenizer.json")
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(SNAPSHOT, encoding="ascii")
    return model


def fake_vipune_wrapper(directory: Path) -> Path:
    """An executable ``directory/vipune`` that execs ``fake_vipune.py`` with this Python."""
    wrapper = directory / "vipune"
    directory.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_VIPUNE}" "$@"\n',
                       encoding="utf-8")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return wrapper


def write_query_vectors(path: Path, questions: Iterable[str], vectors: Sequence[Any]) -> Path:
    """The ``FAKE_VIPUNE_VECTORS`` file: question text -> its query vector."""
    table = {q: [float(x) for x in v] for q, v in zip(questions, vectors, strict=True)}
    path.write_text(json.dumps(table), encoding="utf-8")
    return path


def table_lines(text: str) -> list[str]:
    """The retrieval-eval terminal summary without its run-dependent lines (latency, the
    headline's next command: it repeats the run's options), a dropped line's continuation
    lines (indented two spaces, from a narrow terminal) with it."""
    section = text.split("= retrieval-eval =", 1)[1]
    keep = []
    dropping = False
    for line in section.splitlines()[1:]:
        if dropping and line.startswith("  "):
            continue
        dropping = line.startswith(("median latency", "harness overhead", "JSON report",
                                    "next:", "=")) or ": ingest " in line  # timing lines
        if not dropping:
            keep.append(line.rstrip())
    return keep


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a child ``pytest``/``retrieval-eval``: offline, this checkout."""
    root = str(ROOT)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env
