"""sha256 of files: streamed hashing, memoised by file version in-process and on disk, and the
``.sha256`` sidecar that commits a cache file.

* :func:`sha256_file` reads a file in 1 MiB chunks; nothing is memoised.
* :func:`memoised_sha256` remembers digests per **file version** (:func:`file_version`:
  resolved path, size, mtime, ctime, inode, device) in-process, and on disk under ``memo_dir``
  when given (one small JSON file per version): a rewritten, edited or replaced file is hashed
  again, an unchanged one never is.
* A cache file is committed by writing ``<file>.sha256`` (``"<hex>  <name>\\n"``) after it
  (:func:`write_sidecar`, atomic). :func:`matches_sidecar` checks a file against it; a version
  once found to match is stamped ``<file>.verified`` (:func:`write_stamp`), so later processes
  trust the stamp instead of rehashing until something writes to the file, as git trusts its
  index: the stamp records size, mtime and ctime in ns, inode, device and, for a SQLite file,
  its change counter (any write moves the ctime, which user space cannot set back; any
  write through SQLite moves the counter). What a stamp cannot see is a byte that changes
  beneath the filesystem (bit rot): only a rehash catches that.

Every function raises plain ``OSError``/``ValueError``; callers turn them into their own
one-line errors.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import socket
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "MEMO_DIR",
    "SIDECAR_SUFFIX",
    "SQLITE_MAGIC",
    "VERIFIED_SUFFIX",
    "FileVersion",
    "check_committed",
    "commit_file",
    "file_mode",
    "file_version",
    "known_sha256",
    "left_by_dead_builder",
    "matches_sidecar",
    "memoised_paths",
    "memoised_sha256",
    "owner_is_dead",
    "owner_tag",
    "read_sidecar",
    "remove_partials",
    "sha256_file",
    "share_as_umask",
    "sidecar_path",
    "sqlite_change_counter",
    "sqlite_header",
    "stamp_matches",
    "temp_path",
    "write_sidecar",
    "write_stamp",
]

#: Where :func:`memoised_sha256`'s on-disk memo lives under a cache root.
MEMO_DIR = "sha256"
#: Suffix of the sidecar holding a cache file's sha256: its commit mark.
SIDECAR_SUFFIX = ".sha256"
#: Suffix of the stamp that vouches for one version of a checksummed cache file.
VERIFIED_SUFFIX = ".verified"

_CHUNK = 1 << 20
_HEX = frozenset("0123456789abcdef")

FileVersion = tuple[str, int, int, int, int, int]
"""(resolved path, size, mtime_ns, ctime_ns, inode, device): one version of a file."""

_memo: dict[FileVersion, str] = {}
_memo_lock = threading.Lock()
_tmp_counter = itertools.count()


def sha256_file(path: Path, progress: Callable[[int, int], None] | None = None) -> str:
    """Hex sha256 of the file's bytes, streamed. ``progress(bytes_done, bytes_total)`` is called
    after each chunk. Raises ``OSError`` when the file cannot be read."""
    digest = hashlib.sha256()
    done = 0
    with open(path, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        while n := f.readinto(buf):
            digest.update(view[:n])
            done += n
            if progress is not None:
                progress(done, total)
    return digest.hexdigest()


def file_version(path: Path, st: os.stat_result | None = None) -> FileVersion:
    """What identifies one version of a file without reading it: a rewrite, an in-place edit
    (even one that restores the mtime: the ctime moves) or a replacement changes it.

    ``st`` is the file's stat when the caller has one (else it is taken now: ``OSError``).
    """
    path = Path(path)
    if st is None:
        st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
            st.st_dev)


def _is_hex_digest(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def _memo_file(memo_dir: Path, version: FileVersion) -> Path:
    name = hashlib.sha256(json.dumps(list(version), allow_nan=False).encode("utf-8")).hexdigest()
    return memo_dir / f"{name}.json"


def _read_disk_memo(memo_dir: Path, version: FileVersion) -> str | None:
    try:
        record = json.loads(_memo_file(memo_dir, version).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != list(version):
        return None
    digest = record.get("sha256")
    return digest if _is_hex_digest(digest) else None


def _write_disk_memo(memo_dir: Path, version: FileVersion, digest: str) -> None:
    """Best effort: a read-only or full cache only costs the next run a rehash."""
    target = _memo_file(memo_dir, version)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        memo_dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"key": list(version), "sha256": digest},
                                  allow_nan=False), encoding="utf-8")
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _memoised(
    path: Path,
    st: os.stat_result,
    progress: Callable[[int, int], None] | None,
    memo_dir: Path | None,
    fresh: bool = False,
) -> str:
    version = file_version(path, st)
    with _memo_lock:
        digest = None if fresh else _memo.get(version)
    if digest is not None and memo_dir is not None \
            and not _memo_file(Path(memo_dir), version).exists():
        # Known in this process from another cache's hashing: this cache's memo records it
        # too (memoised_paths reads where a cache last saw a content).
        _write_disk_memo(Path(memo_dir), version, digest)
    if digest is None and memo_dir is not None and not fresh:
        digest = _read_disk_memo(Path(memo_dir), version)
    if digest is not None:
        with _memo_lock:
            _memo[version] = digest
        return digest
    digest = sha256_file(path, progress)
    with _memo_lock:
        _memo[version] = digest
    if memo_dir is not None:
        _write_disk_memo(Path(memo_dir), version, digest)
    return digest


def memoised_paths(memo_dir: Path, digest: str) -> list[Path]:
    """Files whose on-disk memo under ``memo_dir`` records ``digest`` and whose current
    version is still the one recorded (where a cache's files of that content were last
    seen); sorted. Reads only the small memo records; unreadable ones are skipped."""
    found: set[Path] = set()
    try:
        names = os.listdir(memo_dir)
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            record = json.loads((Path(memo_dir) / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("sha256") != digest:
            continue
        key = record.get("key")
        if not isinstance(key, list) or not key or not isinstance(key[0], str):
            continue
        path = Path(key[0])
        try:
            if list(file_version(path)) == key:
                found.add(path)
        except OSError:
            continue
    return sorted(found)


def known_sha256(path: Path, memo_dir: Path | None) -> tuple[str, bool] | None:
    """The memoised digest of ``path``'s current version without reading the file:
    ``(digest, from_disk)``, ``from_disk`` when only the on-disk memo (which anyone can
    edit) vouches for it; None when the file would have to be read. ``OSError`` if it
    cannot be stat'ed."""
    version = file_version(Path(path))
    with _memo_lock:
        digest = _memo.get(version)
    if digest is not None:
        return digest, False
    if memo_dir is not None:
        digest = _read_disk_memo(Path(memo_dir), version)
        if digest is not None:
            return digest, True
    return None


