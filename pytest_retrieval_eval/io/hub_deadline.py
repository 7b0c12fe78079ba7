"""An overall deadline for Hub calls: every request huggingface-hub sends while one is set
has a per-read timeout and stops when the deadline passes, a server that trickles included.

huggingface-hub 1.x and later sends every request through ONE shared ``httpx`` client made
by a factory (``huggingface_hub.set_client_factory``), and its own client waits forever
(``timeout=None``) in ``HfApi.dataset_info``, ``create_repo``, ``list_repo_tree`` and
``create_commit``. :func:`bounded` installs, once, a factory whose client is the library's
own (same hooks, redirects, no client-wide timeout) with one difference, its transport:

* outside :func:`bounded` it passes every request to a plain ``HTTPTransport``: the library
  behaves as without this module;
* inside, each request gets a per-read timeout (:data:`READ_TIMEOUT` where the library set
  none), every timeout capped at the time left, the body is checked against the deadline
  between the chunks the network hands over (a 1-byte/s trickle stops), and a watchdog
  closes the call's own connections when the deadline passes (a server trickling headers
  stops at its next byte). Any failure after the deadline is :class:`DeadlinePassed`.

The deadline in force is a :class:`contextvars.ContextVar`: the library calls our transport
with no way to pass it, and a context variable keeps one thread's deadline out of another's.
A factory the user set before is left alone (their client, their timeouts).

``httpx`` (the library's HTTP client) is imported only when :func:`bounded` first runs.

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .hub_settings import library

__all__ = ["DEFAULT_DEADLINE", "READ_TIMEOUT", "Deadline", "DeadlinePassed", "bounded",
           "current", "seconds_text"]

#: Seconds one Hub call (one metadata request, one file's download) may take in all.
DEFAULT_DEADLINE = 600.0
#: Seconds one network read or write may wait where huggingface-hub sets no timeout.
READ_TIMEOUT = 60.0


def seconds_text(seconds: float) -> str:
    """``1.5``, ``600``, ``11400``: a deadline as a line gives it."""
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.2g}"


@dataclass
class Deadline:
    """One bounded call: when it ends, and the connections opened for it."""

    seconds: float
    at: float  # time.monotonic() when it passes
    transport: Any = None  # the call's own httpx HTTPTransport, made at its first request
    timer: threading.Timer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return self.remaining() <= 0

    def connections(self, make: Callable[[], Any]) -> Any:
        """The call's own transport (``make()`` at the first request), and the watchdog that
        closes it when the deadline passes."""
        with self.lock:
            if self.transport is None:
                self.transport = make()
                self.timer = threading.Timer(max(self.remaining(), 0.0), self.close)
                self.timer.daemon = True
                self.timer.start()
            return self.transport

    def close(self) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
            transport = self.transport
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()


class DeadlinePassed(Exception):
    """A Hub call ran past its deadline (not an httpx error: the library retries those)."""

    def __init__(self, deadline: Deadline, where: str | None = None) -> None:
        source = f" from {where}" if where else ""
        super().__init__(f"no complete answer{source} within the "
                         f"{seconds_text(deadline.seconds)} s network deadline")
        self.deadline = deadline


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "retrieval_eval_hub_deadline", default=None)
_INSTALL = threading.Lock()
_installed: list[bool] = []  # [True] once the factory is set (or left to the user's)


def current() -> Deadline | None:
    """The deadline in force in this thread, if any."""
    return _CURRENT.get()


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[Deadline]:
    """Run Hub calls that must finish within ``seconds`` (a nested call keeps the sooner
    deadline); afterwards their connections are closed."""
    _install()
    at = time.monotonic() + seconds
    outer = _CURRENT.get()
    if outer is not None and outer.at < at:
        seconds, at = outer.seconds, outer.at
    deadline = Deadline(seconds, at)
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)
        deadline.close()


def _install() -> None:
    with _INSTALL:
        if _installed:
            return
        huggingface_hub = library()  # its settings checked before it is imported
        _installed.append(True)
        try:
            from huggingface_hub.utils import _http
        except ImportError:
            return
        # The library's own factory, huggingface_hub/utils/_http.py lines 341-349 (2.4.0):
        # the request hook (offline mode, request id), redirects followed, no timeout. Its
        # HTTP library: httpx2 (2.x), httpx (1.x); 0.x (requests) has no factory to set.
        httpx = getattr(_http, "httpx2", None) or getattr(_http, "httpx", None)
        hook = getattr(_http, "hf_request_event_hook", None)
        setter = getattr(huggingface_hub, "set_client_factory", None)
        if httpx is None or hook is None or setter is None or getattr(
                _http, "_GLOBAL_CLIENT_FACTORY", None) is not getattr(
                _http, "default_client_factory", None):
            return  # another version, or the user's own factory: theirs stays

        def factory() -> Any:
            return httpx.Client(event_hooks={"request": [hook]}, follow_redirects=True,
                                timeout=None, transport=_transport(httpx))

        setter(factory)


def _transport(httpx2: Any) -> Any:
    """Our transport, built on the library's HTTP module (httpx2 or httpx)."""

    class Bounded(httpx2.SyncByteStream):  # type: ignore[misc]
        """A response body that stops when the deadline passes, between network chunks."""

        def __init__(self, inner: Any, deadline: Deadline) -> None:
            self.inner, self.deadline = inner, deadline

        def __iter__(self) -> Iterator[bytes]:
            chunks = iter(self.inner)
            while True:
                try:
                    chunk = next(chunks)
                except StopIteration:
                    return
                except Exception as exc:
                    if self.deadline.passed():
                        raise DeadlinePassed(self.deadline) from exc
                    raise
                if self.deadline.passed():
                    raise DeadlinePassed(self.deadline)
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class Transport(httpx2.BaseTransport):  # type: ignore[misc]
        def __init__(self) -> None:
            # One TLS context for every call's connections, as one client has (loading the
            # certificates costs ~80 ms: not once per call).
            self.tls = httpx2.create_ssl_context()
            self.shared = self.make()

        def make(self) -> Any:
            return httpx2.HTTPTransport(verify=self.tls)

        def handle_request(self, request: Any) -> Any:
            deadline = _CURRENT.get()
            if deadline is None:
                return self.shared.handle_request(request)
            left = deadline.remaining()
            if left <= 0:
                raise DeadlinePassed(deadline)
            timeouts = dict(request.extensions.get("timeout") or {})
            for key in ("connect", "read", "write", "pool"):
                value = timeouts.get(key)
                timeouts[key] = min(READ_TIMEOUT if value is None else value, left)
            request.extensions["timeout"] = timeouts
            try:
                response = deadline.connections(self.make).handle_request(request)
            except Exception as exc:
                if deadline.passed():
                    raise DeadlinePassed(deadline) from exc
                raise
            response.stream = Bounded(response.stream, deadline)
            return response

        def close(self) -> None:
            self.shared.close()

    return Transport()
