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
* :func:`same_file` and :func:`first_clash`: whether an output path names a file the same
  run reads or writes otherwise (by resolved path, and by device and inode: a hard link or a
  second mount), so a report never replaces its dataset, its base or another output.
* A write removes what killed writes to the same target left (:func:`sweep_temps`): the
  temp names hold the writer's host and pid, so a live writer's temp is never touched;
  :func:`sweep_dead_temps` removes a folder's temps of dead writers whatever their target.
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
import re
import secrets
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import write_fault
from .checksums import file_mode, owner_is_dead, owner_tag

__all__ = ["TargetRefused", "TooLarge", "append_text", "fault", "first_clash", "inside_folder",
           "json_text",
           "parse_json", "read_small", "replace_file", "replace_text", "resolve_target",
           "same_file", "sweep_dead_temps", "sweep_temps", "temp_prefix"]


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


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once symlinks are resolved, or,
    both existing, the same device and inode (a hard link, a bind mount)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def inside_folder(path: Path, folder: Path) -> bool:
    """Whether ``path`` (symlinks resolved) lies in ``folder`` or below it: an output
    inside a cache folder could replace a cache file."""
    target, root = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return target == root or root in target.parents


def first_clash(outputs: Sequence[tuple[str, Path | None]],
                inputs: Sequence[tuple[str, Path | None]]) -> tuple[str, Path, str] | None:
    """The first output that names the same file as an input or as an earlier output:
    ``(its label, its path, the other's label)``; None when every output has a file of its
    own. Labels name the options (``--retrieval-eval-json``); a None path is not given."""
    given_in = [(label, Path(p)) for label, p in inputs if p is not None]
    seen: list[tuple[str, Path]] = []
    for label, p in outputs:
        if p is None:
            continue
        path = Path(p)
        for other, other_path in [*given_in, *seen]:
            if same_file(path, other_path):
                return label, path, other
        seen.append((label, path))
    return None


def replace_file(path: Path, write: Callable[[BinaryIO], object]) -> Path:
    """Put what ``write(handle)`` writes at ``path`` atomically (through a symlink, at its
    target); returns the path written. A target that is not a regular file is refused
    (:class:`TargetRefused`); a failure in ``write`` leaves the old file and no temp."""
    target = resolve_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_temps(target)
    fd, tmp = _new_temp(target)
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


#: A temp file of a write to a target: ``.<target name>.<host>-<pid>-<n>.tmp``.
_TEMP_RE = re.compile(r"\.([A-Za-z0-9]+)-(\d+)-\d+\.tmp")
#: What ``mkstemp`` named them before the writer's host and pid were in the name.
_OLD_TEMP_RE = re.compile(r"\.[a-z0-9_]{8}\.tmp")
#: A temp of another host untouched this long is taken as left by a dead writer.
STALE_TEMP_SECONDS = 24 * 3600


def temp_prefix(target: Path) -> str:
    """How every temp file of a write to ``target`` begins: ``.<name>``."""
    return f".{Path(target).name}"


def _new_temp(target: Path) -> tuple[int, str]:
    """A new temp file beside ``target``, created exclusively (mode 0600 until finished)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = target.with_name(f"{temp_prefix(target)}.{owner_tag()}-"
                               f"{secrets.randbelow(10**9)}.tmp")
        try:
            return os.open(tmp, flags, 0o600), str(tmp)
        except FileExistsError:
            continue


def _remove_left(folder: Path, left: Callable[[os.DirEntry[str]], bool]) -> int:
    """Remove each regular file of ``folder`` that ``left`` says a killed write left there;
    returns how many. The one scan both sweeps share: an entry that vanishes, cannot be
    read or cannot go is passed over (another sweeper may be at it)."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            if not left(entry) or not entry.is_file(follow_symlinks=False):
                continue
            os.unlink(entry.path)
            removed += 1
        except OSError:
            continue
    return removed


def sweep_temps(target: Path) -> int:
    """Remove the temp files that killed writes to ``target`` left beside it; returns how
    many. A temp of a live writer (this host, its pid alive) is kept; one of another host,
    once untouched for :data:`STALE_TEMP_SECONDS`; one named the old way (no owner), always."""
    target = Path(target)
    prefix = temp_prefix(target)
    this_host = owner_tag().rsplit("-", 1)[0]

    def left(entry: os.DirEntry[str]) -> bool:
        if not entry.name.startswith(prefix) or not entry.name.endswith(".tmp"):
            return False
        rest = entry.name[len(prefix):]
        match = _TEMP_RE.fullmatch(rest)
        if match is None:
            return _OLD_TEMP_RE.fullmatch(rest) is not None
        host, pid = match.group(1), int(match.group(2))
        if host == this_host:
            return owner_is_dead(host, pid)  # a live writer's (this process's too) stays
        return time.time() - entry.stat(follow_symlinks=False).st_mtime >= STALE_TEMP_SECONDS

    return _remove_left(target.parent, left)


#: Any temp name :func:`_new_temp` gives: ``.<target name>.<host>-<pid>-<n>.tmp``.
_ANY_TEMP_RE = re.compile(r"\..+\.([A-Za-z0-9]+)-(\d+)-\d+\.tmp")


def sweep_dead_temps(folder: Path) -> int:
    """Remove from ``folder`` the temps of writers on this host that are dead, whatever
    target they were written for (a killed ``generate`` to another name); returns how many.
    Only names :func:`_new_temp` gives are touched, and only a dead pid's."""
    this_host = owner_tag().rsplit("-", 1)[0]

    def left(entry: os.DirEntry[str]) -> bool:
        match = _ANY_TEMP_RE.fullmatch(entry.name)
        return match is not None and match.group(1) == this_host and owner_is_dead(
            this_host, int(match.group(2)))

    return _remove_left(Path(folder), left)


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
