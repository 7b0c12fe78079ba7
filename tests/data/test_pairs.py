"""pairs.parse_instance: every rule and every kind of bad instance."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_retrieval_eval.data.pairs import (
    ABSTENTION,
    QUESTION_TYPES,
    VIPUNE_MAX_INPUT_BYTES,
    Instance,
    Rejection,
    Row,
    parse_date,
    parse_instance,
    render_session,
    text_key,
)
from tests.support.lme_factory import DATE_RFC3339, make_instance, make_turns


def parsed(raw: object, index: int = 0) -> Instance:
    result = parse_instance(index, raw)
    assert isinstance(result, Instance), result
    return result


def rejected(raw: object, index: int = 0) -> Rejection:
    result = parse_instance(index, raw)
    assert isinstance(result, Rejection), result
    assert "\n" not in result.reason and result.reason.strip() == result.reason
    assert result.reason
    return result


# --- constants and helpers ---------------------------------------------------------------


def test_question_types_are_the_six_card_values_in_card_order() -> None:
    assert QUESTION_TYPES == (
        "single-session-user",
        "single-session-assistant",
        "single-session-preference",
        "temporal-reasoning",
        "knowledge-update",
        "multi-session",
    )
    assert ABSTENTION == "abstention"
    assert ABSTENTION not in QUESTION_TYPES


def test_vipune_limit_is_100000_bytes() -> None:
    assert VIPUNE_MAX_INPUT_BYTES == 100_000


def test_text_key_is_sha256_hex_of_utf8() -> None:
    assert text_key("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert text_key("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert text_key("é") != text_key("e")
    assert len(text_key("x")) == 64


def test_render_session_is_role_colon_content_joined_by_newline() -> None:
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello\nthere"}]
    assert render_session(turns) == "user: hi\nassistant: hello\nthere"
    assert render_session([]) == ""


def test_render_session_ignores_extra_turn_fields() -> None:
    assert render_session([{"role": "user", "content": "x", "has_answer": True}]) == "user: x"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2023/05/30 (Tue) 23:40", "2023-05-30T23:40:00+00:00"),
        ("2023/01/02 (Mon) 03:04", "2023-01-02T03:04:00+00:00"),
        ("2023/1/2 (Mon) 3:04", "2023-01-02T03:04:00+00:00"),
        ("2023/05/30 23:40", "2023-05-30T23:40:00+00:00"),
        ("2023/05/30 (Tue) 23:40:59", "2023-05-30T23:40:59+00:00"),
        ("2023-05-30T23:40:00+00:00", "2023-05-30T23:40:00+00:00"),
        ("2023-05-30", "2023-05-30T00:00:00+00:00"),
        ("2024/02/29 (Thu) 12:00", "2024-02-29T12:00:00+00:00"),
    ],
)
def test_date_conversion_to_rfc3339(raw: str, expected: str) -> None:
    assert parse_date(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "yesterday",
        "2023/13/01 (Tue) 10:00",
        "2023/02/30 (Tue) 10:00",
        "2023/05/30 (Tue) 25:00",
        "2023/05/30 (Tue) 23:61",
        "30/05/2023 10:00",
        "2023/05/30 (Tue) 23:40 junk",
    ],
)
def test_date_that_does_not_parse_is_none(raw: str) -> None:
    assert parse_date(raw) is None


# --- a valid instance ------------------------------------------------------------------------


def test_valid_instance_fields() -> None:
    raw = make_instance("q7", question_type="temporal-reasoning", n_sessions=3, gold=(2, 0))
    inst = parsed(raw, index=5)
    assert inst.index == 5
    assert inst.question_id == "q7"
    assert inst.question_type == "temporal-reasoning"
    assert inst.question == raw["question"]
    assert inst.question_date == DATE_RFC3339
    assert inst.gold == ("q7_s2", "q7_s0")
    assert inst.gold_source == "answer_session_ids"
    assert inst.abstention is False
    assert [r.session_id for r in inst.rows] == ["q7_s0", "q7_s1", "q7_s2"]
    assert inst.rows[0] == Row(
        "q7_s0", render_session(raw["haystack_sessions"][0]), "2023-05-10T10:00:00+00:00"
    )
    assert inst.notes == {}
    assert inst.slots == 3


def test_row_created_at_is_rfc3339_of_haystack_date() -> None:
    raw = make_instance(n_sessions=2)
    raw["haystack_dates"] = ["2023/05/30 (Tue) 23:40", "2022/12/01 (Thu) 08:05"]
    inst = parsed(raw)
    assert [r.created_at for r in inst.rows] == [
        "2023-05-30T23:40:00+00:00",
        "2022-12-01T08:05:00+00:00",
    ]


def test_null_haystack_date_gives_empty_created_at_and_is_counted() -> None:
    raw = make_instance(n_sessions=2)
    raw["haystack_dates"][1] = None
    inst = parsed(raw)
    assert inst.rows[1].created_at == ""
    assert inst.notes["undated_sessions"] == 1


def test_answer_may_be_number_or_absent() -> None:
    parsed(make_instance(answer=3))
    parsed(make_instance(answer=2.5))
    parsed(make_instance(drop=["answer"]))


def test_abstention_is_derived_from_abs_suffix() -> None:
    inst = parsed(make_instance("q9_abs", question_type="knowledge-update"))
    assert inst.abstention is True
    assert inst.question_type == "knowledge-update"
    assert parsed(make_instance("q9_absx")).abstention is False


def test_abstention_count_over_a_batch() -> None:
    raws = [make_instance(f"q{i}_abs" if i % 3 == 0 else f"q{i}") for i in range(9)]
    results = [parse_instance(i, raw) for i, raw in enumerate(raws)]
    assert all(isinstance(r, Instance) for r in results)
    assert sum(1 for r in results if isinstance(r, Instance) and r.abstention) == 3


@pytest.mark.parametrize("question_type", QUESTION_TYPES)
def test_every_question_type_is_accepted(question_type: str) -> None:
    assert parsed(make_instance(question_type=question_type)).question_type == question_type


# --- gold ---------------------------------------------------------------------------------


def test_gold_duplicates_removed_order_kept() -> None:
    raw = make_instance(n_sessions=4, gold=(3, 1))
    raw["answer_session_ids"] = ["q1_s3", "q1_s1", "q1_s3", "q1_s1"]
    assert parsed(raw).gold == ("q1_s3", "q1_s1")


def test_fallback_gold_from_has_answer_when_answer_session_ids_absent() -> None:
    raw = make_instance(n_sessions=5, gold=(3, 1), drop=["answer_session_ids"])
    inst = parsed(raw)
    assert inst.gold == ("q1_s1", "q1_s3")  # haystack order
    assert inst.gold_source == "has_answer"
    assert inst.notes["turn_level_gold"] == 1


def test_fallback_gold_when_answer_session_ids_is_null() -> None:
    inst = parsed(make_instance(gold=(2,), answer_session_ids=None))
    assert inst.gold == ("q1_s2",)
    assert inst.gold_source == "has_answer"


def test_answer_session_ids_wins_over_has_answer() -> None:
    raw = make_instance(n_sessions=4, gold=(1,))
    raw["haystack_sessions"][2][0]["has_answer"] = True
    inst = parsed(raw)
    assert inst.gold == ("q1_s1",)
    assert inst.gold_source == "answer_session_ids"
    assert "turn_level_gold" not in inst.notes


def test_has_answer_must_be_true_not_truthy() -> None:
    raw = make_instance(n_sessions=3, gold=(), drop=["answer_session_ids"])
    raw["haystack_sessions"][0][0]["has_answer"] = "yes"
    raw["haystack_sessions"][1][0]["has_answer"] = True
    assert parsed(raw).gold == ("q1_s1",)


def test_empty_gold_list_is_rejected() -> None:
    rej = rejected(make_instance(answer_session_ids=[]))
    assert "empty gold list" in rej.reason
    assert rej.question_id == "q1"


def test_no_gold_from_either_source_is_rejected() -> None:
    rej = rejected(make_instance(gold=(), drop=["answer_session_ids"]))
    assert "no gold" in rej.reason


def test_gold_not_in_haystack_is_kept_and_counted() -> None:
    raw = make_instance(n_sessions=3, gold=(0,))
    raw["answer_session_ids"] = ["q1_s0", "elsewhere_1", "elsewhere_2"]
    inst = parsed(raw)
    assert inst.gold == ("q1_s0", "elsewhere_1", "elsewhere_2")
    assert inst.notes["gold_not_in_haystack"] == 2


# --- rows: repeats, empty, oversize ---------------------------------------------------------


def test_repeated_session_id_first_occurrence_wins_and_is_counted() -> None:
    raw = make_instance(n_sessions=3)
    raw["haystack_session_ids"].append("q1_s0")
    raw["haystack_dates"].append("2024/01/01 (Mon) 00:00")
    raw["haystack_sessions"].append(copy.deepcopy(raw["haystack_sessions"][0]))
    inst = parsed(raw)
    assert [r.session_id for r in inst.rows] == ["q1_s0", "q1_s1", "q1_s2"]
    assert inst.rows[0].created_at == "2023-05-10T10:00:00+00:00"
    assert inst.notes["repeated_session_ids"] == 1
    assert "conflicting_repeats" not in inst.notes
    assert inst.slots == 4


def test_repeated_session_id_with_different_content_counts_conflict() -> None:
    raw = make_instance(n_sessions=2)
    for extra in (make_turns("other"), copy.deepcopy(raw["haystack_sessions"][1])):
        raw["haystack_session_ids"].append("q1_s1")
        raw["haystack_dates"].append("2024/01/01 (Mon) 00:00")
        raw["haystack_sessions"].append(extra)
    inst = parsed(raw)
    assert len(inst.rows) == 2
    assert inst.rows[1].content == render_session(raw["haystack_sessions"][1])
    assert inst.notes["repeated_session_ids"] == 2
    assert inst.notes["conflicting_repeats"] == 1


def test_session_with_no_turns_is_dropped_and_counted() -> None:
    raw = make_instance(n_sessions=3, gold=(0,))
    raw["haystack_sessions"][1] = []
    inst = parsed(raw)
    assert [r.session_id for r in inst.rows] == ["q1_s0", "q1_s2"]
    assert inst.notes["empty_sessions"] == 1
    assert "gold_not_in_haystack" not in inst.notes
    assert inst.slots == 3


def test_session_with_only_blank_content_is_dropped() -> None:
    raw = make_instance(n_sessions=3, gold=(0,))
    raw["haystack_sessions"][2] = [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "  \n"},
    ]
    inst = parsed(raw)
    assert [r.session_id for r in inst.rows] == ["q1_s0", "q1_s1"]
    assert inst.notes["empty_sessions"] == 1


def test_empty_gold_session_becomes_gold_not_in_haystack() -> None:
    raw = make_instance(n_sessions=3, gold=(1,))
    raw["haystack_sessions"][1] = []
    inst = parsed(raw)
    assert inst.gold == ("q1_s1",)
    assert inst.notes["gold_not_in_haystack"] == 1
    assert inst.notes["empty_sessions"] == 1


def test_oversize_session_is_kept_and_counted() -> None:
    raw = make_instance(n_sessions=2)
    raw["haystack_sessions"][0] = [{"role": "user", "content": "é" * 50_001}]  # 100,002 bytes
    inst = parsed(raw)
    assert len(inst.rows) == 2
    assert inst.notes["oversize_sessions"] == 1


def test_session_just_under_limit_is_not_oversize() -> None:
    raw = make_instance(n_sessions=2)
    raw["haystack_sessions"][0] = [{"role": "user", "content": "x" * (100_000 - 6)}]
    assert "oversize_sessions" not in parsed(raw).notes


# --- rejections -----------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [[1, 2], "text", 3, None, True])
def test_instance_not_an_object_is_rejected(raw: object) -> None:
    rej = rejected(raw, index=4)
    assert rej.index == 4
    assert rej.question_id is None
    assert "not an object" in rej.reason


@pytest.mark.parametrize(
    "name",
    [
        "question_id",
        "question_type",
        "question",
        "question_date",
        "haystack_session_ids",
        "haystack_dates",
        "haystack_sessions",
    ],
)
def test_missing_field_is_rejected_naming_it(name: str) -> None:
    rej = rejected(make_instance(drop=[name]))
    assert f"missing field '{name}'" in rej.reason


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("question_id", 12),
        ("question", ["q"]),
        ("question_type", None),
        ("question_date", 2023),
        ("haystack_session_ids", "a"),
        ("haystack_dates", {}),
        ("haystack_sessions", 3),
        ("answer_session_ids", "q1_s1"),
    ],
)
def test_field_of_wrong_type_is_rejected(name: str, value: object) -> None:
    raw = make_instance()
    raw[name] = value
    assert name in rejected(raw).reason


def test_session_that_is_not_a_list_is_rejected() -> None:
    raw = make_instance(n_sessions=3)
    raw["haystack_sessions"][1] = "user: hi"
    assert "haystack_sessions[1]" in rejected(raw).reason


@pytest.mark.parametrize(
    ("turn", "needle"),
    [
        ({"content": "x"}, "'role'"),
        ({"role": "user"}, "'content'"),
        ({"role": "user", "content": 5}, "content is a number"),
        ({"role": "user", "content": None}, "content is null"),
        ({"role": None, "content": "x"}, "role is null"),
        ("user: x", "not a turn object"),
    ],
)
def test_bad_turn_is_rejected(turn: Any, needle: str) -> None:
    raw = make_instance(n_sessions=2)
    raw["haystack_sessions"][1].append(turn)
    rej = rejected(raw)
    assert needle in rej.reason
    assert "haystack_sessions[1][2]" in rej.reason


def test_session_id_not_a_string_is_rejected() -> None:
    raw = make_instance(n_sessions=2)
    raw["haystack_session_ids"][0] = 17
    assert "haystack_session_ids[0]" in rejected(raw).reason


def test_empty_session_id_is_rejected() -> None:
    """A store row needs an id: '' would fail the persona's store build mid-run (found by
    tests/test_reliability.py's fuzzing), so the instance is a counted rejection instead."""
    raw = make_instance(n_sessions=2)
    raw["haystack_session_ids"][1] = ""
    assert "haystack_session_ids[1] is an empty string" in rejected(raw).reason


