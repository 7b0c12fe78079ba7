"""The column each recording test (a user test using ``retrieval_eval_record``) writes.

A test's column is its function's name, with its own parameters (not the pair's) in
brackets: ``test_rank``, ``test_p[good]``. Where two recording tests would share a column (two
files each defining ``test_rank``, or a name a retriever of the run already has), each of them
is named by its node id without the pair, ``tests/a/test_x.py::test_rank``: no ranking is ever
dropped or mixed with another test's. The names are fixed from the collected items, which
every xdist worker collects alike, so ``-n 2`` names the columns as a serial run does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

RECORD_FIXTURE = "retrieval_eval_record"


def _own_params(item: Any, pair_id: str) -> str:
    """The item's parametrization id without the pair's part (``""``: none)."""
    callspec = getattr(item, "callspec", None)
    full = str(getattr(callspec, "id", "") or "")
    if full == pair_id or not full:
        return ""
    if full.startswith(f"{pair_id}-"):
        return full[len(pair_id) + 1:]
    if full.endswith(f"-{pair_id}"):
        return full[: -len(pair_id) - 1]
    return full.replace(f"-{pair_id}-", "-")


def _without_params(nodeid: str) -> str:
    head, bracket, _ = nodeid.partition("[")
    return head if bracket else nodeid


def column_names(items: Iterable[Any], pair_id: Callable[[int], str],
                 taken: Iterable[str]) -> dict[str, str]:
    """Node id -> column name for every recording test among ``items``.

    ``pair_id``: the id the pair parametrization gives the pair at a position
    (``<type>::<question_id>``); ``taken``: names no test may use (the run's retrievers).
    """
    chosen: dict[str, tuple[str, str]] = {}  # nodeid -> (short name, identity)
    for item in items:
        if RECORD_FIXTURE not in getattr(item, "fixturenames", ()):
            continue
        callspec = getattr(item, "callspec", None)
        params = getattr(callspec, "params", {}) or {}
        position = params.get("retrieval_eval_pair")
        own = _own_params(item, pair_id(int(position))) if position is not None else ""
        base = getattr(item, "originalname", None) or item.name
        short = f"{base}[{own}]" if own else base
        identity = _without_params(item.nodeid) + (f"[{own}]" if own else "")
        chosen[item.nodeid] = (short, identity)
    owners: dict[str, set[str]] = {}
    for short, identity in chosen.values():
        owners.setdefault(short, set()).add(identity)
    reserved = set(taken)
    return {nodeid: identity if len(owners[short]) > 1 or short in reserved else short
            for nodeid, (short, identity) in chosen.items()}
