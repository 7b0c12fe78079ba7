"""Running the plugin in pytester and reading the JSON report it wrote."""

from __future__ import annotations

import json
from typing import Any

import pytest


def run_with_report(pytester: pytest.Pytester, *args: str
                    ) -> tuple[pytest.RunResult, dict[str, Any]]:
    """``pytest --retrieval-eval --no-model ARGS`` in-process, asserting exit 0; the run and
    its JSON report."""
    out = pytester.path / "report.json"
    result = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                                "--retrieval-eval", "--no-model", "--retrieval-eval-json",
                                str(out), *args)
    assert result.ret == 0, result.stdout.str()
    data: dict[str, Any] = json.loads(out.read_text())
    return result, data
