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
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import retrievers as retrievers_mod
from ..config.options import DEFAULT_DATA, DEFAULT_DATA_REPO, DEFAULT_MODEL
from ..config.settings import RECIPE_OPTIONS, Settings
from ..errors import CacheError, ModelError, RetrievalEvalError
from ..io.checksums import MEMO_DIR
from ..retrievers.variants import is_variant
from ..vectors import cache as cache_mod
from .plan import Plan

if TYPE_CHECKING:  # model files, prep and the embedder load when a lane needs them
    from ..data import corpus as corpus_mod
    from ..data import subset as subset_mod
    from ..vectors import model_files

    AnyCorpus = corpus_mod.Corpus | subset_mod.SubsetCorpus

Progress = Callable[[str, int, "int | None"], None]


def vector_cache(cache_root: Path, model: Mapping[str, Any], *, verify: str = "stamp",
                 writes: bool = True) -> cache_mod.VectorCache:
    """The run's vector cache of ``model``: ``cache_root``, with the bundled sample's vectors
    read-only behind it. A shard the cache's memo vouches for is trusted (``verify``, the
    run's ``--retrieval-eval-verify``: "full" rehashes); shards are read through their dense
    twins, built where missing unless the run ``writes`` nothing (a read-only run)."""
    return cache_mod.VectorCache(cache_root, str(model["fingerprint"]),
                                 int(model["dim"]), model,
                                 read_only_roots=[cache_mod.bundled_cache_dir()],
                                 memo_dir=cache_root / MEMO_DIR if writes else None,
                                 verify=verify, twins=writes)


def needed_keys(corpus: AnyCorpus) -> list[str]:
    """Text keys of every usable pair's memory rows, first seen first, once each."""
    # one dict over every pair's keys in a single pass (a dict per pair, merged, took twice
    # as long with the turn keys of +unit:turn: about 8,000 a persona)
    return list(dict.fromkeys(chain.from_iterable(
        pair.text_keys for pair in corpus.pairs if not pair.abstention)))


def subset_args(settings: Settings) -> str:
    """What a suggested prep command adds under a subset (prep only what is scored)."""
    s = settings
    return "" if s.subset is None else f" --subset {s.subset} --subset-seed {s.subset_seed}"


def choose_cached_model(settings: Settings, cache_root: Path, corpus: AnyCorpus,
                        keys_out: list[str] | None = None,
                        memo: bool = True) -> dict[str, Any]:
    """``--no-model``: the one model whose cached vectors cover the dataset.

    A model named by ``--retrieval-eval-model`` is what its files are: a local folder's, or
    the Hub id's snapshot in the local Hugging Face cache, are hashed (never loaded) and only
    vectors of those hashes are served; vectors of a namesake made from other files are
    refused. Only a Hub model that is not on this machine is matched by its name. A recipe
    option the user set (``Settings.explicit``) is never overridden by what the cache holds.
    ``keys_out`` gets the keys the corpus needs and the queries', when they were listed (left
    empty when the answer was read back from the cache's memo; ``memo`` False: the answer is
    neither read back nor kept, a read-only run's).
    """
    from ..vectors.coverage import covering_models

    s = settings
    roots = [cache_root, cache_mod.bundled_cache_dir()]
    # remembered per cache listing: a warm start lists no key (vectors/coverage.py)
    holding, needed = covering_models(roots, corpus, needed_keys,
                                      cache_root / MEMO_DIR if memo else None)
    if keys_out is not None:
        keys_out[:] = needed or []
    files = wanted_files(s, cache_root)
    if s.model is not None:
        same = [m for m in holding if is_wanted(m, s, files)]
        if not same and files is not None:
            namesakes = [m for m in holding if m.get("name") == files.name]
            if namesakes:
                raise CacheError(other_files(s, cache_root, files, namesakes[0]))
        holding = same
    explicit = [name for name in RECIPE_OPTIONS if name in s.explicit]
    if explicit and holding:
        fitting = [m for m in holding if fits(m, s, explicit)]
        if not fitting:
            raise CacheError(other_recipe(s, cache_root, corpus, holding, explicit))
        holding = fitting
    if s.model is not None and len(holding) > 1:  # the options' values, set or default
        holding = [m for m in holding if fits(m, s, RECIPE_OPTIONS)] or holding
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
    # the questions: a turn corpus's own pairs (which list every turn) are not read for them
    wrapped: Any = corpus
    asked = wrapped.corpus if getattr(wrapped, "adds_turns", False) else corpus
    queries = [cache_mod.query_key(p.question, str(model.get("query_prefix", "")))
               for p in asked.pairs if not p.abstention]
    if keys_out is not None and needed is not None:
        keys_out.extend(queries)
    missing = vector_cache(cache_root, model).missing(queries)
    if missing:
        raise CacheError(
            f"--no-model: the cache lacks {len(missing)} query vector(s) of model "
            f"{model['name']} for dataset {corpus.dataset_name}; "
            f"{run_prep(s, cache_root, model, recipe_of(model))} first"
        )
    return model


