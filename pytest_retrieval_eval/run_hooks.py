"""The hooks of an enabled run (``--retrieval-eval``): the plan and its setup, the plugin's
items in pytest's collection tree, each item's result on its test report, xdist's plan and
results, the report header, the report and the summary; a thin layer over :mod:`.session`,
:mod:`.collection` and :mod:`.reporting`.

plugin.py's ``pytest_configure`` registers this module (:func:`start`) only when the run asks
for the plugin, so a run with the plugin off never loads or calls it.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .collection import (
    PairItem,
    Selection,
    attach_collector,
    check_selection,
    claim_arguments,
    ignores,
    reaches_rootdir,
    rootdir_collector,
)
from .config.options import CUSTOM_RETRIEVER
from .config.settings import usage_error
from .errors import RetrievalEvalError, StopRun, one_line

if TYPE_CHECKING:  # the heavy modules (onnxruntime, pyarrow) load when the run needs them
    from .run.session import EvalSession

SIGTERM_KEY = pytest.StashKey[Any]()  # puts SIGTERM's default back (io/signals.py)
BASE_KEY = pytest.StashKey[dict[str, Any]]()  # the --retrieval-eval-compare report, loaded
PUBLISHED_KEY = pytest.StashKey[list[str]]()  # where the Markdown went (terminal lines)
WORKER_PLAN = "retrieval_eval_plan"
WORKER_SELECTION = "retrieval_eval_selection"
WORKER_OUTPUT = "retrieval_eval"
#: Attributes of a pair item's test report carrying its result, error or skip.
RESULT_ATTR = "retrieval_eval_result"
ERROR_ATTR = "retrieval_eval_error"
SKIP_ATTR = "retrieval_eval_skip"
#: A StopRun's line on the report of the item that met it: the controller ends the run, exit 4.
FATAL_ATTR = "retrieval_eval_fatal"

_THIS_MODULE = sys.modules[__name__]


def start(config: pytest.Config) -> None:
    """An enabled run (``--retrieval-eval``): its settings read and checked, its EvalSession
    in ``config.stash``, and these hooks registered (plugin.py's pytest_configure calls it)."""
    from .config.settings import read_settings
    from .fixtures import SESSION_KEY
    from .run.session import EvalSession

    state = EvalSession(read_settings(config), read_only=_collect_only(config))
    state.junit_properties = bool(getattr(config.option, "xmlpath", None)) and (
        config.getini("junit_family") == "xunit1")
    # explain facts are read from the JSON report (retrieval-eval explain) and by -v's
    # explanations only: a run with neither pays nothing for them
    state.explain = state.settings.json_path is not None or config.get_verbosity() > 0
    config.stash[SESSION_KEY] = state
    if not state.read_only:  # a run that scores: SIGTERM stops it as Ctrl-C does
        from .io.signals import sigterm_as_interrupt

        config.stash[SIGTERM_KEY] = sigterm_as_interrupt()
    manager = config.pluginmanager
    if not manager.is_registered(_THIS_MODULE):
        manager.register(_THIS_MODULE, "retrieval-eval-run")
    if not _is_worker(config):
        manager.register(_ReportedResults(state), "retrieval-eval-results")


def _named_stores(config: pytest.Config) -> list[Any]:
    """What every ``pytest_retrieval_eval_retrievers`` returned, described (not built)."""
    from collections.abc import Mapping

    from .retrievers.loader import describe_object

    origin = "pytest_retrieval_eval_retrievers"
    stores: list[Any] = []
    for returned in config.hook.pytest_retrieval_eval_retrievers(config=config):
        if isinstance(returned, Mapping):
            stores.extend(describe_object(str(k), v, origin) for k, v in returned.items())
        elif isinstance(returned, (list, tuple)):
            stores.extend(describe_object(None, v, origin) for v in returned)
        else:
            stores.append(describe_object(None, returned, origin))
    return stores


def _session(config: pytest.Config) -> EvalSession | None:
    from .fixtures import SESSION_KEY

    return config.stash.get(SESSION_KEY, None)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _collect_only(config: pytest.Config) -> bool:
    """``--co``, ``--setup-plan``, ``--setup-only``: nothing is scored, so nothing is written."""
    return any(bool(config.getoption(name, False))
               for name in ("collectonly", "setupplan", "setuponly"))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    state = _session(session.config)
    if state is None:
        return
    from .run.plan import Plan

    config = session.config
    try:
        state.add_stores(_named_stores(config))  # on every process: the same items
        if _is_worker(config):
            workerinput = config.workerinput  # type: ignore[attr-defined]
            state.attach(Plan.from_dict(workerinput[WORKER_PLAN]))
            state.selection = Selection.from_dict(workerinput[WORKER_SELECTION])
            # xdist builds a worker's args from the controller's command line again: take
            # the plugin's node ids off them here too (the selection is the controller's).
            claim_arguments(config)
        else:
            state.selection = claim_arguments(config)
            if CUSTOM_RETRIEVER in state.settings.retrievers and \
                    not _custom_fixture_given(config):  # before any work, not once an item
                raise usage_error(
                    "retriever 'custom' needs a session fixture named "
                    "retrieval_eval_custom_retriever in your root conftest.py returning an "
                    "object with rank(persona, query, limit) (README, \"Retrievers and your "
                    "own store\")")
            if state.settings.compare is not None:  # an unreadable base fails before work
                from .reporting.compare import load_report

                config.stash[BASE_KEY] = load_report(state.settings.compare)
            _prepare(state, config)
            check_selection(state, state.selection)
        state.finish_setup()
    except RetrievalEvalError as exc:
        raise usage_error(str(exc)) from None


def _prepare(state: EvalSession, config: pytest.Config) -> None:
    """Prepare, showing the cache's repair notices as one terminal line each."""
    import warnings

    from .errors import LibraryWarning
    from .run.terminal_progress import Progress
    from .vectors.cache import CacheWarning

    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CacheWarning)
            warnings.simplefilter("always", LibraryWarning)
            state.prepare(Progress(config))
    finally:
        tr = config.pluginmanager.get_plugin("terminalreporter")
        for w in caught:
            if issubclass(w.category, (CacheWarning, LibraryWarning)) and tr is not None:
                tr.write_line(f"retrieval-eval: warning: {one_line(w.message)}")
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """One line of what the run scores, under pytest's own header."""
    state = _session(config)
    if state is None or state.plan is None or state.corpus is None:
        return None
    from .reporting.text_width import fit_lines

    model = state.plan.model
    settings = state.settings
    return fit_lines([  # pytest prints header lines as given: fitted to its width here
        f"retrieval-eval: {state.corpus.dataset_name}, {len(state.scored_positions())} "
        f"usable pairs, lane {state.plan.lane}, model "
        f"{model['name'] if model else _unloaded(state.plan.model_spec)}, retrievers "
        f"{', '.join(settings.retrievers)}, k {','.join(map(str, settings.ks))}"
        + (f", budget {','.join(map(str, settings.budgets))} tokens of "
           f"{state.token_counts.counter.name}" if state.token_counts is not None else ""),
        *_run_file_notes(state), *_repeat_note(config)], config.get_terminal_writer().fullwidth)


