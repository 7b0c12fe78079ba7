"""Issue 38, stumble 7: a TOML list under ``[tool.pytest.ini_options]`` draws pytest's
``PytestRemovedIn10Warning`` (ini mode hands a string option a list), and docs/options.md
says so: strings there, lists only in pytest's native TOML (``pytest.toml``, ``[tool.pytest]``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)

OPTIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "options.md"
PYTEST = tuple(int(x) for x in pytest.__version__.split(".")[:2])

pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.mark.skipif(PYTEST < (9, 2), reason="pytest warns from 9.2 on")
def test_a_list_in_ini_options_draws_pytest_s_warning(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\nretrieval_eval = true\n"
                               "retrieval_eval_no_model = true\nretrieval_eval_k = [1, 3]\n"
                               "retrieval_eval_retriever = \"bm25\"\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert "PytestRemovedIn10Warning" in result.stdout.str() + result.stderr.str()
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\nretrieval_eval = true\n"
                               "retrieval_eval_no_model = true\nretrieval_eval_k = \"1,3\"\n"
                               "retrieval_eval_retriever = \"bm25\"\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == 0 and "PytestRemovedIn10Warning" not in result.stdout.str()


def test_the_options_page_says_strings_there_and_lists_in_pytest_toml() -> None:
    text = " ".join(OPTIONS_PAGE.read_text(encoding="utf-8").split())
    assert ("In `[tool.pytest.ini_options]` write every value as a string "
            "(`retrieval_eval_k = \"1,5,10\"`,") in text
    assert "PytestRemovedIn10Warning" in text
    assert "lists only in `pytest.toml` or `[tool.pytest]`" in text
