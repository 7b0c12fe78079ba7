"""A ``cmd:`` store's answers read (:mod:`.command`): a rank answer's ids, scores and facts
checked, a memory store's memories, and a session's turns read back from its text.

Every id of an answer, past the limit too, must be one of the persona's sessions; the ranking
is read to the ``limit``-th distinct id as a Python store's is. A malformed answer fails only
its item (:class:`RetrieverError`, one line); the store goes on serving.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from typing import Any

from ..boundary.scores import parse_score
from ..data.json_stream import MAX_DEPTH, _NestingGuard, _TooDeep
from ..errors import RetrieverError, one_line
from .base import Memory, Persona
from .memories import memories_from_json
from .ranked_output import read_distinct

__all__ = ["LineRefused", "hello_fault", "memories_answer", "parse_answer_line",
           "ranking_answer", "turns_of"]

#: The widest integer an answer may hold: 64 bits, as the dataset reader's (a double holds
#: any score; a longer run of digits is no number a store means).
_INT_RANGE = (-(1 << 63), (1 << 64) - 1)
_INT_DIGITS = 20

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


class LineRefused(Exception):
    """An answer line that is JSON no store means: why, in words (the caller names the
    command and the request)."""


def _bounded_int(digits: str) -> int:
    """``json.loads``'s ``parse_int``: an integer within 64 bits, else :class:`LineRefused`
    (read before Python turns the digits into an int: 5000 digits never reach ``int``)."""
    if len(digits.lstrip("-")) <= _INT_DIGITS:
        value = int(digits)
        if _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            return value
    shown = digits if len(digits) <= 24 else f"{digits[:20]}…"
    raise LineRefused(f"an integer of {len(digits.lstrip('-')):,} digits ({shown}), past 64 "
                      "bits; send numbers a 64-bit integer or a double holds")


def parse_answer_line(text: str, raw: bytes) -> object:
    """One answer line's JSON value. Nesting deeper than :data:`.json_stream.MAX_DEPTH`
    levels (the dataset and report readers' bound) is refused before the parser sees it, and
    an integer past 64 bits as it is parsed: :class:`LineRefused`, never a RecursionError or
    an OverflowError later. Anything else that is not JSON: ``ValueError``."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:  # cannot nest deeper: no scan
        return json.loads(text, parse_int=_bounded_int)
    try:
        guard = _NestingGuard(io.BytesIO(raw), 0, limit=MAX_DEPTH)
        while guard.read(1 << 20):
            pass
    except _TooDeep as deep:
        raise LineRefused(f"JSON nested more than {MAX_DEPTH} levels deep (at byte "
                          f"{deep.offset:,}); nest answers at most {MAX_DEPTH} levels"
                          ) from None
    return json.loads(text, parse_int=_bounded_int)


def hello_fault(answer: Mapping[str, Any], encodings: tuple[str, ...]) -> str | None:
    """What is wrong with hello's answer (its name, ``vectors``, ``vector_encoding``), or
    None: a usable name is one line of text without commas (the column's name)."""
    name, vectors = answer.get("name"), answer.get("vectors", False)
    encoding = answer.get("vector_encoding", encodings[0])
    if not isinstance(name, str) or not name.strip() or one_line(name) != name or "," in name:
        return (f"hello's answer {one_line(json.dumps(answer), 120)} needs a \"name\": one "
                "line of text without commas, the column's name")
    if not isinstance(vectors, bool):
        return f"hello's \"vectors\" is {vectors!r}; answer true or false"
    if encoding not in encodings:
        return (f"hello's \"vector_encoding\" is {one_line(json.dumps(encoding), 60)}; answer "
                "one of " + ", ".join(f'"{e}"' for e in encodings))
    return None


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
