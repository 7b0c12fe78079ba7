"""The console script ``retrieval-eval`` and its subcommands.

``console`` assembles the parser and dispatches; ``prep`` (prep, models), ``cache`` (merge,
push, pull), ``reports`` (compare, plot) and ``generate`` hold the subcommands; ``args``
what they share; ``progress_bar`` the bar they draw. Public: :func:`main`.
"""

from __future__ import annotations

from .console import main

__all__ = ["main"]
