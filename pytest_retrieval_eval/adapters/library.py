"""The door to a library an adapter drives: whether it is installed (else one line naming the
extra), whether its version lies in the range the adapter was tested with (else a warning
line), and its exceptions as one line with their type and message.

The ranges here are the extras' own (pyproject.toml ``[mem0]``, ``[llamaindex]``,
``[langchain]``); a test keeps the two equal.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import warnings
from collections.abc import Mapping
from typing import Any

from ..errors import LibraryWarning, RetrievalEvalError, RetrieverError, one_line

__all__ = ["RUN", "TESTED", "ChunkingStore", "check_embedder", "check_library",
           "expect_query", "library_error", "user_class"]

#: Per adapter: its extra's distributions, the module each provides, the tested range.
TESTED: Mapping[str, tuple[tuple[str, str, str], ...]] = {
    "langchain": (("langchain-core", "langchain_core", ">=1.0,<2"),
                  ("langchain-text-splitters", "langchain_text_splitters", ">=1.0,<2")),
    "llamaindex": (("llama-index-core", "llama_index.core", ">=0.14,<0.15"),),
    "mem0": (("mem0ai", "mem0", ">=2.2,<2.3"), ("qdrant-client", "qdrant_client", ">=1.12,<2")),
}

_warned: set[str] = set()


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken one
        return False


def check_library(adapter: str) -> dict[str, str]:
    """The installed versions of ``adapter``'s distributions (``{"langchain-core": "1.8.3",
    ...}``), read without importing them; :class:`RetrievalEvalError` (one line naming the
    extra) when one is missing; a :class:`LibraryWarning` line, once per process and
    distribution, when a version lies outside the tested range."""
    from packaging.specifiers import SpecifierSet  # pytest's own dependency
    from packaging.version import InvalidVersion, Version

    versions: dict[str, str] = {}
    for dist, module, tested in TESTED[adapter]:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = None
        if version is None or not _installed(module):
            raise RetrievalEvalError(
                f"retriever {adapter!r} needs {dist}, which is not installed; install the "
                f"extra: pip install 'pytest-retrieval-eval[{adapter}]'")
        versions[dist] = version
        try:
            inside = Version(version) in SpecifierSet(tested)
        except InvalidVersion:
            inside = False
        if not inside and dist not in _warned:
            _warned.add(dist)
            warnings.warn(LibraryWarning(
                f"{adapter}: {dist} {version} is outside the tested range {tested}; its "
                f"numbers may differ: pip install 'pytest-retrieval-eval[{adapter}]' for a "
                "tested one"), stacklevel=2)
    return versions


def library_error(name: str, where: str, exc: BaseException) -> RetrievalEvalError:
    """A library's exception as the item's one line, its type and message named; the
    plugin's own errors (``persona.embed`` under ``--no-model``, say) pass as they are."""
    if isinstance(exc, RetrievalEvalError):
        return exc
    return RetrieverError(f"{name}: {where}: the library raised {type(exc).__name__}: "
                          f"{one_line(exc, 300)}")


RUN = "run"
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def user_class(adapter: str, path: str) -> Any:
    """The class ``pkg.module.Class`` names (imported now); one line when it cannot be."""
    import importlib

    module, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except Exception as exc:  # the user's module: any failure is theirs to fix
        raise RetrievalEvalError(
            f"retriever {adapter!r}: embedder {path!r} cannot be loaded ({type(exc).__name__}: "
            f"{exc}); name an importable class as +embedder:pkg.module.Class, or leave "
            "+embedder out for the run's model") from None


def check_embedder(adapter: str, embedder: object) -> str:
    """``run`` or a dotted class path, else one line."""
    if embedder == RUN or (isinstance(embedder, str) and _DOTTED.fullmatch(embedder)):
        return str(embedder)
    raise RetrievalEvalError(
        f"retriever {adapter!r}: embedder {embedder!r} is neither 'run' (the run's model) nor "
        "a class path pkg.module.Class")


class ChunkingStore:
    """What the chunking adapters (``langchain``, ``llamaindex``) share: their library
    checked, ``+chunk_size:`` above ``+chunk_overlap:``, ``+embedder:`` read, and the
    config the report names (the knobs and the library's versions)."""

    library = ""

    def __init__(self, chunk_size: int, chunk_overlap: int, embedder: str, name: str) -> None:
        versions = check_library(self.library)
        self.name = name
        if chunk_overlap >= chunk_size:
            raise RetrievalEvalError(
                f"retriever {name!r}: chunk_overlap {chunk_overlap} is not below chunk_size "
                f"{chunk_size}; give a smaller +chunk_overlap")
        self.chunk_size, self.chunk_overlap = chunk_size, chunk_overlap
        self.embedder = check_embedder(name, embedder)
        self.needs_vectors = self.embedder == RUN
        self.config: dict[str, Any] = {"embedder": self.embedder, "chunk_size": chunk_size,
                                       "chunk_overlap": chunk_overlap, **versions}


def expect_query(name: str, embedding: Any, question: str, vector: Any,
                 question_id: str) -> None:
    """Hand the run's query vector to the library's embedder (``embedding.expect``), so
    the library embeds the question with the run's model; one line when it has none."""
    if vector is None:
        raise RetrieverError(f"{name}: question {question_id} has no query vector; run the "
                             "model lane once")
    embedding.expect(question, vector)
