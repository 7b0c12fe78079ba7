"""The ``retrieval-eval`` console script: the prep phase outside pytest, and cache listing.

* ``retrieval-eval prep --data SPEC --model SPEC --cache DIR [...]`` builds the corpus and
  embeds every text the cache lacks (resumable: run the same command again after Ctrl-C or a
  crash), drawing a progress bar on stderr, and ends with one summary line on stdout.
* ``retrieval-eval models --cache DIR`` lists the models whose vectors a cache holds.
* ``retrieval-eval prep --subset N`` / ``--shard I/N`` / ``--ray [ADDRESS]`` and
  ``retrieval-eval cache merge DIR... [--into DIR]`` scale prep out (docs/scaling.md).
* ``retrieval-eval cache push --repo ORG/NAME`` / ``cache pull --repo ORG/NAME`` share one
  model's vectors through a Hugging Face Hub dataset repo (:mod:`cache_hub`); their errors
  (offline, no such repo, a refused token, another model's vectors, a failed checksum) exit 4.

Option names and defaults match the pytest options (without the ``--retrieval-eval-`` prefix).
A :class:`~pytest_retrieval_eval.errors.RetrievalEvalError` prints
``retrieval-eval: error: <one line>`` and exits 2; Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from .errors import RetrievalEvalError, one_line

# The pytest options' defaults and validators, so both spellings behave alike.
from .options import DEFAULT_DATA, DEFAULT_DATA_REPO, DEFAULT_MODEL
from .options import choice as _choice
from .options import max_length as _max_length
from .options import positive_int as _positive_int

__all__ = ["ProgressBar", "build_parser", "main"]

PROG = "retrieval-eval"
EXIT_ERROR = 2
EXIT_HUB = 4  # cache push/pull: the exit status pytest gives a usage error
EXIT_INTERRUPTED = 130


def _directory(value: str) -> Path:
    if not value.strip():
        raise argparse.ArgumentTypeError("cache directory is empty; give a folder path")
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} exists and is not a directory")
    return path


def _repo_id(value: str) -> str:
    from .cache_hub import valid_repo_id

    if not valid_repo_id(value.strip()):
        raise argparse.ArgumentTypeError(f"{value!r} is not a Hub repo id; give ORG/NAME")
    return value.strip()


def _nonempty(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value.strip()


# --------------------------------------------------------------------------- progress bar


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class ProgressBar:
    """A self-drawn progress bar: ``label [####....] done/total rate/s ETA mm:ss``.

    Callable as a ``Progress`` (label, done, total). Redraws at most every ``interval``
    seconds on a terminal; elsewhere (a pipe, a CI log) it prints one line per label change
    and then at most every ``quiet_interval`` seconds. Nothing is drawn for a step until it
    has run :data:`GRACE` seconds, so a step that ends within a second shows nothing.
    """

    GRACE = 1.0  # seconds a step runs before it is first drawn

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        width: int = 30,
        interval: float = 0.1,
        quiet_interval: float = 30.0,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if self.tty else quiet_interval
        self._label: str | None = None
        self._start = 0.0
        self._first_done = 0
        self._last_draw = 0.0
        self._drawn = False
        self._last_state: tuple[int, int | None] | None = None
        self._ended = False

    def __call__(self, label: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        if label != self._label:
            self.finish()
            self._label, self._start, self._first_done = label, now, done
            self._last_draw, self._last_state, self._ended = 0.0, None, False
        # A step's end is drawn at once, but once only: a count that runs past its total (a
        # file that grows, or reports size 0) is then rate-limited like an open-ended one.
        final = total is not None and done >= total and not self._ended
        self._ended = self._ended or final
        if (done, total) == self._last_state:
            return
        if now - self._start < self.GRACE:
            return  # a step that ends within a second shows nothing
        if not final and now - self._last_draw < self.interval:
            return
        self._last_draw, self._last_state = now, (done, total)
        self._draw(self.render(label, done, total, now - self._start, done - self._first_done))

    def render(
        self, label: str, done: int, total: int | None, elapsed: float, progressed: int
    ) -> str:
        """The bar's text (no line ending)."""
        rate = progressed / elapsed if elapsed > 0 else 0.0
        if total is not None:
            frac = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
            filled = int(frac * self.width)
            bar = "#" * filled + "." * (self.width - filled)
            eta = _clock((total - done) / rate) if rate > 0 else "--:--"
            return f"{label} [{bar}] {done}/{total} {rate:.1f}/s ETA {eta}"
        if done == 0:  # an open-ended step that has counted nothing yet: its label alone
            return label
        return f"{label} {done} {rate:.1f}/s {_clock(elapsed)}"

    def _draw(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the current bar's line."""
        if self._drawn and self.tty:
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = False
        self._label = None


# --------------------------------------------------------------------------- commands


class _OneLineParser(argparse.ArgumentParser):
    """A bad argument is one line (``retrieval-eval prep: error: argument --batch-size: ...;
    see --help``), not the usage banner followed by the message."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {one_line(message)}; see "
                              f"{self.prog} --help\n")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``retrieval-eval``."""
    from .cache import default_cache_dir

    parser = _OneLineParser(
        prog=PROG,
        description="Prep phase of pytest-retrieval-eval: embed a LongMemEval dataset once "
        "into the vector cache, so `pytest --retrieval-eval` (and --no-model) runs need no "
        "embedding.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    prep = sub.add_parser(
        "prep", help="embed every text of a dataset that the cache lacks (resumable)",
        description="Embed every session text and question of a dataset that the cache "
        "lacks. Interrupted? Run the same command again: it embeds only what is missing.",
    )
    prep.add_argument("--data", type=_nonempty, default=DEFAULT_DATA, metavar="SPEC",
                      help="sample (bundled), longmemeval_s, longmemeval_m, longmemeval_oracle "
                      f"or a path to a LongMemEval JSON file (default: {DEFAULT_DATA})")
    prep.add_argument("--data-repo", type=_nonempty, default=DEFAULT_DATA_REPO,
                      metavar="REPO", help="Hugging Face dataset repo for named datasets "
                      f"(default: {DEFAULT_DATA_REPO})")
    prep.add_argument("--data-file", type=_nonempty, default=None, metavar="NAME",
                      help="file name inside the dataset repo, overriding the named dataset's")
    prep.add_argument("--model", type=_nonempty, default=DEFAULT_MODEL, metavar="ID|DIR",
                      help="a Hugging Face model id or a local folder with onnx/model.onnx (or "
                      f"model.onnx) and tokenizer.json (default: {DEFAULT_MODEL})")
    prep.add_argument("--cache", type=_directory, default=None, metavar="DIR",
                      help=f"cache folder (default: {default_cache_dir()})")
    prep.add_argument("--pooling", type=_choice("mean", "cls"), default="mean",
                      metavar="mean|cls",
                      help="token pooling (default: mean, vipune's recipe)")
    prep.add_argument("--max-length", type=_max_length, default=512, metavar="N",
                      help="tokens kept per text, special tokens included (default: 512)")
    prep.add_argument("--query-prefix", type=str, default="", metavar="TEXT",
                      help="instruction prepended to questions (default: none, as vipune)")
    prep.add_argument("--device", type=_choice("cpu", "cuda"), default="cpu",
                      metavar="cpu|cuda",
                      help="onnxruntime device (default: cpu)")
    prep.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                      help="onnxruntime CPU threads (default: onnxruntime's choice)")
    prep.add_argument("--batch-size", type=_positive_int, default=32, metavar="N",
                      help="texts per embedding batch (default: 32)")
    prep.add_argument("--chunk-size", type=_positive_int, default=1024, metavar="N",
                      help="texts embedded between two cache commits (default: 1024)")
    prep.add_argument("--offline", action="store_true",
                      help="never touch the network (also HF_HUB_OFFLINE=1)")
    prep.add_argument("--protocol", type=_choice("vipune", "longmemeval"), default="vipune",
                      help="the corpus items to embed: those of --retrieval-eval-protocol "
                           "(default: vipune)")
    prep.add_argument("--granularity", type=_choice("session", "turn"), default="session",
                      help="sessions or turns, as --retrieval-eval-granularity (default: "
                           "session)")
    prep.add_argument("--no-progress", action="store_true", help="draw no progress bar")
    _add_scale_arguments(prep)

    models = sub.add_parser("models", help="list the models whose vectors a cache holds")
    models.add_argument("--cache", type=_directory, default=None, metavar="DIR",
                        help=f"cache folder (default: {default_cache_dir()})")
    models.add_argument("--no-bundled", action="store_true",
                        help="leave out the vectors bundled with the package")

    cache = sub.add_parser("cache", help="share and combine prepared caches: push, pull, merge",
                           description="Share and combine prepared vector caches.")
    actions = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    _add_hub_commands(actions, default_cache_dir())
    _add_merge_command(actions, default_cache_dir())
    _add_compare_commands(sub)
    return parser


def _add_hub_commands(actions: argparse._SubParsersAction[_OneLineParser],
                      default_cache: Path) -> None:
    """``cache push`` and ``cache pull`` (the Hugging Face Hub, a dataset repo)."""
    push = actions.add_parser(
        "push", help="upload one model's vectors to a Hugging Face Hub dataset repo",
        description="Upload one model's shards, manifest and sidecars (only what the repo "
        "lacks, in one commit) to a Hugging Face Hub dataset repo, created if needed. Needs "
        "the network and a token with write access (HF_TOKEN or `hf auth login`).")
    pull = actions.add_parser(
        "pull", help="fetch the vectors the cache lacks from a Hugging Face Hub dataset repo",
        description="Fetch the shards the local cache lacks from a Hugging Face Hub dataset "
        "repo made by `cache push`: each checked against its sidecar, committed only when "
        "all have arrived; an interrupted pull resumes. Needs the network.")
    for command in (push, pull):
        command.add_argument("--repo", type=_repo_id, required=True, metavar="ORG/NAME",
                             help="the Hub dataset repo (required)")
        command.add_argument("--cache", type=_directory, default=None, metavar="DIR",
                             help=f"cache folder (default: {default_cache})")
        command.add_argument("--model", type=_nonempty, default=None, metavar="NAME",
                             help="the model whose vectors travel: its name, local folder or "
                             "a fingerprint prefix (default: the only one there)")
        command.add_argument("--include-corpus", action="store_true",
                             help="also the corpus file (push: the one of --data)")
        command.add_argument("--no-progress", action="store_true", help="draw no progress")
    push.add_argument("--data", type=_nonempty, default=None, metavar="SPEC",
                      help="a dataset (as prep's --data): push the model whose vectors cover "
                      "it, and with --include-corpus its corpus (default: none)")
    push.add_argument("--data-repo", type=_nonempty, default=DEFAULT_DATA_REPO,
                      metavar="REPO", help="Hugging Face dataset repo for named datasets "
                      f"(default: {DEFAULT_DATA_REPO})")
    push.add_argument("--data-file", type=_nonempty, default=None, metavar="NAME",
                      help="file name inside the dataset repo, overriding the named dataset's")
    push.add_argument("--private", action="store_true",
                      help="create the repo private (default: public; an existing repo keeps "
                      "its visibility)")



# --------------------------------------------------------------------------- scaling out
# Subsets, shards, Ray and `cache merge` (docs/scaling.md); kept together here.


def _shard(value: str) -> tuple[int, int]:
    index, sep, count = value.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not I/N; give e.g. 1/4 for the first of four slices") from None
    if not sep or n < 1 or not 1 <= i <= n:
        raise argparse.ArgumentTypeError(
            f"{value!r}: I must lie in 1..N, e.g. 1/4 .. 4/4")
    return i, n


def _add_scale_arguments(prep: argparse.ArgumentParser) -> None:
    from .options import nonnegative_int

    prep.add_argument("--subset", type=_positive_int, default=None, metavar="N",
                      help="embed only the texts of N usable pairs, stratified by question "
                      "type, as --retrieval-eval-subset N picks them (default: every pair)")
    prep.add_argument("--subset-seed", type=nonnegative_int, default=0, metavar="S",
                      help="seed of the subset's choice (default: 0)")
    prep.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                      help="embed only slice I of N of the missing texts, chosen by content "
                      "key; combine the N caches with `cache merge` (default: all)")
    prep.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                      help="embed on a Ray cluster with Ray Data (extra [ray]); ADDRESS as "
                      "ray.init takes it, e.g. auto or ray://head:10001 (default: Ray's own: "
                      "$RAY_ADDRESS, a running local cluster, else a new local one)")


