"""Token counts (vectors/token_counts.py): bpe-openai's counts against tiktoken's own encoder,
a tokenizer.json's against the tokenizers library's, and the content-addressed disk cache."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_retrieval_eval.config.options import BUDGET_ENCODINGS, DEFAULT_BUDGET_TOKENIZER
from pytest_retrieval_eval.data.pairs import text_key
from pytest_retrieval_eval.errors import DataError, ModelError, StopRun
from pytest_retrieval_eval.vectors import token_counts as tc
from tests.support.model_factory import build_wordpiece_tokenizer

SAMPLES = [
    "hello world",
    "Hello, world!",
    "user: I bought a   2019 Subaru Outback last week\nassistant: congratulations!",
    "ünïcødé 日本語のテキスト 🎉🎉 ﷽",
    "the text of a memory may hold <|endoftext|> as plain characters",
    "A" * 3000,
    "  \n\n\t ",
    "",
]


def _tiktoken(name: str) -> object:
    """tiktoken's own encoder (its Rust BPE and regex) on the rank file bpe-openai ships:
    an independent implementation of the same encoding, built offline."""
    import tiktoken  # the [test] extra's: never skipped
    from bpe_openai import registry

    spec = getattr(registry, name)()
    return tiktoken.Encoding(name=name, pat_str=spec["pat_str"],
                             mergeable_ranks=spec["mergeable_ranks"],
                             special_tokens=spec["special_tokens"])


@pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", BUDGET_ENCODINGS)
def test_counts_equal_tiktokens(name: str) -> None:
    counter = tc.load_counter(name)
    reference = _tiktoken(name)
    for text in SAMPLES:
        assert counter.count(text) == len(reference.encode_ordinary(text)), text  # type: ignore[attr-defined]
    assert counter.identity["name"] == name and counter.identity["library"] == "bpe-openai"


@pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")
def test_known_ids_of_cl100k() -> None:
    # tiktoken's published ids of "hello world" in cl100k_base: [15339, 1917].
    reference = _tiktoken("cl100k_base")
    assert reference.encode_ordinary("hello world") == [15339, 1917]  # type: ignore[attr-defined]
    assert tc.load_counter("cl100k_base").count("hello world") == 2


def test_options_name_the_same_encodings() -> None:
    assert BUDGET_ENCODINGS == tc.ENCODINGS
    assert DEFAULT_BUDGET_TOKENIZER == tc.DEFAULT_TOKENIZER


def test_tokenizer_json_counts_as_the_library_does(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    tokenizer = build_wordpiece_tokenizer(path)
    counter = tc.load_counter(str(path))
    for text in ["alpha beta gamma", "nothing known here at all", ""]:
        want = len(tokenizer.encode(text, add_special_tokens=False).ids)
        assert counter.count(text) == want
    assert counter.identity["library"] == "tokenizers"
    assert len(counter.identity["sha256"]) == 64


def test_missing_file_and_bad_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file; give o200k_base, cl100k_base"):
        tc.load_counter(str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match=r"not a tokenizer\.json") as caught:
        tc.load_counter(str(bad))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("kind", ["folder", "fifo", "device"])
def test_a_tokenizer_path_that_is_no_file_is_named_as_such(tmp_path: Path, kind: str) -> None:
    """Issue 43.16: a folder, a FIFO or a device was called "no such file"."""
    import os

    path = tmp_path / "tok"
    if kind == "folder":
        path.mkdir()
        said = "is a directory, not a file (give the tokenizer.json inside it)"
    elif kind == "fifo":
        os.mkfifo(path)
        said = "is a FIFO (named pipe), not a regular file"
    else:
        path = Path(os.devnull)
        said = "is a character device, not a regular file"
    with pytest.raises(DataError) as caught:
        tc.load_counter(str(path))
    assert str(caught.value) == (f"--retrieval-eval-budget-tokenizer {path}: {said}; give "
                                 "o200k_base, cl100k_base or the path of a tokenizer.json")


def test_missing_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # import fails as if not installed
    with pytest.raises(ModelError) as caught:
        tc.load_counter("o200k_base")
    assert "pip install bpe-openai, or give" in str(caught.value)  # not on PyPI: its dep
    assert "\n" not in str(caught.value)


def test_missing_extra_is_one_line_at_the_start_of_a_warm_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether bpe-openai is installed is asked without importing it: a run whose counts are
    all cached (the tokenizer never built) still refuses at its start, in the same line."""
    warm = tc.run_counts("o200k_base", tmp_path)
    key = text_key("hello world")
    assert warm.counts([key], lambda m: ["hello world"]) == [2]
    warm.flush()
    monkeypatch.setitem(sys.modules, "bpe_openai", None)
    with pytest.raises(ModelError, match="pip install bpe-openai, or give"):
        tc.run_counts("o200k_base", tmp_path)


