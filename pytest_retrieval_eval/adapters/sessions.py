"""A persona's sessions as the documents a library is handed: one per session, the session's
memory text (each turn ``role: content``, joined by newlines, as ``data.pairs.render_session``
renders it), with each turn's character span, so that a chunk's provenance is the turns its
characters cover."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..retrievers.base import Memory, Persona

__all__ = ["SessionDocument", "session_documents", "until_covered"]


@dataclass(frozen=True)
class SessionDocument:
    """One session: ``text``, and per turn (1-based ``n``) the span ``[start, end)`` of its
    line in ``text``."""

    session_id: str
    date: str
    text: str
    spans: tuple[tuple[int, int], ...]

    def turns(self, start: int, end: int) -> tuple[str, ...]:
        """The turn ids (``<session_id>_<n>``) whose lines share a character with
        ``text[start:end]``, in order; a chunk of separators only (none in practice: the
        splitters strip them) covers the turn it begins in."""
        got = tuple(f"{self.session_id}_{n}" for n, (a, b) in enumerate(self.spans, start=1)
                    if a < end and start < b)
        if got or not self.spans:
            return got
        before = [n for n, (a, _) in enumerate(self.spans, start=1) if a <= start]
        return (f"{self.session_id}_{before[-1] if before else 1}",)


def _document(session_id: str, date: str,
              turns: Sequence[object]) -> SessionDocument:
    lines: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    for turn in turns:
        line = f"{turn['role']}: {turn['content']}"  # type: ignore[index]
        spans.append((at, at + len(line)))
        lines.append(line)
        at += len(line) + 1  # the newline
    return SessionDocument(session_id, date, "\n".join(lines), tuple(spans))


def session_documents(persona: Persona) -> list[SessionDocument]:
    """The persona's sessions in store order (their history's order), each a document."""
    dates = persona.created_at or ("",) * len(persona.session_ids)
    return [_document(sid, date, turns)
            for sid, date, turns in zip(persona.session_ids, dates, persona.turns, strict=True)]


def until_covered(memories: Sequence[Memory], limit: int) -> list[Memory]:
    """The first memories, best first, until they cover ``limit`` distinct sessions and
    number at least ``limit`` (or run out): what the harness reads of a memory ranking
    (docs/memories.md)."""
    out: list[Memory] = []
    seen: set[str] = set()
    for memory in memories:
        if len(seen) >= limit and len(out) >= limit:
            break
        out.append(memory)
        seen.update(memory.sessions)
    return out
