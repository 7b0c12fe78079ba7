"""The scale phase (docs/scaling.md): prep from an empty vector cache, unsharded against 2-way
``--shard`` plus ``cache merge``, against ``--ray`` on a local 2-CPU Ray, and a ``--subset``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness_phases import run_env
from benchmarks.measuring import (
    PYTHON,
    Measured,
    Results,
    Row,
    check,
    fmt_mem,
    fmt_s,
    measure,
    verdict,
)
from pytest_retrieval_eval.data import corpus as corpus_mod
from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder

# --------------------------------------------------------------------------- scale


SUBSET_N = 50
SUBSET_TARGET = 0.10  # the goal: a 50-pair subset preps in about a tenth of the time
RAY_SCRIPT = (
    "import sys, ray\n"
    "ray.init(num_cpus=2, include_dashboard=False, _node_ip_address='127.0.0.1', "
    "log_to_driver=False, configure_logging=False)\n"
    "from pytest_retrieval_eval import cli\n"
    "code = cli.main(sys.argv[1:])\n"
    "ray.shutdown()\n"
    "sys.exit(code)\n"
)


def _fresh_root(cache: Path, name: str) -> Path:
    """An empty vector cache beside ``cache`` sharing its corpus (hard links): every prep
    variant starts from the same corpus and no vectors."""
    root = cache.parent / f"scale-{name}"
    shutil.rmtree(root, ignore_errors=True)
    for sub in ("corpus", "sha256"):
        src = cache / sub
        if src.is_dir():
            shutil.copytree(src, root / sub, copy_function=os.link)
    return root


def _prep_cmd(data: Path, model: Path, root: Path, *extra: str) -> list[str]:
    return [PYTHON, "-m", "pytest_retrieval_eval.cli", "prep", "--no-progress", "--data",
            str(data), "--model", str(model), "--cache", str(root), *extra]


def _prepped(m: Measured) -> tuple[int, int]:
    """(unique texts, embedded now) of a prep summary (over lines that fit the terminal)."""
    words = m.output[m.output.index("prep:"):].replace(",", "").split()
    return int(words[3]), int(words[6])


def _vectors(root: Path, model: Path) -> tuple[list[str], Any]:
    from pytest_retrieval_eval.vectors.cache import VectorCache

    embedder = load_embedder(str(model), EmbedConfig())
    vc = VectorCache(root, embedder.fingerprint, embedder.dim, embedder.info())
    keys = sorted(vc.keys())
    return keys, vc.get(keys)


def _compare(a: tuple[list[str], Any], b: tuple[list[str], Any]) -> tuple[bool, bool, float]:
    """(same keys, bit-identical vectors, largest absolute difference)."""
    if a[0] != b[0]:
        return False, False, float("nan")
    diff = float(np.abs(a[1] - b[1]).max()) if len(a[0]) else 0.0
    return True, a[1].tobytes() == b[1].tobytes(), diff


def scale_phase(data: Path, model: Path, cache: Path, results: Results, *,
                steps: set[str], pairs: int | None = None,
                full_wall: float | None = None) -> None:
    """``steps``: reference (unsharded prep from empty), shard, ray, subset. ``pairs`` runs the
    reference, shard and Ray comparisons on that many pairs of the dataset (``--subset``), so
    they fit a loaded machine; ``full_wall`` is a full prep's wall measured earlier, for the
    subset row's ratio when the reference is not the full dataset."""
    env = run_env()
    load = [os.getloadavg()[0]]
    scope: tuple[str, ...] = ("--subset", str(pairs)) if pairs else ()
    on = f" ({pairs}-pair subset of M)" if pairs else ""
    full_root = _fresh_root(cache, "full")
    full = measure(_prep_cmd(data, model, full_root, *scope), cwd=cache.parent, env=env)
    check(full, "unsharded prep")
    unique, embedded = _prepped(full)
    reference = _vectors(full_root, model)
    if not pairs:
        full_wall = full.wall
    results.add(Row(
        f"scale: prep from empty, unsharded (tiny model){on}", fmt_s(full.wall),
        fmt_mem(full.tree_peak), f"{embedded / full.wall:.0f} texts/s", "", "",
        f"{embedded:,} of {unique:,} texts embedded; corpus already built; CPU "
        f"{full.cpu:.0f} s"))
    if "shard" in steps:
        # Two slices (one after the other here: two machines in real use), then a merge.
        walls, parts = [], []
        for i in (1, 2):
            root = _fresh_root(cache, f"shard{i}")
            m = measure(_prep_cmd(data, model, root, *scope, "--shard", f"{i}/2"),
                        cwd=cache.parent, env=env)
            check(m, f"prep --shard {i}/2")
            walls.append(m.wall)
            parts.append((root, _prepped(m)[1]))
        merged_root = _fresh_root(cache, "merged")
        merge = measure([PYTHON, "-m", "pytest_retrieval_eval.cli", "cache", "merge",
                         *(str(r) for r, _ in parts), "--into", str(merged_root)],
                        cwd=cache.parent, env=env)
        check(merge, "cache merge")
        same_keys, identical, diff = _compare(reference, _vectors(merged_root, model))
        two = max(walls) + merge.wall
        results.add(Row(
            f"scale: 2-way --shard prep + cache merge vs unsharded{on}",
            f"{fmt_s(max(walls))} + {fmt_s(merge.wall)}", "", "",
            "identical cache", verdict(same_keys and diff <= 1e-6),
            f"slices {fmt_s(walls[0])} ({parts[0][1]:,} texts) and {fmt_s(walls[1])} "
            f"({parts[1][1]:,}); two machines: {two:.0f} s with the merge against "
            f"{full.wall:.0f} s unsharded ({full.wall / two:.2f}x); one machine, slices in "
            f"turn: {sum(walls):.0f} s; same {len(reference[0]):,} keys: {same_keys}; vectors "
            + ("bit-identical" if identical else f"equal to {diff:.1e} (float32 rounding: "
               "other chunks batch other texts together)")))
    if "ray" in steps:
        # Ray Data on a local 2-CPU Ray (127.0.0.1), started inside the measured process.
        ray_root = _fresh_root(cache, "ray")
        ray_cmd = [PYTHON, "-c", RAY_SCRIPT, "prep", "--no-progress", "--data", str(data),
                   "--model", str(model), "--cache", str(ray_root), *scope, "--ray"]
        ray = measure(ray_cmd, cwd=cache.parent, env=env)
        check(ray, "prep --ray")
        same_keys, identical, diff = _compare(reference, _vectors(ray_root, model))
        results.add(Row(
            f"scale: prep --ray (local Ray, 2 CPUs) vs local prep{on}", fmt_s(ray.wall),
            fmt_mem(ray.tree_peak), f"{_prepped(ray)[1] / ray.wall:.0f} texts/s",
            "bit-identical vectors", verdict(same_keys and identical),
            f"{ray.wall / full.wall:.2f}x local prep's wall ({fmt_s(full.wall)}), Ray start "
            f"included: overhead {ray.wall - full.wall:+.0f} s; same keys: {same_keys}; "
            f"max difference {diff:.1e}"))
    if "subset" in steps:
        sub_root = _fresh_root(cache, "subset")
        sub = measure(_prep_cmd(data, model, sub_root, "--subset", str(SUBSET_N)),
                      cwd=cache.parent, env=env)
        check(sub, "prep --subset")
        _, sub_embedded = _prepped(sub)
        texts = corpus_mod.open_corpus(next((cache / "corpus").glob("*.sqlite"))).stats
        total = int(texts.get("unique_texts", 0)) or unique
        ratio = sub.wall / full_wall if full_wall else None
        results.add(Row(
            f"scale: prep --subset {SUBSET_N} (of M) vs full prep", fmt_s(sub.wall),
            fmt_mem(sub.tree_peak), f"{sub_embedded / sub.wall:.0f} texts/s",
            f"about {SUBSET_TARGET:.0%} of full prep",
            "" if ratio is None else verdict(ratio <= SUBSET_TARGET * 1.5),
            ("" if ratio is None else f"{ratio:.0%} of the full prep's wall "
             f"({fmt_s(full_wall or 0)}); ")
            + f"{sub_embedded:,} of {total:,} texts ({sub_embedded / total:.0%}): each "
            "history holds ~500 sessions of one shared pool, so 50 histories cover ~46% of "
            "it (docs/scaling.md)"))
    load.append(os.getloadavg()[0])
    results.facts.append(
        f"scale phase: load average {load[0]:.2f} at its start, {load[1]:.2f} at its end "
        f"(other work on the 2 cores shifts every wall; the rows are taken minutes apart)")
    for name in ("full", "shard1", "shard2", "merged", "ray", "subset"):
        shutil.rmtree(cache.parent / f"scale-{name}", ignore_errors=True)

