"""Every number a memory store's pair gets (issue 36, sections 2 and 3), through pytest on a
hand-made history, against a hand computation: the derived session ranking and its
recall@k, recall_any@k, recall_all@k and ndcg_any@k, memory_recall@k, turn_recall@k,
recall@<B>tok and tokens@k, the token counts those use (tiktoken's own encoder on the ranks
bpe-openai ships), and what explain shows of them (each memory's tokens and excerpt, where
each budget's context ends)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.data.pairs import render_session
from pytest_retrieval_eval.reporting.explain import explain_lines
from tests.support.lme_factory import make_instance, write_dataset

pytestmark = [pytest.mark.usefixtures("isolated_cache"),
              pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")]

#: Four sessions; gold s0 and s1, whose first turns are the has_answer turns.
SESSIONS = [
    [{"role": "user", "content": "I moved to Lisbon in spring.", "has_answer": True},
     {"role": "assistant", "content": "How exciting!"}],
    [{"role": "user", "content": "My cat is called Miso.", "has_answer": True}],
    [{"role": "user", "content": "What should I cook tonight?"},
     {"role": "assistant", "content": "Try a risotto with mushrooms and thyme."}],
    [{"role": "user", "content": " ".join(["We talked about the weather a lot."] * 40)}],
]


def _o200k(text: str) -> int:
    """tiktoken's own count of o200k_base on the rank file bpe-openai ships."""
    import tiktoken
    from bpe_openai import registry

    spec = registry.o200k_base()
    enc = tiktoken.Encoding(name="o200k_base", pat_str=spec["pat_str"],
                            mergeable_ranks=spec["mergeable_ranks"],
                            special_tokens=spec["special_tokens"])
    return len(enc.encode_ordinary(text))


def test_every_number_of_a_memory_store_by_hand(pytester: pytest.Pytester,
                                                tmp_path: Path) -> None:
    raw = make_instance("q1", n_sessions=4, gold=(0, 1))
    raw["haystack_sessions"] = SESSIONS
    data = write_dataset(tmp_path / "lme.json", [raw])
    # The memories' texts (tests/support/memory_store.py HandMemories): m1 its own text; m2
    # the turn s0_1; m3 the turn s1_1 (a memory with turns is handed its turns' text, its
    # session s2 adds provenance only); m4 (never read: k 3's three memories cover 4
    # sessions) the turn s2_2.
    t1 = _o200k("We talked about weather.")
    t2 = _o200k(render_session([SESSIONS[0][0]]))
    t3 = _o200k(render_session([SESSIONS[1][0]]))
    budgets = {t1 - 1: 0.0,          # nothing fits
               t1 + t2: 0.5,         # m1 (s3), m2 (s0): gold s0
               t1 + t2 + t3: 1.0}    # all three read: s3, s0, s2, s1
    assert len(budgets) == 3
    out = tmp_path / "r.json"
    result = pytester.runpytest(
        "-p", "no:randomly", "-W", "ignore::pytest.PytestAssertRewriteWarning",
        "--retrieval-eval", "--no-model", f"--retrieval-eval-data={data}",
        "--retrieval-eval-retriever=tests.support.memory_store:HandMemories",
        "--retrieval-eval-k=1,2,3", f"--retrieval-eval-json={out}",
        "--retrieval-eval-budget=" + ",".join(map(str, budgets)))
    assert result.ret == 0, result.stdout.str()
    report: dict[str, Any] = json.loads(out.read_text())
    pair = report["pairs"][0]
    m = pair["metrics"]
    # The session ranking: each session at its first memory, a memory's own in its order
    # (m3: its sessions, then its turns' sessions): s3, s0, s2, s1.
    assert pair["ranked"] == ["q1_s3", "q1_s0", "q1_s2"]
    assert [m[f"recall@{k}"] for k in (1, 2, 3)] == [0.0, 0.5, 0.5]
    assert [m[f"recall_any@{k}"] for k in (1, 2, 3)] == [0.0, 1.0, 1.0]
    assert [m[f"recall_all@{k}"] for k in (1, 2, 3)] == [0.0, 0.0, 0.0]
    # ndcg_any: gold s0 at rank 2 adds 1/log2(2); the ideal of two gold is 1 + 1/log2(2)
    assert m["ndcg_any@1"] == 0.0
    assert m["ndcg_any@2"] == pytest.approx((1 / math.log2(2)) / 2)
    assert m["ndcg_any@3"] == pytest.approx((1 / math.log2(2)) / 2)
    # memory_recall@k: k's own call read memories until they cover k sessions: [m1],
    # [m1, m2], [m1, m2, m3]; gold covered: none, s0, s0 and s1
    assert [m[f"memory_recall@{k}"] for k in (1, 2, 3)] == [0.0, 0.5, 1.0]
    # turn_recall@k: the has_answer turns s0_1 and s1_1 among the first k memories' turns
    assert [m[f"turn_recall@{k}"] for k in (1, 2, 3)] == [0.0, 0.5, 1.0]
    for budget, want in budgets.items():
        assert m[f"recall@{budget}tok"] == want, budget
    assert [m[f"tokens@{k}"] for k in (1, 2, 3)] == [t1, t1 + t2, t1 + t2 + t3]
    facts = pair["budget"]
    assert facts["tokens"] == [t1, t2, t3]
    assert facts["fit"] == {str(b): n for b, n in zip(budgets, [0, 2, 3], strict=True)}
    assert facts["held"] == {str(t1 - 1): 0, str(t1 + t2): t1 + t2,
                             str(t1 + t2 + t3): t1 + t2 + t3}
    assert facts["ended"][str(t1 + t2 + t3)] == "ranking"
    # The record explain reads: each memory's tokens, and the text it stands for.
    record = pair["memories"]
    assert [(r["rank"], r["id"], r["tokens"]) for r in record] == [
        (1, "fact-weather", t1), (2, "q1_s0_1", t2), (3, "fact-cat", t3)]
    assert "excerpt" not in record[0] and record[0]["text"] == "We talked about weather."
    assert record[1]["excerpt"] == "user: I moved to Lisbon in spring."
    assert record[2]["excerpt"] == "user: My cat is called Miso."
    lines = explain_lines(report, "q1", width=None)
    head = next(i for i, x in enumerate(lines) if x.startswith("hand-memories: memories"))
    assert lines[head + 1:head + 7] == [
        f"      ---- budget {t1 - 1} tok holds nothing (next: {t1}) ----",
        f"    1   fact-weather  score 0.9000  {t1} tok  sessions q1_s3  "
        "'We talked about weather.'",
        f"    2 * q1_s0_1       score 0.8000  {t2} tok  gold q1_s0  "
        "'user: I moved to Lisbon in spring.'",
        f"      ---- budget {t1 + t2} tok ends here: memories 1-2, {t1 + t2} tok "
        f"(next: {t3}) ----",
        f"    3 * fact-cat      score 0.7000  {t3} tok  sessions q1_s2  turns q1_s1_1  "
        "gold q1_s1  'user: My cat is called Miso.'",
        f"      ---- budget {t1 + t2 + t3} tok: the whole ranking fits (3 memories, "
        f"{t1 + t2 + t3} tok) ----",
    ]


