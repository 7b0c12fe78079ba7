"""The harness end to end, each step a real process: load (the dataset streamed into the
corpus, then reopened), prep (embedding the unique texts), per-run ``pytest --retrieval-eval``
runs (first, warm, ``-n 2``, four retrievers; the pytest-xdist floor), the turn-granularity
phase, and the summary of a profiled warm run."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.measuring import (
    FIRST_WALL,
    LOAD_PEAK,
    PARALLEL_GAIN,
    PYTHON,
    WARM_PEAK,
    WARM_WALL,
    Measured,
    Results,
    Row,
    check,
    du,
    fmt_mem,
    fmt_s,
    measure,
    verdict,
)
from pytest_retrieval_eval.data.generator import instances as generator

# --------------------------------------------------------------------------- load and prep


def load_phase(data: Path, cache: Path, n_instances: int, results: Results) -> None:
    shutil.rmtree(cache / "corpus", ignore_errors=True)
    shutil.rmtree(cache / "sha256", ignore_errors=True)
    script = (
        "import sys, time; from pathlib import Path\n"
        "from pytest_retrieval_eval.data import dataset, ingest\n"
        "t = time.perf_counter()\n"
        "c = ingest.load_corpus(dataset.resolve_dataset(sys.argv[1]), Path(sys.argv[2]))\n"
        "print('SECONDS', time.perf_counter() - t)\n"
        "print('STATS', __import__('json').dumps(dict(c.stats)))\n"
        "print('RCHAR', open('/proc/self/io').read().split()[1])\n"
    )
    size = data.stat().st_size
    cold = measure([PYTHON, "-c", script, str(data), str(cache)], cwd=cache.parent)
    check(cold, "the load phase")
    stats = json.loads(_field(cold.output, "STATS"))
    results.add(Row(
        f"load: stream {size / 1e9:.2f} GB JSON once into the corpus (cold)",
        fmt_s(cold.wall), fmt_mem(cold.tree_peak), f"{n_instances / cold.wall:.0f} inst/s",
        "peak < 1 GiB", verdict(cold.tree_peak < LOAD_PEAK),
        f"{stats['slots']:,} slots, {stats['unique_session_texts']:,} unique session texts"))
    corpus_file = next((cache / "corpus").glob("*.sqlite"))
    results.facts.append(
        f"corpus file {corpus_file.stat().st_size / 1e6:.0f} MB; dataset {size / 1e9:.2f} GB")
    # The build stamped the corpus it hashed: later opens read neither the dataset nor the
    # whole corpus.
    reads = []
    for _ in range(2):
        warm = measure([PYTHON, "-c", script, str(data), str(cache)], cwd=cache.parent)
        check(warm, "reopening the corpus")
        reads.append(int(_field(warm.output, "RCHAR")))
    results.add(Row(
        "load: a later run opens the corpus (sha256 memo)", fmt_s(warm.wall),
        fmt_mem(warm.tree_peak), "", "dataset not read again",
        verdict(max(reads) < size // 2),
        f"{max(reads) / 1e6:.0f} MB read at most; dataset {size / 1e6:.0f} MB"))


def _field(output: str, name: str) -> str:
    for line in output.splitlines():
        if line.startswith(name + " "):
            return line[len(name) + 1 :]
    raise SystemExit(f"benchmark: no {name} line in:\n{output[-3000:]}")


def prep_phase(data: Path, model: Path, cache: Path, results: Results) -> None:
    shutil.rmtree(cache / "vectors", ignore_errors=True)
    cmd = [PYTHON, "-m", "pytest_retrieval_eval.cli", "prep", "--no-progress", "--data",
           str(data), "--model", str(model), "--cache", str(cache)]
    m = measure(cmd, cwd=cache.parent)
    check(m, "prep")
    # "prep: N slots, U unique texts, E embedded now, C from cache, S s (model ...)", over
    # lines that fit the terminal (its words are the same)
    words = m.output[m.output.index("prep:"):].replace(",", "").split()
    slots, unique, embedded = int(words[1]), int(words[3]), int(words[6])
    results.add(Row(
        "prep: embed unique texts (tiny model, dim 384)", fmt_s(m.wall), fmt_mem(m.tree_peak),
        f"{embedded / m.wall:.0f} texts/s", "shared sessions embedded once",
        verdict(embedded == unique < slots),
        f"{slots:,} slots -> {unique:,} unique texts, {embedded:,} embedded"))


# --------------------------------------------------------------------------- per-run


def pytest_cmd(data: Path, cache: Path, report: Path, extra: Sequence[str] = ()) -> list[str]:
    return [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--retrieval-eval",
            "--no-model", "--retrieval-eval-retriever", "hybrid", "--retrieval-eval-data",
            str(data), "--retrieval-eval-cache", str(cache), "--retrieval-eval-json",
            str(report), *extra]


def run_env() -> dict[str, str]:
    env = dict(os.environ)
    env["HF_HUB_OFFLINE"] = "1"
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("RETRIEVAL_EVAL_CACHE_DIR", None)
    return env


def store_files(cache: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (cache / "stores").glob("*/*.sqlite")}


def alternate(serial_cmd: Callable[[int], list[str]], parallel_cmd: Callable[[int], list[str]],
              cwd: Path, env: dict[str, str], repeat: int,
              what: str) -> tuple[list[Measured], list[Measured]]:
    """``repeat`` serial and ``-n 2`` runs taken in turn (serial, -n 2, serial, ...), so a
    change in the machine's load while measuring falls on both sides alike."""
    serial: list[Measured] = []
    parallel: list[Measured] = []
    for i in range(repeat):
        for runs, cmd in ((serial, serial_cmd(i)), (parallel, parallel_cmd(i))):
            m = measure(cmd, cwd, env)
            check(m, what)
            runs.append(m)
    return serial, parallel


