"""The summary's headline (issue 38, item 1): a few lines under the table a reader acts on,
derived from the run's numbers (:mod:`pytest_retrieval_eval.scoring.headline`), never canned,
and kept in the JSON report's ``headline`` (the figures and the lines).

- ``best:`` the best real retriever per k (and per budget), ties named, the self-check never;
- ``weakest:`` each question type that is some retriever's weakest, and who is 0 there at
  every k;
- ``most misses:`` the diagnostic that explains most misses (no rows, fewer rows than k);
- ``next:`` one command on this run's own data that shows why: ``retrieval-eval explain``
  of the report written, or the same run's one item under ``-v`` (pytest's in-run explain).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..scoring import headline as figures
from .diagnostic_lines import fts_ands_words

__all__ = ["build_headline", "headline_lines"]

#: Why an FTS-only retriever returned nothing, in the headline's few words (the diagnostics'
#: line says it in full: :data:`.diagnostic_lines.FTS_AND_HINT`).
AND_WORDS = "vipune ANDs the query's words"

#: A name ``-k`` reads as one word of its expression (pytest's ident: word characters and
#: ``: + - . [ ] \ /``); anything else is selected by its node id instead.
_K_WORD = re.compile(r"[\w:+\-.\[\]/]+")


def _names(names: Sequence[str]) -> str:
    return ", ".join(names)


def _cut(metric: str) -> str:
    return "@" + metric.rpartition("@")[2]


def build_headline(report: Mapping[str, Any], *, report_path: str | None = None,
                   rerun: Sequence[str] = ("--retrieval-eval",),
                   shown: Collection[tuple[str, str]] = ()) -> dict[str, Any]:
    """The headline of a built report (``summary``, ``pairs``, ``ks``, ``retrievers``,
    ``budget``): its figures and ``lines`` (unwrapped; :func:`headline_lines` fits them).
    ``report_path``: the JSON report this run writes (the next command explains from it);
    without one, ``rerun`` (the options of this run to repeat, ``=`` form) and the item's
    ``-v`` explain are the next command. ``shown``: the (question id, retriever) this
    run explains under ``-v``; a next command that would show one of them again is left
    out (running ``next:`` does not print the same ``next:``)."""
    from .summary_table import families_for

    summary = report.get("summary") or {}
    retrievers = list(report.get("retrievers") or [])
    ks = list(report.get("ks") or [])
    family = families_for(str(report.get("protocol") or "vipune"),
                          str(report.get("granularity") or "session"))[0][0]
    budgets = list((report.get("budget") or {}).get("budgets") or [])
    if not ks or not figures.real_retrievers(summary, retrievers):
        return {"lines": []}
    best = figures.best_per_cut(summary, retrievers, family, ks)
    if budgets:
        best += figures.best_per_cut(summary, retrievers, "recall", [f"{b}tok" for b in budgets])
    weakest = figures.weakest_types(summary, retrievers, family, ks)
    missed = figures.misses(report.get("pairs") or [], retrievers, ks)
    explained = figures.explained_misses(missed)
    target = _target(best, figures.real_retrievers(summary, retrievers))
    types = [w["question_type"] for w in weakest if target in w["weakest_for"]]
    question = figures.next_question(report.get("pairs") or [], family, target, ks, types)
    if question is not None and (question["question_id"], question["retriever"]) in set(shown):
        question = None  # this run shows it: the command would repeat this run
    command = None if question is None else _command(question, report_path, rerun)
    out: dict[str, Any] = {"family": family, "best": best, "weakest": weakest,
                           "misses": missed, "explained": explained,
                           "next": None if question is None else {**question,
                                                                  "command": command}}
    out["lines"] = _lines(out, max(ks))
    return out


def _target(best: Sequence[Mapping[str, Any]], names: Sequence[str]) -> str:
    """The retriever the next command looks at: the best at the largest k (the first named
    on a tie), else the run's first real retriever."""
    at_top = [b for b in best if not str(b["metric"]).endswith("tok")]
    return str(at_top[-1]["retrievers"][0]) if at_top else names[0]


def _command(question: Mapping[str, str], report_path: str | None,
             rerun: Sequence[str]) -> str:
    qid, name = question["question_id"], question.get("selector") or question["retriever"]
    if report_path is not None:
        return shlex.join(["retrieval-eval", "explain", report_path, qid,
                           f"--retriever={question['retriever']}"])
    if _K_WORD.fullmatch(qid) and _K_WORD.fullmatch(name):
        select = ["-k", f"{qid} and {name}"]
    else:
        select = [f"retrieval-eval::{question['question_type']}::{qid}::{name}"]
    return shlex.join(["pytest", *rerun, "-v", *select])


def _lines(h: Mapping[str, Any], top: int) -> list[str]:
    lines: list[str] = []
    if h["best"]:
        lines.append("best: " + "; ".join(
            f"{_cut(b['metric'])} {_names(b['retrievers'])} {b['value']:.3f}"
            for b in h["best"]))
    parts = []
    for w in h["weakest"]:
        said = [f"0 at every k for {_names(w['zero'])}"] if w["zero"] else []
        said += [f"{name} {value:.3f} @{top}" for name, value in w["values"].items()
                 if name not in w["zero"]]
        parts.append(f"{w['question_type']} ({'; '.join(said)})")
    if parts:
        lines.append("weakest: " + ", ".join(parts))
    e = h["explained"]
    if e is not None:
        name = e["retriever"]
        why = "no rows" if e["reason"] == "no_rows" else f"fewer than {top} rows"
        hint = f" ({AND_WORDS})" if e["reason"] == "no_rows" and fts_ands_words(name) else ""
        lines.append(f"most misses: {name}: {why} in {e['count']} of its {e['missed']} "
                     f"misses{hint}")
    n = h["next"]
    if n is not None:
        lines.append(f"next: {n['command']}")
        if n.get("gold"):  # what it shows, where the run's facts say it
            lines.append(f"  (it shows gold {n['gold']} at rank {n['gold_rank']}, past the "
                         f"top {top})")
    return lines


def headline_lines(headline: Mapping[str, Any] | None, width: int | None) -> list[str]:
    """The headline's lines fitted to ``width`` (continuations indented); the next command
    is never split: a ``next:`` line too long for the width puts it whole on a line of its
    own."""
    from .text_width import fit_lines

    out: list[str] = []
    for line in (headline or {}).get("lines") or []:
        if line.startswith("next: ") and width is not None and len(line) > width:
            out.extend(continued(line.removeprefix("next: "), width, "next: "))
        else:
            out.extend(fit_lines([line], width))
    return out


def continued(command: str, width: int, first: str = "", indent: str = "  ") -> list[str]:
    """A shell command wider than ``width`` as lines ending in `` \\`` (the shell joins them):
    broken between its words only, so it is still copied whole; a word wider than the line
    gets a line of its own."""
    try:
        words = [shlex.quote(w) for w in shlex.split(command)]
    except ValueError:
        return [first + command]
    if not words:
        return [first + command]
    lines: list[str] = []
    line = first + words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) + 2 > width:  # room for " \\"
            lines.append(line + " \\")
            line = indent + word
        else:
            line += " " + word
    lines.append(line)
    return lines
