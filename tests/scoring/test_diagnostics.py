"""Diagnostics: per-pair facts, per-retriever figures, their lines, and the plugin end to end
(cross-checked against the separately scored semantic and fts retrievers of the same run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
from pytest_retrieval_eval.data.generator.instances import SAMPLE, iter_instances
from pytest_retrieval_eval.reporting import diagnostic_lines
from pytest_retrieval_eval.scoring import diagnostics
from tests.support.reliability_support import match_errors

USABLE = [i for i in iter_instances(SAMPLE) if not i["question_id"].endswith("_abs")]
KS = (1, 5, 10)


def test_pair_facts() -> None:
    rankings = {1: ["a"], 5: ["a", "c", "b"], 10: ["a", "c", "b"]}
    lists = {"semantic": ["a", "b", "c"], "fts": ["c"]}
    facts = diagnostics.pair_facts(dict.fromkeys(KS, lists), rankings, KS)
    assert facts["returned"] == {"1": 1, "5": 3, "10": 3}
    assert facts["fusion"] == {"1": {"semantic": True, "fts": False},
                               "5": {"semantic": False, "fts": False},
                               "10": {"semantic": False, "fts": False}}
    assert facts["component_sizes"] == {"semantic": 3, "fts": 1}
    assert set(diagnostics.pair_facts({}, rankings, KS)) == {"returned"}


def test_pair_facts_compare_each_k_with_its_own_call() -> None:
    """A limit-sensitive hybrid is asked once per pool size: k 1 is compared with the lists of
    the call that ranked k 1, not with the last (largest) call's."""
    rankings = {1: ["b"], 10: ["a", "b"]}
    small = {"semantic": ["b"], "fts": []}
    large = {"semantic": ["a", "b"], "fts": ["x"]}
    facts = diagnostics.pair_facts({1: small, 10: large}, rankings, (1, 10))
    assert facts["fusion"]["1"] == {"semantic": True, "fts": False}
    assert facts["component_sizes"] == {"semantic": 2, "fts": 1}


def result(name: str, ranked: list[str], gold: list[str], **extra: Any) -> dict[str, Any]:
    returned = {str(k): len(ranked) for k in KS}
    return {"retriever": name, "ranked": ranked, "gold": gold, "returned": returned,
            "question_type": "single-session-user", **extra}


def test_summarize_counts_and_ranks() -> None:
    ten = [f"s{i}" for i in range(10)]
    results = [
        result("fts", [], ["s1"]),
        result("fts", [], ["s1"]),
        result("fts", ["s1", "s2"], ["s2"]),  # first gold at rank 2, fewer than 5 and 10
        result("fts", ten, ["s0", "s9"]),  # rank 1
        result("fts", ten, []),  # no gold: not in the rank figures
    ]
    d = diagnostics.summarize(results, ["fts", "absent"], KS)
    assert set(d) == {"fts"}
    fts = d["fts"]
    assert fts["pairs"] == 5 and fts["no_results"] == 2
    assert fts["fewer_than_k"] == {"1": 2, "5": 3, "10": 3}
    assert fts["first_gold"] == {"top": 10, "pairs_with_gold": 4, "mean_rank": 1.5,
                                 "not_found": 2, "share_not_found": 0.5}
    assert "fusion" not in fts
    line, = diagnostic_lines.lines(d, ["fts"], KS, width=200)
    assert line == ("fts: 2 of 5 pairs returned no rows (every query word must match: vipune "
                    "ANDs the quoted words); fewer than 1/5/10 rows in 2/3/3 of 5; first gold "
                    "at mean rank 1.5, not in the top 10 for 2 of 4 (50%)")


