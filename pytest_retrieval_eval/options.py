"""Command-line options, their ini twins, and the validated settings they produce.

Every option lives in one group, ``retrieval-eval``, with the prefix ``--retrieval-eval-``
(plus ``--no-model``, the short twin of ``--retrieval-eval-no-model``, added only where no other
plugin or conftest owns it). Each has an ini twin named ``retrieval_eval_*``; the command line
wins over the ini file, the ini file over the default. Values are checked by argparse ``type=``
validators; the same validators check ini values, so a bad value is one usage error either way.
A relative path in the ini file is read from the ini file's folder, as pytest's own path
options are; on the command line, from the working folder.

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .errors import RetrievalEvalError
from .io.hub_deadline import DEFAULT_DEADLINE
from .retrievers.variants import (
    VariantError,
    is_variant,
    parse_keywords,
    parse_variant,
    split_dotted,
)

MAX_K = 10_000  # vipune's MAX_SEARCH_LIMIT: no search may ask for more rows
DEFAULT_KS = (1, 5, 10)
LONGMEMEVAL_KS = (1, 3, 5, 10, 30, 50)  # LongMemEval's ks: src/retrieval/run_retrieval.py line 316
#: Retrievers that read a vipune store, which holds each id once: not under the longmemeval
#: protocol, whose corpus keeps repeated session slots as separate items.
STORE_RETRIEVERS = ("hybrid", "fts", "vipune")
DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"
DEFAULT_DATA = "sample"
DEFAULT_DATA_REPO = "xiaowu0162/longmemeval-cleaned"
DEFAULT_RETRIEVERS = ("hybrid",)
BUILTIN_RETRIEVERS = ("hybrid", "semantic", "fts", "bm25", "oracle", "vipune")
DEFAULT_NETWORK_DEADLINE = DEFAULT_DEADLINE  # seconds per Hub call (io/hub_deadline.py)
CUSTOM_RETRIEVER = "custom"  # ranked by the ``retrieval_eval_custom_retriever`` fixture
RUN_PREFIX = "run:"  # ``run:PATH``: a TREC run file (retrievers/trec_run.py)
COMMAND_PREFIX = "cmd:"  # a store run as a command (retrievers/command.py)
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
#: A whole number as typed: ASCII digits only (``int`` takes other scripts' digits, "1_0").
_WHOLE = re.compile(r"^-?[0-9]+$")


def _whole(value: str) -> int:
    """``value`` as an int when it is ASCII digits (an optional minus), else ValueError."""
    if not _WHOLE.match(value):
        raise ValueError(value)
    return int(value)


def parse_ks(value: str) -> tuple[int, ...]:
    """``"1,5,10"`` -> ``(1, 5, 10)``: positive integers up to 10,000, sorted, unique."""
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"k list {value!r} is empty; give e.g. 1,5,10")
    ks: set[int] = set()
    for part in parts:
        try:
            k = _whole(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"k {part!r} is not a whole number; give a comma list such as 1,5,10"
            ) from None
        if k <= 0 or k > MAX_K:
            raise argparse.ArgumentTypeError(
                f"k {k} is out of range; each k must lie in 1..{MAX_K} "
                "(vipune's MAX_SEARCH_LIMIT)"
            )
        ks.add(k)
    return tuple(sorted(ks))


def parse_retrievers(value: str) -> tuple[str, ...]:
    """A comma list of retriever names or ``package.module:attr`` dotted paths."""
    names = [p.strip() for p in str(value).split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError("retriever list is empty; give e.g. hybrid")
    valid = (*BUILTIN_RETRIEVERS, CUSTOM_RETRIEVER)
    for name in names:
        if name.startswith(RUN_PREFIX):  # "run:PATH", a TREC run file: read at session start
            if not name[len(RUN_PREFIX):].strip():
                raise argparse.ArgumentTypeError(
                    f"retriever {name!r} names no file; give run:PATH of a TREC run file")
        elif name.startswith(COMMAND_PREFIX):  # "cmd:node store.js" (a comma ends it)
            from .retrievers.command import parse_command  # numpy: only when asked

            try:
                parse_command(name)
            except RetrievalEvalError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        elif is_variant(name):  # "hybrid+rrf_k:60+fts:or": checked now, a usage error if bad
            try:
                parse_variant(name)
            except VariantError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        elif _DOTTED.match(split_dotted(name)[0]) and "+" in name:  # module:Class+key:value
            try:
                parse_keywords(name)
            except VariantError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        elif name not in valid and not _DOTTED.match(name):
            raise argparse.ArgumentTypeError(
                f"unknown retriever {name!r}; choose from {', '.join(valid)}, a what-if "
                "such as hybrid+fts:or, or a dotted path package.module:attr"
            )
    return tuple(dict.fromkeys(names))


def _int_at_least(value: str, low: int) -> int:
    try:
        number = _whole(str(value).strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < low:
        raise argparse.ArgumentTypeError(f"{number} must be at least {low}")
    return number


def positive_int(value: str) -> int:
    """A whole number of at least 1."""
    return _int_at_least(value, 1)


def nonnegative_int(value: str) -> int:
    """A whole number of at least 0 (a seed)."""
    return _int_at_least(value, 0)


def positive_float(value: str) -> float:
    """A finite number above 0 (seconds): ``inf`` and ``nan`` are refused."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"{value!r} is not a finite number; give seconds "
                                         f"such as 60")
    if not number > 0:
        raise argparse.ArgumentTypeError(f"{number} must be above 0")
    return number


