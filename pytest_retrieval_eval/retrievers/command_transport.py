"""A ``cmd:`` store's requests as bytes, and the clock that keeps the store's time apart from
the plugin's (issue 37 item 1).

**Encoding.** Vectors go as JSON arrays of the float32 values written as doubles, exactly (the
default), or, when hello's answer says ``"vector_encoding": "base64-f32le"``, as one base64
string of the little-endian float32 bytes (the store decodes it to the very same values). A
request is joined from pre-encoded parts: each vector row is encoded once and kept in a
bounded memo keyed by its bytes (sessions recur across LongMemEval histories, so most rows of
a later persona were encoded for an earlier one), and the rest of the request goes through
``json.dumps`` without the float lists.

**The clock.** A request's *store* time runs from the moment its last byte is written to the
first byte of its answer (summed over the request's exchanges, when the store asks to embed
texts in between). The first is read when the write that carries the last byte begins (a
write that wakes the store may return only after the store has run, even answered), the
second when the plugin wakes to the answer. So it holds the store reading what is left in
the pipe (at most its capacity, 64 KB on Linux: the rest it read while the plugin wrote) and
both processes' wake-ups. Everything else the plugin spends on the request (building and
encoding it, writing it, reading and decoding the answer, checking it) is the store's
*transport*, reported apart (:class:`Clock`). The embed answers' time is neither: the plugin
reports it as ``latency_ms.store_embedding``.
"""

from __future__ import annotations

import base64
import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import RetrieverError

__all__ = ["BASE64_F32LE", "JSON_ARRAYS", "VECTOR_ENCODINGS", "Clock", "VectorCodec",
           "encode_line", "join_index_line"]

JSON_ARRAYS = "json"
BASE64_F32LE = "base64-f32le"
#: The vector encodings a store may ask for in hello (the first is the default).
VECTOR_ENCODINGS = (JSON_ARRAYS, BASE64_F32LE)
#: Bytes of encoded rows the memo keeps (the oldest go first).
MEMO_BYTES = 32 * 1024 * 1024


@dataclass
class Clock:
    """Milliseconds of one command, summed since it started: ``store_ms`` (last byte written
    to first byte of the answer), ``transport_ms`` (the plugin's side of ``index`` and
    ``rank``: building, encoding, writing, reading, decoding, checking), ``embed_ms`` (the
    embed requests answered), and the start-up's ``spawn_ms`` and ``hello_ms``."""

    store_ms: float = 0.0
    transport_ms: float = 0.0
    embed_ms: float = 0.0
    spawn_ms: float | None = None
    hello_ms: float | None = None

    def charge(self, wall_ms: float, store_before: float, embed_before: float) -> None:
        """A call of ``wall_ms`` in all: what was neither the store's nor embedding is
        transport."""
        store = self.store_ms - store_before
        embedded = self.embed_ms - embed_before
        self.transport_ms += max(0.0, wall_ms - store - embedded)


class VectorCodec:
    """Vectors as the JSON text a request carries, in the store's chosen encoding; each row
    encoded once while the memo keeps it (bounded by :data:`MEMO_BYTES`)."""

    def __init__(self, encoding: str = JSON_ARRAYS, memo_bytes: int = MEMO_BYTES) -> None:
        if encoding not in VECTOR_ENCODINGS:
            raise ValueError(f"unknown vector encoding {encoding!r}")
        self.encoding = encoding
        self._memo: OrderedDict[bytes, bytes] = OrderedDict()
        self._memo_bytes = memo_bytes
        self._held = 0

    def row(self, vector: Any) -> bytes:
        """One vector's JSON text: ``[0.1, ...]`` (float32 values as exact doubles) or a
        base64 string of its little-endian float32 bytes."""
        values = np.ascontiguousarray(vector, dtype="<f4").reshape(-1)
        raw = values.tobytes()
        if self.encoding == BASE64_F32LE:
            if not np.isfinite(values).all():  # JSON's refusal, kept for every encoding
                raise ValueError("Out of range float values are not JSON compliant")
            return b'"' + base64.b64encode(raw) + b'"'
        got = self._memo.get(raw)
        if got is not None:
            self._memo.move_to_end(raw)
            return got
        values = np.frombuffer(raw, dtype="<f4").astype(np.float64).tolist()
        got = json.dumps(values, allow_nan=False).encode()
        self._memo[raw] = got
        self._held += len(raw) + len(got)
        while self._held > self._memo_bytes and self._memo:
            old, text = self._memo.popitem(last=False)
            self._held -= len(old) + len(text)
        return got

    def rows(self, vectors: Iterable[Any]) -> list[bytes]:
        return [self.row(v) for v in vectors]

    def decode(self, value: object) -> np.ndarray | None:
        """A vector a store sent in this encoding (its own embed answers are never vectors;
        kept for the tests' round trip): None when it is not one."""
        if self.encoding == BASE64_F32LE:
            if not isinstance(value, str):
                return None
            try:
                raw = base64.b64decode(value, validate=True)
            except ValueError:
                return None
            if len(raw) % 4:
                return None
            return np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if not isinstance(value, list):
            return None
        return np.asarray(value, dtype=np.float32)


def _dumps(value: Mapping[str, Any]) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    except ValueError as exc:
        raise RetrieverError(f"cannot be sent as JSON ({exc})") from None


def encode_line(request: Mapping[str, Any], vector: bytes | None = None,
                key: str = "vector") -> bytes:
    """One request line: ``request`` as JSON with ``key`` (a pre-encoded JSON value) last."""
    body = _dumps(request)
    if vector is None:
        return body + b"\n"
    return body[:-1] + (b', "' if len(body) > 2 else b'"') + key.encode() + b'": ' + vector \
        + b"}\n"


def join_index_line(head: Mapping[str, Any], sessions: list[dict[str, Any]],
                    vectors: list[bytes] | None) -> bytes:
    """An index request, ``head`` then ``"sessions": [...]``, each session's ``"vector"``
    (pre-encoded) last in it."""
    parts = [encode_line(s, None if vectors is None else vectors[i])[:-1]
             for i, s in enumerate(sessions)]
    body = _dumps(head)
    return body[:-1] + b', "sessions": [' + b", ".join(parts) + b"]}\n"


def encode_vectors_reply(codec: VectorCodec, reply: Mapping[str, Any]) -> bytes:
    """An embed answer: ``{"vectors": [...]}`` in the store's encoding, or an error line."""
    vectors = reply.get("vectors")
    if vectors is None:
        return _dumps(reply) + b"\n"
    return b'{"vectors": [' + b", ".join(codec.rows(vectors)) + b"]}\n"
