"""The run's validated settings: each option resolved (command line, then ini file, then
default), its ini value read as the option's own validator reads it, and the combinations
that cannot work refused, each as one usage error.

A relative path in the ini file is read from the ini file's folder, as pytest's own path
options are; on the command line, from the working folder. Under pytest >= 9 a TOML-mode file
(``pytest.toml``, ``[tool.pytest]``) may give an option's native type (a list of ks, a whole
number, a boolean). Loaded only by an enabled run: a run with the plugin off reads its
switch alone (:func:`.plugin.switched_on`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..errors import fit_error
from .options import (
    BUDGET_ENCODINGS,
    DEFAULT_BUDGET_TOKENIZER,
    DEFAULT_NETWORK_DEADLINE,
    LONGMEMEVAL_KS,
    OPTIONS,
    RUN_PREFIX,
    STORE_RETRIEVERS,
    SWITCH,
    Option,
)


@dataclass(frozen=True)
class Settings:
    """The validated options of one run."""

    enabled: bool
    data: str
    data_repo: str
    data_file: str | None
    ks: tuple[int, ...]
    retrievers: tuple[str, ...]
    json_path: Path | None
    no_model: bool
    model: str | None
    pooling: str
    max_length: int
    query_prefix: str
    device: str
    threads: int | None
    batch_size: int
    cache_dir: Path | None
    store_dir: Path | None
    vipune: str
    vipune_timeout: float
    subset: int | None = None  # --retrieval-eval-subset (subset.py)
    subset_seed: int = 0
    compare: Path | None = None
    compare_retrievers: str | None = None  # BASE=NEW[,...] for the in-run comparison
    markdown: Path | None = None
    html: Path | None = None  # --retrieval-eval-html (reporting/view)
    no_step_summary: bool = False
    protocol: str = "vipune"
    granularity: str = "session"
    cache_repo: str | None = None
    #: The recipe options (:data:`RECIPE_OPTIONS`) the user set, on the command line or in the
    #: ini file: ``--no-model`` never serves vectors of another value of one of them.
    explicit: frozenset[str] = frozenset()

    network_deadline: float = DEFAULT_NETWORK_DEADLINE  # --retrieval-eval-network-deadline
    cmd_timeout: float = 60.0  # cmd: retrievers (retrievers/command.py)
    cmd_index_timeout: float = 600.0
    llm: str | None = None  # mem0+infer:true's LLM (adapters/mem0_llm.py)
    llm_base_url: str | None = None
    llm_timeout: float = 60.0
    rootdir: Path | None = None  # where a cmd: retriever's command runs
    budget: tuple[int, ...] | None = None  # --retrieval-eval-budget (tokens)
    budget_tokenizer: str | None = None  # as given; None: DEFAULT_BUDGET_TOKENIZER
    verify: str = "stamp"  # --retrieval-eval-verify: stamp | full (vipune/store.py)
    reference: str | None = None  # --retrieval-eval-reference (scoring/reference_recall.py)
    tables: tuple[str, ...] | None = None  # --retrieval-eval-tables (summary_choice.py)

    @property
    def max_k(self) -> int:
        return max(self.ks)

    @property
    def budgets(self) -> tuple[int, ...]:
        """The context budgets asked for, in tokens (empty: none, nothing is counted)."""
        return self.budget or ()

    @property
    def tokenizer(self) -> str:
        """The reader's tokenizer a budget counts in."""
        return self.budget_tokenizer or DEFAULT_BUDGET_TOKENIZER




#: Settings fields that change a vector (the recipe, beside the model's files).
RECIPE_OPTIONS = ("pooling", "max_length", "query_prefix")

#: Options whose value is a path: relative ones in the ini file are read from its folder.
INI_PATHS = ("retrieval_eval_json", "retrieval_eval_compare", "retrieval_eval_markdown",
             "retrieval_eval_html",
             "retrieval_eval_cache", "retrieval_eval_store_dir")