def _run_file_notes(state: EvalSession) -> list[str]:
    """A line per ``run:PATH`` file whose lines name questions the dataset lacks."""
    from .retrievers.trec_run import unknown_line

    lines = (unknown_line(name, facts) for name, facts in state.run_files().items())
    return [f"retrieval-eval: {line}" for line in lines if line is not None]


def _unloaded(spec: str | None) -> str:
    """The header's model when none was loaded: none needed, or a listing run (``--co``),
    which loads none."""
    return "none" if spec is None else f"{spec} (not loaded: nothing is scored)"


def _repeat_note(config: pytest.Config) -> list[str]:
    """pytest-repeat's ``--count N`` parametrizes test functions, which the pair items are
    not (ARCHITECTURE.md): said where it is seen, not left to a silent one-time run."""
    count = getattr(config.option, "count", None)
    if not isinstance(count, int) or count < 2:
        return []
    return [f"retrieval-eval: pytest-repeat's --count {count} repeats your own tests, not the "
            "pair items: a pair's ranking is deterministic, so each is scored once"]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: hand the prepared plan and the collection rule to each worker."""
    state = _session(node.config)
    if state is not None and state.plan is not None and state.selection is not None:
        node.workerinput[WORKER_PLAN] = state.plan.to_dict()
        node.workerinput[WORKER_SELECTION] = state.selection.to_dict()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Given only plugin node ids, pytest collects nothing else in the rootdir."""
    state = _session(config)
    if state is None:
        return None
    return True if ignores(config, state.selection, collection_path) else None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    """The plugin's node joins the rootdir's ``Dir`` when pytest collects it; and the
    session's collection when no path argument reaches the rootdir but the run asks for the
    plugin's items (no path named, or a plugin node id named)."""
    report = yield
    state = _session(collector.config)
    if state is None or state.corpus is None or state.selection is None or not report.passed:
        return report
    if isinstance(collector, pytest.Directory) and collector.path == collector.config.rootpath:
        attach_collector(state, collector, report.result)
    elif isinstance(collector, pytest.Session) and state.selection.forced and \
            not reaches_rootdir(collector.config, report.result):
        report.result.append(rootdir_collector(collector, state))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Each pair item's result, error or skip rides on its test report (xdist sends it to the
    controller with the report, so what a worker finished is kept even when it is interrupted
    before it can publish its output). The controller keeps them as the reports are logged
    (:class:`_ReportedResults`), so a report that a plugin turns into a rerun never counts."""
    report = yield
    state = _session(item.config)
    if not isinstance(item, PairItem) or state is None or state.corpus is None:
        return report
    question_id = state.corpus.pairs[item.position].question_id
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(
            report.longrepr)
        setattr(report, SKIP_ATTR, {"retriever": item.retriever, "question_id": question_id,
                                    "reason": str(reason).removeprefix("Skipped: ")})
    elif report.failed and call.excinfo is not None:
        exc = call.excinfo.value
        message = str(exc) if isinstance(exc, RetrievalEvalError) else (
            f"{type(exc).__name__}: {one_line(exc)}")
        if isinstance(exc, StopRun):
            setattr(report, FATAL_ATTR, message)
        setattr(report, ERROR_ATTR, {"retriever": item.retriever, "question_id": question_id,
                                     "error": message})
    elif report.when == "call" and report.passed and getattr(
            item, "retrieval_eval_results", None):
        setattr(report, RESULT_ATTR, item.retrieval_eval_results)  # type: ignore[attr-defined]
    elif report.when == "call" and report.passed and state.results:
        last = state.results[-1]
        if (last.get("selector", last["retriever"]), last["index"]) == (item.retriever,
                                                  state.corpus.pairs[item.position].index):
            setattr(report, RESULT_ATTR, last)
    return report


class _ReportedResults:
    """Registered on the controller of an enabled run: keeps each item's result, error or
    skip as its report is logged (from an xdist worker too). A report marked for a rerun
    (pytest-rerunfailures) is not the item's outcome and is passed over; the later one is."""

    def __init__(self, state: EvalSession) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if str(report.outcome) == "rerun":
            return
        result = getattr(report, RESULT_ATTR, None)
        for one in result if isinstance(result, list) else [] if result is None else [result]:
            self.state.add_result(one)
        fatal = getattr(report, FATAL_ATTR, None)
        if isinstance(fatal, str) and self.state.fatal is None:
            self.state.fatal = fatal  # a worker's too: the run ends as a usage error
        error = getattr(report, ERROR_ATTR, None)
        if error is None and report.failed:
            error = self._lost_item(report)
        if error is not None:
            self.state.add_error(error)
        skip = getattr(report, SKIP_ATTR, None)
        if skip is not None:
            self.state.add_skip(skip)

    def _lost_item(self, report: pytest.TestReport) -> dict[str, Any] | None:
        """A pair item's failure that carries no error of the plugin: the report xdist makes
        for the item a crashed worker was running ("worker 'gw0' crashed while running
        ..."). Its retriever and question id come from the node id
        (``retrieval-eval::<type>::<question_id>::<retriever>``)."""
        head = "retrieval-eval::"
        if not report.nodeid.startswith(head):
            return None
        rest = report.nodeid[len(head):]
        _qtype, _, rest = rest.partition("::")
        for name in sorted(self.state.settings.retrievers, key=len, reverse=True):
            if rest.endswith(f"::{name}") and len(rest) > len(name) + 2:
                return {"retriever": name, "question_id": rest[:-len(name) - 2],
                        "error": one_line(str(report.longrepr))}
        return None


