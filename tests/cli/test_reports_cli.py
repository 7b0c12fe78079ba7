"""``retrieval-eval compare`` / ``plot`` / ``markdown`` on reports of the bundled sample
(issue 22, items 1, 6, 7 and 8): retrievers mapped across reports, the compared rows alone in
the Holm family, plot in compare's order, Markdown from saved reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting import compare as cmp
from pytest_retrieval_eval.scoring import significance as sig
from tests.support.compare_factory import make_report, write_report
from tests.support.reliability_support import subprocess_env

REFUSED = 4
WHATIF = "hybrid+fts:or"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Reports of the bundled sample (``--no-model``), written by real runs: ``base`` (hybrid,
    semantic), ``new`` (the what-if hybrid+fts:or, semantic) and ``all`` (all three), each
    with the Markdown the run wrote (``base.md``, ...)."""
    root = tmp_path_factory.mktemp("sample-reports")
    env = subprocess_env(RETRIEVAL_EVAL_CACHE_DIR=str(root / "cache"),
                         HF_HOME=str(root / "hf-empty"))
    env.pop("GITHUB_STEP_SUMMARY", None)
    out = {}
    for name, retrievers in (("base", "hybrid,semantic"), ("new", f"{WHATIF},semantic"),
                             ("all", f"hybrid,{WHATIF},semantic")):
        out[name] = root / f"{name}.json"
        out[f"{name}.md"] = root / f"{name}.md"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "-p", "no:randomly", "--retrieval-eval", "--no-model",
             "--retrieval-eval-retriever", retrievers, "--retrieval-eval-json",
             str(out[name]), "--retrieval-eval-markdown", str(out[f"{name}.md"])],
            cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def saved(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8"))["comparison"])


def numbers(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["question_type"], r["n"], r["base"], r["new"], r["ci_low"], r["ci_high"],
             r["p"]) for r in rows]


# --------------------------------------------------------------------------- compare


def test_a_whatif_is_compared_with_its_baseline_across_two_reports(
        sample: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """hybrid in base.json = hybrid+fts:or in new.json gives the numbers of the same two
    retrievers compared inside one report (all.json): an independent pairing of the same
    pairs."""
    monkeypatch.setenv("COLUMNS", "400")
    code, out, err = run_cli(capsys, "compare", str(sample["base"]), str(sample["new"]),
                             "--retrievers", f"hybrid={WHATIF}", "--json",
                             str(tmp_path / "two.json"))
    assert code == 0, err
    assert f"paired on (question_id; retrievers hybrid={WHATIF}): 15 matched" in out
    assert f"recall@5 · {WHATIF} vs hybrid" in out
    assert "· semantic" not in out  # not named: not compared, not printed
    code, _, err = run_cli(capsys, "compare", str(sample["all"]), "--retrievers",
                           f"hybrid,{WHATIF}", "--json", str(tmp_path / "one.json"))
    assert code == 0, err
    two, one = saved(tmp_path / "two.json"), saved(tmp_path / "one.json")
    assert list(two["rows"]) == list(one["rows"]) == ["recall@1", "recall@5", "recall@10"]
    for metric in two["rows"]:
        assert numbers(two["rows"][metric]) == numbers(one["rows"][metric])
        assert [r["p_holm"] for r in two["rows"][metric]] == [
            r["p_holm"] for r in one["rows"][metric]]
    assert two["changes"][f"{WHATIF} vs hybrid"] == one["changes"][f"{WHATIF} vs hybrid"]
    assert two["mapped"] == [{"base": "hybrid", "new": WHATIF, "label": f"{WHATIF} vs hybrid"}]


def test_no_pair_in_common_says_how_to_map_names(
        sample: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Without a mapping, hybrid and hybrid+fts:or share no pair; semantic does, so compare
    the what-if alone: the refusal names the retrievers each side holds and the mapping."""
    code, out, err = run_cli(capsys, "compare", str(sample["base"]), str(sample["new"]),
                             "--retrievers", "hybrid")
    assert (code, out) == (REFUSED, "") and err.count("\n") == 1
    assert f"'hybrid' is not a retriever of {sample['new']} (it holds {WHATIF}, semantic)" in err
    base = make_report({"hybrid": [("q1", "multi-session", 1.0)]})
    new = make_report({WHATIF: [("q1", "multi-session", 1.0)]})
    with pytest.raises(cmp.CompareError) as refused:
        cmp.compare_reports(base, new)
    assert str(refused.value) == (
        "reports base and new have no pair in common (matched on question_id and retriever; "
        f"base holds hybrid; new holds {WHATIF}); each holds one retriever, so compare them "
        f"with --retrievers hybrid={WHATIF}")
    # Issue 38, stumble 6: the mapping it names is the one that works.
    assert cmp.compare_reports(base, new, retrievers=[("hybrid", WHATIF)])["matched"]
    # Other questions, or several retrievers a side: no mapping would pair them; the generic fix.
    other = make_report({WHATIF: [("q2", "multi-session", 1.0)]})
    two = make_report({WHATIF: [("q1", "multi-session", 1.0)],
                       "semantic": [("q9", "multi-session", 1.0)]})
    for new_side in (other, two):
        with pytest.raises(cmp.CompareError) as refused:
            cmp.compare_reports(base, new_side)
        assert str(refused.value).endswith(
            "compare runs of the same questions, and map renamed retrievers with --retrievers "
            "BASE_NAME=NEW_NAME")


def test_the_holm_family_holds_only_the_named_retrievers(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """Only custom changed: naming it leaves hybrid's unchanged rows out of the output and out
    of the Holm family, so custom's correction is over its own 3 rows, not 6."""
    qids = [(f"q{i:02d}", "multi-session" if i % 2 else "temporal-reasoning")
            for i in range(30)]
    base = make_report({"hybrid": [(q, t, 0.5) for q, t in qids],
                        "custom": [(q, t, 0.0) for q, t in qids]}, ks=(5,))
    new = make_report({"hybrid": [(q, t, 0.5) for q, t in qids],
                       "custom": [(q, t, float(i % 3 == 0)) for i, (q, t) in enumerate(qids)]},
                      ks=(5,))
    a, b = write_report(tmp_path / "a.json", base), write_report(tmp_path / "b.json", new)
    code, out, _ = run_cli(capsys, "compare", str(a), str(b), "--retrievers", "custom",
                           "--json", str(tmp_path / "c.json"))
    assert code == 0 and "· hybrid" not in out and "recall@5 · custom" in out
    rows = saved(tmp_path / "c.json")["rows"]["recall@5"]
    assert [r["retriever"] for r in rows] == ["custom"] * 3
    assert [r["p_holm"] for r in rows] == sig.holm([r["p"] for r in rows]).tolist()
    every = cmp.compare_reports(base, new)["rows"]["recall@5"]
    assert len(every) == 6
    full = {r["question_type"]: r["p_holm"] for r in every if r["retriever"] == "custom"}
    assert all(r["p_holm"] <= full[r["question_type"]] for r in rows)
    assert any(r["p_holm"] < full[r["question_type"]] for r in rows)


@pytest.mark.parametrize(("reports", "spec", "says"), [
    (2, "hybrid=", "--retrievers item 'hybrid=' cannot be read; map a name as "
                   "BASE_NAME=NEW_NAME"),
    (2, ",", "--retrievers names no retriever"),
    (2, "hybrid=nope", "'nope' is not a retriever of"),
    (1, "hybrid", "--retrievers with one report: name two retrievers, base first"),
    (1, "hybrid,hybrid", "--retrievers names 'hybrid' twice"),
    (1, "hybrid=hybrid", "--retrievers names 'hybrid' twice"),
])
def test_retrievers_that_cannot_be_read_are_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], reports: int, spec: str,
        says: str) -> None:
    report = make_report({"hybrid": [("q1", "multi-session", 1.0)],
                          "semantic": [("q1", "multi-session", 0.0)]})
    a = write_report(tmp_path / "a.json", report)
    code, out, err = run_cli(capsys, "compare", *[str(a)] * reports, "--retrievers", spec)
    assert (code, out) == (REFUSED, "") and err.count("\n") == 1
    assert says in err


