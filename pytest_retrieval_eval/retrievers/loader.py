"""Retrievers by name: the built-in registry and user retrievers by dotted path."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import RetrievalEvalError, one_line
from .base import Persona, Query, Retriever, _option
from .bm25 import BM25Retriever
from .command import PREFIX as COMMAND_PREFIX
from .command import make_command_retriever
from .oracle import OracleRetriever
from .reference import FtsRetriever, HybridRetriever, SemanticRetriever
from .variants import VariantError, is_variant
from .vipune_binary import VipuneBinaryRetriever
from .whatif import make_variant

__all__ = ["REGISTRY", "FunctionRetriever", "get_retriever", "load_dotted"]


class FunctionRetriever:
    """Wraps a plain function ``(persona, query, limit) -> ids`` as a Retriever."""

    def __init__(self, name: str, fn: Callable[[Persona, Query, int], Sequence[str]]) -> None:
        self.name = name
        self._fn = fn

    def rank(self, persona: Persona, query: Query, limit: int) -> Sequence[str]:
        return self._fn(persona, query, limit)


def _has_rank(obj: object) -> bool:
    return callable(getattr(obj, "rank", None))


def _positional_arity(fn: Callable[..., object]) -> tuple[int, int] | None:
    """(required, maximum) positional parameters; max -1 for *args; None if unknown."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    required = 0
    maximum = 0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            maximum += 1
            if p.default is p.empty:
                required += 1
        elif p.kind is p.VAR_POSITIONAL:
            maximum = -1
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
            return (99, 99)  # a required keyword-only parameter fits neither form
    return required, maximum


def _named(obj: object, default: str) -> Any:
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name:
        with contextlib.suppress(AttributeError, TypeError):
            obj.name = default  # type: ignore[attr-defined]
    return obj


def load_dotted(path: str) -> Retriever:
    """Load a user retriever from ``"package.module:attr"`` (attr may be dotted).

    The attribute may be a class (instantiated with no arguments), an object with ``rank``, a
    no-argument factory returning such an object, or a plain function
    ``(persona, query, limit) -> ids``. Errors are one-line :class:`RetrievalEvalError`.
    """
    module_name, sep, attr_path = path.partition(":")
    if not sep or not module_name or not attr_path:
        raise RetrievalEvalError(
            f"retriever '{path}' is not 'package.module:attr'; "
            "name a module and an attribute, e.g. mypkg.search:MyRetriever"
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is the user's to fix
        msg = one_line(f"{type(exc).__name__}: {exc}")
        raise RetrievalEvalError(
            f"retriever '{path}': cannot import module '{module_name}' ({msg}); "
            "check the module is installed or on sys.path"
        ) from None
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RetrievalEvalError(
                f"retriever '{path}': '{module_name}' has no attribute '{attr_path}'; "
                "check the name after ':'"
            ) from None
    default_name = attr_path.rsplit(".", 1)[-1]
    bad = RetrievalEvalError(
        f"retriever '{path}' is not a Retriever: give a class or object with "
        "rank(persona, query, limit), a no-argument factory, or a function "
        "(persona, query, limit) -> ids"
    )
    try:
        if isinstance(obj, type):
            instance = obj()
            if not _has_rank(instance):
                raise bad
            return _named(instance, default_name)  # type: ignore[no-any-return]
        if _has_rank(obj):
            return _named(obj, default_name)  # type: ignore[no-any-return]
        if callable(obj):
            arity = _positional_arity(obj)
            if arity is not None and arity[0] == 0 and arity[1] in (0,):
                made = obj()
                if not _has_rank(made):
                    raise bad
                return _named(made, default_name)  # type: ignore[no-any-return]
            if arity is None or (arity[0] <= 3 and (arity[1] == -1 or arity[1] >= 3)):
                return FunctionRetriever(default_name, obj)
        raise bad
    except RetrievalEvalError:
        raise
    except Exception as exc:  # a failing constructor or factory is user code
        msg = one_line(f"{type(exc).__name__}: {exc}")
        raise RetrievalEvalError(
            f"retriever '{path}': creating it failed ({msg}); fix its constructor or factory"
        ) from None


def _make_vipune(options: object) -> Retriever:
    binary = _option(options, ("binary", "vipune"), "vipune")
    timeout = _option(options, ("timeout", "vipune_timeout"), 60.0)
    if not isinstance(binary, (str, os.PathLike)):
        raise RetrievalEvalError(f"vipune binary option {binary!r} must be a path or a name")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise RetrievalEvalError(f"vipune timeout option {timeout!r} must be a number")
    return VipuneBinaryRetriever(binary=binary, timeout=float(timeout))


REGISTRY: dict[str, Callable[[object], Retriever]] = {
    "hybrid": lambda options: HybridRetriever(),
    "semantic": lambda options: SemanticRetriever(),
    "fts": lambda options: FtsRetriever(),
    "bm25": lambda options: BM25Retriever(),
    "oracle": lambda options: OracleRetriever(),
    "vipune": _make_vipune,
}
"""Built-in retriever factories by name; each takes the run's options (mapping or object)."""


def get_retriever(name: str, options: object = None) -> Retriever:
    """A built-in retriever by name, a what-if one (``"hybrid+fts:or"``,
    :mod:`pytest_retrieval_eval.retrievers.variants`), or a user one by ``"package.module:attr"``.

    ``"cmd:COMMAND"`` is a store run as a command (:mod:`.command`, docs/cmd-protocol.md).

    ``options``: a mapping or an object (``options.Settings``); the vipune retriever reads
    ``binary``/``vipune`` and ``timeout``/``vipune_timeout`` from it, ``cmd:`` ones
    ``cmd_timeout``, ``cmd_index_timeout`` and ``rootdir`` (the command's folder).
    """
    opts: object = {} if options is None else options
    factory = REGISTRY.get(name)
    if factory is not None:
        return factory(opts)
    if name.startswith(COMMAND_PREFIX):  # "cmd:node store.js": before what-ifs ('+')
        return make_command_retriever(name, opts)
    if is_variant(name):  # "hybrid+rrf_k:60": before dotted paths, which also hold ':'
        try:
            return make_variant(name)
        except VariantError as exc:
            raise RetrievalEvalError(str(exc)) from None
    if ":" in name:
        return load_dotted(name)
    raise RetrievalEvalError(
        f"retriever '{name}' is unknown; choose from {', '.join(sorted(REGISTRY))} "
        "or give 'package.module:attr', 'cmd:COMMAND' (a store in any language) or a "
        "what-if (hybrid+rrf_k:60, fts+mode:or, ...)"
    )
