"""``benchmarks/run.py --against REV``: the working tree (NEW) against a named commit (REV), side
by side on one machine, on the same data, each phase interleaved (NEW, REV, NEW, REV, ...).

Each version is installed in its own scratch venv outside the repository (under
``<data-dir>/against/``): a venv made without pip whose site-packages links every entry of the
running interpreter's site-packages (the dependencies, installed once) except this package, then
``pip install --no-deps`` of the version's tree (REV from ``git archive``, NEW from the working
tree as it is, uncommitted changes included). Only the build backend comes from the package
index (build isolation).

Each version has its own cache folder (corpus, vectors, stores, terms), since the formats differ
between commits; the vectors are embedded once by NEW and copied into REV's cache, and REV's prep
then says how many it had to embed again (0: the formats agree, the same vectors).

Per measured process: wall, CPU of the whole tree (``wait4``'s rusage, reaped children
included), peak RSS (the same rusage's ``ru_maxrss``: the largest of the process and its reaped
children), bytes read (``/proc/<pid>/io`` ``rchar`` and ``read_bytes`` read from the finished
process before it is reaped, which holds its reaped children's counts too). Ratios are of
medians. The warm four-retriever runs' reports also give the harness's overhead per item
(:func:`overhead_lines`, issue 48 item 11).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.measuring import ROOT

#: the bm25 term counts' run and the warm run with four retrievers
FOUR = "hybrid,semantic,fts,bm25"


@dataclass
class Sample:
    wall: float
    cpu: float
    rchar: int
    read_bytes: int
    output: str
    rss: int = 0  # peak resident set size, bytes (ru_maxrss)


@dataclass
class Version:
    label: str  # NEW or the revision as given
    commit: str
    python: Path
    cache: Path


def _io(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f.read().splitlines())}


def sample(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> Sample:
    """Run ``cmd``; wall, CPU of its tree, and the bytes its tree read."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
        # Wait without reaping: a zombie's /proc/<pid>/io still holds its counts (its
        # threads' and its reaped children's, e.g. xdist workers).
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        wall = time.perf_counter() - start
        io = _io(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        sys.stderr.write(text[-6000:])
        raise SystemExit(f"benchmark: {' '.join(cmd[:4])} ... failed ({proc.returncode})")
    return Sample(wall, usage.ru_utime + usage.ru_stime, io["rchar"], io["read_bytes"], text,
                  usage.ru_maxrss * 1024)


# --------------------------------------------------------------------------- the two venvs


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_venv(folder: Path, source: Path) -> Path:
    """A venv at ``folder`` with this interpreter's dependencies linked in and ``source``
    installed (not editable); its python."""
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    ours = Path(sysconfig.get_paths()["purelib"])
    for entry in ours.iterdir():
        name = entry.name.lower()
        if "pytest_retrieval_eval" in name or "pytest-retrieval-eval" in name:
            continue  # this package (editable finder, .pth, dist-info): installed below
        (site / entry.name).symlink_to(entry)
    # The build backend (setuptools>=69) comes from the package index pip is configured with
    # (build isolation): the venvs' own setuptools may be older than the project needs.
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(source)],
                   check=True, cwd=folder)
    return python


def build_versions(rev: str, base: Path) -> tuple[Version, Version]:
    """NEW (the working tree) and REV, each installed in its own venv under ``base``."""
    base.mkdir(parents=True, exist_ok=True)
    commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    src = base / "rev-src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    archive = base / "rev.tar"
    _git("archive", "--format=tar", "-o", str(archive), commit)
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    archive.unlink()
    # NEW: the working tree's files as git sees them (tracked and untracked, not ignored),
    # copied so that pip's build writes nothing into the repository.
    new_src = base / "new-src"
    shutil.rmtree(new_src, ignore_errors=True)
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file():
            (new_src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, new_src / name)
    began = time.perf_counter()
    new = Version("NEW", _git("rev-parse", "--short", "HEAD") + ("+dirty" if _git(
        "status", "--porcelain", "--untracked-files=no") else ""),
        make_venv(base / "venv-new", new_src), base / "cache-new")
    old = Version(rev, commit[:7], make_venv(base / "venv-rev", src), base / "cache-rev")
    print(f"venvs built in {time.perf_counter() - began:.1f} s: NEW at {new.commit}, "
          f"{rev} at {old.commit}", flush=True)
    return new, old