def pytest_collection_finish(session: pytest.Session) -> None:
    """The items left after ``-k``/``-m``: an interrupted run says how many of them ran."""
    state = _session(session.config)
    if state is not None and state.corpus is not None:
        state.select([(i.position, i.retriever) for i in session.items
                      if isinstance(i, PairItem)])
        if not _is_worker(session.config) and not state.read_only:
            # A serial run builds its user stores now, in the process that ranks: one that
            # cannot be made is one usage line, not a failure per item. (An xdist worker
            # builds each where its first item needs it; a StopRun there ends the run.)
            try:
                state.build_users(name for _, name in state.selected or [])
            except RetrievalEvalError as exc:
                state.fatal = str(exc)
                raise pytest.UsageError(str(exc)) from None
        from .fixtures import pair_id
        from .run.record_columns import column_names

        corpus = state.corpus
        state.record_columns = column_names(
            session.items, lambda position: pair_id(corpus.pairs[position]),
            [*state.settings.retrievers, *state.columns.values()])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist controller (which collects nothing itself): the selection, from a worker."""
    state = _session(node.config)
    if state is not None and state.corpus is not None and state.selected is None:
        state.select_node_ids(ids)


def _custom_fixture_given(config: pytest.Config) -> bool:
    """Whether a conftest (or another plugin) defines ``retrieval_eval_custom_retriever``,
    overriding this plugin's, which only says it is missing."""
    from . import fixtures

    return any(getattr(plugin, "retrieval_eval_custom_retriever", None) is not None
               for plugin in config.pluginmanager.get_plugins() if plugin is not fixtures)


