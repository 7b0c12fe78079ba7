"""``run:PATH``: the rankings of a TREC run file, scored as any retriever's.

A run file holds one line per retrieved document, ``qid Q0 docid rank score tag``: here
``qid`` is a question id of the dataset and ``docid`` a session id (a turn id at
``--retrieval-eval-granularity turn``) of that question's history. The file is read once per
process, when the retriever is made (at session start, before any work), streamed line by
line; a line that cannot be read is one usage error naming the file and the line number.
Under xdist the controller reads it first and pins the sha256 of the bytes it read, and the
tag (:attr:`TrecRunRetriever.pin`, in the plan); a worker reading other bytes (the file
replaced as the run starts) scores nothing of it (:class:`RunChangedError`, which stops the
run), so no run is scored as a mix of two versions nor split into two columns by two tags.

The order is trec_eval's, not the file's: trec_eval ignores the rank column and sorts each
topic's documents by score descending, ties broken by docno descending (string comparison;
``comp_sim_docno`` in ``form_res_rels.c`` of usnistgov/trec_eval at f4253652, lines 111-113
and 266-275), so two files holding the same lines in any order rank alike. What else follows
trec_eval's reader (``get_trec_results.c``, the comment at lines 17-30 and
``parse_results_line``, lines 235-290): blank lines and lines starting with ``#`` are
skipped, fields after the sixth are ignored, a document given twice for one topic is refused
(trec_eval's "duplicate docs", ``form_res_rels.c`` lines 128-134), and the file holds no NUL
byte (line 27). trec_eval splits fields on C ``isspace`` (ASCII) and reads the score with
``atof`` (line 210), which reads the longest prefix that is a number; here fields are split
on ASCII spaces and tabs only (a CRLF line end is a line end) and the score must be a whole
ASCII decimal or exponent number: what atof would read a prefix of (``1_0``, Arabic-Indic
digits), another space (U+00A0, ``\v``) or a NUL byte is refused naming the line, never read
as another number. Choices of ours: a UTF-8 BOM opening the file is dropped; the score must
be finite; every line must carry the same tag (trec_eval keeps the last line's without a
check; one file here is one column, named by its tag: put each run in a file of its own).

The retriever returns the top ids and sets ``last_scores`` to the question's whole scored
list, so the tie-aware metrics see equal scores, a tie past the cut included. A question of
the run's selection with no line in the file fails its item, saying so; a docid that is not a
session of that question's history is refused as a foreign id is (:func:`.check_haystack`).
Lines whose qid is no question of the dataset are counted (:meth:`TrecRunRetriever.facts`:
the run's header line and the JSON report's ``run_files``).

Turn docnos (issue 36): where a question's lines name turns of its sessions (``<session_id>_<n>``,
as the turn granularity names them) beside or instead of session ids, each line is a memory,
of that turn or of that session (:func:`turn_memories`), and the run is scored as a memory
store: its derived session ranking, ``memory_recall@k`` and ``turn_recall@k``.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RetrievalEvalError, RetrieverError, printable
from ..scoring.longmemeval_metrics import strip_turn
from .base import RUN_PREFIX, Memory, Persona, Query, _check_limit
from .ranking import check_haystack

if TYPE_CHECKING:
    from ..data.corpus import Corpus

__all__ = ["PREFIX", "RunChangedError", "RunFile", "RunFileError", "TrecRunRetriever",
           "is_run", "read_run", "read_run_file", "run_files", "run_pins", "run_retriever",
           "turn_memories", "unknown_line"]

#: The selector's prefix: ``--retrieval-eval-retriever run:PATH``.
PREFIX = RUN_PREFIX
#: The longest line read (bytes); a longer one is malformed (no file blows up memory on it).
MAX_LINE_BYTES = 64 * 1024
#: How many unknown qids a run's facts name (all are counted).
SHOWN_QIDS = 5
#: A UTF-8 byte order mark: dropped where it opens the file (else it joins the first qid).
BOM = b"\xef\xbb\xbf"
#: A score as trec_eval's atof reads it whole: ASCII digits, sign, point, exponent.
_SCORE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: Whitespace other than the ASCII space and tab (str.split would split on it).
_OTHER_SPACE = re.compile(r"[^\S \t]")

Ranking = list[tuple[str, float]]


class RunFileError(RetrievalEvalError):
    """A run file that cannot be read: one line naming the file (and the line)."""


class RunChangedError(RunFileError):
    """A process of the run read other bytes than the run pinned: the run stops."""


def is_run(selector: str) -> bool:
    """Whether ``selector`` names a TREC run file (``run:PATH``)."""
    return selector.startswith(PREFIX)


def _open_regular(path: Path) -> int:
    """A descriptor of the regular file ``path`` (opened non-blocking, so a FIFO never
    hangs the run); one line if it is missing, unreadable or not a regular file."""
    fix = "give the path of a TREC run file (qid Q0 docid rank score tag per line)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise RunFileError(f"run file {path}: no such file; {fix}") from None
    except OSError as exc:
        raise RunFileError(f"run file {path} cannot be opened ({exc.strerror}); {fix}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RunFileError(f"run file {path}: not a regular file; {fix}")
    os.set_blocking(fd, True)
    return fd


@dataclass(frozen=True)
class RunFile:
    """A run file as read: its tag, per question id its documents in trec_eval's order,
    the sha256 of the bytes read (what every process of a run checks against the pin)."""

    tag: str
    runs: dict[str, Ranking]
    sha256: str


def _score(text: str, where: str) -> float:
    """The fifth field as trec_eval's ``atof`` reads a well-formed number: ASCII digits, an
    optional sign, point and exponent (``get_trec_results.c`` line 210). A field atof would
    read a prefix of (``1_0`` as 1, Arabic-Indic digits as 0) or ``nan``/``inf`` is refused:
    Python's ``float()`` reads ``1_0`` as 10 and ``٩٩`` as 99."""
    score = float(text) if _SCORE.fullmatch(text) else math.nan
    if not math.isfinite(score):  # 1e999 overflows to inf
        raise RunFileError(f"{where}: score {text!r} is not a finite number; the fifth field "
                           "is the document's score, higher first, in ASCII digits (an "
                           "optional sign, point and exponent, as 0.5, -3, 1e-4)")
    return score


