"""The pages' output blocks, run and compared (issue 30): Sybil's Markdown lexer finds the
fenced blocks, a parser here turns each into a Sybil region, and the evaluator runs it.

The rules a page follows (docs/doc-outputs.md says them for writers):

* A ```` ```console ```` block is a terminal session: a line ``$ COMMAND`` (continued by a
  trailing ``\\``) is run, and the lines after it, up to the next ``$`` line, are its output.
  A line ``...`` stands for any number of lines (an excerpt: the shown runs of lines appear in
  that order, each run contiguous); no line after a command means it prints nothing.
* The commands of a page run in order, in one temporary copy of ``examples/`` (so a block can
  read the JSON an earlier block wrote), from ``examples/vipune`` (the bundled sample); a
  command that starts with ``cd examples/NAME &&`` runs from the copy's root. Offline
  (``HF_HUB_OFFLINE=1``), at 80 columns unless the command sets ``COLUMNS=``, pytest without
  randomly and cacheprovider; each distinct command runs once per page.
* Before comparing, timings (``0.4s``, ``12 ms``, ``p95 3.2``), absolute paths, the width of
  ``=====`` rules and pytest's ``platform``/``plugins:`` header lines are normalised on both
  sides; everything else is compared exactly.
* A ``json`` block marked ``<!-- json-of: FILE -->`` shows keys and values some object of FILE
  (written by an earlier command of the page) holds (:func:`contains`).
* A ```` ```text ```` block, or a ``console`` block that cannot run here (the network, the
  model lane, longmemeval_m, a vipune binary), is marked ``<!-- not-run: REASON -->`` on the
  line before its fence. A fence without a language is refused: every block says what it is.

``update(path)`` rewrites a page's ``console`` outputs from real output (an excerpt keeps its
shape, :func:`regenerate`); ``scripts/update_doc_outputs.py`` calls it.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Document, Example, Region
from sybil.example import SybilFailure
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

from tests.support.processes import child_addopts

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(?P<reason>.+?)\s*-->$")
JSON_OF = re.compile(r"^<!--\s*json-of:\s*(?P<file>\S+)\s*-->$")
ELLIPSIS = "..."
PROMPT = "$ "
WIDTH = "80"
#: A command starting so runs from the copy's root, not from examples/vipune.
CD_EXAMPLE = re.compile(r"^cd examples/[\w.-]+ &&")

_TIMING = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ms|µs|us|s|sec|min|h)\b")
_P95 = re.compile(r"\bp95 \d+(?:\.\d+)?")
_PATH = re.compile(r"(?<![\w.~/-])/[\w.@+-]+(?:/[\w.@+-]*)+")
_RULE = re.compile(r"={3,}")
#: pytest's header lines that name this machine's Python, pytest and plugins.
_HEADER = re.compile(r"^(platform|plugins:) .*")


def normalise(line: str) -> str:
    """A line with what varies from run to run (timings, absolute paths, rule widths) fixed."""
    line = _HEADER.sub(r"\1 …", line)
    line = _PATH.sub("<PATH>", line)
    line = _P95.sub("p95 <T>", line)
    line = _TIMING.sub("<T>", line)
    return _RULE.sub("===", line).rstrip()


@dataclass
class Step:
    """One ``$`` command of a console block and the lines shown after it."""

    command: str
    shown: list[str]
    line: int  # 1-based line of the ``$`` in the page
    output_line: int = 0  # 1-based line of the first shown line (after a continued command)


@dataclass
class Block:
    """A fenced block of a page: its language, its mark and, for console, its steps."""

    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    source: str
    not_run: str  # the reason of a ``<!-- not-run: ... -->`` mark, or ""
    indent: str  # the fence's indent (a block in a list item)
    steps: list[Step] = field(default_factory=list)
    json_of: str = ""  # the file of a ``<!-- json-of: FILE -->`` json block

    @property
    def checked(self) -> bool:
        return (self.language == "console" and not self.not_run) or bool(self.json_of)


def parse_console(source: str, first_line: int) -> list[Step]:
    """The ``$`` commands of a console block's source and the lines shown after each."""
    steps: list[Step] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        text = lines[i]
        if not text.startswith(PROMPT):
            if not steps:
                raise ValueError(f"line {first_line + i}: a console block starts with '$ '")
            steps[-1].shown.append(text)
            i += 1
            continue
        start = i
        command = text[len(PROMPT):]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1].rstrip() + " " + lines[i].strip()
        steps.append(Step(command, [], first_line + start, first_line + i + 1))
        i += 1
    return steps


