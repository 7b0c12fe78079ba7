"""Embedding model resolution and vipune's embedding recipe (onnxruntime + tokenizers).

vipune (v0.1.8, ``src/embedding.rs``) embeds one text per call with ``BAAI/bge-small-en-v1.5``:

- files ``onnx/model.onnx`` (falling back to ``model.onnx``) and ``tokenizer.json`` from the
  Hugging Face Hub, cached after the first download;
- tokenizer padding off, truncation to 512 tokens, special tokens added (``[CLS] ... [SEP]``);
- inputs ``input_ids`` and ``attention_mask`` (int64), plus ``token_type_ids`` (zeros) only
  where the model declares it; output ``last_hidden_state`` (or ``token_embeddings``);
- attention-mask-weighted *mean* pooling, then L2 normalisation with the norm floored at 1e-9;
- the empty string gives the zero vector (see :meth:`Embedder.embed` for what else does).

:class:`Embedder` reproduces that recipe, and batches it: texts are tokenized, sorted by length
and run in batches of similar length, right-padded with the attention mask 0. Pad positions are
masked out of the attention and of the pooling, so a batch gives the vectors that one-at-a-time
embedding gives, to float32 rounding.

:func:`~.model_files.resolve_model` finds the two files (a local folder or a Hub id, cache
first; :mod:`.model_files`), :func:`load_embedder` builds the :class:`Embedder`, and long
texts are tokenized by a bounded prefix (:mod:`.long_texts`). Every failure raises
:class:`~pytest_retrieval_eval.errors.ModelError` with a one-line message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from ..errors import ModelError, one_line
from .long_texts import CHARS_PER_TOKEN, encode_bounded
from .model_files import (
    DEFAULT_MODEL,
    VIPUNE_MAX_LENGTH,
    ModelFiles,
    model_max_length,
    position_limit,
    resolve_model,
)

__all__ = [
    "DEFAULT_MODEL",
    "EmbedConfig",
    "Embedder",
    "ModelFiles",
    "load_embedder",
    "recipe_fingerprint",
    "resolve_model",
    "resolved",
]

RECIPE_VERSION = 1
"""Bumped whenever a change here changes the vectors; part of the fingerprint."""

OUTPUT_NAMES = ("last_hidden_state", "token_embeddings")
"""Accepted names of the per-token output, in vipune's order of preference."""

NORM_FLOOR = 1e-9
CPU_MAX_BATCH_TOKENS = 512
"""On the CPU, a batch holds at most this many padded tokens (or one text); see Embedder."""

Pooling = Literal["mean", "cls"]
Device = Literal["cpu", "cuda"]
FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class EmbedConfig:
    """How texts become vectors. The defaults are vipune's recipe.

    ``pooling``, ``max_length`` and ``query_prefix`` change the vectors (they are in the
    fingerprint); ``device``, ``threads`` and ``batch_size`` only change the speed.
    ``max_length`` None: the model's own (its ``sentence_bert_config.json``'s
    ``max_seq_length``: 256 for all-MiniLM-L6-v2), else vipune's 512 (:func:`resolved`).
    """

    pooling: Pooling = "mean"
    max_length: int | None = None
    query_prefix: str = ""
    device: Device = "cpu"
    threads: int | None = None
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "cls"):
            raise ModelError(f"pooling {self.pooling!r}: unknown; use 'mean' (vipune) or 'cls'")
        if self.max_length is not None and (
            isinstance(self.max_length, bool)
            or not isinstance(self.max_length, int)
            or (self.max_length < 2)
        ):
            raise ModelError(
                f"max_length {self.max_length!r}: must be a whole number of tokens >= 2 "
                "([CLS] and [SEP] take two); vipune uses 512"
            )
        if not isinstance(self.query_prefix, str):
            raise ModelError(f"query_prefix {self.query_prefix!r}: must be text; vipune uses ''")
        if self.device not in ("cpu", "cuda"):
            raise ModelError(f"device {self.device!r}: unknown; use 'cpu' or 'cuda'")
        if self.threads is not None and (
            isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1
        ):
            raise ModelError(
                f"threads {self.threads!r}: must be a whole number >= 1, or unset for "
                "onnxruntime's default"
            )
        if (
            isinstance(self.batch_size, bool)
            or not isinstance(self.batch_size, int)
            or (self.batch_size < 1)
        ):
            raise ModelError(f"batch_size {self.batch_size!r}: must be a whole number >= 1")


# ---------------------------------------------------------------------------------------------
# Embedder


