"""The summary table's headings are never cut (issue 30): a column is as wide as its widest
``@k``, a retriever's name wider than its columns wraps after a break (a space, ``+ : , / =
-``, a ``.`` before no digit) or widens them, and ks that do not fit side by side go over blocks.
Every row fits the width; the numbers stay right under their headings."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from pytest_retrieval_eval.reporting.summary_table import heading_pieces, table_lines
from pytest_retrieval_eval.reporting.text_width import fit_fields
from tests.support.compare_factory import make_report

FIVE = ["hybrid", "semantic", "fts", "bm25", "oracle"]
WHATIF = "hybrid+fts:or+rrf_k:60+recency:0.5"


def summary_of(names: Sequence[str], ks: Sequence[int]) -> dict[str, object]:
    report = make_report({name: [("q1", "multi-session", 0.5), ("q2", "knowledge-update", 1)]
                          for name in names}, ks=ks)
    return report["summary"]  # type: ignore[no-any-return]


def blocks(lines: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for line in lines:
        if line:
            out[-1].append(line)
        else:
            out.append([])
    return [b for b in out if b]


def right_edges(line: str, count: int) -> list[int]:
    """Where the last ``count`` cells of a row end (the n column and the metric cells)."""
    return [m.end() for m in re.finditer(r"\S+", line)][-count:]


def check_block(block: list[str], width: int | None) -> tuple[list[str], list[str]]:
    """A block fits, and every row's cells end where its ``@k`` headings end. Returns its
    heading lines above ``question type`` and its ks."""
    at = next(i for i, line in enumerate(block) if line.startswith("question type"))
    heads = block[at]
    ks = heads.split()[3:]
    edges = right_edges(heads, len(ks) + 1)
    for line in block[at + 1:]:
        assert right_edges(line, len(ks) + 1) == edges, block
    assert width is None or all(len(line) <= width for line in block), block
    return block[:at], ks


def names_over(heading: list[str]) -> list[str]:
    """The retrievers' names over a block, each put back together from its heading lines:
    a name's pieces are centred over its columns, so they share a centre (names without
    spaces)."""
    label = heading[0].split()[0]
    groups: dict[float, str] = {}
    for i, line in enumerate(heading):
        text = line.replace(label, " " * len(label), 1) if i == 0 else line
        for m in re.finditer(r"\S+", text):
            centre = (m.start() + m.end()) / 2
            near = next((c for c in groups if abs(c - centre) <= 1.5), None)
            if near is None:
                groups[centre] = m.group()
            else:
                groups[near] += m.group()
    return [groups[c] for c in sorted(groups)]


@pytest.mark.parametrize("width", [60, 80])
def test_a_long_k_keeps_every_name_whole(width: int) -> None:
    lines = table_lines(summary_of(FIVE, [10000]), FIVE, [10000], width=width)
    shown: list[str] = []
    for block in blocks(lines):
        heading, ks = check_block(block, width)
        assert set(ks) == {"@10000"}
        shown.extend(heading[0].split()[1:])
    assert shown == FIVE * 4  # four families, every name whole ("semantic", never "semant")


def test_the_old_cut_is_gone_at_every_width() -> None:
    for width in (None, 40, 60, 80, 120):
        lines = table_lines(summary_of(FIVE, [10000]), FIVE, [10000], width=width)
        assert not [line for line in lines if re.search(r"\bsemant\b", line)]


def test_a_long_name_wraps_at_its_breaks_and_joins_back() -> None:
    names = [WHATIF, "semantic+dtype:float32", "hybrid"]
    lines = table_lines(summary_of(names, [1]), names, [1], width=60)
    for block in blocks(lines):
        heading, _ = check_block(block, 60)
        assert len(heading) > 1  # the what-if name took several lines
        assert names_over(heading) == names  # every piece, in order, nothing cut or lost
        assert all(len(piece) <= 8 for line in heading[1:] for piece in line.split())


def test_pieces_break_only_after_a_break_character() -> None:
    assert heading_pieces("semantic", 6) == ["semantic"]  # wider than the room: whole
    assert heading_pieces("hybrid", 22) == ["hybrid"]
    assert heading_pieces("hybrid+fts:or", 7) == ["hybrid+", "fts:or"]
    assert heading_pieces("cmd:python my store.py", 10) == ["cmd:python ", "my store.", "py"]
    assert heading_pieces("hybrid+recency:0.5", 9) == ["hybrid+", "recency:", "0.5"]
    assert heading_pieces("rrf_k:60", 4) == ["rrf_k:", "60"]  # never inside rrf_k or 0.5
    for name in (WHATIF, "a.b.c", "x" * 30, "cmd:go run ./store", "my-store.v2"):
        for room in range(1, 40):
            pieces = heading_pieces(name, room)
            assert "".join(pieces) == name
            assert all(len(p.rstrip(" ")) <= room or not re.search(r"([ +:,/=-]|\.\D).", p)
                       for p in pieces)


def test_ks_that_do_not_fit_go_over_blocks() -> None:
    ks = [1, 2, 3, 5, 10, 20, 50, 100]
    lines = table_lines(summary_of(FIVE[:2], ks), FIVE[:2], ks, width=60)
    seen: dict[str, list[str]] = {}
    for block in blocks(lines):
        heading, block_ks = check_block(block, 60)
        family, name = heading[0].split()
        seen.setdefault(f"{family} {name}", []).extend(block_ks)
    assert len(seen) == 8  # four families x two retrievers
    assert all(shown == [f"@{k}" for k in ks] for shown in seen.values())


def test_one_retriever_columns_are_as_wide_as_their_headings() -> None:
    lines = table_lines(summary_of(["hybrid"], [1, 5, 10]), ["hybrid"], [1, 5, 10])
    # its caption names the retriever and what each short column stands for (issue 48)
    assert lines[0] == ("hybrid: R@k recall@k, any@k recall_any@k, all@k recall_all@k, "
                        "ndcg@k ndcg_any@k")
    heads = lines[1].split()[3:]
    assert heads[-1] == "ndcg@10"  # seven characters: its column is seven wide
    check_block(lines[1:], None)


def test_every_table_has_its_caption() -> None:
    """Issue 48, item 6: ``sR@k`` under turn granularity, ``any@k`` under LongMemEval's
    protocol, the budget's ``R@<B>tok``: a one-retriever table says what they are."""
    from pytest_retrieval_eval.reporting.summary_table import budget_lines, families_for

    turn = table_lines(summary_of(["hybrid"], [1, 5]), ["hybrid"], [1, 5],
                       families_for("vipune", "turn"))
    assert turn[0] == "hybrid: R@k recall@k, any@k recall_any@k, all@k recall_all@k, " \
        "ndcg@k ndcg_any@k, sR@k session_recall@k"
    lme = table_lines(summary_of(["bm25"], [1]), ["bm25"], [1], (("recall_any", "any"),))
    assert lme[0] == "bm25: any@k recall_any@k"
    summary = summary_of(["bm25"], [1])
    for entry in (summary["bm25"]["overall"], *summary["bm25"]["by_type"].values()):
        entry.update({"recall@500tok": 0.5, "tokens@1": 40.0})
    budget = budget_lines(summary, ["bm25"], [500], [1])
    assert budget[0] == "bm25: R@<B>tok recall@<B>tok" and "bm25: tokens@k" in budget


