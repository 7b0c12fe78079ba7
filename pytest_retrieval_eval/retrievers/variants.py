"""What-if retrievers: a built-in retriever name carrying parameters.

An author measures a change to vipune's search without touching Rust, side by side with the
reference. The spelling is ``base+param:value[+param:value...]``, e.g.
``hybrid+rrf_k:60+fts:or``, ``hybrid+pool:100``, ``hybrid+recency:0.3``, ``fts+mode:or``,
``semantic+dtype:float32``. It holds no ``,`` (the option's and the ini's list separator), no
``=``, ``[`` or space (item names are ``<question_id>[<retriever>]``), and ``+``, ``:`` and
``_`` are word characters of pytest's ``-k`` grammar, so ``-k "fts+mode:or"`` selects it.

Plain names keep vipune's exact behaviour; each parameter changes one rule, named here with
the upstream file it departs from. This module parses names without importing numpy, so the
option validators (``options.py``) use it; :func:`.whatif.make_variant` builds the
retriever.

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

__all__ = ["ADAPTERS", "PARAMETERS", "VariantError", "VariantSpec", "is_variant", "parse_keywords",
           "parse_variant", "split_dotted"]

MAX_POOL = 10_000  # vipune's MAX_SEARCH_LIMIT: no list may ask for more rows


class VariantError(ValueError):
    """A what-if retriever name that cannot be read; the message is one line."""


def _whole(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise ValueError(f"a whole number in {low}..{high}")
        return int(text)
    return parse


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:  # NaN fails too (vipune's validate_recency_weight)
        raise ValueError("a number in 0..1")
    return value


def _one_of(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError("|".join(allowed))
        return text
    return parse


@dataclass(frozen=True)
class _Param:
    parse: Callable[[str], Any]
    default: Any  # vipune's own value: a variant with every default ranks as the plain name
    means: str


_CLASS_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def _embedder(text: str) -> str:
    """``run`` (the run's model, through ``persona.embed``) or a class path ``pkg.mod.Class``."""
    if text != "run" and not _CLASS_PATH.fullmatch(text):
        raise ValueError("run or a class path pkg.module.Class")
    return text


def _provider_embedder(text: str) -> str:
    """``run`` or one of mem0's embedder providers (``openai``, ``huggingface``, ...)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", text):
        raise ValueError("run or a mem0 embedder provider such as openai")
    return text


def _word(text: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", text):
        raise ValueError("a provider name such as qdrant")
    return text


def _adapter_chunks(size: int, overlap: int, unit: str) -> dict[str, _Param]:
    return {
        "chunk_size": _Param(_whole(1, 1_000_000), size,
                             f"the splitter's chunk size in {unit} (the library's default)"),
        "chunk_overlap": _Param(_whole(0, 1_000_000), overlap,
                                f"the splitter's overlap in {unit} (the library's default)"),
        "embedder": _Param(_embedder, "run",
                           "run: the run's model through persona.embed; pkg.module.Class: "
                           "the library's embedder of that class"),
    }


def _unit() -> _Param:
    return _Param(_one_of("session", "turn"), "session",
                  "the unit ranked: the persona's sessions, or its turns (returned as turn "
                  "memories, docs/memories.md)")


#: Every parameter each base retriever takes, with vipune's value and what it changes.
PARAMETERS: Mapping[str, Mapping[str, _Param]] = {
    "hybrid": {
        "rrf_k": _Param(_whole(1, 1_000_000), 25,
                        "RRF constant k (vipune: 25, src/rrf.rs RrfConfig::default)"),
        "pool": _Param(_whole(1, MAX_POOL), None,
                       "fixed candidate pool per list (vipune: clamp(limit*10, 50, 10000), "
                       "src/memory/search.rs)"),
        "fts": _Param(_one_of("and", "or"), "and",
                      "FTS5 operator between the quoted words (vipune: and, src/sqlite/fts.rs)"),
        "recency": _Param(_fraction, 0.0,
                          "recency weight, decay from the question's date (the harness "
                          "measures vipune with 0)"),
    },
    "fts": {
        "mode": _Param(_one_of("and", "or"), "and",
                       "FTS5 operator between the quoted words (vipune: and, src/sqlite/fts.rs)"),
        "unit": _unit(),
    },
    "semantic": {
        "dtype": _Param(_one_of("float64", "float32"), "float64",
                        "cosine arithmetic (vipune: float64 sums of float32 values, "
                        "src/sqlite/embedding.rs)"),
        "unit": _unit(),
    },
    "bm25": {
        "unit": _unit(),
    },
    # The memory libraries (pytest_retrieval_eval/adapters, docs/memory-libraries.md).
    "langchain": _adapter_chunks(4000, 200, "characters"),
    "llamaindex": _adapter_chunks(1024, 200, "tokens"),
    "mem0": {
        "infer": _Param(_one_of("false", "true"), "false",
                        "false: mem0 stores each message as it is; true: mem0's LLM extracts "
                        "facts (the user's LLM settings)"),
        "embedder": _Param(_provider_embedder, "run",
                           "run: the run's model through persona.embed; else a mem0 embedder "
                           "provider, configured from the environment"),
        "vector_store": _Param(_word, "qdrant",
                               "mem0's vector store provider (qdrant in local mode, under the "
                               "persona's workdir)"),
        "threshold": _Param(_fraction, 0.1,
                            "the least semantic score mem0's search keeps (mem0's default)"),
    },
}

#: The memory libraries' names (what-if bases built by pytest_retrieval_eval.adapters).
ADAPTERS = ("langchain", "llamaindex", "mem0")


@dataclass(frozen=True)
class VariantSpec:
    """A parsed what-if name: ``name`` as written, its base retriever and its parameters."""

    name: str
    base: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record: the base retriever and every parameter as given."""
        return {"retriever": self.base, "params": dict(self.params)}


def is_variant(name: str) -> bool:
    """Whether ``name`` is spelled as a what-if retriever (``base+...``); a dotted path with
    keyword arguments (``module:Class+key:value``) is not one."""
    return "+" in name and ":" not in name.partition("+")[0]


def split_dotted(name: str) -> tuple[str, str]:
    """``"pkg.mod:Class+ef:10+metric:cosine"`` -> ``("pkg.mod:Class", "ef:10+metric:cosine")``
    (the second part empty when no arguments are given)."""
    path, _, rest = name.partition("+")
    return path, rest


#: A constructor argument's numbers, in ASCII digits only: ``-3``, ``10``; ``0.5``, ``.5``,
#: ``1e-3``. Python's own readers also take ``1_000``, other scripts' digits (U+0665) and
#: ``nan``/``inf``; those stay text (docs/your-store.md).
_WHOLE = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE]-?[0-9]+)?")


