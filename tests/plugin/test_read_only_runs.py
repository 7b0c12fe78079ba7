"""``--co``, ``--setup-plan`` and ``--setup-only`` score nothing, so they write nothing
(issue 29.2): a cold cache stays absent, a warm one keeps every file's bytes and mtime, no
report is written, and the items listed are those a real run collects."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.lme_factory import make_instance, write_dataset

QUESTIONS = [("q1", "multi-session"), ("q2", "temporal-reasoning"), ("q3", "knowledge-update")]
READ_ONLY = [("--co",), ("--setup-plan",), ("--setup-only",), ("--co", "-n", "2")]


@pytest.fixture
def data(pytester: pytest.Pytester, isolated_cache: Path) -> Path:
    return write_dataset(pytester.path / "lme.json", [
        make_instance(qid, question_type=qtype, n_sessions=3) for qid, qtype in QUESTIONS])


def run(pytester: pytest.Pytester, data: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:randomly", "-W",
                              "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval",
                              "--no-model", f"--retrieval-eval-data={data}",
                              "--retrieval-eval-retriever=bm25,fts,oracle",
                              f"--retrieval-eval-json={pytester.path / 'report.json'}", *args)


def ids_of(result: pytest.RunResult) -> list[str]:
    return sorted(line.split(" ")[0] for line in result.stdout.lines
                  if line.startswith("retrieval-eval::"))


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root``: its bytes and mtime (ns); folders as empty entries."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file()
            else (b"", 0) for p in sorted(root.rglob("*"))}


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own temp root (the in-process run's mkdtemp lands here), so another
    test's scratch folder, made at the same time under -n 2, is never counted."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def scratch_folders(root: Path) -> set[str]:
    return {p.name for p in root.glob("retrieval-eval-readonly-*")}


def test_a_cold_cache_stays_absent_and_the_items_are_a_real_runs(
        pytester: pytest.Pytester, data: Path, isolated_cache: Path,
        private_tmp: Path) -> None:
    """Each read-only mode in turn on the cold cache, then one real run: its items are the
    ones each mode listed."""
    listings = {}
    for args in READ_ONLY:
        result = run(pytester, data, *args, "-q" if "--co" in args else "-v")
        assert result.ret == 0, result.stdout.str()
        assert not isolated_cache.exists(), args
        assert not (pytester.path / "report.json").exists(), args
        assert scratch_folders(private_tmp) == set(), args  # the temp corpus is removed
        listings[" ".join(args)] = ids_of(result)
        assert len(listings[" ".join(args)]) == 9, args
    real = run(pytester, data, "-v")
    real.assert_outcomes(passed=9)
    assert all(listed == ids_of(real) for listed in listings.values()), listings


def test_a_warm_cache_keeps_every_files_bytes_and_mtime(
        pytester: pytest.Pytester, data: Path, isolated_cache: Path) -> None:
    """One real run warms the cache; each read-only mode after it changes no byte or mtime
    under the cache, nor the report."""
    run(pytester, data).assert_outcomes(passed=9)
    report = pytester.path / "report.json"
    written = report.read_bytes()
    before = snapshot(isolated_cache)
    assert any(name.endswith(".sqlite") for name in before)
    for args in READ_ONLY:
        result = run(pytester, data, *args, "-q")
        assert result.ret == 0, result.stdout.str()
        assert snapshot(isolated_cache) == before, args
        assert report.read_bytes() == written, args


CUSTOM = """
import pytest

class Custom:
    name = "custom"

    def rank(self, persona, query, limit):
        return list(persona.session_ids)[:limit]

@pytest.fixture(scope="session")
def retrieval_eval_custom_retriever():
    return Custom()
"""


def test_the_model_lane_embeds_nothing_under_collect_only(
        pytester: pytest.Pytester, data: Path, isolated_cache: Path,
        tiny_model_dir: Path) -> None:
    pytester.makeconftest(CUSTOM)
    args = ("-p", "no:randomly", "--retrieval-eval", f"--retrieval-eval-model={tiny_model_dir}",
            f"--retrieval-eval-data={data}", "--retrieval-eval-retriever=custom")
    result = pytester.runpytest(*args, "--co", "-q")
    assert result.ret == 0, result.stdout.str()
    assert len(ids_of(result)) == 3
    assert not isolated_cache.exists()


def test_the_model_lane_loads_and_downloads_no_model_under_collect_only(
        pytester: pytest.Pytester, data: Path, isolated_cache: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Serially and under ``-n 2``: the items listed, the header's model line; one real run
    after both shows the model would have been needed."""
    # A Hub-named model that is nowhere on disk, and a Hub that refuses every connection: a
    # listing that tried to load it would fail (a real run does, below).
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_HOME", str(pytester.path / "hf-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # the header on one line
    common = ("-p", "no:randomly", "--retrieval-eval", "--retrieval-eval-model=nobody/absent",
              f"--retrieval-eval-data={data}", "--retrieval-eval-retriever=semantic,hybrid",
              "--retrieval-eval-network-deadline=5")
    for args in (("--co", "-q"), ("--co", "-q", "-n", "2")):
        result = pytester.runpytest_subprocess(*common, *args)
        assert result.ret == 0, result.stdout.str()
        assert len(ids_of(result)) == 6
        header = pytester.runpytest_subprocess(*common, *[a for a in args if a != "-q"])
        assert header.ret == 0, header.stdout.str()
        header.stdout.fnmatch_lines(["*model nobody/absent (not loaded: nothing is scored)*"])
        assert not isolated_cache.exists()
        assert not (pytester.path / "hf-home").exists()
    real = pytester.runpytest_subprocess(*common, "-q")
    assert real.ret != 0
    assert "model 'nobody/absent'" in real.stderr.str() + real.stdout.str()
