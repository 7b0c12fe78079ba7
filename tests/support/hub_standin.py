"""A local stand-in for the few Hugging Face Hub endpoints that huggingface-hub calls when a
cache is pushed and pulled, served on 127.0.0.1 so tests run the real client end to end
(``HF_ENDPOINT`` points at it)::

    with HubStandIn() as hub:                  # tokens: "good-token" (write), "read-token"
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        ...
        hub.files("org/name")                  # path -> bytes at the head commit
        hub.requests                           # (method, path, Range header) of every call

The request and response shapes follow huggingface-hub 2.4's own calls (hf_api.py,
_commit_api.py, file_download.py): ``POST /api/repos/create``; ``GET
/api/datasets/{repo}[/revision/{rev}]``; ``GET /api/datasets/{repo}/tree/{rev}[/{path}]``;
``POST /api/datasets/{repo}/preupload/{rev}`` (every file is answered ``regular``, so files go
base64 inside the commit; Git LFS and Xet uploads are NOT served: an ``lfsFile`` line is
refused); ``POST /api/datasets/{repo}/commit/{rev}`` (ndjson); ``HEAD`` and ``GET
/datasets/{repo}/resolve/{rev}/{path}`` with ``Range`` (206). Errors carry the Hub's
``X-Error-Code`` header (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``).

Faults, for the tests: :attr:`corrupt` (path -> bytes served instead, same length),
:attr:`drop` (path -> [bytes sent before the connection is cut, how many times]),
:attr:`refuse` (paths whose GET answers 503), :attr:`vanish` (paths added to
:attr:`refuse` once their connection has been cut), :attr:`trickle` (path -> seconds
between the bytes of its GET body, headers sent at once: a 1-byte/s trickle), :attr:`flood`
(paths whose GET answers without a length and streams :attr:`flood_bytes` bytes, far past the
listed size), :attr:`stall` ((method, part of the path) -> ``"silent"``, never answering,
or ``"trickle"``, headers then a byte per 0.1 s (a HEAD: its headers a byte at a time): any
endpoint, e.g. ``("GET", "/tree/")``).
Slow answers stop by themselves: when the client hangs up, or after
:data:`SLOW_LIMIT` seconds.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

WRITE_TOKEN = "good-token"
READ_TOKEN = "read-token"
#: Seconds a trickling answer goes on at most (the client under test hangs up far sooner).
SLOW_LIMIT = 20.0


def serve(tmp_path: Path, monkeypatch: Any) -> Iterator[HubStandIn]:
    """Body of a test fixture: a stand-in, and the environment that points
    huggingface-hub at it (with the write token, Xet off, not offline)."""
    import huggingface_hub.constants

    with HubStandIn() as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        monkeypatch.setenv("HF_TOKEN", WRITE_TOKEN)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        # huggingface-hub reads these once, at import: an earlier test may have imported it
        # offline.
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        yield standin


def git_blob_sha1(data: bytes) -> str:
    """Git's object id of a blob: what the Hub reports as a regular file's ``oid``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    private: bool = False
    commits: list[tuple[str, dict[str, bytes]]] = field(default_factory=list)

    @property
    def head(self) -> tuple[str, dict[str, bytes]]:
        return self.commits[-1]

    def at(self, revision: str) -> dict[str, bytes] | None:
        if revision == "main":
            return self.head[1]
        for sha, files in self.commits:
            if sha == revision:
                return files
        return None


class HubStandIn:
    """The Hub's endpoints for one test, on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.corrupt: dict[str, bytes] = {}
        self.drop: dict[str, list[int]] = {}
        self.refuse: set[str] = set()
        self.vanish: set[str] = set()
        self.trickle: dict[str, float] = {}
        self.flood: set[str] = set()
        self.flood_bytes = 8 * 1024 * 1024
        self.stall: dict[tuple[str, str], str] = {}
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # shutdown() waits for serve_forever's next poll: 0.05 s, not the default 0.5 s that
        # every test using a stand-in paid at its teardown.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> HubStandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def files(self, repo: str) -> dict[str, bytes]:
        """The repo's files at its head commit."""
        return dict(self.repos[repo].head[1])

    def gets(self, suffix: str = "") -> list[tuple[str, str | None]]:
        """(path, Range) of every file download (GET on resolve) whose path ends so."""
        return [(p, r) for m, p, r in self.requests
                if m == "GET" and "/resolve/" in p and p.endswith(suffix)]

    def commit(self, repo: str, files: dict[str, bytes]) -> str:
        """A new commit on ``repo`` holding ``files`` (tests seed repos with it)."""
        with self.lock:
            entry = self.repos[repo]
            parent = entry.head[0] if entry.commits else ""
            sha = hashlib.sha1((parent + json.dumps(sorted(files))).encode()
                               + b"".join(files[k] for k in sorted(files))).hexdigest()
            entry.commits.append((sha, dict(files)))
            return sha


