"""dataset: resolving names and paths, hashing, and the streaming reader's file-level errors."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.data import dataset
from pytest_retrieval_eval.data.dataset import (
    DEFAULT_REPO,
    KNOWN,
    SAMPLE_PATH,
    DatasetSource,
    file_sha256,
    resolve_dataset,
)
from pytest_retrieval_eval.data.json_stream import iter_instances
from pytest_retrieval_eval.errors import DataError, RetrievalEvalError
from pytest_retrieval_eval.io import checksums
from pytest_retrieval_eval.io import hub as hub_mod
from tests.support.lme_factory import make_instance, write_dataset


def one_line_error(excinfo: pytest.ExceptionInfo[DataError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    assert isinstance(excinfo.value, RetrievalEvalError)
    return message


@pytest.fixture
def good_file(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "lme.json", [make_instance(f"q{i}") for i in range(3)])


# --- constants ----------------------------------------------------------------------------


def test_known_names_and_default_repo() -> None:
    assert KNOWN == {
        "longmemeval_s": "longmemeval_s_cleaned.json",
        "longmemeval_m": "longmemeval_m_cleaned.json",
        "longmemeval_oracle": "longmemeval_oracle.json",
    }
    assert DEFAULT_REPO == "xiaowu0162/longmemeval-cleaned"
    assert SAMPLE_PATH.parts[-3:] == ("data", "sample", "longmemeval_sample.json")


# --- resolve_dataset ----------------------------------------------------------------------


def test_resolve_sample_is_the_bundled_file(
    monkeypatch: pytest.MonkeyPatch, good_file: Path
) -> None:
    monkeypatch.setattr(dataset, "SAMPLE_PATH", good_file)
    assert resolve_dataset("sample") == DatasetSource("sample", good_file)


def test_resolve_sample_missing_is_one_line_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(dataset, "SAMPLE_PATH", tmp_path / "nope.json")
    with pytest.raises(DataError) as excinfo:
        resolve_dataset("sample")
    assert "reinstall" in one_line_error(excinfo)


def test_resolve_path(good_file: Path) -> None:
    assert resolve_dataset(str(good_file)) == DatasetSource("lme", good_file)


def test_resolve_path_named_like_a_known_file_gets_the_known_name(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "longmemeval_m_cleaned.json", [make_instance()])
    assert resolve_dataset(str(path)).name == "longmemeval_m"


def test_resolve_unknown_name_lists_valid_names() -> None:
    with pytest.raises(DataError) as excinfo:
        resolve_dataset("longmemeval_xl")
    message = one_line_error(excinfo)
    for name in ("sample", "longmemeval_s", "longmemeval_m", "longmemeval_oracle"):
        assert name in message


def test_resolve_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataError) as excinfo:
        resolve_dataset(str(tmp_path))
    assert "directory" in one_line_error(excinfo)


def test_resolve_unreadable_file_is_an_error(good_file: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # chmod 0 stops everyone but root (and CI runs as root), so the permission check is
    # answered "no" for this file directly.
    real_access = os.access

    def access(path: object, mode: int, *args: object, **kwargs: object) -> bool:
        if Path(str(path)) == good_file and mode & os.R_OK:
            return False
        return real_access(path, mode, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(DataError) as excinfo:
        resolve_dataset(str(good_file))
    assert "not readable" in one_line_error(excinfo)
    assert str(good_file) in one_line_error(excinfo)


class FakeHub:
    """Stands in for huggingface_hub.hf_hub_download."""

    def __init__(self, cached: Path | None, remote: Path | None) -> None:
        self.cached, self.remote = cached, remote
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        if kwargs.get("local_files_only"):
            if self.cached is None:
                raise FileNotFoundError("not in cache")
            return str(self.cached)
        if self.remote is None:
            raise ConnectionError("Max retries exceeded\nwith url: huggingface.co")
        return str(self.remote)


def cache_lookup(hub: Any) -> Any:
    """``try_to_load_from_cache`` in terms of a fake ``hf_hub_download``: the same call with
    ``local_files_only``, recorded alike; not cached is None."""

    def lookup(repo_id: str, filename: str, cache_dir: Any = None,
               repo_type: str | None = None) -> str | None:
        kwargs: dict[str, Any] = {"repo_id": repo_id, "filename": filename}
        if repo_type is not None:
            kwargs["repo_type"] = repo_type
        try:
            return str(hub(**kwargs, local_files_only=True))
        except Exception:
            return None

    return lookup


def install_hub(monkeypatch: pytest.MonkeyPatch, hub: FakeHub) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hub)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", cache_lookup(hub))
    monkeypatch.setattr(hub_mod, "_probe", lambda *args: None)  # the fake answers for the Hub
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)


def test_resolve_known_name_uses_cached_copy_first(
    monkeypatch: pytest.MonkeyPatch, good_file: Path
) -> None:
    hub = FakeHub(cached=good_file, remote=None)
    install_hub(monkeypatch, hub)
    assert resolve_dataset("longmemeval_s") == DatasetSource("longmemeval_s", good_file)
    assert hub.calls == [
        {
            "repo_id": DEFAULT_REPO,
            "filename": "longmemeval_s_cleaned.json",
            "repo_type": "dataset",
            "local_files_only": True,
        }
    ]


def test_resolve_known_name_downloads_when_not_cached(
    monkeypatch: pytest.MonkeyPatch, good_file: Path
) -> None:
    hub = FakeHub(cached=None, remote=good_file)
    install_hub(monkeypatch, hub)
    source = resolve_dataset("longmemeval_m", repo="me/mirror", filename="m.json")
    assert source == DatasetSource("longmemeval_m", good_file)
    assert hub.calls[-1] == {"repo_id": "me/mirror", "filename": "m.json", "repo_type": "dataset"}


def test_resolve_hub_unreachable_is_one_line_error_naming_dataset_repo_and_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_hub(monkeypatch, FakeHub(cached=None, remote=None))
    with pytest.raises(DataError) as excinfo:
        resolve_dataset("longmemeval_oracle")
    message = one_line_error(excinfo)
    assert "longmemeval_oracle" in message and DEFAULT_REPO in message
    assert "download it once with network access" in message and "path" in message


class EntryNotFoundError(Exception):
    """Named as huggingface_hub's: hub.py classifies by class name (HTTP 404 of a file)."""


