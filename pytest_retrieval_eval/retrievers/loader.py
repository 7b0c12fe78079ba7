"""Retrievers by name: the built-in registry and user retrievers by dotted path."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import RetrievalEvalError, StopRun, one_line, printable
from .base import MCP_PREFIX, RUN_PREFIX, _option
from .command_selector import PREFIX as COMMAND_PREFIX
from .variants import VariantError, is_variant, parse_keywords, split_dotted

if TYPE_CHECKING:
    from .base import Persona, Query, Retriever

__all__ = ["REGISTRY", "FunctionRetriever", "UserRetriever", "describe_dotted",
           "describe_object", "get_retriever", "is_dotted", "load_dotted"]

#: Selector prefixes that are retrievers of their own, never ``module:attr`` paths.
RESERVED_PREFIXES = (COMMAND_PREFIX, RUN_PREFIX, MCP_PREFIX)


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


def is_dotted(name: str) -> bool:
    """Whether ``name`` is a user retriever's ``module:attr[+key:value...]`` path."""
    head = split_dotted(name)[0]
    return ":" in head and not name.startswith(RESERVED_PREFIXES)


def _resolve(path: str, imports: dict[str, float] | None = None) -> tuple[Any, str, float]:
    """The attribute ``module:attr`` names (the module imported), its last name, and the
    milliseconds of the module's import: measured around this import, the packages it pulls
    in included, and kept in ``imports`` by module, so that every store of one module is
    charged its import (0 when the module was imported before the plugin asked)."""
    module_name, sep, attr_path = path.partition(":")
    if not sep or not module_name or not attr_path:
        raise RetrievalEvalError(
            f"retriever '{path}' is not 'package.module:attr'; "
            "name a module and an attribute, e.g. mypkg.search:MyRetriever"
        )
    imports = {} if imports is None else imports
    fresh = module_name not in sys.modules
    begun = time.perf_counter()
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is the user's to fix
        msg = one_line(f"{type(exc).__name__}: {exc}")
        raise RetrievalEvalError(
            f"retriever '{path}': cannot import module '{module_name}' ({msg}); "
            "check the module is installed or on sys.path (pytest's `pythonpath = .` ini "
            "setting puts the rootdir there)"
        ) from None
    if module_name not in imports:
        imports[module_name] = (time.perf_counter() - begun) * 1000.0 if fresh else 0.0
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RetrievalEvalError(
                f"retriever '{path}': '{module_name}' has no attribute '{attr_path}'; "
                "check the name after ':'"
            ) from None
    return obj, attr_path.rsplit(".", 1)[-1], imports[module_name]


def _is_factory(obj: object) -> bool:
    arity = _positional_arity(obj)  # type: ignore[arg-type]
    return arity is not None and arity[0] == 0 and arity[1] == 0


def _instantiate(path: str, obj: Any, default_name: str, kwargs: dict[str, Any],
                 label: str | None = None) -> Retriever:
    """A retriever from what ``path`` named: a class (called with ``kwargs``), an object with
    ``rank``, a factory (called with ``kwargs``), or a function ``(persona, query, limit)``.
    ``label`` names it in errors (default ``retriever 'PATH'``)."""
    what = label or f"retriever '{path}'"
    bad = RetrievalEvalError(
        f"{what} is not a Retriever: give a class or object with "
        "rank(persona, query, limit), a no-argument factory, or a function "
        "(persona, query, limit) -> ids"
    )
    takes_none = RetrievalEvalError(
        f"retriever '{path}' takes no parameters: only a class or a factory is given "
        "key:value arguments; drop the +key:value parts")
    try:
        if isinstance(obj, type):
            instance = obj(**kwargs)
            if not _has_rank(instance):
                raise bad
            return _named(instance, default_name)  # type: ignore[no-any-return]
        if _has_rank(obj):
            if kwargs:
                raise takes_none
            return _named(obj, default_name)  # type: ignore[no-any-return]
        if callable(obj):
            arity = _positional_arity(obj)
            if arity is not None and arity[0] == 0 and (arity[1] == 0 or kwargs):
                made = obj(**kwargs)
                if not _has_rank(made):
                    raise bad
                return _named(made, default_name)  # type: ignore[no-any-return]
            if kwargs:
                raise takes_none
            if arity is None or (arity[0] <= 3 and (arity[1] == -1 or arity[1] >= 3)):
                return FunctionRetriever(default_name, obj)
        raise bad
    except RetrievalEvalError:
        raise
    except Exception as exc:  # a failing constructor or factory is user code
        msg = one_line(f"{type(exc).__name__}: {exc}")
        raise RetrievalEvalError(
            f"{what}: creating it failed ({msg}); fix its constructor, factory or arguments "
            "(every pair would fail alike, so the run stops here)"
        ) from None


def load_dotted(path: str) -> Retriever:
    """Load a user retriever from ``"package.module:attr"`` (attr may be dotted), with
    optional constructor arguments ``"package.module:Class+key:value+..."``.

    The attribute may be a class (instantiated with the arguments, or none), an object with
    ``rank``, a no-argument factory returning such an object, or a plain function
    ``(persona, query, limit) -> ids``. Errors are one-line :class:`RetrievalEvalError`.
    """
    return describe_dotted(path).build()


