"""Exceptions whose message is the one line a user reads, and :func:`one_line`, which makes
any text (often a multi-line library error) such a line.

Every message names the thing, says what is wrong with it and what to do, on one line.
The plugin turns a :class:`RetrievalEvalError` raised while configuring a run into a
``pytest.UsageError`` (exit code 4); raised while an item runs, it fails that item only.
"""

from __future__ import annotations


class RetrievalEvalError(Exception):
    """A problem the user can fix; ``str(error)`` is one readable line."""


class DataError(RetrievalEvalError):
    """The dataset file (or a named dataset) cannot be used."""


class CacheError(RetrievalEvalError):
    """The vector cache or a prep output is missing, corrupt or from another model."""


class ModelError(RetrievalEvalError):
    """The embedding model cannot be found, downloaded or run."""


class RetrieverError(RetrievalEvalError):
    """A retriever failed for one pair (the item fails; the run goes on)."""


def one_line(text: object, limit: int | None = None) -> str:
    """``str(text)`` with every run of whitespace (newlines included) made one space; longer
    than ``limit`` characters, it is cut to ``limit`` ending in ``...``."""
    line = " ".join(str(text).split())
    if limit is None or len(line) <= limit:
        return line
    return line[: limit - 3] + "..."
