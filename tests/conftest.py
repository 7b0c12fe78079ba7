"""Fixtures the test wings share (the factories they build from live in ``tests/support/``)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny 8-d ONNX model with its WordPiece ``tokenizer.json``
    (:func:`tests.support.model_factory.make_model_dir`), written once per test process: the
    model prep, cache, Hub and CLI tests embed with. Read it, never write into it.
    Imported here, not at the top: loading this conftest needs no ``onnx`` (the test extra),
    so ``pytest --retrieval-eval --no-model retrieval-eval`` runs at the plugin's root in a
    venv with the plugin alone (issue 48, item 3)."""
    from tests.support.model_factory import make_model_dir

    return make_model_dir(tmp_path_factory.mktemp("tiny-model"), dim=8).path
