"""Where a LongMemEval dataset comes from, and its content hash.

* :func:`resolve_dataset` turns what the user typed (``sample``, a known dataset name, or a
  filesystem path) into a :class:`DatasetSource`. Known names are fetched from the Hugging Face
  Hub (:mod:`pytest_retrieval_eval.io.hub`), trying the local cache first so a copy downloaded
  once keeps working offline.
* :func:`file_sha256` is :func:`checksums.memoised_sha256` with a dataset's one-line error.
* :func:`check_regular_file` and :func:`check_readable_file` refuse, in one line, what no
  reader should open (a FIFO, a device, a directory, a missing or unreadable file).

The file is read by :func:`.json_stream.iter_instances`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError, one_line
from ..io.checksums import memoised_sha256

__all__ = [
    "DEFAULT_REPO",
    "KNOWN",
    "SAMPLE_NAME",
    "SAMPLE_PATH",
    "DatasetSource",
    "check_readable_file",
    "check_regular_file",
    "file_sha256",
    "resolve_dataset",
    "sample_digest",
]

KNOWN: dict[str, str] = {
    "longmemeval_s": "longmemeval_s_cleaned.json",
    "longmemeval_m": "longmemeval_m_cleaned.json",
    "longmemeval_oracle": "longmemeval_oracle.json",
}
DEFAULT_REPO = "xiaowu0162/longmemeval-cleaned"
SAMPLE_NAME = "sample"
#: The bundled sample: the dataset file and, under ``cache/``, its prepped vectors.
SAMPLE_DIR = Path(__file__).parent / "sample"
SAMPLE_PATH = SAMPLE_DIR / "longmemeval_sample.json"

@dataclass(frozen=True)
class DatasetSource:
    """A resolved dataset: the name reports show and the local file holding it."""

    name: str
    path: Path


def _valid_names() -> str:
    return ", ".join([SAMPLE_NAME, *KNOWN])


def _name_for_path(path: Path) -> str:
    for name, filename in KNOWN.items():
        if path.name == filename:
            return name
    return path.stem or path.name


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular_file(path: Path, what: str = "dataset file") -> None:
    """Refuse anything but a regular file (a FIFO, ``/dev/zero``, a socket) with one line,
    before anything reads it: hashing such a path would never end."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or unreadable: the caller's own check words it
    if stat.S_ISDIR(mode):
        raise DataError(f"{what} {path} is a directory, not a file; pass the JSON file itself")
    if not stat.S_ISREG(mode):
        raise DataError(
            f"{what} {path} is {_kind(mode)}, not a regular file; save the data to a file "
            f"and pass that file"
        )


def check_readable_file(path: Path, what: str = "dataset file") -> None:
    """Refuse a missing, irregular or unreadable file with one line naming the fix."""
    if not path.exists():
        raise DataError(
            f"{what} {path} does not exist; pass an existing file or one of: {_valid_names()}"
        )
    check_regular_file(path, what)
    if not os.access(path, os.R_OK):
        raise DataError(f"{what} {path} is not readable; fix its permissions")


def _from_hub(name: str, repo: str, filename: str, offline: bool,
              offline_reason: str, deadline: float | None) -> DatasetSource:
    from ..io import hub  # a named dataset only: a path or the sample never loads it

    if deadline is None:
        deadline = hub.DEFAULT_DEADLINE
    local = hub.cached_file(repo, filename, repo_type="dataset")
    if local is not None:
        return DatasetSource(name, local)
    if hub.offline_mode(offline):
        reason = offline_reason if offline else "offline mode is on (HF_HUB_OFFLINE)"
        raise DataError(
            f"dataset {name} ({repo}/{filename}) is not in the local Hugging Face cache and "
            f"{reason}; download it once with network access, or pass the path to a "
            f"local copy"
        )
    try:
        local = hub.download_file(repo, filename, repo_type="dataset", deadline=deadline)
    except hub.HubError as exc:
        why = f"{type(exc.cause).__name__}: {one_line(exc.cause, 120)}"
        if isinstance(exc, hub.HubFileMissing):
            fix = "check --retrieval-eval-data-file, or pass the path to a local copy"
        elif isinstance(exc, hub.HubRepoMissing):
            fix = "check --retrieval-eval-data-repo, or pass the path to a local copy"
        else:
            fix = "download it once with network access, or pass the path to a local copy"
        raise DataError(
            f"dataset {name} could not be downloaded from the Hugging Face Hub repo {repo} "
            f"({filename}): {why}; {fix}"
        ) from None
    return DatasetSource(name, local)


