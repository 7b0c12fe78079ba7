"""Every ``retrieval-eval`` summary fits the terminal (``$COLUMNS``), on the bundled sample
where a command reads one: at 80 columns (and 60) no line is wider, a line that was too wide
continues on lines indented two spaces, and a wide terminal shows the same words on whole
lines. Errors and warnings stay one line at any width (test_cli.py checks their text)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting.report import SCHEMA_VERSION
from tests.support.compare_factory import make_report, write_report
from tests.support.hub_standin import HubStandIn, serve
from tests.support.lme_factory import small_dataset
from tests.support.wrapped import join, words

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
WIDE = 1000
#: What differs between two runs of one command: its seconds and its rate.
TIMING = re.compile(r"\d+\.\ds\b|\d+\.\d MB/s")


def run(argv: list[str], columns: int, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> str:
    """The command's stdout at a terminal ``columns`` wide (it must succeed)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def check(narrow: str, wide: str, columns: int) -> list[str]:
    """``narrow`` fits ``columns``; ``wide`` is the same words on whole lines, which the
    narrow lines join back to. Returns the whole lines."""
    lines = narrow.splitlines()
    assert all(len(line) <= columns for line in lines), narrow
    whole = wide.splitlines()
    assert not any(line.startswith("  ") for line in whole), wide  # nothing to wrap
    assert words(TIMING.sub("T", narrow)) == words(TIMING.sub("T", wide))
    assert TIMING.sub("T", "\n".join(join(lines))) == TIMING.sub("T", "\n".join(whole))
    return whole


@pytest.fixture(autouse=True)
def short_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths relative to the test's folder: a path is one word that no width cuts, so the
    tests keep theirs shorter than a line."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No network and no model files: the sample's commands run on its bundled vectors."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


def prep_sample(cache: Path, *extra: str) -> list[str]:
    return ["prep", "--model", MINILM, "--cache", str(cache), "--offline", "--no-progress",
            *extra]


