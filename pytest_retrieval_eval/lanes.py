"""Which model's vectors a run scores with, and the lines that say why none fits.

The ``--no-model`` lane chooses the one model whose cached vectors (the user's cache, then the
bundled sample's) cover the dataset (:func:`choose_cached_model`) or refuses in one line
(:func:`no_cached_model`); the model lane, when its model cannot be loaded, suggests the
``--no-model`` command that would work (:func:`no_model_hint`); ``--retrieval-eval-cache-repo``
pulls what the cache lacks (:func:`pull`). :class:`.session.EvalSession` calls these with its
settings and cache root; nothing here keeps state.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import retrievers as retrievers_mod
from .data import corpus as corpus_mod
from .data import subset as subset_mod
from .errors import CacheError, RetrievalEvalError
from .options import DEFAULT_DATA, DEFAULT_DATA_REPO, DEFAULT_MODEL, Settings
from .vectors import cache as cache_mod
from .vectors import prep as prep_mod

Progress = Callable[[str, int, "int | None"], None]
AnyCorpus = corpus_mod.Corpus | subset_mod.SubsetCorpus


def vector_cache(cache_root: Path, model: Mapping[str, Any]) -> cache_mod.VectorCache:
    """The run's vector cache of ``model``: ``cache_root``, with the bundled sample's vectors
    read-only behind it."""
    return cache_mod.VectorCache(cache_root, str(model["fingerprint"]),
                                 int(model["dim"]), model,
                                 read_only_roots=[cache_mod.bundled_cache_dir()])


def needed_keys(corpus: AnyCorpus) -> list[str]:
    """Text keys of every usable pair's memory rows, first seen first, once each."""
    keys: dict[str, None] = {}
    for pair in corpus.pairs:
        if not pair.abstention:
            keys.update(dict.fromkeys(pair.text_keys))
    return list(keys)


def subset_args(settings: Settings) -> str:
    """What a suggested prep command adds under a subset (prep only what is scored)."""
    s = settings
    return "" if s.subset is None else f" --subset {s.subset} --subset-seed {s.subset_seed}"


def choose_cached_model(settings: Settings, cache_root: Path,
                        corpus: AnyCorpus) -> dict[str, Any]:
    """``--no-model``: the one model whose cached vectors cover the dataset."""
    s = settings
    roots = [cache_root, cache_mod.bundled_cache_dir()]
    holding = cache_mod.models_holding(roots, needed_keys(corpus))
    if s.model is not None:
        # A local model directory is recorded under its folder's name.
        folder = Path(s.model).expanduser()
        wanted = {s.model, folder.resolve().name} if folder.is_dir() else {s.model}
        holding = [m for m in holding if m.get("name") in wanted]
        explicit = [m for m in holding if m.get("pooling") == s.pooling
                    and m.get("query_prefix", "") == s.query_prefix
                    and int(m.get("max_length", 512)) == s.max_length]
        holding = explicit or holding
    prep_cmd = (f"retrieval-eval prep --data {s.data} --model {s.model or DEFAULT_MODEL} "
                f"--cache {cache_root}{subset_args(s)}{view_args(s)}")
    if not holding:
        raise CacheError(no_cached_model(s, cache_root, corpus, roots))
    if len(holding) > 1:
        names = ", ".join(f"{m['name']} ({str(m['fingerprint'])[:12]})" for m in holding)
        raise CacheError(
            f"--no-model: several models' vectors cover dataset {corpus.dataset_name} "
            f"({names}); name one with --retrieval-eval-model"
        )
    # The model's own description, as the model lane reports it: not where it was found
    # (machine-specific paths) nor the cache's format number.
    model = {k: v for k, v in holding[0].items() if k not in ("roots", "format")}
    missing = vector_cache(cache_root, model).missing(
        [prep_mod.query_key(p.question, str(model.get("query_prefix", "")))
         for p in corpus.pairs if not p.abstention])
    if missing:
        raise CacheError(
            f"--no-model: the cache lacks {len(missing)} query vector(s) of model "
            f"{model['name']} for dataset {corpus.dataset_name}; run `{prep_cmd}` first"
        )
    return model


