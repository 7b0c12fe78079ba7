"""A LongMemEval file streamed: the top-level JSON array read one instance at a time.

:func:`iter_instances` streams with ``ijson`` (C backend when available), holding one instance
in memory at a time. Before the parser sees a byte, the head is checked (gzip, UTF-16 or
UTF-32, a BOM, a web page, not an array) and the nesting depth is bounded as the bytes go by;
every file-level fault becomes a one-line :class:`~pytest_retrieval_eval.errors.DataError` naming
the file, the fault (with its byte offset) and the fix. Items that are not objects are
yielded unchanged: :func:`.pairs.parse_instance` rejects them one by one.

A ``\\uD800``-``\\uDFFF`` escape that is not half of a valid surrogate pair (a high half
followed at once by a low half) is refused in one line naming its byte offset in the file,
before the parser sees it: such text is no Unicode (it cannot be written as UTF-8), and the
parsers disagree on it (Python's ``json`` keeps it, ijson's C backend turns ``\\ud800``
into ``?``, pairs ``\\ud800\\ud800`` into U+10000, fails on ``\\udfff``). One rule, and
never a silent change.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError, one_line
from .dataset import check_readable_file
from .pairs import DuplicateKeys

__all__ = ["MAX_DEPTH", "READ_BUFFER", "SCHEMA_DEPTH", "iter_instances"]

#: Bytes handed to the JSON parser per read; large reads keep the C parser busy.
READ_BUFFER = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF32_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")
_UTF8_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"
#: LongMemEval nests 5 levels (array > instance > sessions > session > turn); anything nested
#: deeper than this is refused before the parser sees it (its memory grows with the square of
#: the depth: 1 GB at depth 20,000).
MAX_DEPTH = 64
#: What LongMemEval's own schema needs (named in the refusal).
SCHEMA_DEPTH = 5



def _ijson() -> Any:
    """The fastest ijson backend available (yajl2_c, else the default)."""
    import ijson

    try:
        return ijson.get_backend("yajl2_c")
    except Exception:  # pragma: no cover - depends on the installed wheel
        return ijson


def _first_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(4096)


def _invalid_utf8_offset(path: Path, approx_end: int) -> int | None:
    """Byte offset of the first invalid UTF-8 sequence in the window before ``approx_end``."""
    start = max(0, approx_end - READ_BUFFER - 8)
    with open(path, "rb") as f:
        f.seek(start)
        window = f.read(approx_end - start + 8)
    pos = 0
    while pos < len(window):
        try:
            window[pos:].decode("utf-8")
            return None
        except UnicodeDecodeError as exc:
            bad = pos + exc.start
            if start > 0 and bad < 4:  # a character split by the window start
                pos = bad + 1
                continue
            if exc.reason == "unexpected end of data" and bad >= len(window) - 4:
                return None
            return start + bad
    return None


def _wide_encoding(head: bytes) -> str | None:
    """The UTF-16 or UTF-32 the head looks like (by its BOM, else by where the zero bytes of
    ASCII text sit, RFC 8259 section 8.1's JSON starts with ASCII), or None: no zero byte in
    the first four, as UTF-8 JSON has none."""
    if head.startswith(_UTF32_BOMS):  # before UTF-16: ff fe 00 00 starts with ff fe
        return "UTF-32"
    if head.startswith(_UTF16_BOMS):
        return "UTF-16"
    first = head[:4]
    if len(first) < 2 or b"\x00" not in first:
        return None
    if len(first) == 4 and first.count(b"\x00") == 3 and (first[0] or first[3]):
        return "UTF-32"  # x 00 00 00 (little-endian) or 00 00 00 x (big-endian)
    return "UTF-16"


def _check_head(path: Path) -> int:
    """Check the start of the file; return how many leading bytes to skip (a UTF-8 BOM)."""
    head = _first_bytes(path)
    if not head:
        raise DataError(
            f"dataset file {path} is empty (0 bytes); download it again or pass another file"
        )
    if head.startswith(_GZIP_MAGIC):
        if path.suffix == ".gz":
            plain = path.stem if path.stem.endswith(".json") else f"{path.stem}.json"
        else:  # never suggest writing over the input itself
            plain = f"{path.stem or path.name}.unpacked.json"
        raise DataError(
            f"dataset file {path} is gzip-compressed; gunzip it first "
            f"(gunzip -c {path.name} > {plain}) and pass the unpacked file"
        )
    if head.startswith(b"PK\x03\x04"):
        raise DataError(f"dataset file {path} is a zip archive, not JSON; unzip it first")
    wide = _wide_encoding(head)
    if wide is not None:
        raise DataError(
            f"dataset file {path} is not UTF-8 (it looks like {wide}); re-save it as UTF-8 JSON"
        )
    skip = len(_UTF8_BOM) if head.startswith(_UTF8_BOM) else 0
    body = head[skip:].lstrip(_WHITESPACE)
    if not body:
        if len(head) < 4096:
            raise DataError(
                f"dataset file {path} is empty (only whitespace); download it "
                f"again or pass another file"
            )
        return skip  # a very long run of whitespace: let the parser decide
    first = body[:1]
    if first == b"[":
        return skip
    if first == b"{":
        raise DataError(
            f"dataset file {path} has a JSON object at the top level, not an array of "
            f"instances (JSON Lines or a wrapper object?); pass a LongMemEval file, which is "
            f"one JSON array"
        )
    if first in b'"-0123456789' or body.startswith((b"true", b"false", b"null")):
        raise DataError(
            f"dataset file {path} holds a single JSON value, not an array of "
            f"instances; pass a LongMemEval file, which is one JSON array"
        )
    raise DataError(
        f"dataset file {path} is not JSON (it starts with {body[:20]!r}); pass a "
        f"LongMemEval JSON file"
    )


def _ends_with_bracket(path: Path, size: int) -> bool:
    """Whether the file's last non-whitespace byte is ``]`` (a complete top-level array).

    A parse error in a file that does not end so is reported as truncation: a download cut
    mid-way can end inside a number, a literal or a multi-byte character, which the parser
    reports as a lexical error rather than a premature end.
    """
    with open(path, "rb") as f:
        f.seek(max(0, size - 4096))
        tail = f.read()
    return tail.rstrip(_WHITESPACE).endswith(b"]")


def _parse_error(path: Path, exc: Exception, position: int) -> DataError:
    message = str(exc)
    if message.startswith(("b'", 'b"')):  # yajl2_c sometimes reports bytes
        message = message[2:]
    lines = message.replace("\\n", "\n").splitlines() if message else []
    first_line = lines[0].strip() if lines else ""
    # The reader sees the file a buffer at a time: the fault lies in the last buffer read.
    where = f"in bytes {max(0, position - READ_BUFFER)}-{position}"
    # yajl quotes the text around the fault on its next line ("...[{"a" 1}]...").
    context = next((line.strip() for line in lines[1:] if line.strip()
                    and "(right here)" not in line), "")
    around = f"; around {one_line(context, 60)!r}" if context else ""
    size = path.stat().st_size
    if "premature EOF" in first_line or (
        "trailing garbage" not in first_line and not _ends_with_bracket(path, size)
    ):
        return DataError(
            f"dataset file {path} ends early at byte {size} (truncated, e.g. an interrupted "
            f"download); download it again"
        )
    if "UTF8" in first_line or "UTF-8" in first_line:
        offset = _invalid_utf8_offset(path, position)
        at = f"at byte {offset}" if offset is not None else where
        return DataError(
            f"dataset file {path} is not valid UTF-8 ({at}); re-save it as UTF-8 JSON"
        )
    if "integer overflow" in first_line:
        return DataError(
            f"dataset file {path} holds an integer beyond 64 bits ({where}{around}), which "
            f"the streaming JSON reader cannot read; fix that value (LongMemEval has none)"
        )
    if "trailing garbage" in first_line:
        return DataError(
            f"dataset file {path} is not valid JSON: data follows the top-level array "
            f"({where}); pass a file holding exactly one JSON array"
        )
    return DataError(
        f"dataset file {path} is not valid JSON {where} "
        f"({one_line(first_line, 80)}{around}); download it again or fix the file"
    )


class _TooDeep(Exception):
    """Internal: the bytes about to be parsed nest deeper than :data:`MAX_DEPTH`."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


_QUOTE, _BACKSLASH, _LETTER_U, _LETTER_D = ord('"'), ord("\\"), ord("u"), ord("d")
_OPEN_ARRAY, _CLOSE_ARRAY, _OPEN_OBJECT, _CLOSE_OBJECT = (ord(c) for c in "[]{}")


class _LoneSurrogate(Exception):
    """Internal: a ``\\uD800``-``\\uDFFF`` escape that is not half of a valid pair."""

    def __init__(self, offset: int, escape: str) -> None:
        super().__init__(offset, escape)
        self.offset = offset
        self.escape = escape


#: A run of backslashes, then ``u`` and a surrogate code unit (D800-DFFF).
_SURROGATE_RE = re.compile(rb"(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")
_LOW_RE = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_PAIR_RE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")
#: Bytes a judgement may need past an escape's backslash: itself and a following low half.
_PAIR_BYTES = 12


class _SurrogateGuard:
    """Finds the first lone surrogate escape in the bytes handed to the parser, chunk by chunk,
    before the parser sees them (:class:`_LoneSurrogate`, with its file offset). Each chunk
    comes with the :data:`_PAIR_BYTES` bytes after it (``ahead``), so an escape or a pair split
    between chunks is judged whole."""

    def __init__(self, start: int) -> None:
        self.offset = start  # file offset of the next chunk
        self.backslashes_before = 0  # backslashes right before the next chunk
        self.paired_low = -1  # file offset of a low half already paired with its high half

    def feed(self, chunk: bytes, ahead: bytes) -> None:
        if b"\\" in chunk:
            buf = chunk + ahead
            if b"\\u" in buf:
                if self._all_paired(buf):
                    self._note_split_pair(buf, len(chunk))
                else:
                    self._judge(buf, len(chunk))
            run = len(chunk) - len(chunk.rstrip(b"\\"))
            self.backslashes_before = (self.backslashes_before + run if run == len(chunk)
                                       else run)
        else:
            self.backslashes_before = 0
        self.offset += len(chunk)

    def _all_paired(self, buf: bytes) -> bool:
        """True when every surrogate escape of ``buf`` is a real escape (one backslash before
        it) in a valid pair: a few vectorised passes, ~1 ms a MiB. False sends ``buf`` to the
        exact, escape-by-escape :meth:`_judge`."""
        data = np.frombuffer(buf, dtype=np.uint8)
        starts = np.flatnonzero((data[:-1] == _BACKSLASH) & (data[1:] == _LETTER_U))
        if not len(starts):
            return True
        if int(starts[-1]) + 6 > len(buf):
            return False  # an escape cut by the end of the file: judged exactly
        kind = data[starts + 2] | 0x20
        unit = data[starts + 3] | 0x20
        surrogate = (kind == _LETTER_D) & (((unit >= 0x38) & (unit <= 0x39))
                                           | ((unit >= 0x61) & (unit <= 0x66)))
        found = starts[surrogate]
        if not len(found):
            return True
        if (data[found[found > 0] - 1] == _BACKSLASH).any():
            return False  # a backslash run before one: its parity decides
        if found[0] == 0 and self.backslashes_before:
            return False
        # Escapes are 6 bytes and never overlap, so valid pairs alternate high, low in
        # ``found``, each low 6 bytes after its high.
        if len(found) % 2:
            return False
        high = (data[found + 3] | 0x20) <= 0x62  # 8, 9, a, b
        return bool(high[0::2].all() and not high[1::2].any()
                    and (found[1::2] - found[0::2] == 6).all())

    def _note_split_pair(self, buf: bytes, end: int) -> None:
        """Remember the low half of a pair whose high half ends this chunk."""
        for start in range(max(0, end - 6), end):
            if _PAIR_RE.match(buf, start):
                self.paired_low = self.offset + start + 6

    def _judge(self, buf: bytes, end: int) -> None:
        for match in _SURROGATE_RE.finditer(buf):
            escape = match.end(1) - 1  # the backslash of this \\u
            if escape >= end:
                break
            run = len(match.group(1)) + (self.backslashes_before if match.start() == 0 else 0)
            if run % 2 == 0 or self.offset + escape == self.paired_low:
                continue  # a literal backslash before 'u', or a low half already paired
            unit = int(match.group(2), 16)
            if unit < 0xDC00 and _LOW_RE.match(buf, escape + 6):
                self.paired_low = self.offset + escape + 6
                continue
            raise _LoneSurrogate(self.offset + escape, buf[escape:escape + 6].decode("ascii"))


class _NestingGuard:
    """The dataset file as the JSON parser reads it, with the nesting depth tracked on every
    chunk *before* the parser sees it (vectorised: a few numpy passes per MiB).

    Brackets inside strings do not count: a quote is a string's start or end unless an odd
    run of backslashes precedes it (JSON's only escape of a quote); the string state, the
    depth and a trailing backslash run carry over from one chunk to the next. For valid JSON
    this is exactly the parser's depth; at the first invalid byte the parser stops anyway.
    Raises :class:`_TooDeep` from ``read`` when the depth would pass ``limit``.
    """

    def __init__(self, f: Any, start: int, limit: int = MAX_DEPTH) -> None:
        self.f = f
        self.offset = start
        self.limit = limit
        self.depth = 0
        self.in_string = False
        self.trailing_backslashes = 0
        self.surrogates = _SurrogateGuard(start)
        self.ahead = b""  # bytes read past the last chunk, for the surrogate check

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            chunk: bytes = self.ahead + self.f.read()
            self.ahead = b""
        else:
            want = size + _PAIR_BYTES - len(self.ahead)
            data = self.ahead + (self.f.read(want) if want > 0 else b"")
            chunk, self.ahead = data[:size], data[size:]
        if chunk:
            self._scan(chunk)
            self.surrogates.feed(chunk, self.ahead)
        return chunk

    def tell(self) -> int:
        return int(self.f.tell()) - len(self.ahead)

    def _scan(self, chunk: bytes) -> None:
        data = np.frombuffer(chunk, dtype=np.uint8)
        quotes = np.flatnonzero(data == _QUOTE)
        if len(quotes) and quotes[0] == 0 and self.trailing_backslashes % 2 == 1:
            quotes = quotes[1:]  # escaped by the backslashes that ended the last chunk
        if len(quotes):
            slashes = np.flatnonzero(data == _BACKSLASH)
            if len(slashes):
                # Each backslash's run start (runs of consecutive backslashes).
                breaks = np.flatnonzero(np.diff(slashes) != 1) + 1
                starts = np.zeros(len(slashes), dtype=np.int64)
                starts[breaks] = slashes[breaks]
                starts[0] = slashes[0]
                starts = np.maximum.accumulate(starts)
                after_slash = quotes[(quotes > 0)]
                after_slash = after_slash[data[after_slash - 1] == _BACKSLASH]
                if len(after_slash):
                    at = np.searchsorted(slashes, after_slash - 1)
                    runs = after_slash - starts[at]
                    runs += np.where(starts[at] == 0, self.trailing_backslashes, 0)
                    quotes = np.setdiff1d(quotes, after_slash[runs % 2 == 1],
                                          assume_unique=True)
        mask = data == _OPEN_ARRAY
        mask |= data == _CLOSE_ARRAY
        mask |= data == _OPEN_OBJECT
        mask |= data == _CLOSE_OBJECT
        brackets = np.flatnonzero(mask)
        if len(brackets):
            before = np.searchsorted(quotes, brackets)  # string boundaries before each
            outside = (before + int(self.in_string)) % 2 == 0
            brackets = brackets[outside]
            kinds = data[brackets]
            steps = np.where((kinds == _OPEN_ARRAY) | (kinds == _OPEN_OBJECT), 1, -1)
            depths = self.depth + np.cumsum(steps, dtype=np.int64)
            if len(depths):
                if int(depths.max()) > self.limit:
                    raise _TooDeep(self.offset + int(brackets[np.argmax(depths > self.limit)]))
                self.depth = int(depths[-1])
        if len(quotes) % 2:
            self.in_string = not self.in_string
        tail = len(chunk) - len(chunk.rstrip(b"\\"))
        self.trailing_backslashes = (
            self.trailing_backslashes + tail if tail == len(chunk) else tail)
        self.offset += len(chunk)


class _JsonObject(dict[str, Any]):
    """The mapping type the parser builds objects with: a dict that keeps the keys it saw
    twice (plain JSON parsing keeps the last value silently), and counts them in ``pending``
    (shared by one reader: the parser builds a whole buffer of items before the first is
    handed out, so the count says which items to look through, not which one holds it)."""

    __slots__ = ("repeated",)
    repeated: list[str]
    pending: list[int]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self:
            try:
                self.repeated.append(key)
            except AttributeError:
                self.repeated = [key]
            self.pending[0] += 1
        dict.__setitem__(self, key, value)


def _object_type() -> type[_JsonObject]:
    """A :class:`_JsonObject` type with its own ``pending`` count (one per reader)."""
    return type("JsonObject", (_JsonObject,), {"__slots__": (), "pending": [0]})


def _repeated_keys(item: object) -> list[str]:
    """Every key some object inside ``item`` repeated, in document order."""
    found: list[str] = []
    stack = [item]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            found.extend(getattr(value, "repeated", ()))
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return found


def iter_instances(path: Path) -> Iterator[tuple[int, object]]:
    """Yield ``(index, item)`` for each element of the file's top-level JSON array.

    Streams with ``ijson.items(f, "item")``: one instance is in memory at a time. Numbers
    that are not integers come back as ``float``. File-level faults (missing, empty, gzip,
    not UTF-8, not JSON, top level not an array, truncated, nested deeper than
    :data:`MAX_DEPTH`) raise a one-line :class:`DataError`. An item holding an object with a
    repeated key is yielded as :class:`pairs.DuplicateKeys` (the pair is rejected, naming the
    key), never with one of the values silently dropped.
    """
    path = Path(path)
    check_readable_file(path, "dataset file")
    skip = _check_head(path)
    backend = _ijson()
    index = 0
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed in finally; generator owns it
    except OSError as exc:
        raise DataError(
            f"dataset file {path} cannot be read ({exc.strerror}); pass an existing, readable file"
        ) from None
    object_type = _object_type()
    try:
        if skip:
            f.seek(skip)
        guard = _NestingGuard(f, skip)
        items = backend.items(guard, "item", use_float=True, buf_size=READ_BUFFER,
                              map_type=object_type)
        while True:
            try:
                item = next(items)
            except StopIteration:
                break
            except _TooDeep as deep:
                raise DataError(
                    f"dataset file {path} nests JSON more than {MAX_DEPTH} levels deep (at "
                    f"byte {deep.offset}; LongMemEval needs {SCHEMA_DEPTH}); pass a "
                    f"LongMemEval file"
                ) from None
            except _LoneSurrogate as lone:
                raise DataError(
                    f"dataset file {path} holds a lone surrogate escape {lone.escape} at byte "
                    f"{lone.offset} (half of a UTF-16 pair, which is no Unicode text and "
                    f"JSON readers change differently); fix or remove that escape"
                ) from None
            except Exception as exc:
                if type(exc).__module__.startswith("ijson") or isinstance(exc, ValueError):
                    raise _parse_error(path, exc, guard.tell()) from None
                raise
            if object_type.pending[0]:  # some item of this buffer repeats a key
                repeated = _repeated_keys(item)
                if repeated:
                    object_type.pending[0] -= len(repeated)
                    item = DuplicateKeys(item, tuple(dict.fromkeys(repeated)))
            yield index, item
            index += 1
    except OSError as exc:
        raise DataError(
            f"dataset file {path} could not be read at byte {f.tell()} "
            f"({exc.strerror}); check the disk and try again"
        ) from None
    finally:
        f.close()
