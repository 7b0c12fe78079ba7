"""A turn id, one grammar at every door (issue 43.2 and 43.3).

A turn id is ``<session_id>_<n>``: the session id, ``_``, and the turn's 1-based position
``n`` among its session's turns (LongMemEval's numbering, ``src/retrieval/run_retrieval.py``
lines 217 and 222 of xiaowu0162/LongMemEval), written in ASCII digits with no leading zero
and at most :data:`MAX_DIGITS` of them. ``s_01``, Arabic-Indic or fullwidth digits, ``s_²``
and 5000-digit numbers are not turn ids: Python's ``str.isdigit`` and ``int`` read them, but
a turn id is compared as a string by ``turn_recall`` (the gold's are written by this
grammar), so each is refused where it enters.

:func:`parse_turn_id` is that reading: the provenance check of a memory (Python, ``cmd:`` and
``run:`` stores alike), the token counter and explain all ask it which turn an id names.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["GRAMMAR", "MAX_DIGITS", "TurnId", "format_turn_id", "parse_turn_id"]

#: A turn number has at most this many digits (no session holds a billion turns).
MAX_DIGITS = 9
#: The grammar in words, for the one line that refuses an id.
GRAMMAR = ("'<session_id>_<n>' with n the turn's position from 1, in ASCII digits without a "
           "leading zero")

_TURN = re.compile(rf"(.+)_([1-9][0-9]{{0,{MAX_DIGITS - 1}}})", re.ASCII | re.DOTALL)


class TurnId(NamedTuple):
    """A parsed turn id: its session and its 1-based turn number."""

    session: str
    number: int


def parse_turn_id(value: object) -> TurnId | None:
    """``value`` as a turn id, or None where it is not a string of the grammar."""
    if type(value) is not str:
        return None
    m = _TURN.fullmatch(value)
    if m is None:
        return None
    return TurnId(m.group(1), int(m.group(2)))


def format_turn_id(session: str, number: int) -> str:
    """The id of turn ``number`` (1-based) of ``session``."""
    return f"{session}_{number}"
