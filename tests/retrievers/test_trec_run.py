"""retrievers/trec_run.py: a TREC run file read as trec_eval reads it, ranked as a retriever."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.errors import RetrievalEvalError, RetrieverError
from pytest_retrieval_eval.retrievers import get_retriever
from pytest_retrieval_eval.retrievers.base import Persona, Query
from pytest_retrieval_eval.retrievers.ranking import rank_per_k
from pytest_retrieval_eval.retrievers.trec_run import RunFileError, TrecRunRetriever, read_run
from pytest_retrieval_eval.scoring.ties import pair_ties


def persona(ids: tuple[str, ...]) -> Persona:
    def no_store() -> Path:
        raise AssertionError("a run file reads no store")

    return Persona("key", ids, ("",) * len(ids), np.zeros((len(ids), 0), np.float32),
                   [""] * len(ids), no_store)


def query(qid: str = "q1", gold: tuple[str, ...] = ()) -> Query:
    return Query(qid, "single-session-user", "?", "", None, gold)


def write(tmp_path: Path, text: str, name: str = "run.trec") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_trec_eval_order_score_descending_then_docid_descending(tmp_path: Path) -> None:
    """The rank column is ignored; equal scores are broken by docid, descending (string
    order: "b10" > "b1" > "a"), as trec_eval's comp_sim_docno does."""
    path = write(tmp_path, "\n".join([
        "q1 Q0 a 1 0.5 tag",
        "q1 Q0 b1 2 0.5 tag",
        "q1 Q0 b10 3 0.5 tag",
        "q1 Q0 z 4 0.1 tag",
        "q1 Q0 c 9 0.9 tag",
        "q2 Q0 x 1 -1e3 tag",
    ]))
    tag, runs = read_run(path)
    assert tag == "tag"
    assert runs["q1"] == [("c", 0.9), ("b10", 0.5), ("b1", 0.5), ("a", 0.5), ("z", 0.1)]
    assert runs["q2"] == [("x", -1000.0)]


def test_blank_comment_and_extra_fields_as_trec_eval(tmp_path: Path) -> None:
    path = write(tmp_path, "\n   \n# a comment\nq1 Q0 a 1 2 t extra fields\n\tq1\tQ0\tb\t2\t1\tt")
    assert read_run(path) == ("t", {"q1": [("a", 2.0), ("b", 1.0)]})


@pytest.mark.parametrize(("text", "line", "why"), [
    ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2\n", 2, r"2: 4 field\(s\), a run line has 6: qid Q0 docid"),
    ("q1 Q0 a 1 high t\n", 1, r"1: score 'high' is not a finite number"),
    ("q1 Q0 a 1 nan t\n", 1, r"1: score 'nan' is not a finite number"),
    ("q1 Q0 a 1 inf t\n", 1, r"1: score 'inf' is not a finite number"),
    ("q1 Q0 a 1 1 t\n\nq1 Q0 b 1 1 u\n", 3, r"3: tag 'u', but the lines before are 't'"),
    ("q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq1 Q0 a 2 0 t\n", 3,
     r"3: question q1 lists 'a' again \(first on line 1\); trec_eval refuses duplicate"),
])
def test_a_malformed_line_is_one_error_naming_file_and_line(
        tmp_path: Path, text: str, line: int, why: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(RunFileError, match=rf"^run file {path} line {why}") as info:
        read_run(path)
    assert "\n" not in str(info.value)


def test_undecodable_and_overlong_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.trec"
    path.write_bytes(b"q1 Q0 a 1 1 t\nq1 Q0 \xff 1 1 t\n")
    with pytest.raises(RunFileError, match=rf"^run file {path} line 2: not UTF-8"):
        read_run(path)
    path.write_bytes(b"q1 Q0 " + b"a" * 70_000 + b" 1 1 t\n")
    with pytest.raises(RunFileError, match=rf"^run file {path} line 1: longer than 65,536"):
        read_run(path)


def test_empty_missing_and_irregular_files(tmp_path: Path) -> None:
    empty = write(tmp_path, "# nothing\n\n")
    with pytest.raises(RunFileError, match=rf"^run file {empty} holds no run line"):
        read_run(empty)
    with pytest.raises(RunFileError, match=r"no such file; give the path of a TREC run file"):
        read_run(tmp_path / "absent.trec")
    with pytest.raises(RunFileError, match=r": not a regular file"):
        read_run(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(RunFileError, match=r": not a regular file"):  # never blocks
        read_run(fifo)


def test_get_retriever_reads_the_file_and_names_the_column_by_its_tag(tmp_path: Path) -> None:
    path = write(tmp_path, "q1 Q0 s2 1 3 my-run\nq1 Q0 s1 2 3 my-run\nq1 Q0 s3 3 1 my-run\n")
    retriever = get_retriever(f"run:{path}")
    assert isinstance(retriever, TrecRunRetriever)
    assert retriever.name == "my-run" and retriever.needs_vectors is False
    ids = ("s1", "s2", "s3", "s4")
    assert list(retriever.rank(persona(ids), query(), 2)) == ["s2", "s1"]
    assert retriever.last_scores == [("s2", 3.0), ("s1", 3.0), ("s3", 1.0)]
    # A '+' in the path is no what-if.
    plus = write(tmp_path, "q1 Q0 s1 1 1 t\n", name="a+b.trec")
    assert get_retriever(f"run:{plus}").name == "t"
    with pytest.raises(RetrievalEvalError, match=r"no such file"):
        get_retriever(f"run:{tmp_path / 'nope.trec'}")


def test_scores_count_for_ties_past_the_cut(tmp_path: Path) -> None:
    """s2 and s1 tie at the top; asked for k=1, the harness sees the tie, and recall@1 of the
    gold s1 ranges over 0..1 (as run 0: docid descending puts s2 first)."""
    path = write(tmp_path, "q1 Q0 s1 1 3 t\nq1 Q0 s2 2 3 t\nq1 Q0 s3 3 1 t\n")
    retriever = TrecRunRetriever(path)
    scored: dict[int, tuple[list[str], list[float]]] = {}
    rankings, _ = rank_per_k(retriever, persona(("s1", "s2", "s3")), query(gold=("s1",)),
                             [1, 2], scored)
    assert rankings == {1: ["s2", "s1"], 2: ["s2", "s1"]}  # ranked once, at the largest k
    assert scored[1] == (["s2", "s1"], [3.0, 3.0])
    ties = pair_ties(scored, ["s1"], [1, 2], rankable={"s1", "s2", "s3"})
    assert ties is not None
    assert ties["sensitive"]["recall@1"] == {"expected": 0.5, "worst": 0.0, "best": 1.0}


def test_missing_question_and_foreign_docid_are_item_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "q1 Q0 s1 1 3 t\nq1 Q0 other 2 2 t\nq1 Q0 s2 3 1 t\n"
                           "q3 Q0 s1 1 1 t\n")
    retriever = TrecRunRetriever(path, selector="run:x.trec")
    with pytest.raises(RetrieverError, match=rf"^run:x.trec: question q2 has no line in run "
                                             rf"file {path}; add its ranking"):
        retriever.rank(persona(("s1", "s2")), query("q2"), 5)
    # Foreign even below the cut (limit 1 returns only s1): the whole list is checked.
    with pytest.raises(RetrieverError, match=r"^run:x.trec: question q1: the ranking holds "
                                             r"'other', not a session of this question's"):
        retriever.rank(persona(("s1", "s2")), query("q1"), 1)
    assert list(retriever.rank(persona(("s1", "s2")), query("q3"), 5)) == ["s1"]
