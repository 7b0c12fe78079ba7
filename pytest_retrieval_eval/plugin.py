"""pytest hooks: a thin layer over :mod:`.session`, :mod:`.options` and :mod:`.reporting`.

Without ``--retrieval-eval`` (or ``retrieval_eval = true`` in the ini file) every hook returns
at once: no item, no file touched, nothing printed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from .errors import RetrievalEvalError, one_line
from .options import CUSTOM_RETRIEVER, add_options, read_settings

if TYPE_CHECKING:  # the heavy modules (onnxruntime, pyarrow) load only when enabled
    from .retrievers import Retriever
    from .session import EvalSession

BASE_KEY = pytest.StashKey[dict[str, Any]]()  # the --retrieval-eval-compare report, loaded
PUBLISHED_KEY = pytest.StashKey[list[str]]()  # where the Markdown went (terminal lines)
MARKER = "retrieval_eval"
WORKER_PLAN = "retrieval_eval_plan"
WORKER_OUTPUT = "retrieval_eval"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def _session(config: pytest.Config) -> EvalSession | None:
    from .fixtures import SESSION_KEY

    return config.stash.get(SESSION_KEY, None)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: a LongMemEval pair scored by pytest-retrieval-eval")
    from . import fixtures
    from .fixtures import SESSION_KEY

    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, "retrieval-eval-fixtures")
    settings = read_settings(config)
    if settings.enabled:
        from .session import EvalSession

        state = EvalSession(settings)
        config.stash[SESSION_KEY] = state
        if not _is_worker(config):
            config.pluginmanager.register(_ReportedResults(state), "retrieval-eval-results")


class _Progress:
    """Progress of long steps (ingest, embedding) through the terminal reporter.

    On a terminal the line is rewritten in place (at most twice a second); in a log (CI) a
    line is written once the step has run a second, every 30 seconds, and at its end. A step
    that ends within :data:`GRACE` seconds shows nothing (a small file's error is not preceded
    by the progress of the steps before it).
    """

    GRACE = 1.0  # seconds a step runs before its first line

    def __init__(self, config: pytest.Config) -> None:
        self.tr = config.pluginmanager.get_plugin("terminalreporter")
        self.last = 0.0
        self.label = ""
        self.started = 0.0

    def __call__(self, label: str, done: int, total: int | None) -> None:
        if self.tr is None:
            return
        now = time.monotonic()
        if label != self.label:
            self.label, self.started, self.last = label, now, 0.0
        final = total is not None and done >= total
        if final and self.last < 0:
            return  # this step's end was shown already
        if now - self.started < self.GRACE:
            return  # a step that ends within a second shows nothing
        interval = 0.5 if self.tr.isatty else 30.0
        if not final and self.last > 0 and now - self.last < interval:
            return
        self.last = -1.0 if final else now
        # An open-ended step that has counted nothing yet is shown by its label alone.
        amount = f" {done}/{total}" if total is not None else f" {done}" if done else ""
        rate = done / (now - self.started) if now > self.started and done else 0.0
        eta = f", ~{(total - done) / rate:.0f}s left" if total and rate and not final else ""
        speed = f" ({_human(rate)}/s{eta})" if rate else ""
        line = f"retrieval-eval: {label}{amount}{speed}"
        if self.tr.isatty:
            self.tr.rewrite(line, erase=True)
            if final:
                self.tr.write_line("")
        else:
            self.tr.write_line(line)


def _human(rate: float) -> str:
    """``2330757749`` -> ``2.3G``: rates of bytes and of texts alike."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if rate >= size:
            return f"{rate / size:.1f}{unit}"
    return f"{rate:.0f}"


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    state = _session(session.config)
    if state is None:
        return
    from .session import Plan

    config = session.config
    try:
        if _is_worker(config):
            state.attach(Plan.from_dict(config.workerinput[WORKER_PLAN]))  # type: ignore[attr-defined]
        else:
            if state.settings.compare is not None:  # an unreadable base fails before work
                from .reporting.compare import load_report

                config.stash[BASE_KEY] = load_report(state.settings.compare)
            _prepare(state, config)
        state.finish_setup()
    except RetrievalEvalError as exc:
        raise pytest.UsageError(str(exc)) from None