# --------------------------------------------------------------------------- the phases


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["HF_HUB_OFFLINE"] = "1"
    for name in ("PYTEST_ADDOPTS", "RETRIEVAL_EVAL_CACHE_DIR", "PYTHONPATH"):
        env.pop(name, None)
    return env


def host_plugins_off() -> list[str]:
    """``-p no:NAME`` for every pytest plugin of the running environment's other
    distributions (hypothesis, randomly, xdist, anyio, ... of the dev extras): a user's
    environment holds this plugin and its own dependencies, none of which is a pytest
    plugin. Both versions run without them; with them on, hypothesis's alone added about
    1 s of CPU to every run (it imports hypothesis at the terminal summary)."""
    from importlib.metadata import distributions

    names = sorted({ep.name for dist in distributions() for ep in dist.entry_points
                    if ep.group == "pytest11"
                    and dist.metadata["Name"].lower().replace("_", "-")
                    != "pytest-retrieval-eval"})
    return [arg for name in names for arg in ("-p", f"no:{name}")]


def _pytest(v: Version, data: Path, report: Path, retrievers: str) -> list[str]:
    return [str(v.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *host_plugins_off(),
            "--retrieval-eval", "--no-model", "--retrieval-eval-retriever", retrievers,
            "--retrieval-eval-data", str(data), "--retrieval-eval-cache", str(v.cache),
            "--retrieval-eval-json", str(report)]


_LOAD = (
    "import sys; from pathlib import Path\n"
    "from pytest_retrieval_eval.data import dataset, ingest\n"
    "ingest.load_corpus(dataset.resolve_dataset(sys.argv[1]), Path(sys.argv[2]))\n"
)


@dataclass
class Phase:
    name: str
    samples: dict[str, list[Sample]]
    sizes: dict[str, int]  # the file the phase is judged by (corpus, report), if any


def interleave(name: str, versions: Sequence[Version], repeat: int,
               cmd: Callable[[Version, int], list[str]], cwd: Path,
               before: Callable[[Version], None] = lambda v: None,
               size: Callable[[Version, int], Path] | None = None) -> Phase:
    env = _env()
    phase = Phase(name, {v.label: [] for v in versions}, {})
    for i in range(repeat):
        for v in versions:
            before(v)
            s = sample(cmd(v, i), cwd, env)
            phase.samples[v.label].append(s)
            if size is not None:
                phase.sizes[v.label] = size(v, i).stat().st_size
            print(f"  {name} [{v.label}] {i + 1}/{repeat}: {s.wall:.2f} s wall, "
                  f"{s.cpu:.2f} s CPU, {s.rchar / 1e6:.0f} MB rchar", flush=True)
    return phase


def against(rev: str, data: Path, base: Path, repeat: int,
            warm_only: bool = False, memories: str = "no",
            first_runs: Sequence[str] | None = None) -> list[str]:
    """Every phase, NEW against ``rev``; the Markdown lines of the table. ``warm_only``: the
    warm runs alone, on the caches a previous full ``--against`` run left under ``base``
    (corpus, vectors, stores, term counts), the venvs made anew from the working tree.
    ``memories``: "also" adds the memory phases (:func:`memory_phases`) after the others,
    "only" runs them alone (the corpus built and the vectors embedded untimed).
    ``first_runs`` (with "only"): just these memory runs' first runs (kinds of
    :data:`MEMORY_RUNS`), no warm run."""
    new, old = build_versions(rev, base)
    if memories == "only":
        return _memories_only(rev, new, old, data, base, repeat, first_runs)
    versions = (new, old)
    work = base / "work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "empty").mkdir(parents=True)
    cwd = work / "empty"
    if warm_only:
        if not all((v.cache / "stores").is_dir() and (v.cache / "terms").is_dir()
                   for v in versions):
            raise SystemExit("benchmark: --warm-only needs the caches of a full --against run "
                             f"under {base}; run it once without --warm-only")
        return [*table(_warm_phases(versions, data, work, repeat), new, old, repeat), "",
                f"- warm runs only, on the caches of an earlier full run under {base}",
                *(f"- {n}" for n in overhead_lines(work, new, old, repeat)),
                _same_note(new, old, work, rev)]
    for v in versions:
        shutil.rmtree(v.cache, ignore_errors=True)
        v.cache.mkdir(parents=True)

    def cold(v: Version) -> None:
        shutil.rmtree(v.cache / "corpus", ignore_errors=True)
        shutil.rmtree(v.cache / "sha256", ignore_errors=True)

    def corpus_file(v: Version, i: int) -> Path:
        return next((v.cache / "corpus").glob("*.sqlite"))

    phases = [interleave(
        "cold corpus build", versions, repeat,
        lambda v, i: [str(v.python), "-c", _LOAD, str(data), str(v.cache)], cwd, cold,
        corpus_file)]
    # The vectors: embedded once by NEW, copied to REV, whose prep says if it took them.
    sample([str(new.python), "-m", "pytest_retrieval_eval.cli", "prep", "--no-progress",
            "--data", str(data), "--model", str(_tiny(base)), "--cache", str(new.cache)],
           cwd, _env())
    shutil.copytree(new.cache / "vectors", old.cache / "vectors")
    prep = sample([str(old.python), "-m", "pytest_retrieval_eval.cli", "prep",
                   "--no-progress", "--data", str(data), "--model", str(_tiny(base)),
                   "--cache", str(old.cache)], cwd, _env())
    line = next((ln for ln in prep.output.splitlines() if "prep:" in ln), "")
    notes = [f"vectors embedded by NEW, copied to {rev}'s cache; {rev}'s prep then said: "
             f"`{line.strip()}`",
             "pytest runs: " + (" ".join(host_plugins_off()) or "no other pytest plugin")
             + " (the dev environment's plugins, off in both versions); "
             + ("PYTHONDONTWRITEBYTECODE set: pytest rewrites and compiles the plugin's "
                "modules in every run, as on this machine"
                if os.environ.get("PYTHONDONTWRITEBYTECODE") else
                "bytecode cached (the rewritten modules' pycs are kept between runs)")]
    phases.append(interleave("first run, hybrid (builds the stores)", versions, 1,
                             lambda v, i: _pytest(v, data, work / f"first-{v.label}.json",
                                                  "hybrid"), cwd))
    phases.append(interleave(
        "warm run, hybrid", versions, repeat,
        lambda v, i: _pytest(v, data, work / f"hybrid-{v.label}-{i}.json", "hybrid"), cwd,
        size=lambda v, i: work / f"hybrid-{v.label}-{i}.json"))
    phases.append(interleave(
        "the run that saves bm25's term counts (4 retrievers)", versions, repeat,
        lambda v, i: _pytest(v, data, work / f"terms-{v.label}-{i}.json", FOUR), cwd,
        lambda v: shutil.rmtree(v.cache / "terms", ignore_errors=True)))
    phases.extend(_warm_phases(versions, data, work, repeat)[1:])
    kinds = ["hybrid", "four"]
    notes.extend(overhead_lines(work, new, old, repeat))
    if memories == "also":
        phases.extend(memory_phases(versions, data, base, work, repeat, notes, rev))
        kinds += [kind for kind, _, _ in MEMORY_RUNS]
    return [*table(phases, new, old, repeat), "", *(f"- {n}" for n in notes),
            _same_note(new, old, work, rev, kinds)]


#: The memory phases' warm runs (issue 44): report name, retrievers, extra options.
MEMORY_RUNS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("sem-turn", "semantic+unit:turn", ()),
    ("bm25-turn", "bm25+unit:turn", ()),
    ("fts-turn", "fts+unit:turn", ()),
    ("budget", "hybrid,semantic+unit:turn", ("--retrieval-eval-budget", "500,2000,8000")),
    ("nobudget", "hybrid,semantic+unit:turn", ()),
)


