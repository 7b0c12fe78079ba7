"""``run:PATH``: the rankings of a TREC run file, scored as any retriever's.

A run file holds one line per retrieved document, ``qid Q0 docid rank score tag``,
whitespace-separated: here ``qid`` is a question id of the dataset and ``docid`` a session id
(a turn id at ``--retrieval-eval-granularity turn``) of that question's history. The file is
read once, when the retriever is made (at session start, before any work), streamed line by
line; a line that cannot be read is one usage error naming the file and the line number.

The order is trec_eval's, not the file's: trec_eval ignores the rank column and sorts each
topic's documents by score descending, ties broken by docno descending (string comparison;
``comp_sim_docno`` in ``form_res_rels.c`` of usnistgov/trec_eval at f4253652, lines 111-113
and 266-275), so two files holding the same lines in any order rank alike. What else follows
trec_eval's reader (``get_trec_results.c``, the comment at lines 17-30 and
``parse_results_line``): blank lines and lines starting with ``#`` are skipped, fields after
the sixth are ignored, and a document given twice for one topic is refused (trec_eval's
"duplicate docs", ``form_res_rels.c`` lines 128-134). Two choices of ours: the score must be
a finite number (trec_eval's ``atof`` would read ``abc`` as 0), and every line must carry the
same tag (trec_eval keeps the last line's without a check; one file here is one column, named
by its tag: put each run in a file of its own).

The retriever returns the top ids and sets ``last_scores`` to the question's whole scored
list, so the tie-aware metrics see equal scores, a tie past the cut included. A question of
the run's selection with no line in the file fails its item, saying so; a docid that is not a
session of that question's history is refused as a foreign id is (:func:`.check_haystack`).
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ..errors import RetrievalEvalError, RetrieverError
from .base import Persona, Query, _check_limit
from .ranking import check_haystack

__all__ = ["PREFIX", "RunFileError", "TrecRunRetriever", "is_run", "read_run"]

#: The selector's prefix: ``--retrieval-eval-retriever run:PATH``.
PREFIX = "run:"
#: The longest line read (bytes); a longer one is malformed (no file blows up memory on it).
MAX_LINE_BYTES = 64 * 1024

Ranking = list[tuple[str, float]]


class RunFileError(RetrievalEvalError):
    """A run file that cannot be read: one line naming the file (and the line)."""


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


def read_run(path: Path) -> tuple[str, dict[str, Ranking]]:
    """The run's tag and, per question id, its documents in trec_eval's order (score
    descending, then docid descending). :class:`RunFileError` (one line naming the file
    and the line number) for a malformed line, a second tag, a repeated document, no line."""
    fd = _open_regular(path)
    tag: str | None = None
    runs: dict[str, dict[str, tuple[float, int]]] = {}
    with os.fdopen(fd, "rb") as handle:
        number = 0
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            number += 1
            where = f"run file {path} line {number}"
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise RunFileError(f"{where}: longer than {MAX_LINE_BYTES:,} bytes; give "
                                   "one 'qid Q0 docid rank score tag' per line")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise RunFileError(f"{where}: not UTF-8 text; write the run file as "
                                   "UTF-8") from None
            fields = text.split()
            if not fields or fields[0].startswith("#"):
                continue  # trec_eval skips blank lines and '#' comments
            if len(fields) < 6:
                raise RunFileError(f"{where}: {len(fields)} field(s), a run line has 6: "
                                   "qid Q0 docid rank score tag, whitespace-separated")
            qid, _, docid, _, score_text, line_tag = fields[:6]
            try:
                score = float(score_text)
            except ValueError:
                score = math.nan
            if not math.isfinite(score):
                raise RunFileError(f"{where}: score {score_text!r} is not a finite number; "
                                   "the fifth field is the document's score, higher first")
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
    return tag, ordered


class TrecRunRetriever:
    """The rankings of a TREC run file (``run:PATH``), its column named by the run's tag."""

    needs_vectors = False  # reads no vectors: a run of run files alone loads no model

    def __init__(self, path: str | os.PathLike[str], selector: str | None = None) -> None:
        self.path = Path(path)
        self.selector = selector or f"{PREFIX}{path}"
        self.name, self._runs = read_run(self.path)
        self.last_scores: list[tuple[str, float]] | None = None

    def rank(self, persona: Persona, query: Query, limit: int) -> Sequence[str]:
        lim = _check_limit(limit)
        ranking = self._runs.get(query.question_id)
        self.last_scores = None
        if ranking is None:
            raise RetrieverError(
                f"{self.selector}: question {query.question_id} has no line in run file "
                f"{self.path}; add its ranking to the file, or deselect the question (-k)")
        try:
            check_haystack(query.question_id, {0: [docid for docid, _ in ranking]},
                           persona.session_ids)
        except RetrieverError as exc:
            raise RetrieverError(f"{self.selector}: {exc}") from None
        self.last_scores = list(ranking)  # the whole list: a tie past the cut is seen
        return [docid for docid, _ in ranking[:lim]]
