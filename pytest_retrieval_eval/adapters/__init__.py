"""Adapters: the libraries memory systems are built on (mem0, LlamaIndex, LangChain), each an
ordinary retriever of the protocol (``index``/``rank``/``close``, :class:`.Memory` items with
turn provenance, the run's model through ``persona.embed``), offered as the built-in names
``mem0``, ``llamaindex`` and ``langchain`` with ``+key:value`` knobs (docs/memory-libraries.md).

Modules: ``registry`` (the adapters by name), ``library`` (the door to a library: installed,
its version in the tested range, its exceptions as one line), ``sessions`` (a session as one
document with each turn's character span), ``langchain``, ``llamaindex``, ``mem0`` (the
adapters), ``mem0_llm`` (mem0's LLM settings and the calls and tokens it spent). A library
is imported only by its adapter's ``index``; naming no adapter imports nothing of this wing.

PYTEST_DONT_REWRITE: holds no test asserts.
"""