def memoised_sha256(
    path: Path,
    progress: Callable[[int, int], None] | None = None,
    *,
    memo_dir: Path | None = None,
    fresh: bool = False,
) -> str:
    """:func:`sha256_file`, memoised per :func:`file_version` in-process, and on disk under
    ``memo_dir`` when given. ``progress`` is called only when the file is actually read.
    ``fresh`` reads the file whatever the memos say, and rewrites them.
    Raises ``OSError`` when the file cannot be read."""
    path = Path(path)
    return _memoised(path, path.stat(), progress, memo_dir, fresh)


def sidecar_path(path: Path) -> Path:
    """``<path>.sha256``: the file's sha256, written after it (the commit mark)."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def read_sidecar(path: Path) -> str:
    """The sha256 (lower-case hex) that ``path``'s sidecar records.

    Raises ``FileNotFoundError`` when there is no sidecar (the file is not committed), another
    ``OSError`` or a ``ValueError`` when it cannot be read.
    """
    words = sidecar_path(path).read_text(encoding="ascii").split()
    if not words:
        raise ValueError(f"{sidecar_path(path)} is empty")
    return words[0].lower()


def write_sidecar(
    path: Path, digest: str, *, tmp: Path | None = None, sync: bool = True
) -> None:
    """Commit ``path``: write ``<path>.sha256`` holding ``digest`` atomically (temp file, then
    ``os.replace``; fsynced first when ``sync``). ``tmp`` names the temp file (default
    ``<path>.sha256.tmp-<host>-<pid>-<n>``); it is removed when the write fails."""
    path = Path(path)
    side = sidecar_path(path)
    if tmp is None:
        tmp = side.with_name(f"{side.name}.tmp-{owner_tag()}-{next(_tmp_counter)}")
    try:
        with open(tmp, "w", encoding="ascii") as f:
            f.write(f"{digest}  {path.name}\n")
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, side)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


#: The first 16 bytes of every SQLite database file (sqlite.org/fileformat.html, 1.3).
SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_header(path: Path, size: int) -> bytes | None:
    """The first ``size`` bytes of a SQLite file's header (page 1, which every open of the
    database reads), or None when ``path`` is no SQLite file or cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(size)
    except OSError:
        return None
    if len(head) < size or not head.startswith(SQLITE_MAGIC):
        return None
    return head


