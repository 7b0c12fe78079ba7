"""The run's column and store naming: which column (summary row, JSON ``retriever``) each
retriever selector fills.

A selector's column is its retriever's own ``name`` where that is usable and free, else the
selector. The custom fixture's retriever, or the several stores it may return, are named as
they are first used; a ``cmd:`` retriever learns its name as it runs (its hello). The run's
:class:`~pytest_retrieval_eval.run.session.EvalSession` holds one :class:`Columns`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config.options import BUILTIN_RETRIEVERS, COMMAND_PREFIX, CUSTOM_RETRIEVER, MCP_PREFIX
from ..errors import DataError
from ..reporting.report import PairResult
from ..retrievers.command_selector import command_name
from ..retrievers.loader import UserRetriever, usable_name
from ..retrievers.variants import is_variant


def stores_in_place(names: Sequence[str], selectors: Sequence[str]) -> tuple[str, ...]:
    """The run's selectors with a conftest's named stores (``pytest_retrieval_eval_retrievers``)
    in the place of ``custom``; :class:`DataError` (one line) for a name given twice, or that
    another retriever of the run has."""
    others = [r for r in selectors if r != CUSTOM_RETRIEVER]
    clash = next((n for i, n in enumerate(names) if n in names[:i] or n in others
                  or n in BUILTIN_RETRIEVERS), None)
    if clash is not None:
        raise DataError(
            f"store name {clash!r} is given twice (by pytest_retrieval_eval_retrievers, "
            "or as another retriever of the run); give each store a name of its own")
    where = selectors.index(CUSTOM_RETRIEVER)
    listed = list(selectors)
    listed[where:where + 1] = names
    return tuple(listed)


@dataclass
class Columns:
    """Every selector's column, the recording tests' columns and the custom retriever's."""

    #: Every selector's column (its retriever's ``name`` where usable and free).
    by_selector: dict[str, str] = field(default_factory=dict)
    #: Recording tests' columns: node id -> retriever name (record_columns.column_names).
    record: dict[str, str] = field(default_factory=dict)
    #: The custom retriever's own name, once an item has used it (its column and JSON name).
    custom_name: str | None = None
    #: Every column the custom fixture's stores filled (it may return several), in order.
    custom_names: list[str] = field(default_factory=list)

    def name_all(self, selectors: Sequence[str], users: Mapping[str, UserRetriever],
                 built: Mapping[str, Any]) -> None:
        """Each selector's column: its retriever's ``name`` when that is usable and no
        other retriever's selector, column or a built-in; else the selector. ``users``: the
        user retrievers, described; ``built``: the built-in ones, built. A ``cmd:NAME=…``
        selector's NAME is its column, or :class:`DataError` (one line) where it is taken."""
        taken = {*selectors, *BUILTIN_RETRIEVERS, CUSTOM_RETRIEVER}
        columns: dict[str, str] = {}
        for selector in selectors:
            user = users.get(selector)
            given = command_name(selector) if selector.startswith(COMMAND_PREFIX) else None
            if selector.startswith(MCP_PREFIX):  # mcp:NAME=SERVER; a built-in's name is free
                given = usable_name(getattr(built.get(selector), "name", None))  # unless run
                if given == selector:
                    given = None
                elif given is not None and given in BUILTIN_RETRIEVERS \
                        and given not in selectors and given not in columns.values():
                    columns[selector] = given
                    continue
            if given is not None:  # cmd:NAME=COMMAND: named up front, before it runs
                if given in taken or given in columns.values():
                    raise DataError(
                        f"retriever '{selector}': the name {given!r} is taken (a built-in, or "
                        "another retriever's name or column of the run); give the store a "
                        "name of its own: cmd:OTHER_NAME=COMMAND")
                columns[selector] = given
                continue
            if user is not None:  # its name read without building it ("Class+ef:10" too)
                own = user.name
            else:
                own = usable_name(getattr(built.get(selector), "name", None))
            free = own is not None and (own == selector or (
                own not in taken and own not in columns.values()))
            columns[selector] = own if free and own is not None else selector
        self.by_selector = columns

    def column(self, selector: str) -> str:
        return self.by_selector.get(selector, selector)

    def named_late(self, selector: str, retriever: Any, selectors: Sequence[str]) -> str:
        """The column of a retriever that learns its ``name`` as it runs (``cmd:``, from its
        hello): that name where it is usable and free, else the selector."""
        own = usable_name(getattr(retriever, "name", None))
        taken = {*selectors, *BUILTIN_RETRIEVERS, CUSTOM_RETRIEVER, *self.record.values(),
                 *(c for s, c in self.by_selector.items() if s != selector)}
        if own is not None and own != selector and own not in taken:
            self.by_selector[selector] = own
            return own
        return selector

    def _taken(self, selectors: Sequence[str]) -> set[str]:
        """The names a custom store cannot have: the run's retrievers, columns and recording
        tests', the built-ins."""
        return {*selectors, *self.record.values(), *BUILTIN_RETRIEVERS,
                *self.by_selector.values()}

    def custom_column(self, custom: Any, selectors: Sequence[str]) -> str:
        """The custom retriever's column: its own ``name`` when that is free (no other
        retriever or recording test of the run has it), else ``custom``."""
        own = getattr(custom, "name", None)
        if isinstance(own, str) and own.strip() and own == own.strip() \
                and own not in self._taken(selectors) and "," not in own \
                and not is_variant(own):
            return own
        return CUSTOM_RETRIEVER

    def custom_stores(self, value: Any, selectors: Sequence[str]) -> list[tuple[str, Any]]:
        """The custom fixture's value as (column, retriever) pairs: one retriever (its column
        as :meth:`custom_column` names it), or a list (each named by its ``name``) or a
        mapping name -> retriever, each its own column. Raises :class:`DataError` (one line)
        for a store without a usable, free name, or two of one name."""
        if isinstance(value, Mapping):
            named = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            named = [(str(getattr(v, "name", "")), v) for v in value]
        else:
            return [(self.custom_column(value, selectors), value)]
        taken = self._taken(selectors)
        seen: set[str] = set()
        for name, store in named:
            if not callable(getattr(store, "rank", None)):
                raise DataError(f"retrieval_eval_custom_retriever: store {name!r} has no "
                                "rank(persona, query, limit); return retrievers")
            if usable_name(name) is None or name in taken or name in seen:
                raise DataError(
                    f"retrieval_eval_custom_retriever: store name {name!r} is "
                    f"{'given twice' if name in seen else 'not usable or taken'}; give each "
                    "store a name of its own (no ',', '+' or control characters, none of "
                    "the run's retrievers)")
            seen.add(name)
        return named

    def display_name(self, retriever: str) -> str:
        """A retriever's column: the custom retriever's own name once known."""
        if retriever == CUSTOM_RETRIEVER:
            return self.custom_name or retriever
        return self.column(retriever)

    def listed(self, selectors: Sequence[str]) -> list[str]:
        """The run's retrievers by column, in order (the custom fixture's stores in its
        place), for the report's header."""
        return [name for r in selectors for name in (
            self.custom_names or [r] if r == CUSTOM_RETRIEVER else [self.column(r)])]

    def learn(self, result: PairResult) -> None:
        """What a scored result tells of the names: the custom retriever's own (and each of
        its stores'), a ``cmd:`` retriever's as it ran."""
        if result.get("selector") == CUSTOM_RETRIEVER:
            self.custom_name = self.custom_name or str(result["retriever"])
            if result["retriever"] not in self.custom_names:
                self.custom_names.append(str(result["retriever"]))
        selector = result.get("selector")
        if isinstance(selector, str) and selector.startswith(COMMAND_PREFIX) and \
                self.by_selector.get(selector, selector) == selector:
            self.by_selector[selector] = str(result["retriever"])  # named as it ran (cmd:)
