"""The summary, and a comparison, as GitHub-flavoured Markdown (job summaries, PR comments).

Layout: a one-line header (dataset, lane, model, protocol where the report has one), then one
table per metric family the report holds (the tables the terminal's ``-v`` shows:
``memory_recall@k`` and ``turn_recall@k`` where a memory store ran, the budget's). Summary
tables have a row per question type plus ``overall`` and the retrievers as column groups (one
column per k); the best value of each k in a row is bold only when it is strictly the best (no
bold on a tie, none on a row of zeros; the self-check ``oracle`` is never best, issue 38 item
11). The diagnostics follow in a collapsed ``<details>``. Comparison tables have the same rows,
and per retriever the columns m (pairs that differ), base -> new, delta with its 95% CI, and
the Holm-adjusted p-value (bold and marked ``*`` when significant, marked ``†`` when too few
pairs differ to reach the level), then a list: what ``†`` means, and per retriever the smallest
delta its overall row could detect (an estimate); the agreement of the rankings (identical top
k, mean overlap@k) and the gained and lost questions follow, each in a ``<details>``.

Text from the dataset or a saved report (question ids, the dataset's and the reports' names)
is written as a code span (:func:`code`): no newline of it starts a heading, and no HTML or
link of it is live, in a file or in ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import printable
from ..scoring.headline import is_self_check
from .agreement_lines import agreement_markdown
from .compare_lines import (
    UNREACHABLE_MARK,
    detectable_words,
    format_p,
    unreachable,
    unreachable_lines,
)
from .config_lines import compare_config_lines, config_markdown
from .reference_lines import reference_markdown
from .summary_table import families_for, type_order

#: What reading a malformed section of a saved report raises.
_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError)
#: Diagnostics are worded for a line this wide: every phrase in its longest form.
DIAGNOSTICS_WIDTH = 10_000


#: Characters that start Markdown emphasis, code, links, strike-through or a table's cell
#: break, escaped with a backslash; ``&``, ``<`` and ``>`` become entities (no live HTML).
_MARKDOWN_MARKS = frozenset("\\`*_[]~|#!")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def inert(text: object) -> str:
    """``text`` as plain Markdown text that renders as written: control characters escaped
    (no newline ends a table row), Markdown marks backslash-escaped and HTML's ``&<>`` as
    entities, so ``**c**``, ``<img src=x onerror=…>`` and ``|`` in a retriever's name are shown,
    never live (in a table cell, a heading and ``$GITHUB_STEP_SUMMARY`` alike)."""
    return "".join(_ENTITIES.get(c) or (f"\\{c}" if c in _MARKDOWN_MARKS else c)
                   for c in printable(text))


def _cell(text: object) -> str:
    return inert(text)


def code(text: object, in_table: bool = False) -> str:
    """``text`` as one Markdown code span: control characters escaped (a newline cannot end
    the line), fenced with more backticks than any run inside it, padded with a space where
    it starts or ends with a backtick; HTML, links and emphasis in it are shown, not live.
    ``in_table``: ``|`` escaped too (GFM splits a table row on it, even in a code span)."""
    body = printable(text)
    if not body:
        return "` `"
    runs = [len(r) for r in "".join(c if c == "`" else " " for c in body).split()]
    longest = max(runs, default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or (
        body.startswith(" ") and body.endswith(" ") and body.strip()) else ""
    if in_table:
        body = body.replace("|", "\\|")
    return f"{fence}{pad}{body}{pad}{fence}"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right_from: int = 1) -> list[str]:
    align = [":--" if i < right_from else "--:" for i in range(len(head))]
    return ["| " + " | ".join(head) + " |",  # heads hold names made inert where built
            "| " + " | ".join(align) + " |",
            *("| " + " | ".join(row) + " |" for row in rows)]


def header_line(report: Mapping[str, Any]) -> str:
    """``**retrieval-eval** · dataset … · lane … · model … · protocol …``."""
    ds = report.get("dataset") or {}
    model = report.get("model") or {}
    name = model.get("name") if isinstance(model, dict) else None
    parts = [f"dataset {code(ds.get('name', '?'))} (sha256 "
             f"{code(str(ds.get('sha256', ''))[:12])})",
             f"lane {report.get('lane', '?')}", f"model {code(name or 'none')}"]
    protocol = report.get("protocol")
    if protocol is not None:
        granularity = report.get("granularity")
        parts.append(f"protocol {protocol}" + (f" ({granularity} granularity)"
                                                if granularity not in (None, "session") else ""))
    run = report.get("run") or {}
    if report.get("interrupted") or run.get("interrupted"):
        parts.append("**interrupted**: partial numbers")
    return "**retrieval-eval** · " + " · ".join(parts)


def summary_markdown(report: Mapping[str, Any]) -> str:
    """The report's summary tables, one per metric family."""
    summary = report.get("summary") or {}
    retrievers = [r for r in report["retrievers"] if r in summary]
    lines = [header_line(report), "", *config_markdown(report, code)]
    if not retrievers or not any(summary[r]["overall"]["n"] for r in retrievers):
        return "\n".join([*lines, "No pair was scored.", ""])
    ks = list(report["ks"])
    qtypes = sorted({t for r in retrievers for t in summary[r]["by_type"]}, key=type_order)
    # every family the report's summary holds (memory_recall@k, turn_recall@k, a newer
    # metric's), as the terminal's -v shows them (summary_choice.chosen)
    families = families_for(str(report.get("protocol") or "vipune"),
                            str(report.get("granularity") or "session"), summary)
    for family, _ in families:
        lines.extend(_family_table(summary, retrievers, qtypes, family, ks, f"{family}@k"))
    budgets = list((report.get("budget") or {}).get("budgets") or [])
    if budgets and any(f"recall@{budgets[0]}tok" in summary[r]["overall"] for r in retrievers):
        tokenizer = (report.get("budget") or {}).get("tokenizer") or {}
        name = code(tokenizer.get("name", "?"))
        lines.extend(_family_table(summary, retrievers, qtypes, "recall",
                                   [f"{b}tok" for b in budgets],
                                   f"recall@B (B tokens of {name})"))
        lines.extend(_family_table(summary, retrievers, qtypes, "tokens", ks,
                                   f"tokens@k (mean tokens of the first k memories, {name})",
                                   digits=0, bold=False))
    lines.extend(reference_markdown(report, inert, code))
    lines.extend(_diagnostics(report, retrievers))
    return "\n".join(lines)