def test_gold_id_not_a_string_is_rejected() -> None:
    assert "answer_session_ids[0]" in rejected(make_instance(answer_session_ids=[1])).reason


@pytest.mark.parametrize("which", ["haystack_session_ids", "haystack_dates", "haystack_sessions"])
def test_haystack_lists_of_different_lengths_are_rejected(which: str) -> None:
    raw = make_instance(n_sessions=3)
    raw[which].pop()
    assert "differ in length" in rejected(raw).reason


def test_unknown_question_type_is_rejected() -> None:
    rej = rejected(make_instance(question_type="abstention"))
    assert "unknown question_type 'abstention'" in rej.reason
    assert "multi-session" in rej.reason


@pytest.mark.parametrize("question", ["", "   \n\t"])
def test_empty_question_is_rejected(question: str) -> None:
    assert "question is empty" in rejected(make_instance(question=question)).reason


def test_overlong_question_is_rejected() -> None:
    rej = rejected(make_instance(question="  " + "ü" * 50_001 + "  "))
    assert "100002 bytes" in rej.reason


def test_question_at_limit_after_trimming_is_accepted() -> None:
    parsed(make_instance(question="x" * 100_000 + "   "))


def test_bad_question_date_is_rejected() -> None:
    assert "question_date" in rejected(make_instance(question_date="soon")).reason


