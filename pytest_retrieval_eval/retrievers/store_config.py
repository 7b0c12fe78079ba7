"""A store's configuration, recorded with its numbers (issue 37, item 3).

A store may declare ``config``: a small JSON-able mapping of what sets what it measures (an
index's ``ef`` and ``M``, a model's name, a chunk size). In Python it is an attribute of the
retriever (a class attribute, or set in ``__init__``); a ``cmd:`` store gives it as the
``"config"`` object of its hello answer. A dotted path's ``+key:value`` arguments are part of
it (typed as :func:`.variants.parse_keywords` types them); where the store declares the same
key, the store's value is recorded (it says what it runs).

:func:`read_config` reads and checks it where the store ranks (after its first call, so a
``cmd:`` store has said hello); the pair's result carries it to the controller, where the
report keeps one per retriever (``config`` in the JSON). Bad config is one line: not a
mapping, a key that is not a string, a value JSON cannot hold (a NaN, an object), nested
deeper than :data:`MAX_DEPTH`, or more than :data:`MAX_CONFIG_BYTES` bytes of JSON.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from typing import Any

from ..errors import RetrieverError
from .variants import VariantError, parse_keywords, split_dotted

__all__ = ["MAX_CONFIG_BYTES", "MAX_DEPTH", "check_config", "config_json", "read_config"]

#: The most bytes of compact JSON a store's config may take.
MAX_CONFIG_BYTES = 2048
#: The deepest nesting of mappings and lists a config may hold.
MAX_DEPTH = 8

_FIX = ("give config as a small mapping of names to numbers, strings, booleans, null, "
        "or lists and mappings of those, e.g. config = {'ef': 64, 'M': 16}")


def _checked(value: object, where: str, depth: int) -> Any:
    """``value`` as plain JSON data, or the reason it is not (a ValueError naming ``where``)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{where} nests deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):  # numpy's integers too
        whole = int(value)
        if not -(1 << 63) <= whole < (1 << 64):  # JSON readers hold 64 bits (issue 43.14)
            bits = whole.bit_length()
            raise ValueError(f"{where} is an integer of {bits:,} bits, past 64 bits; record "
                             "it as a string")
        return whole
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise ValueError(f"{where} is {value!r}, which JSON cannot hold")
        return float(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has the key {key!r}, not a string")
            out[key] = _checked(item, f"{where}[{key!r}]", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_checked(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise ValueError(f"{where} is of type {type(value).__name__}, which JSON cannot hold")


def config_json(config: Mapping[str, Any]) -> str:
    """The compact JSON a config is measured in (its size bound), keys in the given order."""
    return json.dumps(config, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def check_config(value: object, who: str, *, bounded: bool = True) -> dict[str, Any]:
    """``value`` as a plain JSON mapping, or :class:`RetrieverError` (one line naming
    ``who``) when it is not a mapping, not JSON-able or too large. ``bounded=False``: the
    plugin's own record (``RRF``'s of its parts, each part's config checked as its own),
    held to no size or depth of a user's config."""
    if not isinstance(value, Mapping):
        raise RetrieverError(f"{who}: config is a {type(value).__name__}, not a mapping; {_FIX}")
    try:
        plain = _checked(value, "config", 0 if bounded else -(1 << 30))
    except ValueError as exc:
        raise RetrieverError(f"{who}: {exc}; {_FIX}") from None
    size = len(config_json(plain).encode("utf-8"))
    if bounded and size > MAX_CONFIG_BYTES:
        raise RetrieverError(
            f"{who}: config is {size} bytes of JSON, over {MAX_CONFIG_BYTES}; record only the "
            "parameters that set what is measured (a long value, a file's contents or a "
            "vocabulary does not belong there)")
    return dict(plain)


def read_config(retriever: object, selector: str = "") -> dict[str, Any] | None:
    """The config the run records for ``retriever`` (None: it has none): its ``config``
    attribute, with a dotted ``selector``'s ``+key:value`` arguments under it."""
    name = getattr(retriever, "name", None)
    who = f"retriever {name if isinstance(name, str) and name else selector!r}"
    arguments: dict[str, Any] = {}
    path, rest = split_dotted(selector)
    if rest and ":" in path and not selector.startswith(("cmd:", "run:")):
        try:
            arguments = parse_keywords(selector)
        except VariantError:  # the loader refused it already; nothing to record
            arguments = {}
    declared = getattr(retriever, "config", None)
    if declared is None and not arguments:
        return None
    bounded = getattr(type(retriever), "config_is_record", False) is not True
    own = {} if declared is None else check_config(declared, who, bounded=bounded)
    return check_config({**arguments, **own}, who, bounded=bounded)
