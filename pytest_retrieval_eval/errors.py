"""Exceptions whose message is the one line a user reads, and :func:`one_line`, which makes
any text (often a multi-line library error) such a line; :func:`printable`, which shows
dataset text (ids, questions) on the terminal with its control characters escaped.

Every message names the thing, says what is wrong with it and what to do, on one line.
The plugin turns a :class:`RetrievalEvalError` raised while configuring a run into a
``pytest.UsageError`` (exit code 4); raised while an item runs, it fails that item only,
except a :class:`StopRun`, which stops the run there (exit 4).

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

import re

#: How a message marks the command that fixes it: between backticks, after ``run ``,
#: ``with ``, ``try `` or ``: `` (``run `retrieval-eval prep --data sample` first``,
#: ``...: `pytest --retrieval-eval --no-model```). Backticks elsewhere quote (``command `x`
#: does not start``). Advice that names an option is one word in the ``=`` form (``pass
#: --retrieval-eval-model=DIR``). :func:`fit_error` never splits either; a marked command,
#: with the punctuation touching its end, stands on a line of its own.
COMMAND = re.compile(r"((?:(?<=\brun )|(?<=\bwith )|(?<=\btry )|(?<=: ))`[^`]+`\S*)")


class RetrievalEvalError(Exception):
    """A problem the user can fix; ``str(error)`` is one readable line."""


class DataError(RetrievalEvalError):
    """The dataset file (or a named dataset) cannot be used."""


class CacheError(RetrievalEvalError):
    """The vector cache or a prep output is missing, corrupt or from another model."""


class ModelError(RetrievalEvalError):
    """The embedding model cannot be found, downloaded or run."""


class CacheHubError(RetrievalEvalError):
    """A prepared cache could not be pushed to or pulled from the Hugging Face Hub."""


class RetrieverError(RetrievalEvalError):
    """A retriever failed for one pair (the item fails; the run goes on)."""


class LibraryWarning(UserWarning):
    """A library an adapter drives is installed at a version outside the range it was tested
    with (``adapters/library.py``); printed as one terminal line at the run's start."""


class StopRun(RetrievalEvalError):
    """A fault that every item would meet alike (a user store that cannot be created, the
    custom fixture raising): the first one stops the run as a usage error (exit 4, no report
    written), never a failure per item."""


def one_line(text: object, limit: int | None = None) -> str:
    """``str(text)`` with every run of whitespace (newlines included) made one space; longer
    than ``limit`` characters, it is cut to ``limit`` ending in ``...``."""
    line = " ".join(str(text).split())
    if limit is None or len(line) <= limit:
        return line
    return line[: limit - 3] + "..."


def terminal_width() -> int:
    """The terminal's columns as pytest's terminal writer reads them (``COLUMNS``, then the
    terminal, else 80; below 40 taken as 80)."""
    import shutil

    width = shutil.get_terminal_size(fallback=(80, 24)).columns
    return width if width >= 40 else 80


def fit_error(text: object, width: int | None = None, prefix: str = "") -> str:
    """A one-line message as lines for a terminal ``width`` columns wide (None: the
    terminal's, :func:`terminal_width`), printed after ``prefix`` (pytest's ``ERROR: ``, the
    console script's ``retrieval-eval: error: ``): cut at spaces, each continuation indented
    two spaces, a word never cut. A command marked by backticks (:data:`COMMAND`) is never
    split and, in a message that does not fit, stands on a line of its own. The first line
    starts as the message does (the thing and what is wrong: ``grep ERROR`` finds it);
    joining the lines with one space for each newline and its indent gives the message."""
    import textwrap

    line = one_line(text)
    room = terminal_width() if width is None else width
    if len(prefix) + len(line) <= room:
        return line
    out: list[str] = []
    for i, piece in enumerate(COMMAND.split(line)):
        piece = piece.strip(" ")
        if not piece:
            continue
        if i % 2:  # a command: whole, on its own line
            out.append(piece if not out else "  " + piece)
            continue
        lead = "\x00" * len(prefix) if not out else "  "
        wrapped = textwrap.wrap(piece, width=max(room, len(lead) + 12), initial_indent=lead,
                                subsequent_indent="  ", break_long_words=False,
                                break_on_hyphens=False)
        if not out:
            wrapped[0] = wrapped[0].lstrip("\x00")
        out.extend(wrapped)
    return "\n".join(out)


def printable(text: object) -> str:
    """``str(text)`` with every character that is not printable (control characters such as
    newline and ESC, format characters such as U+202E, line and paragraph separators) written
    as Python escapes it (``\\n``, ``\\x1b``, ``\\u202e``): dataset text on the terminal can
    neither start a line, move the cursor, recolour the screen nor reorder what follows."""
    line = str(text)
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def write_fault(exc: BaseException, folder: object) -> str:
    """What to tell the user when writing under ``folder`` failed with ``exc``: permission
    as permission, a read-only file system as such, a full disk as a full disk; only an
    error that says none of these gets the general advice."""
    import errno
    import os

    code = getattr(exc, "errno", None)
    text = str(exc).lower()
    if code in (errno.EACCES, errno.EPERM) or "permission" in text or "readonly database" in text:
        return f"permission denied; make {folder} writable for this user"
    if code == errno.EROFS or "read-only file system" in text:
        return f"{folder} is on a read-only file system; pass a writable cache folder"
    if code in (errno.ENOSPC, errno.EDQUOT) or "disk is full" in text or "no space" in text:
        return f"the disk is full; free disk space in {folder}"
    probe = os.fspath(folder)  # type: ignore[call-overload]
    while probe and not os.path.isdir(probe):
        probe = os.path.dirname(probe)
    if probe:
        try:
            if os.statvfs(probe).f_flag & os.ST_RDONLY:
                return f"{folder} is on a read-only file system; pass a writable cache folder"
        except OSError:
            pass
        if not os.access(probe, os.W_OK):
            return f"permission denied; make {folder} writable for this user"
    return f"check free disk space and permissions in {folder}"
