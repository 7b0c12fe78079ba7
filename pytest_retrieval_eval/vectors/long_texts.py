"""Long texts tokenized by a bounded prefix, with the ids the whole text would give.

The model keeps at most ``max_length`` tokens of a text; tokenizing a 50 MB session whole only
to throw all but its first 512 tokens away took 89 s and 8.2 GB. :func:`encode_bounded` reads
a prefix that provably yields the same kept ids, growing it when that is not proven.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tokenizers import Tokenizer

__all__ = ["CHARS_PER_TOKEN", "encode_bounded"]

#: Characters of a text tokenized per token kept (at first): 32,768 characters for 512 tokens,
#: where English runs at ~4-5 characters a token. A 50 MB session used to be tokenized whole
#: (89 s, 8.2 GB) only for all but its first 512 tokens to be thrown away.
CHARS_PER_TOKEN = 64


def _whitespace_cut(text: str, budget: int) -> int | None:
    """The last space, newline or tab in ``text[budget // 2 : budget]``, or None."""
    cut = max(text.rfind(space, budget // 2, budget) for space in " \n\t")
    return cut if cut > 0 else None


def encode_bounded(tokenizer: Tokenizer, texts: Sequence[str], budget: int) -> list[Any]:
    """``tokenizer.encode_batch(texts)`` (truncation on), reading only a bounded prefix of each
    long text, with the same ids as the whole text.

    A text over ``budget`` characters is cut at a whitespace in the budget's second half: a
    boundary every whitespace-splitting pre-tokenizer (BERT's, byte-level BPE, Metaspace)
    respects, so each word of the prefix is tokenized as in the whole text, and once the
    prefix alone overflows the truncation length its kept ids are the whole text's. A prefix
    that does not overflow (very long "words" of one token each) is retried four times
    longer. One giant word: with WordPiece (BERT's family, vipune's model) a word past its
    100 characters is one ``[UNK]`` however long, so such runs are first cut to 101 characters
    (:func:`_shorten_long_words`, exact); any other tokenizer's word is cut mid-way only when
    that cut already overflows and one twice as long gives the same ids. Otherwise the budget
    grows, up to the whole text: the fallback whenever nothing shorter is proven.
    """
    encodings: list[Any] = tokenizer.encode_batch(
        [text if len(text) <= budget else text[: _whitespace_cut(text, budget) or budget]
         for text in texts])
    for i, text in enumerate(texts):
        if len(text) <= budget:
            continue
        cut = _whitespace_cut(text, budget)
        if cut is not None and encodings[i].overflowing:
            continue
        encodings[i] = _encode_long(tokenizer, text, budget if cut is None else budget * 4)
    return encodings


#: A run of letters and digits (no CJK: BERT splits each of those off): BERT's pre-tokenizer
#: never splits inside one, so a run is part of a single word.
_WORD_RUN = r"[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]{%d,}"


def _shorten_long_words(tokenizer: Tokenizer, text: str) -> str:
    """For WordPiece behind BERT's pre-tokenizer: every run of letters and digits longer than
    the model's ``max_input_chars_per_word`` cut to one character more. Exact: a word over that
    length is one ``[UNK]`` however long it is, and the cut run still is over it (BERT's
    normalizer never shortens letters or digits: lower-casing and accent stripping keep their
    count). Any other tokenizer: the text unchanged."""
    model = tokenizer.model
    if type(model).__name__ != "WordPiece" or type(tokenizer.pre_tokenizer).__name__ != (
            "BertPreTokenizer"):
        return text
    keep = int(model.max_input_chars_per_word) + 1
    return re.sub(_WORD_RUN % keep, lambda m: m.group()[:keep], text)


def _encode_long(tokenizer: Tokenizer, text: str, budget: int) -> Any:
    text = _shorten_long_words(tokenizer, text)
    while len(text) > budget:
        cut = _whitespace_cut(text, budget)
        if cut is not None:
            encoding = tokenizer.encode(text[:cut])
            settled = bool(encoding.overflowing)
        else:  # one word spans the window: the cut must not change its ids
            encoding = tokenizer.encode(text[:budget])
            settled = bool(encoding.overflowing) and (
                encoding.ids == tokenizer.encode(text[: 2 * budget]).ids)
        if settled:
            return encoding
        budget *= 4
    return tokenizer.encode(text)
