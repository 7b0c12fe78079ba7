"""``python -m pytest_retrieval_eval.generator``: the documented command line of the data
generator (:mod:`pytest_retrieval_eval.data.generator`), kept at this path for the scripts
that call it; ``retrieval-eval generate`` is the same command (:mod:`.cli.generate`)."""

import sys

from .cli.generate import main

if __name__ == "__main__":
    sys.exit(main())
