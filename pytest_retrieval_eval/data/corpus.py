"""The compact prep output: one SQLite file per dataset (and view), its format and reading.

A dataset is streamed once into ``<cache_dir>/corpus/<sha256>.sqlite`` (:mod:`.ingest`); every
later phase and every process reads that file through :class:`Corpus`. A file counts only
when complete: a ``meta`` row ``complete=1`` with the current format version and the same
sha256, a file size matching its SQLite header, the whole file matching the sha256 in its
``<sha256>.sqlite.sha256`` sidecar (written after it), and its pairs matching the digest
written with them (checked at every load; each text is checked against its key as it is
read). :func:`open_corpus` opens a built file by path (xdist workers attach that way) and
never rebuilds.

Tables:

* ``texts(key TEXT PRIMARY KEY, text TEXT)``: every unique session content and question text,
  keyed by :func:`pairs.text_key`. Sessions shared by several personas are stored once; the
  primary key does the dedup (``INSERT OR IGNORE`` in batches), so no Python set of texts is
  kept and peak memory stays at about one instance.
* ``pairs``: one row per parsed instance (abstention included), the :class:`PairRecord`
  fields, tuples and notes as JSON text.
* ``rejections(idx, question_id, reason)``.
* ``meta(key, value)``: ``format_version``, ``dataset_name``, ``dataset_sha256``, ``stats``
  (JSON), ``complete``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from ..errors import CacheError
from ..io.checksums import (
    matches_sidecar,
)
from .pairs import (
    PairFacts,
    Rejection,
    SessionTurns,
    text_key,
)
from .protocol import View

__all__ = [
    "FORMAT_VERSION",
    "PAIR_COLUMNS",
    "SCHEMA_SQL",
    "STAT_KEYS",
    "Corpus",
    "PairRecord",
    "Progress",
    "corpus_path",
    "decode_turn_texts",
    "decode_turns",
    "encode_turns",
    "gold_source",
    "json_text",
    "open_corpus",
    "open_if_complete",
    "records_digest",
]

Progress = Callable[[str, int, "int | None"], None]
"""(label, done, total): how the plugin and the CLI report progress."""
_T = TypeVar("_T")

#: Bumped whenever the file layout or the parsing rules change: older files are rebuilt.
#: 5: an empty session id is rejected; 4: an instance repeating a JSON key is rejected;
#: 3: undated sessions counted; 2: a repeated question_id is rejected; the .sha256 sidecar.
#: 6: each text's turns (table ``turns``: key -> [[role, content], ...]); 7: a turn whose
#: content lies in its text is stored as [role, start, end] (:func:`encode_turns`), not copied.
#: 8: each pair's gold turns (``gold_turns``: the has_answer turns of its gold sessions).
#: 9: a session rendered with roles user and assistant, whose text splits back into its turns
#: exactly, stores its turns as "" (:func:`encode_turns`: the cold build's turn cost).
FORMAT_VERSION = 9
_SELECT_CHUNK = 500

SCHEMA_SQL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE texts (key TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE turns (key TEXT PRIMARY KEY, turns TEXT NOT NULL);
CREATE TABLE pairs (
    idx INTEGER PRIMARY KEY,
    question_id TEXT NOT NULL,
    question_type TEXT NOT NULL,
    question TEXT NOT NULL,
    question_date TEXT NOT NULL,
    gold TEXT NOT NULL,
    gold_source TEXT NOT NULL,
    abstention INTEGER NOT NULL,
    session_ids TEXT NOT NULL,
    text_keys TEXT NOT NULL,
    created_at TEXT NOT NULL,
    notes TEXT NOT NULL,
    gold_turns TEXT NOT NULL
);
CREATE TABLE rejections (idx INTEGER PRIMARY KEY, question_id TEXT, reason TEXT NOT NULL);
"""

