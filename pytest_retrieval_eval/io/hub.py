"""Fetching files from the Hugging Face Hub: offline mode, the cache location as the
environment says now, cache-first download with failures classified.

Callers look a file up in the local cache first (:func:`cached_file`, never touches the
network), then, unless :func:`offline_mode`, download it (:func:`download_file`). A download
starts with ONE short request for the file's metadata (:data:`PROBE_TIMEOUT` seconds, or
``HF_HUB_ETAG_TIMEOUT`` when set; huggingface_hub's retry loop off): an unreachable Hub fails
in seconds, not after the library's half a minute of retries. ``HF_ENDPOINT`` is read now, as
the cache folder is. A failed
download raises a :class:`HubError` subclass that says what went wrong:
:class:`HubFileMissing` (the repository has no such file), :class:`HubRepoMissing` (no such
repository or revision, access refused, or an invalid id) or :class:`HubUnreachable`
(anything else: the network, the Hub, offline mode). Callers word their own one-line errors;
the library's exception is ``error.cause``. The probe and the download together run under
one overall deadline (:func:`.hub_deadline.bounded`, ``deadline`` seconds): a server that
never answers or trickles ends in :class:`HubUnreachable` saying so.

``huggingface_hub`` is imported only when a file is actually looked up (it costs ~0.3 s).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import one_line
from .hub_deadline import (
    DEFAULT_DEADLINE,
    Deadline,
    DeadlinePassed,
    bounded,
    seconds_text,
)
from .hub_settings import HubSettingError, library, seconds

T = TypeVar("T")

__all__ = [
    "DEFAULT_DEADLINE",
    "PROBE_TIMEOUT",
    "HubError",
    "HubFileMissing",
    "HubRepoMissing",
    "HubSettingError",
    "HubUnreachable",
    "cache_dir",
    "cached_file",
    "download_file",
    "library",
    "offline_mode",
]

#: Seconds the one metadata request of a download may take (``HF_HUB_ETAG_TIMEOUT`` wins).
PROBE_TIMEOUT = 3.0
#: Bytes a second a download is allowed on top of its deadline (250 kB/s: LongMemEval_M's
#: 2.7 GB in three hours; a 1-byte/s trickle is still cut off).
SLOWEST_RATE = 250_000

_FALSE_WORDS = ("", "0", "false", "no", "off")
_REPO_MISSING = frozenset(
    {"RepositoryNotFoundError", "RevisionNotFoundError", "HFValidationError"}
)


class HubError(Exception):
    """A download from the Hub failed; ``cause`` is the library's exception."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


class HubFileMissing(HubError):
    """The repository exists but has no such file (HTTP 404)."""


class HubRepoMissing(HubError):
    """No such repository or revision, access refused (gated), or an invalid repo id."""


class HubUnreachable(HubError):
    """The Hub could not be reached (network, server, or offline mode); ``str()`` says why."""


def offline_mode(offline: bool = False) -> bool:
    """True when ``offline`` is, or ``HF_HUB_OFFLINE`` is set to anything but a false word
    (empty, ``0``, ``false``, ``no``, ``off``): an unusual value errs on the side of no network.
    """
    if offline:
        return True
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in _FALSE_WORDS


