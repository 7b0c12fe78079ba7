"""A ``cmd:`` store's requests as bytes (retrievers/command_transport.py): the JSON path
writes exactly what ``json.dumps`` of the request wrote before (float32 values as exact
doubles), base64-f32le carries the same float32 values, the row memo is bounded, NaN is
refused, and the clock leaves the store's and embedding's time out of transport."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.retrievers.command_transport import (
    BASE64_F32LE,
    Clock,
    VectorCodec,
    encode_line,
    join_index_line,
)


def vectors(n: int = 4, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def reference_index(key: str, sessions: list[dict[str, Any]], v: np.ndarray) -> bytes:
    """The request as the plugin wrote it before issue 37: one json.dumps of it all."""
    whole = [{**s, "vector": [float(x) for x in row.tolist()]}
             for s, row in zip(sessions, v, strict=True)]
    return (json.dumps({"op": "index", "persona": key, "sessions": whole},
                       ensure_ascii=False, allow_nan=False) + "\n").encode()


SESSIONS = [{"id": f"s{i}", "text": f"user: café {i}\nassistant: ok", "created_at": "",
             "turns": [{"role": "user", "content": f"café {i}"}]} for i in range(4)]


def test_the_json_path_writes_the_bytes_one_dumps_wrote() -> None:
    v = vectors()
    codec = VectorCodec()
    line = join_index_line({"op": "index", "persona": "p1"}, SESSIONS, codec.rows(v))
    assert line == reference_index("p1", SESSIONS, v)
    again = join_index_line({"op": "index", "persona": "p1"}, SESSIONS, codec.rows(v))
    assert again == line  # from the memo, the same bytes
    rank = {"op": "rank", "persona": "p1", "question_id": "q", "limit": 3}
    assert encode_line(rank, codec.row(v[0])) == (json.dumps(
        {**rank, "vector": [float(x) for x in v[0].tolist()]}) + "\n").encode()
    assert encode_line({}, b"[1.0]") == b'{"vector": [1.0]}\n'
    assert encode_line({"op": "hello"}) == b'{"op": "hello"}\n'


def test_base64_f32le_round_trips_every_float32_value() -> None:
    v = vectors(3, 384)
    v[0, :4] = [0.0, -0.0, np.float32(1e-45), np.finfo(np.float32).max]  # edges
    codec = VectorCodec(BASE64_F32LE)
    for row in v:
        text = json.loads(codec.row(row))
        assert isinstance(text, str)
        raw = base64.b64decode(text)  # decoded independently: struct, little-endian
        assert raw == row.astype("<f4").tobytes()
        got = np.array(struct.unpack(f"<{len(raw) // 4}f", raw), dtype=np.float32)
        assert np.array_equal(got.view(np.uint32), row.view(np.uint32))
        decoded = codec.decode(text)
        assert decoded is not None and np.array_equal(decoded.view(np.uint32),
                                                      row.view(np.uint32))
    assert codec.decode("not base64!") is None and codec.decode([1.0]) is None


def test_nan_is_refused_in_every_encoding() -> None:
    bad = np.array([1.0, np.nan], dtype=np.float32)
    for codec in (VectorCodec(), VectorCodec(BASE64_F32LE)):
        with pytest.raises(ValueError):
            codec.row(bad)
    with pytest.raises(ValueError):
        VectorCodec("json-ish")


def test_the_memo_is_bounded() -> None:
    codec = VectorCodec(memo_bytes=10_000)
    for seed in range(50):
        codec.rows(vectors(4, 8, seed))
    assert 0 < codec._held <= 10_000 and len(codec._memo) < 200


def test_the_clock_charges_transport_what_is_neither_the_stores_nor_embedding() -> None:
    clock = Clock()
    store, embed = clock.store_ms, clock.embed_ms
    clock.store_ms += 7.0
    clock.embed_ms += 2.0
    clock.charge(10.0, store, embed)
    assert clock.transport_ms == pytest.approx(1.0)
    clock.charge(0.5, clock.store_ms, clock.embed_ms)
    assert clock.transport_ms == pytest.approx(1.5)
