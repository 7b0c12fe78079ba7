"""Which memory rows, gold ids and questions a run scores: the *protocol* and *granularity*.

Two protocols (``--retrieval-eval-protocol``):

* ``vipune`` (the default): the scope document's protocol, :func:`pairs.parse_instance`. One
  memory row per unique session id (first occurrence wins), both roles rendered as
  ``role: content`` joined by newlines, gold from ``answer_session_ids``, ``_abs`` questions
  skipped, the metrics of :mod:`pytest_retrieval_eval.scoring.metrics` (rankings
  deduplicated by id).
* ``longmemeval``: LongMemEval's own retrieval experiment (``src/retrieval/run_retrieval.py``
  and ``src/retrieval/eval_utils.py`` of github.com/xiaowu0162/LongMemEval, read at commit
  9e0b455), so that on the same file ``bm25`` gives upstream's rankings and upstream's
  printed averages. Each convention below cites the upstream line it follows; the code is
  written anew.

Two granularities (``--retrieval-eval-granularity``):

* ``session``: a corpus item is a session.
* ``turn``: a corpus item is a turn, id ``<session_id>_<n>`` with ``n`` the turn's 1-based
  position among *all* turns of its session (upstream numbers user turns that way, so a
  session's user turns are ``_1``, ``_3``, ``_5``… when roles alternate). Gold is the turns
  holding the evidence; session-level metrics are also derived from the turn ranking.

Under ``vipune`` at turn granularity one vipune row is one turn of either role (text
``role: content``); gold is the turns with ``has_answer: true`` inside the gold sessions.

Every view is parsed by :func:`parse_for_view` into a :class:`pairs.Instance` whose rows are
the corpus items (ids may repeat under ``longmemeval``), so the corpus, the vector cache and
the personas work unchanged; vectors stay content-addressed by text, so a turn text shared by
many histories is embedded once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .pairs import Instance, Rejection, Row, parse_date, parse_instance, render_session

__all__ = [
    "GOLD_FROM_ANSWER_IDS",
    "GOLD_FROM_TURNS",
    "GRANULARITIES",
    "LONGMEMEVAL",
    "NO_USER_EVIDENCE",
    "PROTOCOLS",
    "REPEATED_SLOTS_KEPT",
    "VIPUNE",
    "View",
    "is_lme_abstention",
    "lme_session_item",
    "lme_turn_items",
    "parse_for_view",
]

VIPUNE = "vipune"
LONGMEMEVAL = "longmemeval"
PROTOCOLS: tuple[str, ...] = (VIPUNE, LONGMEMEVAL)
GRANULARITIES: tuple[str, ...] = ("session", "turn")
#: Pair note: a question LongMemEval leaves out of its averages because no user turn of its
#: haystack carries ``has_answer`` (run_retrieval.py lines 399-402).
NO_USER_EVIDENCE = "no_user_evidence"
#: Pair note: repeated session slots, each kept as its own corpus item (longmemeval).
REPEATED_SLOTS_KEPT = "repeated_slots_kept"
#: gold_source of the longmemeval protocol: corpus ids containing "answer".
GOLD_FROM_ANSWER_IDS = "corpus_ids_with_answer"
#: gold_source of the vipune protocol at turn level: has_answer turns of the gold sessions.
GOLD_FROM_TURNS = "has_answer_turns"
#: The head of the turn view's refusal of a question whose gold sessions mark no turn
#: (run_facts.py names a question the view scores after it). The text is kept in the
#: corpus cache's rejections: change it only with corpus.FORMAT_VERSION.
NO_GOLD_TURNS = "no turn of its gold sessions carries has_answer: true"


@dataclass(frozen=True)
class View:
    """A (protocol, granularity) choice."""

    protocol: str = VIPUNE
    granularity: str = "session"

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}")
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"unknown granularity {self.granularity!r}")

    @property
    def name(self) -> str:
        """``vipune-session``, ``longmemeval-turn``…: names the corpus file of the view."""
        return f"{self.protocol}-{self.granularity}"

    @property
    def is_default(self) -> bool:
        return self.protocol == VIPUNE and self.granularity == "session"


def is_lme_abstention(question_id: str) -> bool:
    """LongMemEval skips a question whose id *contains* ``_abs`` (run_retrieval.py line
    396: a substring test, where the vipune protocol tests the suffix)."""
    return "_abs" in question_id


def _user_turns(turns: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [t for t in turns if t.get("role") == "user"]


class _Unscorable(Exception):
    """Internal: the instance breaks an assumption upstream asserts (its run would crash)."""


def lme_session_item(session_id: str, turns: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """One session slot as LongMemEval's session-level corpus item: (corpus id, text).

    Text: the *user* turns' contents joined by single spaces (run_retrieval.py line 206).
    Id: the session id, with every ``answer`` replaced by ``noans`` when the id contains
    ``answer`` and no user turn has a true ``has_answer`` (lines 208-210); upstream reads
    ``has_answer`` of every user turn there, so a missing one is refused (its KeyError).
    """
    users = _user_turns(turns)
    text = " ".join(str(t["content"]) for t in users)
    if "answer" not in session_id:
        return session_id, text
    if any("has_answer" not in t for t in users):
        raise _Unscorable(
            f"session {session_id!r} has a user turn without has_answer, which LongMemEval's "
            f"protocol reads on every user turn of a session whose id contains 'answer'; add "
            f"has_answer true/false there, or score with --retrieval-eval-protocol=vipune")
    if all(not t["has_answer"] for t in users):
        return session_id.replace("answer", "noans"), text
    return session_id, text


def lme_turn_items(session_id: str,
                   turns: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """One session slot as LongMemEval's turn-level corpus items: [(corpus id, text)].

    One item per *user* turn, its content as is (run_retrieval.py lines 213-215); id
    ``<session_id>_<i+1>`` with ``i`` the turn's index among all turns (lines 217, 222). In a
    session whose id contains ``answer`` every user turn must carry a boolean ``has_answer``
    (asserted at lines 219-220); a false one gets ``answer`` -> ``noans`` in its id (line 224).
    """
    items: list[tuple[str, str]] = []
    evidence = "answer" in session_id
    for i, turn in enumerate(turns):
        if turn.get("role") != "user":
            continue
        corpus_id = f"{session_id}_{i + 1}"
        if evidence:
            flag = turn.get("has_answer")
            if flag is not True and flag is not False:
                raise _Unscorable(
                    f"turn {i} of session {session_id!r} has has_answer {flag!r}, not true or "
                    f"false, which LongMemEval's protocol asserts on every user turn of a "
                    f"session whose id contains 'answer'; set it to true or false, or score "
                    f"with --retrieval-eval-protocol=vipune")
            if not flag:
                corpus_id = corpus_id.replace("answer", "noans")
        items.append((corpus_id, str(turn["content"])))
    return items


def _has_user_evidence(sessions: Sequence[object]) -> bool:
    """Whether any user turn of the haystack has a true ``has_answer`` (run_retrieval.py
    line 400: checked over every session, evidence or not)."""
    for turns in sessions:
        for turn in turns if isinstance(turns, list) else ():
            if isinstance(turn, dict) and turn.get("role") == "user" and turn.get("has_answer"):
                return True
    return False


#: Rejections of the vipune parser that LongMemEval does not make (it never reads the gold
#: lists: gold is found in the corpus ids).
_GOLD_REASONS = ("empty gold list", "no gold:")


def _lme_instance(index: int, raw: dict[str, Any], base: Instance | None,
                  granularity: str) -> Instance:
    question_id = str(raw["question_id"])
    ids: list[str] = raw["haystack_session_ids"]
    dates: list[object] = raw["haystack_dates"]
    sessions: list[list[dict[str, Any]]] = raw["haystack_sessions"]
    rows: list[Row] = []
    # Every slot is kept, a repeated session id included: it is one more corpus item, which
    # changes BM25's statistics and can take a top-k place (run_retrieval.py lines 243-247).
    for sid, date, turns in zip(ids, dates, sessions, strict=True):
        created_at = (parse_date(date) or "") if isinstance(date, str) else ""
        if granularity == "session":
            items = [lme_session_item(sid, turns)]
        else:
            items = lme_turn_items(sid, turns)
        if granularity == "session":  # the user turns its text joins
            held = [tuple((str(t["role"]), str(t["content"])) for t in _user_turns(turns))]
        else:
            held = [(("user", text),) for _, text in items]
        rows.extend(Row(cid, text, created_at, own)
                    for (cid, text), own in zip(items, held, strict=True))
    # Gold: every corpus id containing "answer" (run_retrieval.py line 272), unique.
    gold = tuple(dict.fromkeys(row.session_id for row in rows if "answer" in row.session_id))
    notes: dict[str, int] = {}
    abstention = is_lme_abstention(question_id)
    if not abstention and not _has_user_evidence(sessions):
        notes[NO_USER_EVIDENCE] = 1  # left out of upstream's averages (lines 399-402)
    repeated = len(ids) - len(set(ids))
    if repeated:  # kept as items, unlike the vipune protocol's "repeated_session_ids"
        notes[REPEATED_SLOTS_KEPT] = repeated
    qtype = str(raw["question_type"])
    return Instance(
        index=index, question_id=question_id, question_type=qtype,
        # Upstream splits the question as written (line 110): not trimmed.
        question=str(raw["question"]),
        question_date=base.question_date if base is not None else
        (parse_date(str(raw["question_date"])) or ""),
        gold=gold, gold_source=GOLD_FROM_ANSWER_IDS,
        abstention=abstention or bool(notes.get(NO_USER_EVIDENCE)),
        rows=tuple(rows), notes=notes)


def _vipune_turn_instance(raw: dict[str, Any], base: Instance) -> Instance | Rejection:
    ids: list[str] = raw["haystack_session_ids"]
    sessions: list[list[dict[str, Any]]] = raw["haystack_sessions"]
    created = {row.session_id: row.created_at for row in base.rows}
    gold_sessions = set(base.gold)
    rows: list[Row] = []
    gold: list[str] = []
    seen: set[str] = set()
    empty = 0
    for sid, turns in zip(ids, sessions, strict=True):
        if sid in seen or sid not in created:  # first occurrence wins; blank sessions dropped
            continue
        seen.add(sid)
        for i, turn in enumerate(turns):
            content = str(turn["content"])
            if not content.strip():
                empty += 1  # vipune refuses empty content
                continue
            turn_id = f"{sid}_{i + 1}"  # numbered as upstream numbers turns
            rows.append(Row(turn_id, render_session([turn]), created[sid],
                            ((str(turn["role"]), content),)))
            if sid in gold_sessions and turn.get("has_answer") is True:
                gold.append(turn_id)
    if not gold:
        return Rejection(base.index, base.question_id, NO_GOLD_TURNS + (
            ", which turn granularity needs to name the gold turns; mark the evidence turns, "
            "or score sessions (--retrieval-eval-granularity=session)"))
    notes = dict(base.notes)
    if empty:
        notes["empty_turns"] = empty
    return replace(base, rows=tuple(rows), gold=tuple(gold), gold_source=GOLD_FROM_TURNS,
                   notes=notes)


def parse_for_view(index: int, raw: object, view: View) -> Instance | Rejection:
    """One raw instance as the corpus items, gold and question of ``view``.

    The vipune parser (:func:`pairs.parse_instance`) validates every view's input, so bad
    data is rejected with the same one-line reasons; the longmemeval protocol also rejects an
    instance its own scripts would crash on (a missing or non-boolean ``has_answer`` where
    they read it).
    """
    base = parse_instance(index, raw)
    if view.is_default or not isinstance(raw, dict):
        return base
    if view.protocol == LONGMEMEVAL:
        if isinstance(base, Rejection) and not base.reason.startswith(_GOLD_REASONS):
            return base
        try:
            return _lme_instance(index, raw, base if isinstance(base, Instance) else None,
                                 view.granularity)
        except _Unscorable as exc:
            return Rejection(index, str(raw.get("question_id")), str(exc))
    if isinstance(base, Rejection):
        return base
    return _vipune_turn_instance(raw, base)
