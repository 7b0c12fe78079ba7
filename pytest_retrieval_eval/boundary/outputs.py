"""Where an output file may be written: only where no file is, or over a file this plugin
wrote (issue 43.11). One rule for every writer (the JSON report, compare's ``--json``, the
Markdown summary, a badge, a figure, TREC export files, a generated dataset), never a list of
the run's inputs that misses one: ``--retrieval-eval-json=test_mine.py`` or ``=store.py``
(the script of a ``cmd:`` store) would otherwise replace the user's file.

A file is the plugin's when it carries the mark of its kind (:data:`KINDS`):

* ``json``: a JSON object holding the report's schema key (``"schema_version"``) or
  compare's ``"comparison"`` in its first 64 KiB;
* ``markdown``: the marker line :data:`MARKDOWN_MARKER` in its first 4 KiB;
* ``svg``, ``png``, ``pdf``: :data:`MARKER` in its first or last 64 KiB (a badge's comment,
  a figure's ``Creator``/``Software`` metadata);
* ``badge-json``: shields.io's endpoint JSON as ``badge`` writes it (``schemaVersion``,
  ``label``, ``message``, ``color`` and no other key);
* ``trec``: every line a run line ``qid Q0 docid rank score tag`` or a qrels line
  ``qid 0 docid 1``, as ``export`` writes them;
* ``dataset``: the generator's opening ``[`` and newline, then ``{"question_id": ``.

An empty file holds nothing to lose and may be written. Anything else that stands there as a
regular file is refused in one line naming it
(:func:`output_refusal`); a FIFO, device or folder is left to the writer's own refusal
(``io.user_files``), which names what stands there. Nothing is opened but regular files, and
at most 128 KiB of one is read (a TREC file: all of it, up to 256 MiB).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

__all__ = ["KINDS", "MARKDOWN_MARKER", "MARKER", "foreign_output", "output_refusal"]

#: The plugin's name as its files carry it.
MARKER = "pytest-retrieval-eval"
#: The first line of every Markdown file the plugin writes (an HTML comment: not rendered).
MARKDOWN_MARKER = f"<!-- written by {MARKER}; its next run may replace this file -->"

#: Each kind of output, and the words naming what the plugin's own file of it is.
KINDS = {
    "json": "a JSON report of this plugin (with its \"schema_version\")",
    "markdown": "a Markdown file this plugin wrote (its first line is the plugin's marker)",
    "svg": f"an SVG this plugin wrote (it names {MARKER})",
    "html": f"an HTML view this plugin wrote (its generator meta names {MARKER})",
    "png": f"a PNG figure this plugin wrote (it names {MARKER})",
    "pdf": f"a PDF figure this plugin wrote (it names {MARKER})",
    "badge-json": "a shields.io endpoint JSON as `retrieval-eval badge` writes it",
    "trec": "a TREC run or qrels file as `retrieval-eval export` writes it",
    "dataset": "a dataset `retrieval-eval generate` wrote",
    "store": "a persona store this plugin exported (an SQLite file with its user_version)",
    "store-map": "a stores.json map this plugin wrote (question id -> .sqlite file name)",
}

_HEAD = 64 * 1024
_TREC_LIMIT = 256 * 1024 * 1024
_TREC_LINE = re.compile(rb"\S+ Q0 \S+ [1-9][0-9]* [0-9]+ \S+|\S+ 0 \S+ 1")
_BADGE_KEYS = {"schemaVersion", "label", "message", "color"}


def _read(path: Path, size: int) -> tuple[bytes, bytes]:
    """The first and last ``_HEAD`` bytes of a regular file (all of it, when small)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
            return b"", b""
        head = os.read(fd, _HEAD)
        if size <= _HEAD:
            return head, head
        os.lseek(fd, max(_HEAD, size - _HEAD), os.SEEK_SET)
        return head, os.read(fd, _HEAD)
    finally:
        os.close(fd)


def _is_ours(path: Path, kind: str, size: int) -> bool:
    head, tail = _read(path, size)
    if kind == "json":
        start = head.lstrip()
        return start.startswith(b"{") and (b'"schema_version"' in head
                                           or start[1:].lstrip().startswith(b'"comparison"'))
    if kind == "markdown":
        return MARKDOWN_MARKER.encode() in head[:4096]
    if kind == "html":
        return f'<meta name="generator" content="{MARKER}">'.encode() in head[:4096]
    if kind in ("svg", "png", "pdf"):
        return MARKER.encode() in head or MARKER.encode() in tail
    if kind == "badge-json":
        try:
            value = json.loads(head) if size <= _HEAD else None
        except ValueError:
            return False
        return isinstance(value, dict) and "schemaVersion" in value and set(value) <= _BADGE_KEYS
    if kind == "trec":
        if size > _TREC_LIMIT:
            return False
        with open(path, "rb") as fh:
            return all(_TREC_LINE.fullmatch(line.rstrip(b"\n")) for line in fh)
    if kind == "dataset":
        return head.startswith(b'[\n{"question_id": ')
    if kind == "store":  # PRAGMA user_version, bytes 60..63 of SQLite's header: 0x5245....
        return head.startswith(b"SQLite format 3\x00") and head[60:62] == b"RE"
    if kind == "store-map":
        try:
            value = json.loads(head) if size <= _HEAD else None
        except ValueError:
            return False
        return isinstance(value, dict) and all(
            isinstance(v, str) and v.endswith(".sqlite") for v in value.values())
    raise ValueError(f"unknown output kind {kind!r}")


def foreign_output(path: Path, kind: str) -> bool:
    """Whether ``path`` (through a symlink: its target) is a regular file this plugin did not
    write as a ``kind`` output: one that may not be replaced. No file there (a dangling link
    too), or anything but a regular file, is not foreign here."""
    try:
        st = os.stat(path)
    except OSError:
        return False  # nothing there (or nothing readable: the writer says why)
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:  # an empty file: nothing to lose
        return False
    try:
        return not _is_ours(path, kind, st.st_size)
    except OSError:
        return True  # unreadable: not known to be ours


def output_refusal(option: str, path: Path, kind: str) -> str | None:
    """The one line refusing to write ``path`` (given as ``option``) over a file this plugin
    did not write, or None where it may be written."""
    if not foreign_output(path, kind):
        return None
    return (f"{option} {path} is a file this plugin did not write: writing it would replace "
            f"that file; give {option} a path where no file is, or {KINDS[kind]}")
