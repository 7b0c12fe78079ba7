"""Advice names an option in the ``=`` form, as the README asks users to write it.

pytest finds its rootdir (and so the ini file) before it knows the plugin's options, so in
``--retrieval-eval-cache ../cache`` it may read ``../cache`` as a test path
(``rootdir_guard.py``). A message that tells the user what to type must therefore never hand
them the space form: every string literal of the package (docstrings aside) is read here, and
an option followed by a placeholder (``DIR``, ``PATH``, ``N``...) or, after a word of advice
(``pass``, ``use``, ``e.g.``...), by a value is the space form. Lines that only echo what the
user typed (``--retrieval-eval-json X: is a directory``) or describe a setting in prose
(``--retrieval-eval-protocol longmemeval keeps ...``) are not advice.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest_retrieval_eval

PACKAGE = Path(pytest_retrieval_eval.__file__).parent

#: an option, a space, an upper-case placeholder
PLACEHOLDER = re.compile(r"--retrieval-eval-[a-z][a-z-]* [A-Z][A-Z_]*\b")
#: a word of advice, an option, a space, a value (an interpolation not followed by ':')
ADVISED_VALUE = re.compile(
    r"(?:\b(?:pass|give|use|with|add|or|as|run)|e\.g\.|\() `?(?:pytest [^`]*)?"
    r"--retrieval-eval-[a-z][a-z-]* (?:\{\}(?!:)|[a-z0-9][\w./-]*(?=[`),;]|$))")


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    """Every string literal of a module, f-strings with ``{}`` for their fields, docstrings
    (and other bare string statements) left out."""
    bare = {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Constant, ast.JoinedStr))}
    found = []
    for node in ast.walk(tree):
        if id(node) in bare:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(part.value if isinstance(part, ast.Constant) else "{}"
                           for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        found.append((node.lineno, text))
    return found


def space_form_advice(text: str) -> list[str]:
    return [m.group(0) for pattern in (PLACEHOLDER, ADVISED_VALUE)
            for m in pattern.finditer(text)]


def test_the_rule_tells_advice_from_echoes_and_prose() -> None:
    assert space_form_advice("install vipune or pass --retrieval-eval-vipune PATH")
    assert space_form_advice("or use --retrieval-eval-device cpu")
    assert space_form_advice("(--retrieval-eval-cache DIR, RETRIEVAL_EVAL_CACHE_DIR)")
    assert space_form_advice("e.g. --retrieval-eval-retriever hybrid")
    assert space_form_advice("prep with --retrieval-eval-model {}, mean pooling")
    assert space_form_advice("`pytest --retrieval-eval --retrieval-eval-json PATH` lists them")
    assert not space_form_advice("or pass --retrieval-eval-vipune=PATH")
    assert not space_form_advice("--retrieval-eval-json {}: is a directory; give a file path")
    assert not space_form_advice("but --retrieval-eval-protocol longmemeval keeps every slot")
    assert not space_form_advice("raise --retrieval-eval-vipune-timeout if the first call")


def test_no_message_of_the_package_advises_the_space_form() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            found += [f"{path.relative_to(PACKAGE)}:{line}: {hit}"
                      for hit in space_form_advice(text)]
    assert found == []