#: Options whose value may be a path or a name: resolved from the ini file's folder when it
#: looks like a path (holds a separator, or names something there).
INI_MAYBE_PATHS = ("retrieval_eval_data", "retrieval_eval_model", "retrieval_eval_vipune",
                   "retrieval_eval_budget_tokenizer")
_DATA_NAMES = ("sample", "longmemeval_s", "longmemeval_m", "longmemeval_oracle")


#: What a native TOML value (pytest >= 9: ``pytest.toml``, ``[tool.pytest]``) of an option may
#: be, by the option's validator: (what it takes, an example value in TOML).
_INT_PARSERS = ("positive_int", "nonnegative_int", "max_length")
_FLOAT_PARSERS = ("positive_float", "deadline_seconds", "finite_seconds")
_MISSING = object()


def usage_error(message: str) -> pytest.UsageError:
    """pytest's usage error, its message fitted to the terminal (:func:`.errors.fit_error`:
    pytest prints it after ``ERROR: `` as given, so the plugin cuts it at spaces itself)."""
    return pytest.UsageError(fit_error(message, prefix="ERROR: "))


def _ini_takes(opt: Option) -> tuple[str, str]:
    """What ``opt``'s ini twin takes, in words, and an example of it in TOML."""
    name = opt.parse.__name__
    if opt.is_flag:
        return "a boolean", "true"
    if name == "parse_ks":
        return "a list of whole numbers (or one)", "[1, 5, 10]"
    if name == "parse_budgets":
        return "a list of whole numbers of tokens (or one)", "[500, 2000, 8000]"
    if name == "parse_retrievers":
        return "a list of retriever names", '["hybrid", "bm25"]'
    if name == "compare_map":
        return "a list of BASE=NEW mappings", '["hybrid=hybrid+fts:or"]'
    if name == "parse_tables":
        return "a list of table names", '["recall", "budget"]'
    if name in _INT_PARSERS:
        return "a whole number", str(opt.default if isinstance(opt.default, int) else 8)
    if name in _FLOAT_PARSERS:
        return "a number of seconds", f"{opt.default:g}" if opt.default else "60"
    word = opt.default if isinstance(opt.default, str) and opt.default else opt.metavar
    return "a string", f'"{word or "..."}"'


def _type_error(opt: Option, got: str) -> pytest.UsageError:
    takes, example = _ini_takes(opt)
    return usage_error(
        f"ini option {opt.dest} takes {takes}, e.g. {opt.dest} = {example}; got {got}")


def _native_text(opt: Option, raw: Any) -> str:
    """A TOML-typed ini value as the text the option's validator reads (``[1, 3]`` -> "1,3").
    Each type is taken only where it makes sense; any other is one line naming the type."""
    name = opt.parse.__name__
    got = f"{type(raw).__name__} {raw!r}"
    if isinstance(raw, bool):
        if opt.is_flag:
            return "true" if raw else "false"
        raise _type_error(opt, got)
    if isinstance(raw, int) and name in (*_INT_PARSERS, *_FLOAT_PARSERS, "parse_ks",
                                         "parse_budgets"):
        return str(raw)
    if isinstance(raw, float) and name in _FLOAT_PARSERS:
        return repr(raw)
    if isinstance(raw, list) and name in ("parse_ks", "parse_budgets", "parse_retrievers",
                                          "compare_map", "parse_tables"):
        item_type = int if name in ("parse_ks", "parse_budgets") else str
        if not raw:
            raise _type_error(opt, "an empty list")
        for index, item in enumerate(raw):
            if not isinstance(item, item_type) or isinstance(item, bool):
                raise _type_error(opt, f"{type(item).__name__} {item!r} at index {index}")
        return ",".join(str(item) for item in raw)
    raise _type_error(opt, got)