def _family_table(summary: Mapping[str, Any], retrievers: Sequence[str],
                  qtypes: Sequence[str], family: str, cuts: Sequence[int | str], title: str,
                  *, digits: int = 3, bold: bool = True) -> list[str]:
    """One family's table: a row per question type and overall, a column per retriever and
    cut-off (``k``, or a budget ``500tok``), the strictly best value of a column bold."""
    head = ["question type", "n", *(f"{inert(r)} @{k}" for r in retrievers for k in cuts)]
    rows = []
    for qtype in [*qtypes, "overall"]:
        entries = [summary[r]["overall"] if qtype == "overall"
                   else summary[r]["by_type"].get(qtype) for r in retrievers]
        n = max(int(e["n"]) for e in entries if e is not None)
        # The self-check (oracle) ranks gold first by construction: never "best" (issue 38.11).
        best = {k: strict_best([None if e is None or is_self_check(name)
                                else e.get(f"{family}@{k}")
                                for name, e in zip(retrievers, entries, strict=True)])
                if bold else None for k in cuts}
        cells: list[str] = []
        for i, e in enumerate(entries):
            for k in cuts:
                value = None if e is None else e.get(f"{family}@{k}")
                text = "-" if value is None else f"{value:.{digits}f}"
                if best[k] == i:
                    text = f"**{text}**"
                cells.append(text)
        label = f"**{qtype}**" if qtype == "overall" else qtype
        rows.append([label, str(n), *cells])
    return [f"#### {title}", "", *_table(head, rows, right_from=1), ""]


