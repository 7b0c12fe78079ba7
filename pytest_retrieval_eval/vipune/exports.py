"""Copies of persona stores at ``--retrieval-eval-store-dir``, for inspection with vipune or
``sqlite3``: one file per question, and a map from question id to file.

- :func:`export_name`: ``<prefix>-<hash>.sqlite``, the prefix the id's first
  :data:`PREFIX_CHARS` characters with every character other than a letter, digit, ``.``,
  ``_`` or ``-`` made ``_`` (and a leading dot too: never another folder, never a hidden
  file), the hash the first :data:`HASH_CHARS` hex digits of the sha256 of the id's UTF-8.
  Two ids never share a file (``a/b``, ``a_b`` and ``a:b`` once did) and no id, however
  long, makes a name too long for the file system (at most 64 bytes).
- :data:`MAP_NAME` (``stores.json``) beside the copies: one JSON object, question id ->
  file name, rewritten atomically under a lock (xdist workers export into one folder) each
  time a copy is written; entries of earlier runs stay.
- :func:`export_store` copies atomically as every user-named file is written
  (:mod:`io.user_files`): through a symlink, at its target; a FIFO, device, socket or folder
  at the destination is refused; a copy killed part-way leaves a temp file that the next
  write to that destination removes.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import BinaryIO

from filelock import FileLock

from ..boundary.outputs import output_refusal
from ..errors import CacheError
from ..io import user_files

__all__ = ["HASH_CHARS", "MAP_NAME", "PREFIX_CHARS", "export_name", "export_persona_store",
           "export_store", "read_map"]

#: Characters of the id kept (made safe) at the front of a copy's name.
PREFIX_CHARS = 40
#: Hex digits of the id's sha256 in a copy's name (48 bits: a collision among a million ids
#: has a chance of about 2e-3 percent).
HASH_CHARS = 12
#: The map file: question id -> copy's file name.
MAP_NAME = "stores.json"
#: The most bytes the map file may hold when it is read back.
_MAP_LIMIT = 256 << 20


def unique_stem(text: str) -> str:
    """A bounded, unique file name for any text: ``<safe prefix>-<sha256[:12]>`` (the prefix
    readable, never hidden, never a path; the hash tells texts of one prefix apart)."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_"
                   for c in text[:PREFIX_CHARS])
    if safe.startswith("."):
        safe = "_" + safe[1:]
    return f"{safe}-{digest[:HASH_CHARS]}"


def export_name(question_id: str) -> str:
    """The copy's file name of ``question_id``: ``<safe prefix>-<sha256[:12]>.sqlite``."""
    return f"{unique_stem(question_id)}.sqlite"


def export_store(source: str | Path, dest: str | Path) -> Path:
    """Copy a store to ``dest`` atomically; returns ``dest``. Raises :class:`CacheError` (one
    line) when ``dest`` cannot be written."""
    src, target = Path(source), Path(dest)
    refused = output_refusal("--retrieval-eval-store-dir: store copy", target, "store")
    if refused is not None:  # issue 43.11: never over a file the plugin did not write
        raise CacheError(refused)

    def copy(out: BinaryIO) -> None:
        with open(src, "rb") as fh:
            shutil.copyfileobj(fh, out, 1 << 20)

    try:
        user_files.replace_file(target, copy)
    except OSError as exc:
        raise CacheError(
            f"store copy {target} cannot be written ({user_files.fault(exc, target)}); make "
            f"{target.parent} a writable folder or pass another --retrieval-eval-store-dir"
        ) from None
    return target


def read_map(folder: Path) -> dict[str, str]:
    """The map file of ``folder`` (question id -> file name); empty when it is absent or is
    not such a JSON object (it is then rewritten whole by the next copy)."""
    try:
        data = user_files.parse_json(user_files.read_small(Path(folder) / MAP_NAME,
                                                           _MAP_LIMIT))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def export_persona_store(source: str | Path, folder: str | Path, question_id: str) -> Path:
    """Copy question ``question_id``'s store into ``folder`` (:func:`export_name`) and enter
    it in the folder's map file; returns the copy's path. :class:`CacheError` (one line)
    when either cannot be written."""
    folder = Path(folder)
    name = export_name(question_id)
    target = export_store(source, folder / name)
    map_path = folder / MAP_NAME
    refused = output_refusal("--retrieval-eval-store-dir: store map", map_path, "store-map")
    if refused is not None:
        raise CacheError(refused)
    try:
        with FileLock(str(folder / f".{MAP_NAME}.lock")):
            mapping = read_map(folder)
            if mapping.get(question_id) != name:
                mapping[question_id] = name
                user_files.replace_text(
                    map_path, user_files.json_text(mapping, indent=1, sort_keys=True) + "\n")
    except OSError as exc:
        raise CacheError(
            f"store map {map_path} cannot be written ({user_files.fault(exc, map_path)}); "
            f"make {folder} a writable folder or pass another --retrieval-eval-store-dir"
        ) from None
    return target
