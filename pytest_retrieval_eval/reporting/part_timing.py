"""A fused store's parts' times (``RRF``, retrievers/fusion.py), inside the fused store's own.

Each pair's ``latency_ms.parts`` holds, per part, the milliseconds its ``rank`` calls took
for that item (``retrieval``) and its ``index`` call (``ingest``, the items that indexed a
persona). :func:`part_timing` gives the JSON's ``timing.<fused>.parts``: per part the median
and p95 query time and the ingest total with its persona count; :func:`part_lines` one
terminal line per fused store.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["part_lines", "part_timing"]


def _median_p95(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return {"n": len(values), "median": statistics.median(values), "p95": p95}


def part_timing(latencies: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Per part of one fused retriever, from its pairs' ``latency_ms``; None: no parts."""
    query: dict[str, list[float]] = {}
    ingest: dict[str, list[float]] = {}
    for lat in latencies:
        parts = lat.get("parts")
        if not isinstance(parts, Mapping):
            continue
        for label, spent in parts.items():
            if not isinstance(spent, Mapping):
                continue
            query.setdefault(str(label), [])
            if spent.get("retrieval") is not None:
                query[str(label)].append(float(spent["retrieval"]))
            if spent.get("ingest") is not None:
                ingest.setdefault(str(label), []).append(float(spent["ingest"]))
    if not query:
        return None
    out: dict[str, Any] = {}
    for label, values in query.items():
        entry: dict[str, Any] = {"query": _median_p95(values)} if values else {}
        if label in ingest:
            entry["ingest"] = {"total_ms": sum(ingest[label]), "personas": len(ingest[label])}
        out[label] = entry
    return out


def part_lines(timing: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``<fused> parts: a query 0.3 ms (p95 0.5), ingest 0.12 s; b query ...`` per fused
    retriever."""
    lines = []
    for name, entry in timing.items():
        parts = entry.get("parts")
        if not isinstance(parts, Mapping) or not parts:
            continue
        said = []
        for label, spent in parts.items():
            bits = []
            if spent.get("query"):
                bits.append(f"query {spent['query']['median']:.1f} ms "
                            f"(p95 {spent['query']['p95']:.1f})")
            if spent.get("ingest"):
                bits.append(f"ingest {spent['ingest']['total_ms'] / 1000.0:.2f} s")
            said.append(f"{label} {', '.join(bits)}" if bits else str(label))
        lines.append(f"{name} parts: " + "; ".join(said))
    return lines