def deadline_seconds(value: str) -> float:
    """Seconds of a network deadline: a finite number above 0."""
    number = positive_float(value)
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"{value!r} is not a finite number of seconds; give "
                                         f"e.g. {DEFAULT_NETWORK_DEADLINE:g}")
    return number


def finite_seconds(value: str) -> float:
    """A finite number of seconds above 0."""
    number = positive_float(value)
    if number == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} must be a finite number of seconds")
    return number


def max_length(value: str) -> int:
    """A tokenizer truncation length in 2..512 (bge and MiniLM take 512 positions)."""
    number = positive_int(value)
    if not 2 <= number <= 512:
        raise argparse.ArgumentTypeError(f"max length {number} must lie in 2..512")
    return number


def choice(*allowed: str) -> Callable[[str], str]:
    """A validator accepting one of ``allowed``."""

    def check(value: str) -> str:
        if value not in allowed:
            raise argparse.ArgumentTypeError(
                f"{value!r} is not one of {', '.join(allowed)}"
            )
        return value

    check.__name__ = "choice"
    return check


def repo_id(value: str) -> str:
    """A Hugging Face Hub repo id, ``ORG/NAME``."""
    from .vectors.hub_sync import valid_repo_id

    if not valid_repo_id(value.strip()):
        raise argparse.ArgumentTypeError(f"{value!r} is not a Hub repo id; give ORG/NAME")
    return value.strip()


def text(value: str) -> str:
    """Any string."""
    return str(value)


def path_text(value: str) -> str:
    """A path (or name) that is not empty: ``--retrieval-eval-json=`` is refused, not taken
    as "no report" (an empty ini value still means unset)."""
    if not str(value).strip():
        raise argparse.ArgumentTypeError("the value is empty; give one, or leave the option out")
    return str(value)


def compare_map(value: str) -> str:
    """``BASE_NAME=NEW_NAME[,...]`` (or ``NAME``), checked as ``compare --retrievers`` reads
    it; kept as text, parsed again where the comparison is made."""
    from .errors import RetrievalEvalError
    from .reporting.compare import parse_retrievers

    try:
        parse_retrievers(str(value), one_report=False)
    except RetrievalEvalError as exc:
        raise argparse.ArgumentTypeError(
            str(exc).replace("--retrievers ", "")) from None
    return str(value)


def boolean(value: str) -> bool:
    """An ini boolean: true/false, yes/no, 1/0, on/off."""
    lowered = str(value).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"{value!r} is not a boolean (true/false)")


@dataclass(frozen=True)
class _Option:
    flag: str  # command-line flag
    dest: str  # argparse dest; the ini twin is the same name
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str | None = None
    is_flag: bool = False  # store_true


