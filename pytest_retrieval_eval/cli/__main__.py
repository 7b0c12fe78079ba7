"""``python -m pytest_retrieval_eval.cli``: the console script ``retrieval-eval``."""

import sys

from .console import main

sys.exit(main())
