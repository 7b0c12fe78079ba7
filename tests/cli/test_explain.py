"""``retrieval-eval explain`` on a report of the bundled sample: what it shows agrees with the
separately scored semantic and fts retrievers of the same run, the RRF arithmetic adds up, a
question whose FTS query matched nothing says "0 rows", and old reports or unknown names get
one line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting.explain import explain_lines

pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.fixture
def sample_report(pytester: pytest.Pytester) -> Path:
    out = pytester.path / "r.json"
    res = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                             "--retrieval-eval", "--no-model", "--retrieval-eval-retriever",
                             "hybrid,semantic,fts", "--retrieval-eval-json", str(out))
    assert res.ret == 0, res.stdout.str()
    return out


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _pairs(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["retriever"], p["question_id"]): p for p in report["pairs"]}


def test_explain_agrees_with_the_component_retrievers(
        sample_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(sample_report.read_text())
    pairs = _pairs(report)
    checked = 0
    for (name, qid), pair in pairs.items():
        if name != "hybrid":
            continue
        fusion = pair["explain"]["fusion"]
        assert fusion["fts_match"] == vipune.escape_fts_query(vipune.rust_trim(
            pair["question"]))
        sem_top = pairs[("semantic", qid)]["ranked"]
        fts_top = pairs[("fts", qid)]["ranked"]
        assert fusion["fts_rows"] >= len(fts_top)
        for g, ranks in fusion["gold"].items():
            if g in sem_top:  # the semantic retriever's own top 10
                assert ranks["semantic"] == sem_top.index(g) + 1
                checked += 1
            if g in fts_top:
                assert ranks["fts"] == fts_top.index(g) + 1
            if ranks["fts"] is None and fts_top:
                assert g not in fts_top
            landed = pair["explain"]["gold_ranks"][g]
            if g in pair["ranked"]:
                assert landed == pair["ranked"].index(g) + 1
    assert checked > 0
    # The command prints the same, with the arithmetic: 1/(25 + rank) per list.
    qid = report["pairs"][0]["question_id"]
    code, out, err = run(["explain", str(sample_report), qid, "--retriever", "hybrid"], capsys)
    assert code == 0 and not err
    hybrid = pairs[("hybrid", qid)]
    text = " ".join(line.strip() for line in out.splitlines())
    assert f"question {qid} ({hybrid['question_type']}, asked {hybrid['question_date']})" in out
    assert hybrid["question"] in text
    for g, ranks in hybrid["explain"]["fusion"]["gold"].items():
        s, f = ranks["semantic"], ranks["fts"]
        total = (1 / (25 + s) if s else 0.0) + (1 / (25 + f) if f else 0.0)
        assert re.search(rf"{re.escape(g)}: .*RRF {total:.4f}", text), g
    for i, mem_id in enumerate(hybrid["ranked"], start=1):
        mark = "*" if mem_id in hybrid["gold"] else " "
        assert f"{i:>5} {mark} {mem_id}" in out
    assert "\nfts: " not in out and "\nsemantic: " not in out  # --retriever hybrid only


def test_a_question_whose_fts_query_matched_nothing_says_0_rows(
        sample_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(sample_report.read_text())
    empty = next(p for p in report["pairs"] if p["retriever"] == "fts" and not p["ranked"])
    code, out, _ = run(["explain", str(sample_report), empty["question_id"]], capsys)
    assert code == 0
    text = " ".join(line.strip() for line in out.splitlines())
    match = vipune.escape_fts_query(vipune.rust_trim(empty["question"]))
    assert (f"FTS5 MATCH {match!r}: 0 rows (every query word must match: vipune ANDs the "
            "quoted words)") in text
    assert "fts: top 10 (0 rows returned)" in out
    for g in empty["gold"]:
        assert f"gold {g}: not returned" in text


def test_unknown_question_or_retriever_is_one_line(
        sample_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["explain", str(sample_report), "nope"], capsys)
    assert code == 4 and not out
    assert re.fullmatch(r"retrieval-eval: error: question 'nope' is not in report \S+ "
                        r"\(15 questions scored: .+ and 10 more\); give one of its "
                        r"question_ids\n", err), err
    qid = json.loads(sample_report.read_text())["pairs"][0]["question_id"]
    code, out, err = run(["explain", str(sample_report), qid, "--retriever", "bm25"], capsys)
    assert code == 4 and err.count("\n") == 1
    assert "retriever 'bm25' did not rank question" in err and "--retriever" in err


def test_an_older_report_says_which_option_records_the_rest(sample_report: Path) -> None:
    report = json.loads(sample_report.read_text())
    for pair in report["pairs"]:
        for key in ("explain", "question", "question_date", "ties"):
            pair.pop(key)
    qid = report["pairs"][0]["question_id"]
    text = "\n".join(explain_lines(report, qid, "hybrid", width=None))
    assert "the question's text and date are not in this report; run pytest " \
           "--retrieval-eval again with --retrieval-eval-json" in text
    assert "semantic and FTS ranks of a fused retriever, are not in this report" in text
    assert "gold " in text  # the ranks it can still tell from the top k