def _toml_value(config: pytest.Config, dest: str) -> Any:
    """``dest`` as written in a TOML-mode config table (``[pytest]`` of ``pytest.toml``,
    ``[tool.pytest]`` of ``pyproject.toml``), or ``_MISSING``. Read only when pytest's
    ``getini`` refused the value: pytest >= 9 gives TOML-mode values their TOML types, and a
    "string" ini option then refuses ``[1, 3]``; the value itself is read here."""
    path = config.inipath
    if path is None or path.suffix != ".toml":
        return _MISSING
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: pytest's own dependency there
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    try:
        document = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return _MISSING
    tool = document.get("tool")
    tables = [document.get("pytest"), tool.get("pytest") if isinstance(tool, dict) else None]
    for table in tables:
        if isinstance(table, dict) and dest in table:
            return table[dest]
    return _MISSING


def _ini(config: pytest.Config, opt: Option) -> Any:
    """The ini twin's value (None: not set). A string is read as on the command line; under
    pytest >= 9 a TOML-mode file may give the option's native type instead (a list of ks, a
    whole number, a boolean): :func:`_native_text`."""
    from_toml = False
    try:
        raw = config.getini(opt.dest)
    except (ValueError, TypeError, pytest.UsageError) as exc:  # pytest's "bool", or TOML types
        raw = _toml_value(config, opt.dest)
        if raw is _MISSING:
            if opt.is_flag:
                raise usage_error(f"ini option {opt.dest}: {exc}; give true or false"
                                        ) from None
            raise _type_error(opt, str(exc)) from None
        from_toml = True
    if opt.is_flag:  # unset: None, or [] under pytest < 9 (its default for a None default)
        if isinstance(raw, list) and (raw or from_toml):  # TOML's [true]: never read as unset
            raise _type_error(opt, f"list {raw!r}")
        if not isinstance(raw, (bool, str, list)) and raw is not None:  # TOML's 1, 1.0, ...
            raise _type_error(opt, f"{type(raw).__name__} {raw!r}")
        if isinstance(raw, str):  # a string in a TOML-mode file: read as in an ini file
            return _parse_ini(opt, raw) if raw.strip() else None
        return raw if isinstance(raw, bool) else None
    if isinstance(raw, str):
        return _from_ini_folder(config, opt.dest, _parse_ini(opt, raw)) if raw.strip() else None
    return _from_ini_folder(config, opt.dest, _parse_ini(opt, _native_text(opt, raw)))


def _parse_ini(opt: Option, text_value: str) -> Any:
    try:
        return opt.parse(text_value.strip())
    except argparse.ArgumentTypeError as exc:
        raise usage_error(f"ini option {opt.dest}: {exc}") from None


def _from_ini_folder(config: pytest.Config, dest: str, value: Any) -> Any:
    """A relative path read from the ini file, made relative to the ini file's folder (as
    pytest's own "paths" ini options are), so a run from a subfolder finds the same file."""
    if dest == "retrieval_eval_retriever" and isinstance(value, tuple):  # run:PATH entries
        return tuple(_run_from_ini_folder(config, name) for name in value)
    if not isinstance(value, str) or dest not in (*INI_PATHS, *INI_MAYBE_PATHS):
        return value
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    path = Path(value).expanduser()
    if path.is_absolute():
        return value
    if dest in INI_MAYBE_PATHS:
        if dest == "retrieval_eval_data" and value in _DATA_NAMES:
            return value
        if dest == "retrieval_eval_budget_tokenizer" and value in BUDGET_ENCODINGS:
            return value
        looks_like_path = os.sep in value or "/" in value or (base / path).exists()
        if dest == "retrieval_eval_model" and not (base / path).exists():
            looks_like_path = False  # "ORG/NAME" is a Hub id unless such a folder exists
        if dest == "retrieval_eval_vipune" and "/" not in value:
            looks_like_path = False  # a bare name is looked up on PATH
        if not looks_like_path:
            return value
    return str(base / path)


def _run_from_ini_folder(config: pytest.Config, name: str) -> str:
    """``run:PATH`` given in the ini file with a relative PATH: read from the ini's folder."""
    if not name.startswith(RUN_PREFIX):
        return name
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    path = Path(name[len(RUN_PREFIX):]).expanduser()
    return name if path.is_absolute() else f"{RUN_PREFIX}{base / path}"


