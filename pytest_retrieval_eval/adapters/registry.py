"""The adapters by name: ``mem0``, ``llamaindex``, ``langchain`` built with their knobs (the
loader's registry and the what-if grammar call :func:`make_adapter`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..retrievers.base import Retriever

__all__ = ["ADAPTER_CLASSES", "make_adapter"]

#: Per adapter name: its module of this wing and its class.
ADAPTER_CLASSES = {"langchain": ("langchain", "LangChainStore"),
                   "llamaindex": ("llamaindex", "LlamaIndexStore"),
                   "mem0": ("mem0", "Mem0Store")}


def make_adapter(name: str, kwargs: dict[str, Any], options: object = None) -> Retriever:
    """A memory library's adapter with its knobs; its module is imported now (the library
    itself by its ``index``). ``options``: the run's settings (mem0 reads its LLM settings
    there)."""
    module, attr = ADAPTER_CLASSES[name]
    cls = getattr(importlib.import_module(f".{module}", __package__), attr)
    if getattr(cls, "takes_settings", False):
        kwargs = {**kwargs, "settings": options}
    made: Retriever = cls(**kwargs)
    return made