def _report_numbers(path: Path) -> Any:
    report = json.loads(path.read_text())
    ranked = sorted((p["retriever"], p["question_id"], p["ranked"]) for p in report["pairs"])
    return report["summary"], ranked


def _same(reports: Path, base: str, names: Sequence[str]) -> bool:
    expected = _report_numbers(reports / f"{base}.json")
    return all(_report_numbers(reports / f"{name}.json") == expected for name in names)


def _parallel_row(label: str, serial: Sequence[Measured], parallel: Sequence[Measured],
                  usable: int, unit: str, same: bool) -> tuple[Row, float]:
    """The ``-n 2`` row against its serial twin: median walls, the gain and the verdict."""
    wall = statistics.median(m.wall for m in serial)
    pwall = statistics.median(m.wall for m in parallel)
    gain = 1 - pwall / wall
    row = Row(
        label, fmt_s(pwall), fmt_mem(max(m.tree_peak for m in parallel)),
        f"{usable / pwall:.1f} {unit}/s", "faster than serial (by > 5%), same summary",
        verdict(gain > PARALLEL_GAIN and same),
        f"{wall / pwall:.2f}x the serial speed ({fmt_s(wall)}); summary and rankings "
        f"{'identical' if same else 'DIFFER'}; walls "
        + ", ".join(f"{m.wall:.1f}" for m in parallel)
        + f"; CPU {statistics.median(m.cpu for m in parallel):.1f} s against "
        f"{statistics.median(m.cpu for m in serial):.1f} s serial")
    return row, gain


