"""Tests of mcp: retrievers (issue 45)."""