class RepositoryNotFoundError(Exception):
    """Named as huggingface_hub's (no such repository, or access refused)."""


@pytest.mark.parametrize(("error", "fix"), [
    (EntryNotFoundError("404 Client Error: Entry Not Found"), "check --retrieval-eval-data-file"),
    (RepositoryNotFoundError("404 Client Error: Repository Not Found"),
     "check --retrieval-eval-data-repo"),
])
def test_resolve_a_missing_hub_file_or_repo_names_the_option_to_fix(
    monkeypatch: pytest.MonkeyPatch, error: Exception, fix: str
) -> None:
    def hub(**kwargs: Any) -> str:
        if kwargs.get("local_files_only"):
            raise FileNotFoundError("not in cache")
        raise error

    install_hub(monkeypatch, hub)  # type: ignore[arg-type]
    with pytest.raises(DataError) as excinfo:
        resolve_dataset("longmemeval_s", repo="me/typo", filename="nope.json")
    message = one_line_error(excinfo)
    assert fix in message and "network" not in message


@pytest.mark.parametrize("how", ["argument", "env"])
def test_resolve_offline_does_not_download(
    monkeypatch: pytest.MonkeyPatch, how: str, good_file: Path
) -> None:
    hub = FakeHub(cached=None, remote=good_file)
    install_hub(monkeypatch, hub)
    if how == "env":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as excinfo:
        resolve_dataset("longmemeval_s", offline=how == "argument")
    assert "offline" in one_line_error(excinfo)
    assert all(call.get("local_files_only") for call in hub.calls)


def test_resolve_offline_uses_cached_copy(monkeypatch: pytest.MonkeyPatch, good_file: Path) -> None:
    install_hub(monkeypatch, FakeHub(cached=good_file, remote=None))
    assert resolve_dataset("longmemeval_s", offline=True).path == good_file


# --- file_sha256 ----------------------------------------------------------------------------