def _fields(raw: bytes, where: str, first: bool) -> list[str]:
    """A line's fields, split on ASCII space and tab only; one line for NUL bytes, text
    that is not UTF-8 or another space. A UTF-8 BOM opening the file is dropped."""
    if first and raw.startswith(BOM):
        raw = raw[len(BOM):]
    if b"\0" in raw:  # trec_eval reads C strings: "File may contain no NULL characters"
        raise RunFileError(f"{where}: holds a NUL byte; a run file is text: write it again "
                           "as UTF-8 text, one 'qid Q0 docid rank score tag' per line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RunFileError(f"{where}: not UTF-8 text; write the run file as "
                           "UTF-8") from None
    text = text.removesuffix("\n").removesuffix("\r")  # a CRLF file reads as its LF twin
    other = _OTHER_SPACE.search(text)
    if other is not None:
        raise RunFileError(f"{where}: holds U+{ord(other.group()):04X}, a space that is not "
                           "an ASCII space or tab; fields are split on ASCII spaces and tabs "
                           "only: write the separators as spaces")
    return text.split()  # now only spaces and tabs are whitespace in it


def read_run_file(path: Path) -> RunFile:
    """The run's tag, rankings and sha256 (:class:`RunFile`). :class:`RunFileError` (one
    line naming the file and the line number) for a malformed line, a second tag, a
    repeated document, no line."""
    fd = _open_regular(path)
    tag: str | None = None
    runs: dict[str, dict[str, tuple[float, int]]] = {}
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as handle:
        number = 0
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            digest.update(raw)
            number += 1
            where = f"run file {path} line {number}"
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise RunFileError(f"{where}: longer than {MAX_LINE_BYTES:,} bytes; give "
                                   "one 'qid Q0 docid rank score tag' per line")
            fields = _fields(raw, where, number == 1)
            if not fields or fields[0].startswith("#"):
                continue  # trec_eval skips blank lines and '#' comments
            if len(fields) < 6:
                raise RunFileError(f"{where}: {len(fields)} field(s), a run line has 6: "
                                   "qid Q0 docid rank score tag, whitespace-separated")
            qid, _, docid, _, score_text, line_tag = fields[:6]
            score = _score(score_text, where)
            if tag is None:
                tag = line_tag
            elif line_tag != tag:
                raise RunFileError(f"{where}: tag {line_tag!r}, but the lines before are "
                                   f"{tag!r}; one run file is one run: put each tag's lines "
                                   "in a file of its own and give run:FILE for each")
            docs = runs.setdefault(qid, {})
            first = docs.get(docid)
            if first is not None:
                raise RunFileError(f"{where}: question {qid} lists {docid!r} again (first on "
                                   f"line {first[1]}); trec_eval refuses duplicate docs, "
                                   "keep one line per question and document")
            docs[docid] = (score, number)
    if tag is None:
        raise RunFileError(f"run file {path} holds no run line; write one 'qid Q0 docid "
                           "rank score tag' line per retrieved session")
    ordered: dict[str, Ranking] = {}
    for qid, docs in runs.items():
        # trec_eval's comp_sim_docno: score descending, then docno descending. Python's
        # str order is code point order, which is strcmp's byte order on UTF-8.
        items = sorted(docs.items(), key=lambda kv: kv[0], reverse=True)
        items.sort(key=lambda kv: kv[1][0], reverse=True)  # stable: docid order kept in ties
        ordered[qid] = [(docid, score) for docid, (score, _) in items]
    return RunFile(tag, ordered, digest.hexdigest())


