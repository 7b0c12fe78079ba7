"""A store's costs beside its ingest and query time (issue 37 items 1, 2 and 4): start-up,
transport and footprint, summed per retriever for the JSON's ``timing`` and worded for the
terminal's timing line (:func:`.report.timing_lines`).

- ``startup``: ``total_ms`` over the processes that started the store, ``processes``, and the
  parts' sums (``import_ms``, ``construct_ms`` for a Python store; ``spawn_ms``, ``hello_ms``
  for a ``cmd:`` store);
- ``transport`` (a ``cmd:`` store): the plugin's side of each query (``n``, ``median``,
  ``p95``) and of the index requests (``ingest_ms``), kept out of ``query`` and ``ingest``;
- ``footprint``: ``disk_bytes`` (the workdirs' bytes after ``index``, each persona once),
  ``rss_growth_bytes`` (what the ``index`` calls added to the store's process, summed: the
  plugin's process, or a ``cmd:`` store's child), ``child_rss_bytes`` (a ``cmd:`` store's child
  after an index, the largest seen), ``approximate: true`` for the RSS figures;
- ``llm``: what the ``index`` calls spent on an LLM (the mem0 adapter's ``+infer:true``),
  summed over the personas: ``calls``, ``prompt_tokens``, ``completion_tokens``, ``ms``,
  ``personas``, and ``provider``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["cost_phrases", "costs", "server_counts", "server_notes", "size_text"]

#: The start-up parts as the pairs' ``latency_ms.startup_parts`` name them.
PARTS = ("import", "construct", "spawn", "hello")


def _median_p95(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return {"n": len(values), "median": statistics.median(values), "p95": p95}


def costs(latencies: Sequence[Mapping[str, Any]],
          footprints: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``startup``, ``transport`` and ``footprint`` entries of one retriever's timing
    (only those it has), from its pairs' ``latency_ms`` and ``footprint`` records."""
    out: dict[str, Any] = {}
    started = [x for x in latencies if x.get("startup") is not None]
    if started:
        startup: dict[str, Any] = {"total_ms": sum(float(x["startup"]) for x in started),
                                   "processes": len(started)}
        for part in PARTS:
            values = [float(p[part]) for x in started
                      if isinstance(p := x.get("startup_parts"), Mapping) and part in p]
            if values:
                startup[f"{part}_ms"] = sum(values)
        out["startup"] = startup
    queries = [float(x["transport"]) for x in latencies if x.get("transport") is not None]
    if queries:
        out["transport"] = {"query": _median_p95(queries), "ingest_ms": sum(
            float(x["ingest_transport"]) for x in latencies
            if x.get("ingest_transport") is not None)}
    if footprints:
        disk: dict[str, int] = {}
        for f in footprints:
            key = str(f.get("persona"))
            disk[key] = max(disk.get(key, 0), int(f.get("disk_bytes") or 0))
        growth = [int(f["rss_growth_bytes"]) for f in footprints
                  if f.get("rss_growth_bytes") is not None]
        child = [int(f["child_rss_bytes"]) for f in footprints
                 if f.get("child_rss_bytes") is not None]
        out["footprint"] = {
            "disk_bytes": sum(disk.values()),
            "rss_growth_bytes": sum(growth) if growth else None,
            **({"child_rss_bytes": max(child)} if child else {}),
            "approximate": True,
        }
        llm = _llm(footprints)
        if llm:
            out["llm"] = llm
    return out


