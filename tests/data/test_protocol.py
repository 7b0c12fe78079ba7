"""Each convention of LongMemEval's retrieval protocol, pinned by a small hand-made case.

Upstream: ``src/retrieval/run_retrieval.py`` and ``src/retrieval/eval_utils.py`` of
github.com/xiaowu0162/LongMemEval (commit 9e0b455). The expected values below are worked out
by hand from upstream's code, not from ours.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from pytest_retrieval_eval.data.pairs import Instance, Rejection
from pytest_retrieval_eval.data.protocol import (
    GOLD_FROM_ANSWER_IDS,
    NO_USER_EVIDENCE,
    View,
    lme_session_item,
    lme_turn_items,
    parse_for_view,
)
from pytest_retrieval_eval.retrievers import LazyTexts, LongMemEvalBM25Retriever, Persona, Query
from pytest_retrieval_eval.scoring import longmemeval_metrics as lm
from pytest_retrieval_eval.scoring.longmemeval_metrics import strip_turn
from tests.support.lme_factory import make_instance

LME_SESSION = View("longmemeval", "session")
LME_TURN = View("longmemeval", "turn")
VIPUNE_TURN = View("vipune", "turn")


def turn(role: str, content: str, has_answer: bool | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"role": role, "content": content}
    if has_answer is not None:
        t["has_answer"] = has_answer
    return t


def instance(ids: list[str], sessions: list[list[dict[str, Any]]], **kw: Any) -> dict[str, Any]:
    raw = make_instance(kw.pop("question_id", "q1"), n_sessions=len(ids), gold=(0,))
    raw.update(haystack_session_ids=ids, haystack_sessions=sessions,
               haystack_dates=["2023/05/30 (Tue) 23:40"] * len(ids),
               answer_session_ids=[i for i in ids if "answer" in i] or ids[:1], **kw)
    return raw


def parsed(raw: dict[str, Any], view: View) -> Instance:
    out = parse_for_view(0, raw, view)
    assert isinstance(out, Instance), out
    return out


# -- text -------------------------------------------------------------------------------------

def test_session_text_is_the_user_turns_joined_by_single_spaces() -> None:
    turns = [turn("user", "I  adopted"), turn("assistant", "Nice!"), turn("user", "a\ncat")]
    assert lme_session_item("s1", turns) == ("s1", "I  adopted a\ncat")
    assert lme_session_item("s2", [turn("assistant", "only me")]) == ("s2", "")


def test_vipune_protocol_keeps_both_roles_as_role_colon_content() -> None:
    raw = instance(["s1"], [[turn("user", "hi", True), turn("assistant", "hello")]])
    base = parse_for_view(0, raw, View())
    assert isinstance(base, Instance) and base.rows[0].content == "user: hi\nassistant: hello"
    assert parsed(raw, LME_SESSION).rows[0].content == "hi"


# -- slots ------------------------------------------------------------------------------------

def test_every_repeated_session_slot_is_its_own_item() -> None:
    sessions = [[turn("user", "x", True)], [turn("user", "filler")], [turn("user", "filler")]]
    raw = instance(["answer_a", "f", "f"], sessions)
    assert [r.session_id for r in parsed(raw, LME_SESSION).rows] == ["answer_a", "f", "f"]
    assert parsed(raw, LME_SESSION).notes == {"repeated_slots_kept": 1}
    assert [r.session_id for r in parsed(raw, LME_TURN).rows] == ["answer_a_1", "f_1", "f_1"]
    base = parse_for_view(0, raw, View())
    assert isinstance(base, Instance) and [r.session_id for r in base.rows] == ["answer_a", "f"]


def test_a_repeated_slot_changes_the_bm25_statistics_and_takes_a_place() -> None:
    texts = ["cat food", "dog", "dog", "cat", "bird", "fish"]
    ids = ("a", "b", "b", "c", "d", "e")
    persona = Persona(key="p", session_ids=ids, created_at=("",) * 6,
                      vectors=np.zeros((6, 0), np.float32), texts=LazyTexts(lambda: texts),
                      store_path=lambda: None)  # type: ignore[arg-type,return-value]
    query = Query("q", "multi-session", "dog", "", None, ())
    ranked = LongMemEvalBM25Retriever().rank(persona, query, 6)
    assert ranked[:2] == ["b", "b"]  # both slots ranked, no deduplication
    got = LongMemEvalBM25Retriever().scores(persona, query)
    assert got.tolist() == BM25Okapi([t.split(" ") for t in texts]).get_scores(["dog"]).tolist()
    once = BM25Okapi([t.split(" ") for i, t in enumerate(texts) if i != 2]).get_scores(["dog"])
    assert once[1] != got[1]  # the repeat changed dog's document frequency


# -- question set ------------------------------------------------------------------------------

def test_abstention_is_a_substring_test() -> None:
    raw = instance(["answer_a"], [[turn("user", "x", True)]], question_id="q_abs_2")
    assert parsed(raw, LME_SESSION).abstention  # upstream: '_abs' in question_id
    base = parse_for_view(0, raw, View())
    assert isinstance(base, Instance) and not base.abstention  # vipune: the suffix


def test_questions_without_a_user_has_answer_turn_are_left_out() -> None:
    sessions = [[turn("user", "what is x?", False), turn("assistant", "x is 4", True)]]
    raw = instance(["answer_a"], sessions, question_type="single-session-assistant")
    lme = parsed(raw, LME_SESSION)
    assert lme.abstention and lme.notes == {NO_USER_EVIDENCE: 1}
    base = parse_for_view(0, raw, View())
    assert isinstance(base, Instance) and not base.abstention
    # A has_answer user turn anywhere in the haystack keeps it (upstream line 400).
    sessions2 = [*sessions, [turn("user", "stray", True)]]
    kept = parsed(instance(["answer_a", "other"], sessions2), LME_SESSION)
    assert not kept.abstention and NO_USER_EVIDENCE not in kept.notes


# -- gold and noans ---------------------------------------------------------------------------

def test_gold_is_every_corpus_id_containing_answer_and_noans_renames() -> None:
    sessions = [
        [turn("user", "evidence", True), turn("assistant", "ok")],
        [turn("user", "no evidence here", False), turn("assistant", "evidence", True)],
        [turn("user", "filler")],
        [turn("user", "an id that merely contains the word", True)],
    ]
    raw = instance(["answer_1", "answer_2", "f", "xanswerx"], sessions)
    lme = parsed(raw, LME_SESSION)
    assert [r.session_id for r in lme.rows] == ["answer_1", "noans_2", "f", "xanswerx"]
    assert lme.gold == ("answer_1", "xanswerx") and lme.gold_source == GOLD_FROM_ANSWER_IDS


def test_noans_replaces_every_occurrence_of_answer() -> None:
    assert lme_session_item("answer_x_answer", [turn("user", "u", False)])[0] == "noans_x_noans"


def test_a_missing_has_answer_where_upstream_reads_it_is_refused_in_one_line() -> None:
    raw = instance(["answer_a"], [[turn("user", "x", True), turn("user", "y")]])
    out = parse_for_view(0, raw, LME_SESSION)
    assert isinstance(out, Rejection) and "without has_answer" in out.reason
    out = parse_for_view(0, raw, LME_TURN)
    assert isinstance(out, Rejection) and "has_answer None" in out.reason
    # Upstream never reads has_answer outside 'answer' sessions: no refusal there.
    ok = instance(["answer_a", "f"], [[turn("user", "x", True)], [turn("user", "y")]])
    assert parsed(ok, LME_SESSION).gold == ("answer_a",)


def test_an_empty_answer_session_ids_list_is_no_reason_to_reject() -> None:
    raw = instance(["answer_a"], [[turn("user", "x", True)]])
    raw["answer_session_ids"] = []
    assert isinstance(parse_for_view(0, raw, View()), Rejection)
    assert parsed(raw, LME_SESSION).gold == ("answer_a",)


# -- turn ids ---------------------------------------------------------------------------------

def test_turn_ids_count_every_turn_from_one_and_keep_user_turns() -> None:
    turns = [turn("user", "a", False), turn("assistant", "b"), turn("user", "c", True),
             turn("assistant", "d", True)]
    assert lme_turn_items("answer_s", turns) == [("noans_s_1", "a"), ("answer_s_3", "c")]
    assert lme_turn_items("s", turns) == [("s_1", "a"), ("s_3", "c")]
    assert strip_turn("answer_s_3") == "answer_s" and strip_turn("a_b_c_12") == "a_b_c"


@given(st.text(alphabet="ab_1", max_size=12))
def test_strip_turn_is_eval_utils_expression(turn_id: str) -> None:
    """LongMemEval's eval_utils.py line 35 (the parts split at ``_``, joined without the
    last), whatever the id: none, one or several ``_``, leading or trailing."""
    assert strip_turn(turn_id) == "_".join(turn_id.split("_")[:-1])


def test_vipune_turns_are_rows_of_either_role_gold_the_has_answer_turns() -> None:
    turns = [turn("user", "a"), turn("assistant", "b", True), turn("user", "   ")]
    raw = instance(["gold", "f", "f"], [turns, [turn("user", "x")], [turn("user", "y")]])
    raw["answer_session_ids"] = ["gold"]
    vt = parsed(raw, VIPUNE_TURN)
    assert [r.session_id for r in vt.rows] == ["gold_1", "gold_2", "f_1"]  # blank dropped
    assert vt.rows[1].content == "assistant: b" and vt.gold == ("gold_2",)
    assert vt.notes.get("empty_turns") == 1
    raw["answer_session_ids"] = ["f"]  # a gold session without has_answer turns
    out = parse_for_view(0, raw, VIPUNE_TURN)
    assert isinstance(out, Rejection) and "has_answer" in out.reason


# -- tokenisation and ties --------------------------------------------------------------------

def test_tokens_are_split_on_single_spaces() -> None:
    texts = ["a  b", "a\nb", "", "b a"]
    persona = Persona(key="t", session_ids=("0", "1", "2", "3"), created_at=("",) * 4,
                      vectors=np.zeros((4, 0), np.float32), texts=LazyTexts(lambda: texts),
                      store_path=lambda: None)  # type: ignore[arg-type,return-value]
    for question in ("a b", "a\nb", "", " a"):
        query = Query("q", "multi-session", question, "", None, ())
        expected = BM25Okapi([t.split(" ") for t in texts]).get_scores(question.split(" "))
        got = LongMemEvalBM25Retriever().scores(persona, query)
        assert got.tolist() == expected.tolist(), question
    # "a\nb" is one token: only text 1 holds it.
    query = Query("q", "multi-session", "a\nb", "", None, ())
    assert LongMemEvalBM25Retriever().rank(persona, query, 1) == ["1"]


def test_ties_follow_numpys_default_argsort_reversed() -> None:
    texts = ["same words", "same words", "other", "same words", "w", "x", "y", "z"]
    ids = ("a", "b", "c", "d", "e", "f", "g", "h")
    persona = Persona(key="ties", session_ids=ids, created_at=("",) * 8,
                      vectors=np.zeros((8, 0), np.float32), texts=LazyTexts(lambda: texts),
                      store_path=lambda: None)  # type: ignore[arg-type,return-value]
    query = Query("q", "multi-session", "same", "", None, ())
    ranked = LongMemEvalBM25Retriever().rank(persona, query, 8)
    scores = BM25Okapi([t.split(" ") for t in texts]).get_scores(["same"])
    assert ranked == [ids[i] for i in np.argsort(scores)[::-1]]
    if np.array_equal(np.argsort(scores), np.argsort(scores, kind="stable")):
        # Reversed: the last of the tied rows first, where a stable descending sort (the
        # vipune protocol's bm25) gives a, b, d.
        assert ranked[:3] == ["d", "b", "a"]


# -- metrics ----------------------------------------------------------------------------------

def test_recall_all_of_no_gold_is_one_and_recall_any_zero() -> None:
    assert lm.evaluate(["a", "b"], [], ["a", "b"], 1) == (0.0, 1.0, 0.0)


def test_metrics_count_positions_without_deduplication() -> None:
    ranked = ["f", "f", "g1", "g2"]
    corpus = ["g1", "f", "f", "g2"]
    assert lm.recall_any(ranked, ["g1", "g2"], 2) == 0.0  # the repeat fills the top 2
    assert lm.recall_all(ranked, ["g1", "g2"], 4) == 1.0
    # DCG of [0, 0, 1] = 1/log2(3); ideal over all 4 positions [1, 1, 0] = 1 + 1/log2(2).
    assert lm.ndcg_any(ranked, ["g1", "g2"], corpus, 3) == pytest.approx(
        (1 / math.log2(3)) / 2.0, abs=1e-15)


def test_ndcg_ideal_counts_every_relevant_position_even_repeats() -> None:
    # A gold id in two slots: the ideal DCG@2 is 1 + 1 = 2, so one hit at rank 1 gives 0.5.
    assert lm.ndcg_any(["g", "x"], ["g"], ["g", "g", "x"], 2) == pytest.approx(0.5)
    assert lm.ndcg_any(["x"], ["g"], ["x"], 1) == 0.0  # no relevant position at all


def test_turn_to_session_grows_k_to_k_distinct_sessions() -> None:
    ranked = ["s1_1", "s1_3", "s1_5", "answer_s2_1", "s3_1"]
    corpus = ranked
    # k=2: positions 1-3 hold one session; k grows to 4, where answer_s2 appears.
    assert lm.evaluate_turn2session(ranked, ["answer_s2_1"], corpus, 2)[0] == 1.0
    assert lm.evaluate(ranked, ["answer_s2_1"], corpus, 2)[0] == 0.0
    # k beyond the sessions available: k' stops one past the corpus (upstream's <=).
    assert lm.evaluate_turn2session(ranked, ["answer_s2_1"], corpus, 10)[1] == 1.0


def test_score_ranking_names_session_metrics_of_turn_runs() -> None:
    out = lm.score_ranking(["a_1"], ["a_1"], ["a_1"], (1, 3), "turn")
    assert set(out) == {f"{p}{m}@{k}" for p in ("", "session_") for m in lm.FAMILIES
                        for k in (1, 3)}
    assert set(lm.score_ranking(["a"], ["a"], ["a"], (1,), "session")) == {
        "recall_any@1", "recall_all@1", "ndcg_any@1"}


def test_view_names_and_validation() -> None:
    assert View().is_default and View("longmemeval", "turn").name == "longmemeval-turn"
    with pytest.raises(ValueError):
        View("other")


@pytest.mark.parametrize("view", [LME_SESSION, LME_TURN])
@pytest.mark.parametrize("fault", ["no content", "id not a string", "empty id"])
def test_an_empty_gold_list_does_not_let_a_broken_haystack_through(view: View,
                                                                   fault: str) -> None:
    """LongMemEval's protocol scores an instance whose gold list is empty (its gold are the
    ids containing 'answer'), so the vipune parser must have checked the haystack before it
    rejects the gold: a turn without content used to raise KeyError out of parse_for_view."""
    raw: dict[str, Any] = make_instance(n_sessions=2, answer_session_ids=[])
    if fault == "no content":
        del raw["haystack_sessions"][0][0]["content"]
    else:
        raw["haystack_session_ids"][0] = 5 if fault == "id not a string" else ""
    result = parse_for_view(0, raw, view)
    assert isinstance(result, Rejection), result
    assert "empty gold list" not in result.reason and "\n" not in result.reason
