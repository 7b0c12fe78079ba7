"""pytest hooks: the thin module pytest loads through the plugin's entry point in every run
of an environment that installs it, whether the run asks for the plugin or not.

It registers the options and the fixtures, and reads the on/off switch. Without
``--retrieval-eval`` (or ``retrieval_eval = true`` in the ini file) that is all: no item, no
file read or written, nothing printed, and of the plugin's modules only this one,
:mod:`.options` and :mod:`.fixtures` loaded (``tests/plugin/test_off_cost.py`` pins the set).
An enabled run registers :mod:`.run_hooks`, the hooks that collect, score and report, so a run
with the plugin off never calls them (no hook wrapper around each of its tests).

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from types import ModuleType
from typing import Any

import pytest

from .config.options import NO_MODEL_ALIAS, OPTIONS, SWITCH, add_no_model_alias, add_options


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


class RetrievalEvalHooks:
    """The plugin's hook specifications (a conftest implements them)."""

    @pytest.hookspec
    def pytest_retrieval_eval_retrievers(self, config: pytest.Config) -> Any:
        """Named stores to score in place of ``custom``: a list of retrievers, classes or
        no-argument factories (each named by its class's ``name``), or a mapping
        name -> such a store. Each is a column and an item per pair (``-k <name>``); a class
        or factory is built only in the process that ranks with it (never on the xdist
        controller). Called on every process, so it must return the same names on each."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(RetrievalEvalHooks)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> Generator[None, None, None]:
    """``--no-model`` joins the group once the initial conftests have added their options,
    unless one of them (or another plugin) owns the name: pytest then still starts, and
    ``--retrieval-eval-no-model`` is the way to ask for the lane."""
    yield
    add_no_model_alias(parser)


def _check_rootdir(config: pytest.Config) -> None:
    """A space-form path option that pytest took for a test path: one line, the = form.
    Only a run whose arguments hold such an option (the flag as a word of its own) loads the
    check."""
    args = config.invocation_params.args
    flags = [o.flag for o in OPTIONS if not o.is_flag]
    if not set(flags).intersection(args):
        return
    from .errors import fit_error
    from .rootdir_guard import moved_rootdir_line

    line = moved_rootdir_line(args, flags, config.invocation_params.dir, config.rootpath,
                              config.inipath)
    if line is not None:
        raise pytest.UsageError(fit_error(line, prefix="ERROR: "))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def switched_on(config: pytest.Config) -> bool:
    """Whether the run asks for the plugin: ``--retrieval-eval``, or ``retrieval_eval = true``
    in the ini file. All that a run reads of the options while the plugin is off; any other
    value, good or bad, is read (and refused in one line) by :func:`.settings.read_settings`
    of an enabled run only. An ini value that pytest's own ``bool`` reader does not give as a
    boolean (a string of a TOML-mode file, or a bad one) is read by the settings' reader,
    which says in one line what is wrong with it."""
    if config.getoption(SWITCH, None):
        return True
    try:
        raw = config.getini(SWITCH)
    except (ValueError, TypeError, pytest.UsageError):
        raw = ...  # refused by pytest: the settings' reader words it
    if isinstance(raw, bool):
        return raw
    if raw is None or raw == []:  # unset (pytest < 9 gives [] for a None default)
        return False
    from .config.settings import read_switch

    return read_switch(config)


def forget_dropped_submodules() -> None:
    """Unbind, from the plugin's packages still loaded, each submodule that ``sys.modules`` no
    longer holds.

    Importing ``pkg.sub`` binds ``sub`` on ``pkg``. A run inside a run (pytester's in-process
    runs, or ``pytest.main`` called twice) puts ``sys.modules`` back as it found it, but leaves
    those bindings on the packages that outlive it. ``from . import sub`` (and ``import pkg.sub
    as s``) reads the binding first, so the next run would get the dropped module: its own
    classes and stash keys, twins of the ones the current modules use, and ``isinstance`` and
    ``config.stash`` lookups across the two fail in silence. Called before this module imports
    anything of its package."""
    root = __name__.rpartition(".")[0]
    prefix = f"{root}."
    for name, module in list(sys.modules.items()):
        # The name first: ``hasattr`` on another library's module may run its lazy
        # ``__getattr__`` (a worker beside big libraries holds thousands of modules).
        if (name != root and not name.startswith(prefix)) or module is None or not hasattr(
                module, "__path__"):
            continue
        for attr, value in list(vars(module).items()):
            if (isinstance(value, ModuleType) and value.__name__ == f"{name}.{attr}"
                    and sys.modules.get(value.__name__) is not value):
                delattr(module, attr)


def pytest_configure(config: pytest.Config) -> None:
    forget_dropped_submodules()
    from . import fixtures

    config.addinivalue_line(
        "markers", f"{fixtures.MARKER}(retriever, question_type, question_id): a LongMemEval "
        "pair scored by pytest-retrieval-eval; -m \"retrieval_eval(retriever='bm25')\" "
        "selects one column exactly (pytest 8.3+)")
    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, "retrieval-eval-fixtures")
    if not _is_worker(config):
        _check_rootdir(config)
    if switched_on(config):
        from .run_hooks import start

        start(config)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    """A plugin option given on the command line while the evaluation is off (``--no-model``
    without ``--retrieval-eval``): one note saying it does nothing, and how to switch the
    evaluation on (an enabled run's summary is :func:`.run_hooks.pytest_terminal_summary`'s)."""
    from .fixtures import SESSION_KEY

    if config.stash.get(SESSION_KEY, None) is not None or _is_worker(config):
        return
    given = [opt.flag for opt in OPTIONS
             if opt.dest != SWITCH and getattr(config.option, opt.dest, None) is not None]
    if not given:
        _ini_note(terminalreporter, config)
        return
    no_model = [NO_MODEL_ALIAS] if "--retrieval-eval-no-model" in given else []
    named = [f for f in given if f != "--retrieval-eval-no-model"]
    if no_model and not named:
        what = "--no-model picks the model-free lane of the evaluation, which is off"
    else:
        shown = [*no_model, *named]
        listed = ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
        what = f"{listed} {'is an option' if len(shown) == 1 else 'are options'} of the " \
               "evaluation, which is off, so nothing reads them"
    from .reporting.text_width import fit_lines

    for line in fit_lines([f"retrieval-eval: {what}: add --retrieval-eval (or retrieval_eval "
                           "= true in the ini file)"], config.get_terminal_writer().fullwidth):
        terminalreporter.write_line(line)


def _ini_note(terminalreporter: Any, config: pytest.Config) -> None:
    """Plain ``pytest`` in a folder whose ini file sets ``retrieval_eval_*`` keys (a store's
    project, examples/vipune): one note that the evaluation is off and how to switch it on
    (issue 48, item 7); nothing where the ini file sets none, or switches it off itself."""
    def ini(name: str) -> Any:
        try:
            return config.getini(name)
        except (ValueError, TypeError, pytest.UsageError):
            return ...  # set, to a value the settings' reader would refuse

    if ini(SWITCH) is not None:  # the ini file says whether: off is its choice
        return
    keys = [opt.dest for opt in OPTIONS
            if opt.dest != SWITCH and ini(opt.dest) not in ("", None, [])]
    if not keys:
        return
    from .reporting.text_width import fit_lines

    listed = ", ".join(keys[:2]) + (f" and {len(keys) - 2} more" if len(keys) > 2 else "")
    where = config.inipath.name if config.inipath is not None else "the ini file"
    for line in fit_lines([f"retrieval-eval: {where} sets {listed}, but the evaluation is "
                           "off: add --retrieval-eval to score retrieval (pytest "
                           "--retrieval-eval --no-model)"],
                          config.get_terminal_writer().fullwidth):
        terminalreporter.write_line(line)
