"""``RRF``: any stores fused by vipune's Reciprocal Rank Fusion (issue 37, item 6).

``RRF([faiss, "bm25"], k=60)`` is a retriever of its own: a column, from the conftest hook
(``pytest_retrieval_eval_retrievers``) or the ``retrieval_eval_custom_retriever`` fixture.
Each part is a retriever object or a selector as ``--retrieval-eval-retriever`` spells it
(``"bm25"``, ``"semantic"``, ``"hybrid+fts:or"``, ``"cmd:node store.js"``,
``"pkg.mod:Class+key:value"``; a dotted path is built where it first ranks).

The rule is hybrid's: each part is asked for vipune's candidate pool, ``limit * 10`` clamped to
[50, 10,000] (:func:`.vipune.candidate_pool`, ``MemoryStore::search_hybrid`` in vipune's
``src/memory/search.rs``), as ``hybrid`` asks semantic and FTS; each list adds
``1 / (k + rank)`` to an id's sum and the sums sort best first, equal sums by id ascending
byte-wise (:func:`.vipune.rrf_fuse_many`, the code ``hybrid`` fuses with, vipune's
``src/rrf.rs``). ``k`` defaults to 60 (Cormack, Clarke and Büttcher, SIGIR 2009); vipune's own
is 25, so ``RRF(["semantic", "fts"], k=25)`` ranks every pair as ``hybrid`` does.

What the harness reads of it: ``index`` calls each part's ``index`` (each in a folder of its
own under the persona's workdir); ``last_scores`` (the fused sums, so ties among them are
seen; the ties a part's own list holds are not followed into the fusion); ``last_facts``
(per row its rank in each part's list, which ``retrieval-eval explain`` shows);
``last_components`` (the lists fused); :meth:`RRF.take_part_times` (each part's ingest and
query milliseconds, reported inside the fused store's: ``timing.<name>.parts``).

An RRF may be a part of an RRF, :data:`MAX_NESTING` levels deep at most (one line past it).
Its ``config`` is the plugin's record of the parts (``k``, their names, each part's own
config, each checked by the config rules as the part's own): the record as a whole is not
held to a user config's size and depth (``config_is_record``), so fusing never trips a limit
the user's own config meets.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import vipune
from ..errors import RetrievalEvalError
from .base import Persona, Query, Retriever, _check_limit, part_times
from .loader import UserRetriever, describe_dotted, get_retriever, is_dotted
from .ranked_output import read_distinct
from .ranking import ranked_ids
from .store_config import read_config

__all__ = ["RRF", "part_times"]

DEFAULT_K = 60
#: The most levels RRF nests (an RRF among an RRF's parts is one level more): a part's
#: folder, its name and its record of its parts grow with each level.
MAX_NESTING = 8


def _label(part: object, selector: str | None) -> str:
    name = getattr(part, "name", None)
    if isinstance(name, str) and name.strip():
        return name.strip()
    return selector or type(part).__name__


class _Ranks(Mapping[str, Mapping[str, object]]):
    """``last_facts`` of one fused call, made only for the rows asked about: per id its
    rank in each part's list (``-``: not in it)."""

    def __init__(self, labels: Sequence[str], lists: Sequence[Sequence[str]],
                 fused: Sequence[str]) -> None:
        self._labels = labels
        self._lists = lists
        self._fused = fused
        self._ranks: list[dict[str, int]] | None = None

    def __getitem__(self, mem_id: str) -> Mapping[str, object]:
        if self._ranks is None:
            self._ranks = [{x: i for i, x in reversed(list(enumerate(ids, start=1)))}
                           for ids in self._lists]
        got = [ranks.get(mem_id) for ranks in self._ranks]
        return {"ranks": ", ".join(f"{label} {rank if rank is not None else '-'}"
                                   for label, rank in zip(self._labels, got, strict=True))}

    def __iter__(self) -> Iterator[str]:
        return iter(self._fused)

    def __len__(self) -> int:
        return len(self._fused)


