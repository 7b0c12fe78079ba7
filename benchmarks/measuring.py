"""Measuring the benchmark's processes: a command's wall clock, CPU and the peak RSS of its whole
process tree (sampled from /proc), the full-scale targets, the rows and facts a run collects, and
the formatting of seconds and bytes in them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: The repository (the stand-in Hub and ``tests.support`` live there).
ROOT = Path(__file__).resolve().parent.parent

GiB = 1 << 30
MiB = 1 << 20
PYTHON = sys.executable

# Targets (full scale). Times in seconds, memory in bytes.
LOAD_PEAK = 1 * GiB
WARM_WALL = 30.0
WARM_PEAK = 4 * GiB
FIRST_WALL = 180.0
BM25_SPEEDUP = 5.0
EMBED_EFFICIENCY = 0.90
PARALLEL_GAIN = 0.05  # below this, 'faster' is within run-to-run noise


# --------------------------------------------------------------------------- rows


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


def fmt_duration(seconds: float) -> str:
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


# --------------------------------------------------------------------------- disk


def du(path: Path) -> int:
    """Bytes on disk of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
