"""A score, one reading at every door (issue 43.5).

A score is a real number (an ``int``, a ``float``, any :class:`numbers.Real` but a ``bool``)
that is finite as a float: ``nan``, the infinities, and an integer too large for a float
(``10**400``) are not scores. A store's ``(id, score)`` pairs, a :class:`Memory`'s score,
``last_scores``, a ``cmd:`` answer's ``"scores"`` and memories all go through
:func:`parse_score`; a ``run:`` file's score field is text (``trec_run._score``) and ends in
the same float.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["is_number", "parse_score"]


def is_number(value: object) -> bool:
    """Whether ``value`` is a real number at all (a bool is not), finite or not: what tells an
    ``(id, score)`` pair from an id."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def parse_score(value: object) -> float | None:
    """``value`` as a finite float, or None where it is not a score."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if not is_number(value):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (OverflowError, ValueError, TypeError):
        return None
    return number if math.isfinite(number) else None