def strict_best(values: Sequence[float | None]) -> int | None:
    """The index of the one highest value when it is strictly higher than every other (as
    printed, to three decimals) and above 0; None on a tie, an all-zero row, or one value.
    A None (no value, or a self-check's, left out by the caller) is never best."""
    shown = [(round(v, 3), i) for i, v in enumerate(values) if v is not None]
    if len(shown) < 2:
        return None
    top = max(v for v, _ in shown)
    at_top = [i for v, i in shown if v == top]
    return at_top[0] if len(at_top) == 1 and top > 0 else None


def _details(summary: str, body: Sequence[str]) -> list[str]:
    """A collapsed ``<details>`` block (GitHub renders Markdown inside after a blank line)."""
    # An HTML block: Markdown (code spans too) is not read inside <summary>, so what it holds
    # of names is made inert as HTML text.
    html = "".join(_ENTITIES.get(c, c) for c in summary)
    return ["<details>", f"<summary>{html}</summary>", "", *body, "", "</details>", ""]


def _diagnostics(report: Mapping[str, Any], retrievers: Sequence[str]) -> list[str]:
    """The diagnostics under the terminal's tables, folded (words from
    :func:`.diagnostic_lines.lines`, in their longest forms)."""
    diagnostics = report.get("diagnostics")
    if not isinstance(diagnostics, Mapping) or not diagnostics:
        return []
    from .diagnostic_lines import lines

    try:
        said = lines(diagnostics, retrievers, list(report["ks"]), width=DIAGNOSTICS_WIDTH,
                     verbose=True)  # per question type too, as the terminal's -v
    except _UNREADABLE:
        # A hand-edited or foreign section: the tables stand, the diagnostics say why not.
        return _details("Diagnostics", ["- not shown: the report's `diagnostics` section "
                                        "cannot be read"])
    if not said:
        return []
    return _details("Diagnostics", [f"  - {_cell(line.strip())}" if line.startswith("  ")
                                    else f"- {_cell(line)}" for line in said])


