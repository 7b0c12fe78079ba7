"""Where an embedding model's files come from: a local folder or a Hugging Face model id
(cache first, one short request, then a download), with their content hashes.

vipune loads ``onnx/model.onnx`` (falling back to ``model.onnx``) and ``tokenizer.json`` of
``BAAI/bge-small-en-v1.5`` from the Hub. :func:`resolve_model` finds the same two files (and
``config.json`` when there is one); every failure is one
:class:`~pytest_retrieval_eval.errors.ModelError` line naming the model and the fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelError, one_line
from ..io import hub
from ..io.checksums import memoised_paths, memoised_sha256

__all__ = ["DEFAULT_MODEL", "MODEL_FILES", "TOKENIZER_FILE", "ModelFiles", "files_here",
           "folder_holding", "position_limit", "resolve_model"]

DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"
"""vipune's model (its ``EmbeddingEngine::new`` argument)."""

MODEL_FILES = ("onnx/model.onnx", "model.onnx")
#: sentence-transformers' own recipe file of a model folder: its ``max_seq_length`` is the
#: tokens the model's own library embeds (256 for all-MiniLM-L6-v2, 512 for bge-small).
SBERT_CONFIG = "sentence_bert_config.json"
#: vipune's truncation (``src/embedding.rs``): the length where a model names none.
VIPUNE_MAX_LENGTH = 512
"""Where the ONNX file is looked for, in order (vipune's order)."""

TOKENIZER_FILE = "tokenizer.json"
_FIX_DIR = "pass --retrieval-eval-model=DIR (a folder with onnx/model.onnx and tokenizer.json)"

_HF_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
"""Hugging Face repo id syntax: ``name`` or ``owner/name``."""


@dataclass(frozen=True)
class ModelFiles:
    """The two files of an embedding model, found on disk, with their content hashes."""

    name: str  # the spec as given (Hub id), or the local directory's name
    model_path: Path
    tokenizer_path: Path
    model_sha256: str
    tokenizer_sha256: str
    config_path: Path | None = None  # config.json beside them, when there is one
    sbert_config_path: Path | None = None  # sentence_bert_config.json, when there is one


def _looks_like_path(spec: str) -> bool:
    return (
        spec.startswith(("/", "./", "../", "~", "."))
        or "\\" in spec
        or spec.count("/") > 1
        or os.path.isabs(spec)
    )


def _file_sha256(path: Path, memo_dir: Path | None) -> str:
    """The file's sha256 (memoised per file version, on disk under ``memo_dir`` when given, so
    a model is not rehashed by every run and worker); one ModelError line if unreadable."""
    try:
        return memoised_sha256(path, memo_dir=memo_dir)
    except OSError as exc:
        raise ModelError(
            f"model file {str(path)!r} cannot be read ({exc.strerror or exc}); fix its "
            f"permissions or fetch it again, or {_FIX_DIR}"
        ) from None


def _files_from_dir(spec: str, directory: Path, memo_dir: Path | None) -> ModelFiles:
    model_path = next((directory / rel for rel in MODEL_FILES if (directory / rel).is_file()), None)
    if model_path is None:
        raise ModelError(
            f"model directory {str(directory)!r}: no onnx/model.onnx or model.onnx in it; "
            "export the model to ONNX there (see scripts/export_minilm_onnx.py) or "
            f"{_FIX_DIR}"
        )
    tokenizer_path = directory / TOKENIZER_FILE
    if not tokenizer_path.is_file():
        raise ModelError(
            f"model directory {str(directory)!r}: no tokenizer.json in it; copy the model's "
            f"tokenizer.json (the Hugging Face 'tokenizers' format) beside the ONNX file, or "
            f"{_FIX_DIR}"
        )
    config_path = directory / "config.json"
    sbert = directory / SBERT_CONFIG
    return ModelFiles(
        name=directory.resolve().name or spec,
        model_path=model_path,
        tokenizer_path=tokenizer_path,
        model_sha256=_file_sha256(model_path, memo_dir),
        tokenizer_sha256=_file_sha256(tokenizer_path, memo_dir),
        config_path=config_path if config_path.is_file() else None,
        sbert_config_path=sbert if sbert.is_file() else None,
    )


