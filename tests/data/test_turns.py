"""A row's turns (issue 28): kept in the corpus file, given to stores as role/content records.

Each view gives the turns its row's text is made of: vipune sessions every turn (rendering
them gives the text back, a content holding a newline and ``"user: "`` included), vipune turns
the row's own one, LongMemEval's views the user turns their text joins.
"""

from __future__ import annotations

from pathlib import Path

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
