"""The plugin's items in pytest's own collection tree.

Where they hang: under the ``Dir`` (or ``Package``) node of the rootdir, as a collector named
``retrieval-eval``; below it one collector per question type, one per question, and one item
per retriever::

    <Dir project>
      <RetrievalEvalCollector retrieval-eval>
        <QuestionTypeCollector temporal-reasoning>
          <QuestionCollector 2819ce0a>
            <PairItem hybrid>

Node ids are ``retrieval-eval::<question_type>::<question_id>::<retriever>``: no ``[...]``
suffix, because that is pytest's mark of a parametrization, and an item that is not made by
``metafunc.parametrize`` but carries one gets an id that pytest 9.2's ``NodeId.parse`` reads
differently (``--lf``, ``--sw`` and ``--ff`` then lose it). Every part is a node of its own, so
``-k <type>``, ``-k <question_id>``, ``-k <retriever>`` and node ids on the command line select
as for any test (ARCHITECTURE.md, "How the items are collected"). Each item carries the marker
``retrieval_eval(retriever=COLUMN, question_type=TYPE, question_id=ID)``: ``-m`` with keyword
arguments (pytest 8.3+) selects one column exactly, where ``-k bm25`` also matches ``bm25s``.

Which runs hold them: pytest reaches the collector when it collects the rootdir's ``Dir``
(``pytest`` or ``pytest .`` there). When no path is named (pytest then collects ``testpaths``
or the working folder) the collector is added to what the session collected, so
``pytest --retrieval-eval`` scores from any folder of the project. Paths named on the command
line narrow it like any test: ``pytest tests/`` runs no pair; ``pytest retrieval-eval``,
``pytest retrieval-eval::temporal-reasoning`` or a full node id runs those pairs (such an
argument is taken off the list pytest resolves as paths, since no such file exists).

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .config.settings import usage_error
from .errors import RetrievalEvalError, StopRun, fit_error, one_line
from .fixtures import MARKER

if TYPE_CHECKING:
    from .run.session import EvalSession

ROOT_NAME = "retrieval-eval"


@dataclass(frozen=True)
class Selection:
    """Which of the plugin's items this run collects.

    ``forced``: add the collector to the session's collection even when no path argument
    reaches the rootdir (no path was named, or a plugin node id was). ``parts``: one entry
    per plugin node id named on the command line, its readings: the id past
    ``retrieval-eval::`` as given (``question_type::question_id::retriever`` or a prefix of
    it, never split, as a question id may hold ``::`` or ``[``), and for an id in the bracket
    form of earlier releases (``…::<question_id>[<retriever>]``) that id read with ``::``;
    None: every item. ``only``: every argument was a plugin node id, so nothing but
    the plugin's items is collected.
    """

    forced: bool
    parts: tuple[tuple[str, ...], ...] | None = None
    only: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"forced": self.forced, "only": self.only,
                "parts": None if self.parts is None else [list(p) for p in self.parts]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Selection:
        parts = data.get("parts")
        return cls(bool(data.get("forced")),
                   None if parts is None else tuple(tuple(p) for p in parts),
                   bool(data.get("only")))

    def wants(self, *names: str) -> bool:
        """Whether the node named by ``names`` (type, question id, retriever; a prefix for a
        collector) lies on the way to, or under, a selected node: the node's id and a named
        id are equal, or one continues the other past a ``::``."""
        if self.parts is None:
            return True
        return any(_on_the_way(names, tail) for readings in self.parts for tail in readings)


def _on_the_way(names: Sequence[str], tail: str) -> bool:
    node = "::".join(names)
    return node == tail or tail.startswith(f"{node}::") or node.startswith(f"{tail}::")


def _plugin_arg(arg: str, invocation_dir: Path) -> tuple[str, ...] | None:
    """The readings of a plugin node id given as a command-line argument: ``()`` for
    ``retrieval-eval`` itself, else the id past ``retrieval-eval::`` (and its bracket-form
    twin); None for anything else (a path on disk wins: a file or folder named
    ``retrieval-eval`` stays a path). The id is matched whole against the items' ids
    (:meth:`Selection.wants`), so a question id holding ``::`` or ``[`` selects exactly as
    ``pytest --co -q`` prints it."""
    head, sep, tail = arg.partition("::")
    if head.rstrip("/") != ROOT_NAME or (invocation_dir / head).exists():
        return None
    if not sep:
        return ()
    if not tail.strip(":"):
        raise usage_error(
            f"{arg}: not a retrieval-eval node id; give retrieval-eval[::<question_type>"
            "[::<question_id>[::<retriever>]]], as `pytest --co -q` prints them")
    readings = [tail]
    if tail.endswith("]") and "[" in tail.rpartition("::")[2]:
        # The ids of earlier releases, ``<question_id>[<retriever>]``, still select.
        question, _, retriever = tail[:-1].rpartition("[")
        readings.append(f"{question}::{retriever}")
    return tuple(readings)


def claim_arguments(config: pytest.Config) -> Selection:
    """Decide which plugin items this run collects, and take the plugin's node ids off
    ``config.args`` (pytest would look for them on disk). Called before collection on the
    controller (or a serial run), and on each xdist worker, which parses the controller's
    command line again (its own ``config.args``) but keeps the controller's selection, the
    one it gets through ``workerinput``."""
    invocation_dir = config.invocation_params.dir
    claimed: list[tuple[str, ...]] = []  # the readings of each plugin node id
    rest: list[str] = []
    for arg in config.args:
        parts = _plugin_arg(arg, invocation_dir)
        if parts is None:
            rest.append(arg)
        else:
            claimed.append(parts)
    named_paths = config.args_source == pytest.Config.ArgsSource.ARGS
    if not claimed:
        return Selection(forced=not named_paths)
    only = not rest
    # Nothing else to collect: the rootdir alone, every entry in it ignored (see ignores()).
    config.args[:] = rest if rest else [str(config.rootpath)]
    unique: tuple[tuple[str, ...], ...] = tuple(dict.fromkeys(claimed))
    return Selection(forced=True, parts=None if () in claimed else unique, only=only)


def ignores(config: pytest.Config, selection: Selection | None, path: Path) -> bool:
    """Under a run given only plugin node ids, nothing in the rootdir but the plugin's items
    is collected."""
    return bool(selection is not None and selection.only and path.parent == config.rootpath)


class _EvalCollector(pytest.Collector):
    """A collector of the plugin's tree: it holds the run's state; its report location is
    its name (line 0: pytest's reports need an int)."""

    state: EvalSession

    def reportinfo(self) -> tuple[Any, int, str]:
        return self.path, 0, self.name


class RetrievalEvalCollector(_EvalCollector):
    """The plugin's node under the rootdir's ``Dir``: node id ``retrieval-eval``."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        corpus, selection = self.state.corpus, self.state.selection
        assert corpus is not None and selection is not None
        by_type: dict[str, list[int]] = {}
        for position in self.state.scored_positions():  # usable pairs, or the subset's
            by_type.setdefault(corpus.pairs[position].question_type, []).append(position)
        for qtype, positions in by_type.items():
            if selection.wants(qtype):
                node = QuestionTypeCollector.from_parent(self, name=qtype)
                node.state, node.positions = self.state, positions
                yield node


class QuestionTypeCollector(_EvalCollector):
    """One per question type: ``-k temporal-reasoning`` selects the category."""

    positions: list[int]

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        corpus, selection = self.state.corpus, self.state.selection
        assert corpus is not None and selection is not None
        for position in self.positions:
            question_id = corpus.pairs[position].question_id
            if selection.wants(self.name, question_id):
                node = QuestionCollector.from_parent(self, name=question_id)
                node.state, node.position = self.state, position
                yield node


class QuestionCollector(_EvalCollector):
    """One per question: ``-k <question_id>`` selects every retriever's item for it."""

    position: int

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        selection = self.state.selection
        assert selection is not None and self.parent is not None
        for name in self.state.settings.retrievers:
            if selection.wants(self.parent.name, self.name, name):
                item = PairItem.from_parent(self, name=name, callobj=pair_test)
                item.position, item.retriever = self.position, name
                column = self.state.column(name)
                # -m "retrieval_eval(retriever='bm25')" selects one column exactly (pytest
                # 8.3+ reads keyword arguments in -m; -k matches substrings of names).
                item.add_marker(getattr(pytest.mark, MARKER)(
                    retriever=column, question_type=self.parent.name, question_id=self.name))
                if column != name:  # -k <its name> selects it, as -k <selector> does
                    item.extra_keyword_matches.add(column)
                yield item


class PairItem(pytest.Function):
    """One LongMemEval pair scored by one retriever."""

    position: int
    retriever: str

    def reportinfo(self) -> tuple[Any, int, str]:
        """The dataset file and the question's instance index (0-based, as pytest's lines
        are: its short summary prints index + 1, JUnit's xunit1 ``line`` the index itself),
        so a report names something a person can open; the node id is unchanged. The domain
        is the failure's headline: "2819ce0a::hybrid", not pytest's test path."""
        assert self.parent is not None
        domain = f"{self.parent.name}::{self.name}"
        state: EvalSession | None = getattr(self.parent, "state", None)
        if state is None or state.plan is None or not state.plan.dataset_path or (
                state.corpus is None):
            return self.path, 0, domain
        return Path(state.plan.dataset_path), state.corpus.pairs[self.position].index, domain

    def repr_failure(  # type: ignore[override]
        self, excinfo: pytest.ExceptionInfo[BaseException]
    ) -> Any:
        """A retriever's or the data's error is its one line, not a traceback, cut at spaces
        to the terminal's width (:func:`.errors.fit_error`: a marked command stays whole, on
        a line of its own; the JSON report's ``errors`` join it back into one line)."""
        if isinstance(excinfo.value, RetrievalEvalError):
            message = str(excinfo.value)  # named once: many messages start with the name
            line = message if message.startswith(f"{self.retriever}:") else (
                f"{self.retriever}: {message}")
            return fit_error(line, self.config.get_terminal_writer().fullwidth)
        return super().repr_failure(excinfo)


def pair_test(request: pytest.FixtureRequest) -> None:
    """A pair item: its pair, vectors, query vector and store come from the public fixtures
    user tests get (fixtures.py), so a conftest overriding one changes what is scored.

    Asked for here, not as arguments: a failing fixture (a damaged cache) then fails the call
    with one line (PairItem.repr_failure) instead of a setup error with a traceback; and only
    what the run holds is asked for.
    """
    from .config.options import CUSTOM_RETRIEVER
    from .fixtures import SESSION_KEY
    from .run.session import PairInputs

    started = time.perf_counter()  # the item's own wall time: the harness's overhead
    item = request.node
    state = request.config.stash.get(SESSION_KEY, None)
    assert state is not None  # pair items exist only when the run is enabled
    request.getfixturevalue("retrieval_eval_pair")
    stores: list[tuple[str | None, Any]] = [(None, None)]
    if item.retriever == CUSTOM_RETRIEVER:  # one store, or several: a column each
        try:
            stores = list(state.custom_stores(
                request.getfixturevalue("retrieval_eval_custom_retriever")))
        except Exception as exc:  # the same for every pair: stop here (pytest.skip passes)
            stop = StopRun(str(exc) if isinstance(exc, RetrievalEvalError) else (
                f"retrieval_eval_custom_retriever raised {type(exc).__name__}: "
                f"{one_line(exc, 300)}; fix the fixture in your conftest.py (every pair "
                "would fail alike, so the run stops here)"))
            request.session.shouldfail = str(stop)
            raise stop from None
    custom = stores[0][1]
    vectors = query_vector = store = None
    begun = time.perf_counter()  # the pair's inputs: read by its first item (PairInputs.ms)
    if state.holds_vectors():
        if any(state.reads_session_vectors(item.retriever, c) for _, c in stores):
            vectors = request.getfixturevalue("retrieval_eval_vectors").vectors
        query_vector = request.getfixturevalue("retrieval_eval_query_vector")
    if any(state.needs_store(item.retriever, c) for _, c in stores):  # before the timing
        store = request.getfixturevalue("retrieval_eval_store")
    inputs_ms = (time.perf_counter() - begun) * 1000.0
    results = []
    for column, custom in stores:
        try:
            results.append(state.run_pair(item.position, item.retriever, custom=custom,
                                          inputs=PairInputs(vectors, query_vector, store,
                                                            inputs_ms),
                                          started=started, column=column))
            inputs_ms = 0.0  # read once for the item's stores
        except _stops() as exc:  # a run file swapped under this process,
            request.session.shouldfail = str(exc)  # a store that cannot be made: stop here
            raise
        started = time.perf_counter()
    item.retrieval_eval_results = results  # ride on its report (plugin.py)
    if state.junit_properties:  # --junitxml under junit_family=xunit1 (xunit2 forbids them)
        from .reporting.publish import pair_properties

        for result in results:
            for name, value in pair_properties(result):
                item.user_properties.append((name, value))


def _stops() -> tuple[type[BaseException], ...]:
    """What stops the run from a pair item: StopRun, and a run file's ``RunChangedError``
    once :mod:`.retrievers.trec_run` is loaded (it alone raises one; a run reading no run
    file never loads it)."""
    trec_run = sys.modules.get(f"{__package__}.retrievers.trec_run")
    return (StopRun,) if trec_run is None else (trec_run.RunChangedError, StopRun)


def attach_collector(state: EvalSession, collector: pytest.Collector,
                     result: list[Any]) -> None:
    """The rootdir's ``Dir`` was collected: the plugin's node joins its children."""
    node = RetrievalEvalCollector.from_parent(collector, name=ROOT_NAME, nodeid=ROOT_NAME)
    node.state = state
    state.collector = node
    result.append(node)


def reaches_rootdir(config: pytest.Config, nodes: Sequence[Any]) -> bool:
    """Whether collecting ``nodes`` collects the rootdir's ``Dir`` (or the plugin's node)."""
    root = config.rootpath
    return any(isinstance(n, RetrievalEvalCollector) or (
        isinstance(n, pytest.Directory) and (n.path == root or n.path in root.parents))
        for n in nodes)


def rootdir_collector(session: pytest.Session, state: EvalSession) -> RetrievalEvalCollector:
    """The plugin's node under the rootdir's ``Dir``, collecting that ``Dir`` through pytest's
    own hooks when this run did not (its conftest's fixtures are scoped to it there)."""
    if state.collector is None:
        config = session.config
        directory = config.hook.pytest_collect_directory(path=config.rootpath, parent=session)
        if directory is None:
            raise usage_error(
                f"retrieval-eval: pytest collects nothing at the rootdir {config.rootpath} "
                "(a conftest's pytest_collect_directory declines it), so the plugin's items "
                "have no parent; run pytest from the rootdir")
        config.hook.pytest_make_collect_report(collector=directory)
    collector: RetrievalEvalCollector = state.collector
    return collector


def check_selection(state: EvalSession, selection: Selection) -> None:
    """Every plugin node id named on the command line names some item, as pytest requires of
    its own arguments."""
    if selection.parts is None:
        return
    corpus = state.corpus
    assert corpus is not None
    known = ["::".join((corpus.pairs[p].question_type, corpus.pairs[p].question_id, name))
             for p in state.scored_positions() for name in state.settings.retrievers]
    for readings in selection.parts:
        if not any(k == t or k.startswith(f"{t}::") for k in known for t in readings):
            wanted = f"{ROOT_NAME}::{readings[0]}"
            rejected = next((r for r in corpus.rejections for t in readings if r.question_id
                             and _names_question(t, r.question_id)), None)
            if rejected is not None:  # say why, not "no such question" (issue 38.14)
                from .run.run_facts import rejection_reason

                raise usage_error(
                    f"not found: {wanted}: question {rejected.question_id} is not scored in "
                    f"this run: {rejection_reason(state, rejected)}")
            raise usage_error(
                f"not found: {wanted} (no such question type, question or retriever in this "
                "run); `pytest --retrieval-eval --co -q` lists the node ids")



def _names_question(tail: str, question_id: str) -> bool:
    """Whether a node id past ``retrieval-eval::`` (``type::question_id[::retriever]``)
    names ``question_id``."""
    rest = tail.partition("::")[2]
    return rest == question_id or rest.startswith(f"{question_id}::")