@pytest.hookimpl(tryfirst=True)  # before xdist shuts its workers down: a Ctrl-C there
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:  # costs no report
    config = session.config
    state = _session(config)
    if state is None or state.plan is None or _collect_only(config):
        return
    state.close_retrievers()  # each process closes what it ranked with
    state.flush_kept()
    if _is_worker(config):
        config.workeroutput[WORKER_OUTPUT] = state.worker_output()  # type: ignore[attr-defined]
        return
    if state.fatal is not None:  # a usage error met by an item: no report, exit 4
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        return
    if exitstatus == pytest.ExitCode.USAGE_ERROR:  # pytest's own (a missing path, a -k it
        return  # cannot parse): nothing ran, and an earlier report stays (issue 43.10)
    from .reporting import publish, report
    from .run.run_facts import run_info

    info = run_info(state, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED,
                    stopped=bool(session.shouldstop or session.shouldfail),
                    project=config.rootpath)
    errors = [{**e, "retriever": state.display_name(str(e.get("retriever")))}
              for e in state.errors]
    json_path = state.settings.json_path
    state.report = report.build_report(
        info, state.results, errors, rerun=_rerun_options(config),
        report_path=None if json_path is None else str(json_path),
        shown=_chosen(state) if config.get_verbosity() > 0 else ())
    base = config.stash.get(BASE_KEY, None)
    if base is not None and state.settings.compare is not None:
        publish.attach_comparison(state.report, base, state.settings.compare,  # never raises
                                  state.settings.compare_retrievers)
    # The JSON report first: a Markdown target that blocks or fails cannot cost it.
    if state.settings.json_path is not None:
        try:
            report.write_json(state.report, state.settings.json_path)
        except RetrievalEvalError as exc:  # checked up front; the disk can still fail
            state.json_error = str(exc)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
    config.stash[PUBLISHED_KEY] = publish.publish_markdown(
        state.report, state.settings.markdown, not state.settings.no_step_summary)
    if state.settings.html is not None:  # after the JSON, as the Markdown: never costs it
        config.stash[PUBLISHED_KEY].extend(publish.publish_view(state.report,
                                                                state.settings.html))