def memory_phases(versions: Sequence[Version], data: Path, base: Path, work: Path,
                  repeat: int, notes: list[str], rev: str,
                  first_runs: Sequence[str] | None = None) -> list[Phase]:
    """The memory paths (issue 44), after ``prep --turns`` (NEW embeds, REV's prep takes the
    copied vectors): each turn path's first run (what it builds: turn rows, the bm25 turn
    index, the FTS5 turn stores) and warm runs, the budget run and the same retrievers
    without it, and a warm hybrid run with the turn vectors in the cache (its shard check).
    ``first_runs``: only the first runs of those kinds."""
    new, old = versions[0], versions[1]
    cwd = work / "empty"
    prepped = sample([str(new.python), "-m", "pytest_retrieval_eval.cli", "prep",
                      "--no-progress", "--turns", "--data", str(data), "--model",
                      str(_tiny(base)), "--cache", str(new.cache)], cwd, _env())
    notes.append(f"NEW's `prep --turns` (embeds the turn texts; keeps each persona's turn "
                 f"rows since 964e47a): {prepped.cpu:.1f} s CPU, {prepped.wall:.1f} s wall")
    shutil.copytree(new.cache / "vectors", old.cache / "vectors", dirs_exist_ok=True)
    prep = sample([str(old.python), "-m", "pytest_retrieval_eval.cli", "prep",
                   "--no-progress", "--turns", "--data", str(data), "--model",
                   str(_tiny(base)), "--cache", str(old.cache)], cwd, _env())
    line = next((ln for ln in prep.output.splitlines() if "prep:" in ln), "")
    notes.append(f"turn vectors embedded by NEW (`prep --turns`), copied to {rev}'s cache; "
                 f"{rev}'s `prep --turns` then said: `{line.strip()}`")
    def run(kind: str, retrievers: str, extra: Sequence[str], v: Version,
            i: int) -> list[str]:
        return [*_pytest(v, data, work / f"{kind}-{v.label}-{i}.json", retrievers), *extra]

    phases: list[Phase] = []
    if first_runs is not None:
        for kind, retrievers, extra in MEMORY_RUNS:
            if kind in first_runs:
                label = f"first run, {retrievers}" + (f", budget {extra[1]}" if extra else "")
                phases.append(interleave(label, versions, 1, partial(
                    run, f"first-{kind}", retrievers, extra), cwd))
        return phases
    for kind, retrievers, extra in MEMORY_RUNS[:3]:
        phases.append(interleave(f"first run, {retrievers}", versions, 1,
                                 partial(run, f"first-{kind}", retrievers, extra), cwd))
        phases.append(interleave(f"warm run, {retrievers}", versions, repeat,
                                 partial(run, kind, retrievers, extra), cwd))
    for kind, retrievers, extra in MEMORY_RUNS[3:]:
        label = f"warm run, {retrievers}" + (f", budget {extra[1]}" if extra else "")
        if extra:  # the first budget run counts the tokens (kept for the next)
            phases.append(interleave(label.replace("warm run", "first run"), versions, 1,
                                     partial(run, f"first-{kind}", retrievers, extra), cwd))
        phases.append(interleave(label, versions, repeat,
                                 partial(run, kind, retrievers, extra), cwd))
    phases.append(interleave(
        "warm run, hybrid, turn vectors in the cache", versions, repeat,
        lambda v, i: _pytest(v, data, work / f"hybrid-turned-{v.label}-{i}.json", "hybrid"),
        cwd))
    return phases


