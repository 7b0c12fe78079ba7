"""A row's turns (issue 28): kept in the corpus file, given to stores as role/content records.

Each view gives the turns its row's text is made of: vipune sessions every turn (rendering
them gives the text back, a content holding a newline and ``"user: "`` included), vipune turns
the row's own one, LongMemEval's views the user turns their text joins.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_retrieval_eval.data.dataset import DatasetSource
from pytest_retrieval_eval.data.ingest import load_corpus
from pytest_retrieval_eval.data.pairs import Instance, render_session
from pytest_retrieval_eval.data.protocol import View, parse_for_view
from tests.support.lme_factory import make_instance, write_dataset

TRICKY = "line one\nuser: not a turn of its own"


def raw() -> dict[str, object]:
    instance = make_instance("q1", n_sessions=3)
    instance["haystack_sessions"][0][1]["content"] = TRICKY  # type: ignore[index]
    return instance


def test_each_view_gives_the_turns_its_rows_hold() -> None:
    session = parse_for_view(0, raw(), View("vipune", "session"))
    assert isinstance(session, Instance)
    first = session.rows[0]
    assert first.turns[1] == ("assistant", TRICKY) and len(first.turns) == 2
    assert render_session([{"role": r, "content": c} for r, c in first.turns]) == first.content
    turn = parse_for_view(0, raw(), View("vipune", "turn"))
    assert isinstance(turn, Instance)
    assert all(len(row.turns) == 1 for row in turn.rows)
    assert turn.rows[1].turns == (("assistant", TRICKY),)
    lme = parse_for_view(0, raw(), View("longmemeval", "session"))
    assert isinstance(lme, Instance)
    assert all(all(role == "user" for role, _ in row.turns) for row in lme.rows)
    assert " ".join(c for _, c in lme.rows[0].turns) == lme.rows[0].content


def test_the_corpus_file_keeps_each_texts_turns(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "lme.json", [raw()])
    corpus = load_corpus(DatasetSource("tiny", path), tmp_path / "cache")
    pair = corpus.pairs[0]
    turns = corpus.turns(list(pair.text_keys))
    assert turns[0][1] == {"role": "assistant", "content": TRICKY}
    assert [render_session(t) for t in turns] == corpus.texts(list(pair.text_keys))
    assert corpus.turns([pair.question_key]) == [[]]  # a question has none


def test_the_turns_table_holds_offsets_not_a_second_copy_of_the_texts(tmp_path: Path) -> None:
    """Issue 35.4: the turns table doubled the corpus file (each content stored twice). A
    turn found in its text is stored as [role, start, end]; the table is a few percent of
    the texts, and the turns read back are the same."""
    import sqlite3

    instances = [make_instance(f"q{i}", n_sessions=6) for i in range(4)]
    for instance in instances:  # LongMemEval's turns run to hundreds of characters
        for session in instance["haystack_sessions"]:  # type: ignore[attr-defined]
            for turn in session:
                turn["content"] = " ".join([turn["content"]] * 20)
    path = write_dataset(tmp_path / "lme.json", instances)
    corpus = load_corpus(DatasetSource("tiny", path), tmp_path / "cache")
    with sqlite3.connect(corpus.path) as conn:
        texts = conn.execute("SELECT SUM(LENGTH(text)) FROM texts").fetchone()[0]
        turns = conn.execute("SELECT SUM(LENGTH(turns)) FROM turns").fetchone()[0]
    assert turns < 0.25 * texts, (turns, texts)
    pair = corpus.pairs[0]
    assert [render_session(t) for t in corpus.turns(list(pair.text_keys))] == corpus.texts(
        list(pair.text_keys))
    assert corpus.turn_texts(list(pair.text_keys)) == [
        [render_session([t]) for t in turns] for turns in corpus.turns(list(pair.text_keys))]


def test_turns_not_found_in_their_text_are_stored_whole_and_bad_offsets_refused() -> None:
    import pytest

    from pytest_retrieval_eval.data.corpus import decode_turn_texts, decode_turns, encode_turns

    text = f"user: hi\nassistant: {TRICKY}"
    turns = [("user", "hi"), ("assistant", TRICKY), ("user", "elsewhere")]
    stored = encode_turns(text, turns)
    assert TRICKY not in stored and "elsewhere" in stored
    assert decode_turns(text, stored) == [{"role": r, "content": c} for r, c in turns]
    assert decode_turn_texts(text, stored) == [f"{r}: {c}" for r, c in turns]
    for bad in ('[["user", 0, 99]]', '[["user", 5, 2]]', '{"a": 1}', '[["user", 1.5, 2]]',
                "[[1, 2]]", '[["user", true, 2]]', '[["user", 0, 2, 3]]'):
        for decode in (decode_turns, decode_turn_texts):
            with pytest.raises(ValueError):
                decode(text, bad)


def test_encoded_turns_are_json_dumps_text_byte_for_byte() -> None:
    """encode_turns writes its JSON piece by piece (issue 35.4, the cold build): the text is
    json.dumps's own of the value it holds, for odd roles and contents stored whole, and reads
    back as the turns."""
    import json

    from pytest_retrieval_eval.data.corpus import decode_turns, encode_turns

    roles = ["user", "assistant", 'qu"ote', "tab\trole", "naïve", "\x00nul", "日本"]
    contents = [TRICKY, "", "plain", 'a "quoted" \\ back', "line\nbreak", "\u2028sep", "é"]
    turns = [(roles[i % len(roles)], contents[i % len(contents)]) for i in range(14)]
    text = "\n".join(f"{r}: {c}" for r, c in turns[:9])  # the rest are searched for, whole
    stored = encode_turns(text, turns)
    entries = json.loads(stored)
    assert any(len(e) == 2 for e in entries) and any(len(e) == 3 for e in entries)
    assert stored == json.dumps(entries, ensure_ascii=False, separators=(",", ":"))
    assert decode_turns(text, stored) == [{"role": r, "content": c} for r, c in turns]


def test_a_rendered_sessions_turns_are_stored_as_its_split_when_that_is_exact() -> None:
    """Issue 35.4 (the cold build): a vipune session of user and assistant turns whose text
    splits back into exactly its turns stores "" (two scans of the text, not a step per
    turn). Random sessions built from the markers' own pieces read back as their turns
    whichever form is stored, and both forms occur; each way the split could go wrong
    (a content holding a marker, another role, a list that is not the row's rendering) is
    stored as JSON."""
    import random

    import pytest

    from pytest_retrieval_eval.data.corpus import decode_turn_texts, decode_turns, encode_turns
    from pytest_retrieval_eval.data.pairs import SessionTurns

    def session(pairs: list[tuple[str, str]]) -> tuple[str, SessionTurns]:
        records = [{"role": r, "content": c} for r, c in pairs]
        return render_session(records), SessionTurns(records)

    rng = random.Random(35)
    pieces = ["\n", "user", "assistant", ": ", "\nuser: ", "x", " ", "\nassistant:"]
    forms = {"split": 0, "json": 0}
    for _ in range(3000):
        pairs = [(rng.choice(["user", "assistant", "user", "system"]),
                  "".join(rng.choice(pieces) for _ in range(rng.randint(0, 4))))
                 for _ in range(rng.randint(1, 4))]
        text, turns = session(pairs)
        stored = encode_turns(text, turns)
        forms["split" if stored == "" else "json"] += 1
        assert decode_turns(text, stored) == [{"role": r, "content": c} for r, c in pairs]
        # each turn rendered as the turn granularity renders one, straight from the store
        assert decode_turn_texts(text, stored) == [render_session([t])
                                                   for t in decode_turns(text, stored)]
    assert min(forms.values()) > 300, forms

    plain = [("user", "hi: there"), ("assistant", "a\nb: c\nuser:x"), ("user", "")]
    assert encode_turns(*session(plain)) == ""
    for odd in ([("user", "hi"), ("assistant", TRICKY)],  # a content holding "\nuser: "
                [("user", "hi"), ("system", "rules")]):  # another role
        text, turns = session(odd)
        assert encode_turns(text, turns) != ""
        assert decode_turns(text, encode_turns(text, turns)) == [
            {"role": r, "content": c} for r, c in odd]
    text, _ = session(plain)  # the same text, the turns a plain list: searched for, as JSON
    assert encode_turns(text, plain).startswith("[")
    for bad in ("system: hi", "hi"):
        for decode in (decode_turns, decode_turn_texts):
            with pytest.raises(ValueError):
                decode(bad, "")


def test_the_fast_session_check_equals_the_checked_one() -> None:
    """pairs._session_text's one pass (issue 35.4, the cold build) gives what the turn by
    turn check gives: the same text, blank and has_answer flags, or the same rejection."""
    import pytest

    from pytest_retrieval_eval.data import pairs

    class Text(str):
        pass

    sessions: list[object] = [
        [], [{"role": "user", "content": "hi"}, {"role": "assistant", "content": TRICKY}],
        [{"role": "user", "content": "  "}, {"role": "user", "content": ""}],
        [{"role": "user", "content": "x", "has_answer": True}, {"role": "a", "content": "y"}],
        [{"role": "user", "content": "x", "has_answer": 1}],
        [{"role": Text("user"), "content": Text("sub")}],
        [{"role": "user"}], [{"content": "x"}], [{"role": "user", "content": 3}],
        [{"role": None, "content": "x"}], ["not a turn"], "not a list", None,
        [{"role": "user", "content": "ok"}, {"role": "user", "content": ["x"]}],
    ]
    for session in sessions:
        try:
            want: object = pairs._checked_session_text(session, 4, "s1")
        except pairs._Reject as exc:
            with pytest.raises(pairs._Reject) as got:
                pairs._session_text(session, 4, "s1")
            assert str(got.value) == str(exc), session
        else:
            assert pairs._session_text(session, 4, "s1") == want, session


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["user", "assistant", "system", ": ", "\n", "x", "user: ",
                                 "\nuser: ", "\nassistant: ", "assistant:", " "]),
                max_size=12))
def test_a_split_sessions_turn_texts_check_only_its_first_piece(parts: list[str]) -> None:
    """decode_turn_texts of a split-stored text (issue 44, the FTS first run) checks the
    first piece alone: what checking every piece (_split_turns) gives, or the same refusal."""
    from pytest_retrieval_eval.data.corpus import _split_turns, decode_turn_texts

    text = "".join(parts)
    try:
        expected: object = [piece for piece, _, _ in _split_turns(text)]
    except ValueError:
        expected = ValueError
    try:
        got: object = decode_turn_texts(text, "")
    except ValueError:
        got = ValueError
    assert got == expected