def run_phase(data: Path, cache: Path, usable: int, repeat: int, results: Results,
              profile: Path | None) -> None:
    env = run_env()
    with tempfile.TemporaryDirectory(prefix="retrieval-eval-bench-") as tmp:
        workdir = Path(tmp) / "empty"
        workdir.mkdir()
        reports = Path(tmp)
        shutil.rmtree(cache / "stores", ignore_errors=True)
        first = measure(pytest_cmd(data, cache, reports / "first.json"), workdir, env)
        check(first, "the first run")
        results.add(Row(
            "run: first after prep, serial (builds the stores)", fmt_s(first.wall),
            fmt_mem(first.tree_peak), f"{usable / first.wall:.1f} pairs/s", "< 180 s",
            verdict(first.wall < FIRST_WALL),
            f"{usable} pairs, hybrid; CPU {first.cpu:.0f} s"))
        built = store_files(cache)
        serial, parallel = alternate(
            lambda i: pytest_cmd(data, cache, reports / f"serial-{i}.json"),
            lambda i: pytest_cmd(data, cache, reports / f"n2-{i}.json", ["-n", "2"]),
            workdir, env, repeat, "a warm run")
        after = store_files(cache)
        rebuilt = sum(1 for k, v in after.items() if built.get(k) != v)
        wall = statistics.median(m.wall for m in serial)
        peak = max(m.tree_peak for m in serial)
        results.add(Row(
            f"run: warm, serial (median of {repeat})", fmt_s(wall), fmt_mem(peak),
            f"{usable / wall:.1f} pairs/s", "< 30 s, < 4 GiB",
            verdict(wall < WARM_WALL and peak < WARM_PEAK),
            "walls " + ", ".join(f"{m.wall:.1f}" for m in serial)
            + f"; CPU {statistics.median(m.cpu for m in serial):.1f} s"))
        results.add(Row(
            "stores: one per persona, reused across runs", "", "", "",
            "one per persona, 0 rebuilt", verdict(len(after) == usable and rebuilt == 0),
            f"{len(after)} store files for {usable} personas, {rebuilt} rebuilt by warm runs"))
        same = _same(reports, "serial-0", ["first", *(f"n2-{i}" for i in range(repeat))])
        row, warm_gain = _parallel_row(f"run: warm, -n 2 (median of {repeat})", serial,
                                       parallel, usable, "pairs", same)
        results.add(row)
        total = du(cache / "stores")
        results.facts.append(f"stores: {len(after)} files, {total / 1e9:.2f} GB "
                             f"({total / max(len(after), 1) / 1e6:.1f} MB each on average)")
        # -n 2 where the items carry the work: the first run (each builds its store).
        shutil.rmtree(cache / "stores", ignore_errors=True)
        pfirst = measure(pytest_cmd(data, cache, reports / "n2-first.json", ["-n", "2"]),
                         workdir, env)
        check(pfirst, "the first -n 2 run")
        row, _ = _parallel_row("run: first after prep, -n 2 (builds the stores)", [first],
                               [pfirst], usable, "pairs",
                               _same(reports, "serial-0", ["n2-first"]))
        results.add(row)
        # Four retrievers per pair (1,880 items): the bm25 term counts are saved first.
        every = ["--retrieval-eval-retriever", "hybrid,semantic,fts,bm25"]
        shutil.rmtree(cache / "terms", ignore_errors=True)
        counts = measure(pytest_cmd(data, cache, reports / "all-build.json", every), workdir,
                         env)
        check(counts, "the run that saves the bm25 term counts")
        all_serial, all_parallel = alternate(
            lambda i: pytest_cmd(data, cache, reports / f"all-{i}.json", every),
            lambda i: pytest_cmd(data, cache, reports / f"all-n2-{i}.json", [*every, "-n", "2"]),
            workdir, env, repeat, "a warm four-retriever run")
        awall = statistics.median(m.wall for m in all_serial)
        results.add(Row(
            f"run: warm, serial, 4 retrievers (median of {repeat})", fmt_s(awall),
            fmt_mem(max(m.tree_peak for m in all_serial)), f"{4 * usable / awall:.0f} items/s",
            "", "", f"hybrid, semantic, fts, bm25: {4 * usable} items; the run that first "
            f"saved the bm25 term counts took {fmt_s(counts.wall)}"))
        same = _same(reports, "all-build", [*(f"all-{i}" for i in range(repeat)),
                                            *(f"all-n2-{i}" for i in range(repeat))])
        row, _ = _parallel_row(f"run: warm, -n 2, 4 retrievers (median of {repeat})",
                               all_serial, all_parallel, 4 * usable, "items", same)
        results.add(row)
        if warm_gain <= PARALLEL_GAIN:
            floor_phase(Path(tmp), usable, repeat, results, wall)
        if profile is not None:
            prof = measure([PYTHON, "-m", "cProfile", "-o", str(profile),
                            *pytest_cmd(data, cache, reports / "profile.json")[1:]],
                           workdir, env)
            check(prof, "the profiled run")
            lines = summarize_profile(profile)
            print("\n".join(["cProfile of a warm serial run:", *lines]))
            results.profile = [f"cProfile of one warm serial run ({fmt_s(prof.wall)} under the "
                               f"profiler; `{profile}`):", *lines]


