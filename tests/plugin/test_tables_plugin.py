"""Every metric family a run computes has a table in the terminal (pytester, bundled sample):
ndcg_any under the default protocol too, each cell the JSON summary's value."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)

pytestmark = pytest.mark.usefixtures("isolated_cache")


def _tables(text: str) -> dict[str, dict[str, list[str]]]:
    """Family -> {row label: cells} of the single-retriever blocks of the summary."""
    out: dict[str, dict[str, list[str]]] = {}
    family = None
    for line in text.splitlines():
        head = re.match(r"^(\w+)@k\s+\S+$", line)
        if head:
            family = head.group(1)
            out[family] = {}
        elif family and re.match(r"^[a-z-]+\s+\d+\s+[\d.]", line):
            label, _, *cells = line.split()
            out[family][label] = cells
        elif not line.strip():
            family = None
    return out


@pytest.mark.parametrize(("args", "families"), [
    ((), ["recall", "recall_any", "recall_all", "ndcg_any"]),
    (("--retrieval-eval-protocol", "longmemeval", "--retrieval-eval-granularity", "turn",
      "--retrieval-eval-k", "1,5,10"),
     ["recall_any", "recall_all", "ndcg_any", "session_recall_any", "session_recall_all",
      "session_ndcg_any"]),
])
def test_every_family_computed_has_a_table(pytester: pytest.Pytester,
                                           args: tuple[str, ...], families: list[str]) -> None:
    out = pytester.path / "r.json"
    res = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                             "--retrieval-eval", "--no-model", "--retrieval-eval-retriever",
                             "bm25", "--retrieval-eval-json", str(out), "-v", *args)
    assert res.ret == 0, res.stdout.str()
    report: dict[str, Any] = json.loads(out.read_text())
    computed = sorted({key.rpartition("@")[0] for p in report["pairs"] for key in p["metrics"]})
    assert computed == sorted(families)
    tables = _tables(res.stdout.str())
    assert list(tables) == families
    overall = report["summary"]["bm25"]["overall"]
    for family in families:
        cells = tables[family]["overall"]
        assert cells == [f"{overall[f'{family}@{k}']:.3f}" for k in report["ks"]], family
