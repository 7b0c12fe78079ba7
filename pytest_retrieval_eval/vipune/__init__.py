"""vipune's rules in Python: the reference the harness measures vipune against.

Holds vipune's limits, schema, semantic scan, FTS5 query, RRF fusion and the JSON its CLI
prints (``reference``), and the per-persona SQLite stores in vipune's own schema (``store``).
Every name of the reference is importable from here: ``from pytest_retrieval_eval import vipune``.
"""

from __future__ import annotations

from .reference import *  # noqa: F403
from .reference import __all__ as __all__