def _keyword_value(text: str) -> Any:
    """A constructor argument's value: a whole number (``int``), a decimal number
    (``float``, finite), ``true``/``false`` (``bool``), else the text itself (``str``)."""
    if _WHOLE.fullmatch(text):
        return int(text)
    if text in ("true", "false"):
        return text == "true"
    if _DECIMAL.fullmatch(text):
        number = float(text)
        return number if math.isfinite(number) else text
    return text


def parse_keywords(name: str) -> dict[str, Any]:
    """The keyword arguments of ``module:Class+key:value+...`` (``{}`` without any).

    Raises :class:`VariantError` (one line) for a part that is not ``key:value``, a key that
    is not a Python identifier, or a key given twice."""
    _, rest = split_dotted(name)
    kwargs: dict[str, Any] = {}
    for part in rest.split("+") if rest else []:
        key, sep, text = part.partition(":")
        if not sep or not key.isidentifier() or not text:
            raise VariantError(
                f"retriever {name!r}: {part!r} is not key:value; pass constructor arguments "
                "as module:Class+key:value+key:value, e.g. stores:Faiss+ef:64")
        if key in kwargs:
            raise VariantError(f"retriever {name!r}: argument {key!r} is given twice; "
                               "give each once")
        kwargs[key] = _keyword_value(text)
    return kwargs


def _allowed(base: str) -> str:
    return ", ".join(f"{key} ({_example(base, key)})" for key in PARAMETERS[base])


def _example(base: str, key: str) -> str:
    try:
        PARAMETERS[base][key].parse("?")
    except ValueError as exc:
        return str(exc)
    return "any"  # pragma: no cover - every parser rejects "?"


def parse_variant(name: str) -> VariantSpec:
    """``"hybrid+rrf_k:60+fts:or"`` -> ``VariantSpec("hybrid+...", "hybrid", {...})``.

    Raises :class:`VariantError` (one line naming the allowed parameters and values).
    """
    base, *parts = name.split("+")
    if base not in PARAMETERS:
        from difflib import get_close_matches

        known = ("oracle", "vipune", *PARAMETERS)  # the built-ins that take none, then these
        meant = get_close_matches(base, known, n=1, cutoff=0.6)
        what = (f"{base!r} is no retriever; did you mean {meant[0]!r}? " if meant
                and meant[0] in PARAMETERS else f"{base!r} takes no parameters; ")
        raise VariantError(
            f"retriever {name!r}: {what}what-if parameters go on "
            f"{', '.join(PARAMETERS)}, e.g. hybrid+rrf_k:60+fts:or or fts+mode:or")
    params: dict[str, Any] = {}
    for part in parts:
        key, sep, text = part.partition(":")
        if not sep or key not in PARAMETERS[base]:
            what = f"unknown parameter {key!r}" if sep else f"{part!r} is not param:value"
            raise VariantError(
                f"retriever {name!r}: {what}; {base} takes {_allowed(base)}, "
                f"spelled {base}+param:value")
        if key in params:
            raise VariantError(f"retriever {name!r}: parameter {key!r} is given twice; "
                               "give each once")
        try:
            params[key] = PARAMETERS[base][key].parse(text)
        except ValueError as exc:
            raise VariantError(
                f"retriever {name!r}: {key}:{text} is not allowed; {key} must be {exc} "
                f"({base} takes {_allowed(base)})") from None
    if not params:
        raise VariantError(f"retriever {name!r}: no parameter after '+'; {base} takes "
                           f"{_allowed(base)}, e.g. {base}+{next(iter(PARAMETERS[base]))}:...")
    return VariantSpec(name, base, params)

