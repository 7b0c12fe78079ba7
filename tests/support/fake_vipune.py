#!/usr/bin/env python3
"""A stand-in for the ``vipune`` binary: the v0.1.8 command-line surface the harness drives.

``vipune [--json] [--db-path PATH] [-p/--project ID] search QUERY [-l/--limit N]
[--recency W] [--hybrid]`` over the REAL store file: it opens the SQLite database and runs the
reference search of ``pytest_retrieval_eval.vipune`` (hybrid or semantic), printing vipune's
``--json`` output, or vipune's error forms (``{"error": ...}`` on stdout with ``--json``,
``Error: ...`` on stderr otherwise; exit status 1; usage errors exit 2 like clap).

It cannot embed. The query vector comes from ``FAKE_VIPUNE_VECTORS``: a JSON file mapping the
query text to a list of floats. Without a vector for the query it ranks by FTS only (and says so
on stderr).

Misbehaviour on cue, ``FAKE_VIPUNE_MODE``:
``crash`` (stderr text, exit 1), ``hang`` (sleeps far past any timeout), ``garbage`` (not JSON,
exit 0), ``unknown_ids`` (valid JSON naming rows that do not exist), ``json_error`` (vipune's
JSON error form, exit 1), ``duplicates`` (the first result twice), ``wrong_shape`` (JSON of
another shape). ``FAKE_VIPUNE_LOG``: append one JSON line per call with argv and the VIPUNE_*
environment it saw.

Tests run it through a generated wrapper that execs ``sys.executable`` on this file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def _log(argv: list[str]) -> None:
    path = os.environ.get("FAKE_VIPUNE_LOG")
    if not path:
        return
    env = {k: v for k, v in os.environ.items() if k.startswith("VIPUNE_")}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"argv": argv, "env": env}) + "\n")


def _fail(message: str, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"error": message}, indent=2, ensure_ascii=False))
    else:
        print(f"Error: {message}", file=sys.stderr)
    return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vipune")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-p", "--project")
    parser.add_argument("--db-path")
    commands = parser.add_subparsers(dest="command", required=True)
    search = commands.add_parser("search")
    search.add_argument("query")
    search.add_argument("-l", "--limit", type=int, default=5)
    search.add_argument("--recency", type=float)
    search.add_argument("--hybrid", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    _log(args_list)
    mode = os.environ.get("FAKE_VIPUNE_MODE", "")
    if mode == "crash":
        print("thread 'main' panicked at src/sqlite/search.rs:42: fake crash", file=sys.stderr)
        return 1
    if mode == "hang":
        time.sleep(3600)
        return 0
    if mode == "garbage":
        print("Downloading model... 100%\nnot json at all")
        return 0
    args = _parser().parse_args(args_list)  # exits 2 on a usage error, as clap does

    from pytest_retrieval_eval import vipune

    as_json = bool(args.json)
    if mode == "json_error":
        return _fail("Inference error: fake model failure", as_json)
    if args.db_path is None:
        return _fail("Configuration error: the fake vipune needs --db-path", as_json)
    db_path = Path(args.db_path)
    if ".." in db_path.parts:
        return _fail(
            "Configuration error: Invalid database path: contains '..' which may escape the "
            "intended directory",
            as_json,
        )
    project = (args.project or "").strip() or os.environ.get("VIPUNE_PROJECT", "").strip()
    project = project or "unknown"
    recency = 0.3 if args.recency is None else args.recency  # vipune's config default
    try:
        vipune.validate_recency(recency)
        rows = vipune.load_rows(db_path, project)
        qvec = _query_vector(args.query)
        if qvec is None:
            print("fake vipune: no vector for this query, FTS only", file=sys.stderr)
        if args.hybrid:
            if qvec is None:
                trimmed = vipune.validate_query(args.query)
                vipune.validate_limit(args.limit)
                pool = vipune.candidate_pool(args.limit)
                fts = vipune.fts_search(db_path, trimmed, project, pool)
                ranked = vipune.rrf_fuse([], [i for i, _ in fts])[: args.limit]
            else:
                ranked = vipune.search_hybrid(
                    db_path,
                    rows.vectors,
                    rows.ids,
                    args.query,
                    qvec,
                    args.limit,
                    recency,
                    project_id=project,
                    created_at=dict(zip(rows.ids, rows.created_at, strict=True)),
                )
        else:
            vipune.validate_limit(args.limit)
            vipune.validate_query(args.query)
            if qvec is None:
                return _fail("Inference error: the fake vipune cannot embed", as_json)
            ranked = vipune.semantic_search(rows.vectors, rows.ids, qvec, args.limit)
    except vipune.VipuneInputError as exc:
        message = exc.vipune_message
        if not message.startswith("Input"):
            message = "Invalid input: " + message
        return _fail(message, as_json)
    except ValueError as exc:
        return _fail(str(exc), as_json)

    content = dict(zip(rows.ids, rows.contents, strict=True))
    created = dict(zip(rows.ids, rows.created_at, strict=True))
    results = [(i, content[i], score, created[i]) for i, score in ranked]
    if mode == "unknown_ids":
        results = [("no-such-" + i, c, s, t) for i, c, s, t in results] or [
            ("no-such-row", "", 0.0, "")
        ]
    if mode == "duplicates" and results:
        results = [results[0], *results]
    if mode == "wrong_shape":
        print(json.dumps({"memories": [{"id": i} for i, *_ in results]}))
        return 0
    if as_json:
        print(vipune.format_search_json(results))
    else:
        for i, c, s, _ in results:
            print(f"{i} [score: {s:.2f}]\n  {c}\n")
    return 0


def _query_vector(query: str) -> list[float] | None:
    path = os.environ.get("FAKE_VIPUNE_VECTORS")
    if not path or not Path(path).is_file():
        return None
    table = json.loads(Path(path).read_text(encoding="utf-8"))
    vec = table.get(query)
    return None if vec is None else [float(x) for x in vec]


if __name__ == "__main__":
    sys.exit(main())
