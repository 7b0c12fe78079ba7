"""The README is a user's page whose commands work as written (issue 10).

Every ``bash`` block runs offline against the bundled sample, line by line, in an empty folder
(``HF_HUB_OFFLINE=1``, an empty cache), with this environment's ``pytest``, ``python`` and
``retrieval-eval`` on ``PATH``; so does each ``pytest`` example of the options table. A block
that needs the network is marked ``<!-- network -->`` on the line before its fence; a block
marked ``<!-- file: NAME -->`` is written to ``NAME`` in that folder before the commands run.
The ``console`` blocks (a command and its output) are run, and their output compared, by
``tests/docs/test_doc_outputs.py``.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import CHILD_ADDOPTS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_BYTES = 15 * 1024  # "a user's page of at most ~15 KB"
NETWORK = "<!-- network -->"
FILE_MARK = re.compile(r"^<!-- file: (\S+) -->$")
FENCE = re.compile(r"^```(\w*)\s*$")
#: The README's test command, which .ci/run must run exactly.
TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/pytest -n 2"
)


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    mark: str  # the HTML comment on the line before the fence, or ""

    @property
    def commands(self) -> list[str]:
        return [c for c in (line.strip() for line in self.text.splitlines())
                if c and not c.startswith("#")]


def readme_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        start = i
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        mark = prev if prev.startswith("<!--") else ""
        blocks.append(Block(start + 1, match.group(1), "\n".join(body), mark))
        i += 1
    return blocks


def options_examples(text: str) -> list[str]:
    """The ``pytest ...`` commands in the example column of the options table, each once
    (two rows, ``--retrieval-eval`` and ``--no-model``, show the same command)."""
    section = text.split("## Options in brief", 1)[1].split("\n## ", 1)[0]
    return list(dict.fromkeys(m for row in section.splitlines() if row.startswith("|")
                              for m in re.findall(r"`(pytest [^`]+)`", row.rsplit("|", 2)[-2])))


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
SHELL = [b for b in BLOCKS if b.lang == "bash"]
#: The ``$`` commands of the console blocks: tests/docs/test_doc_outputs.py runs them and
#: compares their output (issue 30), so this module does not run them again.
CONSOLE = [line[2:] for b in BLOCKS if b.lang == "console" for line in b.text.splitlines()
           if line.startswith("$ ")]
OFFLINE = [b for b in SHELL if b.mark != NETWORK]
FILES = {m.group(1): b.text for b in BLOCKS if (m := FILE_MARK.match(b.mark))}
EXAMPLES = options_examples(README.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One plugin cache for this module's commands (the corpus is built once)."""
    return tmp_path_factory.mktemp("readme-cache")


def _env(home: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "HF_", "RETRIEVAL_EVAL_"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        HF_HUB_OFFLINE="1",
        HF_HOME=str(home / "hf"),
        RETRIEVAL_EVAL_CACHE_DIR=str(cache),
        HOME=str(home),
        PYTEST_ADDOPTS=CHILD_ADDOPTS,
    )
    return env


def _run(commands: list[str], workdir: Path, cache: Path) -> None:
    """Run ``commands`` in ``workdir``; a ``cd examples/NAME`` line moves the later lines of
    the block into a copy of the repository's ``examples/`` (the README's everyday lines
    start there, issue 38, item 4)."""
    for name, content in FILES.items():
        (workdir / name).write_text(content + "\n", encoding="utf-8")
    env = _env(workdir, cache)
    cwd = workdir
    for command in commands:
        if command.startswith("cd "):
            target = command[3:].split("#", 1)[0].strip()
            if target.startswith("examples/") and not (workdir / "examples").exists():
                shutil.copytree(ROOT / "examples", workdir / "examples")
            cwd = (cwd / target).resolve()
            assert cwd.is_dir(), f"README command failed: $ {command}"
            continue
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"README command failed ({done.returncode}):\n" \
                                     f"$ {command}\n{output[-3000:]}"
        assert "no pair was scored" not in output, f"$ {command}\n{output[-3000:]}"


def test_readme_is_a_short_page() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes; move reference material to docs/"
    text = README.read_text(encoding="utf-8")
    assert "scope document" not in text
    for heading in ("## What it measures", "## Set up", "## Everyday use", "## Options in brief",
                    "## Retrievers and your own store", "## Reading the report",
                    "## The ten most common errors", "## Reliability", "## Development"):
        assert heading in text, heading


PAGES = [README, ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A repository path a page names (``tests/vectors/test_cache.py``, ``scripts/mutation.py``).
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:pytest_retrieval_eval|tests|scripts|benchmarks|examples)/[\w./-]*[\w/])")
#: A dotted name of the package a page names (``pytest_retrieval_eval.vectors.prep``).
DOTTED = re.compile(r"\bpytest_retrieval_eval(?:\.\w+)+")


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module of the package, or a name in one."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for name in parts[n:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_named_paths_and_modules_exist(page: Path) -> None:
    """Every repository path and package module a page names is there (the pages follow the
    code when it moves)."""
    text = page.read_text(encoding="utf-8")
    for path in REPO_PATH.findall(text):
        assert (ROOT / path).exists(), (page.name, path)
    for dotted in DOTTED.findall(text):
        assert resolves(dotted), (page.name, dotted)