def _memories_only(rev: str, new: Version, old: Version, data: Path, base: Path,
                   repeat: int, first_runs: Sequence[str] | None = None) -> list[str]:
    """The memory phases alone, with the warm hybrid run before the turn vectors come (the
    baseline of "x hybrid"): the corpus built and the session vectors embedded untimed."""
    versions = (new, old)
    work = base / "work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "empty").mkdir(parents=True)
    cwd = work / "empty"
    for v in versions:
        shutil.rmtree(v.cache, ignore_errors=True)
        v.cache.mkdir(parents=True)
        sample([str(v.python), "-c", _LOAD, str(data), str(v.cache)], cwd, _env())
    sample([str(new.python), "-m", "pytest_retrieval_eval.cli", "prep", "--no-progress",
            "--data", str(data), "--model", str(_tiny(base)), "--cache", str(new.cache)],
           cwd, _env())
    shutil.copytree(new.cache / "vectors", old.cache / "vectors")
    sample([str(old.python), "-m", "pytest_retrieval_eval.cli", "prep", "--no-progress",
            "--data", str(data), "--model", str(_tiny(base)), "--cache", str(old.cache)],
           cwd, _env())
    phases = [interleave("first run, hybrid (builds the stores)", versions, 1,
                         lambda v, i: _pytest(v, data, work / f"first-{v.label}.json",
                                              "hybrid"), cwd),
              ]
    if first_runs is None:
        phases.append(interleave(
            "warm run, hybrid", versions, repeat,
            lambda v, i: _pytest(v, data, work / f"hybrid-{v.label}-{i}.json", "hybrid"), cwd))
    notes: list[str] = ["the memory phases alone (`--only memories`): corpus built and "
                        "session vectors embedded untimed, by each version"]
    phases.extend(memory_phases(versions, data, base, work, repeat, notes, rev, first_runs))
    kinds = ["hybrid", "hybrid-turned", *(kind for kind, _, _ in MEMORY_RUNS)] \
        if first_runs is None else [f"first-{kind}" for kind in first_runs]
    return [*table(phases, new, old, repeat), "", *(f"- {n}" for n in notes),
            _same_note(new, old, work, rev, kinds)]


