"""Reliability V, through the plugin: no report over a file a retriever reads (34.5) and no
report inside a cache folder (34.6), each one usage line before any work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.vectors.cache import bundled_cache_dir
from tests.support.compare_factory import make_report, write_report
from tests.support.reliability_support import joined_errors, run_plugin, usage_error_line


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("option", ["--retrieval-eval-json", "--retrieval-eval-markdown"])
def test_a_report_over_its_run_file_is_refused(pytester: pytest.Pytester, tmp_path: Path,
                                               option: str) -> None:
    run = tmp_path / "run.trec"
    run.write_text("q 0 s 1 1.0 x\n")
    result = run_plugin(pytester, "--no-model", f"--retrieval-eval-retriever=run:{run}",
                        option, str(run))
    usage_error_line(result, f"{option} {run} is the file --retrieval-eval-retriever "
                     f"run:{run} names")
    assert run.read_text() == "q 0 s 1 1.0 x\n"


def test_a_report_over_a_cmd_script_is_refused(pytester: pytest.Pytester) -> None:
    script = pytester.path / "store.py"
    script.write_text("print('hi')\n")
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever=cmd:python3 store.py",
                        "--retrieval-eval-json", "store.py")
    usage_error_line(result, "--retrieval-eval-json store.py is the file "
                     "--retrieval-eval-retriever cmd:python3 store.py names")
    assert script.read_text() == "print('hi')\n"


def test_a_report_over_a_cmd_executable_is_refused(pytester: pytest.Pytester,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "bin" / "mystore"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    link = tmp_path / "alias"
    link.symlink_to(tool)
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever=cmd:mystore",
                        "--retrieval-eval-markdown", str(link))
    usage_error_line(result, "--retrieval-eval-markdown", "cmd:mystore names")
    assert tool.read_text() == "#!/bin/sh\n"


def test_a_report_over_a_dotted_retrievers_module_is_refused(
        pytester: pytest.Pytester) -> None:
    module = pytester.makepyfile(mystore="class Store:\n    name = 'mine'\n")
    pytester.syspathinsert()
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever=mystore:Store",
                        "--retrieval-eval-json", str(module))
    usage_error_line(result, "--retrieval-eval-json", "mystore:Store names")
    assert "class Store" in module.read_text()


def test_a_report_inside_the_bundled_cache_is_refused(pytester: pytest.Pytester) -> None:
    manifests = sorted(bundled_cache_dir().rglob("manifest.json"))
    assert manifests, "the bundled sample ships its vectors"
    before = manifests[0].read_bytes()
    try:
        result = run_plugin(pytester, "--no-model", "--retrieval-eval-json", str(manifests[0]))
        usage_error_line(result, f"--retrieval-eval-json {manifests[0]} lies inside the "
                         "bundled sample's read-only cache")
        assert manifests[0].read_bytes() == before
    finally:  # a failing run must not leave the package's cache broken for every later test
        if manifests[0].read_bytes() != before:
            manifests[0].write_bytes(before)


def test_a_report_inside_the_runs_cache_is_refused(pytester: pytest.Pytester,
                                                   tmp_path: Path) -> None:
    cache = tmp_path / "mycache"
    result = run_plugin(pytester, "--no-model", f"--retrieval-eval-cache={cache}",
                        "--retrieval-eval-markdown", str(cache / "vectors" / "x.md"))
    usage_error_line(result, "--retrieval-eval-markdown", "lies inside the run's cache")
    assert not cache.exists()
    default = tmp_path / "cache"  # RETRIEVAL_EVAL_CACHE_DIR, the default root
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-json",
                        str(default / "r.json"))
    usage_error_line(result, "--retrieval-eval-json", "lies inside the run's cache")


def test_store_exports_inside_a_cache_are_refused(pytester: pytest.Pytester,
                                                  tmp_path: Path) -> None:
    """--retrieval-eval-store-dir writes a .sqlite file per question: never into the run's
    cache, the default root or the bundled sample's read-only cache."""
    cache = tmp_path / "mycache"
    exports = cache / "exports"
    result = run_plugin(pytester, "--no-model", f"--retrieval-eval-cache={cache}",
                        f"--retrieval-eval-store-dir={exports}")
    usage_error_line(result, f"--retrieval-eval-store-dir {exports} lies inside the run's "
                     f"cache (--retrieval-eval-cache) {cache}")
    assert not cache.exists()
    default = tmp_path / "cache"  # RETRIEVAL_EVAL_CACHE_DIR, the default root
    result = run_plugin(pytester, "--no-model", f"--retrieval-eval-store-dir={default}")
    usage_error_line(result, "--retrieval-eval-store-dir", "lies inside the run's cache")
    assert not default.exists()
    bundled = bundled_cache_dir()
    before = set(bundled.rglob("*"))
    try:
        result = run_plugin(pytester, "--no-model", f"--retrieval-eval-store-dir={bundled}")
        usage_error_line(result, f"--retrieval-eval-store-dir {bundled} lies inside the "
                         "bundled sample's read-only cache")
        assert set(bundled.rglob("*")) == before
    finally:  # a failing run must not leave exports in the package's cache
        for path in sorted(set(bundled.rglob("*")) - before, reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()


@pytest.mark.parametrize("command", ["compare", "plot"])
def test_compare_and_plot_never_write_inside_the_bundled_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    base = write_report(tmp_path / "b.json", make_report({}))
    new = write_report(tmp_path / "n.json", make_report({}))
    manifest = sorted(bundled_cache_dir().rglob("manifest.json"))[0]
    before = manifest.read_bytes()
    flag = "--json" if command == "compare" else "-o"
    try:
        code = cli.main([command, str(base), str(new), flag, str(manifest)])
        err = "\n".join(joined_errors(capsys.readouterr().err, "retrieval-eval"))
        assert code == 4 and len(err.splitlines()) == 1, err
        assert f"{flag} {manifest} lies inside the bundled sample's read-only cache" in err
    finally:
        if manifest.read_bytes() != before:
            manifest.write_bytes(before)
