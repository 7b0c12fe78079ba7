"""Hub endpoints that misbehave, on 127.0.0.1, for the network-deadline tests::

    with SlowServer("silent") as server:       # accepts, reads the request, never answers
        monkeypatch.setenv("HF_ENDPOINT", server.url)

Kinds: ``silent``; ``trickle`` (a 200 JSON answer whose headers come at once and whose body
comes one byte per :attr:`every` seconds); ``trickle-headers`` (the status line and headers
themselves one byte at a time); ``html`` (every request answered 200 with a web page, as a
captive portal or a wrong HF_ENDPOINT would).

Every connection stops by itself: when the client hangs up, when the server is closed, or
after :data:`SLOW_LIMIT` seconds.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

SLOW_LIMIT = 20.0
KINDS = ("silent", "trickle", "trickle-headers", "html")
_HTML = b"<!doctype html><html><body>Sign in to the network</body></html>"


class SlowServer:
    def __init__(self, kind: str, every: float = 0.1) -> None:
        assert kind in KINDS, kind
        self.kind, self.every = kind, every
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[str] = []
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def __enter__(self) -> SlowServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for thread in self.threads:
            thread.join(timeout=2 * SLOW_LIMIT)
        self.sock.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        ends = time.monotonic() + SLOW_LIMIT
        with conn, contextlib.suppress(OSError):
            conn.settimeout(1.0)
            request = conn.recv(65536)
            self.requests.append(request.split(b"\r\n", 1)[0].decode("latin-1"))
            if self.kind == "html":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
                             + str(len(_HTML)).encode() + b"\r\nConnection: close\r\n\r\n"
                             + _HTML)
                return
            if self.kind == "trickle":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 1000000\r\n\r\n")
                payload = b'{"id": "' + b"x" * 999_000
            elif self.kind == "trickle-headers":
                payload = b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 60_000
            else:  # silent
                payload = b""
            for byte in payload:
                if self.stop.is_set() or time.monotonic() > ends:
                    return
                conn.sendall(bytes([byte]))
                time.sleep(self.every)
            while not self.stop.is_set() and time.monotonic() < ends:  # silent: hold it open
                time.sleep(0.05)
