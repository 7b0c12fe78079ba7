"""Mutation testing of vipune's reference, the metrics and the store/FTS code.

Two parts, one command (``python scripts/mutation.py``, both parts; results in
``docs/mutation.md``):

``mutmut``
    mutmut 3 (not a dependency of the plugin: ``pip install -e '.[mutation]'``) mutates every
    function of the vipune reference (``pytest_retrieval_eval/vipune/``: ``limits.py``,
    ``semantic.py``, ``schema.py``, ``fts.py``, ``hybrid.py``, ``cli_output.py``),
    ``scoring/metrics.py`` and ``vipune/store.py`` (``[tool.mutmut]`` in ``pyproject.toml``)
    and, per mutant, runs only those tests of ``[tool.mutmut]``'s
    ``pytest_add_cli_args_test_selection`` that called the mutated function. A fresh run (the
    ``mutants/`` folder is deleted first) takes 4 to 14 minutes on 2 shared cores. Then the
    score per module and every surviving mutant, as a one-line diff, are printed.

``named``
    The mutants the project names (issue 15): RRF k changed, the pool clamp bounds, the id
    tie-break reversed, FTS AND turned into OR, no quote doubling, a float32 cosine, a non-zero
    recency weight, dedupe keeping the last occurrence, ``ndcg_any``'s discount off by one,
    ``recall_all`` of partial gold. mutmut cannot make most of them (it does not touch module
    constants, nor rewrite an algorithm), so each is a source patch: the package, tests and
    root files are copied to a temporary folder, the patch is applied there (the text it
    replaces must occur exactly once, or the script stops), and the tests of ``NAMED_TESTS``
    run on the copy. A named mutant passes only when some test fails; the failing tests are
    printed. An unpatched copy runs first and must pass. About 2 minutes.

Usage::

    python scripts/mutation.py                 # both parts
    python scripts/mutation.py named           # the named mutants only
    python scripts/mutation.py mutmut [--max-children N]
    python scripts/mutation.py summary         # re-print the last mutmut run's figures

Exit status 1 when a named mutant survives or a module's mutmut score is under its target.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pytest_retrieval_eval"
#: The vipune reference's modules (``vipune/<name>.py``), scored together as one target.
VIPUNE_MODULES = ("limits", "semantic", "schema", "fts", "hybrid", "cli_output")
#: group -> (its modules, the share of their mutants that must be killed; None: reported, no
#: target). A module is a path below the package without ``.py``.
TARGETS: dict[str, tuple[tuple[str, ...], float | None]] = {
    "vipune reference": (tuple(f"vipune/{m}" for m in VIPUNE_MODULES), 0.90),
    "scoring/metrics": (("scoring/metrics",), 0.90),
    "vipune/store": (("vipune/store",), None),
}
#: What the copy for a named mutant needs (relative to the repository root).
COPIED = (PACKAGE, "tests", "scripts", "conftest.py", "pyproject.toml")
#: The tests run against each named mutant (the copy's, so they see the patched package);
#: ``RETRIEVER_TESTS`` too for a mutant in a retriever. The two tests that check the patches
#: against the unpatched source are left out (they would fail on any patched copy).
NAMED_TESTS = (
    "tests/vipune/test_vipune.py",
    "tests/scoring/test_metrics.py",
    "tests/data/test_bundled_sample.py",
    "tests/vipune/test_mutation_kills.py",
    "-k", "not named_mutant",
)
RETRIEVER_TESTS = ("tests/retrievers/test_retrievers.py",)


# --------------------------------------------------------------------------- named mutants
@dataclass(frozen=True)
class Patch:
    """Replace ``old`` (which must occur exactly once) by ``new`` in ``path``."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class NamedMutant:
    name: str
    rule: str  # the rule the mutant breaks, as the issue names it
    patches: tuple[Patch, ...]
    retrievers: bool = False  # also run tests/retrievers/test_retrievers.py (the mutant is in one)