def wanted_files(settings: Settings, cache_root: Path) -> model_files.ModelFiles | None:
    """The files of the model ``--retrieval-eval-model`` names, when they are on this
    machine (hashed, never loaded; no socket): None without the option, or for a Hub model
    that is not in the local Hugging Face cache (then only its name identifies it)."""
    if settings.model is None:
        return None
    from ..vectors import model_files

    return model_files.files_here(settings.model, memo_dir=cache_root / MEMO_DIR)


def is_wanted(info: Mapping[str, Any], settings: Settings,
              files: model_files.ModelFiles | None) -> bool:
    """Whether cached vectors described by ``info`` are of the model the run names: the same
    file hashes when its files are here, else the same name."""
    if settings.model is None:
        return True
    if files is None:
        return info.get("name") == settings.model.strip()
    return (info.get("model_sha256") == files.model_sha256
            and info.get("tokenizer_sha256") == files.tokenizer_sha256)


def recipe_of(info: Mapping[str, Any]) -> dict[str, Any]:
    """The recipe options of cached vectors (their manifest's values; a max length that is
    no whole number is kept as it is, equal to no option's value)."""
    length = info.get("max_length", 512)
    return {"pooling": str(info.get("pooling", "mean")),
            "max_length": length if isinstance(length, int) else str(length),
            "query_prefix": str(info.get("query_prefix", ""))}


def fits(info: Mapping[str, Any], settings: Settings, names: Sequence[str]) -> bool:
    """Whether cached vectors were made with the run's value of each recipe option named."""
    recipe = recipe_of(info)
    return all(recipe[name] == getattr(settings, name) for name in names)


def wanted_recipe(settings: Settings, base: Mapping[str, Any] | None) -> dict[str, Any]:
    """The recipe a suggested prep should use: each option the user set, the rest as
    ``base`` (cached vectors) has them, or the run's values without a base."""
    s = settings
    held = recipe_of(base) if base is not None else {}
    return {name: getattr(s, name) if name in s.explicit or name not in held else held[name]
            for name in RECIPE_OPTIONS}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def recipe_args(recipe: Mapping[str, Any]) -> str:
    """prep's flags for a recipe (none at the defaults)."""
    defaults = {"pooling": "mean", "max_length": 512, "query_prefix": ""}
    return "".join(f" {_flag(name)} {shlex.quote(str(recipe[name]))}"
                   for name in RECIPE_OPTIONS if recipe[name] != defaults[name])


def model_arg(settings: Settings, cache_root: Path,
              info: Mapping[str, Any] | None) -> tuple[str, str]:
    """prep's ``--model`` value for the model of cached vectors ``info``, and a note when it
    is a placeholder: the run's ``--retrieval-eval-model``; else a Hub id; else the folder
    where the cache's hash memo last saw a local model's files; else ``DIR``."""
    if settings.model is not None:
        return shlex.quote(settings.model), ""
    if info is None:
        return DEFAULT_MODEL, ""
    name = str(info.get("name") or DEFAULT_MODEL)
    from ..vectors import model_files

    folder = model_files.folder_holding(name, str(info.get("model_sha256", "")),
                                        str(info.get("tokenizer_sha256", "")),
                                        cache_root / MEMO_DIR)
    if folder is not None:
        return shlex.quote(str(folder)), ""
    if "/" in name:  # owner/name: a Hub id (a local model is named by its folder's name)
        return shlex.quote(name), ""
    return "DIR", f" (DIR: the folder of local model {name})"


def run_prep(settings: Settings, cache_root: Path, info: Mapping[str, Any] | None,
             recipe: Mapping[str, Any]) -> str:
    """``run `retrieval-eval prep ...``` for the model of ``info`` under ``recipe``."""
    s = settings
    model, note = model_arg(s, cache_root, info)
    return (f"run `retrieval-eval prep --data {s.data} --model {model} --cache {cache_root}"
            f"{recipe_args(recipe)}{subset_args(s)}{view_args(s)}`{note}")


