"""``prep`` loads the model only when some vector it needs is missing: on the bundled sample
with its shipped vectors, ``prep --shard 1/2``, ``--shard 2/2`` and ``cache merge`` run with
no model and no network; a cache that lacks a vector, or is damaged, still loads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.cli import console as cli
from pytest_retrieval_eval.vectors import embedding
from tests.support.lme_factory import small_dataset
from tests.support.wrapped import unwrap, words

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The command's exit status, stdout (its lines whole again, whatever the terminal's
    width cut them into: tests/cli/test_widths.py checks the cutting) and stderr."""
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, unwrap(captured.out), captured.err


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every model load, recorded (and still done)."""
    calls: list[str] = []
    real = embedding.Embedder.__init__

    def counting(self: Any, files: Any, config: Any = None) -> None:
        calls.append(str(files.name))
        real(self, files, config)

    monkeypatch.setattr(embedding.Embedder, "__init__", counting)
    return calls


def test_sample_shards_and_merge_run_offline_without_a_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        loads: list[str]) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no model files anywhere
    for i in (1, 2):
        code, out, err = run(["prep", "--model", MINILM, "--cache", str(tmp_path / f"c{i}"),
                              "--shard", f"{i}/2", "--offline", "--no-progress"], capsys)
        assert code == 0, err
        first, second = out.splitlines()
        assert ", 0 embedded now, " in first
        assert first.endswith("(model sentence-transformers/all-MiniLM-L6-v2, fingerprint "
                              "b49cef8401c3; not loaded: every vector needed was cached)")
        assert second.startswith(f"shard {i}/2: 0 missing texts left to the other slices")
    code, out, err = run(["cache", "merge", str(tmp_path / "c1"), str(tmp_path / "c2"),
                          "--into", str(tmp_path / "merged"), "--no-progress"], capsys)
    assert code == 0, err
    assert out.startswith(f"merge: model {MINILM} (fingerprint b49cef8401c3): 0 vectors copied")
    code, out, _ = run(["models", "--cache", str(tmp_path / "c1"), "--no-bundled"], capsys)
    assert code == 0 and " ".join(words(out)).startswith(
        f"{MINILM} fingerprint b49cef8401c3 dim 384 0 vectors")
    assert loads == []
    # Turn granularity: the sample's turn vectors are shipped too (one more model-free prep).
    code, out, err = run(["prep", "--model", MINILM, "--cache", str(tmp_path / "t"),
                          "--granularity", "turn", "--offline", "--no-progress"], capsys)
    assert code == 0 and "not loaded" in out, err
    # Another model, not on this machine: nothing cached for it, so it must load and cannot.
    code, _, err = run(["prep", "--cache", str(tmp_path / "c1"), "--offline", "--no-progress"],
                       capsys)
    assert code == 4 and "BAAI/bge-small-en-v1.5" in err


def test_the_model_loads_only_for_what_is_missing(
        tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str],
        loads: list[str]) -> None:
    data = small_dataset(tmp_path / "d.json", 3)
    args = ["prep", "--data", str(data), "--model", str(tiny_model_dir), "--cache",
            str(tmp_path / "cache"), "--no-progress"]
    assert run(args, capsys)[0] == 0 and len(loads) == 1  # everything to embed
    code, out, _ = run(args, capsys)
    assert code == 0 and "not loaded" in out and len(loads) == 1  # all cached: no load
    code, out, _ = run([*args, "--query-prefix", "query: "], capsys)
    assert code == 0 and "not loaded" not in out and len(loads) == 2  # new query texts
    more = small_dataset(tmp_path / "more.json", 4)
    code, out, _ = run([*args[:2], str(more), *args[3:]], capsys)
    assert code == 0 and ", 6 embedded now" in out and len(loads) == 3  # q3: 5 sessions + 1


def test_an_unreachable_model_points_to_one_whose_vectors_are_cached(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`prep --offline` on the sample with the default model (bge-small, not on this
    machine) names the model whose vectors ship with the sample, as pytest's error does."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty Hugging Face cache
    code, _out, err = run(["prep", "--offline", "--cache", str(tmp_path / "c"),
                           "--no-progress"], capsys)
    assert code == 4
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("retrieval-eval: error: model 'BAAI/bge-small-en-v1.5'")
    assert err.rstrip().endswith(f"(nothing to download): --model {MINILM}")
    code, _out, err = run(["prep", "--offline", "--cache", str(tmp_path / "c"),
                           "--no-progress", "--model", MINILM], capsys)
    assert code == 0, err
