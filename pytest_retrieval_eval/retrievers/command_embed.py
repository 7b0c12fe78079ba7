"""A ``cmd:`` store's ``{"op": "embed", "texts": [...]}`` request (docs/cmd-protocol.md):
what the plugin answers it with, while it waits for the store's answer to its own request.

The answer is ``{"vectors": [...]}``, one vector per text by the run's model and cache
(``persona.embed``), or ``{"error": reason}`` when the texts cannot be embedded (no vectors in
the run, a text the cache lacks under ``--no-model``): the store is told, so the exchange stays
in step, and the item then fails with that reason. The read loop that serves it is
:meth:`.command.CommandRetriever._ask`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import RetrievalEvalError, one_line

__all__ = ["Embed", "embed_reply", "embed_texts", "is_embed_request"]

#: ``persona.embed``: what an embed request is answered with.
Embed = Callable[[Sequence[str]], np.ndarray]

NO_VECTORS = ("the store asked to embed texts, but this run holds no vectors; run with a "
              "model (a cmd: store is taken to need vectors)")


def is_embed_request(line: Mapping[str, Any]) -> bool:
    """Whether a line from the store is an embed request rather than its answer."""
    return line.get("op") == "embed"


def embed_texts(request: Mapping[str, Any]) -> list[str] | None:
    """The request's texts; None when it holds no ``"texts"`` list of strings."""
    from ..boundary.texts import texts_problem

    texts = request.get("texts")
    if not isinstance(texts, list) or texts_problem(texts) is not None:
        return None  # not a list, a non-str item, a lone surrogate (issue 43.7)
    return texts


def embed_reply(embed: Embed | None, texts: list[str]) -> tuple[dict[str, Any], str | None]:
    """The line answering an embed request, and the one-line reason when it is a refusal."""
    if embed is None:
        return {"error": NO_VECTORS}, NO_VECTORS
    try:
        vectors = np.asarray(embed(texts), dtype=np.float32)
    except RetrievalEvalError as exc:
        reason = one_line(exc, 500)
        return {"error": reason}, reason
    return {"vectors": [[float(x) for x in row] for row in vectors.tolist()]}, None
