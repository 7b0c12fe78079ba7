"""A session's turns as memory units: turn ids and texts, as the turn granularity names them.

The ``+unit:turn`` what-ifs (``semantic+unit:turn``, ``bm25+unit:turn``, ``fts+unit:turn``)
rank the turns of a session-granularity persona. Each turn is named and rendered exactly as
the vipune protocol's turn granularity makes its rows (:mod:`.protocol`): id
``<session_id>_<n>`` with ``n`` the turn's 1-based position among all turns of the session
(LongMemEval's numbering, run_retrieval.py lines 217 and 222), text ``role: content``
(:func:`pairs.render_session` of the one turn), and a turn with blank content left out (vipune
refuses empty content). So a turn's text key is the one the turn granularity's corpus holds,
and its vector is the one the bundled sample ships for that view.

:class:`WithTurnTexts` is the corpus as prep sees it when a ``+unit:turn`` retriever runs:
each pair's text keys followed by its turns' keys, the turns' texts served from the turns the
corpus holds per session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .pairs import render_session, text_key
from .turn_rows import FORMAT as TURN_ROWS_FORMAT
from .turn_rows import TurnRowsCache, persona_turn_rows

__all__ = ["WithTurnTexts", "turn_items"]


def turn_items(session_id: str,
               turns: Sequence[Mapping[str, str]]) -> list[tuple[str, str]]:
    """``(turn id, text)`` of each turn of one session that the turn granularity keeps."""
    items: list[tuple[str, str]] = []
    for i, turn in enumerate(turns):
        if not str(turn["content"]).strip():
            continue  # as the turn view: vipune refuses empty content
        items.append((f"{session_id}_{i + 1}", render_session([turn])))
    return items


class WithTurnTexts:
    """A corpus (or subset) whose pairs also carry their sessions' turn texts, for prep.

    ``pairs``: each pair with ``text_keys`` extended by the keys of its sessions' turns (in
    session order, then turn order); ``texts(keys)`` serves a turn's text or, for any other
    key, the corpus's. The turns are read from the corpus once, when ``pairs`` is first read.
    """

    #: What names this corpus's texts apart from its inner one's (:func:`..vectors.coverage.
    #: corpus_id`): it adds turn texts, made by the turn rows' rules of this format.
    adds_turns = True
    turns_format = TURN_ROWS_FORMAT

    def __init__(self, corpus: Any, kept: TurnRowsCache | None = None, *,
                 hand_on: bool = True) -> None:
        self.corpus = corpus
        #: Where each persona's turn rows are kept (:mod:`.turn_rows`): a warm run reads
        #: its pairs' turn keys there, no turn decoded or keyed.
        self.kept = kept
        #: Whether the rows are held for the persona that ranks them (a run's start), as
        #: :meth:`.TurnRowsCache.get_or_build` holds them; prep ranks nothing.
        self.hand_on = hand_on
        self.dataset_name: str = corpus.dataset_name
        self.dataset_sha256: str = corpus.dataset_sha256
        self._pairs: list[Any] | None = None
        self._turn_texts: dict[str, str] = {}
        #: Where each kept row's text lies, by its key: its session's text key and its turn
        #: number (:meth:`_from_kept`), so that a text not rendered yet is made from its
        #: own session alone.
        self._where: dict[str, tuple[str, int]] = {}

    @property
    def pairs(self) -> list[Any]:
        if self._pairs is None:
            self._pairs = self._extended()
        return self._pairs

    @property
    def stats(self) -> Mapping[str, int]:
        return {**self.corpus.stats, "slots": sum(len(p.text_keys) for p in self.pairs)}

    def _extended(self) -> list[Any]:
        if self.kept is not None:
            return self._from_kept(self.kept)
        by_session: dict[str, tuple[str, ...]] = {}
        out: list[Any] = []
        for pair in self.corpus.pairs:
            fresh = [k for k in dict.fromkeys(pair.text_keys) if k not in by_session]
            if fresh:
                for key, turns in zip(fresh, self.corpus.turns(fresh), strict=True):
                    keys: list[str] = []
                    for _, text in turn_items("", turns):
                        turn_key = text_key(text)
                        self._turn_texts.setdefault(turn_key, text)
                        keys.append(turn_key)
                    by_session[key] = tuple(keys)
            turn_keys = [k for key in pair.text_keys for k in by_session[key]]
            out.append(replace(pair, text_keys=(*pair.text_keys, *turn_keys)))
        return out

    def _from_kept(self, kept: TurnRowsCache) -> list[Any]:
        """Each pair's turn keys from its kept turn rows (built and kept where missing);
        the texts of rows read back are rendered only when :meth:`texts` asks for them."""
        out: list[Any] = []
        where = self._where
        for pair in self.corpus.pairs:
            keys = list(pair.text_keys)
            rows, _ = persona_turn_rows(kept, pair.session_ids, keys, pair.created_at,
                                        self.corpus.turns, hand_on=self.hand_on,
                                        rendered_out=self._turn_texts)
            for key, s, n in zip(rows.keys, rows.session_rows.tolist(), rows.numbers.tolist(),
                                 strict=True):
                if key not in where:
                    where[key] = (keys[s], n)
            out.append(replace(pair, text_keys=(*pair.text_keys, *rows.keys)))
        return out

    def _render(self, wanted: set[str]) -> None:
        """The texts of the turn keys ``wanted``, rendered from the sessions' turns: from
        their own sessions where the kept rows say which (each read once), else from every
        session."""
        own = self._turn_texts
        placed = [k for k in wanted if k in self._where]
        if placed:
            by_session: dict[str, list[tuple[str, int]]] = {}
            for key in placed:
                session, number = self._where[key]
                by_session.setdefault(session, []).append((key, number))
            for session, turns in zip(by_session, self.corpus.turns(list(by_session)),
                                      strict=True):
                for key, number in by_session[session]:
                    own.setdefault(key, render_session([turns[number - 1]]))
            wanted = set(wanted) - set(placed)
            if not wanted:
                return
        sessions = list(dict.fromkeys(k for pair in self.corpus.pairs for k in pair.text_keys))
        for turns in self.corpus.turns(sessions):
            for _, text in turn_items("", turns):
                key = text_key(text)
                if key in wanted:
                    own.setdefault(key, text)

    def texts(self, keys: Sequence[str]) -> list[str]:
        if self.kept is None and not self._turn_texts:
            self.pairs  # noqa: B018 - reads the turns
        own = self._turn_texts
        others = [k for k in keys if k not in own]
        if self.kept is not None and others:
            self.pairs  # noqa: B018 - the turn rows (their keys)
            sessions = {k for pair in self.corpus.pairs for k in pair.text_keys}
            turn_keys = {k for k in others if k not in sessions}
            if turn_keys:
                self._render(turn_keys)
            others = [k for k in keys if k not in own]
        found = dict(zip(others, self.corpus.texts(others), strict=True)) if others else {}
        return [own[k] if k in own else found[k] for k in keys]
