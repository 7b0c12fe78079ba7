"""Summaries of a run: per-type aggregation, the terminal lines around the summary table
(header, notes, diagnostics, timing), and the JSON report.

Everything here is a pure function of plain data (dicts and lists that cross xdist's wire
unchanged), so a serial run and a ``-n 2`` run that scored the same pairs print the same
numbers: results are sorted by (retriever order, pair index) before anything is averaged.
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import CacheError
from ..io import user_files
from ..scoring import ties
from ..scoring.metrics import MEMORY_RECALL, mean_metrics
from . import diagnostic_lines, summary_choice
from .headline import build_headline, headline_lines
from .run_header import NOTE_TEXT as NOTE_TEXT
from .run_header import SHOWN_REJECTIONS as SHOWN_REJECTIONS
from .run_header import budget_header as budget_header
from .run_header import header_lines
from .run_header import note_lines as note_lines
from .run_header import rejection_lines as rejection_lines
from .run_header import tokenizer_text as tokenizer_text
from .summary_table import budget_lines, table_lines, type_order
from .text_width import fit_lines

SCHEMA_VERSION = 1


PairResult = dict[str, Any]
"""One scored (pair, retriever): retriever, index, question_id, question_type, question,
question_date, gold, gold_source, ranked, metrics, notes, latency_ms, the diagnostics' facts
(returned, fusion, component_sizes), ties (:func:`.ties.pair_ties`) and explain
(:func:`pytest_retrieval_eval.retrievers.ranking.explain_facts`)."""


def sort_results(results: Iterable[PairResult], retrievers: Sequence[str]) -> list[PairResult]:
    """Deterministic order: retrievers as configured, then the pair's position in the file."""
    order = {name: i for i, name in enumerate(retrievers)}
    return sorted(results, key=lambda r: (order.get(r["retriever"], len(order)),
                                          r["retriever"], r["index"]))


def summarize(results: Sequence[PairResult], retrievers: Sequence[str]) -> dict[str, Any]:
    """``{retriever: {"overall": {n, metrics…}, "by_type": {type: {n, metrics…}}}}``."""
    summary: dict[str, Any] = {}
    metrics = [r["metrics"] for r in results]
    if any(key.startswith(f"{MEMORY_RECALL}@") for m in metrics for key in m):
        from .memory_lines import summary_metrics  # a memory store ran

        metrics = summary_metrics(results)  # a session store's memory_recall@k: its recall@k
    for name in retrievers:
        mine = [(r, m) for r, m in zip(results, metrics, strict=True) if r["retriever"] == name]
        by_type: dict[str, Any] = {}
        for qtype in sorted({r["question_type"] for r, _ in mine}, key=type_order):
            rows = [m for r, m in mine if r["question_type"] == qtype]
            by_type[qtype] = {"n": len(rows), **mean_metrics(rows)}
        summary[name] = {
            "overall": {"n": len(mine), **mean_metrics(m for _, m in mine)},
            "by_type": by_type,
        }
    return summary


def drift(results: Sequence[PairResult], a: str, b: str, k: int) -> dict[str, int] | None:
    """How many pairs got an identical top ``k`` from retrievers ``a`` and ``b``."""
    tops: dict[str, dict[str, list[str]]] = {a: {}, b: {}}
    for r in results:
        if r["retriever"] in tops:
            tops[r["retriever"]][r["question_id"]] = list(r["ranked"][:k])
    both = set(tops[a]) & set(tops[b])
    if not both:
        return None
    same = sum(1 for qid in both if tops[a][qid] == tops[b][qid])
    return {"k": k, "pairs": len(both), "identical": same}


def latency_summary(results: Sequence[PairResult]) -> dict[str, dict[str, float]]:
    """Median and p95 milliseconds per retriever (retrieval) and for query embedding."""
    buckets: dict[str, list[float]] = {}
    for r in results:
        lat = r.get("latency_ms") or {}
        if lat.get("retrieval") is not None:
            buckets.setdefault(r["retriever"], []).append(float(lat["retrieval"]))
        if lat.get("query_embedding") is not None:
            buckets.setdefault("query_embedding", []).append(float(lat["query_embedding"]))
    out: dict[str, dict[str, float]] = {}
    for name, values in buckets.items():
        values.sort()
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        out[name] = {"n": len(values), "median": statistics.median(values), "p95": p95}
    return out