def test_file_sha256_matches_hashlib(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    data = os.urandom(3 * (1 << 20) + 17)
    path.write_bytes(data)
    seen: list[tuple[int, int]] = []
    assert file_sha256(path, lambda d, t: seen.append((d, t))) == hashlib.sha256(data).hexdigest()
    assert seen[-1] == (len(data), len(data))


def test_file_sha256_is_memoised_and_invalidated_by_a_rewrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"one")
    first = file_sha256(path)
    calls: list[int] = []
    real = hashlib.sha256

    def counting_sha256(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(hashlib, "sha256", counting_sha256)
    assert file_sha256(path) == first
    assert calls == []
    path.write_bytes(b"two!")
    assert file_sha256(path) == real(b"two!").hexdigest()
    assert calls == [1]


def test_file_sha256_missing_file_is_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError):
        file_sha256(tmp_path / "missing")


# --- iter_instances: good files -------------------------------------------------------------


def test_iter_instances_yields_index_and_item(good_file: Path) -> None:
    items = list(iter_instances(good_file))
    assert [i for i, _ in items] == [0, 1, 2]
    assert items[1][1] == json.loads(good_file.read_text())[1]


def test_iter_instances_yields_non_objects_as_is(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "mixed.json", [make_instance(), 3, "x", [1], None])
    assert [item for _, item in iter_instances(path)][1:] == [3, "x", [1], None]


def test_iter_instances_numbers_are_plain_python(tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    path.write_text('[{"answer": 2.5, "n": 3}]')
    ((_, item),) = list(iter_instances(path))
    assert item == {"answer": 2.5, "n": 3}
    assert type(item["answer"]) is float and type(item["n"]) is int


def test_iter_instances_empty_array(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("[]\n")
    assert list(iter_instances(path)) == []


def test_iter_instances_accepts_utf8_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"a": "caf\u00e9"}]).encode())
    assert list(iter_instances(path)) == [(0, {"a": "caf\u00e9"})]


def test_iter_instances_streams_one_item_at_a_time(tmp_path: Path) -> None:
    # A good first item is yielded before the parser reaches the damage further on.
    big = json.dumps([make_instance("q0")] + [make_instance(f"q{i}") for i in range(1, 400)])
    path = tmp_path / "late.json"
    path.write_text(big[: len(big) - 10])
    stream = iter_instances(path)
    assert next(stream)[0] == 0
    with pytest.raises(DataError):
        list(stream)


# --- iter_instances: file-level faults --------------------------------------------------------


def errors_for(path: Path) -> str:
    with pytest.raises(DataError) as excinfo:
        list(iter_instances(path))
    message = one_line_error(excinfo)
    assert str(path) in message
    return message


def test_file_missing_is_one_line_error(tmp_path: Path) -> None:
    assert "does not exist" in errors_for(tmp_path / "gone.json")


def test_file_empty_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    assert "is empty" in errors_for(path)


def test_file_whitespace_only_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "blank.json"
    path.write_bytes(b" \n\n ")
    assert "is empty" in errors_for(path)


def test_file_not_json_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text("hello, this is not json\n")
    assert "is not JSON" in errors_for(path)


def test_file_invalid_json_inside_array_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[{"question_id": "q1"}, {"question_id": nope}]')
    message = errors_for(path)
    assert "not valid JSON in bytes 0-" in message and "around " in message


