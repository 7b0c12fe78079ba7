"""The report: the machine's description, the results table, and the results file
(``--out``, RESULTS.md) that holds them with the details and the profile summary."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks import measuring
from benchmarks.data_setup import Scale
from benchmarks.measuring import Results, Row


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
           "are indicative only"] if measuring.INDICATIVE else []),
        *([""] + [results.profile[0], ""] + [_bullet(x) for x in results.profile[1:]]
          if results.profile else []),
        "",
    ]
    path.write_text("\n".join(body), encoding="utf-8")

