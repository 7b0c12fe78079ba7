"""pytest 9's native TOML config (``pytest.toml``, ``[tool.pytest]``): the ini twins take their
TOML types (lists of ks and retrievers, whole numbers, seconds, booleans) and run as the same
settings written as strings in ``pytest.ini``; a wrong type is one line naming the option, the
type it takes and an example. The string forms keep working on every pytest the project allows.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.reliability_support import joined_errors, match_errors

USAGE_ERROR = 4
PYTEST_9 = int(pytest.__version__.split(".")[0]) >= 9
needs_native_toml = pytest.mark.skipif(
    not PYTEST_9, reason=f"native TOML config needs pytest >= 9.0 (this is {pytest.__version__})")

pytestmark = pytest.mark.usefixtures("isolated_cache")

STRINGS = """\
retrieval_eval = true
retrieval_eval_no_model = true
retrieval_eval_k = 1,3
retrieval_eval_retriever = fts,bm25
retrieval_eval_subset = 8
retrieval_eval_subset_seed = 1
retrieval_eval_vipune_timeout = 30
retrieval_eval_json = report.json
"""
NATIVE = """\
retrieval_eval = true
retrieval_eval_no_model = true
retrieval_eval_k = [1, 3]
retrieval_eval_retriever = ["fts", "bm25"]
retrieval_eval_subset = 8
retrieval_eval_subset_seed = 1
retrieval_eval_vipune_timeout = 30.0
retrieval_eval_json = "report.json"
"""
#: The same settings as TOML strings, for ``[tool.pytest.ini_options]`` (pytest's ini mode).
QUOTED = "".join(f'{line.split(" = ")[0]} = "{line.split(" = ")[1]}"\n'
                 for line in STRINGS.splitlines())


def _run(pytester: pytest.Pytester) -> tuple[list[str], dict[str, Any]]:
    """The run's header lines and the JSON report's fields that the settings decide."""
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider",
                                "-W", "ignore::pytest.PytestAssertRewriteWarning")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    header = [line for line in result.stdout.lines
              if line.startswith(("retrievers:", "pairs:", "subset:", "lane:"))]
    report = json.loads((pytester.path / "report.json").read_text())
    fields = {key: report[key] for key in ("ks", "retrievers", "lane", "subset")}
    fields["pairs"] = sorted((pair["retriever"], pair["question_id"], pair["ranked"])
                             for pair in report["pairs"])
    return header, fields


def _strings_run(pytester: pytest.Pytester) -> tuple[list[str], dict[str, Any]]:
    ini = pytester.makeini(f"[pytest]\n{STRINGS}")
    try:
        return _run(pytester)
    finally:
        ini.unlink()
        (pytester.path / "report.json").unlink()


@needs_native_toml
@pytest.mark.parametrize("where", ["pytest.toml", "pyproject.toml [tool.pytest]"])
def test_native_toml_types_run_as_the_ini_strings(pytester: pytest.Pytester,
                                                  where: str) -> None:
    expected = _strings_run(pytester)
    if where == "pytest.toml":
        pytester.makefile(".toml", pytest=f"[pytest]\n{NATIVE}")
    else:
        pytester.makepyprojecttoml(f"[tool.pytest]\n{NATIVE}")
    header, fields = _run(pytester)
    assert fields["ks"] == [1, 3] and fields["retrievers"] == ["fts", "bm25"]
    assert (header, fields) == expected
    assert any("retrievers: fts, bm25  k: 1, 3" in line for line in header), header


def test_ini_options_table_takes_the_strings(pytester: pytest.Pytester) -> None:
    """``[tool.pytest.ini_options]`` is pytest's ini mode on every pytest: strings, as in
    pytest.ini."""
    expected = _strings_run(pytester)
    pytester.makepyprojecttoml(f"[tool.pytest.ini_options]\n{QUOTED}")
    assert _run(pytester) == expected


@needs_native_toml
def test_toml_strings_are_read_as_in_an_ini_file(pytester: pytest.Pytester) -> None:
    """A string in a native TOML table is the ini file's text: ``"1,3"``, ``"yes"``."""
    expected = _strings_run(pytester)
    quoted = QUOTED.replace('= "true"', '= "yes"')
    pytester.makefile(".toml", pytest=f"[pytest]\n{quoted}")
    assert _run(pytester) == expected


