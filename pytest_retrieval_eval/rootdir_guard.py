"""A path option in the space form must not silently move pytest's rootdir.

pytest chooses its rootdir (and ini file) from the command line's paths before any plugin's
options are known, so in ``--retrieval-eval-cache ../cache`` it reads ``../cache`` as a test
path: the rootdir becomes the folder above the project and the project's ini file and root
conftest are not read. The ``=`` form (``--retrieval-eval-cache=../cache``) is one word and
never read as a path. This module finds the values pytest could have taken for paths and
names the first in one line, with the form to write.

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

import itertools
import os
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

#: pytest's own ways of fixing the rootdir or the ini file: with one, paths move nothing.
_PINNED = ("--rootdir", "-c", "--config-file", "--inifile")


def moved_rootdir_value(args: Sequence[str], flags: Iterable[str], invocation_dir: Path,
                        ) -> tuple[str, str] | None:
    """The first ``(flag, value)`` of ``args`` given in the space form whose value is an
    existing path outside ``invocation_dir`` (so it could have moved the rootdir), or None.

    A value inside the invocation folder leaves the rootdir search where it was (the
    folder's ini file is still found on the way up); with ``--rootdir`` or ``-c`` given,
    pytest's choice is pinned and nothing moves."""
    valued = set(flags)
    words = list(args)
    if any(w in _PINNED or w.startswith(("--rootdir=", "--config-file=", "--inifile="))
           or (w.startswith("-c") and not w.startswith("--") and len(w) > 2)  # -cFILE
           for w in words):
        return None
    here = invocation_dir.resolve()
    for flag, value in itertools.pairwise(words):
        if flag not in valued or value.startswith("-"):
            continue
        path = Path(value) if os.path.isabs(value) else invocation_dir / value
        try:
            if not path.exists():
                continue
            resolved = path.resolve()
        except OSError:
            continue
        if resolved != here and here not in resolved.parents:
            return flag, value
    return None


#: The files pytest takes its configuration from, in the order it looks in one folder, each
#: with the text a file of that kind must hold to count (None: any content).
_CONFIG_FILES = (("pytest.toml", None), (".pytest.toml", None), ("pytest.ini", None),
                 (".pytest.ini", None), ("pyproject.toml", "[tool.pytest"),
                 ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]"))


def invocation_config_file(invocation_dir: Path) -> Path | None:
    """The configuration file pytest finds from ``invocation_dir`` upward when no path is
    given (the file a plain ``pytest`` run there reads), or None."""
    for folder in (invocation_dir.resolve(), *invocation_dir.resolve().parents):
        for name, marker in _CONFIG_FILES:
            path = folder / name
            try:
                if path.is_file() and (marker is None or marker in path.read_text("utf-8")):
                    return path
            except (OSError, UnicodeDecodeError):
                continue
    return None


def moved_rootdir_line(args: Sequence[str], flags: Iterable[str], invocation_dir: Path,
                       rootdir: Path, inipath: Path | None) -> str | None:
    """The one line that says a space-form value moved the rootdir away from the project's
    configuration file (``inipath``: the one pytest read), with the ``=`` form to write, or
    None. ``PYTEST_ADDOPTS`` counts: pytest reads it first."""
    words = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *args]
    found = moved_rootdir_value(words, flags, invocation_dir)
    if found is None:
        return None
    expected = invocation_config_file(invocation_dir)
    if expected is None or (inipath is not None and inipath.resolve() == expected):
        return None  # no project file to lose (or it was read all the same)
    flag, value = found
    return (f"{flag} {value}: pytest read {value!r} as a test path when it chose its rootdir "
            f"({rootdir}), before it knew this option, so it did not read {expected}; write "
            f"{flag}={shlex.quote(value)}")
