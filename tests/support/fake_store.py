"""A ``cmd:`` store that misbehaves on purpose: ``python fake_store.py MODE``.

It answers hello and index as the protocol asks, then, on the first rank, does what MODE
says: ``ok`` (rows in order, scores falling), ``error`` (an ``{"error"}`` answer), ``exit``
(exits with status 3), ``notjson`` (prints a log line), ``array`` (a JSON list), ``sleep``
(never answers), ``huge`` (an endless line), ``extra`` (two lines for one request),
``badname`` (hello without a name), ``badencoding`` (hello asks for vectors as
"float16"), ``blanks`` (blank lines and CRLF line ends, else as
``ok``), ``novectors`` (hello says vectors: false, and rank fails if a vector came),
``strangers`` (as ``ok``, then three made-up ids past the limit tied with the last row),
``repeats`` (every id twice), ``indexids`` (index answered ``{"ids": []}``), ``latin1`` (a
rank answer that is not UTF-8), ``early`` (index answered after reading only its first bytes,
then nothing more read), ``helper`` (as ``ok``, with a forked child that sleeps 300 s and
holds the pipes; its pid logged as ``fake-store helper PID``), ``helperexit`` (such a helper,
and the store exits with status 3 on its first rank), ``deep`` (a rank answer nested 5000
levels), ``bigint`` (a score of 400 digits), ``slow`` (as ``ok``, each rank answered after
0.2 s). Every request is logged to stderr as ``fake-store got OP``.
"""

from __future__ import annotations

import json
import os
import sys
import time

#: Seconds the ``slow`` store takes on each rank.
SLOW_S = 0.2


def early() -> int:
    """Hello as asked; then the index request's first bytes only, answered at once."""
    sys.stdin.buffer.readline()
    sys.stdout.write(json.dumps({"name": "fake-early", "vectors": True}) + "\n")
    sys.stdout.flush()
    sys.stdin.buffer.read1(4096)
    sys.stdout.write(json.dumps({"ok": True}) + "\n")
    sys.stdout.flush()
    time.sleep(30)  # reads nothing more: the rest of the request stays unwritten
    return 0


def helper() -> None:
    """A forked child that outlives this process unless its group is killed."""
    child = os.fork()
    if child == 0:
        time.sleep(300)
        os._exit(0)
    print(f"fake-store helper {child}", file=sys.stderr, flush=True)


def main(mode: str) -> int:
    if mode == "early":
        return early()
    if mode in ("helper", "helperexit"):
        helper()
    personas: dict[str, list[str]] = {}
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        print(f"fake-store got {op}", file=sys.stderr, flush=True)
        answer: object
        if op == "hello":
            answer = {"vectors": True} if mode == "badname" else {
                "name": f"fake-{mode}", "vectors": mode != "novectors"}
            if mode == "badencoding":
                answer["vector_encoding"] = "float16"
        elif op == "index":
            personas[request["persona"]] = [s["id"] for s in request["sessions"]]
            answer = {"ids": []} if mode == "indexids" else {"ok": True}
        elif mode == "error":
            answer = {"error": "the index is\nnot ready"}
        elif mode in ("exit", "helperexit"):
            return 3
        elif mode == "notjson":
            sys.stdout.write("ranking now...\n")
            sys.stdout.flush()
            continue
        elif mode == "deep":
            sys.stdout.write('{"ids": ' + "[" * 5000 + "]" * 5000 + "}\n")
            sys.stdout.flush()
            continue
        elif mode == "bigint":
            ids = personas[request["persona"]][:2]
            sys.stdout.write(json.dumps({"ids": ids})[:-1] + ', "scores": [' + "9" * 400
                             + ", 1]}\n")
            sys.stdout.flush()
            continue
        elif mode == "array":
            answer = ["s1"]
        elif mode == "sleep":
            time.sleep(60)
            continue
        elif mode == "huge":
            chunk = "x" * 65536
            while True:
                sys.stdout.write(chunk)
        elif mode == "novectors" and "vector" in request:
            answer = {"error": "a vector came though hello said vectors: false"}
        elif mode == "latin1":
            sys.stdout.buffer.write(b'{"ids": ["caf\xe9"]}\n')
            sys.stdout.flush()
            continue
        elif mode == "repeats":
            ids = [i for i in personas[request["persona"]] for _ in range(2)]
            answer = {"ids": ids}
        elif mode == "strangers":
            ids = personas[request["persona"]][: request["limit"]]
            scores = [float(-i) for i in range(len(ids))]
            answer = {"ids": [*ids, "made-up-1", "made-up-2", "made-up-3"],
                      "scores": [*scores, *[scores[-1]] * 3]}
        else:
            if mode == "slow":
                time.sleep(SLOW_S)
            ids = personas[request["persona"]][: request["limit"]]
            answer = {"ids": ids, "scores": [float(-i) for i in range(len(ids))],
                      "facts": [{"row": i} for i in range(len(ids))]}
            if mode == "extra":  # both lines in one write: one pipe write, never split
                answer_line = json.dumps(answer) + "\n"
                sys.stdout.write(answer_line + answer_line)
                sys.stdout.flush()
                continue
        if mode == "blanks":
            sys.stdout.write("\r\n\n" + json.dumps(answer) + "\r\n\n")
        else:
            sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
