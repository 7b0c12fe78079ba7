"""A cmd: store that embeds its own texts with the run's model (``{"op": "embed"}``): at
index it asks for its sessions' first lines, at rank for the question; it ranks by cosine.

``python embed_store.py [bad|endless]``: ``bad`` sends an embed request without texts;
``endless`` answers rank with embed requests for :data:`ENDLESS_S` seconds before its answer
(each exchange quick: only the request's one deadline can stop it sooner)."""

from __future__ import annotations

import json
import math
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "good"
ENDLESS_S = 8.0
stores: dict[str, list[tuple[str, list[float]]]] = {}


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def embed(texts: list[str]) -> list[list[float]] | None:
    send({"op": "embed", "texts": texts} if MODE != "bad" else {"op": "embed"})
    reply = json.loads(sys.stdin.readline())
    return reply.get("vectors")


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "hello":
        send({"name": "embedding-store", "vectors": False})
    elif request["op"] == "index":
        sessions = request["sessions"]
        vectors = embed([s["text"] for s in sessions])
        if vectors is None:
            send({"error": "no vectors"})
            continue
        stores[request["persona"]] = [(s["id"], v) for s, v in zip(sessions, vectors, strict=True)]
        send({"ok": True})
    elif request["op"] == "rank":
        got = embed([request["question"]])
        begun = time.monotonic()
        while MODE == "endless" and time.monotonic() - begun < ENDLESS_S:
            got = embed([request["question"]])
        if got is None:
            send({"error": "no vectors"})
            continue
        rows = sorted(stores[request["persona"]], key=lambda r: -cosine(r[1], got[0]))
        send({"ids": [i for i, _ in rows], "scores": [cosine(v, got[0]) for _, v in rows]})
