"""The Hub side of ``retrieval-eval cache push/pull``
(:mod:`pytest_retrieval_eval.vectors.hub_sync`): one connection with one-line errors, the repo
listed at one commit, and resumable, checked downloads.

* :func:`connect` refuses offline mode (``HF_HUB_OFFLINE`` as set *now*) and a malformed
  repo id before any request, and talks to ``$HF_ENDPOINT`` as set now (huggingface-hub
  reads it once, at import) with the token huggingface-hub finds.
* :meth:`HubConnection.calls` turns any failure of the library into one
  :class:`~pytest_retrieval_eval.errors.CacheHubError` line: offline, unreachable, a missing
  repo (404, or 401 without a token), a refused token (401), no access (403), another HTTP
  status.
* Every Hub call runs under an overall deadline (:func:`.hub_deadline.bounded`, the
  connection's ``deadline`` seconds, each call its own): after it, one line names the
  endpoint and what was being done.
* :class:`Fetcher` downloads one file with huggingface-hub's ``get_hf_file_metadata`` (HEAD)
  and then a streamed GET on the library's own HTTP session, into a part file that a later
  pull resumes with an HTTP Range request: ``hf_hub_download`` of huggingface-hub 1.x and
  later writes to a process-unique temp file that it deletes on failure, so a killed
  download would start over. The GET is ours, not the library's ``http_get``, so that it
  stops at the file's listed size (``http_get`` checks the size only at the end, after a
  server streaming gigabytes has filled the disk) and writes each chunk as it arrives (a
  kill loses nothing written). A dropped connection resumes within one call, as
  ``http_get``'s does.

``huggingface_hub`` is imported only when a push or pull actually runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlparse

from ..errors import CacheError, CacheHubError, one_line
from . import hub
from .checksums import sha256_file
from .hub import offline_mode
from .hub_deadline import (
    DEFAULT_DEADLINE,
    READ_TIMEOUT,
    DeadlinePassed,
    bounded,
    current,
    seconds_text,
)

__all__ = [
    "DEFAULT_ENDPOINT",
    "REPO_TYPE",
    "UNLISTED_LIMIT",
    "Fetcher",
    "HubConnection",
    "connect",
    "endpoint",
    "head_commit",
    "remote_files",
    "valid_repo_id",
]

#: Kind of Hub repository a cache travels in.
REPO_TYPE = "dataset"
DEFAULT_ENDPOINT = "https://huggingface.co"
#: Bytes a download may bring when neither the listing nor the HEAD gives the file's size.
UNLISTED_LIMIT = 64 * 1024 * 1024
#: Times a dropped download is resumed in a row without a byte arriving (``http_get``'s 5).
RESUMES = 5

Progress = Callable[[str, int, "int | None"], None]

_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_NETWORK_ERRORS = frozenset({
    "ConnectError", "ConnectTimeout", "TimeoutException", "NetworkError", "TransportError",
    "ConnectionError", "Timeout", "ProxyError", "RemoteProtocolError", "ReadTimeout",
    "OfflineModeIsEnabled", "LocalEntryNotFoundError",
})


def valid_repo_id(value: str) -> bool:
    """``ORG/NAME`` as the Hub spells repo ids (letters, digits, ``-``, ``_``, ``.``)."""
    return bool(_REPO_RE.match(value)) and ".." not in value


def endpoint() -> str:
    """The Hub's address: ``$HF_ENDPOINT`` as set now (:func:`hub.endpoint`), else
    https://huggingface.co."""
    return hub.endpoint() or DEFAULT_ENDPOINT.rstrip("/")


# --------------------------------------------------------------------------- the connection


