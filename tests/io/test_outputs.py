"""Outputs at user-named paths (issue 27.7, 27.9): an output never names an input or another
output, and the temp files of killed writes are swept by the next write to that target."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pytest_retrieval_eval.io import checksums, user_files
from tests.support import ROOT

_SLOW_WRITE = """
import sys, time
from pathlib import Path
from pytest_retrieval_eval.io import user_files

def write(fh):
    fh.write(b"x" * 4096)
    fh.flush()
    print("writing", flush=True)
    time.sleep(60)

user_files.replace_file(Path(sys.argv[1]), write)
"""


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _killed_write(target: Path, sig: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITE, str(target)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(sig)
    proc.wait(timeout=30)
    proc.stdout.close()


def test_a_killed_write_leaves_one_temp_and_the_next_write_sweeps_it(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old\n")
    _killed_write(target, signal.SIGKILL)
    assert len(_temps(tmp_path)) == 1 and target.read_text() == "old\n"
    _killed_write(target, signal.SIGTERM)  # the second write swept the first's temp
    assert len(_temps(tmp_path)) == 1
    user_files.replace_text(target, "new\n")
    assert _temps(tmp_path) == [] and target.read_text() == "new\n"


def test_the_sweep_keeps_live_writers_and_other_targets(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = checksums.owner_tag().rsplit("-", 1)[0]
    names = {
        "dead": f".out.json.{host}-{dead.pid}-7.tmp",
        "old_style": ".out.json.ab_cd12x.tmp",  # mkstemp's name, before owners were named
        "live": f".out.json.{host}-{os.getpid()}-8.tmp",
        "other_host_fresh": f".out.json.elsewhere-{dead.pid}-9.tmp",
        "other_host_stale": f".out.json.faraway-{dead.pid}-9.tmp",
        "other_target": f".out.json.x.{host}-{dead.pid}-7.tmp",
        "user_file": ".out.json.notes.tmp",
    }
    for name in names.values():
        (tmp_path / name).write_text("partial")
    stale = time.time() - user_files.STALE_TEMP_SECONDS - 60
    os.utime(tmp_path / names["other_host_stale"], (stale, stale))
    assert user_files.sweep_temps(target) == 3
    left = set(_temps(tmp_path))
    assert left == {names[k] for k in ("live", "other_host_fresh", "other_target", "user_file")}


def test_same_file_by_path_link_and_inode(tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text("[]")
    (tmp_path / "link.json").symlink_to(data)
    os.link(data, tmp_path / "hard.json")
    assert user_files.same_file(data, tmp_path / "link.json")
    assert user_files.same_file(data, tmp_path / "hard.json")
    assert user_files.same_file(data, tmp_path / "sub" / ".." / "data.json")
    assert user_files.same_file(tmp_path / "new.json", tmp_path / "." / "new.json")
    assert not user_files.same_file(data, tmp_path / "other.json")


def test_first_clash_names_the_output_and_what_it_meets(tmp_path: Path) -> None:
    data, out, md = tmp_path / "d.json", tmp_path / "r.json", tmp_path / "r.md"
    data.write_text("[]")
    assert user_files.first_clash([("--json", out), ("--md", md)], [("--data", data)]) is None
    assert user_files.first_clash([("--json", data)], [("--data", data)]) == (
        "--json", data, "--data")
    assert user_files.first_clash([("--json", out), ("--md", out)], []) == (
        "--md", out, "--json")
    assert user_files.first_clash([("--json", None)], [("--data", None)]) is None


def test_a_killed_generate_is_swept_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest_retrieval_eval.generator",
                             "--preset", "full_m", "--no-progress", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _temps(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert len(_temps(tmp_path)) == 1 and not out.exists()
    done = subprocess.run([sys.executable, "-m", "pytest_retrieval_eval.generator",
                           "--preset", "sample", "--no-progress", str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _temps(tmp_path) == [] and out.stat().st_size > 0


def _generate(out: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "pytest_retrieval_eval.generator",
                             "--preset", "full_m", "--no-progress", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_a_generate_stopped_by_sigterm_removes_its_temp(tmp_path: Path) -> None:
    """34.9: SIGTERM (``timeout``, CI cancels, container stops) is handled as Ctrl-C is."""
    out = tmp_path / "m.json"
    proc = _generate(out)
    try:
        deadline = time.monotonic() + 60
        while not _temps(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _temps(tmp_path), "generate began writing"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == 130, err
    assert b"interrupted" in err and b"Traceback" not in err, err
    assert _temps(tmp_path) == [] and not out.exists()


def test_generate_sweeps_dead_writers_temps_whatever_their_target(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = checksums.owner_tag().rsplit("-", 1)[0]
    left = tmp_path / f".big.json.{host}-{dead.pid}-3.tmp"  # a killed `generate big.json`
    live = tmp_path / f".big.json.{host}-{os.getpid()}-4.tmp"
    mine = tmp_path / ".notes.tmp"
    for path in (left, live, mine):
        path.write_text("partial")
    done = subprocess.run([sys.executable, "-m", "pytest_retrieval_eval.generator",
                           "--preset", "sample", "--no-progress", str(tmp_path / "s.json")],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not left.exists() and live.exists() and mine.exists()