_RESOLVE = re.compile(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_API = re.compile(r"^/api/datasets/([^/]+/[^/]+)(?:/(revision|tree|preupload|commit)/([^/]+)"
                  r"(?:/(.+))?)?$")


def _handler(hub: HubStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        # -- plumbing --------------------------------------------------------------------

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
                  head: bool = False) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if "Content-Length" not in (headers or {}):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head and body:
                self.wfile.write(body)

        def _json(self, status: int, data: object, headers: dict[str, str] | None = None,
                  head: bool = False) -> None:
            body = json.dumps(data).encode()
            self._send(status, body, {"Content-Type": "application/json", **(headers or {})},
                       head)

        def _error(self, status: int, message: str, code: str | None = None,
                   head: bool = False) -> None:
            self._json(status, {"error": message}, {"X-Error-Code": code} if code else None,
                       head)

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _token(self) -> tuple[bool, str | None]:
            """(refused, token): a token the stand-in does not know is refused (401)."""
            auth = self.headers.get("Authorization") or ""
            token = auth[7:] if auth.lower().startswith("bearer ") else None
            return token is not None and token not in (WRITE_TOKEN, READ_TOKEN), token

        def _path(self) -> tuple[str, dict[str, list[str]]]:
            parts = urlsplit(self.path)
            return parts.path, parse_qs(parts.query)

        def _repo(self, repo_id: str, token: str | None, head: bool = False) -> Repo | None:
            repo = hub.repos.get(repo_id)
            if repo is None or (repo.private and token is None):
                # As the Hub: without a token a hidden repo is 401, with one 404.
                self._error(401 if token is None else 404, "Repository not found",
                            "RepoNotFound", head)
                return None
            return repo

        def _record(self) -> None:
            with hub.lock:
                hub.requests.append((self.command, urlsplit(self.path).path,
                                     self.headers.get("Range")))

        # -- verbs -----------------------------------------------------------------------

        def _stalled(self) -> bool:
            """Answer never, or a byte at a time, when :attr:`stall` names this request."""
            path = urlsplit(self.path).path
            kind = next((k for (method, part), k in hub.stall.items()
                         if method == self.command and part in path), None)
            if kind is None:
                return False
            self.close_connection = True
            ends = time.monotonic() + SLOW_LIMIT
            with contextlib.suppress(OSError):
                if kind == "trickle" and self.command == "HEAD":  # no body: the headers
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Pad: ")
                elif kind == "trickle":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                     b"Content-Length: 100000\r\n\r\n")
                self.connection.settimeout(0.1)
                while time.monotonic() < ends:
                    if kind == "trickle":
                        self.wfile.write(b"a" if self.command == "HEAD" else b" ")
                    try:
                        if self.connection.recv(1, socket.MSG_PEEK) == b"":
                            break  # the client hung up
                    except TimeoutError:
                        pass
            return True

        def do_HEAD(self) -> None:
            self._record()
            if self._stalled():
                return
            self._resolve(head=True)

        def do_GET(self) -> None:
            self._record()
            if self._stalled():
                return
            path, query = self._path()
            if path.startswith("/datasets/"):
                self._resolve(head=False)
                return
            refused, token = self._token()
            if refused:
                self._error(401, "Invalid credentials in Authorization header")
                return
            match = _API.match(path)
            if match is None:
                self._error(404, f"no route {path}")
                return
            repo_id, action, rev, rest = match.groups()
            repo = self._repo(repo_id, token)
            if repo is None:
                return
            revision = unquote(rev) if rev else "main"
            files = repo.at(revision)
            if files is None:
                self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
                return
            sha = repo.head[0] if revision == "main" else revision
            if action in (None, "revision"):
                self._json(200, {"id": repo_id, "sha": sha, "private": repo.private,
                                 "siblings": [{"rfilename": p} for p in sorted(files)]})
            elif action == "tree":
                base = unquote(rest or "").strip("/")
                recursive = query.get("recursive", ["False"])[0].lower() == "true"
                self._json(200, _tree(files, base, recursive))
            else:
                self._error(405, f"{action} needs POST")

        def do_POST(self) -> None:
            self._record()
            path, _query = self._path()
            body = self._body()
            if self._stalled():
                return
            refused, token = self._token()
            if refused or token is None:
                self._error(401, "Invalid credentials in Authorization header")
                return
            if token != WRITE_TOKEN:
                self._error(403, "You don't have the rights to create or write to this repo")
                return
            if path == "/api/repos/create":
                self._create(json.loads(body or b"{}"))
                return
            match = _API.match(path)
            if match is None or match.group(2) not in ("preupload", "commit"):
                self._error(404, f"no route {path}")
                return
            repo_id, action, rev, _rest = match.groups()
            repo = self._repo(repo_id, token)
            if repo is None:
                return
            if unquote(rev) != "main":
                self._error(400, "the stand-in commits to main only")
                return
            if action == "preupload":
                current = repo.head[1]
                answer = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                           "oid": git_blob_sha1(current[f["path"]])
                           if f["path"] in current else None}
                          for f in json.loads(body)["files"]]
                self._json(200, {"files": answer})
            else:
                self._commit(repo_id, repo, body)

        # -- endpoints -------------------------------------------------------------------

        def _create(self, payload: dict[str, Any]) -> None:
            name, org = payload.get("name"), payload.get("organization")
            repo_id = f"{org}/{name}" if org else str(name)
            url = f"{hub.url}/datasets/{repo_id}"
            if payload.get("type") != "dataset":
                self._error(400, "the stand-in serves dataset repos only")
                return
            with hub.lock:
                exists = repo_id in hub.repos
                if not exists:
                    private = payload.get("private") or payload.get("visibility") == "private"
                    hub.repos[repo_id] = Repo(private=bool(private))
            if exists:
                self._json(409, {"error": "You already created this dataset repo",
                                 "url": url})
                return
            hub.commit(repo_id, {".gitattributes": b"*.parquet filter=lfs\n"})
            self._json(200, {"url": url, "name": repo_id})

        def _commit(self, repo_id: str, repo: Repo, body: bytes) -> None:
            files = dict(repo.head[1])
            for line in body.splitlines():
                if not line.strip():
                    continue
                item = json.loads(line)
                key, value = item["key"], item["value"]
                if key == "file":
                    files[value["path"]] = base64.b64decode(value["content"])
                elif key == "deletedFile":
                    files.pop(value["path"], None)
                elif key == "lfsFile":
                    self._error(400, "the stand-in does not serve Git LFS uploads")
                    return
            sha = hub.commit(repo_id, files)
            self._json(200, {"commitUrl": f"{hub.url}/datasets/{repo_id}/commit/{sha}",
                             "commitOid": sha, "pullRequestUrl": None})

        def _resolve(self, head: bool) -> None:
            path, _query = self._path()
            match = _RESOLVE.match(path)
            refused, token = self._token()
            if refused:
                self._error(401, "Invalid credentials in Authorization header", head=head)
                return
            if match is None:
                self._error(404, f"no route {path}", head=head)
                return
            repo_id, rev, file_path = match.group(1), unquote(match.group(2)), unquote(
                match.group(3))
            repo = self._repo(repo_id, token, head)
            if repo is None:
                return
            files = repo.at(rev)
            if files is None:
                self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound", head)
                return
            sha = repo.head[0] if rev == "main" else rev
            if file_path not in files:
                self._error(404, "Entry not found", "EntryNotFound", head)
                return
            data = files[file_path]
            headers = {"X-Repo-Commit": sha, "ETag": f'"{git_blob_sha1(data)}"',
                       "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            if head:
                self._send(200, b"", {**headers, "Content-Length": str(len(data))}, head=True)
                return
            if file_path in hub.refuse:
                self._error(503, "Service Unavailable")
                return
            data = hub.corrupt.get(file_path, data)
            start = 0
            wanted = self.headers.get("Range")
            status = 200
            if wanted:
                m = re.match(r"bytes=(\d+)-(\d*)$", wanted)
                if m is None or int(m.group(1)) >= len(data):
                    self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                    return
                start = int(m.group(1))
                status = 206
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            chunk = data[start:]
            if file_path in hub.flood:
                self._flood(status, headers)
                return
            if file_path in hub.trickle:
                self._trickle(status, headers, chunk, hub.trickle[file_path])
                return
            cut = hub.drop.get(file_path)
            if cut is not None and cut[1] > 0:
                cut[1] -= 1
                if file_path in hub.vanish:
                    hub.refuse.add(file_path)
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(chunk))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(chunk[: cut[0]])
                self.wfile.flush()
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._send(status, chunk, headers)

        def _flood(self, status: int, headers: dict[str, str]) -> None:
            """No length, then bytes until :attr:`flood_bytes` or the client hangs up."""
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            block = b"\0" * 65536
            with contextlib.suppress(OSError):
                for _ in range(hub.flood_bytes // len(block)):
                    self.wfile.write(block)

        def _trickle(self, status: int, headers: dict[str, str], body: bytes,
                     every: float) -> None:
            """The headers at once, then one byte per ``every`` seconds."""
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.flush()
            self.close_connection = True
            ends = time.monotonic() + SLOW_LIMIT
            with contextlib.suppress(OSError):
                for byte in body:
                    if time.monotonic() > ends:
                        break
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(every)

    return Handler


def _tree(files: dict[str, bytes], base: str, recursive: bool) -> list[dict[str, Any]]:
    """The Hub's tree listing of ``base``: folders and files, one level or all of them."""
    prefix = f"{base}/" if base else ""
    entries: dict[str, dict[str, Any]] = {}
    for path in sorted(files):
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):].split("/")
        for depth in range(1, len(rest)):
            folder = prefix + "/".join(rest[:depth])
            if recursive or depth == 1:
                entries.setdefault(folder, {"type": "directory", "path": folder,
                                            "oid": hashlib.sha1(folder.encode()).hexdigest(),
                                            "size": 0})
            if not recursive:
                break
        if recursive or len(rest) == 1:
            entries[path] = {"type": "file", "path": path, "size": len(files[path]),
                             "oid": git_blob_sha1(files[path])}
    return list(entries.values())


if __name__ == "__main__":  # benchmarks/run.py: a stand-in in its own process
    import sys

    with HubStandIn() as running:
        print(running.url, flush=True)
        sys.stdin.read()  # serves until stdin closes