class RRF:
    """Reciprocal Rank Fusion of any retrievers, by vipune's rule (see the module)."""

    #: The pool grows with ``limit``: each k is ranked with its own limit (as ``hybrid``).
    limit_sensitive = True
    #: ``config`` is the plugin's record of the parts, not a config the user wrote.
    config_is_record = True

    def __init__(self, retrievers: Iterable[object], k: int = DEFAULT_K,
                 name: str | None = None, *, options: object = None) -> None:
        if isinstance(retrievers, (str, bytes)) or not isinstance(retrievers, Iterable):
            raise RetrievalEvalError(
                f"RRF takes a list of retrievers or selectors, not {retrievers!r}; write "
                "RRF(['semantic', 'bm25'])")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise RetrievalEvalError(f"RRF: k {k!r} must be a whole number of 1 or more "
                                     "(vipune's is 25; the default 60 is Cormack et al.'s)")
        self.k = k
        self._parts: list[Any] = []
        selectors: list[str | None] = []
        for item in retrievers:
            if isinstance(item, str):
                selectors.append(item)
                self._parts.append(self._from_selector(item, options))
            elif callable(getattr(item, "rank", None)):
                selectors.append(None)
                self._parts.append(item)
            else:
                raise RetrievalEvalError(
                    f"RRF: part {item!r} is neither a retriever (an object with rank(persona, "
                    "query, limit)) nor a selector such as 'bm25' or 'pkg.mod:Class'; give one")
        if len(self._parts) < 2:
            raise RetrievalEvalError(f"RRF fuses two retrievers or more, {len(self._parts)} "
                                     "given; add another")
        self._selectors = selectors
        inner = [int(p.nesting) for p in self._parts if isinstance(p, RRF)]
        self.nesting: int = 1 + max(inner, default=0)
        if self.nesting > MAX_NESTING:
            raise RetrievalEvalError(
                f"RRF nests {self.nesting} levels deep (an RRF among an RRF's parts is one "
                f"level more); RRF may nest at most {MAX_NESTING} levels: fuse the inner "
                "stores in one RRF, e.g. RRF(['semantic', 'bm25', 'fts'])")
        default = "rrf-" + "-".join(re.sub(r"[^A-Za-z0-9._:-]+", "_", x) for x in self.labels)
        self.name = name if name is not None else default
        self.needs_store = any(bool(getattr(p, "needs_store", False)) for p in self._parts)
        self.needs_vectors = any(bool(getattr(p, "needs_vectors", True)) for p in self._parts)
        self.last_scores: list[tuple[str, float]] | None = None
        self.last_facts: Mapping[str, Mapping[str, object]] | None = None
        self.last_components: dict[str, list[str]] | None = None
        self._spent: dict[int, dict[str, float]] = {}  # per part's place
        if not any(isinstance(p, UserRetriever) or callable(getattr(p, "index", None))
                   for p in self._parts):
            self.__dict__["index"] = None  # no part ingests: neither does the fusion

    @staticmethod
    def _from_selector(selector: str, options: object) -> Any:
        if selector == "custom":
            raise RetrievalEvalError("RRF: 'custom' is not a store; give the custom "
                                     "fixture's retriever object itself")
        if is_dotted(selector):
            return describe_dotted(selector)  # built where it first ranks
        return get_retriever(selector, options)

    @property
    def labels(self) -> tuple[str, ...]:
        """Each part's name in explain, timing and config, in the order fused: its ``name``
        now (a ``cmd:`` part's hello name once it started; a dotted path's column name,
        ``Class.name+key:value``), else its selector; the same name twice told apart by its
        place (``bm25#2``)."""
        labels: list[str] = []
        for part, selector in zip(self._parts, self._selectors, strict=True):
            label = _label(part, selector)
            while label in labels:
                label = f"{label}#{len(labels) + 1}"
            labels.append(label)
        return tuple(labels)

    def _part(self, i: int) -> Retriever:
        part = self._parts[i]
        if isinstance(part, UserRetriever):
            return part.build()
        return part  # type: ignore[no-any-return]

    @property
    def config(self) -> dict[str, Any]:
        """``k`` and the parts fused; each part's own config where it declares one."""
        own: dict[str, Any] = {}
        for i, label in enumerate(self.labels):
            part = self._parts[i]
            if isinstance(part, UserRetriever) and part.built is None:
                continue
            found = read_config(self._part(i), self._selectors[i] or "")
            if found:
                own[label] = found
        return {"k": self.k, "parts": list(self.labels), **({"part_config": own} if own else {})}

    def _add(self, i: int, what: str, ms: float) -> None:
        spent = self._spent.setdefault(i, {})
        spent[what] = spent.get(what, 0.0) + ms

    def index(self, persona: Persona) -> None:
        """Each part's ``index``, timed apart, in a folder of its own under the workdir."""
        for i in range(len(self._parts)):
            part = self._part(i)
            index = getattr(part, "index", None)
            if not callable(index):
                continue
            folder = None
            if persona.workdir is not None:  # named by place and selector: kept stable
                stable = self._selectors[i] or _label(self._parts[i], None)
                safe = re.sub(r"[^A-Za-z0-9._-]+", "_", stable)[:48]
                folder = persona.workdir / f"part{i + 1}-{safe}"
                folder.mkdir(parents=True, exist_ok=True)
            begun = time.perf_counter()
            index(replace(persona, workdir=folder))
            self._add(i, "ingest", (time.perf_counter() - begun) * 1000.0)

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = min(_check_limit(limit), vipune.MAX_SEARCH_LIMIT)
        pool = vipune.candidate_pool(lim)
        self.last_scores = None
        self.last_facts = None
        self.last_components = None
        lists: list[list[str]] = []
        size = len(persona.session_ids)
        said = self.labels  # for error lines: "rrf-a-b part b: question Q: ..."
        for i in range(len(self._parts)):
            part = self._part(i)
            who = f"{self.name} part {said[i]}"
            begun = time.perf_counter()
            got = read_distinct(part.rank(persona, query, pool), who, query.question_id,
                                pool, size)
            self._add(i, "retrieval", (time.perf_counter() - begun) * 1000.0)
            ids, _, _ = ranked_ids(got, persona, who, query.question_id, {}, ())
            lists.append(list(dict.fromkeys(ids))[:pool])
        fused = vipune.rrf_fuse_many(lists, self.k)
        self.last_scores = fused
        top = [mem_id for mem_id, _ in fused]
        labels = self.labels
        self.last_facts = _Ranks(labels, lists, top)
        self.last_components = dict(zip(labels, lists, strict=True))
        return top[:lim]

    def take_part_times(self) -> dict[str, dict[str, float]]:
        """Each part's milliseconds (``ingest``, ``retrieval``) since the last take, for the
        item that just ranked; then zero again."""
        spent, self._spent = self._spent, {}
        labels = self.labels
        return {labels[i]: times for i, times in spent.items()}

    def close(self) -> None:
        """Each part's ``close`` that was built in this process."""
        failed: list[str] = []
        for i, part in enumerate(self._parts):
            if isinstance(part, UserRetriever) and part.built is None:
                continue
            close = getattr(self._part(i), "close", None)
            if callable(close):
                try:
                    close()
                except Exception as exc:  # every part gets its close
                    failed.append(f"{self.labels[i]}: {type(exc).__name__}: {exc}")
        if failed:
            raise RetrievalEvalError("; ".join(failed))