def _prepare(state: EvalSession, config: pytest.Config) -> None:
    """Prepare, showing the cache's repair notices as one terminal line each."""
    import warnings

    from .vectors.cache import CacheWarning

    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CacheWarning)
            state.prepare(_Progress(config))
    finally:
        tr = config.pluginmanager.get_plugin("terminalreporter")
        for w in caught:
            if issubclass(w.category, CacheWarning) and tr is not None:
                tr.write_line(f"retrieval-eval: warning: {one_line(w.message)}")
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: hand the prepared plan to each worker."""
    state = _session(node.config)
    if state is not None and state.plan is not None:
        node.workerinput[WORKER_PLAN] = state.plan.to_dict()


class RetrievalEvalCollector(pytest.Collector):
    """Parent of every pair item: node id ``retrieval-eval``."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:  # pragma: no cover - fed directly
        return []


class QuestionTypeCollector(pytest.Collector):
    """One per question type, so ``-k temporal-reasoning`` selects that category."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:  # pragma: no cover - fed directly
        return []


class PairItem(pytest.Function):
    """One LongMemEval pair scored by one retriever."""

    position: int
    retriever: str

    def reportinfo(self) -> tuple[Any, int | None, str]:
        # The domain is the failure's headline: "q1[vipune]", not pytest's "test session".
        return self.path, None, self.name

    def repr_failure(  # type: ignore[override]
        self, excinfo: pytest.ExceptionInfo[BaseException]
    ) -> Any:
        """A retriever's or the data's error is one line, not a traceback."""
        if isinstance(excinfo.value, RetrievalEvalError):
            message = str(excinfo.value)  # named once: many messages start with the name
            return message if message.startswith(f"{self.retriever}:") else (
                f"{self.retriever}: {message}")
        return super().repr_failure(excinfo)


def _pair_test(request: pytest.FixtureRequest) -> None:
    """A pair item: its pair, vectors, query vector and store come from the public fixtures
    user tests get (fixtures.py), so a conftest overriding one changes what is scored.

    Asked for here, not as arguments: a failing fixture (a missing custom retriever, a
    damaged cache) then fails the call with one line (PairItem.repr_failure) instead of a
    setup error with a traceback; and only what the run holds is asked for.
    """
    from .session import PairInputs

    item = request.node
    state = _session(request.config)
    assert state is not None  # pair items exist only when the run is enabled
    request.getfixturevalue("retrieval_eval_pair")
    custom: Retriever | None = None
    if item.retriever == CUSTOM_RETRIEVER:
        custom = request.getfixturevalue("retrieval_eval_custom_retriever")
    vectors = query_vector = store = None
    if state.holds_vectors():
        vectors = request.getfixturevalue("retrieval_eval_vectors").vectors
        query_vector = request.getfixturevalue("retrieval_eval_query_vector")
    if state.needs_store(item.retriever, custom):  # built before the query is timed
        store = request.getfixturevalue("retrieval_eval_store")
    result = state.run_pair(item.position, item.retriever, custom=custom,
                            inputs=PairInputs(vectors, query_vector, store))
    from .reporting.publish import pair_properties  # --junitxml carries them to CI test analytics

    item.user_properties.extend(pair_properties(result))


#: Attributes of a pair item's test report carrying its result or error: xdist sends them
#: to the controller with the report, so what a worker finished is kept even when it is
#: interrupted before it can publish its output.
RESULT_ATTR = "retrieval_eval_result"
ERROR_ATTR = "retrieval_eval_error"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Every failed pair item is listed in the report's ``errors`` (whatever raised); each
    pair item's result (or error) rides on its test report."""
    report = yield
    state = _session(item.config)
    if not isinstance(item, PairItem) or state is None or state.corpus is None:
        return report
    if report.failed and call.excinfo is not None:
        exc = call.excinfo.value
        message = str(exc) if isinstance(exc, RetrievalEvalError) else (
            f"{type(exc).__name__}: {one_line(exc)}")
        error = {"retriever": item.retriever,
                 "question_id": state.corpus.pairs[item.position].question_id,
                 "error": message}
        state.add_error(error)
        setattr(report, ERROR_ATTR, error)
    elif report.when == "call" and report.passed and state.results:
        last = state.results[-1]
        if (last["retriever"], last["index"]) == (item.retriever,
                                                  state.corpus.pairs[item.position].index):
            setattr(report, RESULT_ATTR, last)
    return report


