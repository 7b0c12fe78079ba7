"""Files that open with a magic, a uint32 length and a JSON header (the kept turn rows'
and turn blocks' files): the one reader of that opening."""

from __future__ import annotations

import json
from typing import IO, Any

__all__ = ["read_header"]


def read_header(handle: IO[bytes], magic: bytes, limit: int | None = None
                ) -> dict[str, Any] | None:
    """The JSON object after ``magic`` and its little-endian uint32 length, ``handle`` left
    just past it; None when the file does not open with ``magic``, the header is longer
    than ``limit`` bytes or is not an object. Raises ``ValueError`` (``UnicodeError``) for
    a header that is not JSON text, ``OSError`` for a read that fails."""
    head = handle.read(len(magic) + 4)
    if len(head) != len(magic) + 4 or not head.startswith(magic):
        return None
    size = int.from_bytes(head[len(magic):], "little")
    if limit is not None and size > limit:
        return None
    header = json.loads(handle.read(size).decode("utf-8"))
    return header if isinstance(header, dict) else None
