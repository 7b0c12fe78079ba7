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
    "pytest_retrieval_eval.config", "pytest_retrieval_eval.config.options",
    "pytest_retrieval_eval.plugin",
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


#: Modules a warm ``--retrieval-eval --no-model --retrieval-eval-retriever hybrid`` run on the
#: bundled sample has no use for (issue 35, "Fast again"): the other retrievers, the model
#: lane, the Hub, the dataset's parser (its corpus is cached) and the report's sections of
#: what the run did not do. Each one loaded is a parse and compile per run where pytest
#: cannot cache its rewritten bytecode (PYTHONDONTWRITEBYTECODE=1).
UNUSED_BY_HYBRID = {
    f"pytest_retrieval_eval.{name}" for name in (
        "retrievers.bm25", "retrievers.bm25_index", "retrievers.terms", "retrievers.command",
        "retrievers.command_process", "retrievers.trec_run", "retrievers.whatif",
        "retrievers.units", "retrievers.oracle", "retrievers.fusion",
        "retrievers.vipune_binary", "vectors.prep", "vectors.embedding",
        "vectors.model_files", "vectors.token_counts", "vectors.long_texts", "io.hub",
        "io.hub_deadline", "scoring.budget", "scoring.memory_metrics",
        "scoring.reference_recall", "reporting.memory_lines", "reporting.reference_lines",
        "reporting.config_lines", "reporting.cost_lines", "reporting.part_timing",
        "reporting.markdown", "data.json_stream", "data.subset", "data.turn_texts",
        "vipune.exports", "vipune.cli_output", "adapters", "adapters.registry",
        "adapters.library", "adapters.sessions", "adapters.langchain", "adapters.llamaindex",
        "adapters.mem0", "adapters.mem0_llm", "data.turn_rows", "mcp", "mcp.selector",
        "mcp.mapping", "mcp.retriever", "mcp.client", "reporting.view", "reporting.view.page")
}

RUN_PROBE = """
import json, sys, pytest
code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--retrieval-eval",
                    "--no-model", "--retrieval-eval-retriever", "hybrid"])
print("PROBE" + json.dumps([int(code), sorted(n for n in sys.modules
                                              if n.startswith("pytest_retrieval_eval"))]))
"""


def test_a_warm_hybrid_run_loads_only_what_it_uses(tmp_path: Path) -> None:
    """A warm hybrid run (its corpus cached) on the bundled sample imports none of the
    modules it does not use: only the retrievers it names, no model lane, no Hub, no parse of
    the dataset, no report section of what it did not do."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "RETRIEVAL_EVAL_")) and k != "GITHUB_STEP_SUMMARY"}
    env.update(RETRIEVAL_EVAL_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    (tmp_path / "run").mkdir()
    for _ in ("cold", "warm"):  # the first run builds the corpus; the second finds it
        done = subprocess.run([sys.executable, "-c", RUN_PROBE], cwd=tmp_path / "run",
                              env=env, capture_output=True, text=True, timeout=240,
                              check=True)
        line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE"))
        code, loaded = json.loads(line[len("PROBE"):])
        assert code == 0, done.stdout[-3000:]
    assert "pytest_retrieval_eval.retrievers.reference" in loaded  # the probe saw the run
    assert not UNUSED_BY_HYBRID & set(loaded), sorted(UNUSED_BY_HYBRID & set(loaded))


def test_network_deadline_default_is_the_hub_calls() -> None:
    """options.py states the Hub call's deadline without loading io/hub_deadline.py (off path);
    the two stay one number."""
    from pytest_retrieval_eval.config import options
    from pytest_retrieval_eval.io.hub_deadline import DEFAULT_DEADLINE

    assert options.DEFAULT_NETWORK_DEADLINE == DEFAULT_DEADLINE


def test_lazy_names_keep_their_homes() -> None:
    """What moved so that a run loads less is still found where it was, and the names stated
    twice (so that the light module need not load the heavy one) stay one value."""
    from pytest_retrieval_eval.retrievers import REGISTRY, base, fusion, loader, trec_run
    from pytest_retrieval_eval.retrievers.bm25 import BM25Retriever
    from pytest_retrieval_eval.retrievers.oracle import OracleRetriever
    from pytest_retrieval_eval.retrievers.reference import (
        FtsRetriever,
        HybridRetriever,
        SemanticRetriever,
    )
    from pytest_retrieval_eval.scoring import budget, memory_metrics, metrics
    from pytest_retrieval_eval.vectors import cache, prep
    from pytest_retrieval_eval.vipune import exports, store

    assert loader.RUN_PREFIX == trec_run.PREFIX
    assert fusion.part_times is base.part_times
    assert (prep.query_key, prep.query_prefix, prep.query_text) == (
        cache.query_key, cache.query_prefix, cache.query_text)
    assert (store.export_name, store.export_store) == (exports.export_name,
                                                       exports.export_store)
    assert (budget.TOKENS, budget.BUDGET_SUFFIX) == (metrics.TOKENS, metrics.BUDGET_SUFFIX)
    assert (memory_metrics.MEMORY_RECALL, memory_metrics.TURN_RECALL) == (
        metrics.MEMORY_RECALL, metrics.TURN_RECALL)
    built = {name: type(REGISTRY[name]({})) for name in ("hybrid", "semantic", "fts", "bm25",
                                                          "oracle")}
    assert built == {"hybrid": HybridRetriever, "semantic": SemanticRetriever,
                     "fts": FtsRetriever, "bm25": BM25Retriever, "oracle": OracleRetriever}