class _ReportedResults:
    """Registered on the controller of an enabled run: keeps each item's result as its
    report arrives (from an xdist worker too; a result seen twice is kept once)."""

    def __init__(self, state: EvalSession) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        result = getattr(report, RESULT_ATTR, None)
        if result is not None:
            self.state.add_result(result)
        error = getattr(report, ERROR_ATTR, None)
        if error is not None:
            self.state.add_error(error)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The items left after ``-k``/``-m``: an interrupted run says how many of them ran."""
    state = _session(session.config)
    if state is not None and state.corpus is not None:
        state.select([(i.position, i.retriever) for i in session.items
                      if isinstance(i, PairItem)])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist controller (which collects nothing itself): the selection, from a worker."""
    state = _session(node.config)
    if state is not None and state.corpus is not None and state.selected is None:
        state.select_node_ids(ids)


@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever() -> Retriever:
    """Override in your root ``conftest.py`` to score your own store as retriever ``custom``."""
    raise RetrievalEvalError(
        "retriever 'custom' needs a session fixture named retrieval_eval_custom_retriever in "
        "your root conftest.py returning an object with rank(persona, query, limit)"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Append one item per usable pair and retriever (before -k/-m deselect)."""
    state = _session(config)
    if state is None or state.corpus is None:
        return
    root = RetrievalEvalCollector.from_parent(session, name="retrieval-eval",
                                              nodeid="retrieval-eval")
    ours: list[pytest.Item | pytest.Collector] = []
    by_type: dict[str, QuestionTypeCollector] = {}
    for position in state.scored_positions():  # usable pairs, or the subset's
        pair = state.corpus.pairs[position]
        parent = by_type.get(pair.question_type)
        if parent is None:
            parent = QuestionTypeCollector.from_parent(root, name=pair.question_type)
            by_type[pair.question_type] = parent
        for name in state.settings.retrievers:
            item = PairItem.from_parent(parent, name=f"{pair.question_id}[{name}]",
                                        callobj=_pair_test)
            item.position = position
            item.retriever = name
            item.add_marker(MARKER)
            ours.append(item)
    items.extend(item for item in ours if isinstance(item, pytest.Item))
    # Report them as collected, so "collected N items" and "-k" counts include them.
    config.hook.pytest_collectreport(report=pytest.CollectReport(
        root.nodeid, "passed", None, ours))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = _session(config)
    if state is None or state.plan is None:
        return
    if _is_worker(config):
        config.workeroutput[WORKER_OUTPUT] = state.worker_output()  # type: ignore[attr-defined]
        return
    from .reporting import report

    info = state.run_info(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED,
                          stopped=bool(session.shouldstop or session.shouldfail))
    state.report = report.build_report(info, state.results, state.errors)
    from .reporting import publish

    base = config.stash.get(BASE_KEY, None)
    if base is not None and state.settings.compare is not None:
        publish.attach_comparison(state.report, base, state.settings.compare)
    config.stash[PUBLISHED_KEY] = publish.publish_markdown(
        state.report, state.settings.markdown, not state.settings.no_step_summary)
    if state.settings.json_path is not None:
        try:
            report.write_json(state.report, state.settings.json_path)
        except RetrievalEvalError as exc:  # checked up front; the disk can still fail
            state.json_error = str(exc)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: merge what a worker scored."""
    state = _session(node.config)
    output = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
    if state is not None and output:
        state.merge_worker_output(output)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    state = _session(config)
    if state is None or state.report is None or _is_worker(config):
        return
    from .reporting.publish import comparison_lines
    from .reporting.report import terminal_lines

    terminalreporter.write_sep("=", "retrieval-eval")
    width = config.get_terminal_writer().fullwidth
    for line in terminal_lines(state.report, width):
        terminalreporter.write_line(line)
    for line in comparison_lines(state.report, config.get_verbosity() > 0, width):
        terminalreporter.write_line(line)
    for line in config.stash.get(PUBLISHED_KEY, []):
        terminalreporter.write_line(line)
    if state.json_error is not None:
        terminalreporter.write_line(f"retrieval-eval: error: {state.json_error}")
    elif state.settings.json_path is not None:
        terminalreporter.write_line(f"JSON report: {state.settings.json_path}")
