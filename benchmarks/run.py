"""Full-scale benchmark of pytest-retrieval-eval on a synthetic LongMemEval_M.

One command::

    python benchmarks/run.py                      # full size (~2.7 GB dataset), ~15 minutes
    python benchmarks/run.py --scale small        # the same phases in about a minute

It generates (or reuses) the dataset with :mod:`pytest_retrieval_eval.generator` outside the
repository (``--data-dir``, default ``~/.cache/pytest-retrieval-eval-bench``), then measures:

1. load: the dataset streamed once into the corpus file (fresh cache), peak RSS;
   then a later process opening it again (the sha256 memo, no dataset read);
2. prep: every unique text embedded with the tiny test model (dim 384, vipune-shaped stores);
3. per-run: real ``pytest --retrieval-eval --no-model`` subprocesses in an empty directory:
   the first run after prep (builds one store per persona), warm runs serial and ``-n 2``
   (median of ``--repeat``), wall clock and peak RSS of the whole process tree;
4. bm25: LongMemEval's own baseline (``rank_bm25.BM25Okapi`` rebuilt per question) against
   the ``bm25`` retriever, in this process, on the same pairs, rankings asserted identical;
5. verify: what the re-verification policy (docs/reliability.md) costs: the corpus pairs'
   digest, the dataset sample, texts against their keys, the stores and terms file rehashed;
6. embedding: :meth:`Embedder.embed` against onnxruntime called directly on the same
   batches (MiniLM when ``--minilm`` is an ONNX export, and the tiny model), MiniLM prep
   throughput and the model lane's per-query latency;
7. compare: ``retrieval-eval compare`` of two synthetic full-M-sized reports (470 pairs, five
   retrievers, 10,000 permutations and resamples), as a subprocess (``--only compare`` needs
   no dataset), and its peak memory at 5,000 and 50,000 pairs of one retriever (target
   under 300 MiB);
8. hub (only when asked: ``--only hub``, no dataset needed): ``retrieval-eval cache push``
   and ``cache pull`` of a vector cache of the synthetic M's size (41,140 vectors of dim 384
   in prep's shard layout) through the local stand-in of the Hub (tests/support/hub_standin.py).
8. scale (only when asked: ``--only scale``): prep from an empty vector cache, unsharded
   against 2-way ``--shard`` + ``cache merge`` (same keys, same vectors?), against ``--ray``
   on a local 2-CPU Ray (bit-identical?), and a 50-pair ``--subset`` (docs/scaling.md).

It prints a table (phase, wall, peak memory, items/s, target, result) and writes it with the
machine's description to ``--out`` (default ``benchmarks/RESULTS.md`` at full scale).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

# tests.support.model_factory (the tiny model) lives in the repo, and so does this package:
# ``python benchmarks/run.py`` puts only benchmarks/ on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import measuring
from benchmarks.bm25_verify_phases import bm25_phase, verify_phase
from benchmarks.compare_hub_phases import (
    M_VECTORS,
    compare_memory_phase,
    compare_phase,
    hub_phase,
)
from benchmarks.data_setup import (
    DEFAULT_DATA_DIR,
    SCALES,
    Scale,
    ensure_data,
    ensure_tiny_model,
)
from benchmarks.embedding_phase import embedding_phase
from benchmarks.harness_phases import (
    load_phase,
    prep_phase,
    run_phase,
    turn_phase,
)
from benchmarks.measuring import ROOT, Results, du
from benchmarks.report_writing import machine, table, write_results
from benchmarks.scale_phase import scale_phase
from pytest_retrieval_eval.data import corpus as corpus_mod


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help=f"where data, cache and stores go (default: {DEFAULT_DATA_DIR})")
    parser.add_argument("--repeat", type=int, default=3, help="warm runs of each kind")
    parser.add_argument("--minilm", type=Path, default=Path("/tmp/minilm-onnx"),
                        help="MiniLM ONNX export (scripts/export_minilm_onnx.py); skipped if "
                             "absent")
    parser.add_argument("--only", default="load,prep,run,bm25,verify,embed,compare",
                        help="comma list of phases to run (default: all but hub, turn and "
                             "scale; scale preps the dataset five times over: "
                             "docs/scaling.md)")
    parser.add_argument("--turn-instances", type=int, default=500,
                        help="personas of the turn phase (--only turn), each of M's full "
                             "size (default: 500, the whole synthetic M)")
    parser.add_argument("--scale-steps", default="reference,shard,ray,subset",
                        help="steps of the scale phase (default: all)")
    parser.add_argument("--scale-pairs", type=int, default=None,
                        help="run the scale phase's unsharded/shard/Ray comparisons on this "
                             "many pairs (prep --subset N) instead of the whole dataset")
    parser.add_argument("--full-prep-wall", type=float, default=None,
                        help="a full prep's wall (s) measured earlier, for the subset row's "
                             "ratio when --scale-pairs is given")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="skip the cProfile'd warm serial run (its summary goes into the "
                             "results file)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file (default: benchmarks/RESULTS.md at full scale, "
                             "<data-dir>/small/RESULTS.md at small scale)")
    parser.add_argument("--against", metavar="REV", default=None,
                        help="measure the working tree against the commit or branch REV, "
                             "each in its own scratch venv, phases interleaved, and print "
                             "NEW/REV ratios (benchmarks/against.py); --only is ignored but "
                             "for 'memories': the turn paths and the budget after the "
                             "other phases (--only memories: those alone)")
    parser.add_argument("--first-runs", default=None, metavar="KINDS",
                        help="with --against and --only memories: only these memory runs' "
                             "first runs, a comma list of sem-turn, bm25-turn, fts-turn, "
                             "budget (default: every first and warm run)")
    parser.add_argument("--warm-only", action="store_true",
                        help="with --against: only the warm runs, on the caches an earlier "
                             "full --against run left (the venvs made anew)")
    args = parser.parse_args(argv)
    _first_runs(args)  # refused before any data is made
    scale = SCALES[args.scale]
    if args.against is not None:
        return _against(args, scale)
    measuring.INDICATIVE = scale.name != "full"  # verdict() and the results file read it
    phases = set(args.only.split(","))
    args.data_dir = args.data_dir.expanduser().resolve()
    out = args.out or (ROOT / "benchmarks" / "RESULTS.md" if scale.name == "full"
                       else args.data_dir / "small" / "RESULTS.md")
    info = machine()
    print("\n".join(info), flush=True)
    results = Results()
    if "compare" in phases:
        compare_phase(results)
        compare_memory_phase(results)
    if phases == {"compare"}:  # nothing else asked: no dataset needed
        print("\n".join(table(results.rows)))
        if args.out is not None:
            write_results(args.out, scale, args, results, info, "python benchmarks/run.py "
                          + " ".join(argv if argv is not None else sys.argv[1:]))
        return 1 if any(r.result == "FAIL" for r in results.rows) else 0
    if phases == {"turn"}:  # its own data: personas of M's size at turn granularity
        tiny = ensure_tiny_model(args.data_dir)
        turn_phase(args.data_dir, tiny, args.turn_instances, args.repeat, results)
        print("\n".join(table(results.rows)))
        write_results(out, scale, args, results, info, "python benchmarks/run.py " + " ".join(
            argv if argv is not None else sys.argv[1:]))
        print(f"\nwritten to {out}")
        return 0
    if phases == {"hub"}:  # no dataset needed: vectors of the synthetic M's size
        hub_phase(args.data_dir / scale.name, M_VECTORS if scale.name == "full" else 4_096,
                  results)
        print("\n".join(table(results.rows)))
        write_results(out, scale, args, results, info, "python benchmarks/run.py "
                      + " ".join(argv if argv is not None else sys.argv[1:]))
        print(f"\nwritten to {out}")
        return 1 if any(r.result == "FAIL" for r in results.rows) else 0
    data, tiny = ensure_data(scale, args.data_dir, results)
    cache = args.data_dir / scale.name / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    cfg = scale.config
    usable = cfg.n_instances - cfg.n_abstention
    if "load" in phases:
        load_phase(data, cache, cfg.n_instances, results)
    if "prep" in phases:
        prep_phase(data, tiny, cache, results)
    if "run" in phases:
        profile = args.data_dir / scale.name / "warm.prof" if args.profile else None
        run_phase(data, cache, usable, args.repeat, results, profile)
    if "bm25" in phases:
        bm25_phase(cache, results)
    if "verify" in phases:
        verify_phase(data, cache, results)
    corpus = corpus_mod.open_corpus(next((cache / "corpus").glob("*.sqlite")))
    unique = int(corpus.stats.get("unique_session_texts", 0))
    if "scale" in phases:
        scale_phase(data, tiny, cache, results, steps=set(args.scale_steps.split(",")),
                    pairs=args.scale_pairs, full_wall=args.full_prep_wall)
    if "embed" in phases:
        minilm = args.minilm if (args.minilm / "tokenizer.json").is_file() else None
        embedding_phase(cache, tiny, minilm, scale, unique, results)
    if "hub" in phases:
        hub_phase(args.data_dir / scale.name, unique + cfg.n_instances, results)
    results.facts.append(f"cache size on disk {du(cache) / 1e9:.2f} GB in {cache}")
    results.facts.append(
        f"load average at the end {os.getloadavg()[0]:.2f} (other work on the machine shifts "
        "walls, MiniLM most: CPU-bound on 2 cores)")
    command = "python benchmarks/run.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]))
    print()
    print("\n".join(table(results.rows)))
    write_results(out, scale, args, results, info, command.strip())
    print(f"\nwritten to {out}")
    failed = [r.phase for r in results.rows if r.result == "FAIL"]
    return 1 if failed else 0


def _first_runs(args: argparse.Namespace) -> list[str] | None:
    """``--first-runs``' kinds (None: not given); SystemExit for a kind not a memory run's,
    or without ``--against`` and ``--only memories``."""
    if args.first_runs is None:
        return None
    from benchmarks.against import MEMORY_RUNS

    kinds = [k for k in args.first_runs.split(",") if k]
    known = [kind for kind, _, _ in MEMORY_RUNS]
    if not kinds or any(k not in known for k in kinds) or args.against is None or \
            set(args.only.split(",")) != {"memories"}:
        raise SystemExit(f"--first-runs takes a comma list of {', '.join(known)}, with "
                         f"--against REV --only memories (got {args.first_runs!r})")
    return kinds


def _against(args: argparse.Namespace, scale: Scale) -> int:
    from benchmarks.against import against

    base = args.data_dir.expanduser().resolve()
    info = machine()
    print("\n".join(info), flush=True)
    data, _ = ensure_data(scale, base, Results())
    phases = set(args.only.split(","))
    memories = "no" if "memories" not in phases else "only" if phases == {"memories"} \
        else "also"
    lines = against(args.against, data, base / scale.name / "against", args.repeat,
                    warm_only=args.warm_only, memories=memories,
                    first_runs=_first_runs(args))
    text = "\n".join([*info, f"uptime: {os.getloadavg()[0]:.2f} at the end", "", *lines])
    print("\n" + text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
