"""pytest-retrieval-eval: retrieval quality of agent-memory stores on LongMemEval.

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

__version__ = "0.1.0"