def _v(module: str, old: str, new: str) -> Patch:
    """A patch of one module of the vipune reference (``vipune/<module>.py``)."""
    return Patch(f"{PACKAGE}/vipune/{module}.py", old, new)


def _m(old: str, new: str) -> Patch:
    return Patch(f"{PACKAGE}/scoring/metrics.py", old, new)


_SORT = 'fused = sorted(scores.items(), key=lambda item: (-item[1], item[0].encode("utf-8")))'
_SORT_REVERSED_TIES = (
    'fused = sorted(sorted(scores.items(), key=lambda item: item[0].encode("utf-8"),'
    " reverse=True), key=lambda item: -item[1])"
)
_DEDUPE_FIRST = "    return list(dict.fromkeys(ranked))"
_DEDUPE_LAST = "    return list(reversed(dict.fromkeys(reversed(list(ranked)))))"
_SEARCH_HYBRID_SIGNATURE_END = """    recency_weight: float = 0.0,
    *,
    project_id: str,
    created_at: Mapping[str, str] | None = None,
    now: datetime | None = None,
    semantic_ranking: Sequence[SearchResult] | None = None,
) -> list[SearchResult]:"""


def _r(old: str, new: str) -> Patch:
    return Patch(f"{PACKAGE}/retrievers/reference.py", old, new)