@dataclass
class HubConnection:
    """One push or pull's access to one repo."""

    what: str  # "push" or "pull": starts every error line
    repo: str
    endpoint: str
    token: str | None  # what huggingface-hub will send (None: no Authorization header)
    api: Any  # huggingface_hub.HfApi
    deadline: float = DEFAULT_DEADLINE  # seconds each Hub call may take in all
    deadline_flag: str = "--deadline"  # the option that sets it, named in the line

    def error(self, text: str) -> CacheHubError:
        return CacheHubError(f"cache {self.what} --repo {self.repo}: {text}")

    @contextlib.contextmanager
    def calls(self, doing: str) -> Iterator[None]:
        """Run one Hub call under its deadline; any failure of the library becomes one line.
        ``doing`` reads before the repo's name: "looking up", "fetching X from"."""
        with bounded(self.deadline) as deadline:
            try:
                yield
            except (CacheHubError, CacheError, KeyboardInterrupt):
                raise
            except Exception as exc:
                if isinstance(exc, DeadlinePassed) or deadline.passed():
                    raise self.error(
                        f"the Hub at {self.endpoint} did not finish {doing} dataset repo "
                        f"{self.repo} within the {seconds_text(deadline.seconds)} s network "
                        f"deadline ({self.deadline_flag}); check the network and HF_ENDPOINT, "
                        f"or give a longer deadline, and run again"
                        + (" (a pull resumes where it stopped)" if self.what == "pull"
                           else "")) from None
                raise self._classify(exc, doing) from None

    def _classify(self, exc: BaseException, doing: str) -> CacheHubError:
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        where = f"dataset repo {self.repo} at {self.endpoint}"
        if "JSONDecodeError" in kinds:
            return self.error(
                f"the Hub at {self.endpoint} answered with something that is not JSON (a web "
                f"page?) while {doing} {where}; check HF_ENDPOINT points at a Hugging Face "
                f"Hub")
        if "OfflineModeIsEnabled" in kinds:
            return self.error(
                "huggingface-hub is in offline mode (HF_HUB_OFFLINE was set when it was "
                "imported); unset HF_HUB_OFFLINE and run again")
        if status == 401:
            if self.token:
                return self.error(
                    f"the Hub refused the token (HTTP 401) while {doing} {where}; set a "
                    f"valid HF_TOKEN or run `hf auth login` (a private repo you cannot see "
                    f"answers the same)")
            return self.error(
                f"{where} does not exist or is private (HTTP 401 without a token); check the "
                f"name, or log in with HF_TOKEN / `hf auth login`")
        if status == 403:
            need = "write" if self.what == "push" else "read"
            return self.error(
                f"the token has no {need} access to {where} (HTTP 403); use a token with "
                f"{need} access to it")
        if status == 404 or kinds & {"RepositoryNotFoundError", "RevisionNotFoundError"}:
            fix = ("check the name" if self.what == "push" else
                   f"check the name, or publish a cache there with `retrieval-eval cache "
                   f"push --repo {self.repo}`")
            return self.error(f"{where} does not exist (HTTP 404 while {doing}); {fix}")
        if kinds & _NETWORK_ERRORS:
            return self.error(
                f"the Hub at {self.endpoint} cannot be reached ({type(exc).__name__}: "
                f"{one_line(exc, 120)}); check the network and HF_ENDPOINT, and run again "
                f"(a pull resumes where it stopped)")
        if status is not None:
            return self.error(
                f"the Hub answered HTTP {status} while {doing} {where} "
                f"({one_line(exc, 120)}); try again later")
        return self.error(f"{doing} {where} failed ({type(exc).__name__}: "
                          f"{one_line(exc, 160)}); check HF_ENDPOINT and the network, and "
                          f"run again")


def connect(what: str, repo: str, deadline: float = DEFAULT_DEADLINE,
            deadline_flag: str = "--deadline") -> HubConnection:
    """The Hub connection of one push or pull; each of its calls may take ``deadline``
    seconds in all."""
    if not valid_repo_id(repo):
        raise CacheHubError(
            f"cache {what} --repo {repo!r}: not a Hub repo id; give ORG/NAME, e.g. "
            f"my-org/longmemeval-vectors")
    if offline_mode():
        raise CacheHubError(
            f"cache {what} --repo {repo}: offline (HF_HUB_OFFLINE is set), so the Hub cannot "
            f"be reached; unset HF_HUB_OFFLINE, or run without the repo")
    huggingface_hub = hub.library()
    address = endpoint()
    token = huggingface_hub.get_token()
    return HubConnection(what, repo, address, token,
                         huggingface_hub.HfApi(endpoint=address, token=token), deadline,
                         deadline_flag)


