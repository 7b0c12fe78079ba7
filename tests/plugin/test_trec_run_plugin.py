"""``--retrieval-eval-retriever run:PATH`` end to end (pytester), and the no-scores line.

The strong check: a run file written from the built-in ``semantic``'s rankings of the bundled
sample, scored as ``run:``, gives ``semantic``'s very metrics on every pair."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.plugin_runs import run_with_report
from tests.support.reliability_support import joined_errors, match_errors

pytestmark = pytest.mark.usefixtures("isolated_cache")


def run_lines(report: dict[str, Any], retriever: str, tag: str,
              skip: str | None = None) -> list[str]:
    """A TREC run of ``retriever``'s rankings in ``report`` (strictly decreasing scores),
    lines shuffled so that only the scores give the order; ``skip``: a question left out."""
    lines = []
    for pair in report["pairs"]:
        if pair["retriever"] != retriever or pair["question_id"] == skip:
            continue
        for rank, docid in enumerate(pair["ranked"], start=1):
            lines.append(f"{pair['question_id']} Q0 {docid} {rank} {100 - rank:.1f} {tag}")
    return lines[::-1]


def column(report: dict[str, Any], not_this: str) -> str:
    """The run's column: named by its tag (once the harness names columns by ``name``) or
    by its selector."""
    (name,) = [r for r in report["retrievers"] if r != not_this]
    return name


def test_a_run_of_semantics_rankings_scores_as_semantic(pytester: pytest.Pytester) -> None:
    _, base = run_with_report(pytester, "--retrieval-eval-retriever", "semantic")
    pytester.path.joinpath("runs").mkdir()
    pytester.path.joinpath("runs", "semantic.trec").write_text(
        "\n".join(run_lines(base, "semantic", "sem-run")) + "\n")
    _, data = run_with_report(pytester, "--retrieval-eval-retriever",
                              "semantic,run:runs/semantic.trec")
    name = column(data, "semantic")
    assert name in ("sem-run", "run:runs/semantic.trec")
    by = {(p["retriever"], p["question_id"]): p for p in data["pairs"]}
    semantic = [p for p in data["pairs"] if p["retriever"] == "semantic"]
    assert semantic and len(semantic) == len([p for p in data["pairs"] if p["retriever"] == name])
    for pair in semantic:
        mine = by[(name, pair["question_id"])]
        assert mine["metrics"] == pair["metrics"], pair["question_id"]
        assert mine["ranked"] == pair["ranked"]
    assert data["summary"][name] == data["summary"]["semantic"]
    assert data["ties"][name]["pairs_with_scores"] == len(semantic)
    # Alone, a run needs no vectors: no model is chosen.
    _, alone = run_with_report(pytester, "--retrieval-eval-retriever", "run:runs/semantic.trec")
    assert alone["model"] is None
    assert alone["summary"][column(alone, "")] == data["summary"]["semantic"]


def test_ties_in_a_run_are_broken_by_docid_and_counted(pytester: pytest.Pytester) -> None:
    """semantic's top 10 of every question, all at score 0: the order as run is docid
    descending (the file's rank column ignored), and a pair is tie-sensitive exactly when its
    tied block holds a gold and a non-gold session."""
    _, base = run_with_report(pytester, "--retrieval-eval-retriever", "semantic")
    lines = [f"{p['question_id']} Q0 {d} {rank} 0 zeros"
             for p in base["pairs"] for rank, d in enumerate(p["ranked"], start=1)]
    pytester.path.joinpath("zeros.trec").write_text("\n".join(lines) + "\n")
    _, data = run_with_report(pytester, "--retrieval-eval-retriever", "run:zeros.trec")
    (name,) = data["retrievers"]
    got = {p["question_id"]: p for p in data["pairs"]}
    sensitive = 0
    for pair in base["pairs"]:
        assert got[pair["question_id"]]["ranked"] == sorted(pair["ranked"], reverse=True)
        gold = set(pair["gold"])
        sensitive += bool(gold & set(pair["ranked"])) and bool(set(pair["ranked"]) - gold)
    assert sensitive > 0
    assert data["ties"][name]["pairs_with_scores"] == len(base["pairs"])
    assert data["ties"][name]["sensitive_pairs"] == sensitive


def test_a_question_missing_from_the_run_fails_its_item(pytester: pytest.Pytester) -> None:
    _, base = run_with_report(pytester, "--retrieval-eval-retriever", "semantic")
    missing = base["pairs"][0]["question_id"]
    pytester.path.joinpath("part.trec").write_text(
        "\n".join(run_lines(base, "semantic", "part", skip=missing)) + "\n")
    result = pytester.runpytest("--retrieval-eval", "--no-model",
                                "--retrieval-eval-retriever", "run:part.trec")
    assert result.ret == 1
    result.assert_outcomes(failed=1, passed=len(base["pairs"]) - 1)
    match_errors(result.stdout.str(), [f"*run:part.trec: question {missing} has no line in run "
                                       f"file part.trec; add its ranking to the file*"],
                 head="run:")


def test_a_foreign_docid_fails_its_item(pytester: pytest.Pytester) -> None:
    _, base = run_with_report(pytester, "--retrieval-eval-retriever", "semantic")
    first = base["pairs"][0]["question_id"]
    lines = run_lines(base, "semantic", "t")
    lines.append(f"{first} Q0 someone_elses_session 99 -5 t")  # last: below every cut
    pytester.path.joinpath("foreign.trec").write_text("\n".join(lines) + "\n")
    result = pytester.runpytest("--retrieval-eval", "--no-model",
                                "--retrieval-eval-retriever", "run:foreign.trec")
    result.assert_outcomes(failed=1, passed=len(base["pairs"]) - 1)
    match_errors(result.stdout.str(), [f"*question {first}: the ranking holds "
                                       "'someone_elses_session', not a session of this "
                                       "question's*"], head="run:")


def test_a_malformed_run_is_one_usage_error(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("bad.trec").write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 t\n")
    result = pytester.runpytest("--retrieval-eval", "--no-model",
                                "--retrieval-eval-retriever", "run:bad.trec")
    assert result.ret == 4
    errors = [line for line in joined_errors(result.stderr.str()) if line.startswith("ERROR")]
    assert errors == ["ERROR: run file bad.trec line 2: 5 field(s), a run line has 6: qid Q0 "
                      "docid rank score tag, whitespace-separated"]
    assert "Traceback" not in result.stderr.str()
    result = pytester.runpytest("--retrieval-eval", "--no-model",
                                "--retrieval-eval-retriever", "run:")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*retriever 'run:' names no file; give run:PATH*"])


def test_a_relative_run_in_the_ini_is_read_from_its_folder(pytester: pytest.Pytester) -> None:
    _, base = run_with_report(pytester, "--retrieval-eval-retriever", "semantic")
    pytester.path.joinpath("runs").mkdir()
    pytester.path.joinpath("runs", "s.trec").write_text(
        "\n".join(run_lines(base, "semantic", "s")) + "\n")
    pytester.makeini("[pytest]\nretrieval_eval_retriever = run:runs/s.trec\n")
    sub = pytester.path / "elsewhere"
    sub.mkdir()
    out = pytester.path / "ini.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)
        result = pytester.runpytest("--retrieval-eval", "--no-model", "--rootdir",
                                    str(pytester.path), "-c", str(pytester.path / "tox.ini"),
                                    "--retrieval-eval-json", str(out))
    assert result.ret == 0, result.stdout.str()
    data = json.loads(out.read_text())
    (name,) = data["retrievers"]
    assert data["summary"][name] == base["summary"]["semantic"]


IDS_ONLY = textwrap.dedent('''
    import pytest

    class IdsOnly:
        name = "ids-only"
        needs_vectors = False

        def rank(self, persona, query, limit):
            return list(persona.session_ids)[:limit]

    @pytest.fixture(scope="session")
    def retrieval_eval_custom_retriever():
        return IdsOnly()
''')


def test_a_retriever_without_scores_gets_the_no_scores_line(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    pytester.makeconftest(IDS_ONLY)
    result, data = run_with_report(pytester, "--retrieval-eval-retriever", "oracle,custom")
    name = data["retrievers"][1]
    assert data["ties"][name]["pairs_with_scores"] == 0
    text = result.stdout.str()
    line = (f"no scores: {name} gives ranked ids only, so an order of equal scores cannot be "
            "seen (no tie is counted); return (id, score) pairs from rank, or set last_scores "
            "to the (id, score) list ranked, best first (docs/ties.md)")
    assert line in text.splitlines()
    assert text.count("no scores:") == 1  # oracle gives scores (a strict order): not named
    # A run whose retrievers all give scores shows no such line.
    result, _ = run_with_report(pytester, "--retrieval-eval-retriever", "oracle")
    assert "no scores:" not in result.stdout.str()


def test_agreement_on_the_sample_equals_hybrids_fusion_count(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """An independent count: hybrid's diagnostics say in how many pairs its top k equals its
    semantic list's (semantic's own ranking); `compare --retrievers semantic,hybrid` says in
    how many pairs the two top k's are identical. The same pairs, counted two ways."""
    from pytest_retrieval_eval.cli import console

    _, data = run_with_report(pytester, "--retrieval-eval-retriever", "hybrid,semantic")
    fusion = data["diagnostics"]["hybrid"]["fusion"]
    capsys.readouterr()
    assert console.main(["compare", str(pytester.path / "report.json"), "--retrievers",
                         "semantic,hybrid", "--json", str(pytester.path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    cmp = json.loads((pytester.path / "cmp.json").read_text())["comparison"]
    got = cmp["agreement"]["hybrid vs semantic"]["overall"]
    assert got["pairs"] == 15
    for k in data["ks"]:
        assert got[str(k)]["identical"] == fusion[str(k)]["equals_semantic"], k
    same = "/".join(str(got[str(k)]["identical"]) for k in data["ks"])
    assert f"agreement hybrid vs semantic: top 1/5/10 identical in {same} of 15 pairs" in \
        " ".join(out.split())


def test_the_in_run_comparison_shows_the_agreement(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same retriever against its own earlier run: every top k identical, overlap 1."""
    monkeypatch.setenv("COLUMNS", "200")
    _, base = run_with_report(pytester, "--retrieval-eval-retriever", "semantic")
    (pytester.path / "base.json").write_text(json.dumps(base))
    result, data = run_with_report(pytester, "--retrieval-eval-retriever", "semantic",
                                   "--retrieval-eval-compare", "base.json")
    n = len(base["pairs"])
    assert data["comparison"]["agreement"]["semantic"]["overall"]["10"] == {
        "identical": n, "overlap": 1.0}
    assert (f"agreement semantic: top 1/5/10 identical in {n}/{n}/{n} of {n} pairs, mean "
            "overlap@1/5/10 1.000/1.000/1.000") in result.stdout.str()


SWAP_ON_WORKERS = textwrap.dedent('''
    import shutil

    def pytest_configure(config):
        if hasattr(config, "workerinput"):  # the file replaced after the controller read it
            shutil.copyfile("second.trec", "run.trec")
''')


def test_a_run_file_swapped_under_xdist_is_never_scored_as_a_mix(
        pytester: pytest.Pytester) -> None:
    """Issue 34 item 1: each worker read the run file again, so a file replaced as the run
    started was scored as a mix of versions, and two tags made one selector two columns.
    Now the controller pins the bytes it read; a worker that reads other bytes scores
    nothing of it and stops the run in one line."""
    _, base = run_with_report(pytester, "--retrieval-eval-retriever", "semantic")
    pytester.path.joinpath("run.trec").write_text(
        "\n".join(run_lines(base, "semantic", "first")) + "\n")
    pytester.path.joinpath("second.trec").write_text(
        "\n".join(run_lines(base, "semantic", "second")[:40]) + "\n")
    pytester.makeconftest(SWAP_ON_WORKERS)
    out = pytester.path / "swapped.json"
    result = pytester.runpytest("-p", "no:randomly", "--retrieval-eval", "--no-model",
                                "--retrieval-eval-retriever", "run:run.trec", "-n", "2",
                                "--retrieval-eval-json", str(out))
    assert result.ret != 0
    text = result.stdout.str()
    line = ("run file run.trec changed after the run read it: this process read sha256 ")
    assert line in text and "no ranking of it is scored, so none mixes two versions" in text
    assert "Traceback" not in text and "node down" not in text
    data = json.loads(out.read_text())
    assert data["retrievers"] == ["first"]  # one column, the pinned tag's
    assert data["pairs"] == [] and data["errors"]
    assert {e["retriever"] for e in data["errors"]} == {"first"}
    assert all("changed after the run read it" in e["error"] for e in data["errors"])
    # Serially (one reader) the file as it is now is scored: its questions, its one tag.
    pytester.runpytest("--retrieval-eval", "--no-model", "--retrieval-eval-retriever",
                       "run:run.trec", "--retrieval-eval-json", str(out))
    serial = json.loads(out.read_text())
    assert serial["retrievers"] == ["second"] and serial["pairs"]


def test_unknown_qids_are_in_the_summary_under_q(pytester: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``-q`` hides pytest's session header, the one place that said a run file's lines
    name no question of the dataset: the summary (which ``-q`` prints) says it too."""
    monkeypatch.setenv("COLUMNS", "400")
    _, base = run_with_report(pytester, "--retrieval-eval-retriever", "semantic")
    lines = run_lines(base, "semantic", "b")
    pytester.path.joinpath("typo.trec").write_text(
        "\n".join([*lines, "no_such_question Q0 x 1 1 b"]) + "\n")
    result, data = run_with_report(pytester, "-q", "--retrieval-eval-retriever",
                                   "run:typo.trec")
    assert data["run_files"]["run:typo.trec"]["unknown_question_lines"] == 1
    said = (f"run:typo.trec: 1 of {len(lines) + 1} line(s) name no question of the dataset "
            "(qid 'no_such_question'); they are not scored: check those qids against the "
            "dataset's question_id")
    out = result.stdout.lines
    assert f"retrieval-eval: {said}" not in out  # the session header, hidden by -q
    summary = out[next(i for i, line in enumerate(out) if line.strip("= ") == "retrieval-eval"):]
    assert said in summary, "\n".join(out)


def test_a_bom_is_dropped_and_unknown_qids_are_counted(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34 item 2: a BOM glued itself to the first line's qid, which then named no
    question, silently (recall@10 moved). The BOM is dropped; a qid that is no question of
    the dataset is counted in the header and the JSON report."""
    monkeypatch.setenv("COLUMNS", "400")
    _, base = run_with_report(pytester, "--retrieval-eval-retriever", "semantic")
    lines = run_lines(base, "semantic", "b")
    lines.sort(key=lambda line: line.split()[0] != base["pairs"][0]["question_id"])
    text = "\n".join([*lines, "not_a_question Q0 x 1 1 b", "not_a_question Q0 y 2 0 b"])
    pytester.path.joinpath("bom.trec").write_bytes(b"\xef\xbb\xbf" + text.encode() + b"\n")
    result, data = run_with_report(pytester, "--retrieval-eval-retriever", "run:bom.trec")
    assert data["summary"]["b"] == base["summary"]["semantic"]
    facts = data["run_files"]["run:bom.trec"]
    assert facts["retriever"] == "b" and facts["lines"] == len(lines) + 2
    assert facts["unknown_question_lines"] == 2 and facts["unknown_questions"] == 1
    assert facts["unknown_question_ids"] == ["not_a_question"]
    assert (f"retrieval-eval: run:bom.trec: 2 of {len(lines) + 2} line(s) name no question "
            "of the dataset (qid 'not_a_question'); they are not scored: check those qids "
            "against the dataset's question_id") in result.stdout.lines