def read_run(path: Path) -> tuple[str, dict[str, Ranking]]:
    """The run's tag and, per question id, its documents in trec_eval's order (score
    descending, then docid descending): :func:`read_run_file` without the digest."""
    run = read_run_file(path)
    return run.tag, run.runs


def unknown_line(selector: str, facts: Mapping[str, Any]) -> str | None:
    """The header's line for a run file whose lines name questions the dataset lacks."""
    lines = int(facts.get("unknown_question_lines") or 0)
    if not lines:
        return None
    qids = ", ".join(repr(printable(q)) for q in facts.get("unknown_question_ids") or [])
    more = int(facts.get("unknown_questions") or 0) - len(facts.get("unknown_question_ids") or [])
    return (f"{selector}: {lines} of {facts.get('lines')} line(s) name no question of the "
            f"dataset (qid {qids}{f' and {more} more' if more > 0 else ''}); they are not "
            "scored: check those qids against the dataset's question_id")


def changed_message(path: Path, pinned: str, seen: str) -> str:
    """The one line of a run file whose bytes in this process are not the pinned ones."""
    return (f"run file {path} changed after the run read it: this process read {seen}, "
            f"not the bytes the run pinned (sha256 {pinned[:16]}); no ranking of it is "
            "scored, so none mixes two versions: keep the file unchanged until the run ends "
            "(write a new version to a new file and give run:NEWFILE)")


