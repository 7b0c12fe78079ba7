"""The summary table: which metric families it shows (per protocol and granularity), the
order of its question-type rows, and its rendering to a terminal width (blocks of
retrievers or ks that fit, headings wrapped at a name's breaks, never cut)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..data.pairs import QUESTION_TYPES
from ..scoring.metrics import BUDGET_SUFFIX, TOKENS
from .text_width import fit_lines

FAMILIES: tuple[tuple[str, str], ...] = (
    ("recall", "R"),
    ("recall_any", "any"),
    ("recall_all", "all"),
    ("ndcg_any", "ndcg"),
)

#: The columns under ``--retrieval-eval-protocol longmemeval``: upstream's three metrics.
LME_FAMILIES: tuple[tuple[str, str], ...] = (
    ("recall_any", "any"),
    ("recall_all", "all"),
    ("ndcg_any", "ndcg"),
)
#: At turn granularity: session metrics derived from the turn ranking.
SESSION_FAMILIES: dict[str, tuple[tuple[str, str], ...]] = {
    "vipune": (("session_recall", "sR"),),
    "longmemeval": tuple((f"session_{name}", f"s{short}") for name, short in LME_FAMILIES),
}
#: A single retriever's table holds at most this many metric columns in one row; more are
#: shown one block per metric family (so six ks stay within a terminal's width).
MAX_ROW_COLUMNS = 12


def families_for(protocol: str = "vipune", granularity: str = "session",
                 summary: Mapping[str, Any] | None = None) -> tuple[tuple[str, str], ...]:
    """The metric families the table shows for a protocol and granularity: every family the
    run computes. With a ``summary``, a family found in it but not named here (a newer
    metric, an older report) gets a table too, under its own name; ``tokens@k`` (a count,
    not a fraction) and ``recall@<B>tok`` are the budget table's (:func:`budget_lines`)."""
    base = LME_FAMILIES if protocol == "longmemeval" else FAMILIES
    extra = SESSION_FAMILIES.get(protocol, ()) if granularity == "turn" else ()
    known = (*base, *extra)
    names = {family for family, _ in known}
    found: dict[str, None] = {}
    for entry in (summary or {}).values():
        for key in entry.get("overall", {}):
            family, at, k = str(key).rpartition("@")
            if at and k.isdigit() and family not in names and family != TOKENS:
                found[family] = None
    return (*known, *((family, family) for family in found))


def type_order(qtype: str) -> tuple[int, str]:
    return (QUESTION_TYPES.index(qtype) if qtype in QUESTION_TYPES else len(QUESTION_TYPES),
            qtype)


def _fmt(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.3f}"


def _fmt_tokens(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.0f}"


#: Where a retriever's name may continue on the next heading line: after a space or one of
#: ``+ : , / = -``, or after a ``.`` that no digit follows (``mypkg.`` / ``Store``, never
#: ``0.`` / ``5``).
_NAME_BREAKS = re.compile(r"(?<=[ +:,/=-])|(?<=\.)(?!\d)")


def heading_pieces(name: str, room: int) -> list[str]:
    """A retriever's name over its columns: whole when it fits ``room``, else wrapped onto
    lines of at most ``room`` at its breaks (:data:`_NAME_BREAKS`); never cut inside a
    run of other characters (a piece with no break stays whole, and the columns under it
    widen to it). Joined back together, the pieces give the name."""
    pieces: list[str] = []
    for token in _NAME_BREAKS.split(name):
        if pieces and len((pieces[-1] + token).rstrip(" ")) <= room:
            pieces[-1] += token
        elif token:
            pieces.append(token)
    return pieces or [name]


