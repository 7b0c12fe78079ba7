"""Option validators, the README's option table, and the plugin's cost when it is off."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.config import options
from tests.support import ROOT

README = ROOT / "README.md"


@pytest.mark.parametrize(("value", "expected"), [
    ("1,5,10", (1, 5, 10)), ("10, 5,1,5", (1, 5, 10)), ("10000", (10000,)), ("3", (3,)),
])
def test_parse_ks_accepts_sorts_and_dedupes(value: str, expected: tuple[int, ...]) -> None:
    assert options.parse_ks(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "10001", "a", "1,,x", "", "1.5"])
def test_parse_ks_rejects(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        options.parse_ks(value)


@pytest.mark.parametrize("value", ["\u0665", "1,\u0665", "1_0", "+5", "\uff15"])
def test_parse_ks_takes_ascii_digits_only(value: str) -> None:
    """Issue 27.13: int() reads an Arabic-Indic or full-width digit, and 1_0, as numbers."""
    with pytest.raises(argparse.ArgumentTypeError, match="is not a whole number"):
        options.parse_ks(value)
    for whole in (options.positive_int, options.nonnegative_int):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a whole number"):
            whole(value.split(",")[-1])


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "nan", "1e999"])
def test_a_timeout_is_finite(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is not a finite number"):
        options.positive_float(value)
    assert options.positive_float("0.5") == 0.5


def test_every_path_option_refuses_an_empty_value() -> None:
    """Issue 27.13: ``--retrieval-eval-json=`` was "no report", silently."""
    paths = [o for o in options.OPTIONS if o.metavar in ("PATH", "DIR", "BASE.json", "SPEC",
                                                         "ID|DIR", "NAME", "REPO")]
    assert {o.dest for o in paths} >= {f"retrieval_eval_{d}" for d in (
        "json", "compare", "markdown", "cache", "store_dir", "vipune", "data", "model")}
    for opt in paths:
        for empty in ("", "  "):
            with pytest.raises(argparse.ArgumentTypeError, match="the value is empty"):
                opt.parse(empty)


def test_parse_retrievers() -> None:
    assert options.parse_retrievers("hybrid, bm25,hybrid") == ("hybrid", "bm25")
    assert options.parse_retrievers("pkg.mod:Store,custom") == ("pkg.mod:Store", "custom")
    for bad in ("", "bm26", "pkg.mod", "pkg:"):
        with pytest.raises(argparse.ArgumentTypeError):
            options.parse_retrievers(bad)


def test_other_validators() -> None:
    assert options.positive_int("3") == 3
    assert options.max_length("512") == 512
    assert options.choice("a", "b")("b") == "b"
    assert options.boolean("yes") is True and options.boolean("off") is False
    for fn, bad in ((options.positive_int, "0"), (options.max_length, "513"),
                    (options.positive_float, "-1"), (options.choice("a"), "c"),
                    (options.boolean, "maybe")):
        with pytest.raises(argparse.ArgumentTypeError):
            fn(bad)


def test_every_option_and_ini_name_is_documented_with_its_default() -> None:
    # The full table lives in docs/options.md; the README gives the options in brief.
    table = (README.parent / "docs" / "options.md").read_text(encoding="utf-8")
    for opt in options.OPTIONS:
        assert f"`{opt.flag}" in table, opt.flag
        assert f"`{opt.dest}`" in table, opt.dest
        assert "default" in opt.help, opt.flag


def test_help_lists_the_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["retrieval evaluation (pytest-retrieval-eval):*",
                                 "*--retrieval-eval-k=K*", "*--no-model*"])


def test_the_retriever_help_names_the_turn_unit() -> None:
    """Issue 48, item 7: the README's ini scores ``semantic+unit:turn``; the option's help
    says what ``+unit:turn`` is."""
    (retriever,) = [o for o in options.OPTIONS if o.flag == "--retrieval-eval-retriever"]
    assert "+unit:turn" in retriever.help and "semantic+unit:turn" in retriever.help


def test_help_names_the_store_dir_files_as_they_are_written(
        pytester: pytest.Pytester) -> None:
    """Issue 38, stumble 5: --help named the copies ``<question_id>.sqlite``; they are
    ``<prefix>-<hash>.sqlite`` (vipune/exports.py) with ``stores.json`` beside them."""
    from pytest_retrieval_eval.vipune import exports

    result = pytester.runpytest("--help")
    text = " ".join(result.stdout.str().split())
    assert "<question_id>.sqlite" not in text
    assert "<prefix>-<hash>.sqlite" in text and exports.MAP_NAME in text
    assert f"first {exports.PREFIX_CHARS} characters" in text
    name = exports.export_name("q/1")
    assert name.startswith("q_1-") and name.endswith(".sqlite")


def test_plugin_off_imports_no_heavy_module(tmp_path: Path) -> None:
    """Without --retrieval-eval the plugin costs nothing measurable: no numpy, sqlite3,
    onnxruntime, pyarrow, tokenizers or huggingface_hub import, no file written."""
    (tmp_path / "test_x.py").write_text("def test_x(): pass\n")
    probe = (
        "import sys, pytest\n"
        "code = pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'no:xdist', "
        "'-p', 'no:hypothesispytest', 'test_x.py'])\n"
        "heavy = [m for m in ('numpy', 'sqlite3', 'onnxruntime', 'pyarrow', 'tokenizers', "
        "'huggingface_hub', 'pytest_retrieval_eval.run.session') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(code)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                         text=True, env={"RETRIEVAL_EVAL_CACHE_DIR": str(tmp_path / "c"),
                                         "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "HEAVY []" in out.stdout
    assert not (tmp_path / "c").exists()  # the cache was never touched


@pytest.mark.parametrize(("args", "ini", "explicit"), [
    ((), "", frozenset()),
    (("--retrieval-eval-pooling=mean",), "", frozenset({"pooling"})),  # the default, but set
    (("--retrieval-eval-query-prefix=",), "", frozenset({"query_prefix"})),
    ((), "retrieval_eval_max_length = 256\n", frozenset({"max_length"})),
    (("--retrieval-eval-device=cpu",), "retrieval_eval_pooling = cls\n",
     frozenset({"pooling"})),  # the device changes no vector: not a recipe option
])
def test_settings_record_which_recipe_options_were_set(
        pytester: pytest.Pytester, args: tuple[str, ...], ini: str,
        explicit: frozenset[str]) -> None:
    from pytest_retrieval_eval.config.settings import read_settings

    pytester.makeini("[pytest]\n" + ini)
    settings = read_settings(pytester.parseconfig(*args))
    assert settings.explicit == explicit


@pytest.mark.parametrize(("file", "text"), [
    ("pytest.ini", "[pytest]\nretrieval_eval_retriver = bm25\n"),
    ("tox.ini", "[pytest]\nretrieval_eval_retriver = bm25\n"),
    ("setup.cfg", "[tool:pytest]\nretrieval_eval_retriver = bm25\n"),
    ("pyproject.toml", "[tool.pytest.ini_options]\nretrieval_eval_retriver = \"bm25\"\n"),
    ("pyproject.toml", "[tool.pytest]\nretrieval_eval_retriver = \"bm25\"\n"),
    ("pytest.toml", "[pytest]\nretrieval_eval_retriver = \"bm25\"\n"),
    ("-o", ""),
])
def test_a_misspelled_ini_key_is_refused_naming_the_key_meant(
        pytester: pytest.Pytester, file: str, text: str) -> None:
    """Issue 43.21: pytest ignored ``retrieval_eval_retriver = bm25`` with its generic warning
    at the end, and the run fell back to the default retriever."""
    from pytest_retrieval_eval.config.settings import read_settings

    args: tuple[str, ...] = ()
    if file == "-o":
        args = ("-o", "retrieval_eval_retriver=bm25")
    else:
        (pytester.path / file).write_text(text, encoding="utf-8")
    with pytest.raises(pytest.UsageError) as caught:
        read_settings(pytester.parseconfig(*args))
    assert " ".join(str(caught.value).split()) == (
        "ini option retrieval_eval_retriver is no option of pytest-retrieval-eval: pytest "
        "would ignore it and run with the default; did you mean retrieval_eval_retriever?")


def test_a_misspelled_retriever_name_says_the_one_meant() -> None:
    """Issue 43.21: ``hybird`` (and ``hybird+fts:or``) named no retriever meant."""
    with pytest.raises(argparse.ArgumentTypeError, match=r"did you mean 'hybrid'\? choose"):
        options.parse_retrievers("bm25,hybird")
    with pytest.raises(argparse.ArgumentTypeError,
                       match=r"'hybird' is no retriever; did you mean 'hybrid'\?"):
        options.parse_retrievers("hybird+fts:or")