def sqlite_change_counter(path: Path) -> int | None:
    """SQLite's file change counter (header bytes 24..27, big-endian; bumped by every
    transaction that writes the file), or None when ``path`` is no SQLite file or cannot be
    read. Reads the first 28 bytes only."""
    head = sqlite_header(path, 28)
    return None if head is None else int.from_bytes(head[24:28], "big")


def _stamp_of(path: Path, st: os.stat_result) -> list[int | None]:
    # The file version less its path (the stamp lies beside the file it vouches for), and a
    # SQLite file's change counter: what git's index records of a file, and one more field
    # that any write through SQLite moves.
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev,
            sqlite_change_counter(path)]


def stamp_matches(path: Path, st: os.stat_result, digest: str, note: str = "") -> bool:
    """True when ``<path>.verified`` vouches that ``path`` as of ``st`` hashed to ``digest``
    (and records ``note``: what else was checked of that version, e.g. a store's ids).
    Reads the stamp and 28 bytes of ``path``; never hashes it."""
    path = Path(path)
    try:
        stamp = json.loads(path.with_name(path.name + VERIFIED_SUFFIX).read_text("ascii"))
    except (OSError, ValueError):
        return False
    wanted: dict[str, object] = {"stat": _stamp_of(path, st), "sha256": digest}
    if note:
        wanted["note"] = note
    return bool(stamp == wanted)


def write_stamp(path: Path, st: os.stat_result, digest: str, note: str = "") -> None:
    """Record in ``<path>.verified`` that ``path`` as of ``st`` (taken before hashing) hashed to
    ``digest``; ``note`` records what else the caller checked of that version.

    Best effort: a torn stamp is not JSON, and a missing one only costs a rehash.
    """
    path = Path(path)
    record: dict[str, object] = {"stat": _stamp_of(path, st), "sha256": digest}
    if note:
        record["note"] = note
    with contextlib.suppress(OSError):
        path.with_name(path.name + VERIFIED_SUFFIX).write_text(
            json.dumps(record, allow_nan=False), encoding="ascii")


def matches_sidecar(path: Path, *, trust_stamp: bool = True, stamp: bool = True) -> bool:
    """True when ``path`` matches the sha256 in its sidecar (a flipped byte never passes);
    False when it does not, or either file cannot be read.

    With ``trust_stamp``, a version stamped ``<path>.verified`` with that digest is trusted
    without reading the file (:func:`stamp_matches`: a stamp vouches for size, times, inode
    and a SQLite file's change counter; it cannot see bit rot beneath the filesystem);
    otherwise the file is hashed (once per version in this
    process, :func:`memoised_sha256`) and a match is stamped (unless ``stamp`` is False:
    ``--co`` and the other read-only runs write nothing).
    """
    path = Path(path)
    try:
        expected = read_sidecar(path)
        st = path.stat()
    except (OSError, ValueError):
        return False
    if trust_stamp and stamp_matches(path, st, expected):
        return True
    try:
        actual = _memoised(path, st, None, None)
    except OSError:
        return False
    if actual != expected:
        return False
    if stamp:
        write_stamp(path, st, actual)
    return True


