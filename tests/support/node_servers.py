"""The real Node MCP servers the tests run (``@modelcontextprotocol/server-memory``), pinned.

The versions are pinned in ``tests/support/npm/package.json`` and its ``package-lock.json``;
``.ci/run`` installs them with ``npm ci`` into ``.mcp-servers/`` at the repository root
(git-ignored) before the tests. A test that needs one calls :func:`server_memory`: it skips
(with the reason) only where ``node`` is absent; where the install is missing or stale it runs
the same ``npm ci`` once (under a lock, for ``-n 2``), and fails in one line if that fails.

What ``server-memory`` 2026.8.31 does (read in its ``dist/index.js``):

- a knowledge graph of entities ``{name, entityType, observations: [str]}`` and relations,
  kept as JSON lines in ``MEMORY_FILE_PATH`` (an absolute path is used as is; a relative one
  is taken from the package's own ``dist/`` folder, not the working folder; unset, the file
  is ``dist/memory.jsonl``, shared by every run: give each persona its own absolute path);
- ``create_entities {entities}``: adds the entities whose name is new (a name given again is
  skipped silently), rewriting the whole file each call;
- ``search_nodes {query}``: every entity whose name, entityType or any observation contains
  the WHOLE query as a substring, case-insensitively (``toLowerCase().includes``), in the
  graph's (insertion) order, with no score and no limit; answered as JSON text
  ``{"entities": [...], "relations": [...]}`` (and the same as structured content).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]
PINNED = ROOT / "tests" / "support" / "npm"
INSTALL = ROOT / ".mcp-servers"
SERVER_MEMORY = "@modelcontextprotocol/server-memory"
#: ``npm ci``'s arguments, as ``.ci/run`` gives them.
NPM_CI = ("ci", "--ignore-scripts", "--no-audit", "--no-fund")


def pinned_version(package: str) -> str:
    """The version ``tests/support/npm/package.json`` pins for ``package``."""
    return str(json.loads((PINNED / "package.json").read_text())["dependencies"][package])


def _installed_version(package: str) -> str | None:
    manifest = INSTALL / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _fresh() -> bool:
    lock = INSTALL / "package-lock.json"
    return (lock.is_file() and lock.read_bytes() == (PINNED / "package-lock.json").read_bytes()
            and _installed_version(SERVER_MEMORY) == pinned_version(SERVER_MEMORY))


def install() -> None:
    """``npm ci`` of the pinned servers into ``.mcp-servers/`` (what ``.ci/run`` does)."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"node is installed but npm is not: install npm, or run `npm "
                    f"{' '.join(NPM_CI)}` in {INSTALL} with tests/support/npm/package*.json "
                    "copied there", pytrace=False)
    INSTALL.mkdir(exist_ok=True)
    with FileLock(str(INSTALL / ".install.lock")):  # inside the git-ignored folder
        if _fresh():
            return
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(PINNED / name, INSTALL / name)
        done = subprocess.run([npm, *NPM_CI], cwd=INSTALL, capture_output=True, text=True,
                              timeout=600, check=False)
        if done.returncode != 0 or not _fresh():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            pytest.fail(f"`npm {' '.join(NPM_CI)}` in {INSTALL} failed ({tail[0]}); run it by "
                        "hand (.ci/run does) and retry", pytrace=False)


def server_memory() -> tuple[str, list[str]]:
    """The command that starts the pinned ``server-memory`` over stdio: ``(node, [entry])``.

    Skips the test when ``node`` is not on PATH; installs the pinned version when missing."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH: the real @modelcontextprotocol/server-memory needs "
                    "Node 18+ (CI has it)")
    if not _fresh():
        install()
    entry = INSTALL / "node_modules" / SERVER_MEMORY / "dist" / "index.js"
    return node, [str(entry)]
