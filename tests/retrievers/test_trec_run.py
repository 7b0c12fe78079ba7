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
from pytest_retrieval_eval.retrievers.trec_run import (
    RunChangedError,
    RunFileError,
    TrecRunRetriever,
    read_run,
    read_run_file,
    unknown_line,
)
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


def test_a_bom_opening_the_file_is_dropped_and_nul_bytes_refused(tmp_path: Path) -> None:
    """Issue 34 item 2: a UTF-8 BOM glued itself to the first qid (its line then matched no
    question, silently); NUL bytes anywhere are refused naming the line."""
    path = tmp_path / "bom.trec"
    path.write_bytes(b"\xef\xbb\xbfq1 Q0 a 1 2 t\nq1 Q0 b 2 1 t\n")
    assert read_run(path) == ("t", {"q1": [("a", 2.0), ("b", 1.0)]})
    path.write_bytes(b"q1 Q0 a 1 2 t\n\xef\xbb\xbfq2 Q0 b 2 1 t\n")  # not the file's start
    assert set(read_run(path)[1]) == {"q1", "\ufeffq2"}  # kept: counted as an unknown qid
    for raw, line in ((b"\x00q1 Q0 a 1 2 t\n", 1), (b"q1 Q0 a 1 2 t\nq1 Q0 b\x00 2 1 t\n", 2),
                      (b"\xef\xbb\xbf\x00\x00q1 Q0 a 1 2 t\n", 1)):
        path.write_bytes(raw)
        with pytest.raises(RunFileError, match=rf"^run file {path} line {line}: holds a NUL "
                                               r"byte; a run file is text"):
            read_run(path)


@pytest.mark.parametrize("score", ["1", "-3", "+2.", ".5", "0.25", "1e3", "-1.5E-2", "7e+1",
                                   "007"])
def test_scores_trec_eval_reads_whole_are_read_as_it_reads_them(
        tmp_path: Path, score: str) -> None:
    """What trec_eval's atof reads whole (ASCII digits, sign, point, exponent) is read to
    the same double; Python's float() of such ASCII text is strtod's correctly rounded
    value."""
    path = write(tmp_path, f"q1 Q0 a 1 {score} t\n")
    assert read_run(path)[1]["q1"] == [("a", float(score))]


@pytest.mark.parametrize("score", ["1_0", "\u0669\u0669", "\uff11", "0x1p3", "1e", "1.2.3",
                                   "--1", "e5", ".", "1e999", "Infinity", "+nan"])
def test_scores_atof_would_read_a_prefix_of_are_refused(tmp_path: Path, score: str) -> None:
    """Issue 34 item 4: float() read 1_0 as 10 and Arabic-Indic ٩٩ as 99 where trec_eval's
    atof reads 1 and 0: such a score is one line naming the line number, never a number."""
    path = write(tmp_path, f"q1 Q0 a 1 1 t\nq1 Q0 b 2 {score} t\n")
    with pytest.raises(RunFileError, match=rf"^run file {path} line 2: score .* is not a "
                                           r"finite number; .* in ASCII digits") as info:
        read_run(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("space", "code"), [("\u00a0", "00A0"), ("\u3000", "3000"),
                                             ("\u2009", "2009"), ("\x0b", "000B"),
                                             ("\x0c", "000C"), ("\x1f", "001F"),
                                             ("\r", "000D")])
def test_fields_split_on_ascii_space_and_tab_only(tmp_path: Path, space: str,
                                                  code: str) -> None:
    """str.split() split on any Unicode whitespace; now only ASCII spaces and tabs separate
    fields (a CRLF line end is a line end), and any other space is refused naming the
    line."""
    crlf = write(tmp_path, "q1 Q0 a 1 2 t\r\nq1\tQ0\tb\t2\t1\tt\r\n", name="crlf.trec")
    assert read_run(crlf) == ("t", {"q1": [("a", 2.0), ("b", 1.0)]})
    path = write(tmp_path, f"q1 Q0 a 1 2 t\nq1 Q0 b{space}c 2 1 t\n")
    with pytest.raises(RunFileError, match=rf"^run file {path} line 2: holds U\+{code}, a "
                                           r"space that is not an ASCII space or tab"):
        read_run(path)


def test_the_pinned_bytes_are_checked_by_every_reader(tmp_path: Path) -> None:
    """Issue 34 item 1: the first reader's sha256 and tag are the pin; a reader that sees
    other bytes (the file replaced as the run starts) keeps the pinned tag as its name (one
    column, never two) and refuses every ranking, so nothing is scored from a mix."""
    path = write(tmp_path, "q1 Q0 s1 1 2 first\nq1 Q0 s2 2 1 first\n")
    first = TrecRunRetriever(path, selector="run:r.trec")
    assert first.pin == {"sha256": read_run_file(path).sha256, "tag": "first"}
    same = TrecRunRetriever(path, selector="run:r.trec", pin=first.pin)
    assert same.refusal is None
    assert list(same.rank(persona(("s1", "s2")), query(), 5)) == ["s1", "s2"]
    write(tmp_path, "q1 Q0 s2 1 2 second\n")
    for text in ("q1 Q0 s2 1 2 second\n", "q1 Q0 s2 1\n"):  # other bytes; unreadable bytes
        write(tmp_path, text)
        swapped = TrecRunRetriever(path, selector="run:r.trec", pin=first.pin)
        assert swapped.name == "first"
        with pytest.raises(RunChangedError, match=rf"^run file {path} changed after the run "
                                                  r"read it: this process read .*; no "
                                                  r"ranking of it is scored") as info:
            swapped.rank(persona(("s1", "s2")), query(), 5)
        assert "\n" not in str(info.value)
    with pytest.raises(RunFileError, match=r"line 1: 4 field\(s\)"):  # unpinned: as before
        TrecRunRetriever(path)


def test_lines_naming_no_question_of_the_dataset_are_counted(tmp_path: Path) -> None:
    path = write(tmp_path, "q1 Q0 s1 1 2 t\nq1 Q0 s2 2 1 t\nq9 Q0 s1 1 1 t\nq8 Q0 s1 1 1 t\n"
                           "q8 Q0 s2 2 0 t\n")
    facts = TrecRunRetriever(path).facts({"q1", "q2"})
    assert facts["lines"] == 5 and facts["questions"] == 3
    assert facts["unknown_question_lines"] == 3 and facts["unknown_questions"] == 2
    assert facts["unknown_question_ids"] == ["q9", "q8"]
    assert unknown_line("run:x", facts) == (
        "run:x: 3 of 5 line(s) name no question of the dataset (qid 'q9', 'q8'); they are "
        "not scored: check those qids against the dataset's question_id")
    assert unknown_line("run:x", TrecRunRetriever(path).facts({"q1", "q8", "q9"})) is None
