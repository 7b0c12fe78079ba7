"""A hand-written MCP server over stdio (no SDK: it starts in milliseconds) that misbehaves
as its first argument says, at the search call unless told otherwise:

- ``good``: answers; ``recall`` gives the store's texts matching the query's first word;
- ``hang``: never answers ``recall`` (it writes ``recall.hang`` in its working folder when
  the call comes: its stores are done); ``hang-hello``: never answers ``initialize``;
- ``flood``: writes 64 MiB to stderr and a 20 MiB line to stdout at ``recall``;
- ``crash``: exits with status 7 during ``recall``; ``garbage``: answers ``recall`` with a
  line that is not JSON-RPC; ``iserror``: ``recall`` is an error result;
- ``fork``: forks a child (its pid written to ``child.pid`` in the working folder) that
  sleeps holding the pipes, and the leader exits, during ``recall``;
- ``notools``: has no ``recall`` tool; ``conflict``: refuses every second store with a
  JSON-RPC error whose data's type is ``conflict``; ``textonly``: ``recall`` answers texts
  (one block per result), the last one matching no stored text; ``malformed``: ``recall``'s
  results are a number; ``notmcp``: prints a banner and exits.

It writes its pid to ``server.pid`` in its working folder first.
"""

from __future__ import annotations

import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "good"
store: list[str] = []


def send(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def text_result(mid: object, text: str, error: bool = False) -> None:
    send({"jsonrpc": "2.0", "id": mid, "result": {
        "content": [{"type": "text", "text": text}], "isError": error}})


def recall(mid: object, args: dict) -> None:
    if MODE == "hang":
        with open("recall.hang", "w") as f:  # a test waits for it before its signal
            f.write(str(os.getpid()))
        time.sleep(3600)
    if MODE == "flood":
        sys.stderr.write("x" * (64 << 20))
        sys.stderr.flush()
        sys.stdout.write("y" * (20 << 20))
        sys.stdout.flush()
        time.sleep(3600)
    if MODE == "crash":
        sys.exit(7)
    if MODE == "garbage":
        print("this is not json-rpc", flush=True)
        return
    if MODE == "iserror":
        text_result(mid, "the index is corrupt", error=True)
        return
    if MODE == "fork":
        pid = os.fork()
        if pid == 0:
            time.sleep(3600)
            os._exit(0)
        with open("child.pid", "w") as f:
            f.write(str(pid))
        os._exit(0)
    if MODE == "malformed":
        text_result(mid, json.dumps({"results": 5}))
        return
    word = str(args.get("query", "")).split()[0].lower() if args.get("query") else ""
    hits = [t for t in store if word and word in t.lower()][: int(args.get("limit", 5))]
    if MODE == "textonly":
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [
            {"type": "text", "text": t} for t in [*hits, "nothing stored says this"]]}})
        return
    text_result(mid, json.dumps({"results": [
        {"id": f"m{store.index(t) + 1}", "score": 1.0 / (i + 1), "text": t}
        for i, t in enumerate(hits)]}))


def main() -> None:
    with open("server.pid", "w") as f:  # in its own folder: the tests look for it after
        f.write(str(os.getpid()))
    if MODE == "notmcp":
        print("hello, I am not an MCP server", flush=True)
        return
    tools = [{"name": n, "inputSchema": {"type": "object"}}
             for n in ("remember", "recall", "reset") if not (MODE == "notools" and n == "recall")]
    for line in sys.stdin:
        msg = json.loads(line)
        mid, method = msg.get("id"), msg.get("method")
        if mid is None:
            continue  # a notification
        if method == "initialize":
            if MODE == "hang-hello":
                time.sleep(3600)
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
        elif method == "tools/call":
            name, args = msg["params"]["name"], msg["params"].get("arguments") or {}
            if name == "remember":
                if MODE == "conflict" and len(store) % 2 == 1 and not args.get("force"):
                    store.append("")  # counted, never stored: the next one goes through
                    send({"jsonrpc": "2.0", "id": mid, "error": {
                        "code": -32600, "message": "conflicts with 1 memory",
                        "data": {"type": "conflict", "conflicts": []}}})
                    continue
                store.append(str(args.get("text", "")))
                text_result(mid, json.dumps({"id": f"m{len(store)}"}))
            elif name == "recall":
                recall(mid, args)
            else:
                text_result(mid, "{}")
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}})


if __name__ == "__main__":
    main()