def usable_name(name: object) -> str | None:
    """``name`` when it can be a column (a non-empty, stripped string with no ``,`` or
    ``+``: the list separator and the what-if mark, and no control or format character: a
    newline would break the terminal's lines, node ids and Markdown rows), else None."""
    if isinstance(name, str) and name.strip() and name == name.strip() and "," not in name \
            and "+" not in name and name.isprintable():
        return name
    return None


class UserRetriever:
    """A user retriever known before it is built: its name, ``needs_vectors`` and
    ``needs_store``, read from the class (or the object) without calling anything, so the
    xdist controller builds nothing. :meth:`build` makes it, once, where items run.

    A build that fails is a :class:`StopRun` (every pair would fail alike: the run stops at
    the first), and is not tried again in this process."""

    def __init__(self, selector: str, name: str | None, source: object,
                 make: Callable[[], Retriever], import_ms: float = 0.0) -> None:
        self.selector = selector
        #: Milliseconds its module's import took in this process (its start-up's part
        #: before construction); 0 for a hook's store (the conftest imported it).
        self.import_ms = import_ms
        #: The column's name when it is known without building: the class's or object's
        #: ``name`` (a factory's or function's own ``name`` attribute); else None.
        self.name = name
        self.needs_vectors = bool(getattr(source, "needs_vectors", True))
        self.needs_store = bool(getattr(source, "needs_store", False))
        self._make = make
        self._built: Retriever | None = None
        self._failure: StopRun | None = None
        self._startup_ms: float | None = None

    def build(self) -> Retriever:
        if self._built is None:
            if self._failure is not None:
                raise self._failure
            begun = time.perf_counter()
            try:
                self._built = self._make()
            except RetrievalEvalError as exc:
                self._failure = StopRun(str(exc))
                raise self._failure from None
            self._startup_ms = (time.perf_counter() - begun) * 1000.0
        return self._built

    def take_startup(self) -> float | None:
        """The constructor's milliseconds, once (the first item that ranks with it reports
        them as its ``startup``, wherever the build happened); None after that."""
        startup, self._startup_ms = self._startup_ms, None
        return startup

    @property
    def built(self) -> Retriever | None:
        """The retriever if it was built in this process."""
        return self._built


def _static_name(obj: object) -> str | None:
    """A class's or object's own ``name``, read without building anything (None: it has
    none, or it is a factory or a function, whose column stays its selector)."""
    if isinstance(obj, type) or _has_rank(obj):
        return usable_name(getattr(obj, "name", None))
    return usable_name(getattr(obj, "name", None)) if callable(obj) else None


def describe_dotted(selector: str, imports: dict[str, float] | None = None) -> UserRetriever:
    """``module:attr[+key:value...]`` resolved (the module imported) but not built; its
    column is the class's ``name`` (with the arguments as written: ``Chroma+ef:10``).
    ``imports``: the process's module import times (:func:`_resolve`)."""
    path, rest = split_dotted(selector)
    try:
        kwargs = parse_keywords(selector)
    except VariantError as exc:
        raise RetrievalEvalError(str(exc)) from None
    obj, default_name, import_ms = _resolve(path, imports)
    if kwargs and not (isinstance(obj, type) or (
            callable(obj) and not _has_rank(obj) and _is_factory_with_kwargs(obj))):
        raise RetrievalEvalError(
            f"retriever '{selector}' takes no parameters: only a class or a factory is given "
            "key:value arguments; drop the +key:value parts")
    if kwargs:
        _check_arguments(selector, obj, kwargs)
    name = _static_name(obj)
    if name is not None and rest:
        name = f"{name}+{rest}"
    return UserRetriever(selector, name, obj,
                         lambda: _instantiate(selector, obj, default_name, kwargs), import_ms)


def _check_arguments(selector: str, obj: Any, kwargs: dict[str, Any]) -> None:
    """Every ``+key:value`` names a parameter of the class (or factory), checked at start-up
    so a typo is one usage line, not one failure per item. A signature that cannot be read,
    or one taking ``**kwargs``, lets anything through (the constructor says then)."""
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    names = [p.name for p in parameters
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                           inspect.Parameter.KEYWORD_ONLY)]
    unknown = next((key for key in kwargs if key not in names), None)
    if unknown is not None:
        what = getattr(obj, "__qualname__", None) or repr(obj)
        takes = ", ".join(names) if names else "no parameters"
        raise RetrievalEvalError(
            f"retriever '{selector}': {what} takes no argument '{unknown}'; it takes "
            f"{takes}; pass those as module:Class+key:value")


def _is_factory_with_kwargs(obj: object) -> bool:
    arity = _positional_arity(obj)  # type: ignore[arg-type]
    return arity is not None and arity[0] == 0


