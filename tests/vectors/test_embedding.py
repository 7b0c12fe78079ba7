"""vipune's embedding recipe, pinned against hand computation on tiny lookup-table models.

The tiny ONNX model (tests/support/model_factory.py) outputs ``table[id]`` per real token, so
mean and [CLS] pooling, truncation and masking can all be computed by hand from the table.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from pytest_retrieval_eval.errors import ModelError
from pytest_retrieval_eval.io import hub as hub_mod
from pytest_retrieval_eval.io.checksums import memoised_sha256 as file_sha256
from pytest_retrieval_eval.vectors import embedding as emb
from pytest_retrieval_eval.vectors import model_files
from pytest_retrieval_eval.vectors.embedding import (
    EmbedConfig,
    Embedder,
    ModelFiles,
    load_embedder,
    resolve_model,
)
from tests.support.model_factory import (
    CLS_ID,
    DEFAULT_WORDS,
    PAD_JUNK,
    SEP_ID,
    TinyModel,
    make_model_dir,
    vocabulary,
)

WORDS = [w for w in DEFAULT_WORDS if w.isalpha()]
TEXTS = [
    "hello",
    "I moved to a new city last month, and my sister helps me.",
    "What is my favorite restaurant?",
    "the dog and the cat",
    "coffee",
    "We bought 2 tickets for the movie on Friday with 12 friends!",
    "my mother told me to call the doctor tomorrow morning",
    "xyzzy plugh",  # unknown words: [UNK] ids
]


@pytest.fixture
def model(tmp_path: Path) -> TinyModel:
    return make_model_dir(tmp_path)


@pytest.fixture
def embedder(model: TinyModel) -> Embedder:
    return load_embedder(str(model.path), EmbedConfig())


def one_line(exc: pytest.ExceptionInfo[ModelError]) -> str:
    message = str(exc.value)
    assert message and "\n" not in message and "\r" not in message, message
    return message


def hand_mean(table: np.ndarray, ids: list[int]) -> np.ndarray:
    pooled = table[ids].astype(np.float64).mean(axis=0)
    vector: np.ndarray = (pooled / np.linalg.norm(pooled)).astype(np.float32)
    return vector


# ---------------------------------------------------------------------------------------------
# The recipe


def test_mean_pooling_and_l2_by_hand(model: TinyModel, embedder: Embedder) -> None:
    vectors = embedder.embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 8)
    for text, vector in zip(TEXTS, vectors, strict=True):
        ids = model.ids(text)
        assert ids[0] == CLS_ID and ids[-1] == SEP_ID  # special tokens added
        np.testing.assert_allclose(vector, hand_mean(model.table, ids), atol=1e-6)
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-6


def test_padded_batch_equals_one_at_a_time(model: TinyModel) -> None:
    # Mixed lengths in one batch: the short rows are padded, and the tiny model puts +1000 on
    # every padded position, so anything unmasked would show.
    batched = load_embedder(str(model.path), EmbedConfig(batch_size=len(TEXTS)))
    single = load_embedder(str(model.path), EmbedConfig(batch_size=1))
    together = batched.embed(TEXTS)
    apart = np.stack([single.embed([t])[0] for t in TEXTS])
    np.testing.assert_allclose(together, apart, atol=1e-6)
    for text, vector in zip(TEXTS, together, strict=True):
        np.testing.assert_allclose(vector, model.expected(text), atol=1e-6)


def test_bucketing_keeps_input_order_and_batches_similar_lengths(
    model: TinyModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(7)
    texts = [" ".join(rng.choice(WORDS, size=int(n))) for n in rng.integers(1, 60, size=50)]
    texts[10] = ""
    embedder = load_embedder(str(model.path), EmbedConfig(batch_size=8))
    embedder.max_batch_tokens = None  # batch_size alone (as on a GPU)
    shapes: list[tuple[int, int]] = []
    run = embedder._run

    def spy(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        shapes.append(ids.shape)
        # every batch is padded to its own longest member
        assert mask.sum(axis=1).max() == ids.shape[1]
        return run(ids, mask)

    monkeypatch.setattr(embedder, "_run", spy)
    increments: list[int] = []
    vectors = embedder.embed(texts, progress=increments.append)
    assert sum(increments) == len(texts)
    assert [s[0] for s in shapes] == [8] * 6 + [1]  # 49 non-empty texts, batches of 8
    widths = [s[1] for s in shapes]
    assert widths == sorted(widths)  # sorted by length: similar lengths share a batch
    for text, vector in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(vector, model.expected(text), atol=1e-6)
    apart = np.stack([embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(vectors, apart, atol=1e-6)


def test_cpu_token_budget_splits_long_batches(
    model: TinyModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ["hello"] * 20 + [" ".join(WORDS[:100])] * 6 + [" ".join(WORDS * 3)]  # 3, 102, 602
    embedder = load_embedder(str(model.path), EmbedConfig(batch_size=32))
    assert embedder.max_batch_tokens == emb.CPU_MAX_BATCH_TOKENS == 512
    shapes: list[tuple[int, int]] = []
    run = embedder._run

    def spy(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        shapes.append(ids.shape)
        return run(ids, mask)

    monkeypatch.setattr(embedder, "_run", spy)
    vectors = embedder.embed(texts)
    # 20 short texts in one batch; 102-token texts 5 per batch (5 * 102 <= 512); the
    # 512-token text alone.
    assert shapes == [(20, 3), (5, 102), (1, 102), (1, 512)]
    for text, vector in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(vector, model.expected(text), atol=1e-6)


def test_truncation_at_512_tokens(model: TinyModel, embedder: Embedder) -> None:
    vocab = vocabulary()
    rng = np.random.default_rng(1)
    words = list(rng.choice(WORDS, size=2000))
    text = " ".join(words)
    # Only [CLS] + the first 510 word pieces + [SEP] count (each of these words is one piece).
    ids = [CLS_ID] + [vocab[w] for w in words[:510]] + [SEP_ID]
    vector = embedder.embed_query(text)
    np.testing.assert_allclose(vector, hand_mean(model.table, ids), atol=1e-6)
    untruncated = [CLS_ID] + [vocab[w] for w in words] + [SEP_ID]
    assert not np.allclose(vector, hand_mean(model.table, untruncated), atol=1e-3)


def test_max_length_option(model: TinyModel) -> None:
    vocab = vocabulary()
    words = WORDS[:40]
    text = " ".join(words)
    embedder = load_embedder(str(model.path), EmbedConfig(max_length=16))
    ids = [CLS_ID] + [vocab[w] for w in words[:14]] + [SEP_ID]
    np.testing.assert_allclose(embedder.embed_query(text), hand_mean(model.table, ids), atol=1e-6)
    np.testing.assert_allclose(
        embedder.embed_query(text), model.expected(text, max_length=16), atol=1e-6
    )


def test_model_position_limit_from_config_json(model: TinyModel) -> None:
    (model.path / "config.json").write_text(json.dumps({"max_position_embeddings": 64}))
    load_embedder(str(model.path), EmbedConfig(max_length=64))
    with pytest.raises(ModelError) as exc:
        load_embedder(str(model.path), EmbedConfig(max_length=512))
    assert "64" in one_line(exc)


def test_tokenizer_file_padding_and_truncation_are_overridden(model: TinyModel) -> None:
    # sentence-transformers exports often bake padding/truncation into tokenizer.json.
    expected = [model.expected(text) for text in TEXTS]
    tokenizer = Tokenizer.from_file(str(model.path / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]", length=64)
    tokenizer.enable_truncation(max_length=6)
    tokenizer.save(str(model.path / "tokenizer.json"))
    embedder = load_embedder(str(model.path), EmbedConfig())
    for text, vector in zip(TEXTS, expected, strict=True):
        np.testing.assert_allclose(embedder.embed_query(text), vector, atol=1e-6)
    np.testing.assert_allclose(embedder.embed(TEXTS), np.stack(expected), atol=1e-6)


@pytest.mark.parametrize("token_type_input", [True, False])
def test_token_type_ids_fed_only_when_declared(
    tmp_path: Path, token_type_input: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model_dir(tmp_path, token_type_input=token_type_input)
    embedder = load_embedder(str(model.path), EmbedConfig())
    fed: list[dict[str, np.ndarray]] = []
    session_run = embedder._session.run

    class SessionSpy:
        def run(self, names: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            fed.append(feeds)
            return list(session_run(names, feeds))

    monkeypatch.setattr(embedder, "_session", SessionSpy())
    vector = embedder.embed_query("hello world")
    (feeds,) = fed
    assert {"input_ids", "attention_mask"} <= set(feeds)
    assert ("token_type_ids" in feeds) == token_type_input
    for array in feeds.values():
        assert array.dtype == np.int64
    if token_type_input:
        assert not feeds["token_type_ids"].any()  # all zeros
    # model.table includes type_table[0] exactly when the input exists
    np.testing.assert_allclose(vector, model.expected("hello world"), atol=1e-6)


@pytest.mark.parametrize("output_name", ["last_hidden_state", "token_embeddings"])
def test_both_output_names(tmp_path: Path, output_name: str) -> None:
    model = make_model_dir(tmp_path, output_name=output_name)
    embedder = load_embedder(str(model.path), EmbedConfig())
    assert embedder.dim == 8
    np.testing.assert_allclose(
        embedder.embed_query("good morning"), model.expected("good morning"), atol=1e-6
    )


def test_unknown_output_name_is_one_line_error(tmp_path: Path) -> None:
    model = make_model_dir(tmp_path, output_name="pooler_output")
    with pytest.raises(ModelError) as exc:
        load_embedder(str(model.path), EmbedConfig())
    assert "last_hidden_state" in one_line(exc)


def test_empty_text_is_zero_vector_whitespace_is_not(model: TinyModel, embedder: Embedder) -> None:
    vectors = embedder.embed(["", "hello", ""])
    assert not vectors[0].any() and not vectors[2].any()
    assert not embedder.embed_query("").any()
    # vipune v0.1.8 zeroes only the empty string: white space encodes to [CLS] [SEP] and is
    # embedded (its test_integration_whitespace_only expects a valid vector).
    for blank in (" ", "   \t\n  "):
        assert model.ids(blank) == [CLS_ID, SEP_ID]
        np.testing.assert_allclose(
            embedder.embed_query(blank), hand_mean(model.table, [CLS_ID, SEP_ID]), atol=1e-6
        )


def test_no_texts(embedder: Embedder) -> None:
    calls: list[int] = []
    out = embedder.embed([], progress=calls.append)
    assert out.shape == (0, 8) and out.dtype == np.float32 and calls == []


def test_cls_pooling(model: TinyModel) -> None:
    embedder = load_embedder(str(model.path), EmbedConfig(pooling="cls", batch_size=3))
    cls_row = model.table[CLS_ID] / np.linalg.norm(model.table[CLS_ID])
    for text, vector in zip(TEXTS, embedder.embed(TEXTS), strict=True):
        np.testing.assert_allclose(vector, cls_row, atol=1e-6)
        np.testing.assert_allclose(vector, model.expected(text, pooling="cls"), atol=1e-6)


def test_query_prefix_only_in_embed_query(model: TinyModel) -> None:
    prefix = "question: "
    embedder = load_embedder(str(model.path), EmbedConfig(query_prefix=prefix))
    text = "where did my sister move"
    np.testing.assert_allclose(embedder.embed_query(text), model.expected(prefix + text), atol=1e-6)
    np.testing.assert_allclose(embedder.embed([text])[0], model.expected(text), atol=1e-6)
    np.testing.assert_allclose(
        embedder.embed_queries([text])[0], model.expected(prefix + text), atol=1e-6
    )
    assert not np.allclose(model.expected(prefix + text), model.expected(text), atol=1e-3)


def test_fingerprint_and_info(tmp_path: Path, model: TinyModel) -> None:
    spec = str(model.path)

    def fp(**kw: object) -> str:
        return load_embedder(spec, EmbedConfig(**kw)).fingerprint  # type: ignore[arg-type]

    base = fp()
    assert len(base) == 64 and int(base, 16) >= 0
    assert fp(batch_size=1) == base
    assert fp(threads=1) == base
    assert fp(pooling="cls") != base
    assert fp(query_prefix="query: ") != base
    assert fp(max_length=128) != base
    other_bytes = make_model_dir(tmp_path / "b", seed=1)  # same tokenizer, other weights
    assert load_embedder(str(other_bytes.path), EmbedConfig()).fingerprint != base
    other_tok = make_model_dir(tmp_path / "c", words=WORDS[:50])  # same seed, other tokenizer
    assert load_embedder(str(other_tok.path), EmbedConfig()).fingerprint != base

    embedder = load_embedder(spec, EmbedConfig())
    info = embedder.info()
    assert info == {
        "name": "tiny-model",
        "fingerprint": base,
        "dim": 8,
        "pooling": "mean",
        "max_length": 512,
        "max_length_from": "vipune",
        "query_prefix": "",
        "model_sha256": file_sha256(model.path / "onnx" / "model.onnx"),
        "tokenizer_sha256": file_sha256(model.path / "tokenizer.json"),
    }
    json.dumps(info)
    assert embedder.name == "tiny-model"


def test_file_sha256_is_memoised_per_size_and_mtime(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    first = file_sha256(path)
    assert first == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert file_sha256(path) == first
    path.write_bytes(b"abcd")
    os.utime(path, ns=(1, 123_456_789))
    assert file_sha256(path) != first


def test_config_validation() -> None:
    for bad in (
        {"pooling": "max"},
        {"max_length": 1},
        {"max_length": 0},
        {"device": "tpu"},
        {"threads": 0},
        {"batch_size": 0},
    ):
        with pytest.raises(ModelError) as exc:
            EmbedConfig(**bad)
        one_line(exc)
    EmbedConfig(max_length=2, threads=1, batch_size=1, device="cuda", pooling="cls")


# ---------------------------------------------------------------------------------------------
# resolve_model


@pytest.mark.parametrize("layout", ["onnx/model.onnx", "model.onnx"])
def test_resolve_local_dir_both_layouts(tmp_path: Path, layout: str) -> None:
    model = make_model_dir(tmp_path, layout=layout)
    files = resolve_model(str(model.path))
    assert isinstance(files, ModelFiles)
    assert files.name == "tiny-model"
    assert files.model_path == model.path / layout
    assert files.tokenizer_path == model.path / "tokenizer.json"
    assert files.model_sha256 == file_sha256(model.path / layout)
    embedder = load_embedder(str(model.path), EmbedConfig())
    np.testing.assert_allclose(embedder.embed_query("hello"), model.expected("hello"), atol=1e-6)


def test_missing_tokenizer_json_is_one_line_error(model: TinyModel) -> None:
    (model.path / "tokenizer.json").unlink()
    with pytest.raises(ModelError) as exc:
        resolve_model(str(model.path))
    assert "tokenizer.json" in one_line(exc)


def test_missing_onnx_file_is_one_line_error(model: TinyModel) -> None:
    shutil.rmtree(model.path / "onnx")
    with pytest.raises(ModelError) as exc:
        resolve_model(str(model.path))
    assert "model.onnx" in one_line(exc)


def test_non_onnx_model_file_is_one_line_error(model: TinyModel) -> None:
    (model.path / "onnx" / "model.onnx").write_bytes(b"this is not a protobuf\n" * 10)
    with pytest.raises(ModelError) as exc:
        load_embedder(str(model.path), EmbedConfig())
    assert "ONNX" in one_line(exc)


def test_bad_tokenizer_file_is_one_line_error(model: TinyModel) -> None:
    (model.path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ModelError) as exc:
        load_embedder(str(model.path), EmbedConfig())
    assert "tokenizer" in one_line(exc)


def test_missing_directory_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as exc:
        resolve_model(str(tmp_path / "nope" / "model"))
    assert "does not exist" in one_line(exc)


def test_hf_id_offline_and_not_cached_is_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    with pytest.raises(ModelError) as exc:
        resolve_model("BAAI/bge-small-en-v1.5")
    message = one_line(exc)
    assert "'BAAI/bge-small-en-v1.5'" in message and "--retrieval-eval-model" in message
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(ModelError) as exc:
        resolve_model("BAAI/bge-small-en-v1.5", offline=True)
    assert "'BAAI/bge-small-en-v1.5'" in one_line(exc)


def test_hf_id_from_local_cache_works_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lay out a Hugging Face cache entry by hand: refs/main -> snapshots/<commit>/...
    model = make_model_dir(tmp_path)
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "hub" / "models--org--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    shutil.copytree(model.path, snapshot)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    files = resolve_model("org/tiny")
    assert files.name == "org/tiny"
    assert files.model_path == snapshot / "onnx" / "model.onnx"
    embedder = load_embedder("org/tiny", EmbedConfig(), offline=True)
    assert embedder.name == "org/tiny"
    np.testing.assert_allclose(embedder.embed_query("hello"), model.expected("hello"), atol=1e-6)


# Stand-ins for huggingface_hub's exception classes, with the same names and bases (the embedder
# classifies them by the names along the MRO).
class EntryNotFoundError(Exception):
    pass


class LocalEntryNotFoundError(EntryNotFoundError):
    """Not cached (cache-only), or not cached and the Hub did not answer."""


class RemoteEntryNotFoundError(EntryNotFoundError):
    """HTTP 404 on a file of an existing repository."""


class RepositoryNotFoundError(Exception):
    """Stands for huggingface_hub's 404 on a repository."""


