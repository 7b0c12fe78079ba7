"""Root conftest for the project's own tests (the plugin itself is loaded via its entry point)."""

from __future__ import annotations

from pathlib import Path

# numpy is loaded before any in-process pytester run snapshots sys.modules: a C extension
# that the snapshot's restore drops cannot be imported again in this process.
import numpy  # noqa: F401
import pytest

pytest_plugins = ["pytester"]


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh plugin cache per test, no network, an empty Hugging Face home."""
    root = tmp_path / "retrieval-cache"
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-empty"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)  # tests in CI: not its summary
    return root