def test_the_name_checks_can_fail() -> None:
    assert resolves("pytest_retrieval_eval.vectors.prep.PrepInterrupted")
    assert not resolves("pytest_retrieval_eval.prep.PrepInterrupted")
    assert not resolves("pytest_retrieval_eval.vipune.nope")
    assert REPO_PATH.findall("see tests/test_x.py::t, not src/tests/y.py") == ["tests/test_x.py"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert (page.parent / target).exists(), (page.name, target)
    assert "scope document" not in text


def test_readme_error_table_has_ten_rows() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## The ten most common errors", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| `")]
    assert len(rows) == 10, rows


def test_setup_commands_are_what_ci_runs() -> None:
    """The network-marked set-up blocks: .ci/run runs the test command exactly, and the main
    job (the bundled sample, model-free, in examples/vipune)."""
    setup = [c for b in SHELL if b.mark == NETWORK for c in b.commands
             if c.startswith("python3 -m venv")]
    assert TEST_COMMAND in setup, setup
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in ci.splitlines()
    main_job = next(c for c in setup if c != TEST_COMMAND)
    assert main_job.endswith("(cd examples/vipune && ../../.venv/bin/pytest --retrieval-eval "
                             "--no-model)")
    assert "cd examples/vipune" in ci and "pytest --retrieval-eval --no-model" in ci


def test_readme_has_offline_blocks_and_examples() -> None:
    # The extraction itself must find something: a test over nothing cannot fail.
    assert len(OFFLINE) >= 3 and len(EXAMPLES) >= 7 and len(CONSOLE) >= 8, (OFFLINE, EXAMPLES)
    assert "conftest.py" in FILES
    ids = " ".join(c for b in OFFLINE for c in b.commands)
    assert "-k temporal-reasoning" in ids and re.search(r"-k gpt4_\w+", ids)


@pytest.mark.parametrize("block", OFFLINE, ids=[f"line{b.line}" for b in OFFLINE])
def test_readme_block_runs_offline(block: Block, tmp_path: Path, shared_cache: Path) -> None:
    _run(block.commands, tmp_path, shared_cache)


@pytest.mark.parametrize("command", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_options_table_example_runs_offline(command: str, tmp_path: Path,
                                            shared_cache: Path) -> None:
    _run([command], tmp_path, shared_cache)


def test_supported_pytest_and_python_range_is_stated_pinned_and_checked() -> None:
    """README states the range, pyproject pins it, and .ci/pytest-matrix runs its ends."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pin = next(d for d in project["dependencies"] if re.match(r"pytest\b[<>=]", d))
    assert re.fullmatch(r"pytest>=8\.1,<10(\s*#.*)?", pin.strip()), pin
    assert project["requires-python"] == ">=3.10"
    text = README.read_text(encoding="utf-8")
    assert "Python ≥ 3.10, pytest 8.1 to 9.x" in text
    matrix = (ROOT / ".ci" / "pytest-matrix").read_text(encoding="utf-8")
    versions = re.search(r"versions=\(([\d. ]+)\)", matrix)
    assert versions is not None
    listed = versions.group(1).split()
    assert listed[0] == "8.1.1" and all(v.startswith(("8.", "9.")) for v in listed)
    assert any(v.startswith("8.4") for v in listed) and listed[-1].startswith("9.")
    assert ".ci/pytest-matrix" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


#: The files and folders the README's commands write (a command's output argument).
OUTPUT = re.compile(r"(?:--retrieval-eval-json=|--out |--into |--cache |-o |> )(\S+)"
                    r"|generate .* (\S+\.json)")


def test_what_the_readme_writes_in_the_example_folder_is_ignored_by_git() -> None:
    """Running the README's commands in examples/vipune leaves `git status` clean there."""
    ignore = (ROOT / "examples" / "vipune" / ".gitignore").read_text("utf-8").split()
    commands = "\n".join([b.text for b in SHELL] + CONSOLE)
    written = {next(g for g in m.groups() if g).rstrip("/") for m in OUTPUT.finditer(commands)}
    written.update(m.group(1).split("/")[0] for m in re.finditer(
        r"--retrieval-eval-(?:json|cache)=([\w./-]+)", README.read_text("utf-8")))
    written = {w for w in written if not w.isupper()}  # PATH, DIR: metavars, not files
    assert {"report.json", "trec", "delta.png", "out", "my-cache"} <= written, written
    missing = sorted(w for w in written if f"/{w}" not in ignore and f"/{w}/" not in ignore)
    assert not missing, f"add to examples/vipune/.gitignore: {missing}"
