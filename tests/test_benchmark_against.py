"""benchmarks/against.py (``benchmarks/run.py --against REV``): what one measured process
reports. The whole comparison needs two venvs and a dataset: its command is in
benchmarks/RESULTS.md, not run here."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from benchmarks.against import (
    Phase,
    Sample,
    Version,
    _differing,
    item_overheads,
    overhead_lines,
    sample,
    table,
)


def test_sample_counts_the_bytes_and_cpu_of_reaped_grandchildren(tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(os.urandom(3_000_000))
    # The child starts a grandchild that reads the file whole and burns CPU, and reaps it:
    # the counts must reach the measured process's figures.
    grandchild = (f"import time; open({str(blob)!r}, 'rb').read(); t = time.process_time()\n"
                  "while time.process_time() - t < 0.3: pass\n")
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    s = sample([sys.executable, "-c", child], tmp_path, dict(os.environ))
    assert s.rchar >= 3_000_000
    assert s.cpu >= 0.3


def test_sample_gives_the_peak_rss_of_the_largest_reaped_child(tmp_path: Path) -> None:
    grandchild = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096])"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    s = sample([sys.executable, "-c", child], tmp_path, dict(os.environ))
    assert s.rss >= 200 * 2**20


def test_the_table_gives_new_over_rev_ratios() -> None:
    new = Version("NEW", "abc1234", Path("p"), Path("c"))
    old = Version("fbc1d0f", "fbc1d0f", Path("p"), Path("c"))
    phase = Phase("warm run, hybrid", {
        "NEW": [Sample(1.0, 2.0, 100, 0, ""), Sample(3.0, 4.0, 300, 0, "")],
        "fbc1d0f": [Sample(4.0, 4.0, 400, 0, ""), Sample(4.0, 4.0, 400, 0, "")]},
        {"NEW": 50, "fbc1d0f": 100})
    row = table([phase], new, old, 2)[-1]
    assert row.endswith("| 0.500 wall, 0.750 CPU, 0.500 read, 0.000 peak, 0.500 size |")
    phase.samples["NEW"][1].rss, phase.samples["fbc1d0f"][0].rss = 3 * 2**20, 4 * 2**20
    row = table([phase], new, old, 2)[-1]  # the largest peak of the runs
    assert "peak 3 MiB" in row and "peak 4 MiB" in row and "0.750 peak" in row


def test_the_overhead_per_item_comes_from_the_four_retriever_reports(tmp_path: Path) -> None:
    new = Version("NEW", "abc1234", Path("p"), Path("c"))
    old = Version("2f91fdd", "2f91fdd", Path("p"), Path("c"))

    def report(path: Path, hybrid: list[float], semantic: list[float]) -> None:
        pairs = [{"retriever": name, "question_id": f"q{i}", "latency_ms": {"overhead": x}}
                 for name, values in (("hybrid", hybrid), ("semantic", semantic))
                 for i, x in enumerate(values)]
        pairs.append({"retriever": "fts", "question_id": "q0", "latency_ms": {}})
        path.write_text(json.dumps({"pairs": pairs}))

    report(tmp_path / "four-NEW-0.json", [1.0, 2.0, 9.0], [1.0, 1.0, 1.0])
    report(tmp_path / "four-NEW-1.json", [3.0], [1.0])
    report(tmp_path / "four-2f91fdd-0.json", [8.0], [2.0])
    assert item_overheads(tmp_path / "four-NEW-0.json") == {"hybrid": 2.0, "semantic": 1.0}
    lines = overhead_lines(tmp_path, new, old, 2)
    assert len(lines) == 2
    assert "NEW (abc1234)" in lines[0] and "median of 2 runs' medians" in lines[0]
    assert "hybrid 2.500 ms, semantic 1.000 ms; hybrid/semantic 2.50x (per run: 2.00, 3.00)" \
        in lines[0]
    assert "hybrid/semantic 4.00x (per run: 4.00)" in lines[1]


def test_differing_names_each_changed_field_and_its_pairs(tmp_path: Path) -> None:
    """The --against note says what differs: a changed metric, a budget fact one version
    lacks (added since), never the count of memories read; identical reports: nothing."""
    def pair(qid: str, recall: float, budget: dict[str, object]) -> dict[str, object]:
        return {"retriever": "fts", "question_id": qid, "ranked": ["a"],
                "metrics": {"recall@1": 1.0, "turn_recall@1": recall}, "budget": budget}

    def write(name: str, pairs: list[dict[str, object]]) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"summary": {"fts": 1}, "pairs": pairs}))
        return path

    old = write("old.json", [pair("q1", 0.0, {"fit": 1, "read": 9}),
                             pair("q2", 0.0, {"fit": 2, "read": 9})])
    new = write("new.json", [pair("q1", 0.5, {"fit": 1, "read": 3, "reach": 4}),
                             pair("q2", 0.5, {"fit": 2, "read": 3, "reach": 5})])
    assert _differing(new, old) == ["budget.reach: 2 pairs", "metrics.turn_recall@1: 2 pairs"]
    assert _differing(old, old) == []


def test_memory_paths_times_each_path_against_hybrid_and_a_sessions_only_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/memory_paths.py: each path once a round, medians over hybrid's, the
    budget's cost, and with --sessions-cache hybrid run there too (what turn vectors in a
    cache cost a run that reads none)."""
    from benchmarks import memory_paths
    from benchmarks.against import Sample

    seen: list[tuple[str, str]] = []
    cpu = {"hybrid": 2.0, "semantic+unit:turn": 5.0, "hybrid,semantic+unit:turn": 6.0}

    def fake(cmd: list[str], cwd: Path, env: dict[str, str]) -> Sample:
        retrievers = cmd[cmd.index("--retrieval-eval-retriever") + 1]
        cache = cmd[cmd.index("--retrieval-eval-cache") + 1]
        seen.append((retrievers, Path(cache).name))
        budget = "--retrieval-eval-budget" in cmd
        sessions = Path(cache).name == "sessions"
        return Sample(wall=1.0, cpu=cpu.get(retrievers, 3.0) + 1.2 * budget - 0.4 * sessions,
                      rchar=0, read_bytes=0, output="",
                      rss=(200 if sessions else 220) * 10**6)

    monkeypatch.setattr(memory_paths, "sample", fake)
    assert memory_paths.main(["--data", "d.json", "--cache", str(tmp_path / "turns"),
                              "--sessions-cache", str(tmp_path / "sessions"),
                              "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert seen.count(("hybrid", "sessions")) == 2 and seen.count(("hybrid", "turns")) == 2
    assert len(seen) == 2 * 7
    assert "| `semantic+unit:turn` | 5.00 s (5.00, 5.00) | 2.50 | 220 MB |" in out
    assert "a budget adds +20.0 %" in out
    assert "turn vectors in the cache cost hybrid 1.25x CPU, 1.10x peak RSS" in out


@pytest.mark.parametrize("argv", [
    ["--first-runs", "fts-turn", "--only", "memories"],  # no --against
    ["--against", "HEAD", "--first-runs", "fts-turn"],  # not --only memories
    ["--against", "HEAD", "--first-runs", "fts-turn,nope", "--only", "memories"],
    ["--against", "HEAD", "--first-runs", ",", "--only", "memories"],
])
def test_first_runs_are_refused_before_any_data_is_made(argv: list[str],
                                                        tmp_path: Path) -> None:
    """`--first-runs` names memory runs of `--against REV --only memories`; anything else is
    one line, before a dataset is generated or a venv built."""
    from benchmarks import run

    with pytest.raises(SystemExit, match="--first-runs takes a comma list of sem-turn, "
                                         "bm25-turn, fts-turn, budget"):
        run.main([*argv, "--data-dir", str(tmp_path)])
    assert list(tmp_path.iterdir()) == []
