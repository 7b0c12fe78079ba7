"""Docs that cannot drift (issue 30): every output block of README.md and docs/ that follows a
command is that command's real output, up to timings and paths.

Sybil's Markdown lexer reads the pages (``tests/support/doc_outputs.py``); each page's console
blocks run in order in one copy of examples/, one test item per page (so xdist spreads the
pages, and a block can read what an earlier block of its page wrote).
``python scripts/update_doc_outputs.py`` rewrites the blocks from real output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.doc_outputs import (
    PAGES,
    ROOT,
    blocks,
    compare,
    contains,
    evaluate,
    normalise,
    parse_console,
    regenerate,
    update,
)

BLOCKS = {page: blocks(page) for page in PAGES}
RUN = [page for page, found in BLOCKS.items() if any(b.checked for b in found)]


@pytest.fixture(scope="module")
def doc_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One plugin cache for the pages' commands (the sample's corpus is built once)."""
    return tmp_path_factory.mktemp("doc-outputs-cache")


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_outputs_are_what_their_commands_print(page: Path, doc_cache: Path) -> None:
    runner = evaluate(page, doc_cache)
    commands = {s.command for b in BLOCKS[page] if b.checked for s in b.steps}
    assert runner.ran == len(commands)  # each distinct command once
    assert not runner.failures, (
        "\n\n".join(runner.failures)
        + "\n\n(if the new output is right: python scripts/update_doc_outputs.py "
        + f"{page.relative_to(ROOT)})")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_output_block_is_checked_or_marked(page: Path) -> None:
    """A fence names its language; a text block, and a console block that cannot run here,
    carries ``<!-- not-run: REASON -->``; every other console block runs."""
    for block in BLOCKS[page]:
        where = f"{page.name}:{block.line}"
        assert block.language, f"{where}: name the block's language (console, bash, text, ...)"
        if block.language == "text":
            assert block.not_run, f"{where}: a text block: make it a console block that runs, " \
                                  "or mark it <!-- not-run: REASON -->"
        if block.checked and block.language == "console":
            assert block.steps, where


def test_the_pages_have_checked_blocks() -> None:
    # the extraction must find something: a test over nothing cannot fail
    names = {p.name for p in RUN}
    assert {"README.md", "compare.md", "diagnostics.md", "scaling.md", "fixtures.md"} <= names
    readme = [s.command for b in BLOCKS[ROOT / "README.md"] if b.checked for s in b.steps]
    assert any(c.startswith("retrieval-eval compare base.json new.json") for c in readme)


def test_console_blocks_split_into_commands_and_output() -> None:
    steps = parse_console("$ pytest --a \\\n    --b\nout 1\n...\n$ retrieval-eval x\n", 10)
    assert [(s.command, s.shown, s.line) for s in steps] == [
        ("pytest --a --b", ["out 1", "..."], 10), ("retrieval-eval x", [], 14)]
    with pytest.raises(ValueError, match="starts with"):
        parse_console("output first\n$ cmd\n", 1)


def test_normalise_fixes_timings_paths_and_rules_only() -> None:
    assert normalise("hybrid 3.0 ms (p95 3.2), ingest 0.02 s") == \
        "hybrid <T> (p95 <T>), ingest <T>"
    assert normalise("====== 75 passed in 1.58s ======") == "=== 75 passed in <T> ==="
    assert normalise("rootdir: /tmp/x/vipune") == "rootdir: <PATH>"
    assert normalise("plugins: xdist-3.8.0, anyio-4.1") == normalise("plugins: hypothesis-6.1")
    assert normalise("platform linux -- Python 3.11.7, pytest-9.2.0") == "platform …"
    kept = "top 1/5/10 equals semantic's in 11/7/7 of 15 pairs; 3 abstention, k 1,5,10"
    assert normalise(kept) == kept


def test_compare_exact_and_with_ellipsis() -> None:
    real = ["header", "a", "b", "overall 0.5", "tail 3 ms"]
    assert compare([*real[:4], "tail 9 ms"], real) == ""
    assert "shown" in compare(["header", "a"], real)  # no '...': the whole output
    assert compare(["header", "...", "b", "overall 0.5", "..."], real) == ""
    assert compare(["...", "tail 1 ms"], real) == ""
    assert compare(["...", "b", "a", "..."], real) != ""  # order counts
    assert compare(["a", "..."], real) != ""  # the first shown line is the first line
    assert compare(["...", "overall 0.5"], real) != ""  # the last one is the last
    assert compare(["...", "overall 0.6", "..."], real) != ""
    assert compare([], []) == "" and compare([], ["x"]) != ""


def test_regenerate_keeps_an_excerpt_shape() -> None:
    real = ["header 2", "a", "b", "overall 0.7", "tail"]
    assert regenerate(["old"], real) == real
    assert regenerate(["header 1", "...", "overall 0.5", "..."], real) == \
        ["header 2", "...", "overall 0.7", "..."]
    assert regenerate(["...", "tail"], real) == ["...", "tail"]
    assert regenerate(["..."], real) == ["..."] and compare(["..."], real) == ""


def test_update_rewrites_a_page_from_real_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Intro.\n\n```console\n$ echo hello; echo world\nhello\nmoon\n"
                    "$ ls pytest.ini\n...\n```\n\n<!-- not-run: a layout -->\n```text\nx\n```\n",
                    encoding="utf-8")
    failed = evaluate(page, tmp_path / "cache").failures
    assert len(failed) == 1 and "moon" in failed[0] and "page.md:4" in failed[0]
    assert update(page, tmp_path / "cache") == (True, [])
    assert "hello\nworld\n$ ls pytest.ini\n...\n```" in page.read_text(encoding="utf-8")
    assert not evaluate(page, tmp_path / "cache").failures
    assert update(page, tmp_path / "cache") == (False, [])


def test_json_of_blocks_hold_the_file_s_keys_and_values(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    shown = '"subset": {"n": 8, "by_type": {"a": 2, "...": 1}, "method": "normal: ..."}'
    page.write_text('```console\n$ echo \'{"x": {"subset": {"n": 8, "seed": 0, "by_type": '
                    '{"a": 2, "b": 1}, "method": "normal: sd"}}}\' > r.json\n```\n\n'
                    f"<!-- json-of: r.json -->\n```json\n{shown}\n```\n", encoding="utf-8")
    assert evaluate(page, tmp_path / "cache").failures == []
    page.write_text(page.read_text(encoding="utf-8").replace('"n": 8, "by', '"n": 9, "by'),
                    encoding="utf-8")
    failed = evaluate(page, tmp_path / "cache").failures
    assert len(failed) == 1 and "page.md:6: json-of r.json" in failed[0]
    assert '"subset": {"n": 8, "seed": 0' in failed[0]  # the real value, to mend by hand
    assert contains({"k": [1, 2]}, {"k": [1, 2]}) and not contains({"k": [1, 2]}, {"k": [1]})
    assert not contains({"k": 1}, {"k": 1.0}) and not contains({}, {"k": "..."})
