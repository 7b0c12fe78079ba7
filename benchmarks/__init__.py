"""The full-scale benchmark (``python benchmarks/run.py``, see run.py) and its parts."""