def _value(config: pytest.Config, opt: Option) -> Any:
    cli = config.getoption(opt.dest, None)
    if cli is not None:
        return cli
    ini = _ini(config, opt)
    return opt.default if ini is None else ini


def _given(config: pytest.Config, dest: str) -> bool:
    """Whether the option was set on the command line or in the ini file."""
    opt = next(o for o in OPTIONS if o.dest == dest)
    return config.getoption(dest, None) is not None or _ini(config, opt) is not None


def check_ini_keys(config: pytest.Config) -> None:
    """A ``retrieval_eval_*`` ini key (file or ``-o``) that is no option: one usage line
    naming the key meant (pytest would ignore it, and the run use the default)."""
    from ..io.ini_file import ini_keys, unknown_key_line

    overrides = [str(o).partition("=")[0].strip()
                 for o in (config.getoption("override_ini", None) or [])]
    line = unknown_key_line([*ini_keys(config.inipath), *overrides], "retrieval_eval",
                            [opt.dest for opt in OPTIONS])
    if line is not None:
        raise usage_error(line)


def read_settings(config: pytest.Config) -> Settings:
    """Resolve every option (command line, then ini, then default) and check combinations."""
    check_ini_keys(config)
    v = {opt.dest.removeprefix("retrieval_eval_"): _value(config, opt) for opt in OPTIONS}
    v["enabled"] = v.pop("retrieval_eval")
    cache = v.pop("cache") or None  # None: cache.default_cache_dir() (env, XDG, ~/.cache)
    json_path = v.pop("json")
    store_dir = v.pop("store_dir")
    if v["protocol"] == "longmemeval":  # upstream's ks and retriever, unless asked otherwise
        if not _given(config, "retrieval_eval_k"):
            v["k"] = LONGMEMEVAL_KS
        if not _given(config, "retrieval_eval_retriever"):
            v["retriever"] = ("bm25",)
    compare, markdown, html = v.pop("compare"), v.pop("markdown"), v.pop("html")
    settings = Settings(
        html=Path(html).expanduser() if html else None,
        compare=Path(compare).expanduser() if compare else None,
        markdown=Path(markdown).expanduser() if markdown else None,
        cache_dir=Path(cache).expanduser() if cache else None,
        json_path=Path(json_path) if json_path else None,
        store_dir=Path(store_dir) if store_dir else None,
        ks=tuple(v.pop("k")),
        retrievers=tuple(v.pop("retriever")),
        explicit=frozenset(name for name in RECIPE_OPTIONS
                           if _given(config, f"retrieval_eval_{name}")),
        rootdir=config.rootpath,
        **v,
    )
    check_combinations(settings)
    return settings


def check_reference(settings: Settings, columns: Sequence[str]) -> None:
    """``--retrieval-eval-reference`` names a retriever of the run: one of its selectors or
    their columns (``columns``), else one usage line naming them. Where a column is known only
    once items run (``custom``'s fixture, a ``cmd:`` store's hello name) any name passes; the
    summary then says when the reference ranked nothing."""
    reference = settings.reference
    if reference is None or reference in settings.retrievers or reference in columns:
        return
    if any(name == "custom" or name.startswith("cmd:") for name in settings.retrievers):
        return
    known = ", ".join(dict.fromkeys([*columns, *settings.retrievers]))
    raise pytest.UsageError(
        f"--retrieval-eval-reference {reference!r} is not a retriever of this run ({known}); "
        f"name one of those, or add it to --retrieval-eval-retriever (e.g. "
        f"--retrieval-eval-retriever={','.join([*settings.retrievers, reference])})")


