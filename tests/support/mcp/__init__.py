"""MCP servers written for the tests of ``mcp:`` retrievers (issue 45)."""