class Embedder:
    """vipune's embedding recipe over one ONNX model and its tokenizer.

    Build it with :func:`load_embedder`. Attributes: ``name`` (the model spec as given, or the
    local directory's name), ``fingerprint`` (sha256 hex over the model and tokenizer bytes and
    the vector-changing options), ``dim`` (vector length), ``config`` and ``files``.
    """

    name: str
    fingerprint: str
    dim: int

    def __init__(self, files: ModelFiles, config: EmbedConfig | None = None) -> None:
        import onnxruntime as ort

        self.files = files
        config, self.max_length_from = resolved(config or EmbedConfig(), files)
        self.config = config
        self.name = files.name
        length = config.max_length
        assert length is not None  # resolved
        self.max_length: int = length

        limit = position_limit(files.config_path)
        if limit is not None and length > limit:
            raise ModelError(
                f"max_length {config.max_length}: model {files.name!r} takes at most {limit} "
                f"tokens (max_position_embeddings in its config.json); use {limit} or less"
            )

        try:
            tokenizer = Tokenizer.from_file(str(files.tokenizer_path))
        except Exception as exc:
            raise ModelError(
                f"tokenizer {str(files.tokenizer_path)!r}: not a Hugging Face tokenizers file "
                f"({one_line(exc, 120)}); use the model's own tokenizer.json"
            ) from exc
        padding = tokenizer.padding
        self._pad_id = self._find_pad_id(tokenizer, padding)
        # A tokenizer.json may carry padding/truncation settings (sentence-transformers exports
        # often do): vipune overrides both, and so do we.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=length)
        self._tokenizer = tokenizer

        options = ort.SessionOptions()
        # vipune builds its session with GraphOptimizationLevel::Level1 (= ORT_ENABLE_BASIC);
        # the extended fusions change float rounding a little, so keep to the same level.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.log_severity_level = 3
        if config.threads is not None:
            options.intra_op_num_threads = config.threads
        providers = ["CPUExecutionProvider"]
        if config.device == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise ModelError(
                    "device 'cuda': onnxruntime here has no CUDAExecutionProvider (onnxruntime-gpu "
                    "is not installed, or CUDA is absent); install onnxruntime-gpu in place of "
                    "onnxruntime on a machine with CUDA, or use --retrieval-eval-device=cpu"
                )
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        try:
            session = ort.InferenceSession(
                str(files.model_path), sess_options=options, providers=providers
            )
        except Exception as exc:
            raise ModelError(
                f"model file {str(files.model_path)!r}: onnxruntime cannot load it as an ONNX "
                f"model ({type(exc).__name__}: {one_line(exc, 160)}); give a folder whose "
                "onnx/model.onnx is an ONNX export of the model"
            ) from exc
        if config.device == "cuda" and "CUDAExecutionProvider" not in session.get_providers():
            raise ModelError(
                "device 'cuda': onnxruntime fell back to the CPU (the CUDA libraries or a GPU are "
                "missing); install CUDA and cuDNN as onnxruntime-gpu requires, or use "
                "--retrieval-eval-device=cpu"
            )
        self._session = session

        input_names = [i.name for i in session.get_inputs()]
        for required in ("input_ids", "attention_mask"):
            if required not in input_names:
                raise ModelError(
                    f"model file {str(files.model_path)!r}: has no {required!r} input (inputs: "
                    f"{', '.join(input_names)}); vipune's recipe needs input_ids and "
                    "attention_mask: export the model with them"
                )
        extra = [
            n for n in input_names if n not in ("input_ids", "attention_mask", "token_type_ids")
        ]
        if extra:
            raise ModelError(
                f"model file {str(files.model_path)!r}: needs inputs this recipe does not give "
                f"({', '.join(extra)}); export it with input_ids, attention_mask and optionally "
                "token_type_ids only"
            )
        self._token_type = "token_type_ids" in input_names
        output_names = [o.name for o in session.get_outputs()]
        chosen = next((n for n in OUTPUT_NAMES if n in output_names), None)
        if chosen is None:
            raise ModelError(
                f"model file {str(files.model_path)!r}: no 'last_hidden_state' or "
                f"'token_embeddings' output (outputs: {', '.join(output_names)}); export the "
                "per-token hidden states under one of those names"
            )
        self._output = chosen
        # On the CPU, padding long texts into one batch costs more than it saves (measured on
        # MiniLM-L6, one thread: ~300-token texts ran 13 texts per CPU-second one at a time and 8
        # in batches of 32, while 15-token questions ran 2x faster batched). So CPU batches also
        # stop at this many padded tokens; a GPU takes whole batches. Vectors do not change.
        self.max_batch_tokens: int | None = CPU_MAX_BATCH_TOKENS if config.device == "cpu" else None

        probe = self._run(
            np.array([self._probe_ids()], dtype=np.int64),
            np.ones((1, len(self._probe_ids())), dtype=np.int64),
        )
        if probe.ndim != 3 or probe.shape[0] != 1:
            raise ModelError(
                f"model file {str(files.model_path)!r}: output {chosen!r} has shape "
                f"{list(probe.shape)}, expected [batch, sequence, hidden]; export the per-token "
                "hidden states"
            )
        self.dim = int(probe.shape[2])

        self.fingerprint = recipe_fingerprint(files.model_sha256, files.tokenizer_sha256, config)

    # -- internals ------------------------------------------------------------------------------

    @staticmethod
    def _find_pad_id(tokenizer: Tokenizer, padding: dict[str, Any] | None) -> int:
        """The id right-padding uses (its value does not matter: pad positions are masked)."""
        if padding and isinstance(padding.get("pad_id"), int):
            return int(padding["pad_id"])
        for token in ("[PAD]", "<pad>"):
            found = tokenizer.token_to_id(token)
            if found is not None:
                return int(found)
        return 0

    def _probe_ids(self) -> list[int]:
        ids = list(self._tokenizer.encode("a").ids)
        return ids or [self._pad_id]

    def _batches(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        """Split indices sorted by length into batches: at most ``batch_size`` texts, and (when
        ``max_batch_tokens`` is set) at most that many padded tokens unless the batch is one text.
        """
        budget = self.max_batch_tokens
        batches: list[list[int]] = []
        current: list[int] = []
        for j in order:
            grown = len(current) + 1
            if current and (
                grown > self.config.batch_size
                or (budget is not None and grown * lengths[j] > budget)
            ):
                batches.append(current)
                current = []
            current.append(j)
        if current:
            batches.append(current)
        return batches

    def _run(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> FloatArray:
        feeds: dict[str, npt.NDArray[np.int64]] = {"input_ids": ids, "attention_mask": mask}
        if self._token_type:
            feeds["token_type_ids"] = np.zeros_like(ids)
        try:
            (hidden,) = self._session.run([self._output], feeds)
        except Exception as exc:
            raise ModelError(
                f"model {self.files.name!r}: onnxruntime failed on a batch of shape "
                f"{list(ids.shape)} ({type(exc).__name__}: {one_line(exc, 160)}); lower "
                "--retrieval-eval-max-length or --retrieval-eval-batch-size, or check the export"
            ) from exc
        return np.asarray(hidden, dtype=np.float32)

    def _pool(self, hidden: FloatArray, mask: npt.NDArray[np.int64]) -> FloatArray:
        """Pool (mean over the mask, or [CLS]) and L2-normalise, row by row."""
        if self.config.pooling == "cls":
            pooled = hidden[:, 0, :].astype(np.float64)
        else:
            weights = mask.astype(np.float64)
            summed = np.einsum("bsd,bs->bd", hidden.astype(np.float64), weights)
            counts = np.maximum(weights.sum(axis=1, keepdims=True), NORM_FLOOR)
            pooled = summed / counts
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), NORM_FLOOR)
        normalised: FloatArray = (pooled / norms).astype(np.float32)
        return normalised

    # -- public ---------------------------------------------------------------------------------

    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> FloatArray:
        """Embed texts; float32 array (len(texts), dim), rows in input order.

        Zero vector: the empty string (vipune's ``text.is_empty()``), and a text whose encoding
        has no ids at all (vipune's ``input_ids.is_empty()``; possible only with a tokenizer
        that adds no special tokens). vipune v0.1.8 does NOT zero white-space-only text: it
        encodes to ``[CLS] [SEP]`` and is embedded like any other text (its own test
        ``test_integration_whitespace_only`` expects a valid, non-zero vector), and so is it here.
        vipune never meets such a text through its commands: ``add`` rejects blank content and
        search trims the query and rejects it when empty.

        Texts are tokenized in windows, sorted by token count and run in batches of up to
        ``batch_size`` texts of similar length (length bucketing; on the CPU also at most
        ``max_batch_tokens`` padded tokens), right-padded with the attention mask 0.
        ``progress(n)`` is called once per batch with the batch's size (and once for the
        zero-vector texts), so the increments add up to ``len(texts)``.
        """
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo = [i for i, text in enumerate(texts) if text != ""]
        zeros = len(texts) - len(todo)
        batch_size = self.config.batch_size
        window = max(batch_size * 32, 1024)
        for start in range(0, len(todo), window):
            chunk = todo[start : start + window]
            encodings = encode_bounded(self._tokenizer, [texts[i] for i in chunk],
                                       self.max_length * CHARS_PER_TOKEN)
            ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
            del encodings
            order = sorted(range(len(chunk)), key=lambda j: len(ids[j]))
            no_ids = [j for j in order if len(ids[j]) == 0]
            zeros += len(no_ids)
            order = [j for j in order if len(ids[j]) > 0]
            for members in self._batches(order, [len(x) for x in ids]):
                width = len(ids[members[-1]])  # sorted: the last member is the longest
                batch_ids = np.full((len(members), width), self._pad_id, dtype=np.int64)
                batch_mask = np.zeros((len(members), width), dtype=np.int64)
                for row, j in enumerate(members):
                    batch_ids[row, : len(ids[j])] = ids[j]
                    batch_mask[row, : len(ids[j])] = 1
                vectors = self._pool(self._run(batch_ids, batch_mask), batch_mask)
                out[[chunk[j] for j in members]] = vectors
                if progress is not None:
                    progress(len(members))
        if progress is not None and zeros:
            progress(zeros)
        return out

    def embed_query(self, text: str) -> FloatArray:
        """Embed one query: ``query_prefix + text``; float32 (dim,).

        The text is used as given: vipune trims the query before embedding it, so callers that
        reproduce vipune's search trim first (and embed cached questions the same way).
        """
        vector: FloatArray = self.embed([self.config.query_prefix + text])[0]
        return vector

    def embed_queries(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> FloatArray:
        """Batched :meth:`embed_query`: the prefix applied to each text; (len(texts), dim)."""
        prefix = self.config.query_prefix
        return self.embed([prefix + t for t in texts], progress)

    def info(self) -> dict[str, object]:
        """What identifies these vectors: for the cache manifest and the report."""
        return {
            "name": self.name,
            "fingerprint": self.fingerprint,
            "dim": self.dim,
            "pooling": self.config.pooling,
            "max_length": self.config.max_length,
            "max_length_from": self.max_length_from,
            "query_prefix": self.config.query_prefix,
            "model_sha256": self.files.model_sha256,
            "tokenizer_sha256": self.files.tokenizer_sha256,
        }

    def __repr__(self) -> str:
        return f"Embedder(name={self.name!r}, dim={self.dim}, fingerprint={self.fingerprint[:12]})"


def resolved(config: EmbedConfig, files: ModelFiles) -> tuple[EmbedConfig, str]:
    """``config`` with its max length decided, and where it came from (``asked``, ``model``
    or ``vipune``: the model info's ``max_length_from``, worded by the run header): as
    asked; else the model's own ``max_seq_length`` (its
    ``sentence_bert_config.json``, what sentence-transformers embeds with); else vipune's
    512 (``src/embedding.rs``). bge-small names 512 itself, so its vectors do not move."""
    from dataclasses import replace

    if config.max_length is not None:
        return config, "asked"
    own = model_max_length(files)
    if own is not None:
        return replace(config, max_length=own), "model"
    return replace(config, max_length=VIPUNE_MAX_LENGTH), "vipune"


def recipe_fingerprint(model_sha256: str, tokenizer_sha256: str, config: EmbedConfig) -> str:
    """The fingerprint of vectors made by a model's files under ``config``: sha256 over the
    recipe version, the files' hashes and the options that change a vector. Computed from the
    hashes alone, so ``prep`` can tell whether the cache already holds a model's vectors
    without building an onnxruntime session. ``config``'s max length is decided
    (:func:`resolved`)."""
    if config.max_length is None:
        raise ValueError("recipe_fingerprint needs a decided max length: resolved(config, files)")
    recipe = {
        "recipe": RECIPE_VERSION,
        "model_sha256": model_sha256,
        "tokenizer_sha256": tokenizer_sha256,
        "pooling": config.pooling,
        "max_length": config.max_length,
        "query_prefix": config.query_prefix,
    }
    return hashlib.sha256(
        json.dumps(recipe, sort_keys=True, ensure_ascii=True).encode("utf-8")
    ).hexdigest()


def load_embedder(
    spec: str = DEFAULT_MODEL, config: EmbedConfig | None = None, offline: bool = False,
    memo_dir: Path | None = None, deadline: float | None = None,
) -> Embedder:
    """Resolve ``spec`` (:func:`resolve_model`; a download bounded by ``deadline`` seconds,
    None: the default) and build its :class:`Embedder`."""
    bound = {} if deadline is None else {"deadline": deadline}
    return Embedder(resolve_model(spec, offline=offline, memo_dir=memo_dir, **bound),
                    config or EmbedConfig())