PAIR_COLUMNS = (
    "idx, question_id, question_type, question, question_date, gold, gold_source, abstention, "
    "session_ids, text_keys, created_at, notes, gold_turns"
)

#: The stats keys, in report order.
STAT_KEYS: tuple[str, ...] = (
    "instances",
    "rejected",
    "abstention",
    "usable",
    "slots",
    "rows",
    "unique_session_texts",
    "unique_texts",
    "repeated_session_ids",
    "conflicting_repeats",
    "histories_with_repeats",
    "gold_ids",
    "gold_not_in_haystack",
    "oversize_sessions",
    "empty_sessions",
    "undated_sessions",
    "gold_from_has_answer",
)
@dataclass(frozen=True, kw_only=True)
class PairRecord(PairFacts):
    """What every later phase needs of one parsed instance; texts live in the corpus file."""

    session_ids: tuple[str, ...]
    text_keys: tuple[str, ...]
    created_at: tuple[str, ...]

    @property
    def question_key(self) -> str:
        """Content address of the question text."""
        return text_key(self.question)



def json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _record_from_row(row: Sequence[Any]) -> PairRecord:
    return PairRecord(
        index=int(row[0]),
        question_id=str(row[1]),
        question_type=str(row[2]),
        question=str(row[3]),
        question_date=str(row[4]),
        gold=tuple(json.loads(row[5])),
        gold_source=str(row[6]),
        abstention=bool(row[7]),
        session_ids=tuple(json.loads(row[8])),
        text_keys=tuple(json.loads(row[9])),
        created_at=tuple(json.loads(row[10])),
        notes={str(k): int(v) for k, v in json.loads(row[11]).items()},
        gold_turns=tuple(json.loads(row[12])),
    )


#: The meta rows the records digest covers (everything but the digest and the completion mark).
_DIGESTED_META = ("format_version", "dataset_name", "dataset_sha256", "dataset_sample", "stats")


def records_digest(meta: Mapping[str, str], pair_rows: Sequence[Sequence[Any]],
                    rejection_rows: Sequence[Sequence[Any]]) -> str:
    """sha256 over the meta, pairs and rejections rows: what every process loads eagerly,
    checked at every load (the texts are checked against their keys as they are read)."""
    digest = hashlib.sha256()
    digest.update(json_text([[k, meta.get(k)] for k in _DIGESTED_META]).encode("utf-8"))
    for row in pair_rows:
        digest.update(json_text(list(row)).encode("utf-8"))
    digest.update(b"rejections")
    for row in rejection_rows:
        digest.update(json_text(list(row)).encode("utf-8"))
    return digest.hexdigest()


