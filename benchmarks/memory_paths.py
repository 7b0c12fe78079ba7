"""The memory paths' warm runs (issue 44) for the installed version alone, on a prepared cache:
each path once a round, ``--repeat`` rounds, medians of CPU (the process tree's user + sys),
and the peak RSS, with each path's CPU over hybrid's. What ``--against`` cannot give where the
older version takes hours (benchmarks/RESULTS.md, "on the full synthetic M: NEW alone").

    python benchmarks/memory_paths.py --data DATA.json --cache CACHE [--repeat 3]
        [--sessions-cache CACHE2]

The cache must hold the dataset's session and turn vectors (``retrieval-eval prep --turns``)
and each path's first run (this script times warm runs only). ``--sessions-cache``: a cache
of the same dataset prepped without ``--turns`` (its hybrid run taken once): each round also
runs hybrid there, and the table says what turn vectors in a cache cost a run that reads
none (issue 44: at most 1.05x CPU and RSS).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository's root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.against import _env, host_plugins_off, sample

#: name, retrievers, extra options (the budget against the same retrievers without one)
PATHS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("hybrid", "hybrid", ()),
    ("semantic+unit:turn", "semantic+unit:turn", ()),
    ("bm25+unit:turn", "bm25+unit:turn", ()),
    ("fts+unit:turn", "fts+unit:turn", ()),
    ("budget 500,2000,8000", "hybrid,semantic+unit:turn",
     ("--retrieval-eval-budget", "500,2000,8000")),
    ("no budget", "hybrid,semantic+unit:turn", ()),
)


#: The hybrid run on ``--sessions-cache`` (no turn vectors in it).
SESSIONS_ONLY = "hybrid, no turn vectors in the cache"


def command(data: Path, cache: Path, report: Path, retrievers: str,
            extra: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            *host_plugins_off(), "--retrieval-eval", "--no-model",
            "--retrieval-eval-retriever", retrievers, "--retrieval-eval-data", str(data),
            "--retrieval-eval-cache", str(cache), "--retrieval-eval-json", str(report),
            *extra]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sessions-cache", type=Path, default=None)
    args = parser.parse_args(argv)
    paths = [(name, retrievers, extra, args.cache) for name, retrievers, extra in PATHS]
    if args.sessions_cache is not None:
        paths.insert(1, (SESSIONS_ONLY, "hybrid", (), args.sessions_cache))
    cpu: dict[str, list[float]] = {name: [] for name, _, _, _ in paths}
    rss: dict[str, int] = {name: 0 for name, _, _, _ in paths}
    with tempfile.TemporaryDirectory() as work:
        for i in range(args.repeat):
            for name, retrievers, extra, cache in paths:
                s = sample(command(args.data, cache, Path(work) / f"{i}.json",
                                   retrievers, extra), Path(work), _env())
                cpu[name].append(s.cpu)
                rss[name] = max(rss[name], s.rss)
                print(f"  {name} {i + 1}/{args.repeat}: {s.cpu:.2f} s CPU, "
                      f"{s.rss / 1e6:.0f} MB peak", flush=True)
    hybrid = statistics.median(cpu["hybrid"])
    print(f"| warm run (median of {args.repeat}) | CPU | x hybrid | peak RSS |")
    print("|---|---|---|---|")
    for name, _, _, _ in paths:
        median = statistics.median(cpu[name])
        runs = ", ".join(f"{x:.2f}" for x in cpu[name])
        print(f"| `{name}` | {median:.2f} s ({runs}) | {median / hybrid:.2f} | "
              f"{rss[name] / 1e6:.0f} MB |")
    with_budget = statistics.median(cpu["budget 500,2000,8000"])
    print(f"\na budget adds {100 * (with_budget / statistics.median(cpu['no budget']) - 1):+.1f} %")
    if args.sessions_cache is not None:
        alone = statistics.median(cpu[SESSIONS_ONLY])
        print(f"turn vectors in the cache cost hybrid {hybrid / alone:.2f}x CPU, "
              f"{rss['hybrid'] / max(rss[SESSIONS_ONLY], 1):.2f}x peak RSS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