def other_files(settings: Settings, cache_root: Path, files: model_files.ModelFiles,
                namesake: Mapping[str, Any]) -> str:
    """The line when the cache's vectors of the named model's name were made from other
    files than the ones here (another folder of that name, a changed Hub snapshot)."""
    from ..vectors.embedding import EmbedConfig, recipe_fingerprint, resolved

    s = settings
    assert s.model is not None
    recipe = wanted_recipe(s, namesake)
    config = EmbedConfig(pooling=recipe["pooling"], max_length=recipe["max_length"],
                         query_prefix=recipe["query_prefix"])
    here = recipe_fingerprint(files.model_sha256, files.tokenizer_sha256,
                              resolved(config, files)[0])
    what = (f"folder {s.model}" if Path(s.model).expanduser().is_dir()
            else f"the local Hugging Face cache's snapshot of {s.model}")
    return (f"--no-model: the cached vectors of model {namesake.get('name')} (fingerprint "
            f"{str(namesake.get('fingerprint'))[:12]}) were made from other files than "
            f"{what} holds (fingerprint {here[:12]}), so they are not served; "
            f"{run_prep(s, cache_root, None, recipe)} first")


def other_recipe(settings: Settings, cache_root: Path, corpus: AnyCorpus,
                 holding: Sequence[Mapping[str, Any]], explicit: Sequence[str]) -> str:
    """The line when the only cached vectors that cover the dataset were made with another
    value of a recipe option the user set."""
    s = settings
    asked = ", ".join(f"--retrieval-eval-{_flag(n)[2:]} {shlex.quote(str(getattr(s, n)))}"
                      for n in explicit)
    held = "; ".join(
        f"{m.get('name')} (fingerprint {str(m.get('fingerprint'))[:12]}) with "
        + ", ".join(f"{n.replace('_', ' ')} {shlex.quote(str(recipe_of(m)[n]))}"
                    for n in explicit)
        for m in holding)
    return (f"--no-model: the cache holds vectors for dataset {corpus.dataset_name} only of "
            f"{held}, not made with {asked} as asked, and an option you set is never "
            f"overridden by what the cache holds; "
            f"{run_prep(s, cache_root, holding[0], wanted_recipe(s, holding[0]))} first")


def view_args(s: Settings) -> str:
    """prep's flags for the run's protocol and granularity (none at the defaults)."""
    return ((f" --protocol {s.protocol}" if s.protocol != "vipune" else "")
            + (f" --granularity {s.granularity}" if s.granularity != "session" else "")
            + (" --turns" if any(is_unit_turn(name) for name in s.retrievers) else ""))


def is_unit_turn(name: str) -> bool:
    """Whether a retriever name is a ``+unit:turn`` what-if (its prep embeds turns)."""
    return is_variant(name) and "+unit:turn+" in f"{name}+"


