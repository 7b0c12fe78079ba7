"""Fitting lines and fields to a terminal width: a line too long continues on lines indented
two spaces past its own indent, fields break only between themselves, and nothing is ever cut
mid-word (a word longer than the room is left whole)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence

#: Stands in for each space of a run of two or more while a line is wrapped, so that a break
#: falls only at a single space and the run survives intact (never a character of our text).
_HELD_SPACE = "\x00"


def fit_lines(lines: Iterable[str], width: int | None, *,
              hang: int | None = None) -> list[str]:
    """``lines`` cut at single spaces to at most ``width`` columns each (``None``: unchanged).

    A line that fits is kept as it is. A longer one continues on lines indented two spaces
    past its own leading indent (``hang``: that many spaces instead, for rows whose own
    indent varies with a right-aligned number); runs of two or more spaces inside it are
    kept (never a break point), and a word longer than the room is left whole rather than
    split, so joining each continuation to the line before with one space gives the
    original back.
    """
    out: list[str] = []
    for line in lines:
        if width is None or len(line) <= width:
            out.append(line)
            continue
        body = line.lstrip(" ")
        indent = line[:len(line) - len(body)]
        held = re.sub(r" {2,}", lambda m: _HELD_SPACE * len(m.group()), body)
        further = indent + "  " if hang is None else " " * hang
        wrapped = textwrap.wrap(held, width=max(width, len(indent) + 3, len(further) + 3),
                                initial_indent=indent, subsequent_indent=further,
                                break_long_words=False, break_on_hyphens=False,
                                expand_tabs=False, replace_whitespace=False)
        out.extend(w.replace(_HELD_SPACE, " ") for w in wrapped or [line])
    return out


def fit_fields(fields: Sequence[str], width: int | None, sep: str = "  ") -> list[str]:
    """``fields`` joined by ``sep`` on one line; where that is wider than ``width``, broken
    only between fields (a field such as ``dim 384`` stays together), each continuation
    indented two spaces. A field wider than a whole line is cut at its own spaces
    (:func:`fit_lines`)."""
    whole = sep.join(fields)
    if width is None or len(whole) <= width:
        return [whole]
    rows: list[str] = []
    for field in fields:
        indent = "  " if rows else ""
        if rows and len(rows[-1] + sep + field) <= width:
            rows[-1] += sep + field
        else:
            rows.append(indent + field)
    return fit_lines(rows, width)
