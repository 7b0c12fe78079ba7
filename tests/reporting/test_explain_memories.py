"""``retrieval-eval explain`` of memory stores and budgets (issue 36, section 6), from
hand-built reports: each memory row's score, tokens, provenance, gold and text excerpt; the
rule where each budget's context ends, among a memory store's memories and among a session
store's rows; ``--diff`` of a session store against a turn store (memory recall, and what
each budget's context holds on both sides); ``compare`` of token counts in whole tokens."""

from __future__ import annotations

from typing import Any

from pytest_retrieval_eval.reporting.compare_lines import table_lines
from pytest_retrieval_eval.reporting.explain import explain_lines
from pytest_retrieval_eval.reporting.explain_diff import diff_lines

GOLD = ["s2", "s4"]


def _session_pair() -> dict[str, Any]:
    """A session store: s1 (500 tok), s2 (300), s3 (900), s4 (200); budgets 400 (nothing
    fits), 1000 (s1, s2), 5000 (all four: the ranking ran out)."""
    return {
        "retriever": "sessions", "question_id": "q1", "question_type": "multi-session",
        "gold": GOLD, "ranked": ["s1", "s2", "s3", "s4"],
        "metrics": {"recall@1": 0.0, "recall@4": 1.0, "recall@400tok": 0.0,
                    "recall@1000tok": 0.5, "recall@5000tok": 1.0,
                    "tokens@1": 500.0, "tokens@4": 1900.0},
        "budget": {"tokens": [500, 300, 900, 200], "fit": {"400": 0, "1000": 2, "5000": 4},
                   "held": {"400": 0, "1000": 800, "5000": 1900},
                   "ended": {"400": "budget", "1000": "budget", "5000": "ranking"},
                   "read": 4, "reread": False},
    }


def _memory(rank: int, mem_id: str, tokens: int, *, sessions: tuple[str, ...] = (),
            turns: tuple[str, ...] = (), text: str | None = None,
            excerpt: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"rank": rank, "id": mem_id, "score": 1.0 / rank,
                             "sessions": list(sessions), "turns": list(turns), "text": text,
                             "tokens": tokens}
    if excerpt is not None:
        entry["excerpt"] = excerpt
    return entry


def _turn_pair() -> dict[str, Any]:
    """A turn store: five memories recorded (four turns and a fact of two sessions);
    budgets 400 (memories 1-3, 350 tok), 1000 (1-5, 620) and 5000 (past the rows shown:
    40 memories, 4990 tok)."""
    memories = [
        _memory(1, "s3_1", 100, turns=("s3_1",), excerpt="user: I moved to Lisbon."),
        _memory(2, "s2_3", 120, turns=("s2_3",), excerpt="assistant: Miso is a fine name."),
        _memory(3, "fact-7", 130, sessions=("s4", "s1"), text="The user has a cat named Miso"
                " and lives in Lisbon, which they moved to in the spring of 2021."),
        _memory(4, "s1_2", 150, turns=("s1_2",), excerpt="user: What should I cook?"),
        _memory(5, "s4_1", 120, turns=("s4_1",), excerpt="user: The weather was nice."),
    ]
    return {
        "retriever": "semantic+unit:turn", "question_id": "q1",
        "question_type": "multi-session", "gold": GOLD, "ranked": ["s3", "s2", "s4", "s1"],
        "memories": memories,
        "metrics": {"recall@1": 0.0, "recall@4": 1.0, "memory_recall@1": 0.0,
                    "memory_recall@4": 1.0, "recall@400tok": 1.0, "recall@1000tok": 1.0,
                    "recall@5000tok": 1.0, "tokens@1": 100.0, "tokens@4": 500.0},
        "budget": {"tokens": [100, 120, 130, 150], "fit": {"400": 3, "1000": 5, "5000": 40},
                   "held": {"400": 350, "1000": 620, "5000": 4990},
                   "ended": {"400": "budget", "1000": "budget", "5000": "budget"},
                   "read": 44, "reread": True},
    }


def _report(*pairs: dict[str, Any]) -> dict[str, Any]:
    return {"ks": [1, 4], "pairs": list(pairs)}


def test_a_session_stores_rows_show_their_tokens_and_the_budget_cuts() -> None:
    lines = explain_lines(_report(_session_pair()), "q1", width=None)
    head = lines.index("sessions: top 4")
    assert lines[head + 1:head + 9] == [
        "      ---- budget 400 tok holds nothing (next: 500) ----",
        "    1   s1  500 tok",
        "    2 * s2  300 tok",
        "      ---- budget 1000 tok ends here: sessions 1-2, 800 tok (next: 900) ----",
        "    3   s3  900 tok",
        "    4 * s4  200 tok",
        "      ---- budget 5000 tok: the whole ranking fits (4 sessions, 1900 tok) ----",
        "  gold s2: rank 2",
    ]


