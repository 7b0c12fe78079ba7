"""Tiny, deterministic embedding models for tests: a WordPiece tokenizer.json and an ONNX file.

Nothing here downloads anything. The ONNX model is a lookup table, so every expected vector can
be computed by hand from the table the factory returns::

    from tests.support.model_factory import make_model_dir

    model = make_model_dir(tmp_path, dim=384)           # a folder resolve_model() accepts
    embedder = load_embedder(str(model.path), EmbedConfig())
    expected = model.expected("hello world")            # vipune's recipe, by hand
    assert np.allclose(embedder.embed_query("hello world"), expected, atol=1e-6)

The model's output for token ``t`` at a real position (attention mask 1) is ``table[t]``
(``TinyModel.table`` already includes the token-type-0 embedding when the model has a
``token_type_ids`` input). Padded positions (mask 0) get +1000 in every dimension, so a pooler
that forgot the mask would be far off.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""Ids 0..4, BERT's names; [PAD] is 0."""
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)

PAD_JUNK = 1000.0
"""What the tiny model adds to every dimension at a masked (padding) position."""

_WORDS_TEXT = """
    the be to of and a in that have i it for not on with he as you do at this but his by from
    they we say her she or an will my one all would there their what so up out if about who get
    which go me when make can like time no just him know take people into year your good some
    could them see other than then now look only come its over think also back after use two
    how our work first well way even new want because any these give day most us is are was
    were been has had did does am yes hello hi thanks thank please sorry sure okay help need
    user assistant question answer remember told said name favorite live moved city home family
    friend mother father sister brother dog cat car house job trip travel book movie music song
    game food dinner lunch breakfast coffee tea restaurant week month weekend today yesterday
    tomorrow morning evening night birthday party gift plan meeting doctor school class store
    buy bought price money new old big small best last next long little great right left
    where why much many more very really still again never always often
"""
DEFAULT_WORDS: tuple[str, ...] = (
    *_WORDS_TEXT.split(),
    *".,?!:;'\"-()/",
    *"0123456789",
)
"""About 230 common English words, punctuation and digits: generated chat text tokenizes mostly
to real ids (numbers split into digit pieces through the ``##`` suffixes below)."""

SUFFIXES: tuple[str, ...] = (
    *("##s", "##ed", "##ing", "##er", "##ly", "##'s"),
    *(f"##{d}" for d in "0123456789"),
)
"""WordPiece continuation pieces, so ``cats`` -> ``cat ##s`` and ``2023`` -> ``2 ##0 ##2 ##3``."""


def vocabulary(words: Sequence[str] = DEFAULT_WORDS) -> dict[str, int]:
    """The vocabulary :func:`build_wordpiece_tokenizer` writes: specials, words, suffixes."""
    vocab: dict[str, int] = {}
    for token in (*SPECIAL_TOKENS, *words, *SUFFIXES):
        if token not in vocab:
            vocab[token] = len(vocab)
    return vocab


def build_wordpiece_tokenizer(path: Path, vocab_words: Sequence[str] = DEFAULT_WORDS) -> Tokenizer:
    """Write a BERT-style WordPiece ``tokenizer.json`` to ``path`` and return the tokenizer.

    Lower-casing BertNormalizer, BertPreTokenizer, WordPiece over ``[PAD]=0, [UNK], [CLS],
    [SEP], [MASK]`` + the words + :data:`SUFFIXES`, post-processor ``[CLS] $A [SEP]``. The file
    sets no padding and no truncation (the embedder sets truncation itself).
    """
    vocab = vocabulary(vocab_words)
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", CLS_ID), ("[SEP]", SEP_ID)],
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return tokenizer