@needs_native_toml
@pytest.mark.parametrize(("line", "message"), [
    ("retrieval_eval_subset = [8]",
     "ini option retrieval_eval_subset takes a whole number, e.g. retrieval_eval_subset = 8; "
     "got list [8]"),
    ("retrieval_eval_subset = 8.5",
     "ini option retrieval_eval_subset takes a whole number, e.g. *; got float 8.5"),
    ("retrieval_eval_k = [1, \"three\"]",
     "ini option retrieval_eval_k takes a list of whole numbers (or one), "
     "e.g. retrieval_eval_k = [1, 5, 10]; got str 'three' at index 1"),
    ("retrieval_eval_k = []", "ini option retrieval_eval_k takes *; got an empty list"),
    ("retrieval_eval_k = [0, 3]", "ini option retrieval_eval_k: k 0 is out of range*"),
    ("retrieval_eval_retriever = 3",
     "ini option retrieval_eval_retriever takes a list of retriever names, "
     "e.g. retrieval_eval_retriever = [\"hybrid\", \"bm25\"]; got int 3"),
    ("retrieval_eval_retriever = [\"nope\"]",
     "ini option retrieval_eval_retriever: unknown retriever 'nope'*"),
    ("retrieval_eval_no_model = 1",
     "ini option retrieval_eval_no_model takes a boolean, "
     "e.g. retrieval_eval_no_model = true; got int 1"),
    ("retrieval_eval_no_model = [true]",
     "ini option retrieval_eval_no_model takes a boolean, "
     "e.g. retrieval_eval_no_model = true; got list [True]"),
    ("retrieval_eval_no_model = []",
     "ini option retrieval_eval_no_model takes a boolean, *; got list []"),
    ("retrieval_eval_pooling = true",
     "ini option retrieval_eval_pooling takes a string, "
     "e.g. retrieval_eval_pooling = \"mean\"; got bool True"),
    ("retrieval_eval_vipune_timeout = \"soon\"",
     "ini option retrieval_eval_vipune_timeout: 'soon' is not a number"),
    ("retrieval_eval_vipune_timeout = [1]",
     "ini option retrieval_eval_vipune_timeout takes a number of seconds, "
     "e.g. retrieval_eval_vipune_timeout = 60; got list [1]"),
])
def test_a_wrong_toml_type_is_one_line(pytester: pytest.Pytester, line: str,
                                       message: str) -> None:
    pytester.makefile(".toml", pytest=f"[pytest]\nretrieval_eval = true\n{line}\n")
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == USAGE_ERROR
    lines = [text for text in joined_errors(result.stderr.str()) if text.strip()]
    assert len(lines) == 1, lines
    match_errors(result.stderr.str(), [f"ERROR: {message}"])
    assert "true or false" not in lines[0] or "no_model" in line


@needs_native_toml
def test_the_switch_as_a_toml_list_is_one_line(pytester: pytest.Pytester) -> None:
    """``retrieval_eval = [true]`` is no silent "off": the same one-line type error."""
    pytester.makefile(".toml", pytest="[pytest]\nretrieval_eval = [true]\n")
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == USAGE_ERROR
    lines = [text for text in joined_errors(result.stderr.str()) if text.strip()]
    assert lines == ["ERROR: ini option retrieval_eval takes a boolean, e.g. retrieval_eval = "
                     "true; got list [True]"], lines


def test_a_bad_ini_string_names_no_boolean_unless_a_flag(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nretrieval_eval = true\nretrieval_eval_subset = eight\n")
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == USAGE_ERROR
    match_errors(result.stderr.str(), ["ERROR: ini option retrieval_eval_subset: 'eight' is not a "
                                 "whole number"])
    assert "true or false" not in result.stderr.str()


def test_ini_options_table_takes_a_toml_list(pytester: pytest.Pytester) -> None:
    """pytest's ini mode hands a TOML list over as a list (pytest >= 9.2 warns that it is
    deprecated for a string option): still the run's ks, on every pytest."""
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\nretrieval_eval = true\n"
                               "retrieval_eval_no_model = true\nretrieval_eval_k = [1, 3]\n"
                               "retrieval_eval_retriever = [\"bm25\"]\n")
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider",
                                "-W", "ignore::pytest.PytestAssertRewriteWarning")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["retrievers: bm25  k: 1, 3"])