LAZY_PROBE = """
import sys
from pathlib import Path
from pytest_retrieval_eval.data.pairs import text_key
from pytest_retrieval_eval.vectors.token_counts import run_counts
def loaded():
    return any(m.split(".")[0] in ("bpe_openai", "tokenizers") for m in sys.modules)
counts = run_counts(sys.argv[1], Path(sys.argv[2]))
before = loaded()
texts = {text_key(t): t for t in sys.argv[3:]}
got = counts.counts(list(texts), lambda missing: [texts[k] for k in missing])
counts.flush()
print(before, loaded(), got)
"""


BINDINGS_PROBE = """
import sys
from pytest_retrieval_eval.vectors import token_counts as tc
count = tc.load_counter("o200k_base").count
print(count("hello world, how are you?"), "bpe_openai" in sys.modules,
      "bpe_openai._bindings" in sys.modules, "bpe_openai.compat" in sys.modules)
"""


def test_bpe_openai_is_loaded_without_its_packages_import_time_tables() -> None:
    """Its ``__init__`` decodes three rank files in Python (1.2 s of every cold budget run);
    the Rust extension alone is loaded, and counts as the package's own import does."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", BINDINGS_PROBE], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.split() == ["7", "False", "True", "False"]


def test_bpe_openai_falls_back_to_the_package_import_where_its_layout_is_unknown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.machinery

    from bpe_openai import _bindings

    monkeypatch.delitem(sys.modules, "bpe_openai._bindings", raising=False)
    monkeypatch.setattr(importlib.machinery, "EXTENSION_SUFFIXES", [".no-such-suffix"])
    assert tc._bpe_bindings() is _bindings  # the package's own, imported as usual
    text = "a budget of 500 tokens éé <|endoftext|>"
    assert tc.load_counter("o200k_base").count(text) == _bindings.tokenizer_for_encoding(
        "o200k_base").count(text)


@pytest.mark.parametrize("spec", ["o200k_base", "tokenizer.json"])
def test_the_tokenizer_is_built_only_when_a_count_is_missing(tmp_path: Path,
                                                             spec: str) -> None:
    """A first run builds the tokenizer at its start; a run whose counts are all cached
    (fresh processes: a library is imported once a process) loads neither bpe-openai nor
    the tokenizers library, and a run that meets one new text builds it then."""
    import subprocess

    if spec != "o200k_base":
        spec = str(tmp_path / spec)
        build_wordpiece_tokenizer(Path(spec))

    def run(*texts: str) -> tuple[str, list[int]]:
        done = subprocess.run([sys.executable, "-c", LAZY_PROBE, spec,
                               str(tmp_path / "cache"), *texts],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-1500:]
        loaded, counted = done.stdout.strip().split(" ", 2)[:2], done.stdout.split(" ", 2)[2]
        return " ".join(loaded), json.loads(counted)

    cold = run("alpha beta", "gamma")
    assert cold[0] == "True True"  # a cold folder: built at the start
    assert run("alpha beta", "gamma") == ("False False", cold[1])  # warm: never loaded
    loaded, counted = run("gamma", "delta alpha")  # one text not counted yet: built then
    assert loaded == "False True" and counted[0] == cold[1][1]
    assert counted[1] == tc.load_counter(spec).count("delta alpha")


def test_a_lazy_file_that_is_no_tokenizer_stops_the_run_at_its_first_count(
        tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    counter = tc.load_counter(str(bad), lazy=True)  # read and hashed: not parsed
    assert len(counter.identity["sha256"]) == 64
    with pytest.raises(StopRun, match=r"not a tokenizer\.json") as caught:
        counter.count("x")
    assert "\n" not in str(caught.value)


def _words() -> tc.TokenCounter:
    return tc.TokenCounter({"name": "words", "library": "test"}, lambda t: len(t.split()))


def _refusing() -> tc.TokenCounter:
    def count(text: str) -> int:
        raise AssertionError(f"counted again: {text!r}")

    return tc.TokenCounter({"name": "words", "library": "test"}, count)


def test_counted_once_then_read_from_disk(tmp_path: Path) -> None:
    texts = {text_key(t): t for t in ["one two", "three four five", "six"]}
    keys = list(texts)
    asked: list[list[str]] = []

    def loader(missing: list[str]) -> list[str]:
        asked.append(list(missing))
        return [texts[k] for k in missing]

    counts = tc.TokenCounts(_words(), tmp_path / "tokens")
    assert counts.counts([*keys, keys[0]], loader) == [2, 3, 1, 2]
    assert counts.counts(keys, loader) == [2, 3, 1]  # in memory: no text asked again
    assert asked == [keys]
    counts.flush()
    shards = list((tmp_path / "tokens").glob("counts-*.json"))
    assert len(shards) == 1 and (shards[0].parent / (shards[0].name + ".sha256")).exists()
    # Another process (the same tokenizer's identity): every count from disk.
    again = tc.TokenCounts(_refusing(), tmp_path / "tokens")
    assert again.counts(keys, lambda m: pytest.fail("texts read")) == [2, 3, 1]


def test_a_damaged_shard_is_removed_and_counted_again(tmp_path: Path) -> None:
    folder = tmp_path / "tokens"
    first = tc.TokenCounts(_words(), folder)
    key = text_key("a b c")
    first.counts([key], lambda m: ["a b c"])
    first.flush()
    shard = next(folder.glob("counts-*.json"))
    data = json.loads(shard.read_text())
    data["counts"][key] = 99  # a flipped count: the sidecar no longer matches
    shard.write_text(json.dumps(data))
    again = tc.TokenCounts(_words(), folder)
    assert again.counts([key], lambda m: ["a b c"]) == [3]
    assert not shard.exists()


def test_shards_are_merged_past_the_limit(tmp_path: Path) -> None:
    folder = tmp_path / "tokens"
    for i in range(tc.MAX_SHARDS + 1):
        writer = tc.TokenCounts(_words(), folder)
        writer.counts([text_key(f"w{i} x")], lambda m, i=i: [f"w{i} x"])  # type: ignore[misc]
        writer.flush()
    assert len(list(folder.glob("counts-*.json"))) == 1
    reader = tc.TokenCounts(_refusing(), folder)
    assert reader.counts([text_key(f"w{i} x") for i in range(tc.MAX_SHARDS + 1)],
                         lambda m: pytest.fail("texts read")) == [2] * (tc.MAX_SHARDS + 1)


def test_no_folder_writes_nothing(tmp_path: Path) -> None:
    counts = tc.TokenCounts(_words(), None)
    assert counts.counts([text_key("x y")], lambda m: ["x y"]) == [2]
    counts.flush()
    assert not any(tmp_path.iterdir())


def test_the_cache_folder_is_keyed_by_the_tokenizer(tmp_path: Path) -> None:
    a = tc.TokenCounter({"name": "o200k_base", "library": "bpe-openai", "version": "1"}, len)
    b = tc.TokenCounter({"name": "cl100k_base", "library": "bpe-openai", "version": "1"}, len)
    c = tc.TokenCounter({"name": "o200k_base", "library": "bpe-openai", "version": "2"}, len)
    dirs = {tc.tokens_dir(tmp_path, x) for x in (a, b, c)}
    assert len(dirs) == 3 and all(d.parent == tmp_path / "tokens" for d in dirs)


def test_loading_an_encoding_shows_no_library_deprecation() -> None:
    """bpe-openai 0.1.x opens its ranks with a deprecated importlib.resources call, at import
    and per encoding; the main job printed that warning three times after its summary. In a
    fresh process (the library imported once a process), with such warnings made errors."""
    import subprocess

    code = ("from pytest_retrieval_eval.vectors.token_counts import load_counter\n"
            "print(load_counter('o200k_base').count('hello world'))")
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.strip() == "2" and done.stderr == ""