def _connect_ro(path: Path) -> sqlite3.Connection:
    # immutable=1: the file is never modified in place (rebuilds rename a new file over it).
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def _header_size_ok(path: Path) -> bool:
    """True when the file is at least as long as its SQLite header says (not truncated)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError:
        return False
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return False
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    return pages > 0 and size >= pages * page_size


class Corpus:
    """A built corpus file, opened read-only.

    ``pairs`` and ``rejections`` are loaded eagerly (small); texts are read on demand through
    one connection per process (opened lazily, reopened after a fork; pickling keeps only the
    path, so a worker that unpickles a Corpus opens its own connection).
    """

    path: Path
    dataset_name: str
    dataset_sha256: str
    dataset_sample: str
    pairs: list[PairRecord]
    rejections: list[Rejection]
    stats: Mapping[str, int]

    def __init__(self, path: Path, dataset_name: str | None = None) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._lock = threading.Lock()
        self._load(dataset_name)

    def _load(self, dataset_name: str | None) -> None:
        conn = self._connection()
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        rows = conn.execute(f"SELECT {PAIR_COLUMNS} FROM pairs ORDER BY idx").fetchall()
        rejections = conn.execute(
            "SELECT idx, question_id, reason FROM rejections ORDER BY idx").fetchall()
        if meta.get("records_sha256") != records_digest(meta, rows, rejections):
            raise CacheError(
                f"corpus file {self.path}: its pairs no longer match the digest written with "
                f"them (the file changed on disk); delete it and run again to rebuild it"
            )
        self.dataset_name = dataset_name if dataset_name is not None else str(meta["dataset_name"])
        self.dataset_sha256 = str(meta["dataset_sha256"])
        self.dataset_sample = str(meta["dataset_sample"])
        self.stats = {str(k): int(v) for k, v in json.loads(meta["stats"]).items()}
        self.pairs = [_record_from_row(row) for row in rows]
        self.rejections = [Rejection(int(i), q, str(r)) for i, q, r in rejections]

    def _connection(self) -> sqlite3.Connection:
        pid = os.getpid()
        if self._conn is None or self._pid != pid:
            self._conn = _connect_ro(self.path)
            self._pid = pid
        return self._conn

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_conn"] = None
        state["_pid"] = -1
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close this process's connection (reopened on the next read)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _query(self, sql: str, params: Sequence[str] = ()) -> list[Any]:
        try:
            with self._lock:
                return self._connection().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise CacheError(
                f"corpus file {self.path} cannot be read ({exc}); delete it and run again to "
                f"rebuild it"
            ) from None

    def turns(self, keys: Sequence[str]) -> list[list[dict[str, str]]]:
        """Each text's turns as ``{"role", "content"}`` records, in order (``[]`` for a
        text stored without them: a question). Contents are cut from the texts (read and
        checked against their keys, :meth:`texts`) where :func:`encode_turns` found them."""
        return self._decoded(keys, decode_turns)

    def turn_texts(self, keys: Sequence[str]) -> list[list[str]]:
        """Each text's turns as the turn granularity renders a turn, ``"role: content"``
        (``render_session`` of that one turn), made straight from the stored text: what
        :meth:`turns` gives, rendered, without a record a turn."""
        return self._decoded(keys, decode_turn_texts)

    def _decoded(self, keys: Sequence[str], decode: Callable[[str, str], list[_T]]
                 ) -> list[list[_T]]:
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _SELECT_CHUNK):
            chunk = unique[start : start + _SELECT_CHUNK]
            marks = ",".join("?" * len(chunk))
            found.update(self._query(
                f"SELECT key, turns FROM turns WHERE key IN ({marks})", chunk))
        held = [key for key in unique if key in found]
        texts = dict(zip(held, self.texts(held), strict=True))
        decoded: dict[str, list[_T]] = {}
        for key in held:
            try:
                decoded[key] = decode(texts[key], found[key])
            except ValueError:
                raise CacheError(f"corpus file {self.path}: the turns under key {key[:16]}… "
                                 "are damaged; delete it and run again to rebuild it") from None
        return [list(decoded.get(key, [])) for key in keys]

    def texts(self, keys: Sequence[str]) -> list[str]:
        """The texts for ``keys``, in order (duplicates allowed); CacheError if one is missing."""
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _SELECT_CHUNK):
            chunk = unique[start : start + _SELECT_CHUNK]
            marks = ",".join("?" * len(chunk))
            found.update(self._query(f"SELECT key, text FROM texts WHERE key IN ({marks})", chunk))
        try:
            texts = [found[key] for key in keys]
        except KeyError as exc:
            raise CacheError(
                f"corpus file {self.path} has no text with key {exc.args[0]}; delete it and run "
                f"again to rebuild it"
            ) from None
        for key, text in found.items():  # a text's key is its sha256: checked at every read
            if text_key(text) != key:
                raise CacheError(
                    f"corpus file {self.path}: the text stored under key {key[:16]}… does not "
                    f"hash to that key (the file changed on disk); delete it and run again "
                    f"to rebuild it"
                )
        return texts

    def all_text_keys(self) -> list[str]:
        """Every stored text key (session contents and questions), unique, sorted."""
        return [str(row[0]) for row in self._query("SELECT key FROM texts ORDER BY key")]

    def __repr__(self) -> str:
        return (
            f"Corpus({self.dataset_name!r}, {len(self.pairs)} pairs, "
            f"{len(self.rejections)} rejections, path={str(self.path)!r})"
        )


#: The roles whose rendered sessions may split back into their turns (:func:`encode_turns`).
_SPLIT_ROLES = frozenset(("user", "assistant"))
_ROLE_ALTERNATIVES = "|".join(sorted(_SPLIT_ROLES))
_SPLIT_AT = re.compile(f"\n(?=(?:{_ROLE_ALTERNATIVES}): )")  # where a turn begins
_SPLIT_PREFIXES = tuple(f"{role}: " for role in sorted(_SPLIT_ROLES))
_MARKER = re.compile(f"\n(?:{_ROLE_ALTERNATIVES}): ")  # one scan: 2.5x faster than str.count


def encode_turns(text: str, turns: Sequence[tuple[str, str]]) -> str:
    """A text's turns as the ``turns`` table stores them.

    ``""`` for a session's :func:`.pairs.render_session` text (``turns`` a
    :class:`.pairs.SessionTurns`) whose roles are all user or assistant and whose text holds
    ``"\nuser: "`` and ``"\nassistant: "`` only where one turn ends and the next begins: such
    a text splits back into exactly its turns (:func:`decode_turns`), and that check is two
    scans of the text instead of a step per turn. Else JSON, one entry per turn, in order:
    ``[role, start, end]`` when the content is ``text[start:end]`` (found after the previous
    turn's, as :func:`.pairs.render_session` and LongMemEval's views join them: the contents
    are not stored twice), else ``[role, content]``."""
    # Each boundary is "\n" + a role + ": "; both markers start with the text's only "\n",
    # so their occurrences never overlap: one more than the boundaries is a content's own.
    if (isinstance(turns, SessionTurns) and text.startswith(("user: ", "assistant: "))
            and len(_MARKER.findall(text)) == len(turns) - 1
            and turns.roles_within(_SPLIT_ROLES)):
        return ""
    # The JSON written piece by piece (a role's encoding kept): the same text as
    # json.dumps(entries, ensure_ascii=False, separators=(",", ":")) at a third of its cost.
    entries: list[str] = []
    at = 0
    for role, content in turns:
        # "role: content", joined with "\n" (render_session); else searched for
        start = at + len(role) + (3 if entries else 2)
        if not text.startswith(content, start):
            start = text.find(content, at)
        if start < 0:
            entries.append(f"[{_json_str(role)},{_json_str(content)}]")
            continue
        at = start + len(content)
        entries.append(f"[{_json_str_kept(role)},{start},{at}]")
    return "[" + ",".join(entries) + "]"


def _json_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


_json_str_kept = lru_cache(maxsize=64)(_json_str)  # roles: "user", "assistant", ...


def decode_turns(text: str, stored: str) -> list[dict[str, str]]:
    """The turns :func:`encode_turns` stored for ``text``; ``ValueError`` when ``stored`` is
    not such an encoding (or its offsets lie outside ``text``)."""
    return [{"role": role, "content": content} for role, content in _turn_parts(text, stored)]


def decode_turn_texts(text: str, stored: str) -> list[str]:
    """:func:`decode_turns`'s turns, each rendered ``"role: content"`` as
    :func:`.pairs.render_session` renders one turn; the same checks."""
    if not stored:  # a rendered session's pieces are its turns' texts
        # every piece after the first begins with a role by the split's own lookahead:
        # the first alone is checked (what _split_turns checks of each, at a step a turn)
        if not text.startswith(_SPLIT_PREFIXES):
            raise ValueError("not a rendered session")
        return _SPLIT_AT.split(text)
    return [f"{role}: {content}" for role, content in _turn_parts(text, stored)]


def _split_turns(text: str) -> list[tuple[str, str, str]]:
    """A rendered session split where its turns meet: each piece, its role and content;
    ``ValueError`` when a piece is no ``user: ...`` or ``assistant: ...`` turn."""
    out: list[tuple[str, str, str]] = []
    for piece in _SPLIT_AT.split(text):
        role, sep, content = piece.partition(": ")
        if role not in _SPLIT_ROLES or not sep:
            raise ValueError("not a rendered session")
        out.append((piece, role, content))
    return out


def _turn_parts(text: str, stored: str) -> Iterator[tuple[str, str]]:
    """Each turn's (role, content), as :func:`encode_turns` stored them for ``text``."""
    if not stored:
        for _, role, content in _split_turns(text):
            yield role, content
        return
    entries = json.loads(stored)
    if not isinstance(entries, list):
        raise ValueError("not a list of turns")
    size = len(text)
    for entry in entries:
        if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
            raise ValueError("not a turn")
        if len(entry) == 2 and isinstance(entry[1], str):
            yield entry[0], entry[1]
            continue
        if (len(entry) != 3 or type(entry[1]) is not int or type(entry[2]) is not int
                or not 0 <= entry[1] <= entry[2] <= size):
            raise ValueError("a turn's offsets lie outside its text")
        yield entry[0], text[entry[1]:entry[2]]