def _hub_file(repo_id: str, filename: str, *, download: bool,
              deadline: float = hub.DEFAULT_DEADLINE) -> Path | None:
    """A file of a Hub repo: from the cache, or downloaded when ``download``.

    Returns None when the repo has no such file (or, cache-only, when it is not cached).
    Raises :class:`hub.HubUnreachable` when a download was tried and the Hub could not be
    reached.
    """
    if not download:
        return hub.cached_file(repo_id, filename)
    try:
        return hub.download_file(repo_id, filename, deadline=deadline)
    except hub.HubFileMissing:
        return None  # the repository exists but has no such file (HTTP 404)
    except hub.HubRepoMissing as exc:
        raise ModelError(
            f"model {repo_id!r}: the Hugging Face Hub has no such model or refused access "
            f"({type(exc.cause).__name__}: {one_line(exc.cause, 120)}); check the id (and "
            f"'hf auth login' for a gated model), or {_FIX_DIR}"
        ) from exc


def _files_from_hub(repo_id: str, *, offline: bool, memo_dir: Path | None,
                    deadline: float = hub.DEFAULT_DEADLINE) -> ModelFiles:
    given_offline, offline = offline, hub.offline_mode(offline)
    attempts = (False,) if offline else (False, True)
    model_path: Path | None = None
    tokenizer_path: Path | None = None
    reason = ("offline mode: --offline" if given_offline else "offline mode: HF_HUB_OFFLINE is set"
              ) if offline else ""
    for download in attempts:
        try:
            if model_path is None:
                for rel in MODEL_FILES:
                    model_path = _hub_file(repo_id, rel, download=download,
                                           deadline=deadline)
                    if model_path is not None:
                        break
            if tokenizer_path is None:
                tokenizer_path = _hub_file(repo_id, TOKENIZER_FILE, download=download,
                                           deadline=deadline)
        except hub.HubUnreachable as exc:
            reason = str(exc)
            break
        if model_path is not None and tokenizer_path is not None:
            if download:  # fetched now: the model's own recipe file comes with it
                with contextlib.suppress(hub.HubUnreachable):
                    _hub_file(repo_id, SBERT_CONFIG, download=True, deadline=deadline)
            break
        if download and (model_path is None or tokenizer_path is None):
            missing = "onnx/model.onnx (or model.onnx)" if model_path is None else "tokenizer.json"
            raise ModelError(
                f"model {repo_id!r}: the Hugging Face repository has no {missing}; pick a "
                f"repository that ships an ONNX export and tokenizer.json, or {_FIX_DIR}"
            )
    if model_path is None or tokenizer_path is None:
        cache_dir = hub.cache_dir()
        where = f" {str(cache_dir)!r}" if cache_dir is not None else ""
        raise ModelError(
            f"model {repo_id!r}: not in the local Hugging Face cache{where} and the Hub is "
            f"unreachable ({reason}); download it once with network, or {_FIX_DIR}"
        )
    return ModelFiles(
        name=repo_id,
        model_path=model_path,
        tokenizer_path=tokenizer_path,
        model_sha256=_file_sha256(model_path, memo_dir),
        tokenizer_sha256=_file_sha256(tokenizer_path, memo_dir),
        config_path=hub.cached_file(repo_id, "config.json"),
        sbert_config_path=hub.cached_file(repo_id, SBERT_CONFIG),
    )


