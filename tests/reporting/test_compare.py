"""Comparing reports and retrievers: matching, rows, gained/lost pairs, refusals, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting import compare as cmp
from pytest_retrieval_eval.reporting import compare_lines
from pytest_retrieval_eval.scoring import significance as sig
from tests.support.compare_factory import make_report, write_report

REFUSED = 4


def two_reports() -> tuple[dict[str, Any], dict[str, Any]]:
    base = make_report({
        "hybrid": [("q1", "multi-session", 0.0), ("q2", "multi-session", 0.5),
                   ("q3", "temporal-reasoning", 1.0), ("q4", "temporal-reasoning", 0.0),
                   ("q5", "temporal-reasoning", 1.0)],
        "semantic": [("q1", "multi-session", 0.0), ("q2", "multi-session", 0.0)],
    })
    new = make_report({
        "hybrid": [("q1", "multi-session", 1.0), ("q2", "multi-session", 0.5),
                   ("q3", "temporal-reasoning", 0.0), ("q4", "temporal-reasoning", 1.0),
                   ("q6", "temporal-reasoning", 1.0)],
        "semantic": [("q1", "multi-session", 0.5), ("q2", "multi-session", 1.0)],
    })
    return base, new


def row(result: dict[str, Any], metric: str, retriever: str, qtype: str) -> dict[str, Any]:
    found = [r for r in result["rows"][metric]
             if r["retriever"] == retriever and r["question_type"] == qtype]
    assert len(found) == 1
    return found[0]


def test_rows_per_retriever_and_type_with_means_and_delta() -> None:
    result = cmp.compare_reports(*two_reports())
    assert result["metrics"] == ["recall@1", "recall@5"]
    assert result["matched"] == 6  # q5 and q6 of hybrid are on one side only
    ms = row(result, "recall@1", "hybrid", "multi-session")
    assert (ms["n"], ms["base"], ms["new"], ms["delta"]) == (2, 0.25, 0.75, 0.5)
    tr = row(result, "recall@1", "hybrid", "temporal-reasoning")
    assert (tr["n"], tr["base"], tr["new"], tr["delta"]) == (2, 0.5, 0.5, 0.0)
    overall = row(result, "recall@1", "hybrid", "overall")
    assert overall["n"] == 4 and overall["delta"] == pytest.approx(0.25)
    # Hand-computed: differences (1, 0, -1, 1): |sum| 1; exact p over 8 patterns of the three
    # non-zero ones: |±1 ±1 ±1| >= 1 always -> p = 1.
    assert overall["p"] == 1.0
    sem = row(result, "recall@1", "semantic", "overall")
    assert sem["p"] == pytest.approx(sig.randomization_test([0.5, 1.0]).item())
    assert [r["question_type"] for r in result["rows"]["recall@1"]] == [
        "temporal-reasoning", "multi-session", "overall", "multi-session", "overall"]


def test_holm_is_applied_across_the_rows_of_one_metric() -> None:
    result = cmp.compare_reports(*two_reports())
    rows = result["rows"]["recall@5"]
    assert [r["p_holm"] for r in rows] == pytest.approx(sig.holm([r["p"] for r in rows]).tolist())
    assert all(r["significant"] == (r["p_holm"] <= 0.05) for r in rows)


def test_pairs_on_one_side_only_are_counted_and_named() -> None:
    result = cmp.compare_reports(*two_reports())
    assert result["only_in_base"] == ["q5[hybrid]"]
    assert result["only_in_new"] == ["q6[hybrid]"]
    text = "\n".join(compare_lines.comparison_lines(result))
    assert "6 matched, 1 only in base, 1 only in new" in text
    assert "only in base (1, not compared): q5[hybrid]" in text
    assert "only in new (1, not compared): q6[hybrid]" in text


def test_gained_and_lost_pairs_per_k() -> None:
    result = cmp.compare_reports(*two_reports())
    assert result["changes"]["hybrid"]["1"] == {"gained": ["q1", "q4"], "lost": ["q3"]}
    assert result["changes"]["semantic"]["5"] == {"gained": ["q1", "q2"], "lost": []}
    quiet = compare_lines.comparison_lines(result)
    assert "hybrid: pairs whose recall@k rose (+) or fell (-): @1 +2/-1, @5 +2/-1" in quiet
    assert not any("gained: q1" in line for line in quiet)
    loud = compare_lines.comparison_lines(result, verbose=True)
    assert "  @1 gained: q1, q4" in loud and "  @1 lost: q3" in loud


def test_a_clear_improvement_is_significant_after_holm() -> None:
    qids = [(f"q{i}", "multi-session", 0.0) for i in range(30)]
    better = [(q, t, 1.0 if i < 25 else 0.0) for i, (q, t, _) in enumerate(qids)]
    result = cmp.compare_reports(make_report({"hybrid": qids}), make_report({"hybrid": better}))
    overall = row(result, "recall@1", "hybrid", "overall")
    assert overall["significant"] and overall["p"] < 0.001
    assert 0.6 < overall["ci_low"] < overall["delta"] < overall["ci_high"] <= 1.0
    assert any(line.rstrip().endswith("*") for line in compare_lines.table_lines(result))


def test_metric_choice() -> None:
    assert cmp.resolve_metrics(None, [1, 5]) == ["recall@1", "recall@5"]
    assert cmp.resolve_metrics(["recall_any", "ndcg_any@5"], [1, 5]) == [
        "recall_any@1", "recall_any@5", "ndcg_any@5"]
    with pytest.raises(cmp.CompareError, match="metric 'mrr' is unknown"):
        cmp.resolve_metrics(["mrr"], [1])
    with pytest.raises(cmp.CompareError, match="k 10 is not among"):
        cmp.resolve_metrics(["recall@10"], [1, 5])


def test_only_shared_ks_are_compared() -> None:
    base = make_report({"hybrid": [("q1", "multi-session", 1.0)]}, ks=(1, 5))
    new = make_report({"hybrid": [("q1", "multi-session", 1.0)]}, ks=(5, 10))
    assert cmp.compare_reports(base, new)["metrics"] == ["recall@5"]


def test_retrievers_of_one_report() -> None:
    base, _ = two_reports()
    result = cmp.compare_retrievers(base, "semantic", "hybrid", name="r.json")
    assert result["kind"] == "retrievers" and result["matched"] == 2
    overall = row(result, "recall@1", "hybrid vs semantic", "overall")
    assert (overall["base"], overall["new"]) == (0.0, 0.25)
    assert result["only_in_new"] == ["q3[hybrid]", "q4[hybrid]", "q5[hybrid]"]
    assert "paired on (question_id): 2 matched" in "\n".join(compare_lines.header_lines(result))
    with pytest.raises(cmp.CompareError, match=r"retriever 'bm25' is not in report r.json"):
        cmp.compare_retrievers(base, "bm25", "hybrid", name="r.json")
    with pytest.raises(cmp.CompareError, match="twice"):
        cmp.compare_retrievers(base, "hybrid", "hybrid")


# --------------------------------------------------------------------------- refusals


def test_refuses_another_dataset_unless_allowed() -> None:
    base, new = two_reports()
    new["dataset"] = {"name": "other", "sha256": "b" * 64}
    with pytest.raises(cmp.CompareError, match=r"different data .*--allow-different-data"):
        cmp.compare_reports(base, new)
    result = cmp.compare_reports(base, new, allow_different_data=True)
    assert result["different_data"] and result["matched"] == 6
    assert any(line.startswith("different data (--allow-different-data)")
               for line in compare_lines.header_lines(result))


@pytest.mark.parametrize("key", ["protocol", "granularity"])
def test_refuses_another_protocol_or_granularity(key: str) -> None:
    base, new = two_reports()
    base[key], new[key] = "a", "b"
    with pytest.raises(cmp.CompareError, match=f"another {key} \\(a vs b\\)"):
        cmp.compare_reports(base, new)
    new[key] = "a"
    cmp.compare_reports(base, new)


def test_refuses_disjoint_ks_and_other_schema() -> None:
    base = make_report({"hybrid": [("q1", "multi-session", 1.0)]}, ks=(1,))
    new = make_report({"hybrid": [("q1", "multi-session", 1.0)]}, ks=(5,))
    with pytest.raises(cmp.CompareError, match="share no k \\(1 vs 5\\)"):
        cmp.compare_reports(base, new)
    new = {**base, "schema_version": 99}
    with pytest.raises(cmp.CompareError, match="schema_version 1 vs 99"):
        cmp.compare_reports(base, new)


def test_refuses_reports_without_a_common_pair() -> None:
    base = make_report({"hybrid": [("q1", "multi-session", 1.0)]})
    new = make_report({"semantic": [("q1", "multi-session", 1.0)]})
    with pytest.raises(cmp.CompareError, match="no pair in common"):
        cmp.compare_reports(base, new)


def test_load_refuses_unreadable_truncated_and_foreign_files(tmp_path: Path) -> None:
    good = write_report(tmp_path / "good.json", two_reports()[0])
    assert cmp.load_report(good)["retrievers"] == ["hybrid", "semantic"]
    truncated = tmp_path / "cut.json"
    truncated.write_bytes(good.read_bytes()[:200])
    with pytest.raises(cmp.CompareError, match=r"cut.json: not valid JSON .*truncated"):
        cmp.load_report(truncated)
    with pytest.raises(cmp.CompareError, match=r"missing.json: cannot be read"):
        cmp.load_report(tmp_path / "missing.json")
    with pytest.raises(cmp.CompareError, match="is a directory, not a file"):
        cmp.load_report(tmp_path)
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(cmp.CompareError, match="not a retrieval-eval JSON report"):
        cmp.load_report(tmp_path / "list.json")
    (tmp_path / "new.json").write_text(json.dumps({**two_reports()[0], "schema_version": 2}))
    with pytest.raises(cmp.CompareError, match="schema_version 2, this pytest-retrieval-eval"):
        cmp.load_report(tmp_path / "new.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(cmp.CompareError, match=r"bin.json: not UTF-8 text \(byte 0\)"):
        cmp.load_report(tmp_path / "bin.json")


# --------------------------------------------------------------------------- CLI


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_compare_two_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # whole header lines, tmp paths and all
    base, new = two_reports()
    a = write_report(tmp_path / "a.json", base)
    b = write_report(tmp_path / "b.json", new)
    code, out, err = run_cli(capsys, "compare", str(a), str(b), "--metric", "recall@1",
                             "--json", str(tmp_path / "c.json"))
    assert code == 0 and err == ""
    assert f"compare: base {a} (lane model-free, model test/model, protocol vipune)" in out
    assert "recall@1 · hybrid" in out and "recall@5" not in out.split("only in")[0]
    saved = json.loads((tmp_path / "c.json").read_text())["comparison"]
    assert saved["changes"]["hybrid"]["1"]["lost"] == ["q3"]
    code, out, _ = run_cli(capsys, "compare", str(a), str(b), "-v")
    assert "  @1 gained: q1, q4" in out
    (tmp_path / "dir.json").mkdir()  # an unwritable --json names compare's own flag
    code, _, err = run_cli(capsys, "compare", str(a), str(b), "--json", str(tmp_path / "dir.json"))
    assert code == 4 and err.count("\n") == 1 and err.rstrip().endswith("pass another --json")


def test_cli_compare_retrievers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_report(tmp_path / "a.json", two_reports()[0])
    code, out, _ = run_cli(capsys, "compare", str(a), "--retrievers", "semantic,hybrid")
    assert code == 0
    assert "recall@1 · hybrid vs semantic" in out


@pytest.mark.parametrize("change", ["dataset", "ks", "schema", "truncated", "missing",
                                    "arguments"])
def test_cli_refusals_are_one_line_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          change: str) -> None:
    base, new = two_reports()
    if change == "dataset":
        new["dataset"] = {"name": "sample", "sha256": "b" * 64}
    elif change == "ks":
        new = make_report({"hybrid": [("q1", "multi-session", 1.0)]}, ks=(10,))
    elif change == "schema":
        new["schema_version"] = 0
    a = write_report(tmp_path / "a.json", base)
    b = write_report(tmp_path / "b.json", new)
    if change == "truncated":
        b.write_text(b.read_text()[:-30])
    elif change == "missing":
        b.unlink()
    args = ["compare", str(a)] if change == "arguments" else ["compare", str(a), str(b)]
    code, out, err = run_cli(capsys, *args)
    assert code == REFUSED and out == ""
    assert err.count("\n") == 1 and err.startswith("retrieval-eval: error: ")
    if change == "dataset":
        code, out, _ = run_cli(capsys, "compare", str(a), str(b), "--allow-different-data")
        assert code == 0 and "different data (--allow-different-data)" in out


def test_rows_computed_together_equal_each_row_alone() -> None:
    """Rows on the same questions share one call; each equals its own computation."""
    rng = __import__("numpy").random.default_rng(3)
    qids = [(f"q{i:02d}", "multi-session" if i % 2 else "temporal-reasoning") for i in range(40)]
    base = make_report({name: [(q, t, float(rng.choice([0, 0.5, 1]))) for q, t in qids]
                        for name in ("hybrid", "semantic")}, ks=(1,))
    new = make_report({name: [(q, t, float(rng.choice([0, 0.5, 1]))) for q, t in qids]
                       for name in ("semantic", "hybrid")}, ks=(1,))
    new["pairs"].reverse()  # another order of pairs and retrievers: matched by id all the same
    result = cmp.compare_reports(base, new, permutations=2000, resamples=2000)
    score = {(p["retriever"], p["question_id"], side): p["metrics"]["recall@1"]
             for side, rep in (("b", base), ("n", new)) for p in rep["pairs"]}
    for r in result["rows"]["recall@1"]:
        mine = sorted(q for q, t in qids if r["question_type"] in ("overall", t))
        d = [score[(r["retriever"], q, "n")] - score[(r["retriever"], q, "b")] for q in mine]
        low, high = sig.bootstrap_ci(d, resamples=2000)
        assert (r["ci_low"], r["ci_high"]) == (float(low), float(high))
        assert r["p"] == float(sig.randomization_test(d, permutations=2000))
        assert r["delta"] == pytest.approx(sum(d) / len(d))


def test_protocol_picks_the_default_metric_and_a_missing_key_is_not_a_refusal() -> None:
    base, new = two_reports()
    base["protocol"] = new["protocol"] = "longmemeval"
    result = cmp.compare_reports(base, new)
    assert result["metrics"] == ["recall_any@1", "recall_any@5"]
    assert result["primary"] == "recall_any"
    assert any("pairs whose recall_any@k rose" in line
               for line in compare_lines.change_lines(result))
    older, _ = two_reports()  # written before reports recorded a protocol
    _, current = two_reports()
    current["protocol"], current["granularity"] = "vipune", "session"
    assert cmp.compare_reports(older, current)["metrics"] == ["recall@1", "recall@5"]
    current["granularity"] = "turn"  # an older report was session level: turns differ
    with pytest.raises(cmp.CompareError, match=r"another granularity \(session vs turn\)"):
        cmp.compare_reports(older, current)


def test_a_metric_the_pairs_lack_is_one_line() -> None:
    base, new = two_reports()
    for pair in [*base["pairs"], *new["pairs"]]:
        pair["metrics"] = {k: v for k, v in pair["metrics"].items() if not k.startswith("recall@")}
    with pytest.raises(cmp.CompareError, match=r"metric recall@1 is not scored in these reports"):
        cmp.compare_reports(base, new)
    assert cmp.compare_reports(base, new, metrics=["recall_all"])["metrics"] == [
        "recall_all@1", "recall_all@5"]


def test_rows_that_could_not_reach_significance_are_marked_with_how_many_pairs_differ() -> None:
    result = cmp.compare_reports(*two_reports())
    overall = row(result, "recall@1", "hybrid", "overall")
    assert (overall["differing"], overall["least_p"]) == (3, 0.25)  # (1, 0, -1, 1): 3 differ
    tr = row(result, "recall@1", "hybrid", "temporal-reasoning")
    assert (tr["differing"], tr["least_p"]) == (2, 0.5)
    lines = compare_lines.table_lines(result, 80)
    head = next(line for line in lines if line.startswith("question type"))
    assert head.split() == ["question", "type", "n", "m", "base", "new", "Δ", "95%", "CI",
                            "of", "Δ", "p", "Holm"]
    block = lines[lines.index(head) + 1:lines.index(head) + 4]
    rows = {line.split()[0]: line for line in block}
    assert rows["temporal-reasoning"].split()[1:3] == ["2", "2"]  # n 2 (q5, q6 unmatched), m 2
    assert rows["overall"].split()[1:3] == ["4", "3"]
    assert all(r.endswith(compare_lines.UNREACHABLE_MARK) for r in rows.values())
    m_end = head.index(" m ") + 2  # the m column sits under its heading
    assert rows["overall"][:m_end].endswith("3") and rows["overall"][m_end] == " "
    mark = compare_lines.UNREACHABLE_MARK
    notes = [line for line in lines if line.startswith(mark)]
    assert notes == [f"{mark} too few pairs differ to reach p <= 0.05: the "
                     "least p is 2/2^m (m >= 6 can)"] * 4  # under each block
    assert all(len(line) <= 80 for line in lines)
    qids = [(f"q{i}", "multi-session", 0.0) for i in range(30)]  # 25 differ: it could tell
    better = [(q, t, 1.0 if i < 25 else 0.0) for i, (q, t, _) in enumerate(qids)]
    clear = cmp.compare_reports(make_report({"hybrid": qids}), make_report({"hybrid": better}))
    lines = compare_lines.table_lines(clear, 80)
    assert not [x for x in lines if compare_lines.UNREACHABLE_MARK in x]
    assert next(x for x in lines if x.startswith("overall ")).endswith("*")


def test_the_overall_row_says_what_its_pairs_could_detect() -> None:
    """An estimate when enough pairs differ; "none" when too few do; "cannot be estimated"
    when the differences are all equal; in the JSON with how it was made."""
    def compare(new_scores: list[float]) -> dict[str, Any]:
        base = make_report({"hybrid": [(f"q{i}", "multi-session", 0.5)
                                       for i in range(len(new_scores))]})
        new = make_report({"hybrid": [(f"q{i}", "multi-session", v)
                                      for i, v in enumerate(new_scores)]})
        return cmp.compare_reports(base, new, metrics=["recall@1"])

    scores = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 0.5, 1.0, 0.5] * 3  # 21 of 30 differ
    result = compare(scores)
    dd = row(result, "recall@1", "hybrid", "overall")["detectable_delta"]
    d = np.array(scores) - 0.5
    assert dd["estimate"] == pytest.approx(
        (1.959964 + 0.841621) * float(np.std(d, ddof=1)) / np.sqrt(30), rel=1e-6)
    assert (dd["reason"], dd["alpha"], dd["power"], dd["n"]) == (None, 0.05, 0.8, 30)
    assert dd["sd"] == pytest.approx(float(np.std(d, ddof=1)))
    assert "normal approximation" in dd["method"] and "ddof 1" in dd["method"]
    assert "detectable_delta" not in row(result, "recall@1", "hybrid", "multi-session")
    assert (f"overall: smallest Δ these 30 pairs could detect at p <= 0.05 with 80% power ≈ "
            f"±{dd['estimate']:.2f} (estimate: normal approximation from the paired "
            "differences)") in compare_lines.table_lines(result)
    assert all(len(line) <= 80 for line in compare_lines.table_lines(result, 80))
    few = compare([1.0] * 5 + [0.5] * 25)
    assert row(few, "recall@1", "hybrid", "overall")["detectable_delta"]["estimate"] is None
    assert ("overall: smallest Δ these 30 pairs could detect at p <= 0.05 with 80% power: "
            "none, too few differ (5; the test needs 6)") in compare_lines.table_lines(few)
    equal = compare([1.0] * 30)  # 30 differ, all by +0.5: no spread to size a test by
    assert row(equal, "recall@1", "hybrid", "overall")["significant"]
    assert any(line.endswith("cannot be estimated (all differences equal)")
               for line in compare_lines.table_lines(equal))
    saved = json.loads(json.dumps(result))  # a comparison written before the estimate
    for r in saved["rows"]["recall@1"]:
        r.pop("detectable_delta", None)
    assert not [x for x in compare_lines.table_lines(saved) if "could detect" in x]


def test_the_table_fits_80_columns_with_long_types_and_three_digit_n() -> None:
    """LongMemEval_M's shape: 25-character types of 30 to 133 pairs, 500 overall, more than
    99 differing, p < 0.001 and significant: every line within 80, words whole."""
    types = [("single-session-preference", 30), ("single-session-assistant", 56),
             ("temporal-reasoning", 133), ("multi-session", 133),
             ("knowledge-update", 78), ("single-session-user", 70)]
    base_rows, new_rows = [], []
    for qtype, count in types:
        for i in range(count):
            qid = f"{qtype}-{i}"
            base_rows.append((qid, qtype, 0.0))
            new_rows.append((qid, qtype, 1.0 if i % 3 else 0.0))
    result = cmp.compare_reports(make_report({"hybrid": base_rows}),
                                 make_report({"hybrid": new_rows}))
    lines = compare_lines.comparison_lines(result, width=80)
    assert max(len(line) for line in lines) <= 80
    overall = [x for x in lines if x.startswith("overall ")]
    assert overall and all(x.endswith("*") and " 500 " in x and "<0.001" in x for x in overall)
    table = [x for x in lines if x.startswith("single-session-preference")]
    assert table and all(x.split()[1:3] == ["30", "20"] for x in table)
    assert max(len(x) for x in lines if x.startswith(("question type", "single-session"))) == 80


def test_no_pair_changed_is_said_first(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 48, item 7: two reports whose matched pairs all score the same say so on the
    first line; one changed pair and the line is gone."""
    scores = {"hybrid": [("q1", "multi-session", 1.0), ("q2", "multi-session", 0.5)]}
    base = write_report(tmp_path / "base.json", make_report(scores, ks=(1, 10)))
    assert cli.main(["compare", str(base), str(base)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("no pair changed: each of the 2 matched pairs scores the same")
    changed = write_report(tmp_path / "new.json", make_report(
        {"hybrid": [("q1", "multi-session", 1.0), ("q2", "multi-session", 1.0)]}, ks=(1, 10)))
    assert cli.main(["compare", str(base), str(changed)]) == 0
    assert "no pair changed" not in capsys.readouterr().out
