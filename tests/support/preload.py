"""The plugin's run modules, loaded once in the test process, for pytester's in-process runs.

An in-process run (``pytester.runpytest``) puts ``sys.modules`` back as it found it when it
ends, so each module the run imported and the test process had not is dropped, and imported
again by the next run: parsed from source, its asserts rewritten, compiled (the suite runs
with ``PYTHONDONTWRITEBYTECODE=1``, so no cached bytecode helps). That was about 0.6 s of the
0.75 s of CPU a small in-process run took. A module the test process holds is kept by every
run: importing this module loads the plugin's run modules once, and each run after uses them.

What a run needs stays lazy in the plugin itself (tests/plugin/test_off_cost.py checks, in
child processes, what a run imports); only the test process holds them all. Left out: the
command line (``cli``, ``__main__``: it runs at import) and the optional integrations
(``mcp``, ``adapters``), whose third-party imports no plugin run of these tests makes. One
third-party module is loaded too: the budget's tokenizer (below).
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil

import pytest_retrieval_eval
from pytest_retrieval_eval.vectors import token_counts

_SKIPPED = tuple(f"pytest_retrieval_eval.{name}"
                 for name in ("cli", "__main__", "mcp", "adapters"))

#: The modules loaded, by name.
LOADED: tuple[str, ...] = tuple(
    info.name for info in pkgutil.walk_packages(pytest_retrieval_eval.__path__,
                                                "pytest_retrieval_eval.")
    if not info.name.startswith(_SKIPPED))

for _name in LOADED:
    importlib.import_module(_name)

# The budget's tokenizer (bpe-openai's extension, loaded as the plugin loads it): a run with
# a budget would otherwise load it afresh each time.
with contextlib.suppress(ImportError):  # the test extra's; without it, runs fail as before
    token_counts._bpe_bindings()
