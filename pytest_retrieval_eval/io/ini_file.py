"""The keys of pytest's own section in its config file, as written there.

pytest ignores an ini key it does not know, with a generic warning at the end of the run: a
misspelled ``retrieval_eval_retriver = bm25`` would run the default retriever. The plugin
reads the keys itself to name the one meant (:func:`.settings.check_ini_keys`). The file is
the one pytest chose (``config.inipath``): ``pytest.ini``, ``pytest.toml``, ``.pytest.ini``
and ``tox.ini`` (``[pytest]``), ``setup.cfg`` (``[tool:pytest]``), ``pyproject.toml``
(``[tool.pytest.ini_options]``, or pytest 9's ``[tool.pytest]``).

PYTEST_DONT_REWRITE: holds no test asserts.
"""

from __future__ import annotations

import configparser
import sys
from collections.abc import Iterable
from difflib import get_close_matches
from pathlib import Path

__all__ = ["ini_keys", "unknown_key_line"]


def _toml_keys(text: str) -> list[str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: pytest's own dependency there
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    tool = document.get("tool")
    tool_pytest = tool.get("pytest") if isinstance(tool, dict) else None
    tables = [document.get("pytest"), tool_pytest,
              tool_pytest.get("ini_options") if isinstance(tool_pytest, dict) else None]
    keys: list[str] = []
    for table in tables:
        if isinstance(table, dict):
            keys.extend(str(k) for k, v in table.items()
                        if not (k == "ini_options" and isinstance(v, dict)))
    return keys


def _ini_keys(text: str, sections: tuple[str, ...]) -> list[str]:
    parser = configparser.RawConfigParser(strict=False)
    parser.optionxform = str  # type: ignore[assignment, method-assign]  # keys as written
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    return [key for section in sections if parser.has_section(section)
            for key in parser.options(section)]


def ini_keys(path: Path | None) -> list[str]:
    """Every key of pytest's section or table in ``path`` (none where there is no file, it
    cannot be read or parsed: pytest itself has refused such a file already)."""
    if path is None:
        return []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    if Path(path).suffix == ".toml":
        return _toml_keys(text)
    sections = ("tool:pytest",) if Path(path).name == "setup.cfg" else ("pytest",)
    return _ini_keys(text, sections)


def unknown_key_line(keys: Iterable[str], prefix: str, known: Iterable[str]) -> str | None:
    """The line for the first of ``keys`` that starts with ``prefix`` and is not ``known``
    (the closest known key named), or None."""
    names = sorted(set(known))
    for key in keys:
        if not key.startswith(prefix) or key in names:
            continue
        meant = get_close_matches(key, names, n=1, cutoff=0.6)
        hint = (f"did you mean {meant[0]}?" if meant else
                f"the plugin's ini options are listed by pytest --help ({prefix}_*)")
        return (f"ini option {key} is no option of pytest-retrieval-eval: pytest would ignore "
                f"it and run with the default; {hint}")
    return None
