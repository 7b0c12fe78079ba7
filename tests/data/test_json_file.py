"""read_json_file: a whole JSON file within the dataset path's guards (regular file, bounded
size, bounded nesting), each fault one line naming the file and the caller's fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_retrieval_eval.data.json_file import MAX_DEPTH, read_json_file
from pytest_retrieval_eval.errors import DataError

FIX = "write it again"


def read(path: Path, max_bytes: int = 1 << 20) -> object:
    return read_json_file(path, what="report", fix=FIX, max_bytes=max_bytes)


def test_reads_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"a": [1, 2.5, "x"], "b": NaN}', encoding="utf-8")
    value = read(path)
    assert isinstance(value, dict) and value["a"] == [1, 2.5, "x"]
    assert value["b"] != value["b"]  # NaN is the caller's to refuse, naming the field


def test_size_is_bounded_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text("[" + "0," * 600 + "0]")
    with pytest.raises(DataError, match=r"^report .*big.json: 1,203 bytes, larger than the "
                       r"1,000 bytes a report may be; write it again$"):
        read(path, max_bytes=1000)
    assert read(path, max_bytes=1203) == [0] * 601  # exactly the limit is read


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 2000, 100_000])
def test_nesting_is_bounded_without_recursion_error(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"a": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(DataError, match=rf"nests JSON more than {MAX_DEPTH} levels deep "
                       r"\(at byte 69\); write it again$"):
        read(path)
    path.write_text("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert read(path) is not None  # the limit itself is fine


def test_brackets_inside_strings_do_not_count(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"a": "' + "[" * 500 + '\\"' + "{" * 500 + '"}')
    assert read(path) == {"a": "[" * 500 + '"' + "{" * 500}


def test_not_json_not_utf8_missing_and_directory(tmp_path: Path) -> None:
    (tmp_path / "cut.json").write_text('{"a": [1, 2')
    with pytest.raises(DataError, match=r"cut.json: not valid JSON \(.*line 1 column 12: "
                       r"truncated or damaged\); write it again$"):
        read(tmp_path / "cut.json")
    (tmp_path / "bin.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(DataError, match=r"bin.json: not UTF-8 text \(byte 7\)"):
        read(tmp_path / "bin.json")
    with pytest.raises(DataError, match=r"gone.json: cannot be read \(No such file"):
        read(tmp_path / "gone.json")
    with pytest.raises(DataError, match="is a directory, not a file"):
        read(tmp_path)


def test_a_device_is_refused_before_any_read() -> None:
    with pytest.raises(DataError, match=r"/dev/zero is a character device, not a regular "
                       r"file"):
        read(Path("/dev/zero"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_never_hangs(tmp_path: Path) -> None:
    """No writer ever opens the FIFO: a blocking open would wait forever (the subprocess's
    timeout is the test's failure)."""
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    code = ("import sys; from pathlib import Path; "
            "from pytest_retrieval_eval.data.json_file import read_json_file as r\n"
            "try:\n  r(Path(sys.argv[1]), what='report', fix='x', max_bytes=10)\n"
            "except Exception as e:\n  print(e)\n")
    done = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True,
                          text=True, timeout=60)
    assert "is a FIFO (named pipe), not a regular file" in done.stdout