def check_combinations(settings: Settings) -> None:
    """Reject option combinations that cannot work, as usage errors."""
    if settings.compare_retrievers is not None and settings.compare is None:
        raise usage_error(
            "--retrieval-eval-compare-retrievers maps retrievers of a comparison, but no "
            "base is given; add --retrieval-eval-compare=BASE.json")
    if settings.budget_tokenizer is not None and not settings.budgets:
        raise usage_error(
            "--retrieval-eval-budget-tokenizer names the tokenizer a context budget counts "
            "in, but no budget is given; add --retrieval-eval-budget=500,2000,8000 (tokens)")
    if settings.no_model and settings.device == "cuda":
        raise usage_error(
            "--retrieval-eval-device cuda has nothing to run with --no-model "
            "(no model is loaded); drop one of them"
        )
    if settings.protocol == "longmemeval":
        stored = [name for name in settings.retrievers  # what-ifs of them too (hybrid+…)
                  if name.split("+", 1)[0] in STORE_RETRIEVERS]
        if stored:
            raise usage_error(
                f"--retrieval-eval-retriever {stored[0]} reads a vipune store, which holds each "
                f"id once, but --retrieval-eval-protocol longmemeval keeps every repeated "
                f"session slot as its own item; use bm25, semantic, oracle or your own "
                f"retriever with it, or --retrieval-eval-protocol=vipune")
    if settings.json_path is not None:
        if settings.json_path.is_dir():
            raise usage_error(
                f"--retrieval-eval-json {settings.json_path}: is a directory; give a file path"
            )
        _check_regular_target("--retrieval-eval-json", settings.json_path)
        _check_writable_folder("--retrieval-eval-json", settings.json_path,
                               settings.json_path.parent)
    if settings.store_dir is not None:
        _check_writable_folder("--retrieval-eval-store-dir", settings.store_dir,
                               settings.store_dir)
    if settings.markdown is not None:
        if settings.markdown.is_dir():
            raise usage_error(
                f"--retrieval-eval-markdown {settings.markdown}: is a directory; give a file "
                "path")
        _check_regular_target("--retrieval-eval-markdown", settings.markdown)
        _check_writable_folder("--retrieval-eval-markdown", settings.markdown,
                               settings.markdown.parent)
    if settings.html is not None:
        if settings.html.is_dir():
            raise usage_error(
                f"--retrieval-eval-html {settings.html}: is a directory; give a file path")
        _check_regular_target("--retrieval-eval-html", settings.html)
        _check_writable_folder("--retrieval-eval-html", settings.html, settings.html.parent)
    _check_outputs_apart(settings)


