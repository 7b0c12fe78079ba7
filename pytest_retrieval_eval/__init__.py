"""pytest-retrieval-eval: retrieval quality of agent-memory stores on LongMemEval."""

__version__ = "0.1.0"
