"""``retrieval-eval badge REPORT.json --retriever NAME --metric recall@10 [--out FILE]``: one
number of a saved report as shields.io's endpoint JSON, or with ``--svg`` as a self-contained
SVG (:mod:`pytest_retrieval_eval.reporting.badge`; colour bands in docs/ci.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from .args import file_path, write_fitted

__all__ = ["add_commands", "run"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """The ``badge`` subcommand."""
    badge = sub.add_parser(
        "badge", help="one number of a report as a badge (shields.io endpoint JSON or SVG)",
        description="Write a retriever's overall value of a metric as shields.io's endpoint "
        "JSON (schemaVersion 1, label, message, color by value), or with --svg as a "
        "self-contained SVG badge (no network, no font files). The colour marks a band, "
        "never a pass or a fail (docs/ci.md).")
    badge.add_argument("report", metavar="REPORT.json", help="a report of --retrieval-eval-json")
    badge.add_argument("--retriever", default=None, metavar="NAME",
                       help="the retriever (default: the report's first)")
    badge.add_argument("--metric", default=None, metavar="NAME",
                       help="the metric, family@k: recall@10, ndcg_any@5, ... (default: the "
                       "table's family at the report's largest k)")
    badge.add_argument("--out", type=file_path, default=None, metavar="FILE",
                       help="the file written (replaced atomically; default: badge.json, "
                       "with --svg badge.svg)")
    badge.add_argument("--svg", action="store_true",
                       help="write an SVG badge instead of the endpoint JSON")
    badge.add_argument("--label", default=None, metavar="TEXT",
                       help="the badge's label (default: 'METRIC NAME', e.g. 'recall@10 "
                       "hybrid')")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``badge``; returns the exit status."""
    from ..errors import printable
    from ..io import user_files
    from ..reporting import badge
    from ..reporting.compare import load_report, primary_family
    from .reports import _check_apart

    path = Path(args.report)
    if args.out is None:
        args.out = Path("badge.svg" if args.svg else "badge.json")
    _check_apart("--out", args.out, [path], "svg" if args.svg else "badge-json")
    report = load_report(path, slim=True)
    summary = report.get("summary") or {}
    retriever = args.retriever or next((r for r in report["retrievers"] if r in summary), "")
    metric = args.metric or f"{primary_family(report)}@{max(report['ks'])}"
    value = badge.badge_value(report, retriever, metric)
    label = args.label if args.label is not None else f"{metric} {retriever}"
    text = (badge.badge_svg(label, value, metric) if args.svg
            else user_files.json_text(badge.endpoint_json(label, value, metric), indent=2)
            + "\n")
    try:
        user_files.replace_text(args.out, text)
    except OSError as exc:
        raise badge.BadgeError(f"badge {args.out} cannot be written "
                               f"({user_files.fault(exc, args.out)}); pass another --out"
                               ) from None
    # Names from the report reach the terminal escaped, as explain and compare print them.
    write_fitted(out, [printable(f"badge: {args.out} ({label}: {badge.message(metric, value)}, "
                                 f"{badge.metric_color(metric, value)[0]})")])
    return 0