class TrecRunRetriever:
    """The rankings of a TREC run file (``run:PATH``), its column named by the run's tag."""

    needs_vectors = False  # reads no vectors: a run of run files alone loads no model

    def __init__(self, path: str | os.PathLike[str], selector: str | None = None,
                 pin: Mapping[str, str] | None = None) -> None:
        """``pin``: the run's ``{"sha256", "tag"}`` of this file, as the process that read
        it first (the xdist controller) saw it (:attr:`pin`). Another process reading other
        bytes (a file replaced as the run starts) keeps the pinned tag as its name, so its
        items stay in the column, and each of them raises :class:`RunChangedError`."""
        self.path = Path(path)
        self.selector = selector or f"{PREFIX}{path}"
        self.last_scores: list[tuple[str, float]] | None = None
        #: Why this process scores nothing of the file (it read other bytes), or None.
        self.refusal: str | None = None
        try:
            run = read_run_file(self.path)
        except RunFileError as exc:
            if pin is None:
                raise
            self._refuse(pin, f"bytes it cannot read ({exc})")
            return
        if pin is not None and run.sha256 != pin["sha256"]:
            self._refuse(pin, f"sha256 {run.sha256[:16]}")
            return
        self.name, self._runs, self.sha256 = run.tag, run.runs, run.sha256

    def _refuse(self, pin: Mapping[str, str], seen: str) -> None:
        self.name, self._runs, self.sha256 = pin["tag"], {}, pin["sha256"]
        self.refusal = changed_message(self.path, pin["sha256"], seen)

    @property
    def pin(self) -> dict[str, str]:
        """What the other processes of the run check their reading against."""
        return {"sha256": self.sha256, "tag": self.name}

    def facts(self, question_ids: set[str]) -> dict[str, Any]:
        """What the file held, for the report: its path and sha256, its questions and run
        lines, and the lines whose qid is no question of ``question_ids`` (the dataset's;
        the first :data:`SHOWN_QIDS` such qids, in the file's order): a typo in a qid (or a
        BOM glued to one) is counted, never silent."""
        unknown = [qid for qid in self._runs if qid not in question_ids]
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "questions": len(self._runs),
            "lines": sum(len(docs) for docs in self._runs.values()),
            "unknown_question_lines": sum(len(self._runs[qid]) for qid in unknown),
            "unknown_questions": len(unknown),
            "unknown_question_ids": unknown[:SHOWN_QIDS],
        }

    def rank(self, persona: Persona, query: Query,
             limit: int) -> Sequence[str] | Sequence[Memory]:
        lim = _check_limit(limit)
        if self.refusal is not None:
            raise RunChangedError(self.refusal)
        ranking = self._runs.get(query.question_id)
        self.last_scores = None
        if ranking is None:
            raise RetrieverError(
                f"{self.selector}: question {query.question_id} has no line in run file "
                f"{self.path}; add its ranking to the file, or deselect the question (-k)")
        rows = set(persona.session_ids)
        turns = [docid for docid, _ in ranking if docid not in rows]
        if turns and all(strip_turn(docid) in rows for docid in turns):
            return turn_memories(ranking, rows)
        try:
            check_haystack(query.question_id, {0: [docid for docid, _ in ranking]},
                           persona.session_ids)
        except RetrieverError as exc:
            raise RetrieverError(f"{self.selector}: {exc}") from None
        self.last_scores = list(ranking)  # the whole list: a tie past the cut is seen
        return [docid for docid, _ in ranking[:lim]]


def run_retriever(selector: str, pins: Mapping[str, Mapping[str, str]]) -> TrecRunRetriever:
    """The retriever of ``run:PATH`` ``selector``, checked against its pin in ``pins`` (the
    plan's, selector -> ``{"sha256", "tag"}``) where the plan holds one."""
    return TrecRunRetriever(selector[len(PREFIX):], selector=selector, pin=pins.get(selector))


def run_pins(retrievers: Mapping[str, object]) -> dict[str, dict[str, str]]:
    """The plan's pins: each ``run:`` selector's sha256 and tag as this process read them."""
    return {name: r.pin for name, r in retrievers.items() if isinstance(r, TrecRunRetriever)}


def run_files(retrievers: Mapping[str, object], corpus: Corpus,
              column: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """Per ``run:`` selector, its column and what its file held (:meth:`TrecRunRetriever.facts`)
    against the questions of ``corpus`` (a rejected instance's too: a question of the
    dataset, not a typo): for the header and the JSON report."""
    qids = {p.question_id for p in corpus.pairs} | {
        r.question_id for r in corpus.rejections if r.question_id is not None}
    return {name: {"retriever": column(name), **r.facts(qids)}
            for name, r in retrievers.items() if isinstance(r, TrecRunRetriever)}


def turn_memories(ranking: Ranking, sessions: set[str]) -> list[Memory]:
    """A question's run lines naming turns (``<session_id>_<n>``) as memories, in trec_eval's
    order: a turn docno is the memory of that turn, a session docno that of its session (the
    harness reads them until they cover the limit's sessions and checks each turn)."""
    return [Memory(docid, score, (docid,)) if docid in sessions
            else Memory(docid, score, turns=(docid,)) for docid, score in ranking]
