"""The summary's "no pair was scored" line says why (issue 36 audit C): the items that ran
all failed, or the selection chose none."""

from __future__ import annotations

import shlex
import sys

import pytest

import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.data.generator.instances import SAMPLE, iter_instances

pytestmark = pytest.mark.usefixtures("isolated_cache")

#: The bundled sample's scored questions (its shipped vectors serve --no-model).
USABLE = [i["question_id"] for i in iter_instances(SAMPLE)
          if not i["question_id"].endswith("_abs")]

#: A cmd: store that says hello and answers every other request with a line that is not JSON.
GARBAGE = """
import json, sys
for line in sys.stdin:
    if json.loads(line)["op"] == "hello":
        print(json.dumps({"name": "garbage", "vectors": False}), flush=True)
    else:
        print("garbage", flush=True)
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    store = pytester.path / "garbage.py"
    store.write_text(GARBAGE)
    return pytester.runpytest(
        "-p", "no:randomly", "-W", "ignore::pytest.PytestAssertRewriteWarning",
        "--retrieval-eval", "--no-model",
        f"--retrieval-eval-retriever=cmd:{shlex.quote(sys.executable)} "
        f"{shlex.quote(str(store))}", *args)


def test_the_one_selected_item_failed(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "-k", USABLE[0])
    result.assert_outcomes(failed=1, deselected=len(USABLE) - 1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["no pair was scored: 1 selected item(s) failed; see their "
                                 "failures above"])
    assert "chose none" not in out
    assert "errors: 1 item(s) failed" not in out  # said once, by the line above


def test_every_item_failed_without_a_selection(pytester: pytest.Pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(failed=len(USABLE))
    result.stdout.fnmatch_lines([f"no pair was scored: {len(USABLE)} item(s) failed; see their "
                                 "failures above"])
    assert "chose none" not in result.stdout.str()