def test_memories_of_several_sessions_by_hand(pytester: pytest.Pytester,
                                              tmp_path: Path) -> None:
    """memory_recall@k is over the first k memories even where fewer memories already cover
    k sessions; the session metrics stay on the first k distinct sessions."""
    data = write_dataset(tmp_path / "lme.json", [make_instance("q1", n_sessions=5,
                                                               gold=(1, 4))])
    out = tmp_path / "r.json"
    result = pytester.runpytest(
        "-p", "no:randomly", "-W", "ignore::pytest.PytestAssertRewriteWarning",
        "--retrieval-eval", "--no-model", f"--retrieval-eval-data={data}",
        "--retrieval-eval-retriever=tests.support.memory_store:SeveralSessionMemories",
        "--retrieval-eval-k=1,2,3", f"--retrieval-eval-json={out}")
    assert result.ret == 0, result.stdout.str()
    pair = json.loads(out.read_text())["pairs"][0]
    m = pair["metrics"]
    # Read at limit 3: summary-a (s0, s2) and fact-b (s4) cover 3 sessions in 2 memories,
    # so fact-c (s3, then s1 of its turn) is read too; then 3 memories, 5 sessions: stop.
    # The session ranking: s0, s2, s4, s3, s1; its first 3 sessions are scored.
    assert pair["ranked"] == ["q1_s0", "q1_s2", "q1_s4"]
    assert [r["id"] for r in pair["memories"]] == ["summary-a", "fact-b", "fact-c"]
    # gold s1 and s4: the first k sessions hold none, none, s4
    assert [m[f"recall@{k}"] for k in (1, 2, 3)] == [0.0, 0.0, 0.5]
    assert [m[f"recall_any@{k}"] for k in (1, 2, 3)] == [0.0, 0.0, 1.0]
    assert [m[f"recall_all@{k}"] for k in (1, 2, 3)] == [0.0, 0.0, 0.0]
    # ndcg_any@3: s4 at rank 3 adds 1/log2(3); the ideal of two gold is 1 + 1/log2(2)
    assert m["ndcg_any@3"] == pytest.approx((1 / math.log2(3)) / 2)
    # memory_recall@k, the first k memories: {s0, s2}; + s4; + s3, s1
    assert [m[f"memory_recall@{k}"] for k in (1, 2, 3)] == [0.0, 0.5, 1.0]
    # turn_recall@k: the has_answer turns s1_1 and s4_1 among the first k memories' turns
    assert [m[f"turn_recall@{k}"] for k in (1, 2, 3)] == [0.0, 0.5, 1.0]