def test_an_empty_ranking_has_no_budget_rule() -> None:
    pair = _session_pair()
    pair.update(ranked=[], budget={**pair["budget"], "tokens": [], "fit": {"400": 0},
                                   "held": {"400": 0}, "ended": {"400": "ranking"}})
    lines = explain_lines(_report(pair), "q1", width=None)
    assert "sessions: top 4 (0 rows returned)" in lines
    assert not any("----" in line for line in lines)


def test_a_memory_stores_memories_show_score_tokens_provenance_gold_and_text() -> None:
    lines = explain_lines(_report(_turn_pair()), "q1", width=None)
    head = next(i for i, x in enumerate(lines) if x.startswith("semantic+unit:turn: memories"))
    assert "score, tokens, sessions and turns where not the id, text" in lines[head]
    rows = lines[head + 1:head + 10]
    assert rows[0] == "    1   s3_1    score 1.0000  100 tok  'user: I moved to Lisbon.'"
    assert rows[1] == ("    2 * s2_3    score 0.5000  120 tok  gold s2  "
                       "'assistant: Miso is a fine name.'")
    # its own text, cut to 60 characters; its sessions, since they are not its id
    assert rows[2] == ("    3 * fact-7  score 0.3333  130 tok  sessions s4,s1  gold s4  "
                       "'The user has a cat named Miso and lives in Lisbon, which th…'")
    assert rows[3] == ("      ---- budget 400 tok ends here: memories 1-3, 350 tok "
                       "(next: 150) ----")
    assert rows[4].startswith("    4   s1_2    score 0.2500  150 tok")
    assert rows[5].startswith("    5 * s4_1 ")
    assert rows[6] == "      ---- budget 1000 tok ends here: memories 1-5, 620 tok ----"
    assert rows[7] == ("      ---- budget 5000 tok ends after memory 40, past the rows shown "
                       "(4990 tok) ----")
    assert rows[8] == "  gold s2: first in memory 2 (s2_3)"


def test_a_report_without_a_budget_shows_no_tokens_and_no_rules() -> None:
    pair = _turn_pair()
    del pair["budget"]
    for memory in pair["memories"]:
        del memory["tokens"]
    lines = explain_lines(_report(pair), "q1", width=None)
    assert not any("tok" in line for line in lines)
    assert "    1   s3_1    score 1.0000  'user: I moved to Lisbon.'" in lines
    session = _session_pair()
    del session["budget"]
    assert "    1   s1" in explain_lines(_report(session), "q1", width=None)


def test_diff_of_a_session_store_and_a_turn_store() -> None:
    report = _report(_session_pair(), _turn_pair())
    for base, new in ((report, report), (_report(_session_pair()), _report(_turn_pair()))):
        lines = diff_lines(base, new, "q1", retrievers=[("sessions", "semantic+unit:turn")],
                           width=None)
        assert "sessions -> semantic+unit:turn: top 4 (base, new rank; + entered, - left; " \
               "* gold)" in lines
        assert "  recall@1 0.000 -> 0.000" not in lines
        assert not any(line.startswith("  recall@") and "tok" in line.split(";")[0]
                       and "base " not in line for line in lines)  # budgets: their own lines
        assert "  memory_recall (gold covered by the first k memories): @1 0.000 -> 0.000; " \
               "@4 1.000 -> 1.000" in lines
        assert lines[-3:] == [
            "  recall@400tok 0.000 -> 1.000: base 0 sessions, 0 tok; new 3 memories, 350 tok",
            "  recall@1000tok 0.500 -> 1.000: base 2 sessions, 800 tok; new 5 memories, "
            "620 tok",
            "  recall@5000tok 1.000 -> 1.000: base 4 sessions, 1900 tok, the whole ranking; "
            "new 40 memories, 4990 tok",
        ]
        assert "  new: semantic+unit:turn: memories (rank, * covers gold; score, tokens, " \
               "sessions and turns where not the id, text) - the ranking above is their " \
               "sessions in first-memory order" in lines
        assert all(len(line) <= 80 for line in diff_lines(
            base, new, "q1", retrievers=[("sessions", "semantic+unit:turn")], width=80))


def test_compare_shows_token_counts_in_whole_tokens() -> None:
    row = {"retriever": "b vs a", "question_type": "overall", "n": 15, "differing": 15,
           "base": 4597.4, "new": 845.9, "delta": -3751.5, "ci_low": -4000.2,
           "ci_high": -3490.4, "p": 0.0001, "p_holm": 0.0001, "significant": True}
    frac = {**row, "base": 0.578, "new": 0.867, "delta": 0.289, "ci_low": 0.1,
            "ci_high": 0.45}
    lines = table_lines({"rows": {"tokens@10": [row], "recall@10": [frac]}})
    assert "overall      15  15  4597   846  -3752 [-4000,-3490] <0.001 <0.001*" in lines
    assert "overall      15  15 0.578 0.867 +0.289 [+0.10,+0.45] <0.001 <0.001*" in lines
