"""A ``cmd:`` store's costs against an in-process store's (issue 37 items 1 and 2): the Node
exact store (examples/stores/node/store.js) against the numpy store running the same
algorithm (examples/stores/python/numpy_store.py), as query and ingest ratios, on the bundled
sample and on generated data, for the working tree and a commit before it.

    python benchmarks/cmd_costs.py --before 21656d8 --repeat 3 --out /tmp/cmd-costs.md

Each version runs as real serial ``pytest --retrieval-eval`` processes (the working tree's
package, or the commit's from a ``git archive`` copy, put first on ``PYTHONPATH``; both use
the working tree's two example stores, or with ``--before-stores`` the commit runs its own),
interleaved (NEW, BEFORE, NEW, ...). The Node store records its own milliseconds per request
(``--times FILE``: from reading the chunk that ends the request's line to the answer's write
beginning; before 2026-12-06 the store read lines with Node's readline and timed from the line
event to the answer written),
set against the plugin's figures: the issue's target is the plugin's query latency
and ingest within 1 ms + 5 % of the store's own, and the two stores within 1.2x of each other.
NEW also runs the Node store with ``--base64`` (vectors as base64-f32le). Medians over the
repeats; the load average is printed with each row (2 shared cores: queries of a few tenths
of a millisecond move with the machine's load).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NODE_STORE = ROOT / "examples" / "stores" / "node" / "store.js"
PY_STORES = ROOT / "examples" / "stores" / "python"
NUMPY = "numpy_store:NumpyCosine"


def base_tree(rev: str, into: Path) -> Path:
    """The commit's files (``git archive``), whose package goes first on ``PYTHONPATH``."""
    tree = into / f"tree-{rev}"
    if not tree.is_dir():
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def generated(into: Path) -> tuple[Path, Path]:
    """A small synthetic LongMemEval_M (30 histories of 60 sessions) and the tiny 384-d model."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.data_setup import ensure_tiny_model
    from pytest_retrieval_eval.data.generator import instances as generator

    data = into / "generated.json"
    if not data.is_file():
        generator.write_dataset(generator.FULL_M.scaled(instances=30, sessions=60), data)
    return data, ensure_tiny_model(into)


def one_run(tree: Path | None, data: str, model: Path | None, cache: Path, work: Path,
            base64: bool, stores: Path = ROOT) -> dict[str, Any]:
    """One serial run: the report's timing of each store and the Node store's own times
    (the example stores of ``stores``, a tree)."""
    node_store = stores / NODE_STORE.relative_to(ROOT)
    py_stores = stores / PY_STORES.relative_to(ROOT)
    times = {"json": work / "times-json.json", "base64": work / "times-base64.json"}
    for t in times.values():
        t.unlink(missing_ok=True)
    node = shlex.join(["node", str(node_store), "--times", str(times["json"])])
    packed = shlex.join(["node", str(node_store), "--base64", "--times", str(times["base64"])])
    retrievers = [NUMPY, f"cmd:{node}", *([f"cmd:{packed}"] if base64 else [])]
    report = work / "report.json"
    # NEW is the working tree's package (ROOT first on the path), never an installed copy.
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=os.pathsep.join(
        [str(tree if tree is not None else ROOT), str(py_stores)]))
    lane = [f"--retrieval-eval-model={model}"] if model is not None else ["--no-model"]
    argv = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
            "-q", "--retrieval-eval", *lane, f"--retrieval-eval-data={data}",
            f"--retrieval-eval-cache={cache}", f"--retrieval-eval-json={report}",
            "--retrieval-eval-retriever", ",".join(retrievers)]
    folder = work / "run"  # an empty folder: pytest collects nothing else there
    folder.mkdir(exist_ok=True)
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}):\n{done.stdout[-3000:]}")
    got = json.loads(report.read_text())
    timing = got["timing"]
    names = got["retrievers"]
    out: dict[str, Any] = {"numpy": timing[names[0]], "node": timing[names[1]]}
    out["node_own"] = json.loads(times["json"].read_text())
    if base64:
        out["node64"] = timing[names[2]]
        out["node64_own"] = json.loads(times["base64"].read_text())
    return out


def figures(runs: list[dict[str, Any]], store: str) -> dict[str, float]:
    """Medians over the repeats: query median, ingest total and per persona, the store's own."""
    def med(values: list[float]) -> float:
        return statistics.median(values)
    out = {
        "query": med([r[store]["query"]["median"] for r in runs]),
        "ingest": med([r[store]["ingest"]["total_ms"] for r in runs]),
        "personas": med([r[store]["ingest"]["personas"] for r in runs]),
    }
    own = f"{store}_own"
    if own in runs[0]:
        out["own_query"] = med([statistics.median(r[own]["rank_ms"]) for r in runs])
        out["own_ingest"] = med([sum(r[own]["index_ms"]) for r in runs])
        out["index_requests"] = med([len(r[own]["index_ms"]) for r in runs])
        transport = [r[store].get("transport") for r in runs]
        if all(transport):
            out["transport_query"] = med([t["query"]["median"] for t in transport])
            out["transport_ingest"] = med([t["ingest_ms"] for t in transport])
        startup = [r[store].get("startup_ms") for r in runs]
        if all(s is not None for s in startup):
            out["startup"] = med(startup)
    return out


