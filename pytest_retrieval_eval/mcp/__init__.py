"""``mcp:`` retrievers: a memory server measured over the Model Context Protocol (issue 45).

``mcp:[NAME=]COMMAND[+key:value...]`` starts a stdio server, one fresh process per persona;
``mcp:[NAME=]http://HOST:PORT/PATH[+key:value...]`` talks to a running streamable-HTTP
server, one session per persona. A mapping (:mod:`.mapping`: a preset or a TOML file) says
which tool stores, which searches, and where ids, scores, texts and provenance sit in their
answers. Only :mod:`.client` imports the ``mcp`` SDK (the ``[mcp]`` extra), and only once an
``mcp:`` retriever is built. docs/memory-servers.md is the user's page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import RetrievalEvalError
from .selector import PREFIX

if TYPE_CHECKING:
    from .retriever import McpRetriever

__all__ = ["EXTRA", "PREFIX", "make_retriever"]

#: The extra that installs the SDK.
EXTRA = "pytest-retrieval-eval[mcp]"
#: The SDK's own distributions: a missing one means the extra is not installed.
_SDK = ("mcp", "mcp_types", "anyio", "httpx", "httpx2", "httpx_sse", "pydantic",
        "pydantic_core", "sse_starlette", "starlette", "jsonschema")


def make_retriever(selector: str, options: object) -> McpRetriever:
    """The ``mcp:`` retriever for ``selector`` (the SDK imported now), or one line naming
    the extra when the SDK is not installed."""
    try:
        from .retriever import make_mcp_retriever
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in _SDK:
            raise
        raise RetrievalEvalError(
            f"retriever '{selector}' needs the MCP SDK ({exc.name} is not installed); "
            f"install it with pip install '{EXTRA}'") from None
    return make_mcp_retriever(selector, options)