def test_file_truncated_mid_stream_is_one_line_error(tmp_path: Path, good_file: Path) -> None:
    data = good_file.read_bytes()
    path = tmp_path / "partial.json"
    path.write_bytes(data[: len(data) // 2])
    message = errors_for(path)
    assert f"ends early at byte {len(data) // 2}" in message
    assert "download it again" in message


@pytest.mark.parametrize("fraction", [0.01, 0.1, 0.33, 0.5, 0.77, 0.9, 0.999])
def test_file_truncated_anywhere_is_reported_as_truncated(tmp_path: Path, fraction: float) -> None:
    raw = make_instance(question="Où est le café? \u00e9\u00e8\u4e2d\u6587 " * 30)
    data = json.dumps([raw, raw], ensure_ascii=False).encode("utf-8")
    cut = int(len(data) * fraction)
    path = tmp_path / "partial.json"
    path.write_bytes(data[:cut])
    assert f"ends early at byte {cut}" in errors_for(path)


def test_file_cut_inside_a_multibyte_character_is_reported_as_truncated(tmp_path: Path) -> None:
    path = tmp_path / "partial.json"
    path.write_bytes('[{"question": "caf\u00e9'.encode()[:-1])
    assert "ends early" in errors_for(path)


def test_file_truncated_after_an_item_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "partial.json"
    path.write_text('[{"a": 1}, ')
    assert "ends early" in errors_for(path)


def test_file_top_level_object_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "obj.json"
    path.write_text(json.dumps({"data": [make_instance()]}))
    assert "not an array" in errors_for(path)


def test_file_json_lines_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_text("\n".join(json.dumps(make_instance(f"q{i}")) for i in range(2)))
    assert "JSON Lines" in errors_for(path)


@pytest.mark.parametrize("body", ['"text"', "42", "null", "true"])
def test_file_top_level_scalar_is_one_line_error(tmp_path: Path, body: str) -> None:
    path = tmp_path / "scalar.json"
    path.write_text(body)
    assert "not an array" in errors_for(path)


def test_file_trailing_data_after_array_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    path.write_text("[1, 2]\n[3]")
    assert "follows the top-level array" in errors_for(path)


def test_file_not_utf8_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    prefix = b'[{"question": "caf'
    path.write_bytes(prefix + b'\xe9"}]')
    message = errors_for(path)
    assert "not valid UTF-8" in message
    assert f"at byte {len(prefix)}" in message


def test_file_utf16_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "utf16.json"
    path.write_bytes(json.dumps([{"a": 1}]).encode("utf-16"))
    assert "not UTF-8" in errors_for(path)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be",
                                   "utf-32", "utf-32-le", "utf-32-be"])
def test_file_utf16_and_utf32_are_named_as_they_are(tmp_path: Path, codec: str) -> None:
    """Issue 27.13: UTF-32 (with or without a BOM, either byte order) is named UTF-32."""
    path = tmp_path / f"{codec}.json"
    path.write_bytes(json.dumps([{"a": 1}]).encode(codec))
    name = "UTF-32" if "32" in codec else "UTF-16"
    assert f"is not UTF-8 (it looks like {name}); re-save it as UTF-8 JSON" in errors_for(path)


def test_file_gzip_compressed_is_one_line_error(tmp_path: Path, good_file: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_bytes(gzip.compress(good_file.read_bytes()))
    assert "is gzip-compressed; gunzip it first" in errors_for(path)


def test_file_that_is_a_directory_is_one_line_error(tmp_path: Path) -> None:
    assert "directory" in errors_for(tmp_path)


def test_file_sha256_disk_memo_survives_the_process_and_follows_rewrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"one")
    memo = tmp_path / "memo"
    first = file_sha256(path, memo_dir=memo)
    assert first == hashlib.sha256(b"one").hexdigest()
    assert len(list(memo.glob("*.json"))) == 1
    calls: list[int] = []
    real = hashlib.sha256

    def counting_sha256(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(hashlib, "sha256", counting_sha256)
    checksums._memo.clear()  # a new process: only the disk memo is left
    seen: list[tuple[int, int]] = []
    assert file_sha256(path, lambda d, t: seen.append((d, t)), memo_dir=memo) == first
    assert seen == []  # the file was not read
    assert calls == [1]  # only the memo file's name was hashed
    calls.clear()
    path.write_bytes(b"two!")  # a rewrite: new size, mtime, ctime
    checksums._memo.clear()
    assert file_sha256(path, memo_dir=memo) == real(b"two!").hexdigest()
    assert len(calls) >= 2  # the memo name and the file itself


def test_file_sha256_disk_memo_ignores_damaged_records_and_unwritable_dirs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"data")
    memo = tmp_path / "memo"
    expected = hashlib.sha256(b"data").hexdigest()
    assert file_sha256(path, memo_dir=memo) == expected
    (record,) = memo.glob("*.json")
    record.write_text('{"key": [], "sha256": "' + "0" * 64 + '"}')  # another file's record
    checksums._memo.clear()
    assert file_sha256(path, memo_dir=memo) == expected
    record.write_text("not json")
    checksums._memo.clear()
    assert file_sha256(path, memo_dir=memo) == expected
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    checksums._memo.clear()
    assert file_sha256(path, memo_dir=blocked / "memo") == expected  # cannot write: fine
