"""The plugin off costs as little as it can: the hook module loads only what registering
options and fixtures needs, and pytest does not rewrite those modules' asserts (they hold
no test asserts: ``PYTEST_DONT_REWRITE``). benchmarks/off_cost.py measures the time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: The plugin's modules a run with the plugin off imports, exactly (a new one here is a cost to
#: weigh: pytest parses each from source in every run where it cannot cache its rewritten
#: bytecode, PYTHONDONTWRITEBYTECODE=1; benchmarks/RESULTS.md, "Off cost (issue 29)").
OFF_MODULES = {
    "pytest_retrieval_eval", "pytest_retrieval_eval.fixtures",
    "pytest_retrieval_eval.options", "pytest_retrieval_eval.plugin",
}

PROBE = """
import json, sys, pytest
pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "test_one.py"])
mods = {n: [hasattr(m, "@py_builtins"), "PYTEST_DONT_REWRITE" in (m.__doc__ or "")]
        for n, m in sys.modules.items() if n.startswith("pytest_retrieval_eval")}
print("PROBE" + json.dumps(mods))
"""


def test_off_loads_few_modules_and_rewrites_none(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE"))
    loaded: dict[str, list[bool]] = json.loads(line[len("PROBE"):])
    assert set(loaded) == OFF_MODULES, sorted(set(loaded) ^ OFF_MODULES)
    unmarked = sorted(name for name, (_, marked) in loaded.items() if not marked)
    assert not unmarked, unmarked  # pytest rewrites a plugin's modules unless marked
    rewritten = sorted(name for name, (was, _) in loaded.items() if was)
    assert not rewritten, rewritten  # a wheel's modules, or (pytest 9) an editable install's


def test_off_registers_no_hook_of_an_enabled_run(pytester: pytest.Pytester) -> None:
    """Off, only the thin hook module and the fixtures are plugins: none of the hooks that
    wrap each test (collection, reports) is called; on, the run's hooks are registered."""
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    off = pytester.parseconfigure("-p", "no:cacheprovider")
    assert off.pluginmanager.get_plugin("retrieval-eval-run") is None
    assert off.pluginmanager.get_plugin("retrieval-eval-fixtures") is not None
    on = pytester.parseconfigure("-p", "no:cacheprovider", "--retrieval-eval", "--no-model")
    assert on.pluginmanager.get_plugin("retrieval-eval-run") is not None


def test_network_deadline_default_is_the_hub_calls() -> None:
    """options.py states the Hub call's deadline without loading io/hub_deadline.py (off path);
    the two stay one number."""
    from pytest_retrieval_eval import options
    from pytest_retrieval_eval.io.hub_deadline import DEFAULT_DEADLINE

    assert options.DEFAULT_NETWORK_DEADLINE == DEFAULT_DEADLINE
