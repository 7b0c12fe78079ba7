"""Two runs in one process (pytester's in-process runs, ``pytest.main`` called twice) each
score as a fresh process would. The first run's modules leave ``sys.modules`` after it, but
their bindings on the plugin's packages stay; without :func:`.plugin.forget_dropped_submodules`
the second run's ``from . import fixtures`` took the dropped module (its stash key a twin), so
every pair skipped as if the plugin were off, and the explain facts' class checks saw twins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.processes import CHILD_ADDOPTS

#: Runs the bundled sample twice in one interpreter, putting sys.modules back after each run
#: as pytester does, with the plugin's hook module (as the outer pytest has it) loaded before.
TWICE = """
import json, sys
import numpy, pyarrow.parquet  # C extensions load once a process, as under pytester
import pytest
import pytest_retrieval_eval.plugin

def run(out):
    before = dict(sys.modules)
    code = pytest.main(["--retrieval-eval", "--no-model", "-q", "-p", "no:cacheprovider",
                        "-p", "no:randomly", "--retrieval-eval-retriever=hybrid",
                        "--retrieval-eval-json=" + out])
    for name in [n for n in sys.modules if n not in before]:
        del sys.modules[name]
    return int(code)

print("CODES" + json.dumps([run("first.json"), run("second.json")]))
"""


def _facts(report: Path) -> tuple[list[object], int]:
    pairs = json.loads(report.read_text())["pairs"]
    return ([(p["question_id"], p["metrics"]) for p in pairs],
            sum(1 for p in pairs if (p.get("explain") or {}).get("fusion")))


def test_a_second_run_in_one_process_scores_as_the_first(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(HF_HUB_OFFLINE="1", RETRIEVAL_EVAL_CACHE_DIR=str(tmp_path / "cache"),
               PYTEST_ADDOPTS=CHILD_ADDOPTS)
    done = subprocess.run([sys.executable, "-c", TWICE], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    line = next((x for x in done.stdout.splitlines() if x.startswith("CODES")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(line[len("CODES"):]) == [0, 0], done.stdout[-2000:]
    first, second = _facts(tmp_path / "first.json"), _facts(tmp_path / "second.json")
    assert first[0], "the first run scored no pair"
    assert second == first
    assert first[1] == len(first[0]), "hybrid's explain facts lost their fusion rows"


@pytest.mark.parametrize("bound", ["fixtures", "run_hooks"])
def test_a_dropped_submodule_is_unbound_from_its_package(bound: str) -> None:
    import pytest_retrieval_eval as package
    from pytest_retrieval_eval.plugin import forget_dropped_submodules

    name = f"pytest_retrieval_eval.{bound}"
    __import__(name)
    kept = sys.modules.pop(name)
    try:
        assert getattr(package, bound) is kept
        forget_dropped_submodules()
        assert bound not in vars(package)
    finally:
        sys.modules[name] = kept
        setattr(package, bound, kept)
