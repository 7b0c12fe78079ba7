"""A ``cmd:`` store with costs to measure: ``python cost_store.py LOG [--base64]``.

It says hello after sleeping 0.5 s, or S with ``--hello-sleep=S`` (a start-up to see), logs
every request's op, and for each persona's vectors their exact values, to LOG (one JSON line
each); in ``index`` it
writes 1,000,000 bytes into the request's ``workdir`` (when it names one) and keeps 50 MB of
written memory (``child_rss_bytes`` and RSS growth to see); ``rank`` sleeps 0.2 s (a store
time the transport must not eat) and ranks by cosine, in float64 of the float32 values.
``--base64`` asks for ``"vector_encoding": "base64-f32le"`` and decodes it (a JSON array
then stops it, as an array without it does a base64 string).
"""

from __future__ import annotations

import base64
import json
import math
import struct
import sys
import time
from pathlib import Path

HELD: list[bytes] = []


def vector(value: object, encoded: bool) -> list[float]:
    assert isinstance(value, str) == encoded, f"a vector as {type(value).__name__}"
    if isinstance(value, str):
        raw = base64.b64decode(value)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    assert isinstance(value, list)
    return [float(x) for x in value]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def main() -> int:
    log = Path(sys.argv[1])
    encoded = "--base64" in sys.argv[2:]
    hello_sleep = next((float(a.split("=", 1)[1]) for a in sys.argv[2:]
                        if a.startswith("--hello-sleep=")), 0.5)
    personas: dict[str, tuple[list[str], list[list[float]]]] = {}
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        entry: dict[str, object] = {"op": op}
        if op == "hello":
            time.sleep(hello_sleep)
            entry["offered"] = request.get("vector_encodings")
            answer: dict[str, object] = {"name": "cost-store", "vectors": True}
            if encoded:
                answer["vector_encoding"] = "base64-f32le"
        elif op == "index":
            ids = [s["id"] for s in request["sessions"]]
            vectors = [vector(s["vector"], encoded) for s in request["sessions"]]
            personas[request["persona"]] = (ids, vectors)
            if "workdir" in request:  # the persona's own folder (issue 37.4)
                (Path(request["workdir"]) / "index.bin").write_bytes(b"\0" * 1_000_000)
            HELD.append(b"\1" * 50_000_000)
            entry.update(persona=request["persona"], vectors=vectors)
            answer = {"ok": True}
        else:
            time.sleep(0.2)
            ids, vectors = personas[request["persona"]]
            q = vector(request["vector"], encoded)
            scores = [cosine(v, q) for v in vectors]
            order = sorted(range(len(ids)), key=lambda i: -scores[i])
            answer = {"ids": [ids[i] for i in order], "scores": [scores[i] for i in order]}
        with log.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
