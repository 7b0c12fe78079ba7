"""Prepared caches shared through the Hugging Face Hub: ``retrieval-eval cache push/pull``
and the plugin's ``--retrieval-eval-cache-repo``.

A cache travels in a Hub **dataset** repository (``repo_type="dataset"``: the Hub's kind for
data files; a model repo would also work but the Hub warns about Parquet files there). Its
files mirror the cache root, so a pull is a checked copy::

    vectors/<fingerprint>/manifest.json           the model's description (cache.py)
    vectors/<fingerprint>/manifest.json.sha256    made by push: the manifest's own check
    vectors/<fingerprint>/shard-*.parquet         immutable shards, names kept
    vectors/<fingerprint>/shard-*.parquet.sha256  their sidecars
    corpus/<dataset sha256>.sqlite(.sha256)       with ``push --include-corpus``

* **push** verifies every local shard against its sidecar (a corrupt cache is never
  published), creates the repo if needed (``HfApi.create_repo``) and uploads, in one commit
  (``HfApi.create_commit``), the files the repo lacks. Shards are opened before anything is
  sent, so a compaction running meanwhile cannot pull a file from under the upload.
* **pull** lists the repo at one commit (``HfApi.dataset_info`` then ``list_repo_tree``), and
  fetches only the shards the local cache does not hold by name. Each file is downloaded
  with huggingface-hub's ``get_hf_file_metadata`` (HEAD) and a streamed GET on its session
  (:class:`~pytest_retrieval_eval.io.hub_transfer.Fetcher`: never past the listed size)
  into a part file under ``<cache>/hub-staging/``, which a later pull resumes with an HTTP
  Range request (huggingface-hub >= 1.x deletes ``hf_hub_download``'s own partial files, so
  a killed download would start over). Every file is checked against the sidecar it came with
  on arrival; only when all have arrived and passed are they committed
  (:meth:`VectorCache.adopt`: manifest first, rename, then the sidecar as commit mark). An
  error leaves the local cache exactly as it was.

Every Hub call may take ``deadline`` seconds in all (:mod:`..io.hub_deadline`).
Failures are one line each (:class:`~pytest_retrieval_eval.errors.CacheHubError`): offline
(``HF_HUB_OFFLINE``) or unreachable, past the deadline, not a Hub (a web page), a missing
repo, a refused token (401/403), a repo holding another model's vectors, a file past its
listed size or failing its checksum.

The Hub is reached at ``$HF_ENDPOINT`` as the environment says *now* (huggingface-hub reads
it once, at import), with the token huggingface-hub finds (``HF_TOKEN`` or ``hf auth
login``). ``huggingface_hub`` is imported only when a push or pull actually runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from filelock import FileLock, Timeout

from ..errors import CacheError, CacheHubError, ModelError, one_line
from ..io.checksums import SIDECAR_SUFFIX, commit_file, matches_sidecar, read_sidecar
from ..io.hub_deadline import DEFAULT_DEADLINE
from ..io.hub_transfer import (
    REPO_TYPE,
    Fetcher,
    HubConnection,
    connect,
    head_commit,
    remote_files,
    valid_repo_id,
)
from ..io.user_files import parse_json, read_small
from . import model_files
from .cache import FORMAT_VERSION, VectorCache, list_models
from .shards import MANIFEST_LIMIT

__all__ = [
    "STAGING_DIR",
    "PullResult",
    "PushResult",
    "pull",
    "push",
    "valid_repo_id",
]

#: Folder under the cache root where pulls keep their part files (resumable) until commit.
STAGING_DIR = "hub-staging"

Progress = Callable[[str, int, "int | None"], None]

_FINGERPRINT_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.-]*$")
_SHARD_RE = re.compile(r"^shard-[0-9A-Za-z_.-]+\.parquet$")
_CORPUS_RE = re.compile(r"^[0-9a-f]{64}\.sqlite$")


@dataclass(frozen=True)
class PushResult:
    """What one push did."""

    repo: str
    model: str
    fingerprint: str
    uploaded: int  # files sent in this commit
    already: int  # files the repo held already
    bytes: int  # bytes of the files sent
    commit: str | None  # the new commit, None when nothing was sent
    seconds: float


@dataclass(frozen=True)
class PullResult:
    """What one pull did."""

    repo: str
    model: str
    fingerprint: str
    fetched: int  # shards committed now
    already: int  # shards the local cache held already
    bytes: int  # bytes downloaded now (resumed parts count only their new bytes)
    resumed: int  # bytes that an earlier, interrupted pull had already fetched
    seconds: float
    corpus_files: int = 0  # corpus files committed now (include_corpus)


# --------------------------------------------------------------------------- the repo


def _remote_models(files: Mapping[str, int]) -> dict[str, list[str]]:
    """fingerprint -> its committed shard names (with a sidecar), for every
    ``vectors/<fingerprint>/manifest.json`` in the listing."""
    models: dict[str, list[str]] = {}
    for path in files:
        parts = path.split("/")
        if len(parts) == 3 and parts[0] == "vectors" and parts[2] == "manifest.json" \
                and _FINGERPRINT_RE.match(parts[1]):
            models[parts[1]] = []
    for path in sorted(files):
        parts = path.split("/")
        if (len(parts) == 3 and parts[0] == "vectors" and parts[1] in models
                and _SHARD_RE.match(parts[2]) and path + SIDECAR_SUFFIX in files):
            models[parts[1]].append(parts[2])
    return models


def _is_named(info: Mapping[str, Any], model: str) -> bool:
    """Whether ``model`` names the model of ``info``: its name, a local model folder whose
    files are the ones ``info`` was made with (by their hashes, never by the folder's name
    alone: ``exp1/model`` and ``exp2/model`` differ), or a fingerprint prefix of at least 6
    characters."""
    folder = Path(model).expanduser()
    if folder.is_dir() and info.get("model_sha256") and info.get("tokenizer_sha256"):
        try:
            files = model_files.files_here(model)
        except ModelError:
            files = None  # not a model folder: the name decides, as before
        if files is not None:
            return (files.model_sha256, files.tokenizer_sha256) == (
                info.get("model_sha256"), info.get("tokenizer_sha256"))
    names = {model, folder.resolve().name} if folder.is_dir() else {model}
    fingerprint = str(info.get("fingerprint", ""))
    return info.get("name") in names or (len(model) >= 6 and fingerprint.startswith(model))


def _describe(info: Mapping[str, Any]) -> str:
    return f"{info.get('name', '?')} (fingerprint {str(info.get('fingerprint', '?'))[:12]})"


def _staging(root: Path, repo: str) -> Path:
    return Path(root) / STAGING_DIR / repo.replace("/", "--")


@contextlib.contextmanager
def _pull_turn(staging: Path, hub: HubConnection, progress: Progress | None) -> Iterator[None]:
    """One pull of a repo into a cache at a time (they would share part files)."""
    try:
        staging.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(staging / ".lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if progress is not None:
                progress(f"waiting for another pull of {hub.repo}", 0, None)
            lock.acquire(timeout=-1)
    except OSError as exc:
        raise hub.error(f"staging folder {staging} cannot be written ({exc.strerror or exc}); "
                        f"check permissions and free disk space") from None
    try:
        yield
    finally:
        lock.release()


# --------------------------------------------------------------------------- pull


def _manifest(fetcher: Fetcher, files: Mapping[str, int], fingerprint: str) -> dict[str, Any]:
    """The repo's manifest of ``fingerprint``, checked against its sidecar when it has one."""
    path = f"vectors/{fingerprint}/manifest.json"
    hub = fetcher.hub
    if files.get(path, 0) > MANIFEST_LIMIT:  # the listing's size: refused before any byte
        raise hub.error(f"{path} holds {files[path]:,} bytes, more than a manifest may "
                        f"({MANIFEST_LIMIT:,}); push that model again from a good cache")
    if path + SIDECAR_SUFFIX in files:
        part = fetcher.fetch_checked(path, fetcher.fetch_digest(path + SIDECAR_SUFFIX), False)
    else:
        part = fetcher.fetch(path, counted=False)
    try:
        info = parse_json(read_small(part, MANIFEST_LIMIT))
    except (OSError, ValueError):
        info = None
    finally:
        part.unlink(missing_ok=True)
    if not isinstance(info, dict):
        raise hub.error(f"{path} is not a JSON object; push that model again from a good cache")
    if str(info.get("fingerprint", "")) != fingerprint:
        raise hub.error(
            f"{path} describes model {_describe(info)}, not the fingerprint its folder names "
            f"({fingerprint[:12]}); push that model again from a good cache")
    dim = info.get("dim")
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise hub.error(f"{path} gives no valid dim ({dim!r}); push that model again")
    fmt = info.get("format", FORMAT_VERSION)
    if isinstance(fmt, int) and fmt > FORMAT_VERSION:
        raise hub.error(
            f"the vectors there have cache format {fmt}, newer than this pytest-retrieval-eval "
            f"reads ({FORMAT_VERSION}); upgrade pytest-retrieval-eval")
    return info