def test_bad_haystack_date_is_rejected() -> None:
    raw = make_instance(n_sessions=3)
    raw["haystack_dates"][2] = "2023/02/31 (Fri) 10:00"
    assert "haystack_dates[2]" in rejected(raw).reason


def test_haystack_date_of_wrong_type_is_rejected() -> None:
    raw = make_instance(n_sessions=3)
    raw["haystack_dates"][0] = 20230530
    assert "haystack_dates[0] is a number" in rejected(raw).reason


def test_rejection_reason_is_one_line_even_with_newlines_in_data() -> None:
    rej = rejected(make_instance(question_type="multi\nsession\r\nx"))
    assert "\n" not in rej.reason and "\r" not in rej.reason


def test_rejection_keeps_question_id_when_it_is_a_string() -> None:
    assert rejected(make_instance("q42", question_type="x")).question_id == "q42"
    raw = make_instance()
    raw["question_id"] = 42
    assert rejected(raw).question_id is None


# --- fuzz -------------------------------------------------------------------------------------

_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_FIELDS = [
    "question_id",
    "question_type",
    "question",
    "question_date",
    "answer",
    "haystack_session_ids",
    "haystack_dates",
    "haystack_sessions",
    "answer_session_ids",
]


def _containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every dict/list inside ``value`` (including the root)."""
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                found.extend(_containers(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, (dict, list)):
                found.extend(_containers(v, (*path, i)))
    return found


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def mutated_instances(draw: st.DrawFn) -> object:
    raw: Any = make_instance(
        draw(st.sampled_from(["q1", "q2_abs"])),
        question_type=draw(st.sampled_from(QUESTION_TYPES)),
        n_sessions=draw(st.integers(1, 4)),
        gold=(0,),
    )
    if draw(st.booleans()):
        raw.pop("answer_session_ids")
    for _ in range(draw(st.integers(1, 4))):
        target_path = draw(st.sampled_from(_containers(raw)))
        target = _get(raw, target_path)
        action = draw(st.sampled_from(["drop", "retype", "append", "pop", "dup"]))
        if isinstance(target, dict):
            keys = list(target) + _FIELDS + ["role", "content", "has_answer"]
            key = draw(st.sampled_from(keys))
            if action == "drop":
                target.pop(key, None)
            else:
                target[key] = draw(_JUNK)
        elif isinstance(target, list):
            if action == "pop" and target:
                target.pop(draw(st.integers(0, len(target) - 1)))
            elif action == "dup" and target:
                target.append(copy.deepcopy(target[0]))
            elif action == "retype" and target:
                target[draw(st.integers(0, len(target) - 1))] = draw(_JUNK)
            else:
                target.append(draw(_JUNK))
    if draw(st.integers(0, 20)) == 0:
        return draw(_JUNK)
    return raw


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_instances())
def test_fuzz_every_outcome_is_instance_or_one_line_rejection(raw: object) -> None:
    result = parse_instance(3, raw)
    assert isinstance(result, (Instance, Rejection))
    assert result.index == 3
    if isinstance(result, Rejection):
        assert result.reason and "\n" not in result.reason and "\r" not in result.reason
        assert not result.reason.startswith("unreadable instance"), result.reason
    else:
        ids = [r.session_id for r in result.rows]
        assert len(ids) == len(set(ids))
        assert result.gold
        assert all(r.content.strip() for r in result.rows)