def _add_merge_command(actions: Any, default_cache: Path) -> None:
    """``cache merge`` (cache_merge.py); push and pull are the Hub's (cache_hub.py)."""
    merge = actions.add_parser(
        "merge", help="verify caches and copy the vectors they hold into one",
        description="Check every shard of each DIR against its sha256 sidecar and each "
        "model's manifest, then copy the vectors the target lacks (atomic shards). Nothing "
        "is written unless every source checks out.")
    merge.add_argument("sources", type=_directory, nargs="+", metavar="DIR",
                       help="cache folders to merge (e.g. the outputs of prep --shard I/N)")
    merge.add_argument("--into", type=_directory, default=None, metavar="DIR",
                       help=f"the cache to merge into (default: {default_cache})")
    merge.add_argument("--no-progress", action="store_true", help="draw no progress bar")


def _cmd_cache(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.cache_command == "merge":
        return _cmd_cache_merge(args, out, err)
    raise AssertionError(f"unknown cache action {args.cache_command}")  # pragma: no cover


def _cmd_cache_merge(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import cache as cache_mod
    from . import cache_merge

    target: Path = args.into if args.into is not None else cache_mod.default_cache_dir()
    bar = None if args.no_progress else ProgressBar(err)
    try:
        result = cache_merge.merge_caches(args.sources, target, bar)
    finally:
        if bar is not None:
            bar.finish()
    for model in result.models:
        out.write(f"merge: model {model.name} (fingerprint {model.fingerprint[:12]}): "
                  f"{model.copied} vectors copied, {model.present} already present, from "
                  f"{model.shards} verified shard(s)\n")
    if not result.models:
        out.write("merge: the sources hold no model vectors; nothing to copy\n")
    return 0


# Exit status of a comparison or figure that cannot be made (as pytest's usage error).
EXIT_REFUSED = 4


def _add_compare_commands(sub: argparse._SubParsersAction[Any]) -> None:
    compare = sub.add_parser(
        "compare", help="compare two JSON reports (or two retrievers of one) pair by pair",
        description="Compare BASE.json with NEW.json pair by pair (matched on question_id and "
        "retriever), or two retrievers of one report (--retrievers BASE,NEW): delta, 95% "
        "paired bootstrap CI, paired randomization p-value, Holm-Bonferroni. Reports only: "
        "the exit status is 0 whatever the numbers.")
    compare.add_argument("reports", nargs="+", metavar="REPORT.json",
                         help="BASE.json NEW.json, or one report with --retrievers")
    compare.add_argument("--retrievers", type=_retriever_pair, default=None, metavar="BASE,NEW",
                         help="compare two retrievers of one report, base first")
    compare.add_argument("--metric", action="append", default=None, metavar="NAME",
                         help="metric to compare: recall, recall_any, recall_all or ndcg_any, "
                         "optionally @k; repeatable (default: recall at every shared k)")
    compare.add_argument("--allow-different-data", action="store_true",
                         help="compare reports on different datasets over the pairs both hold")
    compare.add_argument("--json", type=Path, default=None, metavar="PATH",
                         help="also write the comparison as JSON here (default: none)")
    compare.add_argument("-v", "--verbose", action="store_true",
                         help="name every gained, lost and unmatched question")
    plot = sub.add_parser(
        "plot", help="draw a report (or its comparison with a base report) as a figure",
        description="R.json alone: recall@k by question type, retrievers side by side, one "
        "panel per k. R.json BASE.json: delta of R against BASE with its 95% CI per question "
        "type. Needs the [plot] extra (matplotlib).")
    plot.add_argument("reports", nargs="+", metavar="REPORT.json", help="R.json [BASE.json]")
    plot.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                      help="the figure: FILE.png, FILE.svg or FILE.pdf")
    plot.add_argument("--metric", action="append", default=None, metavar="NAME",
                      help="with BASE.json: metrics to draw (default: recall at every k)")
    plot.add_argument("--allow-different-data", action="store_true",
                      help="with BASE.json: compare over the pairs both reports hold")


def _retriever_pair(value: str) -> tuple[str, str]:
    names = [p.strip() for p in value.split(",") if p.strip()]
    if len(names) != 2:
        raise argparse.ArgumentTypeError(f"{value!r}: give two retriever names, BASE,NEW")
    return names[0], names[1]


def _cmd_compare(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import compare as cmp_mod
    from .report import write_json

    paths = [Path(p) for p in args.reports]
    if len(paths) > 2 or (len(paths) == 2) == (args.retrievers is not None):
        raise cmp_mod.CompareError(
            "compare takes BASE.json NEW.json, or one REPORT.json with --retrievers BASE,NEW")
    reports = [cmp_mod.load_report(p) for p in paths]
    if args.retrievers is not None:
        result = cmp_mod.compare_retrievers(reports[0], *args.retrievers, name=str(paths[0]),
                                            metrics=args.metric)
    else:
        result = cmp_mod.compare_reports(reports[0], reports[1], base_name=str(paths[0]),
                                         new_name=str(paths[1]), metrics=args.metric,
                                         allow_different_data=args.allow_different_data)
    for line in cmp_mod.comparison_lines(result, verbose=args.verbose):
        out.write(line + "\n")
    if args.json is not None:
        write_json({"comparison": result}, args.json)
        out.write(f"comparison JSON: {args.json}\n")
    return 0


def _cmd_plot(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import compare as cmp_mod
    from . import plot as plot_mod

    paths = [Path(p) for p in args.reports]
    if len(paths) > 2:
        raise cmp_mod.CompareError("plot takes R.json, or R.json BASE.json")
    plot_mod.check_output(args.output)
    plot_mod.require_matplotlib()
    reports = [cmp_mod.load_report(p) for p in paths]
    if len(reports) == 1:
        plot_mod.plot_report(reports[0], args.output)
    else:
        result = cmp_mod.compare_reports(reports[1], reports[0], base_name=str(paths[1]),
                                         new_name=str(paths[0]), metrics=args.metric,
                                         allow_different_data=args.allow_different_data)
        plot_mod.plot_comparison(result, args.output)
    out.write(f"figure: {args.output}\n")
    return 0


def _cmd_prep(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import cache as cache_mod
    from . import corpus as corpus_mod
    from . import dataset as dataset_mod
    from . import embedding as embedding_mod
    from . import prep as prep_mod
    from .checksums import MEMO_DIR
    from .protocol import View

    started = time.perf_counter()
    root: Path = args.cache if args.cache is not None else cache_mod.default_cache_dir()
    bar = None if args.no_progress else ProgressBar(err)
    try:
        source = dataset_mod.resolve_dataset(
            args.data, repo=args.data_repo, filename=args.data_file, offline=args.offline
        )
        corpus = corpus_mod.load_corpus(source, root, bar,
                                        view=View(args.protocol, args.granularity))
        if corpus.rejections:
            first = corpus.rejections[0]
            if bar is not None:
                bar.finish()
            err.write(
                f"{PROG}: warning: {len(corpus.rejections)} of "
                f"{len(corpus.rejections) + len(corpus.pairs)} instances of {source.name} are "
                f"rejected (not embedded, not scored), e.g. instance {first.index} "
                f"({first.question_id or 'no id'}): {one_line(first.reason)}; "
                f"`pytest --retrieval-eval --retrieval-eval-json PATH` lists them all\n"
            )
        config = embedding_mod.EmbedConfig(
            pooling=args.pooling, max_length=args.max_length, query_prefix=args.query_prefix,
            device=args.device, threads=args.threads, batch_size=args.batch_size,
        )
        embedder = embedding_mod.load_embedder(args.model, config, offline=args.offline,
                                               memo_dir=root / MEMO_DIR)
        vectors = cache_mod.VectorCache(
            root, embedder.fingerprint, embedder.dim, embedder.info(),
            read_only_roots=[cache_mod.bundled_cache_dir()],
        )
        stats = prep_mod.run_prep(_subset_corpus(args, corpus), embedder, vectors, bar,
                                  chunk_size=args.chunk_size, shard=args.shard,
                                  embed=_ray_embed(args, config, embedder, vectors, bar))
    except KeyboardInterrupt as exc:
        saved = exc.saved if isinstance(exc, prep_mod.PrepInterrupted) else 0
        if bar is not None:
            bar.finish()
        err.write(f"{PROG}: interrupted; {saved} vectors saved, run the same command to "
                  f"resume\n")
        return EXIT_INTERRUPTED
    finally:
        if bar is not None:
            bar.finish()
    seconds = time.perf_counter() - started  # the whole command: corpus, model and prep
    out.write(
        f"prep: {stats.slots} slots, {stats.unique_texts} unique texts, {stats.embedded_now} "
        f"embedded now, {stats.from_cache} from cache, {seconds:.1f}s (model "
        f"{embedder.name}, fingerprint {embedder.fingerprint[:12]})\n"
    )
    for line in _scale_lines(args, stats):
        out.write(line + "\n")
    return 0


def _subset_corpus(args: argparse.Namespace, corpus: Any) -> Any:
    """The corpus prep sees: under --subset, the chosen pairs only."""
    if args.subset is None:
        return corpus
    from . import subset as subset_mod

    chosen = subset_mod.choose(corpus, args.subset, args.subset_seed, flag="--subset")
    return subset_mod.SubsetCorpus(corpus, chosen)


def _ray_embed(args: argparse.Namespace, config: Any, embedder: Any, vectors: Any,
               bar: ProgressBar | None) -> Any:
    """Under --ray, prep's embedding loop on Ray (ray_prep.py); else None (local)."""
    if args.ray is None:
        return None
    from . import ray_prep

    return ray_prep.ray_embed_missing(
        address=args.ray or None, model_spec=args.model, config=config, offline=args.offline,
        fingerprint=embedder.fingerprint, dim=embedder.dim, cache=vectors, progress=bar,
        chunk_size=args.chunk_size)


def _scale_lines(args: argparse.Namespace, stats: Any) -> list[str]:
    lines = []
    if args.subset is not None:
        lines.append(f"subset: {args.subset} pairs, seed {args.subset_seed} (stratified by "
                     f"question type; the same pairs as --retrieval-eval-subset "
                     f"{args.subset} --retrieval-eval-subset-seed {args.subset_seed})")
    if args.shard is not None:
        i, n = args.shard
        lines.append(f"shard {i}/{n}: {stats.other_shards} missing texts left to the other "
                     f"slices; combine the caches with `{PROG} cache merge DIR... --into DIR`")
    return lines


def _cmd_models(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import cache as cache_mod

    root: Path = args.cache if args.cache is not None else cache_mod.default_cache_dir()
    roots = [root] if args.no_bundled else [root, cache_mod.bundled_cache_dir()]
    models = cache_mod.list_models(roots)
    if not models:
        out.write(f"no model vectors in {root}; make some with `{PROG} prep`\n")
        return 0
    for m in models:
        where = ", ".join(
            "bundled" if Path(r) == cache_mod.bundled_cache_dir() else str(r)
            for r in m.get("roots", [])
        )
        out.write(
            f"{m.get('name', '?')}  fingerprint {str(m.get('fingerprint', ''))[:12]}  dim "
            f"{m.get('dim', '?')}  {m.get('vectors', 0)} vectors  pooling "
            f"{m.get('pooling', '?')}  max_length {m.get('max_length', '?')}  query_prefix "
            f"{str(m.get('query_prefix', ''))!r}  ({where})\n"
        )
    return 0


#: The pytest options whose advice ``prep`` gives with its own flag. Messages are worded once,
#: for pytest (``--retrieval-eval-model DIR``); the CLI rewrites the flag it shares, longest
#: name first (``--retrieval-eval-data-repo`` before ``--retrieval-eval-data``).
_PREP_FLAGS = {
    f"--retrieval-eval-{name}": f"--{name}"
    for name in sorted(("data", "data-repo", "data-file", "model", "cache", "pooling",
                        "max-length", "query-prefix", "device", "threads", "batch-size"),
                       key=len, reverse=True)
}
_PYTEST_FLAG = re.compile("|".join(re.escape(flag) + r"(?![\w-])" for flag in _PREP_FLAGS))


def for_cli(message: str) -> str:
    """``message`` with each pytest flag that ``prep`` shares named as ``prep`` spells it:
    advice always names the flag of the command in use."""
    return _PYTEST_FLAG.sub(lambda m: _PREP_FLAGS[m.group(0)], message)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _cmd_push(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import cache as cache_mod
    from . import cache_hub
    from . import corpus as corpus_mod
    from . import dataset as dataset_mod

    root: Path = args.cache if args.cache is not None else cache_mod.default_cache_dir()
    if args.include_corpus and args.data is None:
        err.write(f"{PROG}: error: cache push --include-corpus needs --data SPEC, the dataset "
                  f"whose corpus to upload\n")
        return EXIT_HUB
    bar = None if args.no_progress else ProgressBar(err)
    try:
        keys = corpus_file = None
        if args.data is not None:
            source = dataset_mod.resolve_dataset(args.data, repo=args.data_repo,
                                                 filename=args.data_file)
            corpus = corpus_mod.load_corpus(source, root, bar)
            keys = list(dict.fromkeys(k for p in corpus.pairs for k in p.text_keys))
            corpus_file = corpus.path if args.include_corpus else None
        result = cache_hub.push(args.repo, root, model=args.model, keys=keys, data=args.data,
                                corpus_file=corpus_file)
    finally:
        if bar is not None:
            bar.finish()
    commit = f"commit {result.commit[:12]}" if result.commit else "nothing new to commit"
    out.write(f"cache push: {_count(result.uploaded, 'file')} sent ({_size(result.bytes)}), "
              f"{result.already} already there, to dataset repo {result.repo} ({commit}); "
              f"model {result.model}, fingerprint {result.fingerprint[:12]}, "
              f"{result.seconds:.1f}s\n")
    return 0


def _cmd_pull(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import cache as cache_mod
    from . import cache_hub

    root: Path = args.cache if args.cache is not None else cache_mod.default_cache_dir()
    bar = None if args.no_progress else ProgressBar(err)
    try:
        result = cache_hub.pull(args.repo, root, model=args.model,
                                include_corpus=args.include_corpus, progress=bar)
    finally:
        if bar is not None:
            bar.finish()
    resumed = f", {_size(result.resumed)} resumed" if result.resumed else ""
    corpus = (f" and {_count(result.corpus_files, 'corpus file')}" if result.corpus_files
              else "")
    out.write(f"cache pull: {_count(result.fetched, 'shard')}{corpus} fetched "
              f"({_size(result.bytes)}{resumed}), {result.already} already here, from dataset "
              f"repo {result.repo}; model {result.model}, fingerprint "
              f"{result.fingerprint[:12]}, {result.seconds:.1f}s\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``retrieval-eval``; returns the exit status."""
    out, err = sys.stdout, sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        err.write(f"{PROG}: warning: {for_cli(one_line(message))}\n")

    previous = warnings.showwarning
    warnings.showwarning = show
    try:
        if args.command == "prep":
            return _cmd_prep(args, out, err)
        if args.command == "cache" and args.cache_command == "push":
            return _cmd_push(args, out, err)
        if args.command == "cache" and args.cache_command == "pull":
            return _cmd_pull(args, out, err)
        if args.command == "cache":
            return _cmd_cache(args, out, err)
        if args.command in ("compare", "plot"):
            try:
                return (_cmd_compare if args.command == "compare" else _cmd_plot)(args, out, err)
            except RetrievalEvalError as exc:
                err.write(f"{PROG}: error: {one_line(exc)}\n")
                return EXIT_REFUSED
        return _cmd_models(args, out, err)
    except RetrievalEvalError as exc:
        err.write(f"{PROG}: error: {for_cli(one_line(exc))}\n")
        hub = args.command == "cache" and args.cache_command in ("push", "pull")
        return EXIT_HUB if hub else EXIT_ERROR
    except KeyboardInterrupt:
        err.write(f"{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `retrieval-eval models | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    finally:
        warnings.showwarning = previous


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
