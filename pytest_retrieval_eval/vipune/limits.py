"""vipune's release, limits and input checks, with vipune's own messages.

``src/memory/store.rs`` (search limit, input length), ``src/sqlite/search.rs`` and
``src/temporal.rs`` (recency weight), ``src/memory/search.rs`` (the hybrid candidate pool),
``src/config/mod.rs`` (the model). Also the ranked-row type every search here returns.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import RetrievalEvalError

__all__ = [
    "MAX_CANDIDATE_POOL",
    "MAX_INPUT_LENGTH",
    "MAX_SEARCH_LIMIT",
    "MIN_CANDIDATE_POOL",
    "MODEL_ID",
    "VIPUNE_VERSION",
    "WHITE_SPACE",
    "SearchResult",
    "VipuneInputError",
    "candidate_pool",
    "rust_trim",
    "validate_limit",
    "validate_query",
    "validate_recency",
]

#: The vipune release these rules were read from.
VIPUNE_VERSION = "0.1.8"
#: ``src/memory/store.rs``: the largest ``limit`` a search accepts.
MAX_SEARCH_LIMIT = 10_000
#: ``src/memory/store.rs``: the largest query (and added content), in UTF-8 *bytes*.
MAX_INPUT_LENGTH = 100_000
#: ``src/memory/search.rs``: hybrid candidate pool bounds (pool = limit * 10, clamped).
MIN_CANDIDATE_POOL = 50
MAX_CANDIDATE_POOL = 10_000
#: ``src/config/mod.rs``: the model vipune embeds with.
MODEL_ID = "BAAI/bge-small-en-v1.5"

#: Rust's ``char::is_whitespace`` (Unicode White_Space), used by ``str::trim`` and
#: ``split_whitespace``. Python's ``str.isspace`` differs (it also counts U+001C..U+001F).
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

SearchResult = tuple[str, float]
"""One ranked row: (memory id, score)."""


class VipuneInputError(RetrievalEvalError):
    """vipune would reject this input; ``vipune_message`` is vipune's own error text."""

    def __init__(self, vipune_message: str, fix: str) -> None:
        self.vipune_message = vipune_message
        super().__init__(f"vipune rejects the input: {vipune_message}; {fix}")


def _rust_float(value: float) -> str:
    """Format a float like Rust's ``Display`` for ``f64`` (no exponent, ``2`` not ``2.0``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return np.format_float_positional(value, trim="-")


def validate_limit(limit: int) -> int:
    """``validate_limit``: 1 <= limit <= 10,000, else vipune's message. Returns ``limit``."""
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}")
    limit = int(limit)
    if limit <= 0:
        raise VipuneInputError("Limit must be greater than 0", "ask for at least one result")
    if limit > MAX_SEARCH_LIMIT:
        raise VipuneInputError(
            f"Limit {limit} exceeds maximum allowed ({MAX_SEARCH_LIMIT})",
            f"ask for at most {MAX_SEARCH_LIMIT} results per call",
        )
    return limit


def rust_trim(text: str) -> str:
    """Rust's ``str::trim``: strip Unicode White_Space (not Python's ``isspace`` set)."""
    return text.strip(WHITE_SPACE)


def validate_query(query: str) -> str:
    """``validate_input_length`` on the trimmed query; returns the trimmed query.

    Empty (after trimming) -> "Input cannot be empty"; more than 100,000 UTF-8 bytes ->
    "Input too long: N characters (max: 100000)" (vipune says characters, counts bytes).
    """
    trimmed = rust_trim(query)
    if not trimmed:
        raise VipuneInputError("Input cannot be empty", "give a non-blank query")
    size = len(trimmed.encode("utf-8", "surrogatepass"))
    if size > MAX_INPUT_LENGTH:
        raise VipuneInputError(
            f"Input too long: {size} characters (max: {MAX_INPUT_LENGTH})",
            f"shorten the query to at most {MAX_INPUT_LENGTH} UTF-8 bytes",
        )
    return trimmed


def validate_recency(weight: float) -> float:
    """``validate_recency_weight``: 0.0 <= w <= 1.0 (NaN rejected)."""
    w = float(weight)
    if not 0.0 <= w <= 1.0:
        raise VipuneInputError(
            f"Invalid recency weight: {_rust_float(w)} (must be between 0.0 and 1.0)",
            "use a recency weight between 0 and 1",
        )
    return w


def candidate_pool(limit: int) -> int:
    """Hybrid candidate pool: ``limit * 10`` clamped to [50, 10,000]."""
    return min(max(limit * 10, MIN_CANDIDATE_POOL), MAX_CANDIDATE_POOL)
