"""Full-scale benchmark of pytest-retrieval-eval on a synthetic LongMemEval_M.

One command::

    python benchmarks/run.py                      # full size (~2.7 GB dataset), ~15 minutes
    python benchmarks/run.py --scale small        # the same phases in about a minute

It generates (or reuses) the dataset with :mod:`pytest_retrieval_eval.generator` outside the
repository (``--data-dir``, default ``~/.cache/pytest-retrieval-eval-bench``), then measures:

1. load: the dataset streamed once into the corpus file (fresh cache), peak RSS;
   then a later process opening it again (the sha256 memo, no dataset read);
2. prep: every unique text embedded with the tiny test model (dim 384, vipune-shaped stores);
3. per-run: real ``pytest --retrieval-eval --no-model`` subprocesses in an empty directory:
   the first run after prep (builds one store per persona), warm runs serial and ``-n 2``
   (median of ``--repeat``), wall clock and peak RSS of the whole process tree;
4. bm25: LongMemEval's own baseline (``rank_bm25.BM25Okapi`` rebuilt per question) against
   the ``bm25`` retriever, in this process, on the same pairs, rankings asserted identical;
5. verify: what the re-verification policy (docs/reliability.md) costs: the corpus pairs'
   digest, the dataset sample, texts against their keys, the stores and terms file rehashed;
6. embedding: :meth:`Embedder.embed` against onnxruntime called directly on the same
   batches (MiniLM when ``--minilm`` is an ONNX export, and the tiny model), MiniLM prep
   throughput and the model lane's per-query latency;
7. compare: ``retrieval-eval compare`` of two synthetic full-M-sized reports (470 pairs, five
   retrievers, 10,000 permutations and resamples), as a subprocess (``--only compare`` needs
   no dataset);
8. hub (only when asked: ``--only hub``, no dataset needed): ``retrieval-eval cache push``
   and ``cache pull`` of a vector cache of the synthetic M's size (41,140 vectors of dim 384
   in prep's shard layout) through the local stand-in of the Hub (tests/hub_standin.py).
8. scale (only when asked: ``--only scale``): prep from an empty vector cache, unsharded
   against 2-way ``--shard`` + ``cache merge`` (same keys, same vectors?), against ``--ray``
   on a local 2-CPU Ray (bit-identical?), and a 50-pair ``--subset`` (docs/scaling.md).

It prints a table (phase, wall, peak memory, items/s, target, result) and writes it with the
machine's description to ``--out`` (default ``benchmarks/RESULTS.md`` at full scale).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.model_factory (the tiny model) lives in the repo

import numpy as np  # noqa: E402

from pytest_retrieval_eval import retrievers as retrievers_mod  # noqa: E402
from pytest_retrieval_eval.data import corpus as corpus_mod  # noqa: E402
from pytest_retrieval_eval.data.generator import instances as generator  # noqa: E402
from pytest_retrieval_eval.vectors.embedding import (  # noqa: E402
    EmbedConfig,
    Embedder,
    load_embedder,
)

GiB = 1 << 30
MiB = 1 << 20
PYTHON = sys.executable
DEFAULT_DATA_DIR = Path.home() / ".cache" / "pytest-retrieval-eval-bench"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Scale:
    name: str
    config: generator.GeneratorConfig
    embed_sessions: int  # sessions for the MiniLM throughput check
    queries: int  # questions for the per-query latency check


SCALES = {
    "full": Scale("full", generator.FULL_M, 300, 100),
    "small": Scale("small", generator.FULL_M.scaled(instances=50, sessions=100), 24, 30),
}

# Targets (full scale). Times in seconds, memory in bytes.
LOAD_PEAK = 1 * GiB
WARM_WALL = 30.0
WARM_PEAK = 4 * GiB
FIRST_WALL = 180.0
BM25_SPEEDUP = 5.0
EMBED_EFFICIENCY = 0.90
PARALLEL_GAIN = 0.05  # below this, 'faster' is within run-to-run noise


@dataclass
class Row:
    phase: str
    wall: str = ""
    peak: str = ""
    rate: str = ""
    target: str = ""
    result: str = ""
    note: str = ""


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    profile: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(f"  {row.phase}: {row.wall} {row.peak} {row.rate} {row.result} {row.note}".rstrip(),
              flush=True)


INDICATIVE = False  # small scale: the targets are the full scale's, shown in parentheses


def verdict(ok: bool) -> str:
    word = "PASS" if ok else "FAIL"
    return f"({word})" if INDICATIVE else word


def fmt_s(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds >= 10 else f"{seconds:.2f} s"


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def fmt_mem(nbytes: float) -> str:
    return f"{nbytes / GiB:.2f} GiB" if nbytes >= GiB else f"{nbytes / MiB:.0f} MiB"


# --------------------------------------------------------------------------- process tree


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        kids.setdefault(int(fields[1]), []).append(int(entry))
    return kids


def _tree_rss(root: int, page: int) -> int:
    kids = _children_map()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


@dataclass
class Measured:
    wall: float
    tree_peak: int  # sampled sum of RSS over the process tree
    max_rss: int  # largest single process (getrusage of the waited tree)
    cpu: float  # user + system seconds of the whole (waited) tree
    returncode: int
    output: str


def measure(cmd: Sequence[str], cwd: Path, env: dict[str, str] | None = None,
            interval: float = 0.05) -> Measured:
    """Run ``cmd``; wall clock, peak RSS of its process tree (sampled), max single RSS."""
    page = os.sysconf("SC_PAGE_SIZE")
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
        peak = 0
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _tree_rss(proc.pid, page))
                done.wait(interval)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    cpu = usage.ru_utime + usage.ru_stime
    return Measured(wall, peak, usage.ru_maxrss * 1024, cpu, proc.returncode, text)


def check(m: Measured, what: str) -> None:
    if m.returncode != 0:
        sys.stderr.write(m.output[-6000:])
        raise SystemExit(f"benchmark: {what} failed with exit status {m.returncode}")


# --------------------------------------------------------------------------- data


def ensure_data(scale: Scale, base: Path, results: Results) -> tuple[Path, Path]:
    """The dataset file and the tiny model folder, generated once and reused."""
    folder = base / scale.name
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "synthetic_m.json"
    stamp = folder / "synthetic_m.config"
    wanted = repr(scale.config)
    if not data.is_file() or not stamp.is_file() or stamp.read_text() != wanted:
        print(f"generating {data} ...", flush=True)
        began = time.perf_counter()
        size = generator.write_dataset(scale.config, data)
        stamp.write_text(wanted)
        results.facts.append(
            f"dataset generated in {time.perf_counter() - began:.0f} s ({size / 1e9:.2f} GB)")
    return data, ensure_tiny_model(base)


def ensure_tiny_model(base: Path) -> Path:
    """The tiny test model (dim 384), made once under ``base``."""
    model_root = base / "model-tiny-384"
    model = model_root / "tiny-model"
    if not (model / "tokenizer.json").is_file():
        from tests.model_factory import make_model_dir

        model = make_model_dir(model_root, dim=384).path
    return model


# --------------------------------------------------------------------------- phases

#: Unique texts (passages and questions) of the full synthetic M: the prep row's count.
M_VECTORS = 41_140


def hub_phase(base: Path, vectors: int, results: Results) -> None:
    """Push, then pull into an empty cache, a vector cache of ``vectors`` vectors (dim 384)
    through the local Hub stand-in, each a real ``retrieval-eval`` process. The vectors are
    random (a pull moves bytes; their values do not matter) in prep's layout: commits of
    1024, then compacted as prep compacts."""
    from pytest_retrieval_eval.vectors.cache import VectorCache
    from tests.hub_standin import WRITE_TOKEN

    work = base / "hub"
    shutil.rmtree(work, ignore_errors=True)
    source, copy = work / "source", work / "copy"
    fingerprint = "bench" + "0" * 59
    cache = VectorCache(source, fingerprint, 384, {"name": "bench-384", "dim": 384})
    rng = np.random.default_rng(0)
    for start in range(0, vectors, 1024):
        n = min(1024, vectors - start)
        cache.add([f"k{i}" for i in range(start, start + n)],
                  rng.standard_normal((n, 384)).astype(np.float32))
    cache.compact()
    shards = len(cache.own_shards())
    size = _du(source / "vectors")
    server = subprocess.Popen([PYTHON, "-m", "tests.hub_standin"], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        env = {**os.environ, "HF_ENDPOINT": url, "HF_TOKEN": WRITE_TOKEN,
               "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(work / "hf-home")}
        env.pop("HF_HUB_OFFLINE", None)
        cli = [PYTHON, "-m", "pytest_retrieval_eval.cli", "cache"]
        repo = ["--repo", "bench/m-vectors", "--no-progress"]
        push = measure([*cli, "push", *repo, "--cache", str(source)], cwd=work, env=env)
        check(push, "cache push")
        pull = measure([*cli, "pull", *repo, "--cache", str(copy)], cwd=work, env=env)
        check(pull, "cache pull")
        again = measure([*cli, "pull", *repo, "--cache", str(copy)], cwd=work, env=env)
        check(again, "cache pull (again)")
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in (root / "vectors").rglob("*")
                if p.is_file() and not p.name.endswith(".lock")}

    identical = files(source) == files(copy)
    nothing = "0 shards fetched" in again.output
    results.add(Row(
        "hub: push a synthetic-M vector cache to the local Hub stand-in", fmt_s(push.wall),
        fmt_mem(push.tree_peak), f"{size / push.wall / 1e6:.0f} MB/s", "", "",
        f"{vectors:,} vectors, dim 384, {shards} shards, {size / 1e6:.0f} MB; one commit, "
        f"files base64 in it (the stand-in answers every file 'regular': no LFS/Xet); CPU "
        f"{push.cpu:.1f} s"))
    results.add(Row(
        "hub: pull it into an empty cache (checked, committed)", fmt_s(pull.wall),
        fmt_mem(pull.tree_peak), f"{size / pull.wall / 1e6:.0f} MB/s", "identical files",
        verdict(identical),
        f"every file sha256-checked against its sidecar, then committed; the process whole "
        f"(imports included); CPU {pull.cpu:.1f} s"))
    results.add(Row(
        "hub: pull again (nothing missing)", fmt_s(again.wall), fmt_mem(again.tree_peak), "",
        "nothing fetched", verdict(nothing),
        f"a listing at one commit, one manifest; CPU {again.cpu:.1f} s (mostly imports)"))
    results.facts.append(
        f"hub rows: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores when "
        "they ran; the stand-in serves from its own process (its CPU is not counted)")


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
    line = next(x for x in m.output.splitlines() if x.startswith("prep:"))
    # "prep: N slots, U unique texts, E embedded now, C from cache, S s (model ...)"
    words = line.replace(",", "").split()
    slots, unique, embedded = int(words[1]), int(words[3]), int(words[6])
    results.add(Row(
        "prep: embed unique texts (tiny model, dim 384)", fmt_s(m.wall), fmt_mem(m.tree_peak),
        f"{embedded / m.wall:.0f} texts/s", "shared sessions embedded once",
        verdict(embedded == unique < slots),
        f"{slots:,} slots -> {unique:,} unique texts, {embedded:,} embedded"))


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
        total = _du(cache / "stores")
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
    line = next(x for x in prep.output.splitlines() if x.startswith("prep:"))
    words = line.replace(",", "").split()
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
        total = _du(cache / "stores")
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


def _report_numbers(path: Path) -> Any:
    report = json.loads(path.read_text())
    ranked = sorted((p["retriever"], p["question_id"], p["ranked"]) for p in report["pairs"])
    return report["summary"], ranked


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


#: (label, file suffix, function) whose cumulative time the profile summary reports.
PROFILE_SPOTS = (
    ("whole run", "_pytest/main.py", "wrap_session"),
    ("prepare (corpus, model choice, cache checks)", "pytest_retrieval_eval/session.py",
     "prepare"),
    ("  load_corpus (incl. corpus checksum)", "pytest_retrieval_eval/data/corpus.py",
     "load_corpus"),
    ("items (run_pair)", "pytest_retrieval_eval/session.py", "run_pair"),
    ("  persona: vectors, key", "pytest_retrieval_eval/session.py", "persona"),
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


# --------------------------------------------------------------------------- bm25


def bm25_phase(cache: Path, results: Results) -> None:
    from rank_bm25 import BM25Okapi

    from pytest_retrieval_eval.retrievers import terms as terms_mod

    corpus = corpus_mod.open_corpus(next((cache / "corpus").glob("*.sqlite")))
    pairs = [p for p in corpus.pairs if not p.abstention]
    table_file = terms_mod.table_path(cache, corpus.dataset_sha256)
    shutil.rmtree(table_file.parent, ignore_errors=True)
    start = time.perf_counter()
    terms_mod.ensure_table(corpus, cache)
    build = time.perf_counter() - start
    texts_total = len(corpus.all_text_keys())
    fresh = retrievers_mod.BM25Retriever()  # counts in memory: starts empty, splits each text
    saved = retrievers_mod.BM25Retriever()
    saved.use_table(lambda: terms_mod.open_table(table_file))
    ref_times: list[float] = []
    times: dict[str, list[float]] = {"fresh": [], "saved": []}
    for pair in pairs:
        texts = corpus.texts(list(pair.text_keys))
        question = pair.question
        start = time.perf_counter()
        scores = BM25Okapi([t.split() for t in texts]).get_scores(question.split())
        expected = np.argsort(-scores, kind="stable")
        ref_times.append(time.perf_counter() - start)
        want = [pair.session_ids[i] for i in expected.tolist()]
        persona = retrievers_mod.Persona(
            key=pair.question_id, session_ids=tuple(pair.session_ids),
            created_at=tuple(pair.created_at),
            vectors=np.zeros((len(texts), 0), dtype=np.float32), texts=texts,
            store_path=lambda: Path("unused"), text_keys=tuple(pair.text_keys))
        query = retrievers_mod.Query(pair.question_id, pair.question_type, question,
                                     pair.question_date, None, ())
        for name, retriever in (("fresh", fresh), ("saved", saved)):
            start = time.perf_counter()
            got = retriever.rank(persona, query, len(texts))
            times[name].append(time.perf_counter() - start)
            if got != want:
                raise SystemExit(f"benchmark: bm25 ({name} counts) ranking differs from "
                                 f"rank_bm25 on {pair.question_id}")
    ref = sum(ref_times)
    n = len(pairs)
    results.add(Row(
        "bm25: LongMemEval's way (BM25Okapi rebuilt per question)", fmt_s(ref), "",
        f"{n / ref:.1f} q/s", "", "",
        f"median {statistics.median(ref_times) * 1000:.0f} ms per question"))
    for name, label in (("fresh", "text counts kept in memory, first run"),
                        ("saved", "the corpus's saved term counts")):
        ours = sum(times[name])
        results.add(Row(
            f"bm25: retriever `bm25` ({label})", fmt_s(ours), "", f"{n / ours:.1f} q/s",
            ">= 5x faster, same rankings", verdict(ref / ours >= BM25_SPEEDUP),
            f"{ref / ours:.1f}x; full rankings identical on {n} pairs; median "
            f"{statistics.median(times[name]) * 1000:.1f} ms, first "
            f"{times[name][0] * 1000:.0f} ms"))
    results.add(Row(
        "bm25: term counts saved once per corpus", fmt_s(build), "",
        f"{texts_total / build:.0f} texts/s", "", "",
        f"{texts_total:,} texts split and counted; {table_file.stat().st_size / 1e6:.0f} MB; "
        "every later run (and each xdist worker) reads them instead"))


# --------------------------------------------------------------------------- re-verification


def verify_phase(data: Path, cache: Path, results: Results) -> None:
    """What the re-verification policy (docs/reliability.md) costs: the checks that catch bit
    rot beneath an unchanged ``.verified`` stamp, timed one by one."""
    from pytest_retrieval_eval.data import dataset as dataset_mod
    from pytest_retrieval_eval.data.pairs import text_key
    from pytest_retrieval_eval.io.checksums import sha256_file
    from pytest_retrieval_eval.retrievers import terms as terms_mod
    from pytest_retrieval_eval.vipune import store as store_mod

    path = next((cache / "corpus").glob("*.sqlite"))
    start = time.perf_counter()
    corpus = corpus_mod.open_corpus(path)  # loads the pairs and checks their digest
    load = time.perf_counter() - start
    results.add(Row("verify: corpus pairs digest, every process at every load", fmt_s(load),
                    "", "", "", "", f"{len(corpus.pairs)} pairs loaded and checked; corpus "
                    f"file {path.stat().st_size / 1e6:.0f} MB (not rehashed)"))
    start = time.perf_counter()
    sample = dataset_mod.sample_digest(data)
    results.add(Row("verify: dataset sample against the sha256 memo, each controller run",
                    fmt_s(time.perf_counter() - start), "", "", "", "",
                    f"2 MiB of {data.stat().st_size / 1e9:.2f} GB read ({sample[:8]})"))
    pairs = [p for p in corpus.pairs if not p.abstention]
    hashed = 0
    hash_s = 0.0
    for pair in pairs:
        texts = corpus.texts(list(pair.text_keys))  # verified against their keys
        start = time.perf_counter()
        for text in texts:  # the check alone, timed apart from SQLite
            text_key(text)
        hash_s += time.perf_counter() - start
        hashed += sum(len(t.encode("utf-8")) for t in texts)
    results.add(Row("verify: texts against their keys (sha256), at every read", fmt_s(hash_s),
                    "", f"{hashed / hash_s / 1e6:.0f} MB/s" if hash_s else "", "", "",
                    f"{len(pairs)} personas' texts, {hashed / 1e6:.0f} MB; "
                    f"{hash_s / max(len(pairs), 1) * 1000:.1f} ms a persona"))
    stores = sorted((cache / "stores").glob("*/*.sqlite"))
    if not stores:  # the run phase was skipped: build reference stores for the personas
        built = store_mod.StoreCache(cache / "stores")
        for pair in pairs:
            texts = corpus.texts(list(pair.text_keys))
            key = store_mod.persona_key(pair.session_ids, pair.text_keys, pair.created_at,
                                        "bench")
            built.get_or_build(key, lambda pair=pair, texts=texts: store_mod.rows_from_arrays(
                pair.session_ids, texts, np.zeros((len(texts), 0), np.float32),
                pair.created_at))
        stores = sorted((cache / "stores").glob("*/*.sqlite"))
    size = sum(p.stat().st_size for p in stores)
    start = time.perf_counter()
    for store in stores:
        sha256_file(store)
    stores_s = time.perf_counter() - start
    results.add(Row("verify: persona stores rehashed, once per process that uses them",
                    fmt_s(stores_s), "", f"{size / stores_s / 1e6:.0f} MB/s", "", "",
                    f"{len(stores)} stores, {size / 1e6:.0f} MB; "
                    f"{stores_s / len(stores) * 1000:.1f} ms a store"))
    table = terms_mod.table_path(cache, corpus.dataset_sha256)
    if table.is_file():
        start = time.perf_counter()
        digest = sha256_file(table)
        results.add(Row("verify: bm25 terms file rehashed, each controller run",
                        fmt_s(time.perf_counter() - start), "", "", "", "",
                        f"{table.stat().st_size / 1e6:.0f} MB ({digest[:8]})"))


# --------------------------------------------------------------------------- embedding


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
    """(unique texts, embedded now) of a prep summary line."""
    line = next(x for x in m.output.splitlines() if x.startswith("prep:"))
    words = line.replace(",", "").split()
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


def sample_sessions(cache: Path, count: int) -> tuple[list[str], list[str]]:
    """The first ``count`` distinct session texts in file order, and every question."""
    corpus = corpus_mod.open_corpus(next((cache / "corpus").glob("*.sqlite")))
    keys: dict[str, None] = {}
    for pair in corpus.pairs:
        keys.update(dict.fromkeys(pair.text_keys))
        if len(keys) >= count:
            break
    return corpus.texts(list(keys)[:count]), [p.question for p in corpus.pairs]


def raw_batches(embedder: Embedder, texts: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """The very batches :meth:`Embedder.embed` runs (same tokens, order, padding)."""
    encodings = embedder._tokenizer.encode_batch(list(texts))
    ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
    order = [j for j in sorted(range(len(ids)), key=lambda j: len(ids[j])) if len(ids[j])]
    batches = []
    for members in embedder._batches(order, [len(x) for x in ids]):
        width = len(ids[members[-1]])
        batch_ids = np.full((len(members), width), embedder._pad_id, dtype=np.int64)
        mask = np.zeros((len(members), width), dtype=np.int64)
        for row, j in enumerate(members):
            batch_ids[row, : len(ids[j])] = ids[j]
            mask[row, : len(ids[j])] = 1
        feeds = {"input_ids": batch_ids, "attention_mask": mask}
        if embedder._token_type:
            feeds["token_type_ids"] = np.zeros_like(batch_ids)
        batches.append(feeds)
    return batches


def embed_vs_raw(embedder: Embedder, texts: Sequence[str], chunk: int) -> tuple[float, float]:
    """Seconds for embed() and for session.run alone on the same batches, interleaved chunk by
    chunk so that other load on the machine hits both alike."""
    session, output = embedder._session, embedder._output
    embedder.embed(texts[:2])  # warm-up (first runs allocate)
    ours = raw = 0.0
    for start in range(0, len(texts), chunk):
        part = texts[start : start + chunk]
        batches = raw_batches(embedder, part)
        began = time.perf_counter()
        for feeds in batches:
            session.run([output], feeds)
        raw += time.perf_counter() - began
        began = time.perf_counter()
        embedder.embed(part)
        ours += time.perf_counter() - began
    return ours, raw


def embedding_phase(cache: Path, tiny: Path, minilm: Path | None, scale: Scale,
                    unique_texts: int, results: Results) -> None:
    texts, questions = sample_sessions(cache, scale.embed_sessions)
    models: list[tuple[str, Path]] = [("tiny model", tiny)]
    if minilm is not None:
        models.insert(0, ("MiniLM-L6 (ONNX)", minilm))
    else:
        results.facts.append("MiniLM checks skipped: no ONNX export (pass --minilm DIR; "
                             "make one with scripts/export_minilm_onnx.py)")
    for label, path in models:
        embedder = load_embedder(str(path), EmbedConfig())
        tokens = [len(e.ids) for e in embedder._tokenizer.encode_batch(list(texts))]
        ours, raw = embed_vs_raw(embedder, texts, chunk=max(1, len(texts) // 10))
        efficiency = raw / ours
        n = len(texts)
        is_minilm = label.startswith("MiniLM")
        results.add(Row(
            f"embed: {label}, Embedder.embed vs onnxruntime direct",
            fmt_s(ours), "", f"{n / ours:.2f} sessions/s",
            ">= 90% of direct" if is_minilm else "(no target: the model is a lookup)",
            verdict(efficiency >= EMBED_EFFICIENCY) if is_minilm else "",
            (f"{efficiency:.1%} of direct ({fmt_s(raw)})" if is_minilm else
             f"onnxruntime {fmt_s(raw)} of it: tokenizing the texts dominates")
            + f"; {n} sessions, mean {statistics.mean(tokens):.0f} tokens"))
        if is_minilm:
            per_1000 = ours / n * 1000
            results.add(Row(
                "prep throughput: MiniLM on CPU", "", "", f"{n / ours:.2f} sessions/s",
                "", "", f"{per_1000:.0f} s per 1,000 sessions; the {unique_texts:,} unique "
                f"texts of this dataset: ~{_duration(per_1000 * unique_texts / 1000)}"))
            latencies = []
            for question in questions[: scale.queries]:
                began = time.perf_counter()
                embedder.embed_query(question)
                latencies.append(time.perf_counter() - began)
            results.add(Row(
                "model lane: per-query embedding (MiniLM, CPU)",
                f"{statistics.median(latencies) * 1000:.1f} ms", "", "", "", "",
                f"median of {len(latencies)} questions, p95 "
                f"{np.percentile(latencies, 95) * 1000:.1f} ms"))


# --------------------------------------------------------------------------- report


#: Scored pairs per question type in LongMemEval_M (500 questions less 30 abstention).
M_TYPES = {"single-session-user": 64, "single-session-assistant": 56,
           "single-session-preference": 30, "temporal-reasoning": 127,
           "knowledge-update": 72, "multi-session": 121}
COMPARE_TARGET_S = 5.0


def synthetic_report(seed: int, shift: float) -> dict[str, Any]:
    """A full-M-sized report: 470 pairs x five retrievers, recall at k 1, 5, 10."""
    from pytest_retrieval_eval.reporting.report import SCHEMA_VERSION, summarize

    rng = np.random.default_rng(seed)
    base_rng = np.random.default_rng(0)  # the same "true" difficulty per question
    pairs = []
    retrievers = ["hybrid", "semantic", "fts", "bm25", "vipune"]
    qids = [(f"q{t[:3]}{i:03d}", t) for t, n in M_TYPES.items() for i in range(n)]
    ease = base_rng.random(len(qids))
    for name in retrievers:
        for index, (qid, qtype) in enumerate(qids):
            metrics = {}
            for k in (1, 5, 10):
                p = min(1.0, ease[index] * (0.3 + 0.07 * k) + shift * rng.random())
                value = float(rng.choice([0.0, 0.5, 1.0], p=[1 - p, 0.0, p]) if k == 1
                              else rng.binomial(3, p) / 3)
                for family in ("recall", "recall_any", "recall_all", "ndcg_any"):
                    metrics[f"{family}@{k}"] = value
            pairs.append({"retriever": name, "index": index, "question_id": qid,
                          "question_type": qtype, "metrics": metrics, "ranked": [],
                          "gold": [], "latency_ms": {"retrieval": 1.0}})
    return {"schema_version": SCHEMA_VERSION,
            "dataset": {"name": "longmemeval_m", "sha256": "0" * 64}, "lane": "model-free",
            "model": {"name": "synthetic"}, "ks": [1, 5, 10], "retrievers": retrievers,
            "pairs": pairs, "summary": summarize(pairs, retrievers)}


def compare_phase(results: Results) -> None:
    """`retrieval-eval compare` of two full-M-sized reports, end to end in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        base, new = Path(tmp) / "base.json", Path(tmp) / "new.json"
        base.write_text(json.dumps(synthetic_report(1, 0.0)), encoding="utf-8")
        new.write_text(json.dumps(synthetic_report(2, 0.05)), encoding="utf-8")
        cmd = [PYTHON, "-m", "pytest_retrieval_eval.cli", "compare", str(base), str(new),
               "--json", str(Path(tmp) / "c.json")]
        walls, cpus = [], []
        for _ in range(3):
            m = measure(cmd, Path(tmp))
            check(m, "the compare phase")
            walls.append(m.wall)
            cpus.append(m.cpu)
        saved = json.loads((Path(tmp) / "c.json").read_text())["comparison"]
        from pytest_retrieval_eval.reporting import compare as compare_mod

        started = time.perf_counter()
        compare_mod.compare_reports(json.loads(base.read_text()), json.loads(new.read_text()))
        inside = time.perf_counter() - started
    wall = statistics.median(walls)
    rows = sum(len(r) for r in saved["rows"].values())
    results.add(Row(
        "compare: two full-M reports (470 pairs, 5 retrievers, 10,000 permutations)",
        fmt_s(wall), fmt_mem(m.tree_peak), "", f"< {COMPARE_TARGET_S:.0f} s",
        verdict(wall < COMPARE_TARGET_S),
        f"median of 3 runs of `retrieval-eval compare` (process start, JSON load, "
        f"{rows} rows: 3 metrics x 5 retrievers x 7; bootstrap CI, randomization p, Holm); "
        f"walls {', '.join(f'{w:.2f}' for w in walls)}, CPU {statistics.median(cpus):.2f} s; "
        f"compare_reports alone {inside:.2f} s; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs"))


