"""What every ``retrieval-eval`` subcommand shares: the program name, the exit statuses, the
parser class that makes a bad argument one line (exit 2), the width summaries fit (with
:func:`write_fitted`), and the argument types more than one command takes (those of one
command live beside it: ``--shard`` in :mod:`.prep`, ``--repo`` in :mod:`.cache`,
``--retrievers`` in :mod:`.reports`)."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn, TextIO

from ..errors import one_line

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "PROG",
    "OneLineParser",
    "cache_clash",
    "directory",
    "file_path",
    "nonempty",
    "terminal_width",
    "write_fitted",
]

PROG = "retrieval-eval"
# The exit statuses, one rule for every subcommand (docs/errors.md):
EXIT_USAGE = 2  # a bad flag or value: argparse's own status
EXIT_ERROR = 4  # a RetrievalEvalError: the run cannot go on; pytest's usage-error status, so
#                 `retrieval-eval` and `pytest --retrieval-eval` agree on the same fault
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


def terminal_width() -> int:
    """The width a summary fits: ``$COLUMNS``, else the terminal's, else 80 (a pipe)."""
    return shutil.get_terminal_size((80, 24)).columns


def write_fitted(out: TextIO, lines: Iterable[str], width: int | None = None) -> None:
    """Write summary ``lines`` cut at spaces to ``width`` (default: :func:`terminal_width`),
    continuations indented (``reporting.text_width.fit_lines``). Never for an error or a
    warning: those stay one line (``PROG: error: ...``), whatever the width."""
    from ..reporting.text_width import fit_lines

    for line in fit_lines(lines, terminal_width() if width is None else width):
        out.write(line + "\n")


def directory(value: str) -> Path:
    if not value.strip():
        raise argparse.ArgumentTypeError("cache directory is empty; give a folder path")
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} exists and is not a directory")
    return path


def file_path(value: str) -> Path:
    """A file's path that is not empty (``Path("")`` would be the working folder)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("the path is empty; give a file path")
    return Path(value)


def nonempty(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value.strip()


class OneLineParser(argparse.ArgumentParser):
    """A bad argument is one line (``retrieval-eval prep: error: argument --batch-size: ...;
    see --help``), not the usage banner followed by the message."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}; see "
                              f"{self.prog} --help\n")


def cache_clash(option: str, output: Path | None) -> str | None:
    """The one line refusing an output that lies inside a cache folder (symlinks resolved):
    the default cache root (``$RETRIEVAL_EVAL_CACHE_DIR``, XDG, ``~/.cache``) or the bundled
    sample's read-only cache, where it could replace a manifest, shard or corpus file (the
    run's outputs get the same line from the settings' guard); None when it lies outside
    both. ``option`` names the output as the command's usage does (``--json``, ``--out``)."""
    if output is None:
        return None
    from ..io.user_files import inside_folder
    from ..vectors.cache import bundled_cache_dir, default_cache_dir

    for what, root in (("the cache", default_cache_dir()),
                       ("the bundled sample's read-only cache", bundled_cache_dir())):
        if inside_folder(output, root):
            return (f"{option} {output} lies inside {what} {root}: writing it could replace "
                    f"a cache file; give {option} a path outside that folder")
    return None
