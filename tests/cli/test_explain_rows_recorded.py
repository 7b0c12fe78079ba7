"""What a run records for ``retrieval-eval explain``'s rows, checked against independent
computations on the bundled sample: each shown row's semantic and FTS rank against the
``semantic``, ``fts`` and ``fts+mode:or`` retrievers' own rankings of the same run, its matched
words against SQLite's FTS5 MATCH of each word on the persona's store; and ``--diff`` of two
real reports (hybrid vs hybrid+fts:or): the row that jumped in is marked, with its FTS rank."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting.explain_facts import full_facts
from pytest_retrieval_eval.vipune import store
from tests.support.plugin_runs import run_with_report

pytestmark = pytest.mark.usefixtures("isolated_cache")

TOP = 50  # past every haystack's FTS list, so the fts retrievers' own lists are whole


def _by(data: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The pairs by (retriever, question), their explain facts in the long form."""
    return {(p["retriever"], p["question_id"]): {**p, "explain": full_facts(p)}
            for p in data["pairs"]}


def _store_of(cache: Path, ids: set[str]) -> Path:
    """The persona store holding these rows (each question's haystack has its own)."""
    for path in sorted(cache.rglob("*.sqlite")):
        held = store.store_ids(path)
        if held is not None and ids <= set(held):
            return path
    raise AssertionError(f"no store holds {sorted(ids)[:3]}")


def test_recorded_ranks_and_matched_words_agree_with_independent_computations(
        pytester: pytest.Pytester, isolated_cache: Path) -> None:
    _, data = run_with_report(pytester, "--retrieval-eval-k", f"5,10,{TOP}",
                              "--retrieval-eval-retriever",
                              "hybrid,hybrid+fts:or,semantic,fts,fts+mode:or")
    pairs = _by(data)
    ranks_checked = words_checked = 0
    matches: dict[tuple[Path, str], set[str]] = {}  # (store, word) -> the ids FTS5 matches
    for (name, qid), pair in pairs.items():
        if not name.startswith("hybrid"):
            continue
        fusion = pair["explain"]["fusion"]
        sem = pairs[("semantic", qid)]["ranked"]
        fts = pairs[("fts" if fusion["fts_mode"] == "and" else "fts+mode:or", qid)]["ranked"]
        rows = fusion["rows"]
        assert set(rows) == set(pair["ranked"][:TOP]) | set(pair["gold"])  # bounded
        for mem_id, ranks in rows.items():
            if mem_id in sem:
                assert ranks["semantic"] == sem.index(mem_id) + 1, (name, qid, mem_id)
            else:
                assert ranks["semantic"] is None or ranks["semantic"] > TOP
            # the fts retriever returned every match (fewer than TOP): absent means no match
            assert len(fts) < TOP
            assert ranks["fts"] == (fts.index(mem_id) + 1 if mem_id in fts else None), \
                (name, qid, mem_id)
            ranks_checked += 1
        # Matched words: SQLite's FTS5, vipune's own search of each word alone, on the
        # persona's store.
        path = _store_of(isolated_cache, set(rows))
        for word in fusion["words"]:  # each word's matches, searched once per store
            if (path, word) not in matches:
                matches[path, word] = {
                    i for i, _ in vipune.fts_search(path, word, store.PROJECT_ID, 10_000)}
        for mem_id in rows:
            expected = [w for w in fusion["words"] if mem_id in matches[path, w]]
            assert fusion["matched"].get(mem_id, []) == expected, (name, qid, mem_id)
            words_checked += 1
        assert fusion["words"] == list(dict.fromkeys(vipune.fts_words(pair["question"])))
    assert ranks_checked > 200 and words_checked > 200
    for (name, qid), pair in pairs.items():  # the fts retrievers record theirs too
        if name.startswith("fts"):
            recorded = pair["explain"]["fts"]["matched"]
            hybrid = pairs[("hybrid" if name == "fts" else "hybrid+fts:or", qid)]
            for mem_id in pair["ranked"]:
                assert recorded[mem_id] == hybrid["explain"]["fusion"]["matched"][mem_id]