def test_fusion_figures_and_lines_fit_the_width() -> None:
    fusion = {"1": {"semantic": True, "fts": True}, "5": {"semantic": True, "fts": False},
              "10": {"semantic": False, "fts": False}}
    results = [result("hybrid", ["a"], ["a"], fusion=fusion,
                      component_sizes={"semantic": 1, "fts": 0})] * 3
    d = diagnostics.summarize(results, ["hybrid"], KS)
    assert d["hybrid"]["fusion"]["5"] == {"pairs": 3, "equals_semantic": 3, "equals_fts": 0}
    assert d["hybrid"]["fts_list_empty"] == 3
    wide, = diagnostic_lines.lines(d, ["hybrid"], KS, 300)
    assert wide == ("hybrid: top 1/5/10 equals semantic's in 3/3/0 of 3 pairs (fusion changed "
                    "nothing), FTS's in 3/0/0; its FTS list was empty in 3 of 3; fewer than "
                    "1/5/10 rows in 0/3/3 of 3; first gold at mean rank 1.0, not in the top 10 "
                    "for 0 of 3 (0%)")
    for width in (40, 60, 80, 120):
        got = diagnostic_lines.lines(d, ["hybrid"], KS, width)
        assert len(got) > 1 and all(len(line) <= width for line in got)
        assert got[0].startswith("hybrid: top 1/5/10")
        assert all(line.startswith("    ") and line[4] != " " for line in got[1:])
        assert " ".join(line.strip() for line in got) == wide  # wrapped, never reworded


def _joined(lines: list[str]) -> str:
    """Wrapped lines back as one text: each continuation (indented four spaces deeper than the
    line it continues) joined with one space; any other line starts anew."""
    out: list[str] = []
    depth: list[int] = []
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if out and indent >= depth[-1] + 4:
            out[-1] += " " + line.strip()
        else:
            out.append(line)
            depth.append(indent)
    return "\n".join(out)


def test_per_type_words_are_the_same_at_every_width() -> None:
    """Words never change with the width (60, 80, 200 columns): only the line breaks move;
    per question type too (``verbose``)."""
    sample = USABLE[:6]
    results = []
    for i, inst in enumerate(sample):
        fusion = {str(k): {"semantic": i % 2 == 0, "fts": False} for k in KS}
        results.append(result("hybrid", ["x"] if i % 3 else [], ["x"], fusion=fusion,
                              component_sizes={"semantic": 5, "fts": i % 2},
                              question_type=inst["question_type"]))
        results.append(result("fts", [] if i % 2 else ["y", "x"], ["x"],
                              question_type=inst["question_type"]))
    d = diagnostics.summarize(results, ["hybrid", "fts"], KS)
    types = {inst["question_type"] for inst in sample}
    assert set(d["hybrid"]["by_type"]) == types
    texts = {}
    for width in (60, 80, 200):
        got = diagnostic_lines.lines(d, ["hybrid", "fts"], KS, width, verbose=True)
        assert all(len(line) <= width for line in got)
        texts[width] = _joined(got)
    assert texts[60] == texts[80] == texts[200]
    assert "= semantic's" not in texts[60]
    assert "its FTS list was empty in" in texts[60]
    assert sum(1 for line in texts[200].splitlines() if line.startswith("  ")) == 2 * len(types)
    # The overall line alone without verbose; the per-type figures add up to the overall.
    assert len(diagnostic_lines.lines(d, ["hybrid", "fts"], KS, 300)) == 2
    assert sum(t["no_results"] for t in d["fts"]["by_type"].values()) == d["fts"]["no_results"]


def test_the_fts_hint_only_where_words_are_anded() -> None:
    assert diagnostic_lines.fts_ands_words("fts")
    assert diagnostic_lines.fts_ands_words("fts+mode:and")
    assert not diagnostic_lines.fts_ands_words("fts+mode:or")
    assert not diagnostic_lines.fts_ands_words("hybrid")
    d = diagnostics.summarize([result("fts+mode:or", [], ["x"])], ["fts+mode:or"], KS)
    line, = diagnostic_lines.lines(d, ["fts+mode:or"], KS, 200)
    assert "returned no rows;" in line and "ANDs" not in line


# --------------------------------------------------------------------------- plugin


pytestmark = pytest.mark.usefixtures("isolated_cache")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning", *args)