def _warm_phases(versions: Sequence[Version], data: Path, work: Path,
                 repeat: int) -> list[Phase]:
    """The warm hybrid and the warm four-retriever runs (their reports kept under work)."""
    cwd = work / "empty"
    return [interleave(
        "warm run, hybrid", versions, repeat,
        lambda v, i: _pytest(v, data, work / f"hybrid-{v.label}-{i}.json", "hybrid"), cwd,
        size=lambda v, i: work / f"hybrid-{v.label}-{i}.json"), interleave(
        "warm run, 4 retrievers", versions, repeat,
        lambda v, i: _pytest(v, data, work / f"four-{v.label}-{i}.json", FOUR), cwd,
        size=lambda v, i: work / f"four-{v.label}-{i}.json")]


def item_overheads(report: Path) -> dict[str, float]:
    """Per retriever, the median of its items' ``latency_ms.overhead`` (what the harness
    spends on an item besides the search, the query embedding, ingest and the pair's
    inputs) in a report."""
    by: dict[str, list[float]] = {}
    for p in json.loads(report.read_text())["pairs"]:
        value = (p.get("latency_ms") or {}).get("overhead")
        if isinstance(value, (int, float)):
            by.setdefault(str(p["retriever"]), []).append(float(value))
    return {name: statistics.median(values) for name, values in by.items()}


def overhead_lines(work: Path, new: Version, old: Version, repeat: int,
                   kind: str = "four") -> list[str]:
    """The harness's overhead per item in the warm four-retriever runs (each writes a JSON
    report, as a CI run does): per version, hybrid's and semantic's medians per run and
    hybrid/semantic (issue 48 item 11: at most 2x with a report)."""
    lines = []
    for v in (new, old):
        runs = [item_overheads(work / f"{kind}-{v.label}-{i}.json") for i in range(repeat)
                if (work / f"{kind}-{v.label}-{i}.json").is_file()]
        runs = [r for r in runs if r.get("hybrid") and r.get("semantic")]
        if not runs:
            continue
        ratios = [r["hybrid"] / r["semantic"] for r in runs]
        every = ", ".join(f"{name} {statistics.median(r[name] for r in runs):.3f} ms"
                          for name in sorted(runs[0]))
        lines.append(f"overhead per item with a JSON report, {v.label} ({v.commit}), warm "
                     f"4 retrievers, median of {len(runs)} runs' medians: {every}; "
                     f"hybrid/semantic {statistics.median(ratios):.2f}x (per run: "
                     + ", ".join(f"{x:.2f}" for x in ratios) + ")")
    return lines


def _same_note(new: Version, old: Version, work: Path, rev: str,
               kinds: Sequence[str] = ("hybrid", "four")) -> str:
    differ = []
    for kind in kinds:
        fields = _differing(work / f"{kind}-{new.label}-0.json",
                            work / f"{kind}-{old.label}-0.json")
        if fields:
            differ.append(f"{kind} ({', '.join(fields)})")
    return f"- summaries and full rankings of NEW and {rev} ({', '.join(kinds)}): " + (
        "identical" if not differ else "DIFFER: " + "; ".join(differ))


