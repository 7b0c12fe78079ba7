"""The option group: every command-line option, its ini twin and its argparse validator.

Every option lives in one group, ``retrieval-eval``, with the prefix ``--retrieval-eval-``
(plus ``--no-model``, the short twin of ``--retrieval-eval-no-model``, added only where no other
plugin or conftest owns it). Each has an ini twin named ``retrieval_eval_*``; the command line
wins over the ini file, the ini file over the default. Values are checked by argparse ``type=``
validators; the same validators check ini values (:mod:`.settings` reads those and makes the
run's ``Settings``), so a bad value is one usage error either way.

A run with the plugin off loads this module to register the options and read the on/off
switch (:data:`SWITCH`, :func:`.plugin.switched_on`), and nothing more of the plugin besides
the hook module and the fixtures: a validator imports what it checks with (the what-if
grammar, a command's parser, the Hub's id rule) only when its option is given.

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

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
BUILTIN_RETRIEVERS = ("hybrid", "semantic", "fts", "bm25", "oracle", "vipune", "mem0",
                      "llamaindex", "langchain")
#: Seconds per Hub call: io/hub_deadline.py's DEFAULT_DEADLINE (a test pins the two equal;
#: that module is not loaded while the plugin is off).
DEFAULT_NETWORK_DEADLINE = 600.0
CUSTOM_RETRIEVER = "custom"  # ranked by the ``retrieval_eval_custom_retriever`` fixture
RUN_PREFIX = "run:"  # ``run:PATH``: a TREC run file (retrievers/trec_run.py)
COMMAND_PREFIX = "cmd:"  # a store run as a command (retrievers/command.py)
MCP_PREFIX = "mcp:"  # a memory server over MCP (mcp/)
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


#: The largest context budget taken, in tokens (ten million: far past any reader's window).
MAX_BUDGET = 10_000_000
#: The readers' tokenizers counted offline (vectors/token_counts.py's ENCODINGS; a test pins
#: the two equal: that module is not loaded while the plugin is off).
BUDGET_ENCODINGS = ("o200k_base", "cl100k_base")
DEFAULT_BUDGET_TOKENIZER = "o200k_base"


def parse_budgets(value: str) -> tuple[int, ...]:
    """``"500,2000,8000"`` -> ``(500, 2000, 8000)``: context budgets in tokens, each a whole
    number in 1..10,000,000, sorted, unique."""
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"budget list {value!r} is empty; give tokens such as "
                                         "500,2000,8000")
    budgets: set[int] = set()
    for part in parts:
        try:
            budget = _whole(part.removesuffix("tok"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"budget {part!r} is not a whole number of tokens; give a comma list such as "
                "500,2000,8000") from None
        if not 1 <= budget <= MAX_BUDGET:
            raise argparse.ArgumentTypeError(
                f"budget {budget} is out of range; each budget must lie in 1..{MAX_BUDGET} "
                "tokens")
        budgets.add(budget)
    return tuple(sorted(budgets))


def parse_tables(value: str) -> tuple[str, ...]:
    """``"recall,budget"`` -> ``("recall", "budget")``: the summary's tables (or ``all``)."""
    names = tuple(dict.fromkeys(p.strip() for p in value.split(",") if p.strip()))
    if not names or not all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names):
        raise argparse.ArgumentTypeError(f"table list {value!r} is not a comma list of table "
                                         "names; give e.g. recall,recall_any,budget,timing or all")
    return names


def budget_tokenizer(value: str) -> str:
    """``o200k_base``, ``cl100k_base`` or the path of a ``tokenizer.json`` (read when the
    run starts: a missing file is one line then)."""
    value = str(value).strip()
    if not value:
        raise argparse.ArgumentTypeError(
            f"the value is empty; give {', '.join(BUDGET_ENCODINGS)} or the path of a "
            "tokenizer.json")
    return value