def test_fields_break_between_fields_only() -> None:
    fields = ["sentence-transformers/all-MiniLM-L6-v2", "fingerprint 627066fc5224", "dim 384",
              "2434 vectors", "pooling mean", "max_length 512", "query_prefix ''", "(bundled)"]
    whole = "  ".join(fields)
    assert fit_fields(fields, None) == fit_fields(fields, len(whole)) == [whole]
    for width in (40, 60, 80):
        rows = fit_fields(fields, width)
        assert all(len(row) <= width for row in rows)
        assert all(row.startswith("  ") for row in rows[1:])
        assert [f for row in rows for f in row.strip().split("  ")] == fields
    # A field wider than a line is cut at its own spaces, continuing further in.
    assert fit_fields(["a b c d e f", "g"], 5) == ["a b c", "  d e", "  f", "  g"]


@pytest.mark.parametrize("columns", [60, 80])
def test_the_run_summary_with_a_long_k_fits(pytester: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch,
                                            columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                                "--retrieval-eval", "--no-model", "--retrieval-eval-k", "10000",
                                "--retrieval-eval-retriever", ",".join(FIVE))
    assert result.ret == 0, result.stdout.str()
    section = result.stdout.str().split("= retrieval-eval =", 1)[1].splitlines()[1:]
    assert all(len(line) <= columns for line in section), section
    heads = [line.split()[1:] for line in section if line.startswith("recall@k")]
    assert [name for head in heads for name in head] == FIVE