def temp_path(target: Path) -> Path:
    """A private temp name beside ``target`` (``.<stem>.<pid>.<random>.tmp``) for building it;
    :func:`remove_partials` finds such names after a killed build."""
    target = Path(target)
    return target.with_name(f".{target.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def remove_partials(target: Path) -> None:
    """Delete what killed builds of ``target`` left (:func:`temp_path` files and their sidecar
    temps). Call it holding the build lock, so no live builder owns one."""
    target = Path(target)
    for leftover in target.parent.glob(f".{target.stem}.*.tmp*"):
        with contextlib.suppress(OSError):
            leftover.unlink()


def file_mode() -> int:
    """The mode a plain new file gets under this process's umask: ``0o666 & ~umask``.

    Read from ``/proc/self/status`` where Linux gives it, else by setting and restoring the
    umask (not thread-safe, but only on systems without that file)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def share_as_umask(path: Path | str) -> None:
    """Give ``path`` the mode the umask asks for (:func:`file_mode`). Temp files from
    ``mkstemp`` are 0600 and SQLite creates 0644 whatever the umask: a report or cache file
    must be as readable as any file the user writes (a CI artifact step run as another user
    reads it)."""
    os.chmod(path, file_mode())


def commit_file(tmp: Path, target: Path) -> None:
    """Put a finished ``tmp`` in place as ``target`` and commit it: fsync, hash, drop any old
    sidecar (it must never vouch for the new file), rename, write the sidecar, and stamp the
    new version verified, so the next process need not hash it again. A kill part-way leaves
    only names :func:`remove_partials` sweeps (the sidecar's temp is named after ``tmp``)."""
    tmp, target = Path(tmp), Path(target)
    share_as_umask(tmp)
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    digest = sha256_file(tmp)
    sidecar_path(target).unlink(missing_ok=True)
    os.replace(tmp, target)
    write_sidecar(target, digest, tmp=sidecar_path(tmp))
    write_stamp(target, target.stat(), digest)  # after the rename: it moves the ctime


_OWNER_RE = re.compile(r"\.tmp-(?:([A-Za-z0-9]+)-)?(\d+)-\d+$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"


def owner_tag() -> str:
    """``<host>-<pid>``: who writes a ``*.tmp-<host>-<pid>-<n>`` temp file, so a later
    writer can tell a dead builder's leftovers (:func:`left_by_dead_builder`)."""
    return f"{_host()}-{os.getpid()}"


def left_by_dead_builder(name: str) -> bool:
    """True when temp file ``name`` (``*.tmp-<host>-<pid>-<n>``) was written by a process of
    this host that is no longer alive. False when its owner lives (or a reused pid makes it
    look alive), is on another host, or is not named: those are left to an age rule."""
    match = _OWNER_RE.search(name)
    return match is not None and owner_is_dead(match.group(1), int(match.group(2)))


def owner_is_dead(host: str | None, pid: int) -> bool:
    """True when ``host`` is this host and no process ``pid`` lives (never for this process,
    another host's, or a live one, another user's included)."""
    if host != _host() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def read_committed(path: Path, verify: str = "stamp") -> bytes | None:
    """The bytes of a file committed by :func:`commit_file`, or None: absent, or not
    matching its sidecar (a version its ``.verified`` stamp vouches for is trusted under
    ``verify="stamp"``, as stores are; else the file is rehashed, and a match stamped). A file
    that fails is removed, with its sidecar and stamp (its maker writes it again)."""
    path = Path(path)
    if not check_committed(path, verify):
        return None
    try:
        return path.read_bytes()
    except OSError:
        return None


def check_committed(path: Path, verify: str = "stamp", size: int | None = None, *,
                    note: str = "", accept: Callable[[Path], bool] | None = None,
                    drop: bool = True) -> bool:
    """Whether a file committed by :func:`commit_file` may be read, without reading it when
    its ``.verified`` stamp vouches for its version (``verify="stamp"``); else rehashed,
    passed to ``accept`` (what else the caller checks of a version that matches its sidecar,
    e.g. a store's ids), and a match stamped with ``note`` (what that check was: a stamp
    recording another note does not vouch). A file that fails (or is not ``size`` bytes,
    when given) is removed with its sidecar and stamp (its maker writes it again), unless
    ``drop`` is False (the caller decides); an absent one is False."""
    path = Path(path)
    try:
        st = path.stat()
        expected = read_sidecar(path)
    except (OSError, ValueError):
        return False
    if size is not None and st.st_size != size:
        if drop:
            drop_committed(path)
        return False
    if verify == "stamp" and stamp_matches(path, st, expected, note):
        return True
    if not matches_sidecar(path, trust_stamp=False, stamp=False) or (
            accept is not None and not accept(path)):
        if drop:
            drop_committed(path)
        return False
    write_stamp(path, st, expected, note)
    return True


def write_committed(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` through a temp file and :func:`commit_file` it; False when
    it cannot be written (best effort: a cache file missing only costs its rebuild)."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        commit_file(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False


def drop_committed(path: Path) -> None:
    """Remove a committed file with its sidecar and stamp (what is missing is skipped)."""
    path = Path(path)
    for part in (path, sidecar_path(path), path.with_name(path.name + VERIFIED_SUFFIX)):
        with contextlib.suppress(OSError):
            os.remove(part)