def no_cached_model(settings: Settings, cache_root: Path, corpus: AnyCorpus,
                    roots: Sequence[Path]) -> str:
    """The one line when no cached model covers the dataset: it names the shard that
    lost its sidecar, the model folder that lost its manifest, or the models the cache does
    hold, and a prep of that model."""
    s = settings
    files = wanted_files(s, cache_root)
    explicit = [name for name in RECIPE_OPTIONS if name in s.explicit]

    def of_run(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [m for m in models if is_wanted(m, s, files) and fits(m, s, explicit)]

    present = of_run(cache_mod.list_models([cache_root]))  # the user's cache
    anywhere = of_run(cache_mod.list_models(roots))  # the bundled one too: its model
    orphans = cache_mod.uncommitted_shards(roots)
    where = f"dataset {corpus.dataset_name}"
    item = "turn" if s.granularity == "turn" else "session"
    if orphans:
        shard, info = orphans[0]
        of = f" of model {info.get('name')}" if info else ""
        more = f" (and {len(orphans) - 1} more)" if len(orphans) > 1 else ""
        return (f"--no-model: vector cache shard {shard}{more} has no .sha256 sidecar "
                f"(deleted?), so its vectors{of} are not used and no model covers every "
                f"{item} of {where}; {run_prep(s, cache_root, info, wanted_recipe(s, info))} "
                f"to re-embed what it held")
    unlisted = cache_mod.unlisted_folders(roots)
    if unlisted:
        folder, count, name = unlisted[0]
        of = f" of model {name}" if name else ""
        more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
        info = {"name": name} if name and s.model is None else None
        return (f"--no-model: vector cache folder {folder}{more} holds {count} shard(s){of} "
                f"but no manifest.json (deleted?), so its vectors are not used and no model "
                f"covers every {item} of {where}; copy manifest.json back from the cache "
                f"that made it, or delete {folder} and "
                f"{run_prep(s, cache_root, info, wanted_recipe(s, None))}")
    cached = present or anywhere
    only = cached[0] if len({str(m.get("fingerprint")) for m in cached}) == 1 else None
    prep = run_prep(s, cache_root, only, wanted_recipe(s, only))
    if present:
        names = ", ".join(f"{m.get('name')} ({m.get('vectors', 0)} vectors)"
                          for m in present)
        return (f"--no-model: the cache at {cache_root} holds vectors of {names}, "
                f"but not for every {item} of {where}; {prep} first")
    named = f"model {s.model!r}" if s.model else "any model"
    return (f"--no-model: the cache at {cache_root} holds no vectors of {named} for "
            f"every {item} of {where}; {prep} first")


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
    given: list[tuple[str, str]] = []
    if s.data != DEFAULT_DATA:
        given.append(("data", s.data))
    if s.data_repo != DEFAULT_DATA_REPO:
        given.append(("data-repo", s.data_repo))
    if s.data_file is not None:
        given.append(("data-file", s.data_file))
    if s.model is not None:
        given.append(("model", s.model))
    if s.cache_dir is not None:
        given.append(("cache", str(s.cache_dir)))
    # the = form (README): a space form's path could move pytest's rootdir off the ini file
    command = " ".join(["pytest --retrieval-eval --no-model"]
                       + [f"--retrieval-eval-{flag}={shlex.quote(value)}"
                          for flag, value in given])
    return (f"or score without the model, offline, from the vectors of {model['name']} "
            f"cached for dataset {corpus.dataset_name}: `{command}`")


def pull(settings: Settings, cache_root: Path, progress: Progress | None, *,
         fingerprint: str | None = None, model: str | None = None) -> None:
    """``--retrieval-eval-cache-repo``: fetch the model's vectors the cache lacks."""
    from ..vectors.hub_sync import pull as hub_pull

    assert settings.cache_repo is not None
    hub_pull(settings.cache_repo, cache_root, fingerprint=fingerprint, model=model,
             progress=progress, model_flag="--retrieval-eval-model",
             deadline=settings.network_deadline,
             deadline_flag="--retrieval-eval-network-deadline")


def cached_lane(state: Any, progress: Progress | None) -> Plan:
    """``--no-model``: the plan of the one cached model that covers the run's corpus
    (:func:`choose_cached_model`; what ``--retrieval-eval-cache-repo`` holds is pulled when
    none does), its every shard checked. ``state``: the run's :class:`.session.EvalSession`,
    which keeps the vector cache."""
    s = state.settings
    keys: list[str] = []
    try:
        model = choose_cached_model(s, state.cache_root, state.prep_corpus(), keys,
                                    memo=not state.read_only)
    except CacheError:
        if s.cache_repo is None:
            raise
        # What the repo has, then choose again.
        pull(s, state.cache_root, progress, model=s.model)
        model = choose_cached_model(s, state.cache_root, state.prep_corpus(), keys,
                                    memo=not state.read_only)
    # Every shard the run reads checked now: a corrupt one is a usage error naming the
    # file, never a vector served (the model lane's prep quarantines and re-embeds). A
    # shard holding none of the run's keys (a +unit:turn prep's turn vectors, in a run
    # that ranks no turns) is not read, so not checked (issue 44).
    state.vectors = vector_cache(state.cache_root, model, verify=s.verify,
                                 writes=not state.read_only)
    if not state.read_only:  # the model's every shard when its coverage was remembered
        state.vectors.verify(keys if keys else None)
    return Plan(str(state.corpus.path), str(state.cache_root), "model-free", model, None)


def model_lane(state: Any, progress: Progress | None) -> Plan:
    """The model lane: the plan of the run's model, loaded (a failure names the
    ``--no-model`` command that would work, :func:`no_model_hint`), with the vectors the cache
    lacks pulled (``--retrieval-eval-cache-repo``) and embedded. ``state``: the run's
    :class:`.session.EvalSession`, which keeps the embedder and the vector cache."""
    from ..vectors import prep as prep_mod
    from ..vectors.embedding import load_embedder

    s = state.settings
    spec = s.model or DEFAULT_MODEL
    try:
        embedder = load_embedder(spec, state.embed_config(),
                                 memo_dir=state.cache_root / MEMO_DIR,
                                 deadline=s.network_deadline)
    except ModelError as exc:
        hint = no_model_hint(s, state.cache_root, state.corpus)
        if hint is None:
            raise
        raise ModelError(f"{exc}; {hint}") from None
    state.embedder = embedder
    state.vectors = vector_cache(state.cache_root, embedder.info(), verify=s.verify,
                                 writes=not state.read_only)
    if s.cache_repo is not None and state.vectors.missing(
            prep_mod.needed_keys(state.prep_corpus(), embedder)):
        pull(s, state.cache_root, progress,
             fingerprint=embedder.fingerprint, model=embedder.name)
    prep_mod.run_prep(state.prep_corpus(), embedder, state.vectors, progress)
    return Plan(str(state.corpus.path), str(state.cache_root), "model", embedder.info(), spec)
