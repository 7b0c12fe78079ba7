"""``retrieval-eval prep`` and ``retrieval-eval models``: embed a dataset into the vector
cache outside pytest (with its scale-out flags ``--subset``, ``--shard`` and ``--ray``,
docs/scaling.md), and list the models a cache holds."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, TextIO

# The pytest options' defaults and validators, so both spellings behave alike.
from ..config.options import DEFAULT_DATA, DEFAULT_DATA_REPO, DEFAULT_MODEL
from ..config.options import choice as _choice
from ..config.options import max_length as _max_length
from ..config.options import positive_int as _positive_int
from ..errors import CacheError, ModelError, one_line, printable
from .args import EXIT_INTERRUPTED, PROG, directory, nonempty, terminal_width, write_fitted
from .progress_bar import ProgressBar

__all__ = ["add_commands", "run"]


def add_commands(sub: argparse._SubParsersAction[Any], default_cache: Path) -> None:
    """The ``prep`` and ``models`` subcommands."""
    prep = sub.add_parser(
        "prep", help="embed every text of a dataset that the cache lacks (resumable)",
        description="Embed every session text and question of a dataset that the cache "
        "lacks. Interrupted? Run the same command again: it embeds only what is missing.",
    )
    prep.add_argument("--data", type=nonempty, default=DEFAULT_DATA, metavar="SPEC",
                      help="sample (bundled), longmemeval_s, longmemeval_m, longmemeval_oracle "
                      f"or a path to a LongMemEval JSON file (default: {DEFAULT_DATA})")
    prep.add_argument("--data-repo", type=nonempty, default=DEFAULT_DATA_REPO,
                      metavar="REPO", help="Hugging Face dataset repo for named datasets "
                      f"(default: {DEFAULT_DATA_REPO})")
    prep.add_argument("--data-file", type=nonempty, default=None, metavar="NAME",
                      help="file name inside the dataset repo, overriding the named dataset's")
    prep.add_argument("--model", type=nonempty, default=DEFAULT_MODEL, metavar="ID|DIR",
                      help="a Hugging Face model id or a local folder with onnx/model.onnx (or "
                      f"model.onnx) and tokenizer.json (default: {DEFAULT_MODEL})")
    prep.add_argument("--cache", type=directory, default=None, metavar="DIR",
                      help=f"cache folder (default: {default_cache})")
    prep.add_argument("--pooling", type=_choice("mean", "cls"), default="mean",
                      metavar="mean|cls",
                      help="token pooling (default: mean, vipune's recipe)")
    prep.add_argument("--max-length", type=_max_length, default=None, metavar="N",
                      help="tokens kept per text, special tokens included (default: the "
                      "model's own max_seq_length from its sentence_bert_config.json, else "
                      "512, vipune's)")
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
    prep.add_argument("--turns", action="store_true",
                      help="also every session's turns, as the +unit:turn retrievers read "
                           "them, each persona's turn rows kept for them (docs/memories.md)")
    prep.add_argument("--no-progress", action="store_true", help="draw no progress bar")
    _add_scale_arguments(prep)

    models = sub.add_parser("models", help="list the models whose vectors a cache holds")
    models.add_argument("--cache", type=directory, default=None, metavar="DIR",
                        help=f"cache folder (default: {default_cache})")
    models.add_argument("--no-bundled", action="store_true",
                        help="leave out the vectors bundled with the package")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``prep`` or ``models``; returns the exit status."""
    if args.command == "prep":
        return _cmd_prep(args, out, err)
    return _cmd_models(args, out, err)


# --------------------------------------------------------------------------- scaling out
# prep's --subset, --shard and --ray (docs/scaling.md); `cache merge`, which combines the
# shards' caches, is cli/cache.py's.


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
    from ..config.options import nonnegative_int

    prep.add_argument("--subset", type=_positive_int, default=None, metavar="N",
                      help="embed only the texts of N usable pairs, stratified by question "
                      "type, as --retrieval-eval-subset=N picks them (default: every pair)")
    prep.add_argument("--subset-seed", type=nonnegative_int, default=0, metavar="S",
                      help="seed of the subset's choice (default: 0)")
    prep.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                      help="embed only slice I of N of the missing texts, chosen by content "
                      "key; combine the N caches with `cache merge` (default: all)")
    prep.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                      help="embed on a Ray cluster with Ray Data (extra [ray]); ADDRESS as "
                      "ray.init takes it, e.g. auto or ray://head:10001 (default: Ray's own: "
                      "$RAY_ADDRESS, a running local cluster, else a new local one)")


