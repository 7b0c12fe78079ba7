"""The Retriever protocol and the built-in retrievers, one module per family.

A retriever ranks a persona's memory rows (session ids) for one query. Built-ins:

``hybrid``    vipune's ``search_hybrid`` (reference: semantic in numpy + FTS5 on the persona's
              store, RRF k = 25, recency 0) - the measured path, model-free lane.
``semantic``  vipune's ``Database::search`` (cosine scan, stable ties).
``fts``       vipune's ``Database::search_bm25`` (FTS5 bm25 on the persona's store).
``bm25``      LongMemEval's own baseline, ``rank_bm25.BM25Okapi`` over ``text.split()``,
              re-implemented vectorised (same floats, same ranking, several times faster).
              Under ``--retrieval-eval-protocol longmemeval`` it is LongMemEval's flat-bm25
              itself (``LongMemEvalBM25Retriever``: ``split(" ")``, numpy's argsort ties).
``oracle``    gold first, then the rest: a pipeline self-check (recall 1 when gold is present).
``vipune``    the real vipune binary, driven through its command line on the persona's store.

User retrievers are loaded from ``"package.module:attr"`` (:func:`load_dotted`); a TREC run
file's rankings from ``"run:PATH"`` (``trec_run``); ``RRF([...], k=60, name=None)`` fuses any
stores by vipune's RRF rule (``fusion``). Built-ins
never return duplicates; a user retriever's duplicates are left to ``metrics``.

Modules: ``base`` (Persona, Query, Retriever), ``reference`` (hybrid, semantic, fts),
``bm25``, ``oracle``, ``vipune_binary``, ``loader`` (names and dotted paths), ``variants``
(the what-if name grammar) and ``whatif`` (the what-if retrievers), ``terms`` (bm25's saved
term counts), ``trec_run`` (run files), ``row_facts`` (explain's per-row scores and facts).
The names below load their module on first use, so ``variants`` (which the option
validators read) is importable without numpy.

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import LazyTexts, Memory, Persona, Query, Retriever
    from .bm25 import BM25Retriever, DocTermCache, LongMemEvalBM25Retriever
    from .bm25_index import BM25Index
    from .fusion import RRF
    from .loader import REGISTRY, FunctionRetriever, get_retriever, load_dotted
    from .oracle import OracleRetriever
    from .reference import FtsRetriever, HybridRetriever, SemanticRetriever
    from .terms import DocTerms
    from .vipune_binary import VipuneBinaryRetriever, check_compatible, resolve_vipune_binary

#: Each public name and the module that defines it.
_HOMES: dict[str, str] = {
    "LazyTexts": "base",
    "Memory": "base",
    "Persona": "base",
    "Query": "base",
    "Retriever": "base",
    "BM25Index": "bm25_index",
    "BM25Retriever": "bm25",
    "DocTermCache": "bm25",
    "LongMemEvalBM25Retriever": "bm25",
    "REGISTRY": "loader",
    "FunctionRetriever": "loader",
    "get_retriever": "loader",
    "load_dotted": "loader",
    "OracleRetriever": "oracle",
    "RRF": "fusion",
    "FtsRetriever": "reference",
    "HybridRetriever": "reference",
    "SemanticRetriever": "reference",
    "DocTerms": "terms",
    "VipuneBinaryRetriever": "vipune_binary",
    "check_compatible": "vipune_binary",
    "resolve_vipune_binary": "vipune_binary",
}

__all__ = [
    "REGISTRY",
    "RRF",
    "BM25Index",
    "BM25Retriever",
    "DocTermCache",
    "DocTerms",
    "FtsRetriever",
    "FunctionRetriever",
    "HybridRetriever",
    "LazyTexts",
    "LongMemEvalBM25Retriever",
    "Memory",
    "OracleRetriever",
    "Persona",
    "Query",
    "Retriever",
    "SemanticRetriever",
    "VipuneBinaryRetriever",
    "check_compatible",
    "get_retriever",
    "load_dotted",
    "resolve_vipune_binary",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Looked up each time, never cached here: a module dropped from sys.modules (pytester's
    # in-process runs restore the modules they found) is then imported again, and every name
    # comes from the module that is current, as an eager import would have it.
    return getattr(importlib.import_module(f".{home}", __name__), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