def _choose_remote(hub: HubConnection, fetcher: Fetcher, files: Mapping[str, int],
                   models: Mapping[str, list[str]], fingerprint: str | None,
                   model: str | None, model_flag: str) -> dict[str, Any]:
    if not models:
        raise hub.error(
            "the repo holds no vector cache (no vectors/<fingerprint>/manifest.json); publish "
            f"one with `retrieval-eval cache push --repo {hub.repo}`")
    if fingerprint is not None and fingerprint in models:
        return _manifest(fetcher, files, fingerprint)
    infos = [_manifest(fetcher, files, fp) for fp in sorted(models)]
    held = ", ".join(_describe(i) for i in infos)
    if fingerprint is not None:
        wanted = f"{model} (fingerprint {fingerprint[:12]})" if model else fingerprint[:12]
        names = " or ".join(f"{model_flag}={i.get('name', '?')}" for i in infos)
        raise hub.error(
            f"the repo holds vectors of {held}, not of {wanted}; use that model "
            f"({names}), or push the vectors of {model or 'yours'} there first")
    if model is not None:
        named = [i for i in infos if _is_named(i, model)]
        if not named:
            raise hub.error(f"the repo holds vectors of {held}, not of model {model}; name "
                            f"one of those with {model_flag}, or push {model}'s vectors there")
        infos = named
    if len(infos) > 1:
        raise hub.error(f"the repo holds vectors of several models ({held}); name one with "
                        f"{model_flag}")
    return infos[0]