NAMED_MUTANTS: tuple[NamedMutant, ...] = (
    NamedMutant("rrf-k-60", "RRF k changed (RRF_K 25 -> 60)",
                (_v("hybrid", "RRF_K = 25\n", "RRF_K = 60\n"),), retrievers=True),
    NamedMutant("rrf-k-default-60", "RRF k changed (rrf_fuse's default k -> 60)",
                (_v("hybrid", "fts_ids: Sequence[str], k: int = RRF_K",
                    "fts_ids: Sequence[str], k: int = 60"),)),
    NamedMutant("rrf-k-hybrid-60", "RRF k changed (search_hybrid_parts's default -> 60)",
                (_v("hybrid", "    rrf_k: int = RRF_K,\n", "    rrf_k: int = 60,\n"),),
                retrievers=True),
    NamedMutant("rrf-k-retriever-60", "RRF k changed (the hybrid retriever's k -> 60)",
                (_r("rrf_k: int = vipune.RRF_K\n", "rrf_k: int = 60\n"),), retrievers=True),
    NamedMutant("pool-min-40", "pool clamp lower bound 50 -> 40",
                (_v("limits", "MIN_CANDIDATE_POOL = 50\n", "MIN_CANDIDATE_POOL = 40\n"),)),
    NamedMutant("pool-max-5000", "pool clamp upper bound 10,000 -> 5,000",
                (_v("limits", "MAX_CANDIDATE_POOL = 10_000\n", "MAX_CANDIDATE_POOL = 5_000\n"),)),
    NamedMutant("pool-factor-5", "pool limit*10 -> limit*5",
                (_v("limits", "max(limit * 10, MIN_CANDIDATE_POOL)",
                    "max(limit * 5, MIN_CANDIDATE_POOL)"),)),
    NamedMutant("pool-unclamped", "pool clamp removed (pool = limit*10)",
                (_v("limits", "return min(max(limit * 10, MIN_CANDIDATE_POOL), MAX_CANDIDATE_POOL)",
                    "return limit * 10"),), retrievers=True),
    NamedMutant("pool-retriever-fixed-50", "pool clamp replaced by a fixed pool of 50 "
                "(the hybrid retriever)",
                (_r("pool: int | None = None  #", "pool: int | None = 50  #"),), retrievers=True),
    NamedMutant("tie-break-reversed", "tie-break by id reversed (descending)",
                (_v("hybrid", _SORT, _SORT_REVERSED_TIES),)),
    NamedMutant("fts-or", "FTS AND turned into OR (the escaped query's join)",
                (_v("fts", '(" " if mode == "and" else " OR ")',
                    '(" OR " if mode == "and" else " OR ")'),),
                retrievers=True),
    NamedMutant("fts-or-hybrid", "FTS AND turned into OR (search_hybrid_parts's default)",
                (_v("hybrid", '    fts_mode: str = "and",\n', '    fts_mode: str = "or",\n'),),
                retrievers=True),
    NamedMutant("fts-or-retrievers", "FTS AND turned into OR (the hybrid and fts retrievers)",
                (_r('    fts_mode: str = "and"\n', '    fts_mode: str = "or"\n'),
                 _r('    mode: str = "and"\n', '    mode: str = "or"\n')), retrievers=True),
    NamedMutant("no-quote-doubling", "quote doubling removed",
                (_v("fts", ".replace('\"', '\"\"')", ""),), retrievers=True),
    NamedMutant("cosine-float32", "cosine in float32 (cosine_similarity)",
                (_v("semantic", "a64 = va.astype(np.float64)", "a64 = va.astype(np.float32)"),
                 _v("semantic", "b64 = vb.astype(np.float64)", "b64 = vb.astype(np.float32)"))),
    NamedMutant("scan-float32", "cosine in float32 (the vectorised semantic scan)",
                (_v("semantic", "q64 = q.astype(np.float64)", "q64 = q"),
                 _v("semantic", "cols = np.ascontiguousarray(mat.T, dtype=np.float64)",
                    "cols = np.ascontiguousarray(mat.T, dtype=np.float32)")), retrievers=True),
    NamedMutant("recency-default", "non-zero recency weight (search_hybrid's default 0.3)",
                (_v("hybrid", _SEARCH_HYBRID_SIGNATURE_END,
                    _SEARCH_HYBRID_SIGNATURE_END.replace("0.0,", "0.3,")),)),
    NamedMutant("recency-retriever", "non-zero recency weight (hybrid retriever asks 0.3)",
                (_r("    recency: float = 0.0\n", "    recency: float = 0.3\n"),),
                retrievers=True),
    NamedMutant("recency-retriever-dated",
                "non-zero recency weight (hybrid retriever asks 0.3, passes the dates)",
                (_r("    recency: float = 0.0\n", "    recency: float = 0.3\n"),
                 _r("        return {}\n", "        return {'created_at': dict(zip("
                    "persona.session_ids, persona.created_at))}\n")), retrievers=True),
    NamedMutant("recency-binary", "non-zero recency weight (vipune binary --recency 0.3)",
                (Patch(f"{PACKAGE}/retrievers/vipune_binary.py",
                       '"--recency",\n            "0",', '"--recency",\n            "0.3",'),),
                retrievers=True),
    NamedMutant("dedupe-last", "dedupe keeping the last occurrence",
                (_m(_DEDUPE_FIRST, _DEDUPE_LAST),)),
    NamedMutant("ndcg-discount-off-by-one", "ndcg_any's discount off by one (log2(i+1))",
                (_m("r / math.log2(i) for", "r / math.log2(i + 1) for"),)),
    NamedMutant("recall-all-partial", "recall_all of partial gold (any gold in top k)",
                (_m("gold_set.issubset(dedupe(ranked)[:k])",
                    "gold_set.intersection(dedupe(ranked)[:k])"),)),
    NamedMutant("recall-all-present-gold",
                "recall_all of partial gold (gold outside the haystack ignored)",
                (_m("recall_all(ranking, gold, k)", "recall_all(ranking, present_gold, k)"),)),
)


def patched_text(text: str, patch: Patch) -> str:
    """``text`` with ``patch`` applied; ValueError unless ``patch.old`` occurs exactly once."""
    count = text.count(patch.old)
    if count != 1:
        raise ValueError(
            f"{patch.path}: the text a named mutant replaces occurs {count} times, not once: "
            f"{patch.old[:60]!r}; update NAMED_MUTANTS in scripts/mutation.py"
        )
    return text.replace(patch.old, patch.new)