def _mark_before(text: str, start: int) -> str:
    """The HTML comment on the nearest non-blank line before offset ``start``, or ""."""
    for line in reversed(text[:start].splitlines()):
        if line.strip():
            return line.strip() if line.strip().startswith("<!--") else ""
    return ""


class OutputBlockParser:
    """A Sybil parser: every fenced block of a page becomes a region; console blocks that run
    are evaluated by :class:`Runner`, the others only recorded (for the completeness test)."""

    lexer = RawFencedCodeBlockLexer(
        info_pattern=re.compile(r"(?P<language>[\w-]*)[^\n]*$\n", re.MULTILINE))

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexer(document):
            source = region.lexemes["source"]
            fence_line = document.text.count("\n", 0, region.start) + 1
            fence = document.text[region.start:document.text.index("`", region.start)]
            before = _mark_before(document.text, region.start)
            mark = NOT_RUN.match(before)
            block = Block(Path(document.path), fence_line, region.lexemes["language"],
                          str(source), mark.group("reason") if mark else "", fence)
            if block.language == "json" and (of := JSON_OF.match(before)):
                block.json_of = of.group("file")
            elif block.checked:
                block.steps = parse_console(block.source, fence_line + 1)
            yield Region(region.start, region.end, parsed=block, evaluator=self.runner)


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    document = Document.parse(str(page), OutputBlockParser(Runner()))
    return [example.parsed for example in document.examples()]


def _environment(home: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "HF_", "RETRIEVAL_EVAL_", "COLUMNS", "LINES"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        HF_HUB_OFFLINE="1", HF_HOME=str(home / "hf"), HOME=str(home),
        RETRIEVAL_EVAL_CACHE_DIR=str(cache), COLUMNS=WIDTH,
        PYTEST_ADDOPTS=child_addopts("-p no:randomly -p no:cacheprovider"),
        MPLBACKEND="Agg",
    )
    return env


@dataclass
class Update:
    """The lines shown after one command, to be replaced by the real ones."""

    index: int  # 0-based page line of the first shown line
    count: int
    lines: list[str]
    indent: str  # the fence's indent (a block in a list item)


class Runner:
    """Sybil's evaluator for console blocks: runs each step in the page's copy of examples/,
    once per distinct command, and compares (or, updating, records the real output)."""

    def __init__(self, workdir: Path | None = None, cache: Path | None = None,
                 updating: bool = False) -> None:
        self.workdir = workdir
        self.cache = cache
        self.updating = updating
        self.outputs: dict[str, str] = {}
        self.updates: list[Update] = []
        self.failures: list[str] = []
        self.ran = 0

    def run(self, command: str) -> str:
        assert self.workdir is not None and self.cache is not None
        if command not in self.outputs:
            root = self.workdir
            cwd = root if CD_EXAMPLE.match(command) else root / "examples" / "vipune"
            done = subprocess.run(["bash", "-c", command], cwd=cwd,
                                  env=_environment(root, self.cache),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=300)
            self.ran += 1
            output = done.stdout
            for path, name in ((str(cwd), "."), (str(self.cache), "~/.cache/pytest-retrieval-eval"),
                               (str(root), "~")):
                output = output.replace(path + "/", name + "/").replace(path, name)
            self.outputs[command] = output
        return self.outputs[command]

    def __call__(self, example: Example) -> str | None:
        block: Block = example.parsed
        if not block.checked:
            return None
        if block.json_of:
            return _json_problem(self, block)
        problems = []
        for step in block.steps:
            actual = self.run(step.command).rstrip().splitlines()  # no trailing blank lines
            if self.updating:
                self.updates.append(Update(step.output_line - 1, len(step.shown),
                                           regenerate(step.shown, actual), block.indent))
                continue
            problem = compare(step.shown, actual)
            if problem:
                problems.append(f"{block.page.name}:{step.line}: $ {step.command}\n{problem}")
        self.failures.extend(problems)
        return "\n\n".join(problems) or None


