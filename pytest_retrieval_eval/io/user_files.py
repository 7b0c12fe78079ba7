"""Files at paths the user names (the JSON report, the Markdown file, compare's ``--json``,
``$GITHUB_STEP_SUMMARY``): written without ever replacing what stands there.

* A symlink is written through: the file it points at gets the new content, the link stays.
* A target that exists and is not a regular file (FIFO, character or block device, socket,
  directory) is refused before anything is opened: :class:`TargetRefused`, whose ``reason``
  says what stands there. Nothing blocks on a FIFO: the check is a ``stat``, and an append
  opens with ``O_NONBLOCK`` and checks the opened file again (a FIFO swapped in between).
* :func:`replace_file` (and :func:`replace_text`) writes atomically *at the resolved path*:
  a temp file in the target's own folder, fsynced, given the umask's mode, then
  ``os.replace``. A failure leaves the old file as it was and no temp behind.
* :func:`append_text` appends (the job summary is shared with the job's other steps).
* :func:`read_small` reads a small file the plugin did not write itself (a cache manifest, a
  Hub download) with the same guards: a regular file (opened ``O_NONBLOCK``, checked with
  ``fstat``: a FIFO never blocks), at most ``limit`` bytes; :func:`parse_json` parses it
  with deep nesting refused as ``ValueError`` (never ``RecursionError``).
* :func:`json_text` is the one JSON encoding of what the plugin writes: ``allow_nan=False``,
  so a NaN or infinity is refused (``ValueError``) instead of written as non-JSON.

Raises plain ``OSError`` (``TargetRefused`` is one); callers word their own line with
:func:`fault`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import write_fault
from .checksums import file_mode

__all__ = ["TargetRefused", "TooLarge", "append_text", "fault", "json_text", "parse_json",
           "read_small", "replace_file", "replace_text", "resolve_target"]


class TargetRefused(OSError):
    """The path names something that is not a regular file; ``reason`` says what."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(errno.EINVAL, reason, str(path))
        self.reason = reason


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _refuse_unless_regular(path: Path, st: os.stat_result, named: Path) -> None:
    if not stat.S_ISREG(st.st_mode):
        where = "it is" if path == named else f"it points to {path}, which is"
        raise TargetRefused(named, f"{where} {_kind(st.st_mode)}, not a regular file")


def resolve_target(path: Path) -> Path:
    """Where writing ``path`` must land: symlinks followed (a dangling one names the file to
    create). Raises :class:`TargetRefused` when something other than a regular file stands
    there (checked with ``stat``: nothing is opened), ``OSError`` when it cannot be stat'ed."""
    named = Path(path)
    resolved = Path(os.path.realpath(named))
    try:
        # The named path, links followed by the kernel: /dev/stdout and /proc/self/fd/1 reach
        # the pipe or terminal itself, where realpath only gives a name ('pipe:[…]').
        st = os.stat(named)
    except (FileNotFoundError, NotADirectoryError):
        return resolved  # absent, or a dangling link: the file to create (mkdir says more)
    _refuse_unless_regular(resolved, st, named)
    return resolved


def replace_file(path: Path, write: Callable[[BinaryIO], object]) -> Path:
    """Put what ``write(handle)`` writes at ``path`` atomically (through a symlink, at its
    target); returns the path written. A target that is not a regular file is refused
    (:class:`TargetRefused`); a failure in ``write`` leaves the old file and no temp."""
    target = resolve_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode())  # the umask's mode, not mkstemp's 0600
        with contextlib.suppress(FileNotFoundError):  # swapped in since resolve_target?
            _refuse_unless_regular(target, os.lstat(target), Path(path))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def replace_text(path: Path, text: str) -> Path:
    """:func:`replace_file` with ``text`` in UTF-8."""
    data = text.encode("utf-8")
    return replace_file(path, lambda fh: fh.write(data))


def append_text(path: Path, text: str) -> Path:
    """Append ``text`` to ``path`` (created when absent; through a symlink). Never blocks on
    a FIFO and never writes to a device: refused with :class:`TargetRefused`."""
    target = resolve_target(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags, file_mode())
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO / directory swapped in
            raise TargetRefused(target, "it is not a regular file") from None
        raise
    try:
        _refuse_unless_regular(target, os.fstat(fd), Path(path))
        os.set_blocking(fd, True)
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
    return target


class TooLarge(ValueError):
    """A file holds more than a reader allows; ``size`` is its size (None: it grew while
    being read)."""

    def __init__(self, message: str, size: int | None) -> None:
        super().__init__(message)
        self.size = size


def read_small(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (through symlinks), refused when it holds more
    than ``limit`` bytes (:class:`TooLarge`, a ``ValueError`` saying so) or is not a regular
    file
    (:class:`TargetRefused`; opened ``O_NONBLOCK``, so a FIFO never blocks). ``OSError``
    (``FileNotFoundError`` among them) when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        _refuse_unless_regular(Path(path), st, Path(path))
        if st.st_size > limit:
            raise TooLarge(f"it holds {st.st_size:,} bytes, more than the {limit:,} bytes "
                           f"allowed here", st.st_size)
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= limit and (chunk := os.read(fd, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew since the fstat
            raise TooLarge(f"it holds more than the {limit:,} bytes allowed here", None)
        return b"".join(chunks)
    finally:
        os.close(fd)


def parse_json(data: bytes | str) -> Any:
    """``json.loads`` where nesting too deep for the parser is a ``ValueError`` too."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def json_text(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` with ``allow_nan=False``: NaN and infinities raise ``ValueError``."""
    return json.dumps(value, allow_nan=False, **kwargs)


def fault(exc: OSError, path: Path) -> str:
    """Why writing ``path`` failed, in words: what stands there for a refused target, a
    folder where a file should be, else :func:`errors.write_fault` (permissions, read-only,
    disk full)."""
    if isinstance(exc, TargetRefused):
        return exc.reason
    if exc.errno == errno.EISDIR:
        return "it is a directory, not a regular file"
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return "a file stands where one of its folders should be"
    if exc.errno == errno.ENAMETOOLONG:
        return "its name, or the name of one of its folders, is too long for the file system"
    return write_fault(exc, Path(path).parent)