def fake_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, online: Mapping[str, object]
) -> list[tuple[str, bool]]:
    """Replace hf_hub_download: nothing cached; online, each file maps to a path or an error."""
    import huggingface_hub

    calls: list[tuple[str, bool]] = []

    def download(
        repo_id: str, filename: str, *, cache_dir: object = None, local_files_only: bool = False
    ) -> str:
        calls.append((filename, local_files_only))
        if local_files_only:
            raise LocalEntryNotFoundError("Cannot find the requested files in the disk cache")
        outcome = online.get(filename, RemoteEntryNotFoundError(f"404 {filename}"))
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    def lookup(repo_id: str, filename: str, cache_dir: object = None,
               repo_type: object = None) -> str | None:
        try:
            return download(repo_id, filename, local_files_only=True)
        except LocalEntryNotFoundError:
            return None

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lookup)
    monkeypatch.setattr(hub_mod, "_probe", lambda *args: None)  # the fake answers for the Hub
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    return calls


def test_hf_download_falls_back_to_root_model_onnx(
    tmp_path: Path, model: TinyModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    online = {
        "model.onnx": model.path / "onnx" / "model.onnx",
        "tokenizer.json": model.path / "tokenizer.json",
    }
    calls = fake_hub(monkeypatch, tmp_path, online)
    files = resolve_model("org/tiny")
    assert files.model_path == model.path / "onnx" / "model.onnx"
    # cache first (both names, then the tokenizer), then downloads in vipune's order
    assert calls[:3] == [("onnx/model.onnx", True), ("model.onnx", True), ("tokenizer.json", True)]
    assert calls[3:6] == [
        ("onnx/model.onnx", False),
        ("model.onnx", False),
        ("tokenizer.json", False),
    ]


def test_hf_hub_unreachable_is_one_line_error(
    tmp_path: Path, model: TinyModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = LocalEntryNotFoundError("An error happened while trying to locate the file\non the Hub")
    calls = fake_hub(monkeypatch, tmp_path, {"onnx/model.onnx": error})
    with pytest.raises(ModelError) as exc:
        resolve_model("org/tiny")
    message = one_line(exc)
    assert "'org/tiny'" in message and "unreachable" in message and "locate the file" in message
    assert ("model.onnx", False) not in calls  # one unreachable Hub is enough: no more waits


def test_hf_repository_not_found_is_one_line_error(
    tmp_path: Path, model: TinyModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_hub(monkeypatch, tmp_path, {"onnx/model.onnx": RepositoryNotFoundError("404")})
    with pytest.raises(ModelError) as exc:
        resolve_model("org/nothing")
    assert "'org/nothing'" in one_line(exc)


def test_hf_repository_without_tokenizer_is_one_line_error(
    tmp_path: Path, model: TinyModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_hub(monkeypatch, tmp_path, {"onnx/model.onnx": model.path / "onnx/model.onnx"})
    with pytest.raises(ModelError) as exc:
        resolve_model("org/tiny")
    assert "tokenizer.json" in one_line(exc)


def test_invalid_hf_id_is_one_line_error() -> None:
    with pytest.raises(ModelError) as exc:
        resolve_model("not a valid id!")
    assert "not a valid id!" in one_line(exc)


def test_cuda_without_cuda_provider_is_one_line_error(
    model: TinyModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with pytest.raises(ModelError) as exc:
        load_embedder(str(model.path), EmbedConfig(device="cuda"))
    assert "onnxruntime-gpu" in one_line(exc)


def test_default_model_is_vipunes() -> None:
    assert emb.DEFAULT_MODEL == "BAAI/bge-small-en-v1.5"
    # max_length None: the model's own (sentence_bert_config.json), else vipune's 512
    assert EmbedConfig() == EmbedConfig(
        pooling="mean", max_length=None, query_prefix="", device="cpu", threads=None,
        batch_size=32)
    assert emb.VIPUNE_MAX_LENGTH == 512
    assert PAD_JUNK > 100  # the tiny model's padding junk is large enough to notice


def test_model_hashes_are_memoised_on_disk(model: TinyModel, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_retrieval_eval.io import checksums

    memo = tmp_path / "cache" / "sha256"
    first = load_embedder(str(model.path), EmbedConfig(), memo_dir=memo)
    checksums._memo.clear()  # a later process (or an xdist worker)
    hashed: list[Path] = []
    real = checksums.sha256_file
    monkeypatch.setattr(checksums, "sha256_file", lambda p, *a: hashed.append(p) or real(p, *a))
    again = load_embedder(str(model.path), EmbedConfig(), memo_dir=memo)
    assert hashed == [] and again.fingerprint == first.fingerprint


def test_unreadable_model_file_is_one_line(model: TinyModel,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(path: Path, *args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(path))

    # root reads anything: fake the denial
    monkeypatch.setattr(model_files, "memoised_sha256", denied)
    with pytest.raises(ModelError) as info:
        load_embedder(str(model.path), EmbedConfig())
    assert "\n" not in str(info.value)
    assert "cannot be read (Permission denied)" in str(info.value)


def test_the_models_own_max_seq_length_is_its_recipe(tmp_path: Path) -> None:
    """Issue 43.22: a model folder's sentence_bert_config.json sets its max_seq_length (256
    for all-MiniLM-L6-v2): the plugin embedded such a model up to vipune's 512 tokens, where
    sentence-transformers stops at 256. vipune's 512 stays where the model names none, and
    wherever the user asks for a length."""
    import json

    from pytest_retrieval_eval.errors import ModelError

    model = make_model_dir(tmp_path / "m")
    long_text = " ".join(WORDS * 20)  # past 256 tokens
    vipune = load_embedder(str(model.path), EmbedConfig())
    assert (vipune.config.max_length, vipune.max_length_from) == (512, "vipune")
    (model.path / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 256, "do_lower_case": False}), encoding="utf-8")
    own = load_embedder(str(model.path), EmbedConfig())
    assert (own.config.max_length, own.max_length_from) == (256, "model")
    assert own.info()["max_length"] == 256 and own.info()["max_length_from"] == "model"
    asked_256 = load_embedder(str(model.path), EmbedConfig(max_length=256))
    assert asked_256.max_length_from == "asked"
    assert own.fingerprint == asked_256.fingerprint != vipune.fingerprint  # same vectors
    np.testing.assert_array_equal(own.embed([long_text]), asked_256.embed([long_text]))
    assert not np.allclose(own.embed([long_text]), vipune.embed([long_text]), atol=1e-4)
    asked_512 = load_embedder(str(model.path), EmbedConfig(max_length=512))
    assert (asked_512.config.max_length, asked_512.max_length_from) == (512, "asked")
    assert asked_512.fingerprint == vipune.fingerprint
    (model.path / "sentence_bert_config.json").write_text('{"max_seq_length": 4096}')
    with pytest.raises(ModelError) as caught:
        load_embedder(str(model.path), EmbedConfig())
    assert "max_seq_length 4096 is no whole number of tokens in 2..512" in str(caught.value)


def test_the_header_names_the_recipes_length_and_its_source() -> None:
    """Issue 43.22: the recipe used is named in the header, as the pooling is."""
    from pytest_retrieval_eval.reporting.run_header import _length_text

    assert _length_text({"max_length": 256, "max_length_from": "model"}) == (
        "256 tokens (sentence_bert_config.json), ")
    assert _length_text({"max_length": 512, "max_length_from": "vipune"}) == (
        "512 tokens (vipune's), ")
    assert _length_text({"max_length": 512}) == "512 tokens, "  # cached before it was named