def floor_phase(tmp: Path, usable: int, repeat: int, results: Results, warm: float) -> None:
    """What pytest-xdist itself costs here: ``usable`` empty tests, serial and ``-n 2``."""
    folder = tmp / "xdist-floor"
    folder.mkdir()
    (folder / "test_empty.py").write_text(
        "import pytest\n\n\n"
        f"@pytest.mark.parametrize('i', range({usable}))\n"
        "def test_empty(i):\n    pass\n", encoding="utf-8")
    cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_empty.py"]
    env = run_env()
    serial, parallel = alternate(lambda i: cmd, lambda i: [*cmd, "-n", "2"], folder, env,
                                 repeat, "an empty-test run")
    swall = statistics.median(m.wall for m in serial)
    pwall = statistics.median(m.wall for m in parallel)
    extra = pwall - swall
    extra_cpu = (statistics.median(m.cpu for m in parallel)
                 - statistics.median(m.cpu for m in serial))
    results.add(Row(
        f"xdist floor: {usable} empty tests, serial vs -n 2 (median of {repeat})",
        fmt_s(pwall), "", "", "", "",
        f"serial {fmt_s(swall)}; -n 2 adds {extra:.2f} s of wall and {extra_cpu:.2f} s of CPU "
        "with no work in any item"))
    results.facts.append(
        f"-n 2 on the warm hybrid run: pytest-xdist alone adds {extra:.2f} s to {usable} empty "
        f"tests here (two more interpreters importing pytest, and per-item report traffic "
        f"through the controller on the same 2 cores); the warm serial run is {fmt_s(warm)} "
        f"in all, so splitting its item work in two cannot win back that floor plus the "
        f"workers' own start (numpy, corpus, vector cache). Where items carry real work "
        f"(store builds, several retrievers) -n 2 is faster: see those rows")


# --------------------------------------------------------------------------- turn