def _json_problem(self: Runner, block: Block) -> str | None:
    assert self.workdir is not None
    where = f"{block.page.name}:{block.line}: json-of {block.json_of}"
    path = self.workdir / "examples" / "vipune" / block.json_of
    if not path.is_file():
        problem = f"{where}: no such file (an earlier command of the page writes it)"
    else:
        shown = json.loads(block.source if block.source.lstrip().startswith("{")
                           else "{" + block.source + "}")
        real = json.loads(path.read_text(encoding="utf-8"))
        problem = "" if any(contains(node, shown) for node in _dicts(real)) else (
            f"{where}: the shown keys and values are in no object of the file; update the "
            "block by hand from:\n" + "\n".join(
                f'"{k}": {json.dumps(_find_key(real, k))}' for k in shown if k != ELLIPSIS))
    if problem:
        self.failures.append(problem)
    return problem or None


def contains(real: object, shown: object) -> bool:
    """Whether JSON ``real`` holds what ``shown`` shows: a dict's keys (a key ``"..."``: others
    left out), a list's items, equal values; a string ending in ``...`` is a prefix."""
    if isinstance(shown, dict):
        return isinstance(real, dict) and all(
            k == ELLIPSIS or (k in real and contains(real[k], v)) for k, v in shown.items())
    if isinstance(shown, list):
        return isinstance(real, list) and len(real) == len(shown) and all(
            contains(r, v) for r, v in zip(real, shown, strict=True))
    if isinstance(shown, str) and shown.endswith(ELLIPSIS):
        return isinstance(real, str) and real.startswith(shown[:-len(ELLIPSIS)])
    return type(real) is type(shown) and real == shown


