"""``retrieval-eval explain`` shows each row's score and the facts a store gives
(``last_facts``), for any retriever: a custom store end to end, and hybrid's recorded scores
checked against the RRF arithmetic explain prints from the fused lists' ranks."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.reporting.explain_facts import full_facts
from tests.support.plugin_runs import run_with_report

pytestmark = pytest.mark.usefixtures("isolated_cache")

STORE = textwrap.dedent('''
    import pytest

    class WordStore:
        name = "word-store"
        needs_vectors = False

        def rank(self, persona, query, limit):
            words = set(query.question.lower().split())
            scored, facts = [], {}
            for i, (mem_id, text) in enumerate(zip(persona.session_ids, persona.texts)):
                hit = sorted(words & set(text.lower().split()))
                scored.append((mem_id, len(hit) - i / 10_000))
                facts[mem_id] = {"matched": hit, "note": "n" * 5000}
            scored.sort(key=lambda x: -x[1])
            self.last_facts = facts
            return [mem_id for mem_id, _ in scored[:limit]]

    @pytest.fixture(scope="session")
    def retrieval_eval_custom_retriever():
        return WordStore()
''')


def test_a_custom_stores_facts_are_recorded_bounded_and_shown(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeconftest(STORE)
    _, data = run_with_report(pytester, "--retrieval-eval-retriever", "custom")
    for p in data["pairs"]:
        p["explain"] = full_facts(p)
    pair = next(p for p in data["pairs"] if p["explain"]["rows"][p["ranked"][0]]["facts"]
                ["matched"])
    rows = pair["explain"]["rows"]
    assert set(rows) == set(pair["ranked"]) | set(pair["gold"])  # top max-k and gold only
    top = rows[pair["ranked"][0]]
    assert "score" not in top  # ids returned, no scores: none recorded
    assert len(top["facts"]["note"]) == 200  # a long fact is cut
    capsys.readouterr()
    assert cli.main(["explain", str(pytester.path / "report.json"), pair["question_id"]]) == 0
    out = capsys.readouterr().out
    text = " ".join(line.strip() for line in out.splitlines())  # wrapped lines joined back
    assert (f"1 * {pair['ranked'][0]}" if pair["ranked"][0] in pair["gold"] else
            f"1 {pair['ranked'][0]}") in text
    assert f"matched: {', '.join(top['facts']['matched'])}; note: {'n' * 199}…" in text
    assert len(json.dumps(pair["explain"])) < 300 * len(rows)  # bounded per row


def test_hybrids_recorded_scores_are_its_rrf_sums(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """Each shown row's score equals 1/(25 + semantic rank) + 1/(25 + FTS rank) of the
    fused lists' ranks (recency 0): the report records it once, as the ranks explain adds
    up (issue 35, item 3), so no hybrid row keeps a score of its own."""
    _, data = run_with_report(pytester, "--retrieval-eval-retriever", "hybrid")
    checked = 0
    for pair in data["pairs"]:
        facts = full_facts(pair)
        assert not any("score" in row for row in facts.get("rows", {}).values())
        checked += len(facts["fusion"]["rows"])
    assert checked > 5
    pair = data["pairs"][0]
    ranks = full_facts(pair)["fusion"]["rows"][pair["ranked"][0]]
    s, f = ranks["semantic"], ranks["fts"]
    score = (1 / (25 + s) if s else 0.0) + (1 / (25 + f) if f else 0.0)
    qid = pair["question_id"]
    capsys.readouterr()
    assert cli.main(["explain", str(pytester.path / "report.json"), qid]) == 0
    out = capsys.readouterr().out
    first = next(ln for ln in out.splitlines() if ln.startswith("    1 "))
    # The RRF sum the row's ranks give is the recorded score: shown once, as the sum.
    assert re.search(rf"sem \d+ \+ fts (\d+|-) = {score:.4f}", first), first