def comparison_markdown(cmp: Mapping[str, Any]) -> str:
    """A comparison: one table per metric, retrievers as column groups."""
    base, new = cmp["base"], cmp["new"]
    method = cmp["method"]
    alpha = float(method.get("alpha", 0.05))
    def both(key: str) -> str:
        a, b = base.get(key), new.get(key)
        return code(a) if a == b else f"{code(a)} → {code(b)}"

    facts = [f"dataset {both('dataset')}", f"lane {both('lane')}", f"model {both('model')}"]
    if base.get("protocol") is not None or new.get("protocol") is not None:
        facts.append(f"protocol {both('protocol')}")
    lines = [f"**retrieval-eval compare** · base {code(base['label'])} → new "
             f"{code(new['label'])} · "
             + " · ".join(facts) + f" · {cmp['matched']} matched pair(s), "
             f"{len(cmp['only_in_base'])} only in base, {len(cmp['only_in_new'])} only in new",
             ""]
    lines.extend(f"{inert(line)}  " for line in compare_config_lines(cmp))
    if cmp.get("config"):
        lines.append("")
    if cmp.get("different_data"):
        lines.extend([f"Different data (`--allow-different-data`): only the pairs both reports "
                      f"hold are compared (`{base['sha256'][:12]}` vs `{new['sha256'][:12]}`).",
                      ""])
    for metric, rows in cmp["rows"].items():
        retrievers = list(dict.fromkeys(r["retriever"] for r in rows))
        by = {(r["retriever"], r["question_type"]): r for r in rows}
        qtypes = list(dict.fromkeys(r["question_type"] for r in rows))
        qtypes = [t for t in qtypes if t != "overall"] + ["overall"]
        head = ["question type", "n"]
        for r in retrievers:
            name = inert(r)
            head += [f"{name} m", f"{name} base → new", f"{name} Δ [95% CI]",
                     f"{name} p (Holm)"]
        table = []
        for qtype in qtypes:
            present = [by[(r, qtype)] for r in retrievers if (r, qtype) in by]
            cells = [f"**{qtype}**" if qtype == "overall" else qtype,
                     str(max(x["n"] for x in present))]
            for r in retrievers:
                x = by.get((r, qtype))
                if x is None:
                    cells += ["-", "-", "-", "-"]
                    continue
                delta = f"{x['delta']:+.3f} [{x['ci_low']:+.2f}, {x['ci_high']:+.2f}]"
                p = format_p(x["p_holm"])
                if x["significant"]:
                    delta, p = f"**{delta}**", f"**{p}** \\*"
                elif unreachable(x, alpha):
                    p = f"{p} {UNREACHABLE_MARK}"
                cells += [str(x.get("differing", "-")), f"{x['base']:.3f} → {x['new']:.3f}",
                          delta, p]
            table.append(cells)
        lines.extend([f"#### Δ {metric}", "", *_table(head, table, right_from=1), ""])
        notes = unreachable_lines(cmp, rows)
        notes += [f"{code(x['retriever'])} overall: {words}" for x in rows
                  if x["question_type"] == "overall"
                  and (words := detectable_words(x)) is not None]
        if notes:
            lines.extend([*(f"- {note}" for note in notes), ""])
    agreement = agreement_markdown(cmp, _cell, code)
    if agreement:
        lines.extend(_details("Agreement of the rankings (identical top k, mean overlap@k)",
                              agreement))
    lines.extend(_change_details(cmp))
    lines.append(f"Δ = new - base; {method['ci']} CI ({method['resamples']} resamples); p: "
                 f"{method['test']} test on the m pairs that differ ({method['permutations']} "
                 f"permutations, exact when m <= {method['exact_when_differing_at_most']}), "
                 f"Holm-adjusted across the rows of each metric; \\* = significant at "
                 f"{method['alpha']}.")
    lines.append("")
    return "\n".join(lines)


def _change_details(cmp: Mapping[str, Any]) -> list[str]:
    """Gained and lost questions per retriever and k, and the pairs on one side only, folded
    (the terminal's ``-v`` lists)."""
    primary = cmp.get("primary", "recall")
    body: list[str] = []
    for retriever, by_k in cmp["changes"].items():
        for k, v in by_k.items():
            for what in ("gained", "lost"):
                if v[what]:
                    body.append(f"- {code(retriever)} {primary}@{k} {what} "
                                f"({len(v[what])}): {', '.join(code(q) for q in v[what])}")
    for side in ("base", "new"):
        names = cmp[f"only_in_{side}"]
        if names:
            body.append(f"- only in {side} ({len(names)}, not compared): "
                        f"{', '.join(code(q) for q in names)}")
    if not body:
        return []
    counts = ", ".join(f"{code(r)} " + " ".join(
        f"@{k} +{len(v['gained'])}/-{len(v['lost'])}" for k, v in by_k.items())
        for r, by_k in cmp["changes"].items())
    return _details(f"Questions whose {primary}@k rose (+) or fell (-): {counts}", body)


def run_markdown(report: Mapping[str, Any]) -> str:
    """What a run publishes: its summary, then its comparison if it has one."""
    parts = [summary_markdown(report)]
    comparison = report.get("comparison")
    if isinstance(comparison, Mapping) and "rows" in comparison:
        try:
            parts.append(comparison_markdown(comparison))
        except _UNREADABLE:  # a saved report's section, edited or foreign: said, not raised
            parts.append("Comparison not shown: the report's `comparison` section cannot be "
                         "read; make it again with `retrieval-eval markdown BASE.json "
                         "NEW.json`\n")
    elif isinstance(comparison, Mapping) and comparison.get("refused"):
        parts.append(f"Comparison refused: {comparison['refused']}\n")
    return "\n".join(parts)
