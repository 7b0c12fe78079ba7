"""THE vipune reference: every rule of vipune's retrieval path, in one place.

vipune (crate ``vipune``, repository randomm/vipune) is a Rust memory CLI: SQLite rows with
384-d bge-small embeddings plus an FTS5 index, searched semantically, by BM25, or by both fused
with Reciprocal Rank Fusion. The harness measures ``MemoryStore::search_hybrid`` with recency
weight 0. This wing reproduces the v0.1.8 sources rule by rule so that the *ranking* is the
one vipune would return, one module per part of vipune:

- ``limits``: limits and input validation (``src/memory/store.rs``, ``src/sqlite/search.rs``,
  ``src/temporal.rs``), with vipune's messages;
- ``schema``: the storage DDL (``src/sqlite/mod.rs::create_schema``), verbatim, its statements
  and the rows of a project in scan order;
- ``semantic``: ``Database::search``: float64 cosine of float32 values, summed left to right,
  stable sort;
- ``fts``: ``Database::search_bm25``: the word escaping and the exact FTS5 statement, run on
  SQLite (and, not vipune's, for explain: the query words each row matched, FTS5 asked);
- ``hybrid``: ``rrf::rrf_fusion`` with k = 25 and the id tie-break, and ``search_hybrid``'s
  candidate pool, recency decay and truncation;
- ``cli_output``: the ``--json`` search output of the command line (``src/output.rs``);
- ``store``: the per-persona SQLite stores in that schema, content-addressed and reused.
- ``exports``: their copies at ``--retrieval-eval-store-dir``, uniquely named, and the map.

Nothing here embeds text; callers pass the query vector (see ``vectors/embedding.py``). Every
name of the reference is importable from here: ``from pytest_retrieval_eval import vipune``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .fts import (
    FTS_MODES,
    FTS_TOKENIZE,
    MAX_MATCH_WORDS,
    FtsMatch,
    FtsTokenizer,
    escape_fts_query,
    fts_matched,
    fts_search,
    fts_tied_past,
    fts_tokens,
    fts_words,
)
from .hybrid import (
    DECAY_LAMBDA,
    RRF_K,
    HybridParts,
    fuse_lists,
    parse_rfc3339,
    recency_decay,
    rrf_fuse,
    rrf_fuse_many,
    search_hybrid,
    search_hybrid_parts,
)
from .limits import (
    MAX_CANDIDATE_POOL,
    MAX_INPUT_LENGTH,
    MAX_SEARCH_LIMIT,
    MIN_CANDIDATE_POOL,
    MODEL_ID,
    VIPUNE_VERSION,
    WHITE_SPACE,
    SearchResult,
    VipuneInputError,
    candidate_pool,
    rust_trim,
    validate_limit,
    validate_query,
    validate_recency,
)
from .schema import (
    DDL_STATEMENTS,
    FTS_SQL,
    INSERT_SQL,
    SCHEMA_SQL,
    SEMANTIC_SQL,
    Connectable,
    StoreConnection,
    StoredRows,
    load_rows,
    master_sql,
)
from .semantic import (
    EMBEDDING_BLOB_SIZE,
    EMBEDDING_DIM,
    blob_to_vector,
    cosine_similarity,
    semantic_group_order,
    semantic_ranking,
    semantic_search,
    semantic_top,
    vector_to_blob,
)

if TYPE_CHECKING:  # the command line's output: loaded on first use (__getattr__)
    from .cli_output import VipuneOutputError, format_search_json, parse_search_json

#: Names of :mod:`.cli_output`, which only the ``vipune`` binary's retriever uses: a run
#: that reads no vipune output does not load it.
_CLI_OUTPUT = ("VipuneOutputError", "format_search_json", "parse_search_json")

__all__ = [
    "DDL_STATEMENTS",
    "DECAY_LAMBDA",
    "EMBEDDING_BLOB_SIZE",
    "EMBEDDING_DIM",
    "FTS_MODES",
    "FTS_SQL",
    "FTS_TOKENIZE",
    "INSERT_SQL",
    "MAX_CANDIDATE_POOL",
    "MAX_INPUT_LENGTH",
    "MAX_MATCH_WORDS",
    "MAX_SEARCH_LIMIT",
    "MIN_CANDIDATE_POOL",
    "MODEL_ID",
    "RRF_K",
    "SCHEMA_SQL",
    "SEMANTIC_SQL",
    "VIPUNE_VERSION",
    "WHITE_SPACE",
    "Connectable",
    "FtsMatch",
    "FtsTokenizer",
    "HybridParts",
    "SearchResult",
    "StoreConnection",
    "StoredRows",
    "VipuneInputError",
    "VipuneOutputError",
    "blob_to_vector",
    "candidate_pool",
    "cosine_similarity",
    "escape_fts_query",
    "format_search_json",
    "fts_matched",
    "fts_search",
    "fts_tied_past",
    "fts_tokens",
    "fts_words",
    "fuse_lists",
    "load_rows",
    "master_sql",
    "parse_rfc3339",
    "parse_search_json",
    "recency_decay",
    "rrf_fuse",
    "rrf_fuse_many",
    "rust_trim",
    "search_hybrid",
    "search_hybrid_parts",
    "semantic_group_order",
    "semantic_ranking",
    "semantic_search",
    "semantic_top",
    "validate_limit",
    "validate_query",
    "validate_recency",
    "vector_to_blob",
]


def __getattr__(name: str) -> Any:
    if name in _CLI_OUTPUT:  # looked up each time, as retrievers/__init__.py does
        from . import cli_output

        return getattr(cli_output, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_CLI_OUTPUT})
