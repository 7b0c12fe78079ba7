"""Asking a retriever for a pair's rankings, as the run scores them.

:func:`rank_per_k` gives the ranking each cut-off k is scored on, and (for a retriever that
fuses lists, :func:`.diagnostics.fused_lists`) the lists fused by the call that gave it. Most
retrievers rank once at the largest k. A ``limit_sensitive`` one (vipune's hybrid search,
whose candidate pool grows with the limit) is asked once per distinct pool size, with the
largest k of that pool, exactly as a caller asking vipune for k results would see them.
Under LongMemEval's protocol, :func:`rank_all` ranks every item once. :func:`check_haystack`
refuses a ranking holding an id outside the pair's haystack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import vipune
from ..errors import RetrieverError
from ..scoring.diagnostics import fused_lists
from ..scoring.metrics import dedupe
from .base import Persona, Query, Retriever

__all__ = ["check_haystack", "rank_all", "rank_per_k"]


def rank_per_k(retriever: Retriever, persona: Persona, query: Query, ks: Sequence[int],
               ) -> tuple[dict[int, list[str]], dict[int, Mapping[str, Sequence[str]]]]:
    """The ranking of each cut-off (deduplicated, at most k ids), and the fused lists."""
    if getattr(retriever, "limit_sensitive", False):
        groups: dict[int, list[int]] = {}
        for k in ks:
            groups.setdefault(vipune.candidate_pool(k), []).append(k)
    else:
        groups = {0: list(ks)}
    out: dict[int, list[str]] = {}
    fused: dict[int, Mapping[str, Sequence[str]]] = {}
    for group in groups.values():
        limit = max(group)
        ranked = dedupe(str(x) for x in retriever.rank(persona, query, limit))[:limit]
        out.update(dict.fromkeys(group, ranked))
        lists = fused_lists(retriever)
        if lists is not None:
            fused.update(dict.fromkeys(group, lists))
    return out, fused


def rank_all(retriever: Retriever, persona: Persona, query: Query, ks: Sequence[int],
             n: int) -> dict[int, list[str]]:
    """LongMemEval's protocol: every one of the ``n`` corpus items ranked, repeats kept, the
    same ranking for every k (its turn metrics grow k past the cut-off)."""
    whole = [str(x) for x in retriever.rank(persona, query, n)]
    return dict.fromkeys(ks, whole)


def check_haystack(question_id: str, rankings: Mapping[int, Sequence[str]],
                   session_ids: Sequence[str]) -> None:
    """Refuse (one :class:`RetrieverError` line) a ranking holding an id that is not one of
    the pair's sessions: another persona's store, or a retriever's bug, is never scored."""
    rankable = set(session_ids)
    for ranked in rankings.values():
        strangers = [x for x in ranked if x not in rankable]
        if strangers:
            raise RetrieverError(
                f"question {question_id}: the ranking holds {strangers[0]!r}"
                f"{f' and {len(strangers) - 1} more id(s)' if len(strangers) > 1 else ''}"
                f", not a session of this question's haystack "
                f"({len(session_ids)} sessions); a retriever must rank only "
                f"persona.session_ids"
            )
