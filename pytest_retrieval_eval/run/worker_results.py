"""What a run's items produced: scored results, errors, skips and failed ``close()`` lines,
each kept once however it arrived (its own item here, an xdist item report, a worker's final
output), and what an xdist worker publishes of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..reporting.report import PairResult
from .columns import Columns


@dataclass
class WorkerResults:
    """The run's results, errors and skips; ``names`` learns from each result kept."""

    names: Columns
    results: list[PairResult] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    #: Pair items skipped (a skip mark, pytest.skip in a fixture, a plugin's skip).
    skips: list[dict[str, Any]] = field(default_factory=list)
    #: One line per ``close()`` that raised (shown as a warning on the controller).
    close_errors: list[str] = field(default_factory=list)
    _seen_results: set[tuple[str, int]] = field(default_factory=set)
    _seen_errors: set[tuple[str, str]] = field(default_factory=set)

    def add_result(self, result: PairResult) -> None:
        """Keep a scored (pair, retriever) once, however it arrived (its own item here, an
        xdist item report, a worker's final output)."""
        self.names.learn(result)
        key = (result["retriever"], result["index"])
        if key not in self._seen_results:
            self._seen_results.add(key)
            self.results.append(result)

    def add_error(self, error: Mapping[str, Any]) -> None:
        """Keep a failed (pair, retriever) once."""
        key = (str(error.get("retriever")), str(error.get("question_id")))
        if key not in self._seen_errors:
            self._seen_errors.add(key)
            self.errors.append(dict(error))

    def add_skip(self, skip: Mapping[str, Any]) -> None:
        """Keep a skipped (pair, retriever) once: not scored, named in the report."""
        if not any(s["retriever"] == skip.get("retriever")
                   and s["question_id"] == skip.get("question_id") for s in self.skips):
            self.skips.append(dict(skip))

    def skipped_items(self) -> list[dict[str, Any]]:
        """The skipped items as the report lists them: by column, sorted."""
        return sorted(
            ({**s, "retriever": self.names.display_name(s["retriever"])} for s in self.skips),
            key=lambda s: (s["retriever"], s["question_id"]))

    def worker_output(self) -> dict[str, Any]:
        """xdist worker side: what goes into ``config.workeroutput``."""
        return {"results": self.results, "errors": self.errors,
                "close_errors": self.close_errors}

    def merge_worker_output(self, output: Mapping[str, Any]) -> None:
        """xdist controller side: add what one worker published (most of it arrived already
        with the items' reports: an interrupted worker publishes nothing)."""
        for result in output.get("results", []):
            self.add_result(result)
        for error in output.get("errors", []):
            self.add_error(error)
        self.close_errors.extend(str(e) for e in output.get("close_errors", []))