def _chosen(state: Any) -> list[tuple[str, str]]:
    """(question id, column) of every item the run selected; ``-v`` explains them when they
    are few (:func:`.reporting.explain.run_explanations`), and the headline's next command
    then names none of them (it would repeat the run)."""
    from .reporting.explain import CHOSEN_ITEMS

    corpus = state.corpus
    if corpus is None:
        return []
    chosen = [(corpus.pairs[i].question_id, state.display_name(name))
              for i, name in state.selected or []]
    return chosen if len(chosen) <= CHOSEN_ITEMS else []


def _rerun_options(config: pytest.Config) -> list[str]:
    """The run's own options the headline's next command repeats, in the ``=`` form:
    ``--retrieval-eval``, ``--no-model`` and the plugin's options as typed (a space form's
    value is the argument after it), but for the JSON report, the tables and the compare
    options (the next command writes nothing)."""
    from .config.options import OPTIONS

    valued = {o.flag for o in OPTIONS if not o.is_flag}
    skipped = ("--retrieval-eval-json", "--retrieval-eval-tables", "--retrieval-eval-markdown",
               "--retrieval-eval-html",
               "--retrieval-eval-compare", "--retrieval-eval-compare-retrievers")
    args = [str(a) for a in config.invocation_params.args]
    kept = ["--retrieval-eval"]
    for i, arg in enumerate(args):
        flag = arg.partition("=")[0]
        if arg in ("--no-model", "--retrieval-eval-no-model"):
            kept.append(arg)
        elif flag in valued and flag not in skipped:
            if "=" in arg:
                kept.append(arg)
            elif i + 1 < len(args):
                kept.append(f"{arg}={args[i + 1]}")
    return list(dict.fromkeys(kept))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Each process (controller, serial run, xdist worker) closes its corpus connection,
    after the terminal summary has read the corpus."""
    state = _session(config)
    if state is not None:
        state.close_corpus()
    restore = config.stash.get(SIGTERM_KEY, None)
    if restore is not None:
        restore()
        del config.stash[SIGTERM_KEY]


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
    from .reporting.text_width import fit_lines

    terminalreporter.write_sep("=", "retrieval-eval")
    width = config.get_terminal_writer().fullwidth

    def write_fitted(text: str) -> None:
        for line in fit_lines([text], width):
            terminalreporter.write_line(line)

    verbosity = config.get_verbosity()
    for line in terminal_lines(state.report, width, verbose=verbosity > 0,
                               overall_only=verbosity < -1, tables=state.settings.tables):
        terminalreporter.write_line(line)
    for line in comparison_lines(state.report, verbosity > 0, width):
        terminalreporter.write_line(line)
    if verbosity > 0:  # why: each failed item's question, and the items a run picked out
        from .reporting.explain import run_explanations

        chosen = _chosen(state)
        failed = [(str(e.get("question_id")), str(e.get("retriever")))
                  for e in state.report.get("errors") or []]
        for line in run_explanations(state.report, chosen, failed, width):
            terminalreporter.write_line(line)
    for line in config.stash.get(PUBLISHED_KEY, []):  # where it went; an error: one line
        if line.startswith("retrieval-eval: "):
            terminalreporter.write_line(line)
        else:
            write_fitted(line)
    for line in state.close_errors:
        terminalreporter.write_line(f"retrieval-eval: warning: {line}")
    if state.json_error is not None:
        terminalreporter.write_line(f"retrieval-eval: error: {state.json_error}")
    elif state.settings.json_path is not None:
        write_fitted(f"JSON report: {state.settings.json_path}")
    if getattr(config.option, "xmlpath", None) and not state.junit_properties:
        write_fitted("retrieval-eval: the JUnit XML holds no per-pair metrics: junit_family "
                     f"{config.getini('junit_family')} forbids testcase properties; set "
                     "junit_family = xunit1 in the ini file to get them")