OPTIONS: tuple[_Option, ...] = (
    _Option("--retrieval-eval", "retrieval_eval", boolean, False,
            "score retrieval on LongMemEval: one item per pair and retriever, a recall@k "
            "table by question type (default: off; the plugin then adds nothing)", is_flag=True),
    _Option("--retrieval-eval-data", "retrieval_eval_data", path_text, DEFAULT_DATA,
            "dataset: sample (bundled), longmemeval_s, longmemeval_m, longmemeval_oracle "
            "(downloaded once from the Hugging Face Hub) or a path to a LongMemEval JSON file "
            f"(default: {DEFAULT_DATA})", "SPEC"),
    _Option("--retrieval-eval-data-repo", "retrieval_eval_data_repo", path_text,
            DEFAULT_DATA_REPO,
            f"Hugging Face dataset repo for named datasets (default: {DEFAULT_DATA_REPO})",
            "REPO"),
    _Option("--retrieval-eval-data-file", "retrieval_eval_data_file", path_text, None,
            "file name inside the dataset repo, overriding the named dataset's "
            "(default: longmemeval_s_cleaned.json, longmemeval_m_cleaned.json or "
            "longmemeval_oracle.json)", "NAME"),
    _Option("--retrieval-eval-k", "retrieval_eval_k", parse_ks, DEFAULT_KS,
            "comma list of cut-offs k, each in 1..10000 (default: 1,5,10)", "K[,K...]"),
    _Option("--retrieval-eval-retriever", "retrieval_eval_retriever", parse_retrievers,
            DEFAULT_RETRIEVERS,
            "comma list of retrievers to score side by side: hybrid (vipune's search_hybrid "
            "reference), semantic, fts, bm25 (LongMemEval's baseline), oracle (self-check), "
            "vipune (the real binary), custom (the retrieval_eval_custom_retriever fixture), "
            "package.module:attr, run:PATH (a TREC run file, its column named by its tag), "
            "cmd:COMMAND (a store in any language, JSON lines on its "
            "stdin and stdout, docs/cmd-protocol.md; no comma in it), or a what-if such as "
            "hybrid+rrf_k:60+fts:or, "
            "hybrid+pool:100, hybrid+recency:0.3, fts+mode:or, semantic+dtype:float32 "
            "(docs/diagnostics.md) (default: hybrid)", "NAME[,NAME...]"),
    _Option("--retrieval-eval-json", "retrieval_eval_json", path_text, None,
            "write the JSON report to this path (default: none)", "PATH"),
    _Option("--retrieval-eval-compare", "retrieval_eval_compare", path_text, None,
            "compare this run with the JSON report BASE.json, pair by pair (delta with its "
            "bootstrap interval, paired randomization p-value, Holm): printed under the "
            "summary and put in the JSON report; never changes the exit status (default: "
            "none)", "BASE.json"),
    _Option("--retrieval-eval-compare-retrievers", "retrieval_eval_compare_retrievers",
            compare_map, None,
            "with --retrieval-eval-compare: which base retriever each of this run's is "
            "compared with, BASE_NAME=NEW_NAME or NAME, comma-separated "
            "(hybrid=hybrid+fts:or); others are left out (default: the same names)",
            "BASE=NEW[,...]"),
    _Option("--retrieval-eval-markdown", "retrieval_eval_markdown", path_text, None,
            "write the summary (and the comparison) as GitHub-flavoured Markdown to PATH "
            "(default: none)", "PATH"),
    _Option("--retrieval-eval-no-step-summary", "retrieval_eval_no_step_summary", boolean,
            False, "do not append the Markdown summary to $GITHUB_STEP_SUMMARY (default: "
            "appended when that variable is set)", is_flag=True),
    _Option("--retrieval-eval-no-model", "retrieval_eval_no_model", boolean, False,
            "model-free lane: load no model, touch no network; query and passage vectors "
            "come from the prep cache; also spelled --no-model, unless another plugin or a "
            "conftest owns that name (default: off, the model lane embeds each query live)",
            is_flag=True),
    _Option("--retrieval-eval-model", "retrieval_eval_model", path_text, None,
            "embedding model: a Hugging Face id or a local folder with onnx/model.onnx (or "
            f"model.onnx) and tokenizer.json (default: {DEFAULT_MODEL}; with --no-model, the "
            "one model whose vectors the cache holds for the dataset)", "ID|DIR"),
    _Option("--retrieval-eval-pooling", "retrieval_eval_pooling", choice("mean", "cls"), "mean",
            "token pooling: mean (vipune's recipe) or cls (bge's card) (default: mean)",
            "mean|cls"),
    _Option("--retrieval-eval-max-length", "retrieval_eval_max_length", max_length, 512,
            "tokens kept per text, special tokens included, 2..512 (default: 512)", "N"),
    _Option("--retrieval-eval-query-prefix", "retrieval_eval_query_prefix", text, "",
            "instruction prepended to queries before embedding (default: none, as vipune)",
            "TEXT"),
    _Option("--retrieval-eval-device", "retrieval_eval_device", choice("cpu", "cuda"), "cpu",
            "onnxruntime device for embedding (default: cpu)", "cpu|cuda"),
    _Option("--retrieval-eval-threads", "retrieval_eval_threads", positive_int, None,
            "onnxruntime CPU threads (default: onnxruntime's choice)", "N"),
    _Option("--retrieval-eval-batch-size", "retrieval_eval_batch_size", positive_int, 32,
            "texts per embedding batch during prep (default: 32)", "N"),
    _Option("--retrieval-eval-cache", "retrieval_eval_cache", path_text, None,
            "cache folder for prep output, vectors and stores (default: "
            "$RETRIEVAL_EVAL_CACHE_DIR, else $XDG_CACHE_HOME/pytest-retrieval-eval or "
            "~/.cache/pytest-retrieval-eval; untouched by --cache-clear)", "DIR"),
    _Option("--retrieval-eval-cache-repo", "retrieval_eval_cache_repo", repo_id, None,
            "Hugging Face Hub dataset repo made by `retrieval-eval cache push`: vectors the "
            "cache lacks are pulled from it before they would be embedded (model lane) or "
            "missed (--no-model); needs the network only then (default: none)", "ORG/NAME"),
    _Option("--retrieval-eval-store-dir", "retrieval_eval_store_dir", path_text, None,
            "also keep each persona's vipune store (hybrid, fts, vipune) here as "
            "<question_id>.sqlite for inspection (default: stores live only in the cache)",
            "DIR"),
    _Option("--retrieval-eval-vipune", "retrieval_eval_vipune", path_text, "vipune",
            "the vipune binary for the vipune retriever (default: vipune on PATH)", "PATH"),
    _Option("--retrieval-eval-protocol", "retrieval_eval_protocol",
            choice("vipune", "longmemeval"), "vipune",
            "what is scored: vipune (one row per session, answer_session_ids, recall@k) or "
            "longmemeval (LongMemEval's own retrieval experiment: user turns only, every "
            "session slot kept, its question set, gold, ties and metrics; k defaults to "
            "1,3,5,10,30,50 and the retriever to bm25) (default: vipune)", "vipune|longmemeval"),
    _Option("--retrieval-eval-granularity", "retrieval_eval_granularity",
            choice("session", "turn"), "session",
            "corpus item: a session, or a turn (id <session_id>_<n>, gold the has_answer turns, "
            "session metrics derived from the turn ranking) (default: session)",
            "session|turn"),
    _Option("--retrieval-eval-vipune-timeout", "retrieval_eval_vipune_timeout", positive_float,
            60.0, "seconds one vipune search may take before its item fails (default: 60)",
            "SECONDS"),
    _Option("--retrieval-eval-cmd-timeout", "retrieval_eval_cmd_timeout", finite_seconds,
            60.0, "seconds a cmd: retriever may take to answer hello or one rank before its "
            "item fails and the command is stopped (default: 60)", "SECONDS"),
    _Option("--retrieval-eval-cmd-index-timeout", "retrieval_eval_cmd_index_timeout",
            finite_seconds, 600.0, "seconds a cmd: retriever may take to answer one persona's "
            "index request (default: 600)", "SECONDS"),
    # Stratified subsets (subset.py): N usable pairs, proportional by question type.
    _Option("--retrieval-eval-subset", "retrieval_eval_subset", positive_int, None,
            "score (and prep) only N usable pairs, stratified by question type: proportional, "
            "at least one per type, fixed by the dataset's sha256 and the seed "
            "(default: every pair)", "N"),
    _Option("--retrieval-eval-subset-seed", "retrieval_eval_subset_seed", nonnegative_int, 0,
            "seed of the subset's choice (default: 0)", "S"),
    # Network (io/hub_deadline.py): each Hub call's overall deadline.
    _Option("--retrieval-eval-network-deadline", "retrieval_eval_network_deadline",
            deadline_seconds, DEFAULT_NETWORK_DEADLINE,
            "seconds each Hub call may take in all (a dataset's or model's download, plus a "
            "second per 250 kB of it; --retrieval-eval-cache-repo's listing and files) "
            f"(default: {DEFAULT_NETWORK_DEADLINE:g})", "SECONDS"),
)


