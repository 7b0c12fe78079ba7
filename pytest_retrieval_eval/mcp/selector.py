"""An ``mcp:`` selector read: ``mcp:[NAME=]TARGET[+key:value...]``.

TARGET is a URL (``http://`` or ``https://``: a running streamable-HTTP server) or a command
(split into words as a POSIX shell splits them; no shell runs it). NAME names the column up
front, as ``cmd:NAME=COMMAND`` does (:mod:`..retrievers.command_selector`). The options
follow the what-if grammar: ``+key:value`` parts, each value a whole number, a decimal, ``true``
or ``false``, else text. They begin at the first ``+`` that is followed by ``key:``, so a
command may hold a ``+`` elsewhere (``g++``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..errors import RetrievalEvalError, printable
from ..retrievers.base import MCP_PREFIX
from ..retrievers.variants import _keyword_value

__all__ = ["PREFIX", "McpSelector", "parse_selector"]

#: The selector prefix of a memory server over MCP (one spelling: retrievers/base.py).
PREFIX = MCP_PREFIX

#: ``NAME=`` up front (as for ``cmd:``): letters, digits, ``_``, ``.``, ``-``.
_NAMED = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)=(?=\S)")
#: Where the options begin: a ``+`` followed by ``key:``.
_OPTIONS = re.compile(r"\+(?=[A-Za-z_][A-Za-z0-9_]*:)")


@dataclass(frozen=True)
class McpSelector:
    """A selector's parts: the name given up front (or None), the server (a URL or a
    command's words) and the options as typed values."""

    selector: str
    name: str | None
    url: str | None
    argv: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        """The server as written: the URL, or the command joined."""
        return self.url if self.url is not None else shlex.join(self.argv)


def parse_selector(selector: str) -> McpSelector:
    """``selector`` read, or one :class:`RetrievalEvalError` line naming the fix."""
    shown = printable(selector)
    text = selector[len(PREFIX):] if selector.startswith(PREFIX) else selector
    named = _NAMED.match(text)
    name = None
    if named is not None and not text.startswith(("http:", "https:")):
        name, text = named.group(1), text[named.end():]
    cut = _OPTIONS.search(text)
    head, rest = (text, "") if cut is None else (text[:cut.start()], text[cut.end():])
    options: dict[str, Any] = {}
    for part in rest.split("+") if rest else []:
        key, sep, value = part.partition(":")
        if not sep or not key.isidentifier() or not value:
            raise RetrievalEvalError(
                f"retriever '{shown}': {printable(repr(part))} is not key:value; write options as "
                "mcp:COMMAND+key:value+key:value, e.g. mcp:my-server+preset:vipune")
        if key in options:
            raise RetrievalEvalError(
                f"retriever '{shown}': option {printable(repr(key))} is given twice; give "
                "each once")
        options[key] = _keyword_value(value)
    head = head.strip()
    if head.startswith(("http://", "https://")):
        if any(c.isspace() for c in head):
            raise RetrievalEvalError(
                f"retriever '{shown}': the URL {printable(repr(head))} holds a space; give "
                "mcp:http://HOST:PORT/PATH")
        return McpSelector(selector, name, head, (), options)
    try:
        argv = tuple(shlex.split(head))
    except ValueError as exc:
        raise RetrievalEvalError(
            f"retriever '{shown}': its command cannot be split into words "
            f"({printable(exc)}); close its quotes, e.g. mcp:\"python my server.py\"") from None
    if not argv:
        raise RetrievalEvalError(
            f"retriever '{shown}' names no server; give a command or a URL after 'mcp:', "
            "e.g. mcp:npx -y @modelcontextprotocol/server-memory+preset:server-memory")
    return McpSelector(selector, name, None, argv, options)
