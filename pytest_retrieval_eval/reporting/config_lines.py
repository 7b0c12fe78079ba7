"""A store's config (retrievers/store_config.py) in the report, the header, Markdown and compare.

Each pair's result carries its retriever's config to the controller; :func:`collect` keeps
one per retriever (the JSON's top-level ``config``: retriever -> mapping) and drops it from
the pairs. :func:`config_text` words one config, bounded (:data:`SHOWN`): ``ef:64, M:16``,
as ``+key:value`` spells them; :func:`retrievers_text` the header's retriever list with each
config in brackets. :func:`config_changes` tells, per compared lane, whether the two sides'
configs differ; :func:`compare_config_lines` words it under compare's header.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import printable

__all__ = ["SHOWN", "collect", "compare_config_lines", "config_changes", "config_markdown",
           "config_text", "retrievers_text"]

#: The most characters one config takes on the terminal (the JSON keeps it whole).
SHOWN = 60


def collect(results: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(configs, results)``: per retriever the config its pairs carried (the first), and
    the results without it (copies of those that held one)."""
    configs: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    for r in results:
        if "config" in r:
            configs.setdefault(str(r["retriever"]), r["config"])
            r = {k: v for k, v in r.items() if k != "config"}
        out.append(r)
    return configs, out


def _value(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def config_text(config: object, limit: int = SHOWN) -> str:
    """``ef:64, M:16`` (a key's value as compact JSON unless it is a string), cut at
    ``limit`` characters with ``…``; control characters escaped."""
    if not isinstance(config, Mapping):
        return ""
    text = printable(", ".join(f"{key}:{_value(value)}" for key, value in config.items()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retrievers_text(retrievers: Sequence[str], configs: Mapping[str, Any] | None) -> str:
    """``hybrid, faiss [ef:64, M:16]``: each retriever with its config, where it has one."""
    configs = configs or {}
    shown = []
    for name in retrievers:
        said = config_text(configs.get(name))
        shown.append(f"{name} [{said}]" if said else name)
    return ", ".join(shown)


def config_markdown(report: Mapping[str, Any], span: Any) -> list[str]:
    """A bullet per retriever with a config (``span`` makes text a code span); [] when
    none has one."""
    configs = report.get("config")
    if not isinstance(configs, Mapping) or not configs:
        return []
    lines = ["Configuration of the stores:", ""]
    lines.extend(f"- {span(name)}: {span(config_text(cfg, 4 * SHOWN))}"
                 for name, cfg in configs.items())
    return [*lines, ""]


def config_changes(base: Mapping[str, Any], new: Mapping[str, Any],
                   lanes: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
    """Per compared lane ``(base retriever, new retriever, label)`` whose either side has a
    config: ``{"base": cfg or None, "new": cfg or None, "same": bool}``."""
    base_cfg: Mapping[str, Any] = base.get("config") or {}
    new_cfg: Mapping[str, Any] = new.get("config") or {}
    if not isinstance(base_cfg, Mapping) or not isinstance(new_cfg, Mapping):
        return {}
    out: dict[str, Any] = {}
    for b, n, label in lanes:
        a, c = base_cfg.get(b), new_cfg.get(n)
        if a is None and c is None:
            continue
        out[label] = {"base": a, "new": c, "same": a == c}
    return out


def compare_config_lines(cmp: Mapping[str, Any]) -> list[str]:
    """``config faiss: ef:64, M:16 (both)``, or ``config faiss differs: base ef:10, M:16 ->
    new ef:64, M:16``; then, when every lane's numbers could differ only by config (same
    dataset, lane, model and protocol), one line saying so."""
    changes = cmp.get("config")
    if not isinstance(changes, Mapping) or not changes:
        return []
    lines = []
    for label, change in changes.items():
        if change.get("same"):
            lines.append(f"config {label}: {config_text(change.get('base'))} (both)")
        else:
            lines.append(f"config {label} differs: base {config_text(change.get('base')) or 'none'}"
                         f" -> new {config_text(change.get('new')) or 'none'}")
    differ = [label for label, change in changes.items() if not change.get("same")]
    base, new = cmp.get("base") or {}, cmp.get("new") or {}
    alike = all(base.get(key) == new.get(key)
                for key in ("sha256", "lane", "model", "protocol"))
    if differ and alike and cmp.get("kind") == "reports":
        lines.append(f"the runs' only recorded difference is the config of "
                     f"{', '.join(differ)} (same data, lane, model and protocol)")
    return lines