def apply_mutant(root: Path, mutant: NamedMutant) -> None:
    """Apply every patch of ``mutant`` to the tree under ``root`` (checked, compiled)."""
    for patch in mutant.patches:
        target = root / patch.path
        text = patched_text(target.read_text(encoding="utf-8"), patch)
        ast.parse(text, filename=str(target))
        target.write_text(text, encoding="utf-8")


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)


_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def _run_tests(copy: Path, tests: Sequence[str]) -> tuple[int, list[str], str]:
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--tb=no", "-rfE", "-W", "ignore::pytest.PytestAssertRewriteWarning", *tests]
    proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, check=False)
    out = proc.stdout + proc.stderr
    return proc.returncode, sorted(set(_FAILED.findall(out))), out


def _check_imports_the_copy(copy: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(copy))
    got = subprocess.run([sys.executable, "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"],
                         cwd=copy, env=env, capture_output=True, text=True, check=True).stdout
    if not Path(got.strip()).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(f"the copy in {copy} imports {PACKAGE} from {got.strip()}, not from "
                         "the copy; the named mutants would test the unpatched package")


def run_named(names: Sequence[str] = (), jobs: int = 2) -> int:
    """Run the named mutants (all, or those in ``names``), ``jobs`` at a time; 1 when one
    survives."""
    chosen = [m for m in NAMED_MUTANTS if not names or m.name in names]
    start = time.monotonic()
    survived: list[str] = []
    with tempfile.TemporaryDirectory(prefix="named-mutants-") as tmp:
        base = Path(tmp) / "clean"
        _copy_tree(base)
        _check_imports_the_copy(base)
        code, failed, out = _run_tests(base, (*NAMED_TESTS, *RETRIEVER_TESTS))
        if code != 0:
            print(out[-3000:])
            raise SystemExit("the unpatched copy fails its tests; fix the suite first")
        print("unpatched copy: its tests pass", flush=True)

        def one(mutant: NamedMutant) -> tuple[int, list[str], str]:
            copy = Path(tmp) / mutant.name
            shutil.copytree(base, copy)
            apply_mutant(copy, mutant)
            try:
                return _run_tests(copy, (*NAMED_TESTS,
                                         *(RETRIEVER_TESTS if mutant.retrievers else ())))
            finally:
                shutil.rmtree(copy)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for mutant, (code, failed, out) in zip(chosen, pool.map(one, chosen), strict=True):
                status = "killed" if code != 0 else "SURVIVED"
                if code == 0:
                    survived.append(mutant.name)
                elif not failed:
                    failed = [out.strip().splitlines()[-1]]
                print(f"{mutant.name:26} {status:8} {mutant.rule}", flush=True)
                for test in failed:
                    print(f"    {test}")
    print(f"named mutants: {len(chosen) - len(survived)}/{len(chosen)} killed in "
          f"{time.monotonic() - start:.0f} s")
    return 1 if survived else 0


# --------------------------------------------------------------------------- mutmut
def _mutmut_exe() -> str:
    exe = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or shutil.which("mutmut")
    if exe is None:
        raise SystemExit("mutmut is not installed; run: pip install -e '.[mutation]'")
    return exe


def run_mutmut(max_children: int) -> int:
    exe = _mutmut_exe()
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    (ROOT / "mutants").mkdir()
    start = time.monotonic()
    log = ROOT / "mutants" / "mutmut-run.log"
    print(f"mutmut run --max-children {max_children} (log: mutants/{log.name}) ...", flush=True)
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.run([exe, "run", "--max-children", str(max_children)], cwd=ROOT,
                              stdout=out, stderr=subprocess.STDOUT, check=False)
    elapsed = time.monotonic() - start
    print(f"mutmut finished with status {proc.returncode} in {elapsed / 60:.1f} min")
    if proc.returncode != 0:
        return proc.returncode
    return summary()