def table_lines(summary: Mapping[str, Any], retrievers: Sequence[str],
                ks: Sequence[int | str],
                families: Sequence[tuple[str, str]] = FAMILIES,
                width: int | None = None, overall_only: bool = False, *,
                fmt: Callable[[float | None], str] = _fmt, cut: str = "k") -> list[str]:
    """The summary table: one row per question type present, then ``overall`` (only that
    row with ``overall_only``: ``-qq``).

    One retriever: one table with recall@k and its any/all variants, under a caption naming
    the retriever and each column's metric (:func:`caption`). Several: one block per
    metric family, the retrievers side by side under a second header row. With a ``width``
    (the terminal's), no row is wider: one retriever's families go one block each, several
    retrievers are split into blocks of as many as fit (the header rows repeated), and a
    retriever with more ks than fit has them split over blocks too. A heading is never
    cut: columns are as wide as their widest ``@k``, and a retriever's name wider than its
    columns wraps at its breaks (:func:`heading_pieces`) or widens them. ``fmt`` writes a
    cell; ``cut`` names the cut-off in a block's label (``recall@B``: the budget table).
    """
    qtypes = [] if overall_only else sorted(
        {t for name in retrievers for t in summary[name]["by_type"]}, key=type_order)
    label_w = max([len("question type"), *(len(t) for t in qtypes),
                   *(len(f"{family}@{cut}") for family, _ in families)])
    largest = max([int(summary[name]["overall"].get("n", 0)) for name in retrievers] or [0])
    n_w = max(4, len(f"{largest}*"))
    cell_w = max([6, *(len(f"@{k}") for k in ks)])

    def row(label: str, n: str, cells: Sequence[str]) -> str:
        return "  ".join([f"{label:<{label_w}}", f"{n:>{n_w}}", *cells]).rstrip()

    def body(columns: Sequence[tuple[str, str, int | str, int]]) -> list[str]:
        lines = []
        for qtype in [*qtypes, "overall"]:
            entries = {name: summary[name]["overall"] if qtype == "overall"
                       else summary[name]["by_type"].get(qtype) for name in retrievers}
            shown = dict.fromkeys(name for name, _, _, _ in columns)
            ns = {int(entries[name]["n"]) if entries[name] is not None else 0
                  for name in shown}
            uneven.append(len(ns) > 1)
            n_text = str(max(ns)) + ("*" if len(ns) > 1 else "")
            cells = [fmt(None if entries[name] is None
                         else entries[name].get(f"{family}@{k}")).rjust(w)
                     for name, family, k, w in columns]
            lines.append(row(qtype, n_text, cells))
        return lines

    uneven: list[bool] = []
    footnote = fit_lines(["*: the retrievers of this row scored different numbers of pairs "
                          "(items deselected, skipped or failed); n is the largest, each "
                          "one's is in the JSON summary"], width)

    fixed = label_w + 2 + n_w  # label, gap, n
    one = [(fam, k, max(cell_w, len(f"{short}@{k}"))) for fam, short in families for k in ks]
    if len(retrievers) == 1 and len(one) <= MAX_ROW_COLUMNS and (
            width is None or fixed + sum(w + 2 for _, _, w in one) <= width):
        name = retrievers[0]
        heads = [f"{short}@{k}".rjust(max(cell_w, len(f"{short}@{k}")))
                 for _, short in families for k in ks]
        return [caption(name, families, cut),
                row("question type", "n", heads),  # one retriever: even
                *body([(name, fam, k, w) for fam, k, w in one])]
    lines: list[str] = []
    for family, _ in families:
        for block in _blocks(retrievers, ks, cell_w, None if width is None else width - fixed):
            if lines:
                lines.append("")
            depth = max(len(pieces) for _, _, _, pieces in block)
            for i in range(depth):
                names = [(pieces[i] if i < len(pieces) else "").center(sum(widths)
                                                                       + 2 * len(widths) - 2)
                         for _, _, widths, pieces in block]
                lines.append(row(f"{family}@{cut}" if i == 0 else "", "", names))
            heads = [f"@{k}".rjust(w) for _, chunk, widths, _ in block
                     for k, w in zip(chunk, widths, strict=True)]
            lines.append(row("question type", "n", heads))
            lines.extend(body([(name, family, k, w) for name, chunk, widths, _ in block
                               for k, w in zip(chunk, widths, strict=True)]))
    return [*lines, "", *footnote] if any(uneven) else lines


def caption(name: str, families: Sequence[tuple[str, str]], cut: str = "k") -> str:
    """A one-retriever table's caption: the retriever and what each short column name
    stands for (``hybrid: R@k recall@k, sR@k session_recall@k``; issue 48, item 6)."""
    cut = f"<{cut}>{BUDGET_SUFFIX}" if cut == "B" else cut
    return f"{name}: " + ", ".join(
        f"{short}@{cut} {family}@{cut}" if short != family else f"{family}@{cut}"
        for family, short in families)


def _blocks(retrievers: Sequence[str], ks: Sequence[int | str], cell_w: int, room: int | None
            ) -> list[list[tuple[str, list[int | str], list[int], list[str]]]]:
    """The retrievers' column groups, packed into blocks of at most ``room`` columns past
    the label and n (``None``: one block): each group is (name, its ks, each column's
    width, the name's heading lines). A retriever whose ks do not fit together gets a
    group per slice of them that fits."""
    per_group = len(ks) if room is None else max(1, min(len(ks), room // (cell_w + 2)))
    groups = []
    for name in retrievers:
        for at in range(0, len(ks), per_group):
            chunk = list(ks[at:at + per_group])
            natural = len(chunk) * (cell_w + 2) - 2
            # Columns widened to a piece that has no break: the rest packed to that width.
            room_of_name = max(natural, *(len(p.strip(" "))
                                          for p in heading_pieces(name, natural)))
            pieces = [p.strip(" ") for p in heading_pieces(name, room_of_name)]
            extra = room_of_name - natural
            widths = [cell_w + (extra if i == 0 else 0) for i in range(len(chunk))]
            groups.append((name, chunk, widths, pieces))
    blocks: list[list[tuple[str, list[int | str], list[int], list[str]]]] = []
    used = 0
    for group in groups:
        wide = sum(group[2]) + 2 * len(group[2])
        if not blocks or (room is not None and used + wide > room):
            blocks.append([])
            used = 0
        blocks[-1].append(group)
        used += wide
    return blocks


def budget_lines(summary: Mapping[str, Any], retrievers: Sequence[str],
                 budgets: Sequence[int], ks: Sequence[int], width: int | None = None,
                 overall_only: bool = False) -> list[str]:
    """The budget table beside the recall@k table: ``recall@<B>tok`` per budget (the share
    of gold sessions in the memories that fit in B tokens), then ``tokens@k`` (the mean
    tokens of the first k memories, what recall@k costs a reader), laid out as the summary
    table is; [] when the summary holds neither."""
    if not budgets or not any(f"recall@{budgets[0]}{BUDGET_SUFFIX}" in summary[name]["overall"]
                              for name in retrievers):
        return []
    cuts: list[int | str] = [f"{b}{BUDGET_SUFFIX}" for b in budgets]
    recall = table_lines(summary, retrievers, cuts, (("recall", "R"),), width, overall_only,
                         cut="B")
    tokens = table_lines(summary, retrievers, list(ks), ((TOKENS, TOKENS),), width,
                         overall_only, fmt=_fmt_tokens)
    return [*recall, "", *tokens]