def turn_phase(base: Path, tiny: Path, instances: int, repeat: int, results: Results) -> None:
    """vipune protocol at turn granularity (one row per turn) on personas of M's full size.

    ``instances`` personas of LongMemEval_M's shape (500 sessions each; all 500 = the full
    synthetic M): prep embeds every distinct turn text once, the first run builds one store
    per persona (rows = turns), warm runs reuse them. Store build time = first run - warm run
    (both rank every pair with hybrid, --no-model).
    """
    config = generator.FULL_M.scaled(instances=instances) if instances != \
        generator.FULL_M.n_instances else generator.FULL_M
    folder = base / f"turn-m-{instances}"
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "synthetic_m.json"
    stamp = folder / "synthetic_m.config"
    if not data.is_file() or not stamp.is_file() or stamp.read_text() != repr(config):
        print(f"generating {data} ...", flush=True)
        generator.write_dataset(config, data)
        stamp.write_text(repr(config))
    cache = folder / "cache"
    for sub in ("corpus", "vectors", "stores", "sha256"):
        shutil.rmtree(cache / sub, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    turn = ["--retrieval-eval-granularity", "turn"]
    prep = measure([PYTHON, "-m", "pytest_retrieval_eval.cli", "prep", "--no-progress",
                    "--granularity", "turn", "--data", str(data), "--model", str(tiny),
                    "--cache", str(cache)], cwd=folder)
    check(prep, "turn-level prep")
    words = prep.output[prep.output.index("prep:"):].replace(",", "").split()
    slots, unique, embedded = int(words[1]), int(words[3]), int(words[6])
    label = f"{instances} of 500 personas" if instances != 500 else "all 500 personas"
    results.add(Row(
        f"turn: prep, vipune protocol ({label}, tiny model)", fmt_s(prep.wall),
        fmt_mem(prep.tree_peak), f"{embedded / prep.wall:.0f} texts/s",
        "each distinct turn text once", verdict(embedded == unique <= slots),
        f"{slots:,} turn rows -> {unique:,} unique texts, {embedded:,} embedded"))
    env = run_env()
    with tempfile.TemporaryDirectory(prefix="retrieval-eval-turn-") as tmp:
        workdir = Path(tmp) / "empty"
        workdir.mkdir()
        first = measure(pytest_cmd(data, cache, Path(tmp) / "first.json", turn), workdir, env)
        check(first, "the first turn-level run")
        warm = [measure(pytest_cmd(data, cache, Path(tmp) / f"warm-{i}.json", turn), workdir,
                        env) for i in range(repeat)]
        for m in warm:
            check(m, "a warm turn-level run")
        wall = statistics.median(m.wall for m in warm)
        report = json.loads((Path(tmp) / "first.json").read_text(encoding="utf-8"))
        scored = len(report["pairs"])
        rejected = len(report["rejections"])
        rows = []
        for path in (cache / "stores").glob("*/*.sqlite"):
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                rows.append(int(db.execute("SELECT count(*) FROM memories").fetchone()[0]))
        rows.sort()
        total = du(cache / "stores")
        results.add(Row(
            "turn: store rows per persona (one row per turn)", "", "", "",
            "", "", f"{len(rows)} stores: min {rows[0]:,}, median "
            f"{rows[len(rows) // 2]:,}, max {rows[-1]:,} rows; "
            f"{sum(r > 10_000 for r in rows)} over MAX_SEARCH_LIMIT (10,000); "
            f"{total / 1e9:.2f} GB on disk"))
        results.add(Row(
            "turn: first run, serial (builds the stores)", fmt_s(first.wall),
            fmt_mem(first.tree_peak), f"{scored / first.wall:.2f} pairs/s", "", "",
            f"{scored} pairs ({rejected} rejected: gold sessions without a has_answer turn), "
            f"hybrid, --no-model; store build ~ first - warm = "
            f"{fmt_s(first.wall - wall)} ({(first.wall - wall) / max(len(rows), 1):.1f} s "
            f"per persona)"))
        results.add(Row(
            f"turn: warm run, serial (median of {repeat})", fmt_s(wall),
            fmt_mem(max(m.tree_peak for m in warm)), f"{scored / wall:.2f} pairs/s", "", "",
            "walls " + ", ".join(f"{m.wall:.1f}" for m in warm)))


# --------------------------------------------------------------------------- profile


#: (label, file suffix, function) whose cumulative time the profile summary reports.
PROFILE_SPOTS = (
    ("whole run", "_pytest/main.py", "wrap_session"),
    ("prepare (corpus, model choice, cache checks)", "pytest_retrieval_eval/run/session.py",
     "prepare"),
    ("  load_corpus (incl. corpus checksum)", "pytest_retrieval_eval/data/corpus.py",
     "load_corpus"),
    ("items (run_pair)", "pytest_retrieval_eval/run/session.py", "run_pair"),
    ("  persona: vectors, key", "pytest_retrieval_eval/run/session.py", "persona"),
    ("  store reuse check (get_or_build)", "pytest_retrieval_eval/vipune/store.py",
     "get_or_build"),
    ("  retriever hybrid (rank, once per candidate pool)",
     "pytest_retrieval_eval/retrievers/reference.py", "rank"),
    ("    semantic scan (float64 cosine, once per query)",
     "pytest_retrieval_eval/vipune/semantic.py", "semantic_search"),
    ("    search_hybrid (FTS5 list and RRF fusion)", "pytest_retrieval_eval/vipune/hybrid.py",
     "search_hybrid"),
    ("      FTS5 bm25", "pytest_retrieval_eval/vipune/fts.py", "fts_search"),
    ("  vector cache reads", "pytest_retrieval_eval/vectors/cache.py", "get"),
    ("report and terminal summary", "_pytest/main.py", "pytest_sessionfinish"),
)


def summarize_profile(path: Path) -> list[str]:
    """Cumulative seconds of the :data:`PROFILE_SPOTS` in a cProfile dump."""
    import pstats

    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    lines = []
    for label, suffix, func in PROFILE_SPOTS:
        hits = [(v[3], v[1]) for (f, _, name), v in stats.items()
                if f.endswith(suffix) and name == func]
        if hits:
            cum, calls = max(hits)
            lines.append(f"{label}: {cum:.2f} s ({calls} calls)")
    return lines

