"""Files at user-named paths (issue 23.3): written through symlinks, atomically at the target;
a FIFO, device, socket or folder is refused in one line, and nothing blocks on a FIFO."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_retrieval_eval.boundary.outputs import MARKDOWN_MARKER
from pytest_retrieval_eval.errors import CacheError
from pytest_retrieval_eval.io import user_files
from pytest_retrieval_eval.reporting import report
from pytest_retrieval_eval.reporting.publish import publish_markdown
from tests.support.compare_factory import make_report


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """A write that blocks on a FIFO fails the test after 10 s instead of hanging the suite."""
    def _fail(*_: object) -> None:
        raise TimeoutError("the write blocked")

    old = signal.signal(signal.SIGALRM, _fail)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_replace_writes_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("stale\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert user_files.replace_text(link, "fresh\n") == real
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "fresh\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "sub" / "made.md")
    user_files.replace_text(link, "x")
    user_files.append_text(link, "y")
    assert link.is_symlink() and (tmp_path / "sub" / "made.md").read_text() == "xy"


def _specials(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    yield fifo, "a FIFO"
    folder = tmp_path / "folder"
    folder.mkdir()
    yield folder, "a directory"
    yield Path("/dev/null"), "a character device"
    sock_path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    yield sock_path, "a socket"
    sock.close()
    link = tmp_path / "to-fifo"
    link.symlink_to(fifo)
    yield link, "a FIFO"


@pytest.mark.parametrize("append", [False, True])
def test_a_target_that_is_not_a_regular_file_is_refused(tmp_path: Path, append: bool) -> None:
    fifo_target = tmp_path / "fifo"
    for target, kind in _specials(tmp_path):
        before = os.lstat(target)
        with pytest.raises(user_files.TargetRefused) as info:
            (user_files.append_text if append else user_files.replace_text)(target, "text")
        assert kind in info.value.reason
        assert (str(fifo_target) in info.value.reason) == target.is_symlink()
        after = os.lstat(target)
        assert (after.st_ino, stat.S_IFMT(after.st_mode)) == (before.st_ino,
                                                             stat.S_IFMT(before.st_mode))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_write_json_through_a_symlink_and_refusing_a_fifo(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text('{"schema_version": 0}')  # a report of this plugin's (boundary/outputs.py)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    report.write_json({"schema_version": 1}, link)
    assert json.loads(real.read_text()) == {"schema_version": 1} and link.is_symlink()
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(CacheError) as info:
        report.write_json({"schema_version": 1}, fifo)
    line = str(info.value)
    assert "\n" not in line and "is a FIFO" in line and line.endswith(
        "pass another --retrieval-eval-json")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_write_json_refuses_nan_instead_of_writing_non_json(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(CacheError, match="NaN or infinite"):
            report.write_json({"schema_version": 1, "x": bad}, target)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError):
        user_files.json_text([math.nan])


def test_step_summary_on_a_fifo_or_folder_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = make_report({"a": [("q1", "multi-session", 1.0)]})
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))
    [line] = publish_markdown(rep, None, step_summary=True)
    assert line.startswith("retrieval-eval: error: job summary ($GITHUB_STEP_SUMMARY)")
    assert line.endswith("(it is a FIFO (named pipe), not a regular file); "
                         "point $GITHUB_STEP_SUMMARY at a file")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))
    [line] = publish_markdown(rep, None, step_summary=True)
    assert "it is a directory" in line and "disk space" not in line
    md_link = tmp_path / "summary.md"
    real = tmp_path / "real.md"
    real.write_text(MARKDOWN_MARKER + "\nold")  # a summary of this plugin's

    md_link.symlink_to(real)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step.md"))
    lines = publish_markdown(rep, md_link, step_summary=True)
    assert lines == [f"Markdown summary: {md_link}",
                     f"job summary ($GITHUB_STEP_SUMMARY): {tmp_path / 'step.md'}"]
    written, summary = real.read_text(), (tmp_path / "step.md").read_text()
    assert written.startswith(MARKDOWN_MARKER) and written.endswith(summary)
    assert "\nold" not in written
    assert md_link.is_symlink()


def test_append_to_a_fifo_with_a_reader_is_still_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(user_files.TargetRefused):
            user_files.append_text(fifo, "text")
        assert os.read(reader, 10) == b""  # nothing was written into the pipe
    finally:
        os.close(reader)


def test_dev_stdout_and_proc_fd_of_a_pipe_are_refused(tmp_path: Path) -> None:
    """Issue 23.3: /proc/self/fd/1 and /dev/stdout were replaced by a plain file (as root in a
    CI container, the device node itself)."""
    read_end, write_end = os.pipe()
    try:
        for path in (Path(f"/proc/self/fd/{write_end}"), Path("/dev/stdout")):
            for write in (user_files.replace_text, user_files.append_text):
                try:
                    kind = stat.S_IFMT(os.stat(path).st_mode)
                except OSError:
                    continue
                if kind == stat.S_IFREG:
                    continue  # stdout redirected to a file: written through, as a symlink
                with pytest.raises(user_files.TargetRefused, match="not a regular file"):
                    write(path, "text")
        assert os.path.islink(f"/proc/self/fd/{write_end}")
        os.set_blocking(read_end, False)
        with pytest.raises(BlockingIOError):
            os.read(read_end, 10)  # nothing reached the pipe
    finally:
        os.close(read_end)
        os.close(write_end)
