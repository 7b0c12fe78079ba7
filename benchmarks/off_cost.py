"""What the plugin costs a run that does not use it (issue 29, "off costs a little").

::

    python benchmarks/off_cost.py [--repeat 15]

Times (CPU) ``pytest -q`` of one trivial test in an empty folder, as subprocesses, three ways: the
plugin loaded but off (what every run of a project that installs it pays), the plugin
disabled with ``-p no:retrieval_eval``, and the difference; each with bytecode caching and
with ``PYTHONDONTWRITEBYTECODE=1`` (pytest cannot cache its rewritten modules then); the
first row drops that variable from the environment, where a machine sets it. Before the
second row the rewritten bytecode pytest cached for the plugin's modules in the first
(``__pycache__/*-pytest-*.pyc`` of the installed package) is removed: pytest reads such a
file even when it may not write one, and a machine that always sets the variable never has
one, so pytest parses each of those modules from source in every run. The runs of a cell
are interleaved; the cost is the difference of the medians, and "least" that of the least
times (steadier on a shared machine), printed as a table; nothing in the repository is written
(an installed package inside it keeps its files). Run it with the Python of a *wheel*
install, as a project that installs the plugin has it."""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def _medians_ms(folder: Path, extras: list[list[str]], env: dict[str, str],
                repeat: int) -> list[tuple[float, float]]:
    """Median and least CPU time (user + system, the child's own) of each command line, the runs
    interleaved (A, B, A, B, ...) so that the machine's drift falls on every cell alike. CPU
    time, not wall time: on a shared machine the wall time of a 0.6 s run varies by tens of
    milliseconds, more than the cost measured."""
    commands = [[sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
                for extra in extras]
    for command in commands:  # warm-up: the OS file cache, and pytest's bytecode cache
        subprocess.run(command, cwd=folder, env=env, capture_output=True, check=True)
    cpus: list[list[float]] = [[] for _ in commands]
    for _ in range(repeat):
        for command, cpu in zip(commands, cpus, strict=True):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(command, cwd=folder, env=env, capture_output=True, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
                       * 1000)
    return [(statistics.median(cpu), min(cpu)) for cpu in cpus]


def _drop_rewritten_bytecode() -> int:
    """Remove pytest's cached rewrites of the installed plugin's modules (what a machine with
    PYTHONDONTWRITEBYTECODE=1 never has); a package inside this repository is left alone.
    Returns how many files went."""
    spec = importlib.util.find_spec("pytest_retrieval_eval")  # finds; imports nothing
    if spec is None or not spec.submodule_search_locations:
        return 0
    package = Path(next(iter(spec.submodule_search_locations))).resolve()
    if Path(__file__).resolve().parent.parent in package.parents:
        return 0
    dropped = 0
    for pyc in package.rglob("__pycache__/*-pytest-*.pyc"):
        pyc.unlink()
        dropped += 1
    return dropped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per cell (default: 15)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_one.py").write_text("def test_one():\n    pass\n")
        print(f"{'bytecode':<22} {'plugin off':>11} {'-p no:':>9} {'cost':>8} {'least':>8}")
        for label, extra_env in (("cached", {}), ("PYTHONDONTWRITEBYTECODE",
                                                  {"PYTHONDONTWRITEBYTECODE": "1"})):
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith("PYTEST_") and k != "PYTHONDONTWRITEBYTECODE"}
            env.update(extra_env)
            if extra_env:
                _drop_rewritten_bytecode()
            (off, off_least), (disabled, disabled_least) = _medians_ms(
                folder, [[], ["-p", "no:retrieval_eval"]], env, args.repeat)
            print(f"{label:<22} {off:>9.1f}ms {disabled:>7.1f}ms {off - disabled:>+6.1f}ms "
                  f"{off_least - disabled_least:>+6.1f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