def pull(
    repo: str,
    root: Path,
    *,
    fingerprint: str | None = None,
    model: str | None = None,
    include_corpus: bool = False,
    progress: Progress | None = None,
    model_flag: str = "--model",
    deadline: float = DEFAULT_DEADLINE,
    deadline_flag: str = "--deadline",
) -> PullResult:
    """Fetch what the cache at ``root`` lacks of one model's vectors in Hub repo ``repo``.

    The model is ``fingerprint`` when given (the model lane knows it), else the one named
    ``model`` (its name, or a fingerprint prefix of at least 6 characters), else the repo's
    only model. ``include_corpus`` also fetches the repo's corpus files that ``root`` lacks.
    Each Hub call (a listing, one file's download) may take ``deadline`` seconds in all
    (``deadline_flag`` names the option in the line that says it ran out).
    Raises :class:`CacheHubError` (one line); the local cache is then as it was.
    """
    started = time.perf_counter()
    hub = connect("pull", repo, deadline, deadline_flag)
    root = Path(root)
    staging = _staging(root, repo)
    with _pull_turn(staging, hub, progress):
        commit = head_commit(hub)
        files = remote_files(hub, commit)
        models = _remote_models(files)
        meta_fetcher = Fetcher(hub, commit, staging, None, 0, files)
        info = _choose_remote(hub, meta_fetcher, files, models, fingerprint, model, model_flag)
        fp = str(info["fingerprint"])
        try:
            cache = VectorCache(root, fp, int(info["dim"]), info)
        except CacheError as exc:
            raise hub.error(f"{one_line(exc)}") from None
        local = {p.name for p in cache.own_shards()}
        wanted = [name for name in models[fp] if name not in local]
        corpus = _corpus_wanted(root, files) if include_corpus else []
        paths = [f"vectors/{fp}/{name}" for name in wanted] + corpus
        total = sum(files[p] for p in paths)
        _drop_stale_parts(staging, paths)
        fetcher = Fetcher(hub, commit, staging, progress, total, files)
        staged: list[tuple[Path, str]] = []
        for path in paths:
            digest = fetcher.fetch_digest(path + SIDECAR_SUFFIX)
            staged.append((fetcher.fetch_checked(path, digest), digest))
        if progress is not None and total:
            progress(fetcher.label, total // 1000, total // 1000)
        n_shards = len(wanted)
        try:
            cache.adopt([(part, name, digest) for name, (part, digest)
                         in zip(wanted, staged[:n_shards], strict=True)])
        except CacheError as exc:
            for part, _digest in staged:
                part.unlink(missing_ok=True)
            raise hub.error(f"a shard of model {_describe(info)} is unusable "
                            f"({one_line(exc, 400)}); nothing was committed; push that model "
                            f"again from a good cache") from None
        for path, (part, _digest) in zip(corpus, staged[n_shards:], strict=True):
            _commit_corpus(hub, root, path, part)
    return PullResult(repo=repo, model=str(info.get("name", fp[:12])), fingerprint=fp,
                      fetched=len(wanted), corpus_files=len(corpus),
                      already=len(models[fp]) - len(wanted),
                      bytes=fetcher.downloaded, resumed=fetcher.resumed,
                      seconds=time.perf_counter() - started)


def _drop_stale_parts(staging: Path, paths: Sequence[str]) -> None:
    """Remove part files that no path of this pull can resume (an earlier pull's, of files
    this cache has since got, or that the repo no longer holds)."""
    prefixes = tuple(path.replace("/", "--") + "." for path in paths)
    for part in staging.glob("*.part"):
        if not part.name.startswith(prefixes):
            part.unlink(missing_ok=True)


def _corpus_wanted(root: Path, files: Mapping[str, int]) -> list[str]:
    wanted = []
    for path in sorted(files):
        parts = path.split("/")
        if (len(parts) == 2 and parts[0] == "corpus" and _CORPUS_RE.match(parts[1])
                and path + SIDECAR_SUFFIX in files
                and not matches_sidecar(Path(root) / "corpus" / parts[1])):
            wanted.append(path)
    return wanted


def _commit_corpus(hub: HubConnection, root: Path, path: str, part: Path) -> None:
    target = Path(root) / path
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{target}.lock"):  # the lock ingest.load_corpus builds under
            if matches_sidecar(target):
                part.unlink(missing_ok=True)
                return
            commit_file(part, target)
    except OSError as exc:
        raise hub.error(f"corpus file {target} cannot be written ({exc.strerror or exc}); "
                        f"check permissions and free disk space") from None


# --------------------------------------------------------------------------- push


def _choose_local(root: Path, model: str | None, keys: Sequence[str] | None,
                  data: str | None) -> dict[str, Any]:
    from .cache import models_holding

    models = models_holding([root], keys) if keys is not None else list_models([root])
    where = f"cache {root}" + (f" for dataset {data}" if data else "")
    if not models:
        if keys is not None:
            raise CacheHubError(
                f"cache push: no model's vectors in {where} cover every text; run "
                f"`retrieval-eval prep --data {data} --cache {root}` first")
        raise CacheHubError(
            f"cache push: {where} holds no vectors; make some with `retrieval-eval prep`")
    if model is not None:
        named = [m for m in models if _is_named(m, model)]
        if not named:
            held = ", ".join(_describe(m) for m in models)
            raise CacheHubError(f"cache push: {where} holds vectors of {held}, not of model "
                                f"{model}; name one of those with --model")
        models = named
    if len(models) > 1:
        held = ", ".join(_describe(m) for m in models)
        raise CacheHubError(f"cache push: {where} holds vectors of several models ({held}); "
                            f"name one with --model")
    return {k: v for k, v in models[0].items() if k not in ("roots", "vectors")}


def _open_shards(cache: VectorCache) -> list[tuple[str, BinaryIO]]:
    """Every committed shard opened now (a later compaction cannot take it away) and checked
    against its sidecar; a corrupt one is a CacheError naming it."""
    for _attempt in range(20):
        opened: list[tuple[str, BinaryIO]] = []
        try:
            for path in cache.own_shards():
                handle: BinaryIO = path.open("rb")
                opened.append((path.name, handle))
                expected = read_sidecar(path)
                digest = hashlib.sha256()
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
                handle.seek(0)
                if digest.hexdigest() != expected:
                    raise CacheError(
                        f"cache push: local shard {path} does not match its .sha256 sidecar; "
                        f"it is never published: run `retrieval-eval prep` for that model "
                        f"(it quarantines the shard and re-embeds what it held), then push")
            return opened
        except FileNotFoundError:  # compacted away between listing and opening: list again
            for _name, handle in opened:
                handle.close()
        except BaseException:
            for _name, handle in opened:
                handle.close()
            raise
    raise CacheError(f"cache push: {cache.directory} keeps changing; push when no prep is "
                     f"running")


def push(
    repo: str,
    root: Path,
    *,
    model: str | None = None,
    keys: Sequence[str] | None = None,
    data: str | None = None,
    corpus_file: Path | None = None,
    private: bool = False,
    deadline: float = DEFAULT_DEADLINE,
) -> PushResult:
    """Publish one model's vectors of the cache at ``root`` to Hub repo ``repo``.

    The model is the one named ``model`` (name, local folder, or fingerprint prefix), else the
    one whose vectors cover ``keys`` (a dataset's texts), else the cache's only model.
    ``corpus_file`` (a committed corpus file) is uploaded too. The repo is created (private
    when ``private``) if it does not exist. Only files the repo lacks are sent, in one commit.
    Each Hub call (the commit of every file included) may take ``deadline`` seconds in all.
    """
    started = time.perf_counter()
    root = Path(root)
    info = _choose_local(root, model, keys, data)
    fp = str(info["fingerprint"])
    directory = root / "vectors" / fp
    if corpus_file is not None and not matches_sidecar(corpus_file, trust_stamp=False):
        raise CacheError(f"cache push: corpus file {corpus_file} does not match its .sha256 "
                         f"sidecar; run the prep again to rebuild it, then push")
    hub = connect("push", repo, deadline)
    opened = _open_shards(VectorCache(root, fp, int(info["dim"]), info))
    try:
        with hub.calls("creating"):
            extra: dict[str, Any] = {"private": True} if private else {}
            hub.api.create_repo(hub.repo, repo_type=REPO_TYPE, exist_ok=True, **extra)
        commit = head_commit(hub)
        files = remote_files(hub, commit)
        if f"vectors/{fp}/manifest.json" in files:  # never mix two models under one name
            with tempfile.TemporaryDirectory(prefix=".push-", dir=root) as tmp:
                remote = _manifest(Fetcher(hub, commit, Path(tmp), None, 0, files), files,
                                   fp)
            if remote.get("dim") != info.get("dim"):
                raise hub.error(f"the repo's vectors/{fp[:12]}... hold dim "
                                f"{remote.get('dim')}, this cache {info.get('dim')}; push "
                                f"to another repo")
        manifest = (directory / "manifest.json").read_bytes()
        side = f"{hashlib.sha256(manifest).hexdigest()}  manifest.json\n".encode("ascii")
        payload: list[tuple[str, bytes | BinaryIO, int]] = [
            (f"vectors/{fp}/manifest.json", manifest, len(manifest)),
            (f"vectors/{fp}/manifest.json{SIDECAR_SUFFIX}", side, len(side)),
        ]
        for name, handle in opened:
            sidecar = (directory / (name + SIDECAR_SUFFIX)).read_bytes()
            payload.append((f"vectors/{fp}/{name}", handle, os.fstat(handle.fileno()).st_size))
            payload.append((f"vectors/{fp}/{name}{SIDECAR_SUFFIX}", sidecar, len(sidecar)))
        if corpus_file is not None:
            body: BinaryIO = corpus_file.open("rb")
            opened.append((corpus_file.name, body))
            side_bytes = Path(str(corpus_file) + SIDECAR_SUFFIX).read_bytes()
            payload.append((f"corpus/{corpus_file.name}", body, os.fstat(body.fileno()).st_size))
            payload.append((f"corpus/{corpus_file.name}{SIDECAR_SUFFIX}", side_bytes,
                            len(side_bytes)))
        todo = [(p, body, size) for p, body, size in payload if files.get(p) != size]
        oid = None
        if todo:
            from huggingface_hub import CommitOperationAdd

            operations = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=body)
                          for p, body, _size in todo]
            message = (f"retrieval-eval cache push: {info.get('name', fp[:12])} "
                       f"(fingerprint {fp[:12]}), {len(todo)} file(s)")
            with hub.calls("committing to"):
                result = hub.api.create_commit(hub.repo, operations, commit_message=message,
                                               repo_type=REPO_TYPE)
            oid = str(getattr(result, "oid", "") or "") or None
    finally:
        for _name, handle in opened:
            handle.close()
    return PushResult(repo=repo, model=str(info.get("name", fp[:12])), fingerprint=fp,
                      uploaded=len(todo), already=len(payload) - len(todo),
                      bytes=sum(size for _p, _b, size in todo), commit=oid,
                      seconds=time.perf_counter() - started)