def _llm(footprints: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The index calls' LLM costs summed, each persona's last index once."""
    per: dict[str, Mapping[str, Any]] = {}
    for f in footprints:
        if isinstance(f.get("llm"), Mapping):
            per[str(f.get("persona"))] = f["llm"]
    if not per:
        return None
    out: dict[str, Any] = {key: sum(int(x.get(key) or 0) for x in per.values())
                           for key in ("calls", "prompt_tokens", "completion_tokens")}
    out["ms"] = sum(float(x.get("ms") or 0.0) for x in per.values())
    out["personas"] = len(per)
    providers = sorted({str(x["provider"]) for x in per.values() if x.get("provider")})
    if providers:
        out["provider"] = ", ".join(providers)
    return out


def server_counts(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """An ``mcp:`` store's counts over its pairs' ``server`` records: ``personas``,
    ``store_calls``, ``search_calls``, ``refused`` (sessions or turns the server refused to
    store, e.g. as conflicts: ``count`` and up to 20 ``ids``), ``unmatched`` (results that
    matched no session of the persona)."""
    refused = [str(i) for r in records for i in (r.get("refused") or [])]
    return {
        "personas": sum(1 for r in records if r.get("store_calls") is not None),
        "store_calls": sum(int(r.get("store_calls") or 0) for r in records),
        "search_calls": sum(int(r.get("search_calls") or 0) for r in records),
        "refused": {"count": len(refused), "ids": refused[:20]},
        "unmatched": sum(int(r.get("unmatched") or 0) for r in records),
    }


def server_notes(timing: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per ``mcp:`` store that refused to store some of the history or returned
    results matching no session: shown with every summary, since its numbers are measured
    without them."""
    lines = []
    for name, entry in timing.items():
        server = entry.get("server")
        if not isinstance(server, Mapping):
            continue
        refused = server["refused"]
        if refused["count"]:
            shown = ", ".join(refused["ids"][:3]) + (", ..." if refused["count"] > 3 else "")
            lines.append(f"not stored: {name} refused {refused['count']} of "
                         f"{server['store_calls']} store calls ({shown}; conflicts or "
                         "invalid input): its numbers are measured without them")
        if server["unmatched"]:
            lines.append(f"unmatched: {server['unmatched']} result(s) of {name} matched no "
                         "session of their history (counted in its ranking, covering none)")
    return lines


def size_text(n: float) -> str:
    """Bytes in words: ``512 B``, ``1.0 KB``, ``50.3 MB``, ``1.20 GB`` (powers of 1000)."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1000:
        return f"{sign}{n:.0f} B"
    for unit, scale in (("KB", 1e3), ("MB", 1e6)):
        if n < scale * 1000:
            return f"{sign}{n / scale:.1f} {unit}"
    return f"{sign}{n / 1e9:.2f} GB"


def cost_phrases(entry: Mapping[str, Any]) -> list[str]:
    """The timing line's phrases of one retriever after its ingest and query: start-up,
    transport, footprint (those it has)."""
    after: list[str] = []
    startup = entry.get("startup")
    if startup:
        per = (f" in {startup['processes']} processes" if startup.get("processes", 1) > 1
               else "")
        after.append(f"start-up {float(startup['total_ms']) / 1000.0:.2f} s{per}")
    transport = entry.get("transport")
    if transport:
        after.append(f"transport {transport['query']['median']:.1f} ms a query, "
                     f"{float(transport.get('ingest_ms') or 0.0) / 1000.0:.2f} s in ingest")
    footprint = entry.get("footprint")
    if footprint:
        words = [f"disk {size_text(footprint['disk_bytes'])}"]
        if footprint.get("rss_growth_bytes") is not None:
            growth = footprint["rss_growth_bytes"]
            words.append(f"RSS {'+' if growth >= 0 else ''}{size_text(growth)} (approx.)")
        if footprint.get("child_rss_bytes") is not None:
            words.append(f"child RSS {size_text(footprint['child_rss_bytes'])}")
        after.append(", ".join(words))
    server = entry.get("server")
    if server:
        words = [f"{server['store_calls']:,} store and {server['search_calls']:,} search "
                 f"calls for {server['personas']} persona(s)"]
        refused = server["refused"]
        if refused["count"]:
            shown = ", ".join(refused["ids"][:5]) + (", ..." if refused["count"] > 5 else "")
            words.append(f"{refused['count']} refused, not stored ({shown})")
        if server["unmatched"]:
            words.append(f"{server['unmatched']} result(s) matched no session")
        after.append("; ".join(words))
    llm = entry.get("llm")
    if llm:
        after.append(f"LLM {llm['calls']} calls, {llm['prompt_tokens']:,} prompt + "
                     f"{llm['completion_tokens']:,} completion tokens in ingest "
                     f"({float(llm.get('ms') or 0.0) / 1000.0:.2f} s)")
    return after