def _command_line(opt: _Option) -> Callable[[str], Any]:
    """``opt.parse`` as an argparse ``type=``, but a bad value raises :class:`pytest.UsageError`
    itself: argparse passes that through (it turns only ArgumentTypeError, TypeError and
    ValueError into its own error), so pytest prints one ``ERROR:`` line instead of its usage
    banner followed by argparse's message."""

    def parse(value: str) -> Any:
        try:
            return opt.parse(value)
        except argparse.ArgumentTypeError as exc:
            raise pytest.UsageError(f"{opt.flag}: {exc}") from None

    parse.__name__ = opt.parse.__name__
    return parse


def add_options(parser: pytest.Parser) -> None:
    """Register the option group and the ini twins."""
    group = parser.getgroup("retrieval-eval", "retrieval evaluation (pytest-retrieval-eval)")
    for opt in OPTIONS:
        if opt.is_flag:
            group.addoption(opt.flag, action="store_true", dest=opt.dest, default=None,
                            help=opt.help)
        else:
            group.addoption(opt.flag, dest=opt.dest, type=_command_line(opt), default=None,
                            metavar=opt.metavar, help=opt.help)
        if opt.is_flag:  # pytest's "bool"; a bad value is still one line naming it (_ini)
            parser.addini(opt.dest, help=opt.help, type="bool", default=None)
        else:  # read as text and parsed by the option's own validator
            parser.addini(opt.dest, help=opt.help, type="string", default="")


