"""A persona's turns as rows, kept: the ``+unit:turn`` what-ifs' rows built once per persona
and read back by later runs (issue 44).

The rows are the turn granularity's (:func:`.turn_texts.turn_items`): per session, in order,
each turn with non-blank content, id ``<session_id>_<n>``, text ``role: content``. What a warm
run needs of them, and what costs most to make (the corpus's turns decoded, each turn
rendered and keyed by sha256), is kept in one small file per persona: each row's session row
and turn number, its text key, and each session's turn count (blank turns included: a
memory's turn id is checked against it), and each session's block digest (the sha256 of its
rows' raw text keys, in order: the address of its turn vectors laid out together,
:mod:`..vectors.turn_blocks`). The texts themselves are not kept: a run that needs
them (a store's ingest, a text not counted yet) renders them from the corpus's turns.

:class:`TurnRowsCache` holds these files, content-addressed (the persona's session ids, text
keys and dates, and the caller's ``salt``), as :class:`.vipune.store.StoreCache` holds the
session stores: written through a temp file and committed with a sha256 sidecar and a
``.verified`` stamp (:func:`..io.checksums.commit_file`); a later run trusts a file whose stamp
matches (``verify="stamp"``), rehashes one whose stamp differs (or every one under ``full``),
and rebuilds one that fails its sidecar or does not parse (a damaged file is never served).

File layout (little-endian): ``MAGIC``, a uint32 header length, the header (JSON: format,
rows, sessions, the byte length of the kept ids, the caller's ``extra`` strings), then int32
session rows, int32 turn numbers, int32 per-session turn counts, 32 raw bytes per row's text
key, 32 bytes per session's block digest, and the rows' turn ids, UTF-8, NUL between two
(none kept when an id holds a NUL: they are made again from the session ids).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io.checksums import drop_committed, read_committed, write_committed
from ..io.framed import read_header
from .pairs import render_session, text_key

__all__ = ["FORMAT", "HANDED_ROWS", "TurnRows", "TurnRowsCache", "block_digest",
           "build_turn_rows", "persona_turn_rows", "turn_rows_key"]

#: Bumped whenever what a turn-rows file holds, or how rows are made, changes.
FORMAT = 3
MAGIC = b"PRE-TURNROWS\x00\x00\x00\x01"
_SUFFIX = ".turns"
#: Rows a cache holds handed on at most (:meth:`TurnRowsCache.get_or_build`'s ``hand_on``),
#: about 16 bytes each (two int32 and a reference to a key string the start's pairs hold
#: anyway): ~32 MB, some 270 personas of M's length. Past it a persona reads its file again
#: (a couple of milliseconds), so a run's memory does not grow with the dataset.
HANDED_ROWS = 2_000_000


@dataclass(frozen=True)
class TurnRows:
    """A persona's turn rows (see the module's docstring); ``extra``: the caller's strings
    kept with them (the turn persona's own keys)."""

    session_rows: np.ndarray  # int32, per row: the row of its session in the persona
    numbers: np.ndarray  # int32, per row: its 1-based turn number in that session
    keys: tuple[str, ...]  # per row: text_key of its text
    turn_counts: np.ndarray  # int32, per session: its turns, blank ones included
    extra: Mapping[str, str] = field(default_factory=dict)
    #: Per session, :func:`block_digest` of its rows' text keys (32 bytes each).
    blocks: tuple[bytes, ...] = ()
    #: Each row's turn id as :meth:`ids` makes it for the persona's session ids, when the
    #: rows were made for them (kept in the file: split from one string, a third of the
    #: cost of making them, every warm turn run); None: made by :meth:`ids`.
    made_ids: Sequence[str] | None = None

    def ids(self, session_ids: Sequence[str]) -> list[str]:
        """Each row's turn id, ``<session_id>_<n>`` (:func:`..boundary.turn_ids.
        format_turn_id`'s form; made by concatenating each session's prefix and each
        number's digits, made once: ~9,400 ids a persona at M), or the ids kept with the
        rows (:attr:`made_ids`: the file's key holds the session ids they were made for)."""
        if self.made_ids is not None:
            return list(self.made_ids)
        numbers = self.numbers.tolist()
        digits = [str(i) for i in range(max(numbers, default=0) + 1)]
        prefixes = [f"{sid}_" for sid in session_ids]
        return [prefixes[s] + digits[n]
                for s, n in zip(self.session_rows.tolist(), numbers, strict=True)]

    def texts_from(self, rendered: Sequence[Sequence[str]]) -> list[str]:
        """Each row's text, from the persona's sessions' turns each rendered as one turn is
        (``render_session([turn])``: :meth:`.Corpus.turn_texts`)."""
        if len(self.numbers) == int(self.turn_counts.sum()) and \
                list(map(len, rendered)) == self.turn_counts.tolist():
            # no blank turn: the rows are every session's turns in order (one C pass)
            return list(itertools.chain.from_iterable(rendered))
        return [rendered[s][n - 1]
                for s, n in zip(self.session_rows.tolist(), self.numbers.tolist(), strict=True)]

    def texts_of(self, rows: Sequence[int],
                 read: Callable[[list[int]], Sequence[Sequence[str]]]) -> list[str]:
        """The texts of ``rows`` alone, as :meth:`texts_from` gives them; ``read(sessions)``
        gives those persona sessions' rendered turns (each session read once)."""
        if not rows:
            return []
        at = np.asarray(rows, dtype=np.int64)
        sessions, numbers = self.session_rows[at].tolist(), self.numbers[at].tolist()
        wanted = list(dict.fromkeys(sessions))
        turns = dict(zip(wanted, read(wanted), strict=True))
        return [turns[s][n - 1] for s, n in zip(sessions, numbers, strict=True)]


def block_digest(keys: Sequence[str]) -> bytes:
    """The address of one session's turn vectors laid out together: the sha256 of its rows'
    text keys (raw bytes, in row order). The same turns give the same digest in any
    persona, dataset or run; any changed, added or dropped turn text changes it."""
    return hashlib.sha256(bytes.fromhex("".join(keys))).digest()


def build_turn_rows(turns: Sequence[Sequence[Mapping[str, str]]]
                    ) -> tuple[TurnRows, list[str]]:
    """The rows of a persona whose session ``i`` has ``turns[i]``, and their texts; each text
    rendered and keyed once."""
    session_rows: list[int] = []
    numbers: list[int] = []
    texts: list[str] = []
    for s, own in enumerate(turns):
        for i, turn in enumerate(own):
            if not str(turn["content"]).strip():
                continue  # as the turn view (turn_texts.turn_items): vipune refuses it
            session_rows.append(s)
            numbers.append(i + 1)
            texts.append(render_session([turn]))
    keys = tuple(text_key(t) for t in texts)
    ends = np.cumsum([0, *np.bincount(session_rows, minlength=len(turns)).tolist()]) \
        if session_rows else np.zeros(len(turns) + 1, dtype=np.int64)
    rows = TurnRows(np.asarray(session_rows, dtype=np.int32),
                    np.asarray(numbers, dtype=np.int32), keys,
                    np.asarray([len(own) for own in turns], dtype=np.int32),
                    blocks=tuple(block_digest(keys[int(a):int(b)])
                                 for a, b in itertools.pairwise(ends)))
    return rows, texts


def turn_rows_key(session_ids: Sequence[str], text_keys: Sequence[str],
                  created_at: Sequence[str], salt: str = "") -> str:
    """The address of a persona's turn rows: its sessions' ids, text keys (a changed turn
    changes its session's text) and dates, the format and ``salt``."""
    payload = json.dumps(["turn-rows", FORMAT, salt, list(session_ids), list(text_keys),
                          list(created_at)], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


#: Between two kept turn ids (an id holding it is not kept: its rows' ids are made).
_ID_SEP = "\x00"


def _encode(rows: TurnRows) -> bytes:
    n, s = len(rows.keys), len(rows.turn_counts)
    made = rows.made_ids
    ids = _ID_SEP.join(made).encode("utf-8") if made is not None and n and \
        len(made) == n and not any(_ID_SEP in i for i in made) else b""
    header = json.dumps({"format": FORMAT, "rows": n, "sessions": s, "ids": len(ids),
                         "extra": dict(rows.extra)}, sort_keys=True).encode("utf-8")
    raw_keys = bytes.fromhex("".join(rows.keys))
    return b"".join([MAGIC, len(header).to_bytes(4, "little"), header,
                     rows.session_rows.astype("<i4").tobytes(),
                     rows.numbers.astype("<i4").tobytes(),
                     rows.turn_counts.astype("<i4").tobytes(), raw_keys,
                     b"".join(rows.blocks), ids])


def _decode(data: bytes, sessions: int) -> TurnRows | None:
    """The rows a file holds, or None when it is not a whole, consistent turn-rows file of a
    persona of ``sessions`` sessions."""
    try:
        if not data.startswith(MAGIC):
            return None
        at = len(MAGIC)
        size = int.from_bytes(data[at:at + 4], "little")
        header = json.loads(data[at + 4:at + 4 + size].decode("utf-8"))
        n, s, kept = int(header["rows"]), int(header["sessions"]), int(header["ids"])
        extra = header.get("extra", {})
        if header.get("format") != FORMAT or s != sessions or n < 0 or kept < 0 or not (
                isinstance(extra, dict) and all(isinstance(v, str) for v in extra.values())):
            return None
        at += 4 + size
        if len(data) != at + 4 * (2 * n + s) + 32 * n + 32 * s + kept:
            return None
        session_rows = np.frombuffer(data, "<i4", n, at).astype(np.int32)
        numbers = np.frombuffer(data, "<i4", n, at + 4 * n).astype(np.int32)
        counts = np.frombuffer(data, "<i4", s, at + 8 * n).astype(np.int32)
        keys_at = at + 4 * (2 * n + s)
        # each key's hex, split at separators bytes.hex puts every 32 bytes (one C pass)
        keys = tuple(data[keys_at:keys_at + 32 * n].hex("\n", 32).split("\n")) if n else ()
        blocks_at = keys_at + 32 * n
        blocks = tuple(data[i:i + 32] for i in range(blocks_at, blocks_at + 32 * s, 32))
        ids_at = blocks_at + 32 * s
        made = data[ids_at:ids_at + kept].decode("utf-8").split(_ID_SEP) if kept else None
    except (ValueError, KeyError, TypeError, UnicodeError):
        return None
    if made is not None and len(made) != n:
        return None
    if n and (session_rows.min() < 0 or session_rows.max() >= s or numbers.min() < 1
              or (numbers > counts[session_rows]).any()
              or (np.diff(session_rows) < 0).any()):
        return None
    return TurnRows(session_rows, numbers, keys, counts, extra, blocks, made)


def _older_format(path: Path) -> bool:
    """Whether ``path`` starts as a turn-rows file whose header names a format older than
    :data:`FORMAT` (its first few hundred bytes read; anything else: False)."""
    try:
        with open(path, "rb") as handle:
            header = read_header(handle, MAGIC, 1 << 16)
    except (OSError, ValueError):
        return False
    found = None if header is None else header.get("format")
    return isinstance(found, int) and not isinstance(found, bool) and found < FORMAT


class TurnRowsCache:
    """Turn-rows files under ``root``: ``<root>/<key[:2]>/<key>.turns`` (see the module's
    docstring). ``verify``: the run's ``--retrieval-eval-verify`` (``stamp`` or ``full``)."""

    def __init__(self, root: str | Path, verify: str = "stamp") -> None:
        self.root = Path(root)
        self.verify = verify
        #: Files this process built, and files it read (a run's footprint facts).
        self.built = 0
        self.read = 0
        #: Rows the run's start handed on, by key, until each persona's first load takes
        #: them (:meth:`get_or_build`'s ``hand_on``); :meth:`release` drops what is left.
        self._handed: dict[str, TurnRows] = {}
        self._handed_rows = 0
        #: Files of older formats removed by this process's first write (:meth:`sweep_older`).
        self.swept: int | None = None

    def path_for(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}{_SUFFIX}"

    def load(self, key: str, sessions: int, *, take: bool = True) -> TurnRows | None:
        """The rows kept under ``key``, or None: none kept, or the file fails its sidecar
        (its stamp, else a rehash) or does not parse; such a file is removed (rebuilt by
        :meth:`get_or_build`). ``take``: rows this process handed on (:meth:`get_or_build`'s
        ``hand_on``) are taken, not read again."""
        path = self.path_for(key)
        handed = self._handed.pop(key, None) if take else None
        if handed is not None:
            self._handed_rows -= len(handed.keys)
            if len(handed.turn_counts) == sessions:
                return handed
        data = read_committed(path, self.verify)
        if data is None:
            return None
        rows = _decode(data, sessions)
        if rows is None:
            drop_committed(path)
            return None
        self.read += 1
        return rows

    def get_or_build(self, key: str, sessions: int,
                     build: Callable[[], tuple[TurnRows, list[str] | None]],
                     *, hand_on: bool = False) -> tuple[TurnRows, list[str] | None]:
        """The rows kept under ``key`` (texts None: not read), else ``build()``'s rows and
        texts, kept for the next run (best effort: a cache that cannot be written only costs
        the next run a build). ``hand_on``: the rows are also held, up to
        :data:`HANDED_ROWS` rows in all, for this cache's next :meth:`load` of ``key`` (the
        run's start reads every persona's rows for their turn keys; each persona's first
        ranking takes them there, one read and decode a persona, not two)."""
        rows = self.load(key, sessions, take=not hand_on)  # a start's pass reads them
        if rows is None:
            rows, texts = build()
            if self.swept is None:
                self.sweep_older()
            if write_committed(self.path_for(key), _encode(rows)):
                self.built += 1
        else:
            texts = None
        if hand_on and key not in self._handed and (
                self._handed_rows + len(rows.keys) <= HANDED_ROWS):
            self._handed[key] = rows
            self._handed_rows += len(rows.keys)
        return rows, texts

    def sweep_older(self) -> int:
        """Remove the files an older format wrote (their keys are never asked for again: a
        format is part of every key), with their sidecars and stamps; run once a process, by
        its first write (a format bump misses every persona, so its first run sweeps; a warm
        run writes nothing and lists nothing). A file of a newer format (a newer plugin
        sharing the cache) and anything not a turn-rows file are left alone."""
        swept = 0
        try:
            found = sorted(self.root.glob(f"[0-9a-f][0-9a-f]/*{_SUFFIX}"))
        except OSError:
            found = []
        for path in found:
            if _older_format(path):
                drop_committed(path)
                swept += 1
        self.swept = swept
        return swept

    def release(self) -> None:
        """Drop the rows handed on that no persona took (the run's end: pairs deselected,
        or a run stopped)."""
        self._handed.clear()
        self._handed_rows = 0


#: Per session text key, its kept turns' numbers and text keys, its turn count and its block
#: digest, for the
#: personas built next in this process (LongMemEval's haystacks share most sessions: each
#: is decoded, rendered and keyed once a run, not once a persona holding it).
_SESSIONS: OrderedDict[str, tuple[tuple[int, ...], tuple[str, ...], int, bytes]] = \
    OrderedDict()
#: Sessions :data:`_SESSIONS` holds at most (about 2 KB each).
SESSIONS_KEPT = 50_000


def persona_turn_rows(kept: TurnRowsCache, session_ids: Sequence[str],
                      text_keys: Sequence[str], created_at: Sequence[str],
                      turns_of: Callable[[list[str]], Sequence[Sequence[Mapping[str, str]]]],
                      *, hand_on: bool = False, rendered_out: dict[str, str] | None = None
                      ) -> tuple[TurnRows, list[str] | None]:
    """A persona's turn rows, read back from ``kept`` or built and kept; ``turns_of(keys)``:
    the turns of the sessions of those text keys (only sessions this process has not made
    rows of yet are read). With them, in ``extra``, the turn persona's own key (``"key"``)
    and its FTS5 store's (``"store"``), as :mod:`..vipune.store` addresses them. Texts: the
    built rows' when every session was read here (None: read back, or some rows made from
    sessions seen before; rendered when asked). ``hand_on``: as
    :meth:`TurnRowsCache.get_or_build`'s. ``rendered_out``: each turn text rendered here is
    added to it by its key (the sessions read here, whether or not every one was)."""
    from ..vipune import store as store_mod  # the store's addressing rules

    salt = store_mod.store_key("0" * 64, "turns")

    def build() -> tuple[TurnRows, list[str] | None]:
        fresh = [k for k in dict.fromkeys(text_keys) if k not in _SESSIONS]
        rendered: dict[str, list[str]] = {}
        for key, turns in zip(fresh, turns_of(fresh) if fresh else [], strict=True):
            one, texts = build_turn_rows([turns])
            _SESSIONS[key] = (tuple(one.numbers.tolist()), one.keys, len(turns), one.blocks[0])
            rendered[key] = texts
            if rendered_out is not None:
                for turn_key, text in zip(one.keys, texts, strict=True):
                    rendered_out.setdefault(turn_key, text)
        session_rows: list[int] = []
        numbers: list[int] = []
        keys: list[str] = []
        counts: list[int] = []
        blocks: list[bytes] = []
        for s, key in enumerate(text_keys):
            own, own_keys, count, block = _SESSIONS[key]
            blocks.append(block)
            _SESSIONS.move_to_end(key)
            session_rows.extend([s] * len(own))
            numbers.extend(own)
            keys.extend(own_keys)
            counts.append(count)
        every = [t for key in text_keys for t in rendered[key]] \
            if all(key in rendered for key in text_keys) else None
        while len(_SESSIONS) > SESSIONS_KEPT:
            _SESSIONS.popitem(last=False)
        ids = [f"{session_ids[s]}_{n}" for s, n in zip(session_rows, numbers, strict=True)]
        created = [created_at[s] for s in session_rows]
        extra = {"key": store_mod.persona_key(ids, keys, created, "turns"),
                 "store": store_mod.persona_key(ids, keys, created, "")}
        return TurnRows(np.asarray(session_rows, dtype=np.int32),
                        np.asarray(numbers, dtype=np.int32), tuple(keys),
                        np.asarray(counts, dtype=np.int32), extra, tuple(blocks), ids), every

    return kept.get_or_build(turn_rows_key(session_ids, text_keys, created_at, salt),
                             len(session_ids), build, hand_on=hand_on)
