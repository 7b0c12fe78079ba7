"""A ``cmd:`` store's answers read (:mod:`.command`): a rank answer's ids, scores and facts
checked, a memory store's memories, and a session's turns read back from its text.

Every id of an answer, past the limit too, must be one of the persona's sessions; the ranking
is read to the ``limit``-th distinct id as a Python store's is. A malformed answer fails only
its item (:class:`RetrieverError`, one line); the store goes on serving.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..boundary.scores import parse_score
from ..errors import RetrieverError, one_line
from .base import Memory, Persona
from .memories import memories_from_json
from .ranked_output import read_distinct

__all__ = ["memories_answer", "ranking_answer", "turns_of"]

_ROLE_LINE = re.compile(r"^(user|assistant|system): ", re.MULTILINE)


def turns_of(text: str) -> list[dict[str, str]]:
    """A session's turns read back from its rendered text (``pairs.render_session``): the
    fallback when the persona carries no ``turns``."""
    starts = [m.start() for m in _ROLE_LINE.finditer(text)]
    if not starts or starts[0] != 0:
        return [{"role": "user", "content": text}] if text else []
    turns = []
    for begin, end in zip(starts, [*starts[1:], len(text) + 1], strict=True):
        role, _, content = text[begin:end - 1].partition(": ")
        turns.append({"role": role, "content": content})
    return turns


def memories_answer(answer: Mapping[str, Any], selector: str,
                    question_id: str) -> list[Memory]:
    """A ``{"memories": [...]}`` answer as memories, all of them (the harness reads them
    until they cover the limit's sessions, and checks their provenance)."""
    where = f"{selector}: question {question_id}: the rank answer"
    if "ids" in answer:
        raise RetrieverError(f"{where} holds both \"ids\" and \"memories\"; answer "
                             "one of them")
    return memories_from_json(answer["memories"], where)


def ranking_answer(answer: Mapping[str, Any], persona: Persona, selector: str,
                   question_id: str, limit: int) -> tuple[
        list[str], list[tuple[str, float]] | None, dict[str, Mapping[str, object]] | None]:
    """The answer's ids up to the ``limit``-th distinct one (repeats kept: the ranking
    drops them and counts them, :func:`.ranking.rank_per_k`), every id checked to be the
    persona's; its scores (every id's: the retriever's ``last_scores``) and facts."""
    where = f"{selector}: question {question_id}: the rank answer"
    ids = answer.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise RetrieverError(f"{where} has no \"ids\" list of strings; answer "
                             "{\"ids\": [\"session id\", ...]}")
    _check_persona_ids(ids, persona, where)
    scores = answer.get("scores")
    facts = answer.get("facts")
    kept_facts: dict[str, Mapping[str, object]] | None = None
    if facts is not None:
        if not isinstance(facts, list) or len(facts) != len(ids):
            raise RetrieverError(f"{where}: \"facts\" must be a list as long as \"ids\"")
        kept_facts = {i: f for i, f in zip(ids, facts, strict=True) if isinstance(f, dict)}
    got = read_distinct(ids, selector, question_id, limit, len(persona.session_ids))
    ranked = [str(i) for i in got]
    if scores is None:
        return ranked, None, kept_facts
    read = [parse_score(s) for s in scores] if isinstance(scores, list) else []
    if len(read) != len(ids) or None in read:  # 10**400, a bool: no score (boundary/scores.py)
        raise RetrieverError(f"{where}: \"scores\" must be finite numbers, one per id")
    # Ids past the limit count only for ties at the cut (ranking.rank_per_k).
    return ranked, [(i, float(s)) for i, s in zip(ids, read, strict=True)], kept_facts  # type: ignore[arg-type]


def _check_persona_ids(ids: list[str], persona: Persona, where: str) -> None:
    """Every id of an answer, past the limit too, is one of the persona's sessions: an id
    that does not exist never reaches a ranking, a tie or explain (issue 34.3)."""
    known = set(persona.session_ids)
    strangers = [i for i in ids if i not in known]
    if strangers:
        more = f" and {len(strangers) - 1} more id(s)" if len(strangers) > 1 else ""
        raise RetrieverError(
            f"{where} holds {one_line(strangers[0], 80)!r}{more}, not a session of persona "
            f"{persona.key[:12]} ({len(known)} sessions); answer only ids that its index "
            "request sent")
