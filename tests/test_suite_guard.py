"""The suite's own guard against a hung test (conftest.py, ``HANG_S``)."""

from __future__ import annotations

import pytest

from conftest import HANG_S


def test_every_test_has_a_ceiling_where_pytest_timeout_is_installed(
        request: pytest.FixtureRequest) -> None:
    if not request.config.pluginmanager.hasplugin("timeout"):
        pytest.skip("pytest-timeout is not installed (the test extra installs it)")
    mark = request.node.get_closest_marker("timeout")
    assert mark is not None and mark.args == (HANG_S,) and mark.kwargs == {"method": "thread"}