def test_sample_diagnostics_agree_with_the_separately_scored_lists(
        pytester: pytest.Pytester) -> None:
    out = pytester.path / "r.json"
    names = "hybrid,semantic,fts,fts+mode:or,hybrid+fts:or"
    res = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-retriever", names,
              "--retrieval-eval-json", str(out), "-v")
    assert res.ret == 0, res.stdout.str()
    report = json.loads(out.read_text())
    ranked: dict[str, dict[str, list[str]]] = {}
    for pair in report["pairs"]:
        ranked.setdefault(pair["retriever"], {})[pair["question_id"]] = pair["ranked"]
    diag = report["diagnostics"]
    for name in ("hybrid", "hybrid+fts:or"):
        fts_name = "fts" if name == "hybrid" else "fts+mode:or"
        for k in KS:
            fused = {q: r[:k] for q, r in ranked[name].items()}
            assert diag[name]["fusion"][str(k)] == {
                "pairs": len(USABLE),
                "equals_semantic": sum(fused[q] == ranked["semantic"][q][:k] for q in fused),
                "equals_fts": sum(fused[q] == ranked[fts_name][q][:k] for q in fused),
            }
    empty = sum(not r for r in ranked["fts"].values())
    assert 0 < empty < len(USABLE)
    assert diag["fts"]["no_results"] == empty
    # Per question type, the same counts over that type's pairs (the case: every
    # temporal-reasoning question of the sample gets no FTS row).
    types = {p["question_id"]: p["question_type"] for p in report["pairs"]}
    for qtype, figures in diag["fts"]["by_type"].items():
        mine = [q for q, t in types.items() if t == qtype]
        assert figures["pairs"] == len(mine)
        assert figures["no_results"] == sum(not ranked["fts"][q] for q in mine), qtype
    temporal = diag["fts"]["by_type"]["temporal-reasoning"]
    assert temporal["no_results"] == temporal["pairs"] == 3
    assert diag["hybrid"]["by_type"]["temporal-reasoning"]["fts_list_empty"] == 3
    assert diag["fts+mode:or"]["no_results"] < empty  # OR finds rows AND cannot
    assert report["variants"] == {
        "fts+mode:or": {"retriever": "fts", "params": {"mode": "or"}},
        "hybrid+fts:or": {"retriever": "hybrid", "params": {"fts": "or"}},
    }
    assert report["summary"]["fts+mode:or"] != report["summary"]["fts"]
    res.stdout.fnmatch_lines([
        "hybrid: top 1/5/10 equals semantic's in */*/* of 15 pairs (fusion changed",
        f"fts: {empty} of {len(USABLE)} pairs returned no rows (every query word must match: "
        "vipune ANDs",
        "    the quoted words); *",
    ])
    assert all(len(line) <= 80 for line in res.stdout.lines if line.startswith(
        ("hybrid:", "fts:", "semantic:", "fts+", "hybrid+", "    ", "ties:")))
    assert "its FTS list was empty in" in res.stdout.str()


def test_variant_selected_by_k_and_spelled_in_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nretrieval_eval_retriever = fts, fts+mode:or, "
                     "hybrid+rrf_k:60+fts:or, hybrid+recency:0.3\n")
    n = len(USABLE)
    res = run(pytester, "--retrieval-eval", "--no-model", "-k", "fts+mode:or", "-v")
    res.assert_outcomes(passed=n, deselected=3 * n)
    res.stdout.fnmatch_lines([f"*{USABLE[0]['question_id']}::fts+mode:or PASSED*"])
    for name in ("hybrid+rrf_k:60+fts:or", "hybrid+recency:0.3"):
        one = run(pytester, "--retrieval-eval", "--no-model", "-k", name)
        one.assert_outcomes(passed=n, deselected=3 * n)


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_bad_variant_is_a_usage_error(pytester: pytest.Pytester, where: str) -> None:
    args = ["--retrieval-eval", "--no-model"]
    if where == "ini":
        pytester.makeini("[pytest]\nretrieval_eval_retriever = hybrid+rrf:60\n")
    else:
        args += ["--retrieval-eval-retriever", "hybrid+rrf:60"]
    res = run(pytester, *args)
    assert res.ret == 4
    match_errors(res.stderr.str(), ["*retriever 'hybrid+rrf:60': unknown parameter 'rrf'; "
                                    "hybrid takes rrf_k (*), pool (*), fts (and|or), "
                                    "recency (*)*"])


def test_diagnostics_in_a_distributed_run(pytester: pytest.Pytester, tmp_path: Path) -> None:
    out = pytester.path / "r.json"
    res = run(pytester, "--retrieval-eval", "--no-model", "-n", "2",
              "--retrieval-eval-retriever", "hybrid,fts", "--retrieval-eval-json", str(out))
    assert res.ret == 0, res.stdout.str()
    serial = pytester.path / "s.json"
    run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-retriever", "hybrid,fts",
        "--retrieval-eval-json", str(serial))
    assert json.loads(out.read_text())["diagnostics"] == json.loads(
        serial.read_text())["diagnostics"]
