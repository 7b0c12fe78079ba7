"""``vipune``: the real vipune binary, driven through its command line on the persona's store."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from .. import vipune
from ..errors import RetrievalEvalError, RetrieverError, one_line
from ..vipune import store as store_mod
from .base import Persona, Query, _option, _vipune_limit

__all__ = ["VipuneBinaryRetriever", "check_compatible", "resolve_vipune_binary"]

#: vipune environment variables that would change what is measured (model, recency, paths).
_SCRUBBED_ENV = (
    "VIPUNE_EMBEDDING_MODEL",
    "VIPUNE_RECENCY_WEIGHT",
    "VIPUNE_DATABASE_PATH",
    "VIPUNE_PROJECT",
    "VIPUNE_SIMILARITY_THRESHOLD",
)


def resolve_vipune_binary(binary: str | os.PathLike[str] = "vipune") -> Path:
    """An executable path for ``binary`` (a path, or a name on PATH); usage error if none."""
    text = os.fspath(binary)
    candidate = Path(text).expanduser()
    if os.sep in text or (os.altsep and os.altsep in text) or candidate.is_file():
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.resolve()
        what = ("is not executable (chmod +x it)" if candidate.is_file()
                else "is a directory" if candidate.is_dir() else "does not exist")
        raise RetrievalEvalError(
            f"vipune binary '{text}' {what}; install vipune or pass "
            "--retrieval-eval-vipune=PATH to the vipune executable"
        )
    else:
        found = shutil.which(text)
        if found:
            return Path(found).resolve()
    raise RetrievalEvalError(
        f"vipune binary '{text}' not found on PATH; "
        "install vipune or pass --retrieval-eval-vipune=PATH"
    )


def check_compatible(model_info: object) -> None:
    """Usage error unless the stored vectors are vipune's: bge-small-en-v1.5, mean, no prefix, 384.

    ``model_info`` is the vector cache's model description (a mapping, or an object with the
    same attributes): ``model``/``name``/``model_id``, ``pooling``, ``query_prefix``, ``dim``.
    Missing pooling/prefix/dim mean the harness defaults (mean, "", the model's 384).
    """
    name = _option(model_info, ("model", "model_id", "name", "repo_id"), None)
    pooling = _option(model_info, ("pooling",), None)
    prefix = _option(model_info, ("query_prefix", "prefix"), None)
    dim = _option(model_info, ("dim", "dimension"), None)
    config = _option(model_info, ("config",), None)
    if config is not None:
        pooling = pooling if pooling is not None else _option(config, ("pooling",), None)
        prefix = prefix if prefix is not None else _option(config, ("query_prefix",), None)
    problems = []
    if name != vipune.MODEL_ID:
        problems.append(f"model {name!r} (vipune embeds with {vipune.MODEL_ID})")
    if pooling not in (None, "mean"):
        problems.append(f"pooling {pooling!r} (vipune mean-pools)")
    if prefix not in (None, ""):
        problems.append(f"query prefix {prefix!r} (vipune adds none)")
    if dim is not None and dim != vipune.EMBEDDING_DIM:
        problems.append(f"dim {dim!r} (vipune stores {vipune.EMBEDDING_DIM})")
    if problems:
        raise RetrievalEvalError(
            "the vipune retriever cannot use these vectors: "
            + ", ".join(problems)
            + f"; prep with --retrieval-eval-model={vipune.MODEL_ID}, mean pooling, no prefix"
        )


def _tail(data: bytes | str | None, limit: int = 600) -> str:
    if not data:
        return ""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    flat = one_line(text)
    return flat if len(flat) <= limit else "..." + flat[-limit:]


class VipuneBinaryRetriever:
    """The real vipune binary: ``vipune --json ... search --hybrid --recency 0`` per question.

    Runs ``[binary, "--json", "--db-path", DB, "--project", ID, "search", "--hybrid",
    "--recency", "0", "--limit", L, "--", QUESTION]`` (``--`` so a question starting with '-'
    stays the query) with a timeout; the store's ``id`` is the session id. A crash, a timeout
    or output that is not the documented JSON raises :class:`RetrieverError` (that item fails).
    vipune embeds the question itself: check the vectors with :func:`check_compatible`.
    """

    name = "vipune"
    limit_sensitive = True  # search_hybrid's candidate pool depends on --limit
    needs_store = True

    def __init__(
        self,
        binary: str | os.PathLike[str] = "vipune",
        timeout: float = 60.0,
        project_id: str = store_mod.PROJECT_ID,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.binary = resolve_vipune_binary(binary)
        if not timeout > 0:
            raise RetrievalEvalError(f"vipune timeout {timeout!r} must be a positive number")
        self.timeout = float(timeout)
        self.project_id = project_id
        base = dict(os.environ if env is None else env)
        for name in _SCRUBBED_ENV:
            base.pop(name, None)
        self._env = base

    check_compatible = staticmethod(check_compatible)

    def command(self, db_path: Path, question: str, limit: int) -> list[str]:
        """The argv for one search."""
        return [
            str(self.binary),
            "--json",
            "--db-path",
            str(db_path),
            "--project",
            self.project_id,
            "search",
            "--hybrid",
            "--recency",
            "0",
            "--limit",
            str(limit),
            "--",
            question,
        ]

    def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
        lim = _vipune_limit(limit)
        db_path = Path(persona.store_path()).resolve()  # vipune rejects paths with '..'
        where = f"vipune ({self.binary}) on question {query.question_id}"
        if store_mod.store_user_version(db_path) != store_mod.VIPUNE_USER_VERSION:
            raise RetrieverError(
                f"{where}: the persona store {db_path.name} is not a vipune store (its vectors "
                f"are not {vipune.EMBEDDING_DIM}-d); prep with {vipune.MODEL_ID}"
            )
        if "\x00" in query.question:  # argv strings end at a NUL (see vipune/fts.py)
            raise RetrieverError(
                f"{where}: the question holds a NUL character (U+0000), which no command-line "
                f"argument can carry, so vipune cannot be asked it; remove it from the "
                f"dataset's question")
        cmd = self.command(db_path, query.question, lim)
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                start_new_session=True,
            )
        except OSError as exc:  # not a program this system runs, or gone since the check
            raise RetrieverError(
                f"{where}: cannot run it ({exc.strerror or exc}); pass a vipune binary built "
                f"for this machine with --retrieval-eval-vipune"
            ) from None
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise RetrieverError(
                f"{where}: no answer within {self.timeout:g} s (killed); stderr: "
                f"{_tail(err) or '(empty)'}; raise --retrieval-eval-vipune-timeout if the first "
                "call downloads the model"
            ) from None
        if proc.returncode != 0:
            detail = f"stderr: {_tail(err) or '(empty)'}"
            json_error = _json_error(out)
            if json_error:
                detail = f"{json_error}; {detail}"
            raise RetrieverError(f"{where}: exit status {proc.returncode}: {detail}")
        try:
            ids = vipune.parse_search_json(out)
        except vipune.VipuneOutputError as exc:
            raise RetrieverError(f"{where}: {exc}; stderr: {_tail(err) or '(empty)'}") from None
        known = set(persona.session_ids)
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise RetrieverError(
                f"{where}: returned ids that are not rows of this store "
                f"({', '.join(repr(u) for u in unknown[:3])}); is --db-path honoured?"
            )
        if len(set(ids)) != len(ids) or len(ids) > lim:
            raise RetrieverError(
                f"{where}: returned {len(ids)} results with {len(ids) - len(set(ids))} repeats "
                f"for --limit {lim}; that is not vipune's search output"
            )
        return ids


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
    with contextlib.suppress(ProcessLookupError, OSError):
        proc.kill()


def _json_error(out: bytes | None) -> str:
    """vipune --json prints errors as {"error": "..."} on stdout; that text, or ''."""
    if not out:
        return ""
    try:
        payload = json.loads(out.decode("utf-8", "replace"))
    except ValueError:
        return _tail(out, 300)
    if isinstance(payload, dict) and isinstance(payload.get("error"), str):
        return one_line(payload["error"])
    return _tail(out, 300)