def head_commit(hub: HubConnection) -> str:
    """The commit the repo's main branch points to now (every read is pinned to it)."""
    with hub.calls("looking up"):
        info = hub.api.dataset_info(hub.repo)
    sha = getattr(info, "sha", None)
    if not isinstance(sha, str) or not sha:
        raise hub.error("the Hub gave no commit for the repo; check HF_ENDPOINT points at a "
                        "Hugging Face Hub")
    return sha


def remote_files(hub: HubConnection, commit: str) -> dict[str, int]:
    """Every file of the repo at ``commit``: path -> size."""
    from huggingface_hub.hf_api import RepoFile

    files: dict[str, int] = {}
    with hub.calls("listing"):
        for entry in hub.api.list_repo_tree(hub.repo, recursive=True, repo_type=REPO_TYPE,
                                            revision=commit):
            if isinstance(entry, RepoFile):
                files[entry.path] = int(entry.size or 0)
    return files


#: A download cut off mid-way, by name (httpx, httpx2 and requests): resumed with a Range.
_DROPPED = frozenset({"ConnectError", "TimeoutException", "RemoteProtocolError", "ReadError",
                      "ConnectionError", "ChunkedEncodingError", "Timeout"})


def _stream(session: Any, url: str, headers: dict[str, str]) -> Any:
    """A streamed GET on huggingface-hub's session: httpx's ``stream`` (huggingface-hub 1.x
    and later), else requests' ``stream=True`` (0.x)."""
    if hasattr(session, "stream"):
        return session.stream("GET", url, headers=headers, timeout=READ_TIMEOUT)
    return contextlib.closing(session.get(url, headers=headers, stream=True,
                                          timeout=READ_TIMEOUT))


def _chunks(response: Any) -> Iterator[bytes]:
    """The body as the network hands it over (httpx), or in 64 KiB reads (requests)."""
    if hasattr(response, "iter_bytes"):
        yield from response.iter_bytes()
    else:
        yield from response.iter_content(chunk_size=65536)