def resolve_model(spec: str = DEFAULT_MODEL, *, offline: bool = False,
                  memo_dir: Path | None = None,
                  deadline: float = hub.DEFAULT_DEADLINE) -> ModelFiles:
    """Find a model's ONNX file and tokenizer.json.

    ``spec`` is a local directory (holding ``onnx/model.onnx`` or ``model.onnx``, and
    ``tokenizer.json``) or a Hugging Face model id. A Hub model is taken from Hugging Face's
    usual cache when it is there (so a cached copy works offline), else downloaded into it,
    unless ``offline`` is true or ``HF_HUB_OFFLINE`` is set. The files' hashes (the model's
    fingerprint) are memoised under ``memo_dir`` (``<cache>/sha256``) when given.
    """
    spec = spec.strip()
    if not spec:
        raise ModelError(
            f"model: empty name; give a Hugging Face id such as {DEFAULT_MODEL!r} or {_FIX_DIR}"
        )
    path = Path(spec).expanduser()
    if path.is_dir():
        return _files_from_dir(spec, path, memo_dir)
    if path.exists():
        raise ModelError(f"model {spec!r}: is a file, not a model directory; {_FIX_DIR}")
    if _looks_like_path(spec):
        raise ModelError(f"model directory {spec!r} does not exist; {_FIX_DIR}")
    if not _HF_ID.match(spec) or "--" in spec or ".." in spec:
        raise ModelError(
            f"model {spec!r}: neither an existing directory nor a Hugging Face model id "
            f"(owner/name); give an id such as {DEFAULT_MODEL!r}, or {_FIX_DIR}"
        )
    return _files_from_hub(spec, offline=offline, memo_dir=memo_dir, deadline=deadline)


def files_here(spec: str, *, memo_dir: Path | None = None) -> ModelFiles | None:
    """The files ``spec`` names on this machine, without loading the model or opening a
    socket: a local folder's (hashed; a folder that is no model is its ModelError line), or a
    Hub id's snapshot in the local Hugging Face cache; None when neither is here (a folder
    that does not exist, a Hub model not cached)."""
    path = Path(spec.strip()).expanduser()
    if path.is_dir():
        return resolve_model(spec, offline=True, memo_dir=memo_dir)
    try:
        return resolve_model(spec, offline=True, memo_dir=memo_dir)
    except ModelError:
        return None


def folder_holding(name: str, model_sha256: str, tokenizer_sha256: str,
                   memo_dir: Path) -> Path | None:
    """The local model folder named ``name`` whose files still have these hashes, as the
    cache's hash memo under ``memo_dir`` last saw them (prep hashes a model's files there),
    or None: how a message names a local model by a path that runs, not by its name."""
    tokenizers = set(memoised_paths(memo_dir, tokenizer_sha256))
    for model_path in memoised_paths(memo_dir, model_sha256):
        here = model_path.parent  # model.onnx, or onnx/model.onnx
        for folder in (here, here.parent) if here.name == "onnx" else (here,):
            if (folder.name == name and folder / TOKENIZER_FILE in tokenizers
                    and model_path in (folder / rel for rel in MODEL_FILES)):
                return folder
    return None


def position_limit(config_path: Path | None) -> int | None:
    """``max_position_embeddings`` from a config.json beside the model, when readable."""
    if config_path is None:
        return None
    try:
        data = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("max_position_embeddings") if isinstance(data, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def model_max_length(files: ModelFiles) -> int | None:
    """``max_seq_length`` of the model's ``sentence_bert_config.json`` (None: no such file,
    or it names none). A value that is no whole number in 2..512 is one line naming the
    file: it would otherwise change every vector in silence."""
    path = files.sbert_config_path
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ModelError(f"{path}: cannot be read as JSON ({one_line(exc, 120)}); fix or "
                         "remove it, or give --retrieval-eval-max-length") from None
    value = data.get("max_seq_length") if isinstance(data, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 512:
        raise ModelError(f"{path}: max_seq_length {one_line(repr(value), 40)} is no whole "
                         "number of tokens in 2..512; fix it, or give "
                         "--retrieval-eval-max-length")
    return value
