"""What the plugin costs a run that does not use it (issue 29, "off costs a little").

::

    python benchmarks/off_cost.py [--repeat 15]

Times ``pytest -q`` of one trivial test in an empty folder, as subprocesses, three ways: the
plugin loaded but off (what every run of a project that installs it pays), the plugin
disabled with ``-p no:retrieval_eval``, and the difference; each with bytecode caching and
with ``PYTHONDONTWRITEBYTECODE=1`` (pytest cannot cache its rewritten modules then). The
medians print as a table; nothing in the repository is written."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _median_ms(folder: Path, extra: list[str], env: dict[str, str], repeat: int) -> float:
    walls = []
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
    subprocess.run(command, cwd=folder, env=env, capture_output=True, check=True)  # warm-up
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, cwd=folder, env=env, capture_output=True, check=True)
        walls.append((time.perf_counter() - start) * 1000)
    return statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per cell (default: 15)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_one.py").write_text("def test_one():\n    pass\n")
        print(f"{'bytecode':<22} {'plugin off':>11} {'-p no:':>9} {'cost':>8}")
        for label, extra_env in (("cached", {}), ("PYTHONDONTWRITEBYTECODE",
                                                  {"PYTHONDONTWRITEBYTECODE": "1"})):
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
            env.update(extra_env)
            off = _median_ms(folder, [], env, args.repeat)
            disabled = _median_ms(folder, ["-p", "no:retrieval_eval"], env, args.repeat)
            print(f"{label:<22} {off:>9.1f}ms {disabled:>7.1f}ms {off - disabled:>+6.1f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