def _median_p95(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return {"n": len(values), "median": statistics.median(values), "p95": p95}


def timing_summary(results: Sequence[PairResult]) -> dict[str, dict[str, Any]]:
    """Per retriever: ``query`` (rank time only), ``overhead`` (the harness's own time per
    item: the item's wall time less ingest, rank, query embedding and the pair's inputs),
    ``inputs`` (``total_ms``, median and p95 of the time items spent getting their pair's
    vectors, query vector and store: a pair's first item reads them, whatever its
    retriever, so they are kept apart from its overhead) and, for a retriever
    with ``index``, ``ingest`` (``total_ms`` and ``personas``, with the median and p95 of one
    persona's ``index``), in milliseconds; a store's ``startup``, ``transport`` and
    ``footprint`` where it has them (:func:`.cost_lines.costs`)."""
    out: dict[str, dict[str, Any]] = {}
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    footprints: dict[str, list[Mapping[str, Any]]] = {}
    servers: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        if (r.get("latency_ms") or {}).get("retrieval") is not None:
            by_name.setdefault(r["retriever"], []).append(r["latency_ms"])
            if isinstance(r.get("footprint"), Mapping):
                footprints.setdefault(r["retriever"], []).append(r["footprint"])
            if isinstance(r.get("server"), Mapping):  # an mcp: store's calls and misses
                servers.setdefault(r["retriever"], []).append(r["server"])
    for name, lats in by_name.items():
        entry: dict[str, Any] = {"query": _median_p95([float(x["retrieval"]) for x in lats])}
        overhead = [float(x["overhead"]) for x in lats if x.get("overhead") is not None]
        if overhead:
            entry["overhead"] = _median_p95(overhead)
        inputs = [float(x["inputs"]) for x in lats if x.get("inputs") is not None]
        if inputs:  # the pair's vectors, query vector and store: its first item reads them
            entry["inputs"] = {"total_ms": sum(inputs), **_median_p95(inputs)}
        startup = [float(x["startup"]) for x in lats if x.get("startup") is not None]
        if startup:  # a store's start-up, once per process that ranked with it
            entry["startup_ms"] = sum(startup)
        if any("ingest" in x for x in lats):
            ingest = [float(x["ingest"]) for x in lats if x.get("ingest") is not None]
            entry["ingest"] = {"total_ms": sum(ingest), "personas": len(ingest),
                               **({k: v for k, v in _median_p95(ingest).items() if k != "n"}
                                  if ingest else {})}
        if any(isinstance(x.get("parts"), Mapping) for x in lats):
            from .part_timing import part_timing

            parts = part_timing(lats)  # a fused store's parts, inside its own (RRF)
            if parts:
                entry["parts"] = parts
        if name in footprints or any(x.get(c) is not None for x in lats for c in _COSTS):
            from .cost_lines import costs

            entry.update(costs(lats, footprints.get(name, [])))
        if name in servers:
            from .cost_lines import server_counts

            entry["server"] = server_counts(servers[name])
        out[name] = entry
    return out


#: What a pair's ``latency_ms`` holds of a store's costs (:func:`.cost_lines.costs`), and
#: what a retriever's timing entry then holds (:func:`.cost_lines.cost_phrases`): where none
#: is there, cost_lines is not loaded.
_COSTS = ("startup", "transport")
_COST_ENTRIES = ("startup", "transport", "footprint", "server", "llm")


def _cost_phrases(entry: Mapping[str, Any]) -> list[str]:
    if not any(entry.get(key) for key in _COST_ENTRIES):
        return []
    from .cost_lines import cost_phrases

    return cost_phrases(entry)


def _reference_lines(section: object, width: int) -> list[str]:
    """The ``ref_recall@k`` table of ``--retrieval-eval-reference`` ([] without it)."""
    if not isinstance(section, Mapping):
        return []
    from .reference_lines import reference_lines

    return reference_lines(section, width)


def _collect_configs(results: Iterable[PairResult]) -> tuple[dict[str, Any], list[PairResult]]:
    """:func:`.config_lines.collect`, which is loaded only when some result holds a config."""
    results = list(results)
    if not any("config" in r for r in results):
        return {}, results
    from .config_lines import collect

    return collect(results)


def timing_lines(timing: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per retriever with ``index`` or a start-up (ingest apart from its queries;
    start-up, transport and footprint apart from both), and one of the harness's own time
    per item."""
    lines = []
    for name, entry in timing.items():
        ingest = entry.get("ingest")
        costs = _cost_phrases(entry)
        if ingest is None and not entry.get("startup"):
            continue
        query = entry["query"]
        phrases = []
        if ingest is not None:
            per = (f" (median {ingest['median']:.1f} ms, p95 {ingest['p95']:.1f})"
                   if ingest.get("personas") else "")
            phrases.append(f"ingest {ingest['total_ms'] / 1000.0:.2f} s for "
                           f"{ingest['personas']} persona(s){per}")
        phrases.append(f"query {query['median']:.1f} ms (p95 {query['p95']:.1f})"
                       + (", ingest excluded" if ingest is not None else ""))
        lines.append(f"{name}: " + "; ".join([*phrases, *costs]))
    if any(entry.get("parts") for entry in timing.values()):
        from .part_timing import part_lines  # a fused store's parts (RRF)

        lines.extend(part_lines(timing))
    overhead = [f"{name} {e['overhead']['median']:.1f} ms" for name, e in timing.items()
                if e.get("overhead")]
    if overhead:
        inputs = sum(e["inputs"]["total_ms"] for e in timing.values() if e.get("inputs"))
        lines.append("harness overhead per item (median): " + ", ".join(overhead) + (
            f"; apart: the pairs' vectors and stores, read once a pair, {inputs:.0f} ms in all"
            if inputs else ""))
    return lines

def budget_section(results: Sequence[PairResult], retrievers: Sequence[str],
                   budget: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON's ``budget``: the budgets, the tokenizer, and per retriever how many pairs'
    whole rankings held fewer tokens than a budget (``ended_by_ranking``: their
    recall@<B>tok counts a context shorter than B)."""
    short: dict[str, dict[str, int]] = {}
    for name in retrievers:
        mine = [r.get("budget") or {} for r in results if r["retriever"] == name]
        counts = {str(b): sum(1 for f in mine if (f.get("ended") or {}).get(str(b)) == "ranking")
                  for b in budget["budgets"]}
        if any(counts.values()):
            short[name] = counts
    return {**budget, "ended_by_ranking": short}


def _budget_notes(report: Mapping[str, Any]) -> list[str]:
    short = (report.get("budget") or {}).get("ended_by_ranking") or {}
    lines = []
    for name, counts in short.items():
        worst = max(counts, key=lambda b: (counts[b], int(b)))
        lines.append(f"budget: {name}'s whole ranking holds fewer than {worst} tokens in "
                     f"{counts[worst]} pair(s): its context there is every memory it ranked")
    return lines


def terminal_lines(report: Mapping[str, Any], width: int = 80, *,
                   verbose: bool = False, overall_only: bool = False,
                   tables: Sequence[str] | None = None) -> list[str]:
    """Everything the terminal summary prints, from a finished report (``width``: the
    terminal's, which the table rows and the diagnostics lines fit; the other lines are
    cut at spaces to fit it, see :func:`fit_lines`).

    By default (issue 38, item 2): the header, the main table (recall@k; recall_any@k under
    LongMemEval's protocol), the ties and the diagnostics in a line each, the headline.
    ``tables`` (``--retrieval-eval-tables``: names, or ``all``) chooses the tables and the
    timing lines; ``verbose`` (``-v``, without ``tables``): all of them, and the diagnostics
    per retriever and per question type; ``overall_only`` (``-qq``): the chosen tables'
    overall rows and the errors, nothing else."""
    info = report["info"]
    choice = summary_choice.chosen(report, tables, verbose)
    lines = fit_lines(header_lines(info, budget_words="budget" in choice.shown), width)
    if not report["summary"] or not any(
            s["overall"]["n"] for s in report["summary"].values()):
        failed = len(report.get("errors") or [])
        return [*lines, *fit_lines([_nothing_scored(info, failed)]
                                   + ([] if failed else _error_lines(report)), width)]
    shown = table_lines(report["summary"], report["retrievers"], report["ks"],
                        choice.families, width, overall_only=overall_only
                        ) if choice.families else []
    budget = report.get("budget") or {}
    budget_table = budget_lines(report["summary"], report["retrievers"],
                                budget.get("budgets") or [], report["ks"], width,
                                overall_only=overall_only) if "budget" in choice.shown else []
    if budget_table:
        shown = [*shown, "", *budget_table] if shown else budget_table
    ref_table = _reference_lines(report.get("reference"), width)
    if ref_table:
        shown = [*shown, "", *ref_table] if shown else ref_table
    unknown = fit_lines(choice.unknown_lines(), width)
    if overall_only:
        return [*shown, *fit_lines(_error_lines(report), width), *unknown]
    lines.extend(["", *shown] if shown else [])
    if budget_table:
        lines.extend(fit_lines(_budget_notes(report), width))
    ties_line = diagnostic_lines.tie_line(report.get("ties") or {}, report["retrievers"])
    unscored = diagnostic_lines.no_scores_line(report.get("pairs") or [], report["retrievers"])
    tie_block = [line for line in (ties_line, unscored) if line]
    lines.extend(["", *fit_lines(tie_block, width)] if tie_block else [])
    diagnostics = report.get("diagnostics") or {}
    if verbose:
        notes = diagnostic_lines.lines(diagnostics, report["retrievers"], report["ks"], width,
                                       verbose=True)
    else:
        notes = fit_lines(diagnostic_lines.misses_line(diagnostics, report["retrievers"]),
                          width)
    lines.extend(["", *notes] if notes else [])
    lines.extend(headline_lines(report.get("headline"), width))
    tail: list[str] = []
    for d in report.get("drift") or []:
        tail.append(f"drift {d['a']} vs {d['b']}: {d['identical']} of {d['pairs']} pairs have "
                     f"an identical top {d['k']}")
    if any(isinstance(e, Mapping) and e.get("server") for e in
           (report.get("timing") or {}).values()):
        from .cost_lines import server_notes  # an mcp: store's refusals and misses

        tail.extend(server_notes(report.get("timing") or {}))
    if "timing" in choice.shown:
        lat = report.get("latency_ms") or {}
        if lat:
            parts = [f"{name} {v['median']:.1f} ms (p95 {v['p95']:.1f})"
                     for name, v in lat.items()]
            tail.append("median latency per query: " + ", ".join(parts))
        tail.extend(timing_lines(report.get("timing") or {}))
    tail.extend(_cut_lines(report))
    return [*lines, *fit_lines([*tail, *_error_lines(report)], width), *unknown]


def _cut_lines(report: Mapping[str, Any]) -> list[str]:
    """Where a store's iterator was read no further than its bound (issue 43.4): its
    ranking is what that many items covered, said rather than silent."""
    cut: dict[str, list[int]] = {}
    for pair in report.get("pairs") or []:
        if isinstance(pair.get("read_cut"), int):
            cut.setdefault(str(pair["retriever"]), []).append(pair["read_cut"])
    return [f"read cut: {name}: {len(at)} pair(s) ranked from the first {max(at)} items of "
            "an iterator, short of max-k sessions; return a list to be read to the end"
            for name, at in cut.items()]


def _nothing_scored(info: Mapping[str, Any], failed: int = 0) -> str:
    """"no pair was scored", and why: the ``failed`` items that ran all failed (the line
    stands for the errors line then), or the selection took every pair."""
    skipped = info.get("skipped") or {}
    if failed:
        chosen = "selected " if skipped.get("not_selected") else ""
        return (f"no pair was scored: {failed} {chosen}item(s) failed; see their failures "
                "above")
    if skipped.get("not_selected") and not info.get("scored"):
        return "no pair was scored: -k, -m or node ids chose none (list the items: --co -q)"
    return "no pair was scored"


def _error_lines(report: Mapping[str, Any]) -> list[str]:
    errors = report.get("errors") or []
    return [f"errors: {len(errors)} item(s) failed; see their failures above"] if errors else []


def build_report(info: Mapping[str, Any], results: Iterable[PairResult],
                 errors: Iterable[Mapping[str, Any]], *, report_path: str | None = None,
                 rerun: Sequence[str] = ("--retrieval-eval",),
                 shown: Collection[tuple[str, str]] = ()) -> dict[str, Any]:
    """The JSON report (schema documented in the README). ``report_path`` (the JSON this
    run writes), ``rerun`` (the run's options to repeat) and ``shown`` (the items the run
    explains under ``-v``) go into the headline's next command
    (:func:`.headline.build_headline`)."""
    configs, results = _collect_configs(results)  # one per retriever (store_config.py)
    # Rankings handed in by user tests (retrieval_eval_record) are columns of their own.
    retrievers = list(dict.fromkeys([*info["retrievers"], *(r["retriever"] for r in results)]))
    ks = list(info["ks"])
    ordered = sort_results(results, retrievers)
    if any("memories" in r for r in ordered):  # a memory store ran: turn_recall@k over
        # every pair whose gold marks turns (issue 43.1)
        from ..scoring.memory_metrics import complete_turn_recall

        complete_turn_recall(ordered)
    reference = None  # --retrieval-eval-reference: ref_recall@k, from every worker's pairs
    if info.get("reference"):
        from .reference_lines import reference_section

        reference, ordered = reference_section(ordered, str(info["reference"]), retrievers,
                                               ks, type_order)
    drifts = []
    if "hybrid" in retrievers and "vipune" in retrievers:
        d = drift(ordered, "hybrid", "vipune", max(ks))
        if d:
            drifts.append({"a": "hybrid", "b": "vipune", **d})
    errors = list(errors)
    skipped_items = list((info.get("selection") or {}).get("skipped_items") or [])
    scored_qids = {r["question_id"] for r in ordered}
    attempted = scored_qids | {str(e.get("question_id")) for e in errors}  # ran, even if failed
    by_retriever = [{r["question_id"] for r in ordered if r["retriever"] == name}
                    for name in retrievers]
    scored_by_all = set.intersection(*by_retriever) if by_retriever else set()
    full_info = {**info, "scored": len(scored_qids), "retrievers": retrievers,
                 "scored_by_all": len(scored_by_all), "config": configs}
    run = _run_counts(info.get("selection") or {}, ordered, [*errors, *skipped_items])
    if info.get("created"):
        run["created"] = info["created"]
    if "git" in info:  # the host project's commit and branch (None: not a git checkout)
        run["git"] = info["git"]
    chosen = run.pop("selected_pairs", None)
    skipped = {**info["skipped"], "not_selected": max(0, info["usable"] - (
        len(attempted) if chosen is None else len(chosen | attempted)))}
    skipped["not_run"] = len((chosen or set()) - attempted  # selected, none of it ran
                             - {str(x["question_id"]) for x in skipped_items})
    skipped["items_skipped"] = len(skipped_items)  # pair items pytest skipped (not scored)
    full_info["skipped"] = skipped
    full_info["run"] = run
    if info.get("subset"):  # --retrieval-eval-subset: the choice and its CI width
        from ..data.subset import subset_info

        full_info["subset"] = subset_info(info["subset"], ordered,
                                          retrievers[0] if retrievers else None)
    report: dict[str, Any] = {
        "interrupted": run["interrupted"],
        "run": run,
        "schema_version": SCHEMA_VERSION,
        "dataset": info["dataset"],
        "protocol": info.get("protocol", "vipune"),
        "granularity": info.get("granularity", "session"),
        "lane": info["lane"],
        "model": info.get("model"),
        "ks": ks,
        "retrievers": retrievers,
        # each store's declared config and +key:value arguments (retrievers/store_config.py)
        "config": configs,
        "pairs": ordered,
        "summary": summarize(ordered, retrievers),
        "skipped": full_info["skipped"],
        "rejections": info.get("rejections", []),
        "notes": info.get("notes", {}),
        # run:PATH files: path, sha256, lines, those naming no question of the dataset
        **({"run_files": info["run_files"]} if info.get("run_files") else {}),
        "subset": full_info.get("subset"),
        **({"budget": budget_section(ordered, retrievers, info["budget"])}
           if info.get("budget") else {}),
        **({"reference": reference} if reference is not None else {}),
        "drift": drifts,
        **diagnostic_lines.report_sections(ordered, retrievers, ks, type_order),
        "ties": ties.summarize(ordered, retrievers),
        "latency_ms": latency_summary(ordered),
        "timing": timing_summary(ordered),
        "errors": sorted(errors, key=lambda e: (str(e.get("retriever")),
                                                str(e.get("question_id")))),
        "skipped_items": skipped_items,
        "info": full_info,
    }
    report["headline"] = build_headline(report, report_path=report_path, rerun=rerun,
                                        shown=shown)
    return report


def _run_counts(selection: Mapping[str, Any], results: Sequence[PairResult],
                errors: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How much of the selection ran: ``interrupted`` (Ctrl-C, or a stop such as ``-x``
    before the last selected item), ``items_selected``, ``items_run`` (scored or failed)."""
    ran = ({(r["question_id"], r["retriever"]) for r in results}
           | {(str(e.get("question_id")), str(e.get("retriever"))) for e in errors})
    out: dict[str, Any] = {"interrupted": bool(selection.get("interrupted")),
                           "items_run": len(ran)}
    if selection.get("selected") is not None:
        chosen = {(str(q), str(r)) for q, r in selection["selected"]}
        out["items_selected"] = len(chosen)
        out["selected_pairs"] = {q for q, _ in chosen}
        if selection.get("stopped") and len(chosen - ran) > 0:
            out["interrupted"] = True
    return out


def write_json(report: Mapping[str, Any], path: Path,
               option: str = "--retrieval-eval-json") -> None:
    """Write the report atomically (temp file + rename at the resolved path: a symlink is
    written through, a FIFO, device, socket or directory is refused): never a half-written
    file, never bare ``NaN`` (``allow_nan=False``).

    Raises :class:`CacheError` (one line, naming ``option`` as the fix) when ``path`` cannot
    be written or the report holds a number JSON cannot hold.
    """
    from ..boundary.outputs import output_refusal

    refused = output_refusal(f"JSON report {option}", path, "json")
    if refused is not None:  # only where no file is, or over a report of ours (issue 43.11)
        raise CacheError(refused)
    public = {k: v for k, v in report.items() if k != "info"}
    try:
        text = report_text(public)
    except ValueError:
        raise CacheError(
            f"JSON report {path} not written: it holds a NaN or infinite number, which JSON "
            "cannot hold; report this as a bug") from None
    try:
        user_files.replace_text(path, text)
    except OSError as exc:
        raise CacheError(f"JSON report {path} cannot be written ({user_files.fault(exc, path)}); "
                         f"pass another {option}") from None


def report_text(report: Mapping[str, Any]) -> str:
    """The report as JSON text: indented one space, except each of ``pairs``, written
    compact on a line of its own (by the C encoder: the indented encoder is pure Python,
    a second of a full-M run's report; issue 35, items 3 and 5). The same value either way
    for any JSON reader; a pair is a line to ``grep``. ``ValueError`` for a NaN or an
    infinite number."""
    pairs = report.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        return user_files.json_text(report, indent=1, sort_keys=False) + "\n"
    # The pairs are stood in for by a string no dataset text holds (a fresh uuid4), then
    # that string's JSON line is replaced by the pairs, one compact line each.
    mark = f"@pairs-{uuid.uuid4().hex}"
    lines = ",\n  ".join(user_files.json_text(pair, separators=(",", ":")) for pair in pairs)
    text = user_files.json_text({**report, "pairs": [mark]}, indent=1, sort_keys=False)
    stand_in = f'[\n  "{mark}"\n ]'
    if text.count(stand_in) != 1:  # pragma: no cover - a uuid4 never repeats
        return user_files.json_text(report, indent=1, sort_keys=False) + "\n"
    return text.replace(stand_in, f"[\n  {lines}\n ]") + "\n"