def within(plugin: float, own: float, calls: float = 1.0) -> str:
    """Whether the plugin's figure is within 1 ms (a call) + 5 % of the store's own."""
    ok = abs(plugin - own) <= calls * 1.0 + 0.05 * own
    return (f"{plugin:.3f} vs own {own:.3f}, {plugin - own:+.3f} "
            f"({'within' if ok else 'NOT within'} 1 ms + 5 %)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="21656d8")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--data", choices=("sample", "generated", "both"), default="both")
    parser.add_argument("--before-stores", action="store_true",
                        help="the commit runs its own example stores (default: the tree's)")
    args = parser.parse_args()
    if shutil.which("node") is None:
        raise SystemExit("node is not installed")
    work = args.work or Path(tempfile.mkdtemp(prefix="cmd-costs-"))
    work.mkdir(parents=True, exist_ok=True)
    before = base_tree(args.before, work)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    lines = [f"cmd_costs: NEW {head} (working tree) against {args.before}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"load {os.getloadavg()[0]:.1f}"
             + ("; the commit runs its own example stores" if args.before_stores else "")]
    sets = ["sample", "generated"] if args.data == "both" else [args.data]
    for which in sets:
        model = None
        data = "sample"
        if which == "generated":
            path, model = generated(work)
            data = str(path)
        versions = {"NEW": None, args.before: before}
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in versions}
        stores = {name: tree if tree is not None and args.before_stores else ROOT
                  for name, tree in versions.items()}
        for name, tree in versions.items():  # a warm-up each: prep, corpus, vectors
            one_run(tree, data, model, work / f"cache-{which}-{name}", work, base64=False,
                    stores=stores[name])
        for _ in range(args.repeat):
            for name, tree in versions.items():
                runs[name].append(one_run(tree, data, model, work / f"cache-{which}-{name}",
                                          work, base64=name == "NEW", stores=stores[name]))
        load = os.getloadavg()[0]
        for name in versions:
            numpy = figures(runs[name], "numpy")
            node = figures(runs[name], "node")
            lines.append(
                f"{which} {name}: query node {node['query']:.3f} ms / numpy "
                f"{numpy['query']:.3f} ms = {node['query'] / numpy['query']:.2f}x; ingest "
                f"node {node['ingest']:.1f} ms / numpy {numpy['ingest']:.1f} ms = "
                f"{node['ingest'] / numpy['ingest']:.1f}x; personas {node['personas']:.0f} "
                f"counted, {node['index_requests']:.0f} index requests; query "
                f"{within(node['query'], node['own_query'])}; ingest "
                f"{within(node['ingest'], node['own_ingest'], node['index_requests'])}"
                + (f"; transport {node['transport_query']:.3f} ms a query, "
                   f"{node['transport_ingest']:.1f} ms in ingest" if "transport_query" in node
                   else "")
                + (f"; start-up {node['startup']:.0f} ms" if "startup" in node else "")
                + f" (load {load:.1f})")
            if name == "NEW":
                packed = figures(runs[name], "node64")
                lines.append(
                    f"{which} NEW base64-f32le: query {packed['query']:.3f} ms = "
                    f"{packed['query'] / numpy['query']:.2f}x numpy; ingest "
                    f"{packed['ingest']:.1f} ms = {packed['ingest'] / numpy['ingest']:.1f}x; "
                    f"query {within(packed['query'], packed['own_query'])}; ingest "
                    f"{within(packed['ingest'], packed['own_ingest'], packed['index_requests'])}"
                    f"; transport {packed.get('transport_query', 0.0):.3f} ms a query, "
                    f"{packed.get('transport_ingest', 0.0):.1f} ms in ingest")
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