def describe_object(name: str | None, obj: object, origin: str) -> UserRetriever:
    """One store a conftest named (``pytest_retrieval_eval_retrievers``): a retriever, a
    class, or a no-argument factory; ``name`` (a mapping's key) wins over its own ``name``.
    ``origin`` names where it came from in errors."""
    own = name if name is not None else _static_name(obj)
    column = usable_name(own)
    if column is None:
        raise RetrievalEvalError(
            f"{origin}: a store has no usable name ({printable(repr(own))}); give it a class "
            "attribute name = '...' without ',', '+' or control characters, or return a "
            "mapping name -> store")
    if not (isinstance(obj, type) or _has_rank(obj) or (callable(obj) and _is_factory(obj))):
        raise RetrievalEvalError(
            f"{origin}: store {column!r} is not a Retriever: give a class or object with "
            "rank(persona, query, limit), or a no-argument factory")
    return UserRetriever(column, column, obj, lambda: _instantiate(
        f"{origin}: {column}", obj, column, {}, label=f"{origin}: store {column!r}"))


def _make_vipune(options: object) -> Retriever:
    binary = _option(options, ("binary", "vipune"), "vipune")
    timeout = _option(options, ("timeout", "vipune_timeout"), 60.0)
    if not isinstance(binary, (str, os.PathLike)):
        raise RetrievalEvalError(f"vipune binary option {binary!r} must be a path or a name")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise RetrievalEvalError(f"vipune timeout option {timeout!r} must be a number")
    from .vipune_binary import VipuneBinaryRetriever

    return VipuneBinaryRetriever(binary=binary, timeout=float(timeout))


def _built_in(module: str, attr: str) -> Callable[[object], Retriever]:
    """A factory that builds ``attr`` of this package's ``module``, the module imported on
    the first build (a run imports only the retrievers it names)."""
    def make(options: object) -> Retriever:
        made: Retriever = getattr(importlib.import_module(f".{module}", __package__), attr)()
        return made
    return make


def _adapter(name: str) -> Callable[[object], Retriever]:
    """A memory library's adapter with its defaults (:mod:`..adapters.registry`, imported
    when one is named)."""
    def make(options: object) -> Retriever:
        from ..adapters.registry import make_adapter

        return make_adapter(name, {}, options)
    return make


REGISTRY: dict[str, Callable[[object], Retriever]] = {
    "hybrid": _built_in("reference", "HybridRetriever"),
    "semantic": _built_in("reference", "SemanticRetriever"),
    "fts": _built_in("reference", "FtsRetriever"),
    "bm25": _built_in("bm25", "BM25Retriever"),
    "oracle": _built_in("oracle", "OracleRetriever"),
    "vipune": _make_vipune,
    "langchain": _adapter("langchain"),
    "llamaindex": _adapter("llamaindex"),
    "mem0": _adapter("mem0"),
}
"""Built-in retriever factories by name; each takes the run's options (mapping or object)
and imports its retriever's module on first use."""


def get_retriever(name: str, options: object = None) -> Retriever:
    """A built-in retriever by name, a what-if one (``"hybrid+fts:or"``,
    :mod:`pytest_retrieval_eval.retrievers.variants`), a TREC run file (``"run:PATH"``,
    :mod:`.trec_run`), or a user one by ``"package.module:attr"``.

    ``"cmd:COMMAND"`` is a store run as a command (:mod:`.command`, docs/cmd-protocol.md);
    ``"mcp:COMMAND"`` or ``"mcp:URL"`` a memory server over MCP (:mod:`..mcp`,
    docs/memory-servers.md).

    ``options``: a mapping or an object (``settings.Settings``); the vipune retriever reads
    ``binary``/``vipune`` and ``timeout``/``vipune_timeout`` from it, ``cmd:`` ones
    ``cmd_timeout``, ``cmd_index_timeout`` and ``rootdir`` (the command's folder).
    """
    opts: object = {} if options is None else options
    factory = REGISTRY.get(name)
    if factory is not None:
        return factory(opts)
    if name.startswith(RUN_PREFIX):  # "run:PATH", a TREC run file (before what-ifs: '+')
        from .trec_run import TrecRunRetriever

        return TrecRunRetriever(name[len(RUN_PREFIX):], selector=name)
    if name.startswith(COMMAND_PREFIX):  # "cmd:node store.js": before what-ifs ('+')
        from .command import make_command_retriever

        return make_command_retriever(name, opts)
    if name.startswith(MCP_PREFIX):  # "mcp:python server.py+preset:vipune" (issue 45)
        from ..mcp import make_retriever

        return make_retriever(name, opts)
    if is_variant(name):  # "hybrid+rrf_k:60": before dotted paths, which also hold ':'
        from .whatif import make_variant

        try:
            return make_variant(name, opts)
        except VariantError as exc:
            raise RetrievalEvalError(str(exc)) from None
    if is_dotted(name):
        return load_dotted(name)
    raise RetrievalEvalError(
        f"retriever '{name}' is unknown; choose from {', '.join(sorted(REGISTRY))} "
        "or give 'package.module:attr', run:PATH (a TREC run file), 'cmd:COMMAND' (a "
        "store in any language), 'mcp:COMMAND' (a memory server over MCP) or a what-if "
        "(hybrid+rrf_k:60, fts+mode:or, ...)"
    )