def _status(code: int | None) -> str:
    from mutmut.stats import status_by_exit_code

    return str(status_by_exit_code[code])


def _function_sources(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    text = path.read_text(encoding="utf-8").splitlines()
    nodes = [*tree.body, *(n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body)]
    return {node.name: "\n".join(text[node.lineno - 1:node.end_lineno or node.lineno])
            for node in nodes if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def mutant_diff(key: str, sources: dict[str, str]) -> str:
    """One line per changed source line of mutant ``key`` (``-old`` / ``+new``)."""
    func = key.rsplit(".", 1)[-1]
    orig_name = func.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"
    orig = sources.get(orig_name, "")
    mutated = sources.get(func, "").replace(f"def {func}(", f"def {orig_name}(", 1)
    lines = difflib.unified_diff(orig.splitlines(), mutated.splitlines(), lineterm="", n=0)
    return " | ".join(line.strip() if line[0] not in "+-" else line[0] + " " + line[1:].strip()
                      for line in lines if line[:3] not in ("---", "+++") and line[0] in "+-")


def summary() -> int:
    """Score per module and per target group, and every survivor, from the last mutmut run
    (``mutants/``)."""
    failing = 0
    rows = []
    survivors: list[str] = []
    for group, (modules, target) in TARGETS.items():
        group_codes: dict[str, int] = {}
        for module in modules:
            meta = ROOT / "mutants" / PACKAGE / f"{module}.py.meta"
            if not meta.is_file():
                raise SystemExit(f"{meta} is missing; run: python scripts/mutation.py mutmut")
            codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
            group_codes.update(codes)
            if len(modules) > 1:
                rows.append(_score_row(f"  {module}.py", codes, None)[0])
            sources = _function_sources(ROOT / "mutants" / PACKAGE / f"{module}.py")
            for key, code in sorted(codes.items(), key=lambda kv: _natural(kv[0])):
                if _status(code) != "killed" and _status(code) != "timeout":
                    survivors.append(f"{_status(code):9} {key.removeprefix(PACKAGE + '.')}: "
                                     f"{mutant_diff(key, sources)}")
        row, ok = _score_row(group if len(modules) > 1 else f"{group}.py", group_codes, target)
        rows.append(row)
        failing += not ok
    print("module                    mutants  killed  survived  no tests   score  target")
    print("\n".join(rows))
    print(f"\n{len(survivors)} mutants not killed:")
    print("\n".join(survivors))
    return 1 if failing else 0


def _score_row(label: str, codes: dict[str, int], target: float | None) -> tuple[str, bool]:
    """One row of the summary table, and whether it meets ``target``."""
    counts = Counter(_status(code) for code in codes.values())
    killed = counts["killed"] + counts["timeout"]
    score = killed / len(codes) if codes else 1.0
    ok = target is None or score >= target
    return (f"{label:24} {len(codes):8} {killed:7} {counts['survived']:9} "
            f"{counts['no tests']:9} {score:7.1%}  "
            f"{'' if target is None else ('>= ' if ok else '< ') + f'{target:.0%}'}"), ok


def _natural(key: str) -> tuple[str, int]:
    head, _, n = key.rpartition("_")
    return (head, int(n) if n.isdigit() else -1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", nargs="?", default="all",
                        choices=["all", "named", "mutmut", "summary"])
    parser.add_argument("names", nargs="*", help="named mutants to run (default: all)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2,
                        help="worker processes of mutmut, and named mutants run at once "
                             "(default: the CPU count)")
    args = parser.parse_args(argv)
    status = 0
    if args.part in ("all", "named"):
        status |= run_named(args.names, args.max_children)
    if args.part in ("all", "mutmut"):
        status |= run_mutmut(args.max_children)
    if args.part == "summary":
        status |= summary()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
