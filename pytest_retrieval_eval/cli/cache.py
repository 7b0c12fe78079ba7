"""``retrieval-eval cache merge``, ``cache push`` and ``cache pull``: combine prepared
caches (the outputs of ``prep --shard I/N``, :mod:`pytest_retrieval_eval.vectors.merge`) and
share one model's vectors through a Hugging Face Hub dataset repo
(:mod:`pytest_retrieval_eval.vectors.hub_sync`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from ..config.options import DEFAULT_DATA_REPO, DEFAULT_NETWORK_DEADLINE, deadline_seconds, repo_id
from ..errors import CacheHubError
from .args import OneLineParser, directory, nonempty, write_fitted
from .progress_bar import ProgressBar

__all__ = ["add_commands", "run"]


def add_commands(sub: argparse._SubParsersAction[Any], default_cache: Path) -> None:
    """The ``cache`` subcommand and its actions ``push``, ``pull`` and ``merge``."""
    cache = sub.add_parser("cache", help="share and combine prepared caches: push, pull, merge",
                           description="Share and combine prepared vector caches.")
    actions = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    _add_hub_commands(actions, default_cache)
    _add_merge_command(actions, default_cache)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``cache push``, ``cache pull`` or ``cache merge``; returns the exit status."""
    if args.cache_command == "push":
        return _cmd_push(args, out, err)
    if args.cache_command == "pull":
        return _cmd_pull(args, out, err)
    if args.cache_command == "merge":
        return _cmd_cache_merge(args, out, err)
    raise AssertionError(f"unknown cache action {args.cache_command}")  # pragma: no cover


def _add_hub_commands(actions: argparse._SubParsersAction[OneLineParser],
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
        command.add_argument("--repo", type=repo_id, required=True, metavar="ORG/NAME",
                             help="the Hub dataset repo (required)")
        command.add_argument("--cache", type=directory, default=None, metavar="DIR",
                             help=f"cache folder (default: {default_cache})")
        command.add_argument("--model", type=nonempty, default=None, metavar="NAME",
                             help="the model whose vectors travel: its name, local folder or "
                             "a fingerprint prefix (default: the only one there)")
        command.add_argument("--include-corpus", action="store_true",
                             help="also the corpus file (push: the one of --data)")
        command.add_argument("--no-progress", action="store_true", help="draw no progress")
        command.add_argument("--deadline", type=deadline_seconds,
                             default=DEFAULT_NETWORK_DEADLINE, metavar="SECONDS",
                             help="seconds each Hub call may take in all (a listing, one "
                             "file's download, the commit) (default: "
                             f"{DEFAULT_NETWORK_DEADLINE:g})")
    push.add_argument("--data", type=nonempty, default=None, metavar="SPEC",
                      help="a dataset (as prep's --data): push the model whose vectors cover "
                      "it, and with --include-corpus its corpus (default: none)")
    push.add_argument("--data-repo", type=nonempty, default=DEFAULT_DATA_REPO,
                      metavar="REPO", help="Hugging Face dataset repo for named datasets "
                      f"(default: {DEFAULT_DATA_REPO})")
    push.add_argument("--data-file", type=nonempty, default=None, metavar="NAME",
                      help="file name inside the dataset repo, overriding the named dataset's")
    push.add_argument("--private", action="store_true",
                      help="create the repo private (default: public; an existing repo keeps "
                      "its visibility)")


def _add_merge_command(actions: Any, default_cache: Path) -> None:
    """``cache merge`` (vectors/merge.py); push and pull are the Hub's (vectors/hub_sync.py)."""
    merge = actions.add_parser(
        "merge", help="verify caches and copy the vectors they hold into one",
        description="Check every shard of each DIR against its sha256 sidecar and each "
        "model's manifest, then copy the vectors the target lacks (atomic shards). Nothing "
        "is written unless every source checks out.")
    merge.add_argument("sources", type=directory, nargs="+", metavar="DIR",
                       help="cache folders to merge (e.g. the outputs of prep --shard I/N)")
    merge.add_argument("--into", type=directory, default=None, metavar="DIR",
                       help=f"the cache to merge into (default: {default_cache})")
    merge.add_argument("--no-progress", action="store_true", help="draw no progress bar")


def _cmd_cache_merge(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..vectors import cache as cache_mod
    from ..vectors import merge

    target: Path = args.into if args.into is not None else cache_mod.default_cache_dir()
    bar = None if args.no_progress else ProgressBar(err)
    try:
        result = merge.merge_caches(args.sources, target, bar)
    finally:
        if bar is not None:
            bar.finish()
    lines = []
    for model in result.models:
        lines.append(f"merge: model {model.name} (fingerprint {model.fingerprint[:12]}): "
                     f"{model.copied} vectors copied, {model.present} already present, from "
                     f"{model.shards} verified shard(s)")
        if model.copied + model.present == 0:
            lines.append("merge: the sources hold none of this model's vectors (a prep "
                         "served wholly by the package's bundled sample writes none; every "
                         "run reads those from the package)")
    if not result.models:
        lines.append("merge: the sources hold no model vectors; nothing to copy")
    write_fitted(out, lines)
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _cmd_push(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..data import dataset as dataset_mod
    from ..data import ingest
    from ..vectors import cache as cache_mod
    from ..vectors import hub_sync

    root: Path = args.cache if args.cache is not None else cache_mod.default_cache_dir()
    if args.include_corpus and args.data is None:
        raise CacheHubError("cache push --include-corpus needs --data SPEC, the dataset whose "
                            "corpus to upload")
    bar = None if args.no_progress else ProgressBar(err)
    try:
        keys = corpus_file = None
        if args.data is not None:
            source = dataset_mod.resolve_dataset(args.data, repo=args.data_repo,
                                                 filename=args.data_file)
            corpus = ingest.load_corpus(source, root, bar)
            keys = list(dict.fromkeys(k for p in corpus.pairs for k in p.text_keys))
            corpus_file = corpus.path if args.include_corpus else None
        result = hub_sync.push(args.repo, root, model=args.model, keys=keys, data=args.data,
                                corpus_file=corpus_file, deadline=args.deadline)
    finally:
        if bar is not None:
            bar.finish()
    commit = f"commit {result.commit[:12]}" if result.commit else "nothing new to commit"
    write_fitted(out, [
        f"cache push: {_count(result.uploaded, 'file')} sent ({_size(result.bytes)}), "
        f"{result.already} already there, to dataset repo {result.repo} ({commit}); model "
        f"{result.model}, fingerprint {result.fingerprint[:12]}, {result.seconds:.1f}s"])
    return 0


def _cmd_pull(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..vectors import cache as cache_mod
    from ..vectors import hub_sync

    root: Path = args.cache if args.cache is not None else cache_mod.default_cache_dir()
    bar = None if args.no_progress else ProgressBar(err)
    try:
        result = hub_sync.pull(args.repo, root, model=args.model,
                                include_corpus=args.include_corpus, progress=bar,
                                deadline=args.deadline)
    finally:
        if bar is not None:
            bar.finish()
    resumed = f", {_size(result.resumed)} resumed" if result.resumed else ""
    corpus = (f" and {_count(result.corpus_files, 'corpus file')}" if result.corpus_files
              else "")
    write_fitted(out, [
        f"cache pull: {_count(result.fetched, 'shard')}{corpus} fetched "
        f"({_size(result.bytes)}{resumed}), {result.already} already here, from dataset repo "
        f"{result.repo}; model {result.model}, fingerprint {result.fingerprint[:12]}, "
        f"{result.seconds:.1f}s"])
    return 0
