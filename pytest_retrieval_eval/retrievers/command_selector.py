"""A ``cmd:`` selector read (:mod:`.command`): ``cmd:COMMAND`` split into words as a POSIX
shell splits them, and ``cmd:NAME=COMMAND``'s name given up front."""

from __future__ import annotations

import re
import shlex

from ..errors import RetrievalEvalError

__all__ = ["PREFIX", "command_name", "parse_command"]

PREFIX = "cmd:"
#: ``cmd:NAME=COMMAND``: the column's name given up front, so that it is known at collection
#: (``-k NAME``, the marker's ``retriever=NAME``) before any command runs. NAME is a word of
#: letters, digits, ``_``, ``.`` and ``-``; a first word with ``=`` past anything else
#: (``cmd:node --flag=1 s.js``, ``cmd:./a=b``) is part of the command.
_NAMED = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)=(?=\S)")


def _split_name(selector: str) -> tuple[str | None, str]:
    """A selector's up-front name (None when it gives none) and its command's text."""
    text = selector[len(PREFIX):] if selector.startswith(PREFIX) else selector
    named = _NAMED.match(text)
    if named is None:
        return None, text
    return named.group(1), text[named.end():]


def command_name(selector: str) -> str | None:
    """The column's name a ``cmd:NAME=COMMAND`` selector gives up front, else None (the
    column is then named by the command's hello, once it runs)."""
    return _split_name(selector)[0]


def parse_command(selector: str) -> list[str]:  # options.py checks selectors with it
    """``"cmd:node store.js"`` -> ``["node", "store.js"]`` (split as a POSIX shell splits
    words; no shell runs it); ``"cmd:exact=node store.js"`` gives the same command, named
    ``exact`` up front (:func:`command_name`). :class:`RetrievalEvalError` when nothing is
    left to run."""
    text = _split_name(selector)[1]
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise RetrievalEvalError(
            f"retriever '{selector}': its command cannot be split into words ({exc}); "
            "close its quotes, e.g. cmd:\"node my store.js\"") from None
    if not argv:
        raise RetrievalEvalError(
            f"retriever '{selector}' names no command; give one after 'cmd:', "
            "e.g. cmd:node store.js")
    return argv
