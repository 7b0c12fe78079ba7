"""Which tables the terminal summary shows (issue 38, item 2): by default the protocol's main
table alone (recall@k; recall_any@k under LongMemEval's protocol; at turn granularity the
session metrics derived from the turns too), with ``-v`` every one,
with ``--retrieval-eval-tables`` (ini ``retrieval_eval_tables``) the ones it names.

A table's name is its metric family (``recall``, ``recall_any``, ``recall_all``,
``ndcg_any``, ``session_recall``, ``memory_recall``, ``turn_recall``, any family a report
holds), ``budget`` (recall@<B>tok and tokens@k) or ``timing`` (latency, ingest and the
harness's overhead); ``all`` names every one. A name the run has no table of is said in a
line under the summary, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .summary_table import SESSION_FAMILIES, families_for

__all__ = ["ALL", "Choice", "chosen", "table_names"]

#: The value naming every table.
ALL = "all"
#: Names that are no metric family.
OTHER_TABLES = ("budget", "timing")


def table_names(report: Mapping[str, Any]) -> list[str]:
    """Every table this report can show, in the summary's order."""
    families = families_for(str(report.get("protocol") or "vipune"),
                            str(report.get("granularity") or "session"),
                            report.get("summary") or {})
    names = [family for family, _ in families]
    if (report.get("budget") or {}).get("budgets"):
        names.append("budget")
    return [*names, "timing"]


def main_tables(report: Mapping[str, Any]) -> list[str]:
    """The default's tables: the protocol's main family and, at turn granularity, the
    session metrics derived from the turn ranking (``session_recall``, or LongMemEval's
    ``session_recall_any``)."""
    protocol = str(report.get("protocol") or "vipune")
    families = families_for(protocol, str(report.get("granularity") or "session"))
    main = [families[0][0]]
    if report.get("granularity") == "turn":
        main.append(SESSION_FAMILIES[protocol][0][0] if protocol in SESSION_FAMILIES
                    else families[-1][0])
    return main


@dataclass(frozen=True)
class Choice:
    """The tables shown: ``families`` (for :func:`.summary_table.table_lines`), ``shown``
    (every name shown, ``budget`` and ``timing`` included) and the names asked for that
    this run has no table of (``unknown``)."""

    families: tuple[tuple[str, str], ...]
    shown: frozenset[str]
    unknown: tuple[str, ...]
    available: tuple[str, ...]

    def unknown_lines(self) -> list[str]:
        """One line naming what was asked for and is not a table of this run."""
        if not self.unknown:
            return []
        return [f"retrieval-eval: warning: --retrieval-eval-tables names "
                f"{', '.join(self.unknown)}, which this run has no table of; its tables: "
                f"{', '.join(self.available)} (or all)"]


def chosen(report: Mapping[str, Any], tables: Sequence[str] | None,
           verbose: bool) -> Choice:
    """The tables to show: ``tables`` (names, or ``("all",)``) when given, else every table
    under ``verbose``, else the main one."""
    families = families_for(str(report.get("protocol") or "vipune"),
                            str(report.get("granularity") or "session"),
                            report.get("summary") or {})
    available = table_names(report)
    if tables is None:
        wanted = set(available) if verbose else set(main_tables(report))
    elif ALL in tables:
        wanted = set(available)
    else:
        wanted = set(tables)
    unknown = tuple(name for name in dict.fromkeys(tables or ())
                    if name != ALL and name not in available)
    return Choice(families=tuple(f for f in families if f[0] in wanted),
                  shown=frozenset(wanted & set(available)), unknown=unknown,
                  available=tuple(available))