def _cmd_prep(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..data import dataset as dataset_mod
    from ..data import ingest
    from ..data.protocol import View
    from ..io.checksums import MEMO_DIR
    from ..vectors import cache as cache_mod
    from ..vectors import embedding as embedding_mod
    from ..vectors import prep as prep_mod

    started = time.perf_counter()
    root: Path = args.cache if args.cache is not None else cache_mod.default_cache_dir()
    bar = None if args.no_progress else ProgressBar(err)
    try:
        source = dataset_mod.resolve_dataset(
            args.data, repo=args.data_repo, filename=args.data_file, offline=args.offline
        )
        corpus = ingest.load_corpus(source, root, bar,
                                        view=View(args.protocol, args.granularity))
        if corpus.rejections:
            first = corpus.rejections[0]
            if bar is not None:
                bar.finish()
            err.write(
                f"{PROG}: warning: {len(corpus.rejections)} of "
                f"{len(corpus.rejections) + len(corpus.pairs)} instances of "
                f"{printable(source.name)} are "
                f"rejected (not embedded, not scored), e.g. instance {first.index} "
                f"({printable(first.question_id or 'no id')}): "
                f"{printable(one_line(first.reason))}; "
                f"`pytest --retrieval-eval --retrieval-eval-json=PATH` lists them all\n"
            )
        config = embedding_mod.EmbedConfig(
            pooling=args.pooling, max_length=args.max_length, query_prefix=args.query_prefix,
            device=args.device, threads=args.threads, batch_size=args.batch_size,
        )
        scoped = _subset_corpus(args, corpus, root)
        roots = [root, cache_mod.bundled_cache_dir()]
        # The model is loaded only when some vector this prep needs is missing: with every
        # vector cached (the bundled sample's), prep, --shard and cache merge run offline.
        cached = prep_mod.cached_model(roots, args.model, config, scoped, shard=args.shard,
                                       memo_dir=root / MEMO_DIR)
        stats = None
        embedder: Any = None
        if cached is not None:
            embedder = prep_mod.CachedOnly(cached)
            try:
                vectors = cache_mod.VectorCache(root, embedder.fingerprint, embedder.dim,
                                                embedder.info(), read_only_roots=roots[1:])
                stats = prep_mod.cached_stats(scoped, vectors, config.query_prefix, args.shard)
                if stats is not None:
                    # The manifest alone (nothing to commit): --cache is then a prepared
                    # cache of this model, as `cache merge` and `models` expect, even when
                    # every vector came from the bundled ones.
                    vectors.adopt([])
            except CacheError:
                stats = None
            if stats is None:
                embedder = None  # something is missing or damaged: load the model after all
        if stats is None:
            try:
                embedder = embedding_mod.load_embedder(args.model, config,
                                                       offline=args.offline,
                                                       memo_dir=root / MEMO_DIR)
            except ModelError as exc:
                ready = prep_mod.models_ready(roots, config, scoped, shard=args.shard)
                if not ready:
                    raise
                raise ModelError(
                    f"{exc}; or use a model whose vectors are all cached for this dataset "
                    f"(nothing to download): --model {ready[0]}"
                    + (f" (also: {', '.join(ready[1:])})" if ready[1:] else "")) from None
            vectors = cache_mod.VectorCache(
                root, embedder.fingerprint, embedder.dim, embedder.info(),
                read_only_roots=roots[1:],
            )
            stats = prep_mod.run_prep(scoped, embedder, vectors, bar,
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
    summary = (
        f"prep: {stats.slots} slots, {stats.unique_texts} unique texts, {stats.embedded_now} "
        f"embedded now, {stats.from_cache} from cache, {seconds:.1f}s (model "
        f"{embedder.name}, fingerprint {embedder.fingerprint[:12]}"
        + ("; not loaded: every vector needed was cached"
           if isinstance(embedder, prep_mod.CachedOnly) else "") + ")"
    )
    write_fitted(out, [summary, *_scale_lines(args, stats)])
    return 0


def _subset_corpus(args: argparse.Namespace, corpus: Any, root: Path) -> Any:
    """The corpus prep sees: under --subset, the chosen pairs only; with --turns, their
    sessions' turn texts too, each persona's turn rows kept under ``root`` as a run keeps
    them (:mod:`..data.turn_rows`: the first +unit:turn run reads them back, not a turn
    decoded or keyed again)."""
    if args.subset is not None:
        from ..data import subset as subset_mod

        chosen = subset_mod.choose(corpus, args.subset, args.subset_seed, flag="--subset")
        corpus = subset_mod.SubsetCorpus(corpus, chosen)
    if getattr(args, "turns", False):
        from ..data.turn_rows import TurnRowsCache
        from ..data.turn_texts import WithTurnTexts

        corpus = WithTurnTexts(corpus, TurnRowsCache(root / "turns"), hand_on=False)
    return corpus


def _ray_embed(args: argparse.Namespace, config: Any, embedder: Any, vectors: Any,
               bar: ProgressBar | None) -> Any:
    """Under --ray, prep's embedding loop on Ray (ray_prep.py); else None (local)."""
    if args.ray is None:
        return None
    from ..vectors import ray_prep

    return ray_prep.ray_embed_missing(
        address=args.ray or None, model_spec=args.model, config=config, offline=args.offline,
        fingerprint=embedder.fingerprint, dim=embedder.dim, cache=vectors, progress=bar,
        chunk_size=args.chunk_size)


def _scale_lines(args: argparse.Namespace, stats: Any) -> list[str]:
    lines = []
    if args.subset is not None:
        lines.append(f"subset: {args.subset} pairs, seed {args.subset_seed} (stratified by "
                     f"question type; the same pairs as --retrieval-eval-subset="
                     f"{args.subset} --retrieval-eval-subset-seed={args.subset_seed})")
    if args.shard is not None:
        i, n = args.shard
        lines.append(f"shard {i}/{n}: {stats.other_shards} missing texts left to the other "
                     f"slices; combine the caches with `{PROG} cache merge DIR... --into DIR`")
    return lines


def _cmd_models(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..reporting.text_width import fit_fields
    from ..vectors import cache as cache_mod

    root: Path = args.cache if args.cache is not None else cache_mod.default_cache_dir()
    roots = [root] if args.no_bundled else [root, cache_mod.bundled_cache_dir()]
    models = cache_mod.list_models(roots)
    # Folders that lost their manifest: never used, and never left out of the list silently.
    write_fitted(out, [
        f"{folder}: {count} shard(s){f' of model {name}' if name else ''} but no "
        f"manifest.json, so its vectors are never used; copy manifest.json back from the "
        f"cache that made it, or delete the folder and prep that model again"
        for folder, count, name in cache_mod.unlisted_folders(roots)])
    if not models:
        write_fitted(out, [f"no model vectors in {root}; make some with `{PROG} prep`"])
        return 0
    width = terminal_width()
    for m in models:
        where = ", ".join(
            "bundled" if Path(r) == cache_mod.bundled_cache_dir() else str(r)
            for r in m.get("roots", [])
        )
        # One entry per model: its fields on one line, or broken between fields to fit.
        fields = [str(m.get("name", "?")), f"fingerprint {str(m.get('fingerprint', ''))[:12]}",
                  f"dim {m.get('dim', '?')}", f"{m.get('vectors', 0)} vectors",
                  f"pooling {m.get('pooling', '?')}", f"max_length {m.get('max_length', '?')}",
                  f"query_prefix {str(m.get('query_prefix', ''))!r}", f"({where})"]
        out.writelines(line + "\n" for line in fit_fields(fields, width))
    return 0