NO_MODEL_ALIAS = "--no-model"


def add_no_model_alias(parser: pytest.Parser) -> None:
    """Add ``--no-model`` (the name vipune's users asked for) as a twin of
    ``--retrieval-eval-no-model``, unless an option of that name exists already (another
    plugin's, or an initial conftest's): argparse would then refuse to start pytest at all."""
    try:
        _, unknown = parser.parse_known_and_unknown_args([NO_MODEL_ALIAS])
    except (pytest.UsageError, SystemExit):  # known, and it wants a value: owned
        return
    if NO_MODEL_ALIAS not in unknown:
        return
    group = parser.getgroup("retrieval-eval")
    group.addoption(NO_MODEL_ALIAS, action="store_true", dest="retrieval_eval_no_model",
                    default=None, help="the same as --retrieval-eval-no-model (default: off)")


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
    rootdir: Path | None = None  # where a cmd: retriever's command runs

    @property
    def max_k(self) -> int:
        return max(self.ks)


#: Settings fields that change a vector (the recipe, beside the model's files).
RECIPE_OPTIONS = ("pooling", "max_length", "query_prefix")

#: Options whose value is a path: relative ones in the ini file are read from its folder.
INI_PATHS = ("retrieval_eval_json", "retrieval_eval_compare", "retrieval_eval_markdown",
             "retrieval_eval_cache", "retrieval_eval_store_dir")
#: Options whose value may be a path or a name: resolved from the ini file's folder when it
#: looks like a path (holds a separator, or names something there).
INI_MAYBE_PATHS = ("retrieval_eval_data", "retrieval_eval_model", "retrieval_eval_vipune")
_DATA_NAMES = ("sample", "longmemeval_s", "longmemeval_m", "longmemeval_oracle")


