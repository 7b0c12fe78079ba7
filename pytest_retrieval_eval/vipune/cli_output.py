"""What vipune's command line prints for ``vipune --json search`` (``src/output.rs``), and
the reading of it that the ``vipune`` retriever relies on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..errors import RetrievalEvalError, one_line

__all__ = ["VipuneOutputError", "format_search_json", "parse_search_json"]


class VipuneOutputError(RetrievalEvalError):
    """vipune's ``--json`` search output is not the documented shape."""


def format_search_json(results: Sequence[tuple[str, str, float, str]]) -> str:
    """The ``--json`` search output for (id, content, similarity, created_at) rows.

    serde_json's pretty printer: two-space indent, ``": "`` separators, non-ASCII kept.
    """
    payload = {
        "results": [
            {"id": i, "content": c, "similarity": float(s), "created_at": t}
            for i, c, s, t in results
        ]
    }
    return json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False)


_RESULT_KEYS = frozenset({"id", "content", "similarity", "created_at"})


def parse_search_json(stdout: str | bytes) -> list[str]:
    """Ids, best first, from ``vipune --json search`` output; anything else -> VipuneOutputError.

    The documented shape is ``{"results": [{"id", "content", "similarity", "created_at"}...]}``.
    vipune's JSON error form ``{"error": "..."}`` raises with that message.
    """
    text = stdout.decode("utf-8", "replace") if isinstance(stdout, bytes) else stdout
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VipuneOutputError(
            f"vipune printed output that is not JSON ({exc.msg} at char {exc.pos}): "
            f"{one_line(text, 120)!r}; check the binary is vipune and supports --json"
        ) from None
    if isinstance(payload, dict) and set(payload) == {"error"}:
        raise VipuneOutputError(f"vipune reported an error: {one_line(payload['error'], 300)}")
    if not isinstance(payload, dict) or set(payload) != {"results"}:
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise VipuneOutputError(
            f"vipune --json search output must be an object with only 'results', got {keys}; "
            "check the vipune version (the harness reads v0.1.8 output)"
        )
    results = payload["results"]
    if not isinstance(results, list):
        raise VipuneOutputError(
            "vipune --json search output: 'results' is not a list; check the vipune version"
        )
    ids: list[str] = []
    for n, item in enumerate(results):
        if not isinstance(item, dict) or set(item) != _RESULT_KEYS:
            got = sorted(item) if isinstance(item, dict) else type(item).__name__
            raise VipuneOutputError(
                f"vipune --json search result {n} must have exactly id, content, similarity, "
                f"created_at, got {got}; check the vipune version"
            )
        sim = item["similarity"]
        if (
            not isinstance(item["id"], str)
            or not isinstance(item["content"], str)
            or not isinstance(item["created_at"], str)
            or isinstance(sim, bool)
            or not isinstance(sim, (int, float))
        ):
            raise VipuneOutputError(
                f"vipune --json search result {n} has a field of the wrong type "
                "(id/content/created_at must be strings, similarity a number)"
            )
        ids.append(item["id"])
    return ids
