"""``--retrieval-eval-reference NAME`` (issue 37 item 5): ``ref_recall@k`` of every other
retriever against the reference's top k, counted by hand on stores with fixed orders, the
same under xdist (the reference's pairs ranked on other workers), and an unknown name as one
usage error."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.scoring.agreement import overlap_at
from tests.support.lme_factory import make_instance, write_dataset

STORES = """
class Exact:
    name = "exact"
    needs_vectors = False

    def rank(self, persona, query, limit):
        return list(persona.session_ids)[:limit]

class FirstThenReversed:
    name = "approx"
    needs_vectors = False

    def rank(self, persona, query, limit):
        ids = list(persona.session_ids)
        return [ids[0], *reversed(ids[1:])][:limit]

class LastOnly:
    name = "short"
    needs_vectors = False

    def rank(self, persona, query, limit):
        return list(persona.session_ids)[-1:]
"""

SELECTORS = "stores:Exact,stores:FirstThenReversed,stores:LastOnly"


@pytest.fixture
def data(pytester: pytest.Pytester, isolated_cache: Path,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(stores=STORES)
    pytester.syspathinsert()
    return write_dataset(pytester.path / "lme.json", [
        make_instance("q1", question_type="multi-session", n_sessions=5),
        make_instance("q2", question_type="temporal-reasoning", n_sessions=3)])


def run(pytester: pytest.Pytester, data: Path, *args: str,
        subprocess: bool = False) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = pytester.path / "report.json"
    out.unlink(missing_ok=True)
    argv = ["-p", "no:randomly", "-p", "no:cacheprovider", "-W",
            "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval", "--no-model",
            f"--retrieval-eval-data={data}", f"--retrieval-eval-json={out}",
            "--retrieval-eval-k=1,3,5", *args]
    result = pytester.runpytest_subprocess(*argv) if subprocess else pytester.runpytest(*argv)
    report = json.loads(out.read_text()) if out.exists() else {}
    return result, report


# By hand. exact ranks q1 s0 s1 s2 s3 s4 and q2 s0 s1 s2.
# approx: q1 s0 s4 s3 s2 s1 -> @1 {s0}: 1; @3 {s0,s4,s3} vs {s0,s1,s2}: 1/3; @5: 5/5.
#         q2 s0 s2 s1       -> @1 1; @3 3/3; @5 (exact returned 3) 3/3.
# short:  q1 s4 -> @1 0; @3 0; @5 1/5.   q2 s2 -> @1 0; @3 1/3; @5 1/3.
BY_HAND = {
    "approx": {"q1": {"1": Fraction(1), "3": Fraction(1, 3), "5": Fraction(1)},
               "q2": {"1": Fraction(1), "3": Fraction(1), "5": Fraction(1)}},
    "short": {"q1": {"1": Fraction(0), "3": Fraction(0), "5": Fraction(1, 5)},
              "q2": {"1": Fraction(0), "3": Fraction(1, 3), "5": Fraction(1, 3)}},
}


def _check(report: dict[str, Any]) -> None:
    section = report["reference"]
    assert section["retriever"] == "exact" and section["ks"] == [1, 3, 5]
    assert set(section["summary"]) == {"approx", "short"}  # never the reference itself
    for name, pairs in BY_HAND.items():
        overall = section["summary"][name]["overall"]
        assert overall["pairs"] == 2
        for k in ("1", "3", "5"):
            assert overall[f"ref_recall@{k}"] == pytest.approx(
                float(sum(p[k] for p in pairs.values()) / 2), abs=1e-12)
        by_type = section["summary"][name]["by_type"]
        assert by_type["multi-session"]["ref_recall@3"] == pytest.approx(float(pairs["q1"]["3"]))
    got = {(p["retriever"], p["question_id"]): p.get("ref_recall") for p in report["pairs"]}
    for name, pairs in BY_HAND.items():
        for qid, values in pairs.items():
            assert got[(name, qid)] == pytest.approx({k: float(v) for k, v in values.items()})
    assert got[("exact", "q1")] is None


def test_ref_recall_against_a_reference_matches_a_hand_count(pytester: pytest.Pytester,
                                                            data: Path) -> None:
    result, report = run(pytester, data, "--retrieval-eval-retriever", SELECTORS,
                         "--retrieval-eval-reference=exact")
    assert result.ret == 0, result.stdout.str()
    _check(report)
    text = result.stdout.str()
    assert "ref_recall@k against exact: the share of exact's top k" in text
    result.stdout.re_match_lines([r"retriever\s+pairs\s+@1\s+@3\s+@5",
                                  r"approx\s+2\s+1\.000\s+0\.667\s+1\.000",
                                  r"short\s+2\s+0\.000\s+0\.167\s+0\.267"])
    # compare's overlap@k is the same measure where both top k's are full
    ranked = {(p["retriever"], p["question_id"]): p["ranked"] for p in report["pairs"]}
    assert overlap_at(ranked[("exact", "q1")], ranked[("approx", "q1")], 3) == pytest.approx(
        report["pairs"][[(p["retriever"], p["question_id"]) for p in report["pairs"]].index(
            ("approx", "q1"))]["ref_recall"]["3"])
    # The selector names it as well as the column; without the option there is no table.
    _, by_selector = run(pytester, data, "--retrieval-eval-retriever", SELECTORS,
                         "--retrieval-eval-reference=stores:Exact")
    _check(by_selector)
    plain, without = run(pytester, data, "--retrieval-eval-retriever", SELECTORS)
    assert "reference" not in without and "ref_recall@k" not in plain.stdout.str()
    assert all("ref_recall" not in p for p in without["pairs"])


def test_ref_recall_is_the_same_under_xdist(pytester: pytest.Pytester, data: Path) -> None:
    result, report = run(pytester, data, "--retrieval-eval-retriever", SELECTORS,
                         "--retrieval-eval-reference=exact", "-n", "2", subprocess=True)
    assert result.ret == 0, result.stdout.str()
    _check(report)


def test_the_ini_twin_names_the_reference(pytester: pytest.Pytester, data: Path) -> None:
    pytester.makeini("[pytest]\nretrieval_eval_reference = exact\n")
    result, report = run(pytester, data, "--retrieval-eval-retriever", SELECTORS)
    assert result.ret == 0, result.stdout.str()
    _check(report)


def test_an_unknown_reference_is_one_usage_error(pytester: pytest.Pytester,
                                                 data: Path) -> None:
    result, report = run(pytester, data, "--retrieval-eval-retriever", SELECTORS,
                         "--retrieval-eval-reference=semantic")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert errors == [
        "ERROR: --retrieval-eval-reference 'semantic' is not a retriever of this run (exact, "
        "approx, short, stores:Exact, stores:FirstThenReversed, stores:LastOnly); name one of "
        "those, or add it to --retrieval-eval-retriever (e.g. --retrieval-eval-retriever="
        "stores:Exact,stores:FirstThenReversed,stores:LastOnly,semantic)"], result.stderr.str()
    assert report == {}