def _dicts(node: object) -> Iterable[dict[str, object]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _dicts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _dicts(value)


def _find_key(node: object, key: str) -> object:
    return next((d[key] for d in _dicts(node) if key in d), None)


def _pieces(shown: list[str]) -> list[list[str] | None]:
    """The shown lines as runs, ``None`` for each ``...``."""
    pieces: list[list[str] | None] = []
    run: list[str] = []
    for line in shown:
        if line.strip() == ELLIPSIS:
            if run:
                pieces.append(run)
            pieces.append(None)
            run = []
        else:
            run.append(line)
    if run or not pieces:
        pieces.append(run)
    return pieces


def _stripped(shown: list[str]) -> list[str]:
    """The shown lines, stripped (``...`` found whatever its indent)."""
    return [line.strip() for line in shown]


def _find(run: list[str], actual: list[str], start: int) -> int:
    want = [normalise(x) for x in run]
    for i in range(start, len(actual) - len(run) + 1):
        if [normalise(x) for x in actual[i:i + len(run)]] == want:
            return i
    return -1


def compare(shown: list[str], actual: list[str]) -> str:
    """"" when ``actual`` matches ``shown`` (``...`` lines standing for any lines), else why."""
    pieces = _pieces(shown)
    if ELLIPSIS not in _stripped(shown):
        want = [normalise(x) for x in shown]
        got = [normalise(x) for x in actual]
        if want == got:
            return ""
        return "\n".join(difflib.unified_diff(want, got, "shown", "real", lineterm=""))
    cursor = 0
    for index, piece in enumerate(pieces):
        if piece is None:
            continue
        if index == 0:
            at = 0 if _find(piece, actual[:len(piece)], 0) == 0 else -1
        elif index == len(pieces) - 1:
            at = len(actual) - len(piece)
            at = at if at >= cursor and _find(piece, actual[at:], 0) == 0 else -1
        else:
            at = _find(piece, actual, cursor)
        if at < 0:
            where = ("first" if index == 0 else "last" if index == len(pieces) - 1
                     else "next, in order,")
            return (f"these shown lines are not the {where} lines of the real output:\n"
                    + "\n".join(piece) + "\n--- real output:\n" + "\n".join(actual))
        cursor = at + len(piece)
    return ""


def regenerate(shown: list[str], actual: list[str]) -> list[str]:
    """The shown lines rewritten from ``actual``, keeping an excerpt's shape: each run between
    ``...`` lines that no longer matches becomes the real lines from the one most like its
    first line to the one most like its last (with that line's wrapped continuation)."""
    pieces = _pieces(shown)
    if ELLIPSIS not in _stripped(shown):
        return list(actual)
    out: list[str] = []
    cursor, last = 0, len(pieces) - 1
    for index, piece in enumerate(pieces):
        if piece is None:
            out.append(ELLIPSIS)
            continue
        at = _find(piece, actual, cursor)
        if at >= 0 and (index > 0 or at == 0) and (index < last or at + len(piece) == len(actual)):
            start, end = at, at + len(piece)
        else:
            start = 0 if index == 0 else _closest(piece[0], actual, cursor, len(actual))
            if index == last:
                end = len(actual)
            else:
                end = 1 + (start if len(piece) == 1 else _closest(
                    piece[-1], actual, start + 1, start + 3 * len(piece) + 6))
                indent = len(actual[start]) - len(actual[start].lstrip()) if start < len(
                    actual) else 0
                while end < len(actual) and actual[end].strip() and (
                        len(actual[end]) - len(actual[end].lstrip()) > indent):
                    end += 1
        out.extend(actual[start:end])
        cursor = max(cursor, end)
    return out


def _closest(line: str, actual: list[str], lo: int, hi: int) -> int:
    """The index in ``actual[lo:hi]`` of the line most like ``line`` (``lo`` if none)."""
    want = normalise(line)
    best, score = lo, -1.0
    for i in range(lo, min(hi, len(actual))):
        ratio = difflib.SequenceMatcher(None, want, normalise(actual[i])).ratio()
        if ratio > score:
            best, score = i, ratio
    return best


def copy_examples(into: Path) -> Path:
    """A copy of the repository's examples/ under ``into`` (the pages' commands run there)."""
    shutil.copytree(ROOT / "examples", into / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return into


def evaluate(page: Path, cache: Path, updating: bool = False) -> Runner:
    """Run every console block of ``page`` in order in a fresh copy of examples/."""
    with tempfile.TemporaryDirectory(prefix="doc-outputs-") as tmp:
        runner = Runner(copy_examples(Path(tmp)), cache, updating)
        document = Document.parse(str(page), OutputBlockParser(runner))
        for example in document.examples():
            # a failure is kept in runner.failures, with the page's others
            with contextlib.suppress(SybilFailure):
                example.evaluate()
    return runner


def update(page: Path, cache: Path) -> tuple[bool, list[str]]:
    """Rewrite ``page``'s console outputs from real output: whether the page changed, and what
    must be mended by hand (a json-of block that no longer matches)."""
    runner = evaluate(page, cache, updating=True)
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    for change in sorted(runner.updates, key=lambda u: u.index, reverse=True):
        lines[change.index:change.index + change.count] = [
            f"{change.indent}{line}".rstrip() + "\n" for line in change.lines]
    new = "".join(lines)
    if new != text:
        page.write_text(new, encoding="utf-8")
    return new != text, runner.failures