def build_tiny_onnx(
    path: Path,
    vocab_size: int,
    dim: int,
    *,
    token_type_input: bool,
    output_name: str = "last_hidden_state",
    seed: int = 0,
) -> np.ndarray:
    """Write a lookup-table "transformer" as ONNX; return its effective table (vocab, dim).

    Inputs ``input_ids`` and ``attention_mask`` ([batch, seq] int64) and, when
    ``token_type_input``, ``token_type_ids``. Output ``output_name`` [batch, seq, dim] float32::

        out = Gather(table, input_ids) [+ Gather(type_table, token_type_ids)]
              + (1 - attention_mask) * PAD_JUNK

    The returned table is ``table + type_table[0]`` (what a token gives with token type 0, as
    the embedder feeds), or ``table`` without the token-type input. Token type 1 would add a
    different row, so a wrongly fed ``token_type_ids`` shows. Opset 17, IR version 8.
    """
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((vocab_size, dim)).astype(np.float32)
    type_table = rng.standard_normal((2, dim)).astype(np.float32)
    inits = [
        numpy_helper.from_array(table, "embedding_table"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "one_i64"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "last_axis"),
        numpy_helper.from_array(np.array(PAD_JUNK, dtype=np.float32), "pad_junk"),
    ]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
    ]
    nodes = [helper.make_node("Gather", ["embedding_table", "input_ids"], ["tokens"], axis=0)]
    summed = "tokens"
    if token_type_input:
        inits.append(numpy_helper.from_array(type_table, "type_table"))
        inputs.append(
            helper.make_tensor_value_info(
                "token_type_ids", TensorProto.INT64, ["batch", "sequence"]
            )
        )
        nodes += [
            helper.make_node("Gather", ["type_table", "token_type_ids"], ["types"], axis=0),
            helper.make_node("Add", ["tokens", "types"], ["typed"]),
        ]
        summed = "typed"
    nodes += [
        helper.make_node("Sub", ["one_i64", "attention_mask"], ["unmasked_i64"]),
        helper.make_node("Cast", ["unmasked_i64"], ["unmasked"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["unmasked", "last_axis"], ["unmasked_3d"]),
        helper.make_node("Mul", ["unmasked_3d", "pad_junk"], ["junk"]),
        helper.make_node("Add", [summed, "junk"], [output_name]),
    ]
    output = helper.make_tensor_value_info(
        output_name, TensorProto.FLOAT, ["batch", "sequence", dim]
    )
    graph = helper.make_graph(nodes, "tiny_lookup_encoder", inputs, [output], initializer=inits)
    model = helper.make_model(
        # The module's name before it moved to tests/support: kept, so the model's bytes (and
        # every fingerprint made from them) stay the same.
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tests.model_factory"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return table + type_table[0] if token_type_input else table


class TinyModel(NamedTuple):
    """A model directory made by :func:`make_model_dir`, and its table for hand computation."""

    path: Path
    """The directory: pass ``str(path)`` as the model spec."""
    table: np.ndarray
    """(vocab, dim) float32: the output row of each token id at a real position."""

    @property
    def tokenizer(self) -> Tokenizer:
        """The directory's tokenizer, with no padding and no truncation."""
        tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return tokenizer

    def ids(self, text: str, max_length: int = 512) -> list[int]:
        """Token ids as the embedder computes them: special tokens, truncation, no padding."""
        tokenizer = self.tokenizer
        tokenizer.enable_truncation(max_length=max_length)
        return list(tokenizer.encode(text).ids)

    def expected(self, text: str, *, pooling: str = "mean", max_length: int = 512) -> np.ndarray:
        """vipune's recipe by hand: pool the table rows of ``text``'s ids, L2-normalise.

        The empty string gives the zero vector (as in vipune).
        """
        if text == "":
            return np.zeros(self.table.shape[1], dtype=np.float32)
        rows = self.table[self.ids(text, max_length)].astype(np.float64)
        pooled = rows[0] if pooling == "cls" else rows.mean(axis=0)
        vector: np.ndarray = (pooled / max(float(np.linalg.norm(pooled)), 1e-9)).astype(np.float32)
        return vector


def make_model_dir(
    tmp_path: Path,
    *,
    dim: int = 8,
    token_type_input: bool = True,
    output_name: str = "last_hidden_state",
    words: Sequence[str] = DEFAULT_WORDS,
    layout: str = "onnx/model.onnx",
    seed: int = 0,
    name: str = "tiny-model",
) -> TinyModel:
    """A complete local model directory ``tmp_path / name`` as ``resolve_model`` expects.

    ``layout`` is where the ONNX file goes (``"onnx/model.onnx"`` or ``"model.onnx"``).
    Use ``dim=384`` where vipune's store format (384 float32) is needed.
    """
    directory = tmp_path / name
    tokenizer = build_wordpiece_tokenizer(directory / "tokenizer.json", words)
    table = build_tiny_onnx(
        directory / layout,
        tokenizer.get_vocab_size(with_added_tokens=True),
        dim,
        token_type_input=token_type_input,
        output_name=output_name,
        seed=seed,
    )
    return TinyModel(directory, table)