def _check_outputs_apart(settings: Settings) -> None:
    """No output of the run names its dataset, its base report or another of its outputs
    (by resolved path and by inode): the report would replace the file it was made from.
    Neither an output nor the folder of store exports lies inside a cache folder."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    outputs = [("--retrieval-eval-json", settings.json_path),
               ("--retrieval-eval-markdown", settings.markdown),
               ("--retrieval-eval-html", settings.html),
               ("$GITHUB_STEP_SUMMARY",
                Path(summary) if summary and not settings.no_step_summary else None)]
    # A folder of vipune store exports: checked against the cache folders only.
    folders = [("--retrieval-eval-store-dir", settings.store_dir)]
    if not settings.enabled or all(p is None for _, p in [*outputs, *folders]):
        return
    from ..data.dataset import KNOWN, SAMPLE_NAME, SAMPLE_PATH
    from ..io.user_files import first_clash, inside_folder

    data = settings.data.strip()
    data_path = (SAMPLE_PATH if data == SAMPLE_NAME else None if data in KNOWN
                 else Path(data).expanduser())
    clash = first_clash(outputs, [("--retrieval-eval-data", data_path),
                                  ("--retrieval-eval-compare", settings.compare),
                                  *retriever_inputs(settings.retrievers, settings.rootdir)])
    if clash is not None:
        option, path, other = clash
        raise usage_error(
            f"{option} {path} is the file {other} names: writing it would replace that file; "
            f"give {option} a path of its own")
    from ..vectors.cache import bundled_cache_dir, default_cache_dir

    caches: list[tuple[str, Path]] = [
        ("the run's cache (--retrieval-eval-cache)", settings.cache_dir or default_cache_dir()),
              ("the bundled sample's read-only cache", bundled_cache_dir())]
    for option, given in [*outputs, *folders]:
        for what, root in caches:
            if given is not None and inside_folder(given, root):
                raise usage_error(
                    f"{option} {given} lies inside {what} {root}: writing it could replace a "
                    f"cache file; give {option} a path outside that folder")
    from ..boundary.outputs import output_refusal

    for option, given, kind in (("--retrieval-eval-json", settings.json_path, "json"),
                                ("--retrieval-eval-markdown", settings.markdown, "markdown"),
                                ("--retrieval-eval-html", settings.html, "html")):
        refused = None if given is None else output_refusal(option, given, kind)
        if refused is not None:  # only where no file is, or over one of ours (issue 43.11)
            raise usage_error(refused)


def retriever_inputs(retrievers: tuple[str, ...],
                     rootdir: Path | None) -> list[tuple[str, Path]]:
    """The files the run's retrievers read, labelled as the retriever is named: a
    ``run:PATH`` file; every word of a ``cmd:`` command that names an existing file (from the
    rootdir, where the command runs), its executable as found on PATH too; a dotted-path
    retriever's module file (found without importing the module itself)."""
    import importlib.util
    import shutil

    from ..retrievers.command_selector import PREFIX as CMD_PREFIX
    from ..retrievers.command_selector import parse_command
    from ..retrievers.loader import is_dotted
    from ..retrievers.variants import split_dotted

    base = rootdir if rootdir is not None else Path.cwd()
    found: list[tuple[str, Path]] = []
    for name in retrievers:
        label = f"--retrieval-eval-retriever {name}"
        if name.startswith(RUN_PREFIX):
            found.append((label, Path(name[len(RUN_PREFIX):]).expanduser()))
        elif name.startswith((CMD_PREFIX, "mcp:")):
            try:
                argv = parse_command(name) if name.startswith(CMD_PREFIX) else list(
                    _mcp_argv(name))
            except Exception:
                continue  # options.py refused it already
            for index, word in enumerate(argv):
                path = base / Path(word).expanduser()
                if path.is_file():
                    found.append((label, path))
                elif index == 0 and (which := shutil.which(word)) is not None:
                    found.append((label, Path(which)))
        elif is_dotted(name):
            module = split_dotted(name)[0].partition(":")[0]
            try:
                spec = importlib.util.find_spec(module)
            except Exception:  # ImportError, ValueError: the loader says it at start-up
                continue
            if spec is not None and spec.origin and Path(spec.origin).is_file():
                found.append((label, Path(spec.origin)))
    return found


def _mcp_argv(name: str) -> tuple[str, ...]:
    """An ``mcp:`` selector's command words (none for a URL)."""
    from ..mcp.selector import parse_selector

    return parse_selector(name).argv


def _check_regular_target(option: str, value: Path) -> None:
    """A FIFO, device or socket at the report's path is refused before any work (the writer
    would refuse it only at the end of the run; it never replaces one)."""
    from ..io.user_files import TargetRefused, resolve_target

    try:
        resolve_target(value)
    except TargetRefused as exc:
        raise usage_error(f"{option} {value}: {exc.reason}; give a file path") from None
    except OSError:
        pass  # unreadable: _check_writable_folder, or the writer, says more


def _check_writable_folder(option: str, value: Path, folder: Path) -> None:
    """``folder`` is, or can be made as, a writable folder: its nearest existing ancestor is a
    writable directory. Checked before any work, so a long run never ends on a write error."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise usage_error(
            f"{option} {value}: {existing} is a file, not a folder; give a path in a "
            f"writable folder"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise usage_error(
            f"{option} {value}: folder {existing} is not writable; give a path in a "
            f"writable folder"
        )


def read_switch(config: pytest.Config) -> bool:
    """The ini twin of ``--retrieval-eval`` where pytest's ``bool`` reader gave no boolean: a
    string of a TOML-mode file read as in an ini file, or one line naming a bad value."""
    return bool(_ini(config, next(o for o in OPTIONS if o.dest == SWITCH)))
