"""checksums: plain and memoised hashing, sidecars, stamps; errors.one_line; hub.offline_mode."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from pytest_retrieval_eval.errors import one_line
from pytest_retrieval_eval.io import checksums, hub


def test_sha256_file_streams_and_reports_progress(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    data = os.urandom((1 << 20) + 5)
    path.write_bytes(data)
    seen: list[tuple[int, int]] = []
    assert checksums.sha256_file(path, lambda d, t: seen.append((d, t))) == (
        hashlib.sha256(data).hexdigest()
    )
    assert seen == [(1 << 20, len(data)), (len(data), len(data))]
    with pytest.raises(FileNotFoundError):
        checksums.sha256_file(tmp_path / "missing")


def test_file_version_identifies_one_version(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    first = checksums.file_version(path)
    assert first == checksums.file_version(path, path.stat())
    assert first[0] == str(path.resolve()) and first[1] == 3
    path.write_bytes(b"abcd")
    assert checksums.file_version(path) != first


def test_sidecar_round_trip_and_stamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "file.sqlite"
    path.write_bytes(b"content")
    assert not checksums.matches_sidecar(path)  # not committed
    digest = hashlib.sha256(b"content").hexdigest()
    checksums.write_sidecar(path, digest)
    side = checksums.sidecar_path(path)
    assert side == tmp_path / "file.sqlite.sha256"
    assert side.read_text(encoding="ascii") == f"{digest}  file.sqlite\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.sqlite", "file.sqlite.sha256"]
    assert checksums.read_sidecar(path) == digest
    assert checksums.matches_sidecar(path)
    assert (tmp_path / "file.sqlite.verified").is_file()
    checksums._memo.clear()  # a later process: only the stamp is left
    hashed: list[Path] = []
    monkeypatch.setattr(checksums, "sha256_file", lambda p, *_: hashed.append(p) or "0")
    assert checksums.matches_sidecar(path) and hashed == []
    path.write_bytes(b"CONTENT!")  # a rewrite
    assert not checksums.matches_sidecar(path) and hashed == [path]


def test_unreadable_sidecar_does_not_match(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")
    side = checksums.sidecar_path(path)
    for body in (b"", b"\xff\xfe", b"   \n"):
        side.write_bytes(body)
        assert not checksums.matches_sidecar(path)
    with pytest.raises(ValueError):
        checksums.read_sidecar(path)


def test_write_sidecar_failure_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        checksums.write_sidecar(path, "0" * 64)
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_one_line() -> None:
    assert one_line("a\n  b\tc ") == "a b c"
    assert one_line(ValueError("x\ny")) == "x y"
    assert one_line("abcdefghij", 8) == "abcde..."
    assert one_line("abcdefgh", 8) == "abcdefgh"


@pytest.mark.parametrize(
    ("value", "offline"),
    [(None, False), ("", False), ("0", False), ("off", False), ("1", True), ("YES", True),
     ("2", True)],
)
def test_hub_offline_mode(monkeypatch: pytest.MonkeyPatch, value: str | None,
                          offline: bool) -> None:
    if value is None:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert hub.offline_mode() is offline
    assert hub.offline_mode(True) is True


def test_hub_cache_dir_follows_the_environment_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    assert hub.cache_dir() is None
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub.cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert hub.cache_dir() == tmp_path / "cache"