def test_one_report_maps_several_pairs_into_one_family(
        sample: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "compare", str(sample["all"]), "--retrievers",
                           f"semantic=hybrid,semantic={WHATIF}", "--metric", "recall@5",
                             "--json", str(tmp_path / "c.json"))
    assert code == 0, err
    result = saved(tmp_path / "c.json")
    rows = result["rows"]["recall@5"]
    assert {r["retriever"] for r in rows} == {"hybrid vs semantic", f"{WHATIF} vs semantic"}
    assert result["new"]["label"] == f"{sample['all']} [hybrid, {WHATIF}]"
    assert result["base"]["label"] == f"{sample['all']} [semantic]"
    assert [r["p_holm"] for r in rows] == sig.holm([r["p"] for r in rows]).tolist()
    assert os.path.exists(tmp_path / "c.json")


# --------------------------------------------------------------------------- markdown


def test_markdown_of_a_saved_report_is_what_the_run_wrote(
        sample: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "markdown", str(sample["all"]))
    assert (code, err) == (0, "")
    assert out == sample["all.md"].read_text(encoding="utf-8")
    # Diagnostics fold into <details>, worded as the terminal's lines in their longest form.
    assert "<details>\n<summary>Diagnostics</summary>\n\n- hybrid: top 1/5/10 equals " in out
    assert "- semantic: first gold at mean rank " in out


def test_markdown_of_two_reports_holds_the_comparison_and_its_lists(
        sample: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "markdown", str(sample["base"]), str(sample["new"]),
                             "--retrievers", f"hybrid={WHATIF}")
    assert (code, err) == (0, "")
    run_cli(capsys, "compare", str(sample["base"]), str(sample["new"]), "--retrievers",
            f"hybrid={WHATIF}", "--json", str(tmp_path / "c.json"))
    changes = saved(tmp_path / "c.json")["changes"][f"{WHATIF} vs hybrid"]
    assert out.startswith(sample["new.md"].read_text(encoding="utf-8").split("<details>")[0])
    assert f"**retrieval-eval compare** · base `{sample['base']}` → new `{sample['new']}`" in out
    assert "#### Δ recall@5" in out and "| semantic" not in out.split("compare**")[1]
    listed = 0
    for k, v in changes.items():
        for what in ("gained", "lost"):
            if v[what]:
                listed += 1
                assert (f"- `{WHATIF} vs hybrid` recall@{k} {what} ({len(v[what])}): "
                        f"{', '.join(f'`{q}`' for q in v[what])}") in out
    # the new run's diagnostics, the agreement of the rankings, the changes
    assert listed and out.count("<details>") == 3
    assert "<summary>Agreement of the rankings" in out


def test_markdown_refusals_are_one_line(sample: dict[str, Path], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "markdown", str(tmp_path / "none.json"))
    assert (code, out) == (REFUSED, "") and err.count("\n") == 1
    assert "cannot be read" in err
    code, out, err = run_cli(capsys, "markdown", *[str(sample["all"])] * 3)
    assert (code, out, err) == (REFUSED, "", "retrieval-eval: error: markdown takes "
                                "REPORT.json, or BASE.json NEW.json\n")