def parse_retrievers(value: str) -> tuple[str, ...]:
    """A comma list of retriever names or ``package.module:attr`` dotted paths."""
    names = [p.strip() for p in str(value).split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError("retriever list is empty; give e.g. hybrid")
    from ..retrievers.variants import (
        VariantError,
        is_variant,
        parse_keywords,
        parse_variant,
        split_dotted,
    )

    valid = (*BUILTIN_RETRIEVERS, CUSTOM_RETRIEVER)
    cut = next((n for n in names if n.count("[") != n.count("]")
                or n.count("{") != n.count("}")), None)
    if cut is not None:  # "pkg:Class+x:[1,2]" split at its comma into "…+x:[1" and "2]"
        raise argparse.ArgumentTypeError(
            f"retriever list {str(value).strip()!r}: a comma ends a retriever, so {cut!r} is "
            "cut there and a list cannot be an argument's value; an argument takes one "
            "number, boolean or word (module:Class+key:value): pass a list through a "
            "no-argument factory (module:make_store) or the class's default")
    for name in names:
        if name.startswith(RUN_PREFIX):  # "run:PATH", a TREC run file: read at session start
            if not name[len(RUN_PREFIX):].strip():
                raise argparse.ArgumentTypeError(
                    f"retriever {name!r} names no file; give run:PATH of a TREC run file")
        elif name.startswith(COMMAND_PREFIX):  # "cmd:node store.js" (a comma ends it)
            from ..errors import RetrievalEvalError
            from ..retrievers.command import parse_command  # numpy: only when asked

            try:
                parse_command(name)
            except RetrievalEvalError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        elif name.startswith(MCP_PREFIX):  # "mcp:server+preset:vipune": its words, options
            from ..errors import RetrievalEvalError
            from ..mcp.mapping import check_options
            from ..mcp.selector import parse_selector

            try:
                check_options(name, parse_selector(name).options)
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
            from difflib import get_close_matches

            meant = get_close_matches(name, valid, n=1, cutoff=0.6)
            raise argparse.ArgumentTypeError(
                f"unknown retriever {name!r}; "
                + (f"did you mean {meant[0]!r}? " if meant else "")
                + f"choose from {', '.join(valid)}, a what-if such as hybrid+fts:or, or a "
                "dotted path package.module:attr")
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


def llm_spec(value: str) -> str:
    """``PROVIDER`` or ``PROVIDER:MODEL`` (mem0's provider names: lower-case words)."""
    value = str(value).strip()
    if not re.fullmatch(r"[a-z][a-z0-9_]*(?::\S+)?", value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not PROVIDER or PROVIDER:MODEL; give e.g. openai:gpt-4.1-nano")
    return value


def base_url(value: str) -> str:
    """An ``http://`` or ``https://`` URL."""
    value = str(value).strip()
    if not re.fullmatch(r"https?://\S+", value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an http(s) URL; give e.g. http://127.0.0.1:8000/v1")
    return value


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
    from ..vectors.hub_sync import valid_repo_id

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
    from ..errors import RetrievalEvalError
    from ..reporting.compare import parse_retrievers

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
class Option:
    flag: str  # command-line flag
    dest: str  # argparse dest; the ini twin is the same name
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str | None = None
    is_flag: bool = False  # store_true


OPTIONS: tuple[Option, ...] = (
    Option("--retrieval-eval", "retrieval_eval", boolean, False,
            "score retrieval on LongMemEval: one item per pair and retriever, a recall@k "
            "table by question type (default: off; the plugin then adds nothing)", is_flag=True),
    Option("--retrieval-eval-data", "retrieval_eval_data", path_text, DEFAULT_DATA,
            "dataset: sample (bundled), longmemeval_s, longmemeval_m, longmemeval_oracle "
            "(downloaded once from the Hugging Face Hub) or a path to a LongMemEval JSON file "
            f"(default: {DEFAULT_DATA})", "SPEC"),
    Option("--retrieval-eval-data-repo", "retrieval_eval_data_repo", path_text,
            DEFAULT_DATA_REPO,
            f"Hugging Face dataset repo for named datasets (default: {DEFAULT_DATA_REPO})",
            "REPO"),
    Option("--retrieval-eval-data-file", "retrieval_eval_data_file", path_text, None,
            "file name inside the dataset repo, overriding the named dataset's "
            "(default: longmemeval_s_cleaned.json, longmemeval_m_cleaned.json or "
            "longmemeval_oracle.json)", "NAME"),
    Option("--retrieval-eval-k", "retrieval_eval_k", parse_ks, DEFAULT_KS,
            "comma list of cut-offs k, each in 1..10000 (default: 1,5,10)", "K[,K...]"),
    Option("--retrieval-eval-retriever", "retrieval_eval_retriever", parse_retrievers,
            DEFAULT_RETRIEVERS,
            "comma list of retrievers to score side by side: hybrid (vipune's search_hybrid "
            "reference), semantic, fts, bm25 (LongMemEval's baseline), oracle (self-check), "
            "vipune (the real binary), custom (the retrieval_eval_custom_retriever fixture), "
            "package.module:attr, run:PATH (a TREC run file, its column named by its tag), "
            "cmd:COMMAND (a store in any language, JSON lines on its "
            "stdin and stdout, docs/cmd-protocol.md; no comma in it), or a what-if such as "
            "hybrid+rrf_k:60+fts:or, "
            "hybrid+pool:100, hybrid+recency:0.3, fts+mode:or, semantic+dtype:float32 "
            "(docs/diagnostics.md); NAME+unit:turn ranks the persona's turns as memories, "
            "e.g. semantic+unit:turn (docs/memories.md) (default: hybrid)", "NAME[,NAME...]"),
    Option("--retrieval-eval-json", "retrieval_eval_json", path_text, None,
            "write the JSON report to this path (default: none)", "PATH"),
    Option("--retrieval-eval-compare", "retrieval_eval_compare", path_text, None,
            "compare this run with the JSON report BASE.json, pair by pair (delta with its "
            "bootstrap interval, paired randomization p-value, Holm): printed under the "
            "summary and put in the JSON report; never changes the exit status (default: "
            "none)", "BASE.json"),
    Option("--retrieval-eval-compare-retrievers", "retrieval_eval_compare_retrievers",
            compare_map, None,
            "with --retrieval-eval-compare: which base retriever each of this run's is "
            "compared with, BASE_NAME=NEW_NAME or NAME, comma-separated "
            "(hybrid=hybrid+fts:or); others are left out (default: the same names)",
            "BASE=NEW[,...]"),
    Option("--retrieval-eval-markdown", "retrieval_eval_markdown", path_text, None,
            "write the summary (and the comparison) as GitHub-flavoured Markdown to PATH "
            "(default: none)", "PATH"),
    Option("--retrieval-eval-html", "retrieval_eval_html", path_text, None,
            "write one self-contained HTML page of the run (tables, recall against context "
            "tokens, every question's rankings; docs/view.md) to PATH (default: none)",
            "PATH"),
    Option("--retrieval-eval-no-step-summary", "retrieval_eval_no_step_summary", boolean,
            False, "do not append the Markdown summary to $GITHUB_STEP_SUMMARY (default: "
            "appended when that variable is set)", is_flag=True),
    Option("--retrieval-eval-no-model", "retrieval_eval_no_model", boolean, False,
            "model-free lane: load no model, touch no network; query and passage vectors "
            "come from the prep cache; also spelled --no-model, unless another plugin or a "
            "conftest owns that name (default: off, the model lane embeds each query live)",
            is_flag=True),
    Option("--retrieval-eval-model", "retrieval_eval_model", path_text, None,
            "embedding model: a Hugging Face id or a local folder with onnx/model.onnx (or "
            f"model.onnx) and tokenizer.json (default: {DEFAULT_MODEL}; with --no-model, the "
            "one model whose vectors the cache holds for the dataset)", "ID|DIR"),
    Option("--retrieval-eval-pooling", "retrieval_eval_pooling", choice("mean", "cls"), "mean",
            "token pooling: mean (vipune's recipe) or cls (bge's card) (default: mean)",
            "mean|cls"),
    Option("--retrieval-eval-max-length", "retrieval_eval_max_length", max_length, 512,
            "tokens kept per text, special tokens included, 2..512 (default: the model "
            "folder's sentence_bert_config.json max_seq_length, else 512, vipune's)", "N"),
    Option("--retrieval-eval-query-prefix", "retrieval_eval_query_prefix", text, "",
            "instruction prepended to queries before embedding (default: none, as vipune)",
            "TEXT"),
    Option("--retrieval-eval-device", "retrieval_eval_device", choice("cpu", "cuda"), "cpu",
            "onnxruntime device for embedding (default: cpu)", "cpu|cuda"),
    Option("--retrieval-eval-threads", "retrieval_eval_threads", positive_int, None,
            "onnxruntime CPU threads (default: onnxruntime's choice)", "N"),
    Option("--retrieval-eval-batch-size", "retrieval_eval_batch_size", positive_int, 32,
            "texts per embedding batch during prep (default: 32)", "N"),
    Option("--retrieval-eval-cache", "retrieval_eval_cache", path_text, None,
            "cache folder for prep output, vectors and stores (default: "
            "$RETRIEVAL_EVAL_CACHE_DIR, else $XDG_CACHE_HOME/pytest-retrieval-eval or "
            "~/.cache/pytest-retrieval-eval; untouched by --cache-clear)", "DIR"),
    Option("--retrieval-eval-cache-repo", "retrieval_eval_cache_repo", repo_id, None,
            "Hugging Face Hub dataset repo made by `retrieval-eval cache push`: vectors the "
            "cache lacks are pulled from it before they would be embedded (model lane) or "
            "missed (--no-model); needs the network only then (default: none)", "ORG/NAME"),
    Option("--retrieval-eval-store-dir", "retrieval_eval_store_dir", path_text, None,
            "also copy each persona's vipune store (hybrid, fts, vipune) here, for "
            "inspection, as <prefix>-<hash>.sqlite (the question id's first 40 characters "
            "made safe, a sha256 of the id), and stores.json mapping each question id to its "
            "file (default: stores live only in the cache)",
            "DIR"),
    Option("--retrieval-eval-vipune", "retrieval_eval_vipune", path_text, "vipune",
            "the vipune binary for the vipune retriever (default: vipune on PATH)", "PATH"),
    Option("--retrieval-eval-protocol", "retrieval_eval_protocol",
            choice("vipune", "longmemeval"), "vipune",
            "what is scored: vipune (one row per session, answer_session_ids, recall@k) or "
            "longmemeval (LongMemEval's own retrieval experiment: user turns only, every "
            "session slot kept, its question set, gold, ties and metrics; k defaults to "
            "1,3,5,10,30,50 and the retriever to bm25) (default: vipune)", "vipune|longmemeval"),
    Option("--retrieval-eval-granularity", "retrieval_eval_granularity",
            choice("session", "turn"), "session",
            "corpus item: a session, or a turn (id <session_id>_<n>, gold the has_answer turns, "
            "session metrics derived from the turn ranking) (default: session)",
            "session|turn"),
    Option("--retrieval-eval-vipune-timeout", "retrieval_eval_vipune_timeout", positive_float,
            60.0, "seconds one vipune search may take before its item fails (default: 60)",
            "SECONDS"),
    Option("--retrieval-eval-cmd-timeout", "retrieval_eval_cmd_timeout", finite_seconds,
            60.0, "seconds a cmd: retriever may take to answer hello or one rank, an mcp: "
            "server its handshake or one tool call, before its item fails and the command "
            "or server is stopped (default: 60)", "SECONDS"),
    Option("--retrieval-eval-cmd-index-timeout", "retrieval_eval_cmd_index_timeout",
            finite_seconds, 600.0, "seconds a cmd: retriever may take to answer one persona's "
            "index request, an mcp: server to store one persona's history (default: 600)",
            "SECONDS"),
    # The LLM of a memory library's adapter that calls one (mem0+infer:true, adapters/mem0_llm.py).
    Option("--retrieval-eval-llm", "retrieval_eval_llm", llm_spec, None,
            "the LLM mem0+infer:true extracts facts with, PROVIDER or PROVIDER:MODEL as mem0 "
            "names them (openai:gpt-4.1-nano); the key comes from the environment "
            "(OPENAI_API_KEY, ...) (default: mem0's own, openai and its default model)",
            "PROVIDER[:MODEL]"),
    Option("--retrieval-eval-llm-base-url", "retrieval_eval_llm_base_url", base_url, None,
            "the OpenAI-compatible endpoint of --retrieval-eval-llm (default: the "
            "provider's own, or OPENAI_BASE_URL)", "URL"),
    Option("--retrieval-eval-llm-timeout", "retrieval_eval_llm_timeout", finite_seconds,
            60.0, "seconds one LLM call of mem0+infer:true may take before its item fails "
            "(default: 60)", "SECONDS"),
    # Recall at a context budget (scoring/budget.py, vectors/token_counts.py).
    Option("--retrieval-eval-budget", "retrieval_eval_budget", parse_budgets, None,
            "comma list of context budgets in tokens, each in 1..10000000: recall@<B>tok takes "
            "a ranking's memories in order while their tokens fit in B (the first that does "
            "not fit ends the context), and the summary gets a budget table with tokens@k, "
            "the mean tokens of the first k memories (default: none)", "B[,B...]"),
    Option("--retrieval-eval-budget-tokenizer", "retrieval_eval_budget_tokenizer",
            budget_tokenizer, None,
            "with --retrieval-eval-budget: the reader's tokenizer the budget counts in: "
            "o200k_base, cl100k_base (bpe-openai, offline) or the path of a tokenizer.json "
            f"(Hugging Face tokenizers) (default: {DEFAULT_BUDGET_TOKENIZER})",
            "o200k_base|cl100k_base|PATH"),
    # Recall against a reference retriever (scoring/reference_recall.py).
    Option("--retrieval-eval-reference", "retrieval_eval_reference", path_text, None,
            "a retriever of the run (e.g. semantic) every other is judged against: "
            "ref_recall@k, the share of its top k each also returns in its top k "
            "(ann-benchmarks' recall against exact search), a summary table (default: none)",
            "NAME"),
    Option("--retrieval-eval-tables", "retrieval_eval_tables", parse_tables, None,
            "the summary's tables: all, or a comma list of recall, recall_any, recall_all, "
            "ndcg_any, memory_recall, budget, timing, ... (default: the main one, recall@k, "
            "or recall_any@k under longmemeval; -v: all)", "all|NAME[,NAME...]"),
    Option("--retrieval-eval-verify", "retrieval_eval_verify", choice("stamp", "full"),
            "stamp",
            "how a run checks the cache files it reuses (persona stores, bm25 term counts): "
            "stamp trusts a version verified before while its size, mtime, ctime, inode and "
            "SQLite change counter are unchanged (as git trusts its index); full rehashes "
            "each of them, which also catches bytes changed beneath the filesystem "
            "(docs/cache.md) (default: stamp)", "stamp|full"),
    # Stratified subsets (subset.py): N usable pairs, proportional by question type.
    Option("--retrieval-eval-subset", "retrieval_eval_subset", positive_int, None,
            "score (and prep) only N usable pairs, stratified by question type: proportional, "
            "at least one per type, fixed by the dataset's sha256 and the seed "
            "(default: every pair)", "N"),
    Option("--retrieval-eval-subset-seed", "retrieval_eval_subset_seed", nonnegative_int, 0,
            "seed of the subset's choice (default: 0)", "S"),
    # Network (io/hub_deadline.py): each Hub call's overall deadline.
    Option("--retrieval-eval-network-deadline", "retrieval_eval_network_deadline",
            deadline_seconds, DEFAULT_NETWORK_DEADLINE,
            "seconds each Hub call may take in all (a dataset's or model's download, plus a "
            "second per 250 kB of it; --retrieval-eval-cache-repo's listing and files) "
            f"(default: {DEFAULT_NETWORK_DEADLINE:g})", "SECONDS"),
)


def _command_line(opt: Option) -> Callable[[str], Any]:
    """``opt.parse`` as an argparse ``type=``, but a bad value raises :class:`pytest.UsageError`
    itself: argparse passes that through (it turns only ArgumentTypeError, TypeError and
    ValueError into its own error), so pytest prints one ``ERROR:`` line instead of its usage
    banner followed by argparse's message."""

    def parse(value: str) -> Any:
        try:
            return opt.parse(value)
        except argparse.ArgumentTypeError as exc:
            from ..errors import fit_error  # loaded only for a bad value

            raise pytest.UsageError(fit_error(f"{opt.flag}: {exc}", prefix="ERROR: ")) from None

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


SWITCH = "retrieval_eval"  # the dest of --retrieval-eval and its ini twin's name
