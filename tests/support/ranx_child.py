"""ranx (the independent reference of tests/cli/test_export.py) in a child process of its
own, with numba's compiler off (``NUMBA_DISABLE_JIT=1``): the same ranx code, run by Python.

In the test process ranx's first evaluation compiled numba's typed dicts and lists and the
metrics for about ten seconds, again after each in-process pytester run (it drops the modules
numba imported while compiling). Uncompiled, a few hundred rankings take milliseconds; the
child pays ranx's import once and answers every request of the module on its stdin.
A process of its own also keeps the switch from reaching any other test's ranx.

Run as a script, it reads one JSON request a line, ``{"qrels": PATH, "run": PATH,
"metrics": [...]}``, and writes one JSON line: ``{"scores": {metric: {qid: score}},
"ranked": {qid: {doc: score}}}``: the scores of ``ranx.evaluate(..., make_comparable=True)``
and the run file as ranx reads it back (``Run.to_dict()``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


class RanxChild:
    """The child, started by the constructor; :meth:`evaluate` asks it, :meth:`close` ends it."""

    def __init__(self) -> None:
        env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=env)

    def evaluate(self, qrels: str, run: str, metrics: list[str]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"qrels": qrels, "run": run, "metrics": metrics}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the ranx child ended (exit status {self.proc.poll()})"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """Killed: it holds nothing to save, and its interpreter's exit takes a second."""
        self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def _serve() -> None:
    import importlib
    import warnings

    answers, sys.stdout = sys.stdout, sys.stderr  # whatever ranx prints stays off the answers
    ranx = importlib.import_module("ranx")  # untyped

    for line in sys.stdin:
        request = json.loads(line)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba's type-safety warnings
            qrels = ranx.Qrels.from_file(request["qrels"], kind="trec")
            run = ranx.Run.from_file(request["run"], kind="trec")
            ranx.evaluate(qrels, run, request["metrics"], make_comparable=True)
            ranked = ranx.Run.from_file(request["run"], kind="trec").to_dict()
        scores = {m: {q: float(s) for q, s in run.scores[m].items()}
                  for m in request["metrics"]}
        ranked_out = {q: {d: float(s) for d, s in docs.items()} for q, docs in ranked.items()}
        answers.write(json.dumps({"scores": scores, "ranked": ranked_out}) + "\n")
        answers.flush()


if __name__ == "__main__":
    _serve()
