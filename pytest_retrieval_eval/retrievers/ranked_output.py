"""What a retriever's ``rank`` returned, read to a bound (issue 27.5 and 27.12).

A retriever may return a list, a tuple, any other iterable, or an iterator (a generator, even
an endless one such as ``itertools.cycle(ids)``). The run reads only what it needs:

* under vipune's protocol (asked for ``limit`` ids; the ranking is deduplicated and cut to
  ``limit``): until ``limit`` distinct ids have been read (a memory counts by the sessions
  it covers) and ``limit`` items, and never more than
  ``REPEATS_READ`` x max(``limit``, the persona's size) items in all, so a retriever that
  repeats ids without end stops too (what it repeated is its ranking);
* under LongMemEval's protocol (every corpus position ranked, repeats kept): the persona's
  size, ``n`` items: a ranking of the n corpus items has n positions, and its metrics
  (:mod:`..scoring.longmemeval_metrics`, k grown at most to the corpus size) read no more.

An iterator is consumed no further than that bound; a ranking handed to
``retrieval_eval_record`` is read the same way. ``None``, a string or bytes (whose
characters would be ranked as ids), a mapping, or anything that cannot be iterated is one
:class:`~pytest_retrieval_eval.errors.RetrieverError` line naming the retriever, the question
and what it returned.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Iterable, Mapping

from ..errors import RetrieverError, one_line
from .base import Memory
from .memories import covered

__all__ = ["REPEATS_READ", "ReadItems", "read_all_positions", "read_distinct"]

#: Items read per wanted id at most under vipune's protocol (repeats past that are not read).
REPEATS_READ = 8


def _checked(result: object, name: str, question_id: str,
             verb: str = "rank returned") -> Iterable[object]:
    if isinstance(result, (str, bytes, bytearray, Mapping)) or result is None \
            or not isinstance(result, Iterable):
        shown = one_line(repr(result), 60)
        raise RetrieverError(
            f"{name}: question {question_id}: {verb} {shown} "
            f"({type(result).__name__}), not a list of ids; return a list of session ids, "
            f"or of (id, score) pairs")
    return result


def _ids_of(item: object) -> tuple[str, ...]:
    """The ids an item counts as: a memory the sessions it covers (issue 36: memories are
    read until they cover ``limit`` sessions and number ``limit``), an ``(id, score)`` pair
    its id."""
    if isinstance(item, Memory):
        return covered(item)
    return (_id_of(item),)


def _id_of(item: object) -> str:
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], numbers.Real):
        return str(item[0])
    return str(item)


class ReadItems(list[object]):
    """The items :func:`read_distinct` read; ``cut_at``: the items read when the bound on an
    iterator stopped the read short of ``limit`` distinct ids (None: it was not cut)."""

    cut_at: int | None = None


def read_distinct(result: object, name: str, question_id: str, limit: int,
                  persona_size: int, verb: str = "rank returned") -> ReadItems:
    """The items of ``result`` up to the ``limit``-th distinct id (an ``(id, score)`` pair
    counts by its id, a :class:`.Memory` by the sessions it covers) and at least ``limit``
    items (memories that each cover several sessions: ``memory_recall@k`` is over the first
    k memories; ids and one-session memories hold ``limit`` items by the ``limit``-th
    distinct id). A list or tuple (finite) is read as far as that takes, however long
    (issue 43.4); any other iterable (an iterator, perhaps endless) at most
    ``REPEATS_READ * max(limit, persona_size)`` items, and where that bound stops the read
    short, ``cut_at`` says after how many items."""
    items = _checked(result, name, question_id, verb)
    finite = isinstance(items, (list, tuple))
    cap = REPEATS_READ * max(limit, persona_size, 1)
    out = ReadItems()
    seen: set[str] = set()
    for item in items if finite else itertools.islice(items, cap):
        out.append(item)
        seen.update(_ids_of(item))
        if len(seen) >= limit and len(out) >= limit:
            return out
    if not finite and len(out) == cap:
        out.cut_at = cap
    return out


def read_all_positions(result: object, name: str, question_id: str, n: int,
                       verb: str = "rank returned") -> list[object]:
    """The first ``n`` items of ``result`` (repeats kept)."""
    return list(itertools.islice(_checked(result, name, question_id, verb), max(n, 0)))