class Fetcher:
    """Downloads repo files at one commit into part files that survive an interrupted pull."""

    def __init__(self, hub: HubConnection, commit: str, staging: Path,
                 progress: Progress | None, total: int,
                 sizes: Mapping[str, int] | None = None) -> None:
        self.hub, self.commit, self.staging = hub, commit, staging
        self.progress, self.total = progress, total
        self.sizes = dict(sizes or {})  # path -> size, as the repo's listing gives it
        self.done = 0  # bytes of the counted files on disk so far (resumed bytes included)
        self.downloaded = 0  # bytes that came over the network now
        self.resumed = 0
        self.label = f"pull {hub.repo} (kB)"
        self._counted = False

    def _tick(self, n: int) -> None:
        self.downloaded += n
        if self._counted:
            self.done += n
            if self.progress is not None:
                self.progress(self.label, min(self.done, self.total) // 1000,
                              self.total // 1000)

    def fetch(self, path_in_repo: str, counted: bool = True) -> Path:
        """Download (or finish downloading) one file; its part file. Bytes of a ``counted``
        file go to the progress (the data files; sidecars and manifests do not)."""
        self._counted = counted
        from huggingface_hub import get_hf_file_metadata, hf_hub_url
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

        hub = self.hub
        url = hf_hub_url(hub.repo, path_in_repo, repo_type=REPO_TYPE, revision=self.commit,
                         endpoint=hub.endpoint)
        with hub.calls(f"fetching {path_in_repo} from"):
            meta = get_hf_file_metadata(url, token=hub.token, endpoint=hub.endpoint)
        flat = path_in_repo.replace("/", "--")
        tag = hashlib.sha256(str(meta.etag or self.commit).encode()).hexdigest()[:12]
        part = self.staging / f"{flat}.{tag}.part"
        for stale in self.staging.glob(f"{flat}.*.part"):
            if stale != part:  # another version of the file: useless to resume
                stale.unlink(missing_ok=True)
        listed = self.sizes.get(path_in_repo)
        size = listed if listed is not None else (
            meta.size if isinstance(meta.size, int) else None)
        have = part.stat().st_size if part.exists() else 0
        if size is not None and have > size:
            part.unlink()
            have = 0
        self.resumed += have
        self.done += have if counted else 0
        headers = build_hf_headers(token=hub.token)
        location = meta.location or url
        if urlparse(location).netloc != urlparse(url).netloc:
            headers.pop("authorization", None)  # a signed CDN address: no token leaves
        try:
            self.staging.mkdir(parents=True, exist_ok=True)
            with part.open("r+b" if have else "wb") as handle:
                handle.seek(have)
                with hub.calls(f"downloading {path_in_repo} from"):
                    have = self._download(location, headers, handle, have, size,
                                          path_in_repo, part)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise hub.error(
                f"{path_in_repo} could not be written to {part} ({exc.strerror or exc}); "
                f"check free disk space and permissions in {self.staging}") from None
        if size is not None and have < size:
            raise hub.error(
                f"{path_in_repo} from dataset repo {hub.repo} at {hub.endpoint} ended after "
                f"{have:,} of its {size:,} bytes; run the pull again (it resumes there)")
        return part

    def _download(self, location: str, headers: dict[str, str], handle: BinaryIO,
                  have: int, size: int | None, path_in_repo: str, part: Path) -> int:
        """GET the file from byte ``have`` on into ``handle``, each chunk written as it
        arrives; never past ``size`` (else :data:`UNLISTED_LIMIT`). A dropped connection is
        resumed with a Range request (:data:`RESUMES` times in a row without progress, as
        huggingface-hub's ``http_get``). Returns the bytes now in the part file."""
        from huggingface_hub import get_session, hf_raise_for_status

        limit = size if size is not None else UNLISTED_LIMIT
        if size is not None and have == size:
            return have
        deadline = current()  # checked here too: a client factory of the user's has none
        tries = RESUMES
        while True:
            wanted = dict(headers, Range=f"bytes={have}-") if have else dict(headers)
            before = have
            try:
                with _stream(get_session(), location, wanted) as response:
                    hf_raise_for_status(response)
                    if have and response.status_code == 200:  # the Range was ignored
                        handle.seek(0)
                        handle.truncate()
                        self.resumed -= have
                        self.done -= have if self._counted else 0
                        have = before = 0
                    for chunk in _chunks(response):
                        if have + len(chunk) > limit:
                            handle.truncate(0)
                            part.unlink(missing_ok=True)
                            listed = (f"its listed size ({size:,} bytes)" if size is not None
                                      else f"{UNLISTED_LIMIT:,} bytes (no size is listed)")
                            raise self.hub.error(
                                f"{path_in_repo} from dataset repo {self.hub.repo} at "
                                f"{self.hub.endpoint} runs past {listed}; it was deleted "
                                f"and nothing was committed; check HF_ENDPOINT points at a "
                                f"Hugging Face Hub")
                        handle.write(chunk)
                        have += len(chunk)
                        self._tick(len(chunk))
                        if deadline is not None and deadline.passed():
                            raise DeadlinePassed(deadline)
                return have
            except Exception as exc:
                if not {cls.__name__ for cls in type(exc).__mro__} & _DROPPED:
                    raise
                tries = RESUMES if have > before else tries - 1
                if tries <= 0:
                    raise
                time.sleep(0.5)

    def fetch_digest(self, path_in_repo: str) -> str:
        """The sha256 that a sidecar file of the repo records."""
        part = self.fetch(path_in_repo, counted=False)
        try:
            words = part.read_text(encoding="ascii").split()
        except (OSError, UnicodeDecodeError):
            words = []
        finally:
            part.unlink(missing_ok=True)
        digest = words[0].lower() if words else ""
        if not _HEX64.match(digest):
            raise self.hub.error(
                f"{path_in_repo} is not a sha256 sidecar; push that model again from a good "
                f"cache")
        return digest

    def fetch_checked(self, path_in_repo: str, expected: str, counted: bool = True) -> Path:
        """Download one file and check it against ``expected``; a file that fails is
        deleted (the next pull fetches it afresh) and nothing is committed."""
        part = self.fetch(path_in_repo, counted)
        actual = sha256_file(part)
        if actual != expected:
            part.unlink(missing_ok=True)
            raise self.hub.error(
                f"{path_in_repo} fails its checksum (sha256 {actual[:12]}..., its sidecar "
                f"says {expected[:12]}...); nothing was committed to the local cache; push "
                f"that model again from a good cache")
        return part