#: What a native TOML value (pytest >= 9: ``pytest.toml``, ``[tool.pytest]``) of an option may
#: be, by the option's validator: (what it takes, an example value in TOML).
_INT_PARSERS = ("positive_int", "nonnegative_int", "max_length")
_FLOAT_PARSERS = ("positive_float", "deadline_seconds", "finite_seconds")
_MISSING = object()


def _ini_takes(opt: _Option) -> tuple[str, str]:
    """What ``opt``'s ini twin takes, in words, and an example of it in TOML."""
    name = opt.parse.__name__
    if opt.is_flag:
        return "a boolean", "true"
    if name == "parse_ks":
        return "a list of whole numbers (or one)", "[1, 5, 10]"
    if name == "parse_retrievers":
        return "a list of retriever names", '["hybrid", "bm25"]'
    if name == "compare_map":
        return "a list of BASE=NEW mappings", '["hybrid=hybrid+fts:or"]'
    if name in _INT_PARSERS:
        return "a whole number", str(opt.default if isinstance(opt.default, int) else 8)
    if name in _FLOAT_PARSERS:
        return "a number of seconds", f"{opt.default:g}" if opt.default else "60"
    word = opt.default if isinstance(opt.default, str) and opt.default else opt.metavar
    return "a string", f'"{word or "..."}"'


def _type_error(opt: _Option, got: str) -> pytest.UsageError:
    takes, example = _ini_takes(opt)
    return pytest.UsageError(
        f"ini option {opt.dest} takes {takes}, e.g. {opt.dest} = {example}; got {got}")


def _native_text(opt: _Option, raw: Any) -> str:
    """A TOML-typed ini value as the text the option's validator reads (``[1, 3]`` -> "1,3").
    Each type is taken only where it makes sense; any other is one line naming the type."""
    name = opt.parse.__name__
    got = f"{type(raw).__name__} {raw!r}"
    if isinstance(raw, bool):
        if opt.is_flag:
            return "true" if raw else "false"
        raise _type_error(opt, got)
    if isinstance(raw, int) and name in (*_INT_PARSERS, *_FLOAT_PARSERS, "parse_ks"):
        return str(raw)
    if isinstance(raw, float) and name in _FLOAT_PARSERS:
        return repr(raw)
    if isinstance(raw, list) and name in ("parse_ks", "parse_retrievers", "compare_map"):
        item_type = int if name == "parse_ks" else str
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


def _ini(config: pytest.Config, opt: _Option) -> Any:
    """The ini twin's value (None: not set). A string is read as on the command line; under
    pytest >= 9 a TOML-mode file may give the option's native type instead (a list of ks, a
    whole number, a boolean): :func:`_native_text`."""
    try:
        raw = config.getini(opt.dest)
    except (ValueError, TypeError, pytest.UsageError) as exc:  # pytest's "bool", or TOML types
        raw = _toml_value(config, opt.dest)
        if raw is _MISSING:
            if opt.is_flag:
                raise pytest.UsageError(f"ini option {opt.dest}: {exc}; give true or false"
                                        ) from None
            raise _type_error(opt, str(exc)) from None
    if opt.is_flag:  # unset: None, or [] under pytest < 9 (its default for a None default)
        if not isinstance(raw, (bool, str, list)) and raw is not None:  # TOML's 1, 1.0, ...
            raise _type_error(opt, f"{type(raw).__name__} {raw!r}")
        if isinstance(raw, str):  # a string in a TOML-mode file: read as in an ini file
            return _parse_ini(opt, raw) if raw.strip() else None
        return raw if isinstance(raw, bool) else None
    if isinstance(raw, str):
        return _from_ini_folder(config, opt.dest, _parse_ini(opt, raw)) if raw.strip() else None
    return _from_ini_folder(config, opt.dest, _parse_ini(opt, _native_text(opt, raw)))


def _parse_ini(opt: _Option, text_value: str) -> Any:
    try:
        return opt.parse(text_value.strip())
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {opt.dest}: {exc}") from None


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


def _value(config: pytest.Config, opt: _Option) -> Any:
    cli = config.getoption(opt.dest, None)
    if cli is not None:
        return cli
    ini = _ini(config, opt)
    return opt.default if ini is None else ini


