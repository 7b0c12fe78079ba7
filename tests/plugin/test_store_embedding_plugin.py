"""``persona.embed`` in a run (pytester): a store embedding its own texts with the run's model
ranks as ``semantic`` does, and what it embedded is reported apart (``store_embedding``);
``+unit:turn`` is refused where the rows are not sessions."""

from __future__ import annotations

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from tests.support.plugin_runs import run_with_report

pytestmark = pytest.mark.usefixtures("isolated_cache")

STORE = '''
import numpy as np


class EmbeddingStore:
    """Embeds its sessions itself (persona.embed) and ranks them by float64 cosine."""

    name = "embedding-store"

    def __init__(self):
        self.rows = {}

    def index(self, persona):
        self.rows[persona.key] = persona.embed(list(persona.texts)).astype(np.float64)

    def rank(self, persona, query, limit):
        rows = self.rows[persona.key]
        q = np.asarray(query.vector, dtype=np.float64)
        sims = rows @ q / (np.linalg.norm(rows, axis=1) * np.linalg.norm(q))
        order = np.argsort(-sims, kind="stable")
        return [persona.session_ids[i] for i in order[:limit].tolist()]
'''


def test_a_store_embedding_its_texts_ranks_as_semantic(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(embedding_store=STORE)
    pytester.syspathinsert()
    _, report = run_with_report(pytester, "--retrieval-eval-retriever",
                                "semantic,embedding_store:EmbeddingStore")
    by = {(p["retriever"], p["question_id"]): p for p in report["pairs"]}
    own = [p for p in report["pairs"] if p["retriever"] == "embedding-store"]
    assert own and len(own) * 2 == len(report["pairs"])
    for pair in own:
        assert pair["ranked"] == by[("semantic", pair["question_id"])]["ranked"]
        assert pair["latency_ms"]["store_embedding"] > 0.0  # counted apart from ingest
    assert all("store_embedding" not in by[("semantic", p["question_id"])]["latency_ms"]
               for p in own)


def test_unit_turn_is_refused_where_rows_are_turns(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning",
                                "--retrieval-eval", "--no-model",
                                "--retrieval-eval-granularity", "turn",
                                "--retrieval-eval-retriever", "semantic+unit:turn")
    assert result.ret != 0
    text = result.stdout.str() + result.stderr.str()
    assert "'semantic+unit:turn' ranks the turns of session rows" in text