def resolve_dataset(
    spec: str,
    *,
    repo: str = DEFAULT_REPO,
    filename: str | None = None,
    offline: bool = False,
    offline_reason: str = "offline mode is on",
    deadline: float | None = None,
) -> DatasetSource:
    """Resolve ``spec`` to a local file.

    ``"sample"`` is the bundled sample; a name in :data:`KNOWN` (or any name when ``filename``
    is given) is fetched from the dataset repo ``repo`` on the Hugging Face Hub (cache first;
    no network when ``offline`` or ``HF_HUB_OFFLINE`` is set); anything else must be the path
    of a readable file. Raises :class:`DataError` (one line) otherwise. ``offline_reason``
    says why in that line when ``offline`` kept a named dataset from being downloaded.
    ``deadline``: the Hub call's, in seconds (default :data:`.io.hub.DEFAULT_DEADLINE`).
    """
    spec = spec.strip()
    if not spec:
        raise DataError(f"dataset name is empty; pass one of: {_valid_names()}, or a file path")
    if spec == SAMPLE_NAME:
        if not SAMPLE_PATH.is_file():
            raise DataError(
                f"bundled sample dataset {SAMPLE_PATH} is missing; reinstall pytest-retrieval-eval"
            )
        return DatasetSource(SAMPLE_NAME, SAMPLE_PATH)
    if spec in KNOWN or filename is not None:
        path = Path(spec).expanduser()
        if spec not in KNOWN and path.is_file():
            return DatasetSource(_name_for_path(path), path)
        return _from_hub(spec, repo, filename or KNOWN[spec], offline, offline_reason,
                         deadline)
    path = Path(spec).expanduser()
    if not path.exists():
        raise DataError(
            f"dataset {spec!r} is neither a known name nor an existing file; pass one of: "
            f"{_valid_names()}, or the path to a LongMemEval JSON file"
        )
    check_readable_file(path, "dataset file")
    return DatasetSource(_name_for_path(path), path)


def file_sha256(
    path: Path,
    progress: Callable[[int, int], None] | None = None,
    *,
    memo_dir: Path | None = None,
    fresh: bool = False,
) -> str:
    """Hex sha256 of the dataset file (:func:`checksums.memoised_sha256`).

    Memoised per file version in-process, and on disk under ``memo_dir`` when given: hashing
    LongMemEval_M (2.7 GB) costs seconds, so every later run of the plugin reads the memo
    instead. ``progress(bytes_done, bytes_total)`` is called after each chunk when the file is
    actually read. Raises :class:`DataError` when the file cannot be read, or is not a
    regular file (checked first: a FIFO or ``/dev/zero`` would be read forever). ``fresh``
    reads the file whatever the memo says (and rewrites the memo).
    """
    check_regular_file(Path(path))
    try:
        return memoised_sha256(path, progress, memo_dir=memo_dir, fresh=fresh)
    except OSError as exc:
        raise DataError(
            f"dataset file {path} cannot be read ({exc.strerror}); pass an existing, readable file"
        ) from None


#: Bytes of each end of a dataset file that :func:`sample_digest` reads.
SAMPLE_BYTES = 1 << 20


def sample_digest(path: Path) -> str:
    """sha256 over the file's size, first and last MiB: read on every run (2 MiB) and
    compared with what the corpus recorded, so a wrong sha256 memo (edited, or copied from
    another machine) never opens another dataset's corpus."""
    check_regular_file(Path(path))
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(SAMPLE_BYTES)
            f.seek(max(0, size - SAMPLE_BYTES))
            tail = f.read(SAMPLE_BYTES)
    except OSError as exc:
        raise DataError(
            f"dataset file {path} cannot be read ({exc.strerror}); pass an existing, readable file"
        ) from None
    return hashlib.sha256(f"{size}:".encode("ascii") + head + tail).hexdigest()


