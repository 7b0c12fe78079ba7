"""A text handed to the run's model (issue 43.7): ``persona.embed`` and a ``cmd:`` store's
embed op read their texts here, one way.

Texts are a list (or any sequence, not a string) of ``str``, each encodable as UTF-8. A lone
``str`` is refused (it would be embedded once per character, and those vectors cached), as
are ``bytes``, a mapping, and any item that is not a ``str`` (an int, None, bytes) or holds a
lone surrogate (``"\\ud800"``, which JSON can carry and no tokenizer can read): one line
naming the first, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import one_line

__all__ = ["text_problem", "texts_problem"]


def text_problem(text: object) -> str | None:
    """Why ``text`` is no text to embed, or None."""
    if type(text) is not str:
        return f"{one_line(repr(text), 40)} is {type(text).__name__}, not a str"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{one_line(ascii(text), 40)} holds a lone surrogate, not UTF-8 text"
    return None


def texts_problem(texts: object) -> str | None:
    """Why ``texts`` is no list of texts to embed, or None (see the module)."""
    if isinstance(texts, (str, bytes, bytearray)):
        return (f"got one {type(texts).__name__} ({one_line(repr(texts), 40)}), not a list of "
                "texts; wrap it: [text]")
    if isinstance(texts, Mapping) or not isinstance(texts, Iterable):
        return f"got {type(texts).__name__}, not a list of texts"
    for i, text in enumerate(texts):
        problem = text_problem(text)
        if problem is not None:
            return f"text {i}: {problem}"
    return None