def machine() -> list[str]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = "unknown"
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        ram = f"{kb / (1 << 20):.1f} GiB"
    import onnxruntime
    import pyarrow

    load = os.getloadavg()
    return [
        f"CPU: {cpu}, nproc {len(os.sched_getaffinity(0))}; RAM {ram}; no GPU",
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, numpy "
        f"{np.__version__}, onnxruntime {onnxruntime.__version__}, pyarrow {pyarrow.__version__}",
        f"{platform.platform()}; load average at start {load[0]:.2f}",
        f"date {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
    ]


def table(rows: Sequence[Row]) -> list[str]:
    head = ["phase", "wall", "peak memory", "items/s", "target", "result", "measured"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.phase, r.wall, r.peak, r.rate, r.target, r.result, r.note]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


def _bullet(line: str) -> str:
    depth = (len(line) - len(line.lstrip(" "))) // 2
    return "  " * depth + "- " + line.strip()


def write_results(path: Path, scale: Scale, args: argparse.Namespace, results: Results,
                  info: list[str], command: str) -> None:
    cfg = scale.config
    preset = ("FULL_M" if scale.name == "full"
              else "FULL_M.scaled(instances=50, sessions=100)")
    body = [
        f"# Benchmark results ({scale.name} scale)",
        "",
        "## Performance",
        "",
        "How fast the harness is on LongMemEval_M-sized data. The data is the deterministic "
        f"synthetic LongMemEval_M of `pytest_retrieval_eval.generator` (`{preset}`: "
        f"{cfg.n_instances} histories of ~{cfg.sessions_per_history} sessions, "
        f"{cfg.n_instances - cfg.n_abstention} scored pairs, sessions shared between "
        "histories as in the real file); embeddings come from a tiny 384-d test model, so "
        "the stores are vipune-shaped and prep time is harness time, and MiniLM-L6 (ONNX, "
        "CPU) gives the real-model numbers. Per-run rows are real "
        "`pytest --retrieval-eval --no-model` processes (retriever `hybrid`, k 1,5,10) in "
        "an empty directory; peak memory is the sampled RSS sum of the process tree "
        "(controller and xdist workers); warm rows are the median of "
        f"{args.repeat} runs, serial and `-n 2` runs taken in turn.",
        "",
        "Reproduce (data, cache and stores go to `~/.cache/pytest-retrieval-eval-bench`, "
        "about 7 GB at full scale; `--scale small` runs the same phases in about a minute):",
        "",
        "```",
        "pip install -e '.[test]'",
        "python scripts/export_minilm_onnx.py /tmp/minilm-onnx   # optional: MiniLM rows",
        command,
        "```",
        "",
        *table(results.rows),
        "",
        "Machine:",
        "",
        *[f"- {x}" for x in info],
        "",
        "## Details",
        "",
        *[f"- {x}" for x in results.facts],
        *(["- small scale: the targets are set for the full scale; results in parentheses "
           "are indicative only"] if INDICATIVE else []),
        *([""] + [results.profile[0], ""] + [_bullet(x) for x in results.profile[1:]]
          if results.profile else []),
        "",
    ]
    path.write_text("\n".join(body), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help=f"where data, cache and stores go (default: {DEFAULT_DATA_DIR})")
    parser.add_argument("--repeat", type=int, default=3, help="warm runs of each kind")
    parser.add_argument("--minilm", type=Path, default=Path("/tmp/minilm-onnx"),
                        help="MiniLM ONNX export (scripts/export_minilm_onnx.py); skipped if "
                             "absent")
    parser.add_argument("--only", default="load,prep,run,bm25,verify,embed,compare",
                        help="comma list of phases to run (default: all but hub, turn and "
                             "scale; scale preps the dataset five times over: "
                             "docs/scaling.md)")
    parser.add_argument("--turn-instances", type=int, default=500,
                        help="personas of the turn phase (--only turn), each of M's full "
                             "size (default: 500, the whole synthetic M)")
    parser.add_argument("--scale-steps", default="reference,shard,ray,subset",
                        help="steps of the scale phase (default: all)")
    parser.add_argument("--scale-pairs", type=int, default=None,
                        help="run the scale phase's unsharded/shard/Ray comparisons on this "
                             "many pairs (prep --subset N) instead of the whole dataset")
    parser.add_argument("--full-prep-wall", type=float, default=None,
                        help="a full prep's wall (s) measured earlier, for the subset row's "
                             "ratio when --scale-pairs is given")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="skip the cProfile'd warm serial run (its summary goes into the "
                             "results file)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file (default: benchmarks/RESULTS.md at full scale, "
                             "<data-dir>/small/RESULTS.md at small scale)")
    args = parser.parse_args(argv)
    scale = SCALES[args.scale]
    global INDICATIVE
    INDICATIVE = scale.name != "full"
    phases = set(args.only.split(","))
    args.data_dir = args.data_dir.expanduser().resolve()
    out = args.out or (ROOT / "benchmarks" / "RESULTS.md" if scale.name == "full"
                       else args.data_dir / "small" / "RESULTS.md")
    info = machine()
    print("\n".join(info), flush=True)
    results = Results()
    if "compare" in phases:
        compare_phase(results)
    if phases == {"compare"}:  # nothing else asked: no dataset needed
        print("\n".join(table(results.rows)))
        if args.out is not None:
            write_results(args.out, scale, args, results, info, "python benchmarks/run.py "
                          + " ".join(argv if argv is not None else sys.argv[1:]))
        return 1 if any(r.result == "FAIL" for r in results.rows) else 0
    if phases == {"turn"}:  # its own data: personas of M's size at turn granularity
        tiny = ensure_tiny_model(args.data_dir)
        turn_phase(args.data_dir, tiny, args.turn_instances, args.repeat, results)
        print("\n".join(table(results.rows)))
        write_results(out, scale, args, results, info, "python benchmarks/run.py " + " ".join(
            argv if argv is not None else sys.argv[1:]))
        print(f"\nwritten to {out}")
        return 0
    if phases == {"hub"}:  # no dataset needed: vectors of the synthetic M's size
        hub_phase(args.data_dir / scale.name, M_VECTORS if scale.name == "full" else 4_096,
                  results)
        print("\n".join(table(results.rows)))
        write_results(out, scale, args, results, info, "python benchmarks/run.py "
                      + " ".join(argv if argv is not None else sys.argv[1:]))
        print(f"\nwritten to {out}")
        return 1 if any(r.result == "FAIL" for r in results.rows) else 0
    data, tiny = ensure_data(scale, args.data_dir, results)
    cache = args.data_dir / scale.name / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    cfg = scale.config
    usable = cfg.n_instances - cfg.n_abstention
    if "load" in phases:
        load_phase(data, cache, cfg.n_instances, results)
    if "prep" in phases:
        prep_phase(data, tiny, cache, results)
    if "run" in phases:
        profile = args.data_dir / scale.name / "warm.prof" if args.profile else None
        run_phase(data, cache, usable, args.repeat, results, profile)
    if "bm25" in phases:
        bm25_phase(cache, results)
    if "verify" in phases:
        verify_phase(data, cache, results)
    corpus = corpus_mod.open_corpus(next((cache / "corpus").glob("*.sqlite")))
    unique = int(corpus.stats.get("unique_session_texts", 0))
    if "scale" in phases:
        scale_phase(data, tiny, cache, results, steps=set(args.scale_steps.split(",")),
                    pairs=args.scale_pairs, full_wall=args.full_prep_wall)
    if "embed" in phases:
        minilm = args.minilm if (args.minilm / "tokenizer.json").is_file() else None
        embedding_phase(cache, tiny, minilm, scale, unique, results)
    if "hub" in phases:
        hub_phase(args.data_dir / scale.name, unique + cfg.n_instances, results)
    results.facts.append(f"cache size on disk {_du(cache) / 1e9:.2f} GB in {cache}")
    results.facts.append(
        f"load average at the end {os.getloadavg()[0]:.2f} (other work on the machine shifts "
        "walls, MiniLM most: CPU-bound on 2 cores)")
    command = "python benchmarks/run.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]))
    print()
    print("\n".join(table(results.rows)))
    write_results(out, scale, args, results, info, command.strip())
    print(f"\nwritten to {out}")
    failed = [r.phase for r in results.rows if r.result == "FAIL"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