@pytest.mark.parametrize("columns", [60, 80])
def test_prep_and_its_scale_lines(offline: None, tmp_path: Path, columns: int,
                                  capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    argv = prep_sample(Path("c"), "--shard", "1/2", "--subset", "8")
    narrow = run(argv, columns, capsys, monkeypatch)
    wide = run(argv, WIDE, capsys, monkeypatch)
    summary, subset, shard = check(narrow, wide, columns)
    assert len(narrow.splitlines()) > 3  # the summary was wrapped
    assert re.match(r"prep: \d+ slots, \d+ unique texts, 0 embedded now, \d+ from cache, "
                    rf"\d+\.\ds \(model {MINILM}, fingerprint b49cef8401c3; not loaded: every "
                    r"vector needed was cached\)$", summary)
    assert subset.startswith("subset: 8 pairs, seed 0 (")
    assert shard.startswith("shard 1/2: 0 missing texts left to the other slices")


@pytest.mark.parametrize("columns", [60, 80])
def test_models_breaks_an_entry_between_its_fields(offline: None, tmp_path: Path, columns: int,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["models", "--cache", "empty"]
    narrow = run(argv, columns, capsys, monkeypatch)
    wide = run(argv, WIDE, capsys, monkeypatch)
    assert all(len(line) <= columns for line in narrow.splitlines()), narrow
    assert words(narrow) == words(wide)
    (entry,) = wide.splitlines()  # the bundled model, one line when there is room
    assert entry == (f"{MINILM}  fingerprint b49cef8401c3  dim 384  2500 vectors  pooling "
                     "mean  max_length 256  query_prefix ''  (bundled)")
    fields = entry.split("  ")
    rows = narrow.splitlines()
    assert len(rows) > 1 and all(row.startswith("  ") for row in rows[1:])
    # Broken only between fields: each line is whole fields, in order.
    assert [field for row in rows for field in row.strip().split("  ")] == fields


def test_cache_merge(offline: None, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                     monkeypatch: pytest.MonkeyPatch) -> None:
    run(prep_sample(Path("c1"), "--shard", "1/2"), WIDE, capsys, monkeypatch)
    narrow, wide = (run(["cache", "merge", "c1", "--into", "merged", "--no-progress"], columns,
                        capsys, monkeypatch) for columns in (80, WIDE))
    counts, bundled = check(narrow, wide, 80)
    assert counts == (f"merge: model {MINILM} (fingerprint b49cef8401c3): 0 vectors copied, 0 "
                      "already present, from 0 verified shard(s)")
    assert bundled.startswith("merge: the sources hold none of this model's vectors")
    # The merged cache listed: its entry fits too.
    listed = run(["models", "--cache", "merged"], 80, capsys, monkeypatch)
    assert all(len(line) <= 80 for line in listed.splitlines()), listed


def test_export(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                monkeypatch: pytest.MonkeyPatch) -> None:
    report = Path("r.json")
    pairs = [{"question_id": f"q{i}", "retriever": name, "question_type": "t",
              "ranked": ["a", "b"], "gold": ["b"], "metrics": {}}
             for i in range(3) for name in ("hybrid", "semantic")]
    report.write_text(json.dumps({"schema_version": SCHEMA_VERSION,
                                  "dataset": {"sha256": "0" * 64}, "ks": [1, 2],
                                  "retrievers": ["hybrid", "semantic"], "pairs": pairs}))
    out = Path("exports-of-the-nightly-run", "trec-files-for-trec-eval")
    argv = ["export", str(report), "--format", "trec", "--out", str(out)]
    narrow = run(argv, 80, capsys, monkeypatch)
    (line,) = check(narrow, run(argv, WIDE, capsys, monkeypatch), 80)
    assert line == f"wrote 2 run files and qrels (6 rankings of 3 questions) to {out}"


def test_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                  monkeypatch: pytest.MonkeyPatch) -> None:
    target = Path("generated-data-sets", "a-sample-of-longmemeval.json")
    argv = ["generate", "--preset", "sample", "--no-progress", str(target)]
    narrow = run(argv, 60, capsys, monkeypatch)
    (line,) = check(narrow, run(argv, WIDE, capsys, monkeypatch), 60)
    assert line.startswith(f"generate: wrote {target}: 18 instances, ")


def test_plot(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is in the test extra")
    report = write_report(Path("r.json"), make_report({"hybrid": [("q1", "multi-session", 1)]}))
    figure = Path("figures-of-the-nightly-benchmark-run", "recall-per-question-type-of-hybrid.png")
    argv = ["plot", str(report), "-o", str(figure)]
    narrow = run(argv, 80, capsys, monkeypatch)
    assert check(narrow, run(argv, WIDE, capsys, monkeypatch), 80) == [f"figure: {figure}"]
    assert narrow.splitlines() == ["figure:", f"  {figure}"]  # the path whole on its line


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    yield from serve(tmp_path, monkeypatch)


def test_cache_push_and_pull(hub: HubStandIn, tmp_path: Path, tiny_model_dir: Path,
                             capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    source = Path("source")
    data = small_dataset(Path("data.json"), 3)
    run(["prep", "--data", str(data), "--model", str(tiny_model_dir), "--cache", str(source),
         "--no-progress"], WIDE, capsys, monkeypatch)
    repo = "an-organisation/vectors-of-the-nightly-benchmark"
    pushed = run(["cache", "push", "--repo", repo, "--cache", str(source), "--no-progress"],
                 80, capsys, monkeypatch)
    assert all(len(line) <= 80 for line in pushed.splitlines()) and pushed.count("\n") > 1
    (line,) = join(pushed)
    assert re.match(rf"cache push: 4 files sent \(.*\), 0 already there, to dataset repo "
                    rf"{repo} \(commit [0-9a-f]{{12}}\); model tiny-model, fingerprint "
                    r"[0-9a-f]{12}, \d+\.\ds$", line), line
    narrow, wide = (run(["cache", "pull", "--repo", repo, "--cache", name, "--no-progress"],
                        columns, capsys, monkeypatch) for name, columns in (("a", 80), ("b", WIDE)))
    (line,) = check(narrow, wide, 80)
    assert line.startswith("cache pull: 1 shard fetched (")


def test_an_error_stays_one_line_at_any_width(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    missing = Path("a-folder-that-is-not-there", "data.json")
    assert cli.main(["prep", "--data", str(missing), "--cache", "c",
                     "--offline", "--no-progress"]) == 4
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and len(err) > 40
    assert err.startswith("retrieval-eval: error: ") and str(missing) in err


class _Terminal:
    """A stderr that says it is a terminal, collecting what is written."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        return len(text)


def test_an_error_wraps_on_a_terminal_and_stays_one_line_into_a_pipe(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38.3: on an 80-column terminal the console script's error is cut at spaces, the
    fix command whole on a line of its own; into a pipe or a log it is one line (grep, CI)."""
    monkeypatch.setenv("COLUMNS", "80")
    text = ("cache merge: /some/folder/that/is/long/enough/to/need/a/second/line holds no "
            "vectors/ folder, so it is not a prepared cache; run "
            "`retrieval-eval prep --cache=/some/folder` first")
    terminal = _Terminal()
    line = cli.error_line(text, terminal)  # type: ignore[arg-type]
    lines = line.splitlines()
    assert len(lines) > 1 and all(len(x) <= 80 for x in lines), line
    assert lines[0].startswith("retrieval-eval: error: cache merge:")
    assert any("`retrieval-eval prep --cache=/some/folder`" in x for x in lines[1:]), line
    assert line.split() == f"retrieval-eval: error: {text}".split()

    class _Pipe(_Terminal):
        def isatty(self) -> bool:
            return False

    assert cli.error_line(text, _Pipe()) == (  # type: ignore[arg-type]
        f"retrieval-eval: error: {text}\n")


def test_a_bad_argument_wraps_on_a_terminal_too(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """Issue 48, item 7: argparse's refusal of an argument (a misspelt flag) is cut to the
    terminal's width as the command's other errors are; into a pipe, one line."""
    monkeypatch.setenv("COLUMNS", "60")
    for terminal, lines in ((True, "many"), (False, "one")):
        stderr = _Terminal()
        monkeypatch.setattr(_Terminal, "isatty", lambda self, t=terminal: t)
        monkeypatch.setattr("sys.stderr", stderr)
        with pytest.raises(SystemExit) as stop:
            cli.main(["explain", str(tmp_path / "r.json"), "q1", "--retreiver", "hybrid",
                      "--diff-with-a-long-misspelt-flag"])
        assert stop.value.code == 2
        got = stderr.text.splitlines()
        assert got[0].startswith("retrieval-eval: error: unrecognized arguments")
        if lines == "one":
            assert len(got) == 1
        else:
            assert len(got) > 1 and all(len(x) <= 60 for x in got if " " in x.strip()), got


@pytest.mark.parametrize("command", [["prep"], ["cache", "merge"], ["explain"], ["badge"]])
def test_help_never_breaks_a_word_at_its_hyphen(
        command: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 48, item 7: ``prep --help`` at 80 columns kept the cache path
    ``~/.cache/pytest-retrieval-eval`` whole only by luck of its length; help wraps at spaces
    only, so no line ends inside a hyphenated word."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", "/home/someone/.cache/pytest-retrieval-eval")
    with pytest.raises(SystemExit):
        cli.main([*command, "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert lines and not [x for x in lines if re.search(r"\w-$", x)], lines
    if command == ["prep"]:
        assert "/home/someone/.cache/pytest-retrieval-eval" in "\n".join(lines)