def _given(config: pytest.Config, dest: str) -> bool:
    """Whether the option was set on the command line or in the ini file."""
    opt = next(o for o in OPTIONS if o.dest == dest)
    return config.getoption(dest, None) is not None or _ini(config, opt) is not None


def read_settings(config: pytest.Config) -> Settings:
    """Resolve every option (command line, then ini, then default) and check combinations."""
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
    compare, markdown = v.pop("compare"), v.pop("markdown")
    settings = Settings(
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


def check_combinations(settings: Settings) -> None:
    """Reject option combinations that cannot work, as usage errors."""
    if settings.compare_retrievers is not None and settings.compare is None:
        raise pytest.UsageError(
            "--retrieval-eval-compare-retrievers maps retrievers of a comparison, but no "
            "base is given; add --retrieval-eval-compare=BASE.json")
    if settings.no_model and settings.device == "cuda":
        raise pytest.UsageError(
            "--retrieval-eval-device cuda has nothing to run with --no-model "
            "(no model is loaded); drop one of them"
        )
    if settings.protocol == "longmemeval":
        stored = [name for name in settings.retrievers  # what-ifs of them too (hybrid+…)
                  if name.split("+", 1)[0] in STORE_RETRIEVERS]
        if stored:
            raise pytest.UsageError(
                f"--retrieval-eval-retriever {stored[0]} reads a vipune store, which holds each "
                f"id once, but --retrieval-eval-protocol longmemeval keeps every repeated "
                f"session slot as its own item; use bm25, semantic, oracle or your own "
                f"retriever with it, or --retrieval-eval-protocol vipune")
    if settings.json_path is not None:
        if settings.json_path.is_dir():
            raise pytest.UsageError(
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
            raise pytest.UsageError(
                f"--retrieval-eval-markdown {settings.markdown}: is a directory; give a file "
                "path")
        _check_regular_target("--retrieval-eval-markdown", settings.markdown)
        _check_writable_folder("--retrieval-eval-markdown", settings.markdown,
                               settings.markdown.parent)
    _check_outputs_apart(settings)


def _check_outputs_apart(settings: Settings) -> None:
    """No output of the run names its dataset, its base report or another of its outputs
    (by resolved path and by inode): the report would replace the file it was made from."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    outputs = [("--retrieval-eval-json", settings.json_path),
               ("--retrieval-eval-markdown", settings.markdown),
               ("$GITHUB_STEP_SUMMARY",
                Path(summary) if summary and not settings.no_step_summary else None)]
    if not settings.enabled or all(p is None for _, p in outputs):
        return
    from .data.dataset import KNOWN, SAMPLE_NAME, SAMPLE_PATH
    from .io.user_files import first_clash

    data = settings.data.strip()
    data_path = (SAMPLE_PATH if data == SAMPLE_NAME else None if data in KNOWN
                 else Path(data).expanduser())
    clash = first_clash(outputs, [("--retrieval-eval-data", data_path),
                                  ("--retrieval-eval-compare", settings.compare)])
    if clash is not None:
        option, path, other = clash
        raise pytest.UsageError(
            f"{option} {path} is the file {other} names: writing it would replace that file; "
            f"give {option} a path of its own")


def _check_regular_target(option: str, value: Path) -> None:
    """A FIFO, device or socket at the report's path is refused before any work (the writer
    would refuse it only at the end of the run; it never replaces one)."""
    from .io.user_files import TargetRefused, resolve_target

    try:
        resolve_target(value)
    except TargetRefused as exc:
        raise pytest.UsageError(f"{option} {value}: {exc.reason}; give a file path") from None
    except OSError:
        pass  # unreadable: _check_writable_folder, or the writer, says more


def _check_writable_folder(option: str, value: Path, folder: Path) -> None:
    """``folder`` is, or can be made as, a writable folder: its nearest existing ancestor is a
    writable directory. Checked before any work, so a long run never ends on a write error."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise pytest.UsageError(
            f"{option} {value}: {existing} is a file, not a folder; give a path in a "
            f"writable folder"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise pytest.UsageError(
            f"{option} {value}: folder {existing} is not writable; give a path in a "
            f"writable folder"
        )