def open_if_complete(
    path: Path, name: str | None, sha256: str | None, *, verify: bool = True,
    stamp: bool = True,
) -> Corpus | None:
    """Open ``path`` if it is a complete corpus (of this dataset, when ``sha256`` is given);
    None if it is absent, incomplete, from another format version or damaged. ``verify``
    also checks the whole file against its ``.sha256`` sidecar (a truncated or altered file
    is rebuilt, never trusted); ``stamp`` False writes no ``.verified`` stamp (read-only
    runs)."""
    if not path.is_file() or not _header_size_ok(path):
        return None
    if verify and not matches_sidecar(path, stamp=stamp):
        return None
    conn: sqlite3.Connection | None = None
    try:
        conn = _connect_ro(path)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if (
            meta.get("complete") != "1"
            or meta.get("format_version") != str(FORMAT_VERSION)
            or (sha256 is not None and meta.get("dataset_sha256") != sha256)
        ):
            return None
        conn.close()
        conn = None
        return Corpus(path, name)
    except (sqlite3.Error, KeyError, ValueError, TypeError, CacheError):
        return None
    finally:
        if conn is not None:
            conn.close()


def open_corpus(path: Path, dataset_name: str | None = None) -> Corpus:
    """Open a corpus file that :func:`load_corpus` built (how xdist workers attach).

    The dataset name defaults to the one recorded at build time. Raises :class:`CacheError`
    (one line) when the file is missing, incomplete or damaged; it is never rebuilt here. The
    whole-file checksum is not recomputed here: the controller checked it moments before.
    """
    corpus = open_if_complete(Path(path), dataset_name, None, verify=False)
    if corpus is None:
        raise CacheError(
            f"corpus file {path} is missing, incomplete or damaged; run again without it "
            f"(or delete it) so the controller rebuilds it from the dataset"
        )
    return corpus


def corpus_path(cache_dir: Path, sha256: str, view: View | None = None) -> Path:
    """Where the corpus of the dataset with this sha256 lives under ``cache_dir``; a view other
    than the default (:mod:`.protocol`) has its own file, ``<sha256>.<view>.sqlite``."""
    suffix = "" if view is None or view.is_default else f".{view.name}"
    return Path(cache_dir) / "corpus" / f"{sha256}{suffix}.sqlite"




def gold_source(corpus: Corpus) -> str:
    """The run's gold source: one for every usable pair, or ``mixed``."""
    sources = {p.gold_source for p in corpus.pairs if not p.abstention}
    return sources.pop() if len(sources) == 1 else "mixed"
