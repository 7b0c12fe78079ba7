"""What an ``mcp:`` retriever calls and where it reads the answers: the mapping.

A mapping is a preset (``+preset:NAME``), a small TOML file (``+map:PATH``), and the
``+key:value`` options over either. Its keys (flat, the same in TOML and as options):

- ``store_tool``, ``search_tool``: the tools that store one memory and search;
- ``store_arguments``, ``search_arguments`` (TOML tables): the arguments as templates. A string
  value that is exactly one placeholder is replaced by the value, whatever its type:
  ``"{text}"``, ``"{id}"`` (the session id, or the turn id under ``unit = "turn"``),
  ``"{session}"``, ``"{turn}"``, ``"{date}"`` (the session's date, RFC 3339, or ``""``),
  ``"{metadata}"`` (``{"session_id", "turn_id"?, "created_at"}``); ``"{query}"``,
  ``"{limit}"``, ``"{question_date}"``. Anything else is sent as written;
- ``text_arg``, ``metadata_arg``, ``date_arg``, ``name_arg``, ``query_arg``, ``limit_arg``
  (options): one argument each, added to those templates (``""`` leaves one out);
- ``results``: where the result list sits in the search answer (a dotted path; ``""``: the
  answer is the list), and in each result ``result_id``, ``result_score``, ``result_text`` and
  ``result_metadata`` (``""``: not given);
- ``stored_id``: where the store answer gives the new memory's id (provenance of later
  results that carry only that id); ``conflict``: the values (comma-separated) of an error's
  ``data.type`` (or an answer's ``status``) that mean "refused, not stored" (vipune:
  ``conflict``, and ``invalid_input`` for a text past its 100,000-byte limit);
- ``reset_tool``: a tool called before each persona's ingest (a URL server's reset);
- ``unit``: ``session`` (one store call per session) or ``turn``; ``limit_sensitive``: search
  once per cut-off k (a store whose top results depend on the limit);
- ``env`` (TOML table): the server's environment over the run's, ``{workdir}`` replaced by
  the server's own folder.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import RetrievalEvalError, printable

__all__ = ["PRESETS", "ToolMapping", "build_mapping", "check_options", "fill"]

_TEXT_KEYS = ("store_tool", "search_tool", "results", "result_id", "result_score",
              "result_text", "result_metadata", "stored_id", "conflict", "reset_tool")
_ARG_KEYS = {"text_arg": ("store", "{text}"), "metadata_arg": ("store", "{metadata}"),
             "date_arg": ("store", "{date}"), "name_arg": ("store", "{id}"),
             "query_arg": ("search", "{query}"), "limit_arg": ("search", "{limit}")}
_TABLES = ("store_arguments", "search_arguments", "env")
_VIPUNE_KEYS = ("recency", "hybrid", "force")
#: Every option an ``mcp:`` selector takes, for the one line that names them.
OPTION_KEYS = ("preset", "map", "unit", "limit_sensitive", *_TEXT_KEYS, *_ARG_KEYS,
               *_VIPUNE_KEYS)


@dataclass(frozen=True)
class ToolMapping:
    """The tools, their argument templates and where an answer holds what."""

    preset: str
    store_tool: str
    search_tool: str
    store_arguments: dict[str, Any]
    search_arguments: dict[str, Any]
    results: str = ""
    result_id: str = "id"
    result_score: str = "score"
    result_text: str = "text"
    result_metadata: str = "metadata"
    stored_id: str = ""
    conflict: str = ""
    reset_tool: str = ""
    unit: str = "session"
    limit_sensitive: bool = False
    env: dict[str, str] = field(default_factory=dict)

    @property
    def refusals(self) -> tuple[str, ...]:
        """The ``data.type`` / ``status`` values that mean "refused, not stored"."""
        return tuple(v.strip() for v in self.conflict.split(",") if v.strip())

    def config(self) -> dict[str, Any]:
        """What sets the numbers, recorded with them (``store_config``)."""
        return {"preset": self.preset, "unit": self.unit, "store_tool": self.store_tool,
                "search_tool": self.search_tool,
                "search_arguments": {k: v for k, v in self.search_arguments.items()
                                     if not (isinstance(v, str) and v.startswith("{"))},
                **({"force": True} if self.store_arguments.get("force") is True else {})}


# vipune's MCP server: tool names and parameters from src/mcp/params.rs at 61e2187, answers
# from src/mcp/tools.rs at 2bc4864 (randomm/vipune): store_memory answers
# {"id", "status": "added"} as JSON text, a conflict is an INVALID_REQUEST error whose data's
# "type" is "conflict"; search_memories answers [{"id", "content", "similarity",
# "created_at"}] best first (later versions add the stored "metadata", read when there);
# provenance from the metadata, else from the id the store answer gave.
_VIPUNE = ToolMapping(
    preset="vipune", store_tool="store_memory", search_tool="search_memories",
    store_arguments={"text": "{text}", "metadata": "{metadata}"},
    # The seed's protocol: hybrid search, no recency (vipune's own default weight is 0.3).
    search_arguments={"query": "{query}", "limit": "{limit}", "hybrid": True,
                      "recency_weight": 0.0},
    results="", result_id="id", result_score="similarity", result_text="content",
    result_metadata="metadata", stored_id="id", conflict="conflict,invalid_input",
    limit_sensitive=True)

# @modelcontextprotocol/server-memory: a knowledge graph kept in MEMORY_FILE_PATH (a JSON
# lines file); create_entities takes {"entities": [{name, entityType, observations}]},
# search_nodes {"query"} answers the matching part of the graph, {"entities", "relations"}.
_SERVER_MEMORY = ToolMapping(
    preset="server-memory", store_tool="create_entities", search_tool="search_nodes",
    store_arguments={"entities": [{"name": "{id}", "entityType": "session",
                                   "observations": ["{text}"]}]},
    search_arguments={"query": "{query}"},
    results="entities", result_id="name", result_score="", result_text="observations",
    result_metadata="", env={"MEMORY_FILE_PATH": "{workdir}/memory.jsonl"})

_GENERIC = ToolMapping(
    preset="generic", store_tool="", search_tool="",
    store_arguments={"text": "{text}", "metadata": "{metadata}"},
    search_arguments={"query": "{query}", "limit": "{limit}"})

PRESETS: dict[str, ToolMapping] = {m.preset: m for m in (_VIPUNE, _SERVER_MEMORY, _GENERIC)}


def _fail(selector: str, message: str) -> RetrievalEvalError:
    return RetrievalEvalError(printable(f"retriever '{selector}': {message}"))


def _read_toml(selector: str, path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: pytest's own dependency there
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    try:
        with path.open("rb") as f:
            document: dict[str, Any] = tomllib.load(f)
            return document
    except OSError as exc:
        raise _fail(selector, f"cannot read its mapping {path} ({exc.strerror or exc}); "
                    "give +map:PATH of a TOML file (relative to the rootdir)") from None
    except tomllib.TOMLDecodeError as exc:
        raise _fail(selector, f"its mapping {path} is not TOML ({exc}); fix the file") \
            from None


def _apply(selector: str, base: ToolMapping, values: Mapping[str, Any],
           where: str) -> ToolMapping:
    """``values`` (a TOML file's or the options) over ``base``; one line for a bad one."""
    changes: dict[str, Any] = {}
    store = dict(base.store_arguments)
    search = dict(base.search_arguments)
    for key, value in values.items():
        if key in ("preset", "map"):
            continue
        if key in _TEXT_KEYS:
            if not isinstance(value, str):
                raise _fail(selector, f"{where} {key} = {value!r} is not text; give a name")
            changes[key] = value
        elif key in _ARG_KEYS:
            if not isinstance(value, str):
                raise _fail(selector, f"{where} {key} = {value!r} is not text; give an "
                            "argument's name")
            table, placeholder = _ARG_KEYS[key]
            target = store if table == "store" else search
            for name in [n for n, v in target.items() if v == placeholder]:
                del target[name]
            if value:
                target[value] = placeholder
        elif key in _TABLES:
            if not isinstance(value, dict):
                raise _fail(selector, f"{where} {key} is not a table; write [{key}]")
            if key == "env":
                if not all(isinstance(v, str) for v in value.values()):
                    raise _fail(selector, f"{where} [env] values must be text")
                changes["env"] = {**base.env, **value}
            else:
                (store if key == "store_arguments" else search).clear()
                (store if key == "store_arguments" else search).update(value)
        elif key == "unit":
            if value not in ("session", "turn"):
                raise _fail(selector, f"{where} unit = {value!r}; give session or turn")
            changes["unit"] = value
        elif key in ("limit_sensitive", "hybrid", "force"):
            if not isinstance(value, bool):
                raise _fail(selector, f"{where} {key} = {value!r}; give true or false")
            if key == "limit_sensitive":
                changes[key] = value
            elif base.preset != "vipune":
                raise _fail(selector, f"+{key} is the vipune preset's; name the argument in "
                            "a mapping (+map:PATH) for another server")
            elif key == "hybrid":
                search["hybrid"] = value
            else:
                store["force"] = value
        elif key == "recency":
            if base.preset != "vipune":
                raise _fail(selector, "+recency is the vipune preset's; name the argument "
                            "in a mapping (+map:PATH) for another server")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise _fail(selector, f"+recency:{value} is not a weight from 0 to 1; give "
                            "e.g. +recency:0.3 (vipune's own default)")
            search["recency_weight"] = float(value)
        else:
            raise _fail(selector, f"{where} has no key {key!r}; it takes "
                        f"{', '.join(OPTION_KEYS)} (docs/memory-servers.md)")
    return replace(base, store_arguments=store, search_arguments=search, **changes)


def build_mapping(selector: str, options: Mapping[str, Any],
                  rootdir: Path | None = None) -> ToolMapping:
    """The mapping an ``mcp:`` selector's options give: the preset (``generic`` when none),
    a ``+map:PATH`` file over it, then the other options. One line for anything wrong."""
    preset = options.get("preset", "generic")
    if preset not in PRESETS:
        raise _fail(selector, f"+preset:{preset} is unknown; choose from "
                    f"{', '.join(PRESETS)}, or give +map:PATH")
    mapping = PRESETS[str(preset)]
    path = options.get("map")
    if path is not None:
        file = Path(str(path)).expanduser()
        if not file.is_absolute() and rootdir is not None:
            file = rootdir / file
        table = _read_toml(selector, file)
        inner = table.get("preset", preset if "preset" in options else "generic")
        if inner not in PRESETS:
            raise _fail(selector, f"{file}: preset = {inner!r} is unknown; choose from "
                        f"{', '.join(PRESETS)}")
        mapping = _apply(selector, PRESETS[str(inner)], table, f"mapping {file}:")
    mapping = _apply(selector, mapping, options, "option")
    for key in ("store_tool", "search_tool"):
        if not getattr(mapping, key):
            raise _fail(selector, f"no {key} is named; give +{key}:NAME (or a preset: "
                        f"{', '.join(p for p in PRESETS if p != 'generic')}, or +map:PATH)")
    return mapping


def check_options(selector: str, options: Mapping[str, Any]) -> None:
    """The options that can be checked before the run (no file read): the keys, the preset's
    name, the unit. One line for a bad one (a usage error at the command line)."""
    preset = options.get("preset", "generic")
    if preset not in PRESETS:
        raise _fail(selector, f"+preset:{preset} is unknown; choose from "
                    f"{', '.join(PRESETS)}, or give +map:PATH")
    unknown = next((k for k in options if k not in OPTION_KEYS), None)
    if unknown is not None:
        raise _fail(selector, f"option has no key {unknown!r}; it takes "
                    f"{', '.join(OPTION_KEYS)} (docs/memory-servers.md)")
    if options.get("unit", "session") not in ("session", "turn"):
        raise _fail(selector, f"option unit = {options['unit']!r}; give session or turn")


def fill(template: Any, values: Mapping[str, Any]) -> Any:
    """``template`` with every string that is exactly ``"{name}"`` of ``values`` replaced by
    that value (in lists and tables too)."""
    if isinstance(template, str):
        if template.startswith("{") and template.endswith("}") and template[1:-1] in values:
            return values[template[1:-1]]
        return template
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    return template