@pytest.fixture(scope="module")
def reports_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("two-reports")


@pytest.fixture
def two_reports(pytester: pytest.Pytester, reports_dir: Path) -> tuple[Path, Path]:
    """The reports of two real runs, made by the first test that asks and read by both
    (``explain`` only reads them)."""
    base, new = reports_dir / "base.json", reports_dir / "new.json"
    if not new.exists():
        run_with_report(pytester, "--retrieval-eval-retriever", "hybrid")
        (pytester.path / "report.json").rename(base)
        run_with_report(pytester, "--retrieval-eval-retriever", "hybrid+fts:or")
        (pytester.path / "report.json").rename(new)
    return base, new


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_diff_of_two_real_reports_marks_the_row_that_jumped_in(
        two_reports: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    base, new = two_reports
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = _run(["explain", str(base), "e7110041", "--diff", str(new),
                           "--retrievers", "hybrid=hybrid+fts:or"], capsys)
    assert code == 0 and not err
    lines = out.splitlines()
    assert "hybrid -> hybrid+fts:or: top 10 (base, new rank; + entered, - left; * gold)" in lines
    # sharegpt_o7H1JAH_0 was not in hybrid's top 10 and is 3rd under OR: its FTS rank 5
    # (it matches two of the three words, so vipune's AND list never held it)
    jumped = next(ln for ln in lines if "sharegpt_o7H1JAH_0" in ln)
    assert re.match(r"  \+  -  3   sharegpt_o7H1JAH_0  +sem 1 \+ fts 5 = 0\.0718; matched",
                    jumped), jumped
    text = " ".join(line.strip() for line in lines)
    assert re.search(r"sharegpt_o7H1JAH_0 +sem 1 \+ fts 5 = 0\.0718; matched Emergency, fund",
                     text), text
    assert "gold answer_5f636ab5: rank 6 -> rank 7 (down 1)" in text
    assert any(re.match(r"  - +\d+  - +\S+ +base: sem", ln) for ln in lines)  # one left
    assert "recall@k: unchanged at every k" in text  # rank 6 -> 7: past 5 either way
    assert f"base: report {base} new:  report {new}" in text
    assert all(len(line) <= 80 for line in lines if line.strip() not in (str(base), str(new)))


def test_diff_refusals_are_one_line(two_reports: tuple[Path, Path],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    base, new = two_reports
    code, out, err = _run(["explain", str(base), "e7110041", "--diff", str(new)], capsys)
    assert code == 4 and not out and err.count("\n") == 1
    assert "no retriever ranked question e7110041 in both report" in err
    assert "map them with --retrievers BASE=NEW" in err
    code, out, err = _run(["explain", str(base), "nope", "--diff", str(new)], capsys)
    assert code == 4 and not out and err.count("\n") == 1
    assert f"question 'nope' is not in report {base}" in err
    code, out, err = _run(["explain", str(base), "e7110041", "--diff", str(new),
                           "--retrievers", "hybrid=fts"], capsys)
    assert code == 4 and err.count("\n") == 1
    assert f"retriever 'fts' did not rank question e7110041 in report {new}" in err
    code, out, err = _run(["explain", str(base), "e7110041", "--retrievers", "hybrid"], capsys)
    assert code == 4 and "give the other report with --diff OTHER.json" in err
    code, out, err = _run(["explain", str(base), "e7110041", "--diff", str(new), "--retriever",
                           "hybrid", "--retrievers", "hybrid=hybrid+fts:or"], capsys)
    assert code == 4 and "--retriever and --retrievers both name the retrievers" in err
    code, out, err = _run(["explain", str(base), "e7110041", "--diff", str(new),
                           "--retrievers", "a=b=c"], capsys)
    assert code == 4 and err.count("\n") == 1 and "BASE_NAME=NEW_NAME" in err
    # the same report against itself: nothing moved
    code, out, err = _run(["explain", str(base), "e7110041", "--diff", str(base)], capsys)
    assert code == 0 and "recall@k: unchanged at every k" in out
    assert not re.search(r"^  [+-] ", out, re.M)
    assert json.loads(base.read_text())["pairs"]  # untouched