def _differing(new: Path, old: Path) -> list[str]:
    """What differs between two reports' :func:`_numbers`: "summary", or a pair field
    (``metrics.<name>``, ``budget.<fact>``, ``ranked``, ``memories``) and how many pairs."""
    (new_summary, new_pairs), (old_summary, old_pairs) = _numbers(new), _numbers(old)
    fields: dict[str, int] = {"summary": 1} if new_summary != old_summary else {}
    for key in sorted(set(new_pairs) | set(old_pairs)):
        a, b = new_pairs.get(key, {}), old_pairs.get(key, {})
        for name in sorted(set(a) | set(b)):
            if isinstance(a.get(name), dict) and isinstance(b.get(name), dict):
                inner = sorted(k for k in set(a[name]) | set(b[name])
                               if a[name].get(k) != b[name].get(k))
                names = [f"{name}.{k}" for k in inner]
            else:
                names = [name] if a.get(name) != b.get(name) else []
            for field in names:
                fields[field] = fields.get(field, 0) + 1
    return [f"{f}: {n} pair{'s' if n != 1 else ''}" if f != "summary" else f
            for f, n in fields.items()]


def _tiny(base: Path) -> Path:
    from benchmarks.data_setup import ensure_tiny_model

    return ensure_tiny_model(base.parent)


def _numbers(path: Path) -> tuple[object, dict[tuple[str, str], dict[str, Any]]]:
    """A report's summary, and each pair's ranking, metrics and memories (a memory store's:
    ids, scores, provenance) and budget facts but the count of memories read (issue 44: a
    budget's longer read now stops where the largest budget is spent), by (retriever,
    question). A budget fact or metric that one report holds and the other lacks (a fact
    added since) is named by :func:`_differing`, as a changed one is."""
    report = json.loads(path.read_text())

    def budget(p: dict[str, Any]) -> object:
        facts = p.get("budget")
        return {k: v for k, v in facts.items() if k != "read"} \
            if isinstance(facts, dict) else facts

    return report["summary"], {
        (str(p["retriever"]), str(p["question_id"])): {
            "ranked": p["ranked"], "metrics": p.get("metrics"), "memories": p.get("memories"),
            "budget": budget(p)}
        for p in report["pairs"]}


def table(phases: Sequence[Phase], new: Version, old: Version, repeat: int) -> list[str]:
    a, b = new.label, old.label
    lines = [f"| phase (median of {repeat}, peak RSS the largest; serial, `--no-model`) | "
             f"{b} ({old.commit}) | "
             f"NEW ({new.commit}) | NEW/{b} |", "|---|---|---|---|"]
    for p in phases:
        m = {k: Sample(statistics.median(s.wall for s in v),
                       statistics.median(s.cpu for s in v),
                       int(statistics.median(s.rchar for s in v)),
                       int(statistics.median(s.read_bytes for s in v)), "",
                       max(s.rss for s in v))
             for k, v in p.samples.items()}

        def cell(s: Sample, size: int | None) -> str:
            text = (f"{s.wall:.2f} s wall, {s.cpu:.2f} s CPU, {s.rchar / 1e6:.0f} MB read, "
                    f"peak {s.rss / 2**20:.0f} MiB")
            return text + (f", file {size / 1e6:.2f} MB" if size is not None else "")

        ratio = (f"{m[a].wall / m[b].wall:.3f} wall, {m[a].cpu / m[b].cpu:.3f} CPU, "
                 f"{m[a].rchar / max(m[b].rchar, 1):.3f} read, "
                 f"{m[a].rss / max(m[b].rss, 1):.3f} peak")
        if p.sizes:
            ratio += f", {p.sizes[a] / p.sizes[b]:.3f} size"
        lines.append(f"| {p.name} | {cell(m[b], p.sizes.get(b))} | "
                     f"{cell(m[a], p.sizes.get(a))} | {ratio} |")
    return lines