def cache_dir() -> Path | None:
    """The Hub cache folder as the environment says *now* (huggingface_hub reads it at import):
    ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else None (the library's default)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return None


def endpoint() -> str | None:
    """The Hub address as the environment says *now* (``HF_ENDPOINT``), else None (the
    library's default, https://huggingface.co)."""
    value = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/")
    return value or None


def probe_timeout() -> float:
    """Seconds for the one metadata request: ``HF_HUB_ETAG_TIMEOUT`` when set to a positive
    number of whole seconds (read once, as the library reads it: :func:`.hub_settings.
    seconds`), else :data:`PROBE_TIMEOUT`."""
    value = seconds("HF_HUB_ETAG_TIMEOUT")
    return float(value) if value is not None and value > 0 else PROBE_TIMEOUT


def _probe(repo_id: str, filename: str, repo_type: str | None) -> int | None:
    """One metadata request (HTTP HEAD) for the file, without huggingface_hub's retries: it
    raises the library's exception when the Hub cannot be reached or has no such file.
    Returns the file's size when the Hub gives it."""
    huggingface_hub = library()
    url = huggingface_hub.hf_hub_url(repo_id, filename, repo_type=repo_type,
                                     endpoint=endpoint())
    kwargs: dict[str, Any] = {"timeout": probe_timeout()}
    # huggingface_hub >= 1.0 retries a metadata request only when asked (retry_on_errors);
    # older versions never retried it.
    if "retry_on_errors" in inspect.signature(huggingface_hub.get_hf_file_metadata).parameters:
        kwargs["retry_on_errors"] = False
    size = huggingface_hub.get_hf_file_metadata(url, **kwargs).size
    return size if isinstance(size, int) and size >= 0 else None


def _hf_hub_download(repo_id: str, filename: str, repo_type: str | None) -> Path:
    huggingface_hub = library()
    kwargs: dict[str, Any] = {"repo_id": repo_id, "filename": filename}
    if repo_type is not None:
        kwargs["repo_type"] = repo_type
    address = endpoint()
    if address is not None:
        kwargs["endpoint"] = address
    where = cache_dir()
    if where is not None:
        kwargs["cache_dir"] = where
    return Path(huggingface_hub.hf_hub_download(**kwargs))


def _bounded_call(bound: Deadline, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)``; whatever it raises once ``bound`` has passed is DeadlinePassed (the
    library may have wrapped ours, or timed out at the capped timeout)."""
    try:
        return call(*args)
    except Exception as exc:
        if isinstance(exc, DeadlinePassed) or bound.passed():
            raise DeadlinePassed(bound) from exc
        raise


def cached_file(repo_id: str, filename: str, *, repo_type: str | None = None) -> Path | None:
    """The local path of ``filename`` of the Hub repo when it is in the local cache, else None.

    Never touches the network: ``try_to_load_from_cache`` reads the cache's folders only
    (``hf_hub_download(local_files_only=True)`` builds request headers first, and
    huggingface_hub >= 2 fetches its agent registry over the network to build them). Any
    failure (not cached, unreadable cache) is None.
    """
    huggingface_hub = library()
    try:
        found = huggingface_hub.try_to_load_from_cache(
            repo_id, filename, cache_dir=cache_dir(), repo_type=repo_type)
    except Exception:  # an invalid id, an unreadable cache
        return None
    # A str is the file; None or the library's "known not to exist" marker is no file.
    if isinstance(found, str) and Path(found).is_file():
        return Path(found)
    return None


def download_file(repo_id: str, filename: str, *, repo_type: str | None = None,
                  deadline: float = DEFAULT_DEADLINE) -> Path:
    """Download ``filename`` of the Hub repo into the cache (or find it there); its path.
    The metadata request may take ``deadline`` seconds, the download ``deadline`` more plus
    one second per :data:`SLOWEST_RATE` bytes of the file (a large dataset on a slow link
    still arrives; a server that never answers or trickles is cut off).

    Raises :class:`HubFileMissing`, :class:`HubRepoMissing` or :class:`HubUnreachable`, each
    chained to the library's exception.
    """
    try:
        with bounded(deadline) as bound:
            size = _bounded_call(bound, _probe, repo_id, filename, repo_type)  # fails fast
        with bounded(deadline + (size or 0) / SLOWEST_RATE) as bound:
            return _bounded_call(bound, _hf_hub_download, repo_id, filename, repo_type)
    except DeadlinePassed as exc:
        where = endpoint() or "https://huggingface.co"
        # The cause's own text names the endpoint: the dataset's line quotes the cause.
        raise HubUnreachable(
            f"the Hub at {where} did not finish downloading {filename} of {repo_id} within "
            f"the {seconds_text(exc.deadline.seconds)} s network deadline",
            DeadlinePassed(exc.deadline, where)) from exc
    except Exception as exc:
        # Classified by name along the MRO: the classes moved between huggingface_hub versions.
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        if "LocalEntryNotFoundError" in kinds:
            # Online, not cached, and the Hub did not answer.
            raise HubUnreachable(one_line(exc, 160), exc) from exc
        if "EntryNotFoundError" in kinds:
            raise HubFileMissing(one_line(exc, 160), exc) from exc
        if kinds & _REPO_MISSING:
            raise HubRepoMissing(one_line(exc, 160), exc) from exc
        raise HubUnreachable(f"{type(exc).__name__}: {one_line(exc, 160)}", exc) from exc
