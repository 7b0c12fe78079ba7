"""Every page with a console block says where its blocks run (issue 38, item 4): before the
first block, the folder (``examples/vipune``, whose ``pytest.ini`` gives the sample's
retrievers) that the doc tests run it from; and the README's everyday lines start in that
folder and say what the plugin's own root would collect instead."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONSOLE = re.compile(r"^\s*```console\s*$", re.M)
#: "The console blocks of this page run in `examples/vipune`" (or "block ... runs in").
WHERE = re.compile(r"console blocks?[^.]*? runs? in `(examples/[\w-]+)`")


def pages_with_console() -> list[Path]:
    return [p for p in PAGES if CONSOLE.search(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", pages_with_console(), ids=lambda p: p.name)
def test_the_page_says_where_its_console_blocks_run(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    before = text[:CONSOLE.search(text).start()]  # type: ignore[union-attr]
    match = WHERE.search(" ".join(before.split()))
    assert match, (f"{page.name}: say before its first console block where the blocks run, "
                   "e.g. 'The console blocks of this page run in `examples/vipune`'")
    ini = ROOT / match.group(1) / "pytest.ini"
    assert ini.is_file(), ini
    parser = configparser.ConfigParser()
    parser.read(ini, encoding="utf-8")
    retrievers = parser["pytest"].get("retrieval_eval_retriever")
    if match.group(1) == "examples/vipune":
        # the page names the ini's retrievers, so a reader elsewhere knows why they differ
        assert retrievers and f"`{retrievers}`" in " ".join(text.split()), page.name


def test_the_readme_s_everyday_lines_start_in_the_example_folder() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Everyday use", 1)[1].split("\n## ", 1)[0]
    first_block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    assert first_block.splitlines()[0].startswith("cd examples/vipune")
    flat = " ".join(section.split())
    assert "testpaths" in flat and "plugin's own" in flat  # what its root would collect
