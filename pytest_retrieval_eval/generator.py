"""``python -m pytest_retrieval_eval.generator``: the documented command line of the data
generator (:mod:`pytest_retrieval_eval.data.generator`), kept at this path for the scripts
that call it: it runs ``retrieval-eval generate`` (:mod:`.cli.generate`), same arguments,
output and exit statuses."""

import sys

from .cli.console import main

if __name__ == "__main__":
    sys.exit(main(["generate", *sys.argv[1:]]))
