"""The exact-cosine store (:mod:`.cosine`) as an MCP server: ``remember {text, metadata}``
-> ``{"id"}``, ``recall {query, limit}`` -> ``{"results": [{"id", "score", "text",
"metadata"}]}``, ``reset`` (a URL server's per-persona reset). ``python cosine_server.py``
speaks stdio; ``--http PORT`` streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from mcp.server.mcpserver import MCPServer

from tests.support.mcp.cosine import Memories

server = MCPServer("cosine")
state = {"store": Memories()}


@server.tool()
def remember(text: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Store one memory."""
    return {"id": state["store"].add(text, metadata)}


@server.tool()
def recall(query: str, limit: int = 5) -> dict[str, Any]:
    """The memories nearest the query, best first."""
    return {"results": state["store"].search(query, limit)}


@server.tool()
def reset() -> dict[str, Any]:
    """Forget everything."""
    state["store"] = Memories()
    return {"ok": True}


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