def view_args(s: Settings) -> str:
    """prep's flags for the run's protocol and granularity (none at the defaults)."""
    return ((f" --protocol {s.protocol}" if s.protocol != "vipune" else "")
            + (f" --granularity {s.granularity}" if s.granularity != "session" else ""))


def no_cached_model(settings: Settings, cache_root: Path, corpus: AnyCorpus,
                    roots: Sequence[Path]) -> str:
    """The one line when no cached model covers the dataset: it names the shard that
    lost its sidecar, or the models the cache does hold, and a prep of that model."""
    s = settings
    present = [m for m in cache_mod.list_models([cache_root])  # the user's cache
               if s.model is None or m.get("name") == s.model]
    anywhere = [m for m in cache_mod.list_models(roots)  # the bundled one too: its model
                if s.model is None or m.get("name") == s.model]
    orphans = cache_mod.uncommitted_shards(roots)
    lost = {str(info.get("name")) for _, info in orphans if info}
    cached = lost or {str(m.get("name")) for m in present or anywhere}
    model = s.model or (cached.pop() if len(cached) == 1 else DEFAULT_MODEL)
    prep_cmd = (f"retrieval-eval prep --data {s.data} --model {model} "
                f"--cache {cache_root}{subset_args(s)}{view_args(s)}")
    where = f"dataset {corpus.dataset_name}"
    item = "turn" if s.granularity == "turn" else "session"
    if orphans:
        shard, info = orphans[0]
        of = f" of model {info.get('name')}" if info else ""
        more = f" (and {len(orphans) - 1} more)" if len(orphans) > 1 else ""
        return (f"--no-model: vector cache shard {shard}{more} has no .sha256 sidecar "
                f"(deleted?), so its vectors{of} are not used and no model covers every "
                f"{item} of {where}; run `{prep_cmd}` to re-embed what it held")
    if present:
        names = ", ".join(f"{m.get('name')} ({m.get('vectors', 0)} vectors)"
                          for m in present)
        return (f"--no-model: the cache at {cache_root} holds vectors of {names}, "
                f"but not for every {item} of {where}; run `{prep_cmd}` first")
    named = f"model {s.model!r}" if s.model else "any model"
    return (f"--no-model: the cache at {cache_root} holds no vectors of {named} for "
            f"every {item} of {where}; run `{prep_cmd}` first")


def no_model_hint(settings: Settings, cache_root: Path,
                  corpus: corpus_mod.Corpus) -> str | None:
    """When the model cannot be loaded: the ``--no-model`` command that works with the
    vectors the cache (or the bundled sample) holds for this dataset, or None."""
    s = settings
    try:
        model = choose_cached_model(s, cache_root, corpus)
        if "vipune" in s.retrievers:
            retrievers_mod.check_compatible(model)  # as finish_setup would
    except RetrievalEvalError:
        return None
    words = ["pytest", "--retrieval-eval", "--no-model"]
    if s.data != DEFAULT_DATA:
        words += ["--retrieval-eval-data", s.data]
    if s.data_repo != DEFAULT_DATA_REPO:
        words += ["--retrieval-eval-data-repo", s.data_repo]
    if s.data_file is not None:
        words += ["--retrieval-eval-data-file", s.data_file]
    if s.model is not None:
        words += ["--retrieval-eval-model", s.model]
    if s.cache_dir is not None:
        words += ["--retrieval-eval-cache", str(s.cache_dir)]
    command = " ".join(shlex.quote(word) for word in words)
    return (f"or score without the model, offline, from the vectors of {model['name']} "
            f"cached for dataset {corpus.dataset_name}: `{command}`")


def pull(settings: Settings, cache_root: Path, progress: Progress | None, *,
         fingerprint: str | None = None, model: str | None = None) -> None:
    """``--retrieval-eval-cache-repo``: fetch the model's vectors the cache lacks."""
    from .vectors.hub_sync import pull as hub_pull

    assert settings.cache_repo is not None
    hub_pull(settings.cache_repo, cache_root, fingerprint=fingerprint, model=model,
             progress=progress, model_flag="--retrieval-eval-model",
             deadline=settings.network_deadline,
             deadline_flag="--retrieval-eval-network-deadline")
