"""Output wrapped to the terminal's width, read back: :func:`join` undoes the wrapping of
``reporting.text_width.fit_lines`` (a line indented two spaces past the line it continues),
written without fit_lines' help so that the two cannot share a mistake; :func:`fits` says
whether a line is within a width; :func:`words` is what a narrow and a wide run must share."""

from __future__ import annotations

import re
from collections.abc import Sequence

#: A single space with no space either side: the only place fit_lines may cut a line.
BREAK = re.compile(r"(?<! ) (?! )")


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def join(lines: Sequence[str] | str) -> list[str]:
    """Undo the wrapping: a line indented two spaces past its first line's indent continues
    it (joined with one space). A string is split into its lines first."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    out: list[str] = []
    base = -1
    for line in lines:
        if out and base >= 0 and line.startswith(" " * (base + 2)) and \
                indent_of(line) == base + 2:
            out[-1] += " " + line[base + 2:]
        else:
            out.append(line)
            base = indent_of(line)
    return out


def fits(line: str, width: int) -> bool:
    """``line`` is within ``width``, or is an indent and one word that could not be cut."""
    return len(line) <= width or BREAK.search(line.lstrip(" ")) is None


def words(text: str) -> list[str]:
    """The words of an output, whatever its line breaks and indents."""
    return text.split()


def unwrap(text: str) -> str:
    """An output with its wrapped lines joined again (:func:`join`), one per line: what
    tests that read a summary's content parse, whatever the terminal's width."""
    return "".join(line + "\n" for line in join(text))
