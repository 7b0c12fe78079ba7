"""The settings huggingface_hub reads from the environment when it is first imported, checked
before that import: every import of it in this package goes through :func:`library`."""

from __future__ import annotations

import os
from types import ModuleType

from ..errors import RetrievalEvalError, one_line

__all__ = ["WHOLE_SECONDS", "HubSettingError", "library", "seconds"]

#: Variables huggingface_hub reads with ``int()`` when it is first imported
#: (huggingface_hub/constants.py, 2.4.0: ``_as_int`` line 22, HF_HUB_ETAG_TIMEOUT line 310,
#: HF_HUB_DOWNLOAD_TIMEOUT line 314): any other value stops that import with a traceback.
WHOLE_SECONDS = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")


class HubSettingError(RetrievalEvalError):
    """An environment variable huggingface_hub reads at import holds a value it cannot use."""


def library() -> ModuleType:
    """``huggingface_hub``, imported after its import-time settings are checked (every import
    of it in this package goes through here first): a value it would stop on ends in
    :class:`HubSettingError`, one line naming the variable, not in the library's traceback."""
    for name in WHOLE_SECONDS:
        seconds(name)
    import huggingface_hub  # deferred: importing it costs ~0.3 s

    return huggingface_hub


def seconds(name: str) -> int | None:
    """The whole seconds the environment variable ``name`` (one of :data:`WHOLE_SECONDS`)
    holds, parsed as huggingface_hub parses it (``int()``: " 3 " is 3, "0.5" and "" are
    refused); None when unset. :class:`HubSettingError` names a value it cannot read."""
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise HubSettingError(
            f"{name}={one_line(repr(value), 40)}: huggingface_hub reads it as whole "
            f"seconds; set it to a whole number, e.g. {name}=10, or unset it") from None
