"""The benchmark's inputs: the scales (synthetic LongMemEval_M presets), the dataset generated
once per scale under ``--data-dir``, and the tiny test model (dim 384)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.measuring import Results
from pytest_retrieval_eval.data.generator import instances as generator

DEFAULT_DATA_DIR = Path.home() / ".cache" / "pytest-retrieval-eval-bench"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Scale:
    name: str
    config: generator.GeneratorConfig
    embed_sessions: int  # sessions for the MiniLM throughput check
    queries: int  # questions for the per-query latency check


SCALES = {
    "full": Scale("full", generator.FULL_M, 300, 100),
    "small": Scale("small", generator.FULL_M.scaled(instances=50, sessions=100), 24, 30),
    # M's history length, 40 personas: the memory phases on a shared machine
    "medium": Scale("medium", generator.FULL_M.scaled(instances=40, sessions=450), 24, 30),
}


# --------------------------------------------------------------------------- data


def ensure_data(scale: Scale, base: Path, results: Results) -> tuple[Path, Path]:
    """The dataset file and the tiny model folder, generated once and reused."""
    folder = base / scale.name
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "synthetic_m.json"
    stamp = folder / "synthetic_m.config"
    wanted = repr(scale.config)
    if not data.is_file() or not stamp.is_file() or stamp.read_text() != wanted:
        print(f"generating {data} ...", flush=True)
        began = time.perf_counter()
        size = generator.write_dataset(scale.config, data)
        stamp.write_text(wanted)
        results.facts.append(
            f"dataset generated in {time.perf_counter() - began:.0f} s ({size / 1e9:.2f} GB)")
    return data, ensure_tiny_model(base)


def ensure_tiny_model(base: Path) -> Path:
    """The tiny test model (dim 384), made once under ``base``."""
    model_root = base / "model-tiny-384"
    model = model_root / "tiny-model"
    if not (model / "tokenizer.json").is_file():
        from tests.support.model_factory import make_model_dir

        model = make_model_dir(model_root, dim=384).path
    return model
