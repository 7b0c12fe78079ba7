"""A whole JSON file read with bounds: what the plugin reads that is not a dataset (JSON
reports; later the caches' manifests) gets the dataset path's guards.

:func:`read_json_file` refuses, each in one :class:`~pytest_retrieval_eval.errors.DataError`
line that names the file, the fault and the caller's fix:

* anything but a regular file (a FIFO, ``/dev/zero``, a socket, a directory): checked with
  ``os.stat`` before the open (:func:`.dataset.check_regular_file`), and the file is opened
  with ``O_NONBLOCK`` and checked again with ``fstat``, so a FIFO swapped in between never
  blocks the open or the read;
* a file larger than ``max_bytes`` (read at most ``max_bytes + 1`` bytes, never more);
* nesting deeper than ``max_depth`` (:data:`.json_stream.MAX_DEPTH` by default), found by the
  streamed reader's bracket scan before the parser sees a byte, so a 2,000-deep file is one
  line, not a ``RecursionError``;
* bytes that are not UTF-8 (with the file offset of the first bad byte), and JSON that does
  not parse (with its line and column).

The value is parsed by Python's ``json`` (``NaN`` and ``Infinity`` come back as floats: the
caller checks the values it uses and names the field).
"""

from __future__ import annotations

import io
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..io.user_files import TargetRefused, TooLarge, read_small
from .dataset import check_regular_file
from .json_stream import MAX_DEPTH, _ijson, _LoneSurrogate, _NestingGuard, _TooDeep

__all__ = ["MAX_DEPTH", "read_json_file", "stream_json_file"]

_CHUNK = 1 << 20


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= (1 << 20) else f"{n:,} bytes"


def read_json_file(path: Path, *, what: str, fix: str, max_bytes: int,
                   max_depth: int = MAX_DEPTH,
                   object_hook: Callable[[dict[str, Any]], Any] | None = None) -> object:
    """The JSON value in ``path``, read within the bounds above; one line if it cannot be.

    ``what`` names the file in the message (``"report"``, ``"manifest"``); ``fix`` ends it
    (``"write it again with --retrieval-eval-json"``). Messages read
    ``"{what} {path}: <fault>; {fix}"`` (a FIFO or a directory: the dataset guard's wording).
    ``object_hook`` is ``json.loads``'s: each object as it is parsed (a caller keeps only the
    fields it needs, so what it does not need is freed as the parse goes).
    """
    path = Path(path)
    check_regular_file(path, what)  # the dataset guard's wording for a FIFO, a device
    try:  # the bounded, never-blocking read every small file the plugin reads goes through
        data = read_small(path, max_bytes)
    except TooLarge as big:
        size = f"{_mib(big.size)}, larger" if big.size is not None else "larger"
        raise DataError(f"{what} {path}: {size} than the {_mib(max_bytes)} a {what} may be; "
                        f"{fix}") from None
    except TargetRefused:  # replaced between the stat and the open
        raise DataError(f"{what} {path}: not a regular file; {fix}") from None
    except OSError as exc:
        raise DataError(f"{what} {path}: cannot be read ({exc.strerror or exc}); {fix}"
                        ) from None
    try:
        guard = _NestingGuard(io.BytesIO(data), 0, limit=max_depth)
        while guard.read(_CHUNK):  # chunk by chunk: the scan's temporaries stay small
            pass
    except _TooDeep as deep:
        raise DataError(f"{what} {path}: nests JSON more than {max_depth} levels deep (at "
                        f"byte {deep.offset}); {fix}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{what} {path}: not UTF-8 text (byte {exc.start}); {fix}") from None
    del data
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return json.loads(text, object_hook=object_hook)
    except json.JSONDecodeError as exc:
        raise DataError(f"{what} {path}: not valid JSON ({exc.msg}, line {exc.lineno} column "
                        f"{exc.colno}: truncated or damaged); {fix}") from None
    except RecursionError:  # pragma: no cover - the depth bound comes first
        raise DataError(f"{what} {path}: nests JSON too deeply; {fix}") from None


class _Bounded:
    """A file read at most ``limit`` bytes: one more is a ``ValueError`` (it grew)."""

    def __init__(self, f: Any, limit: int) -> None:
        self.f, self.left = f, limit + 1

    def read(self, size: int = -1) -> bytes:
        chunk: bytes = self.f.read(self.left if size < 0 else min(size, self.left))
        self.left -= len(chunk)
        if self.left <= 0:
            raise ValueError("larger than the bound")
        return chunk


def stream_json_file(path: Path, *, max_bytes: int, max_depth: int = MAX_DEPTH,
                     map_type: type[dict[str, Any]] = dict) -> object | None:
    """The JSON value in ``path`` parsed as its bytes are read (ijson's C backend: the text is
    never held whole), each object built as a ``map_type`` (a dict subclass whose
    ``__setitem__`` may drop what its caller does not need, so the value's memory depends on
    what is kept, not on the file's size); None where anything is amiss (not a regular
    file, larger than ``max_bytes``, nested past ``max_depth``, a lone surrogate escape, not
    valid JSON or UTF-8, a BOM...): the caller then reads the file with
    :func:`read_json_file`, which names the fault in one line exactly as before."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as f:
            guard = _NestingGuard(_Bounded(f, max_bytes), 0, limit=max_depth)
            values = _ijson().items(guard, "", use_float=True, map_type=map_type)
            value: object = next(values, None)
            if value is None or next(values, None) is not None:  # pragma: no cover
                return None
            return value
    except (_TooDeep, _LoneSurrogate, ValueError, OSError, RecursionError):
        return None
    except Exception as exc:  # ijson's errors (JSONError and its kinds)
        if type(exc).__module__.startswith("ijson"):
            return None
        raise
    finally:
        os.close(fd)
