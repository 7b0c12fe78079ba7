"""Ties a fused ranking inherits from its input lists (retrievers/fused_ties.py), against a
brute force over every order of every tie block of the semantic and FTS lists, and ties
past vipune's 10,000-row cap (issue 27.3)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval import retrievers as r
from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.retrievers import fused_ties
from pytest_retrieval_eval.retrievers.base import Persona
from pytest_retrieval_eval.retrievers.ranking import rank_per_k
from pytest_retrieval_eval.scoring import ties
from tests.retrievers.test_retrievers import make_persona, make_query

KS = [1, 5, 10]
SAME = "I adopted a cat named Luna"


def _twins(tmp_path: Path, n_same: int = 5, n_other: int = 7) -> Persona:
    """``n_same`` sessions with the same text and the same vector (equal cosines, equal
    FTS scores), then ``n_other`` different ones."""
    texts = [SAME] * n_same + [f"other topic number {i} about gardens" for i in range(n_other)]
    persona = make_persona(tmp_path, texts)
    vectors = persona.vectors.copy()
    vectors[1:n_same] = vectors[0]
    persona.vectors = vectors
    return persona


def _orders(ids: Sequence[str], scores: Sequence[float]) -> list[list[str]]:
    """Every order of ``ids`` permuting only runs of equal scores."""
    pieces = [list(itertools.permutations(ids[s:e])) for s, e in ties.tie_blocks(scores)]
    return [[x for piece in combo for x in piece] for combo in itertools.product(*pieces)]


def _brute(persona: Persona, question: str, qvec: np.ndarray, gold: Sequence[str],
           pool: int, limit: int, ks: Sequence[int]) -> dict[str, tuple[float, float, float]]:
    """Mean, min and max over every order of the semantic ranking's and the FTS ranking's
    ties (each list whole, then cut at the pool), the fused ties counted as tie_ranges
    does, of every metric at each k."""
    sem = vipune.semantic_search(persona.vectors, persona.session_ids, qvec, 10_000)
    fts = vipune.fts_search(persona.store_path(), question, "default", 10_000)
    values: dict[str, list[tuple[float, float, float]]] = {}
    for s_order in _orders([i for i, _ in sem], [s for _, s in sem]):
        for f_order in _orders([i for i, _ in fts], [s for _, s in fts]):
            fused = vipune.rrf_fuse(s_order[:pool], f_order[:pool])
            ids = [i for i, _ in fused]
            scores = [s for _, s in fused]
            for k in ks:
                got = ties.tie_ranges(ids, scores, gold, k, rankable=persona.session_ids)
                for name, rng in got.items():
                    values.setdefault(f"{name}@{k}", []).append(tuple(rng))
    return {key: (sum(v[0] for v in vals) / len(vals), min(v[1] for v in vals),
                  max(v[2] for v in vals)) for key, vals in values.items()}


def _report(retriever: r.HybridRetriever, persona: Persona, question: str,
            qvec: np.ndarray, gold: tuple[str, ...], ks: Sequence[int] = KS,
            ) -> tuple[dict[int, list[str]], dict[str, object] | None, dict[int, object]]:
    query = make_query(question, qvec, gold)
    scored: dict[int, object] = {}
    rankings, _ = rank_per_k(retriever, persona, query, ks, scored)  # type: ignore[arg-type]
    return rankings, ties.pair_ties(scored, gold, ks,  # type: ignore[arg-type]
                                    rankable=persona.session_ids), scored


def _judged(scored: dict[int, object], k: int) -> object:
    """``scored[k]`` as the tie report reads it (a callable is called)."""
    value = scored[k]
    return value() if callable(value) else value


def _check(got: dict[str, object] | None, want: dict[str, tuple[float, float, float]],
           expected_tol: float = 1e-12) -> None:
    assert got is not None
    sensitive = got["sensitive"]
    assert isinstance(sensitive, dict)
    for key, (mean, low, high) in want.items():
        if high - low > 1e-12:
            assert sensitive[key]["worst"] == pytest.approx(low, abs=1e-12), key
            assert sensitive[key]["best"] == pytest.approx(high, abs=1e-12), key
            assert sensitive[key]["expected"] == pytest.approx(mean, abs=expected_tol), key
        else:
            assert key not in sensitive, key


def test_hybrid_sees_the_ties_of_its_semantic_and_fts_lists(tmp_path: Path) -> None:
    """Five sessions of one text, the gold the third of them: RRF gives them strict fused
    ranks by row order (the fused scores differ), so before 27.3 hybrid showed no tie; now
    its range equals the brute force over all 5! x 5! orders of the two lists' blocks."""
    persona = _twins(tmp_path)
    qvec = persona.vectors[0] + 0.3 * persona.vectors[6]
    gold = ("sess_02",)
    rankings, got, scored = _report(r.HybridRetriever(), persona, "cat Luna", qvec, gold)
    assert isinstance(_judged(scored, 10), ties.TieOrders)
    assert len(_judged(scored, 10).orders) <= fused_ties.EXACT_ORDERS  # type: ignore[attr-defined]  # enumerated, not sampled
    want = _brute(persona, "cat Luna", qvec, gold, vipune.candidate_pool(10), 10, KS)
    _check(got, want)
    assert got is not None and got["sensitive"]["recall@1"] == pytest.approx(
        {"expected": 0.2, "worst": 0.0, "best": 1.0})
    # The ranking itself (the run's numbers) is vipune's, unchanged.
    ref = vipune.search_hybrid(persona.store_path(), persona.vectors, persona.session_ids,
                               "cat Luna", qvec, 10, project_id="default")
    assert rankings[10] == [i for i, _ in ref]


def test_two_gold_in_one_block_and_a_tie_cut_by_the_pool(tmp_path: Path) -> None:
    """A fixed pool of 3 cuts the five-session block in both lists (which of them get in
    is part of the order), two gold among them."""
    persona = _twins(tmp_path)
    qvec = persona.vectors[0] + 0.2 * persona.vectors[8]
    gold = ("sess_01", "sess_04")
    hybrid = r.HybridRetriever()
    hybrid.pool = 3
    _, got, scored = _report(hybrid, persona, "cat Luna", qvec, gold, [1, 2, 3])
    assert isinstance(_judged(scored, 3), ties.TieOrders)
    want = _brute(persona, "cat Luna", qvec, gold, 3, 3, [1, 2, 3])
    _check(got, want)
    assert got is not None and "recall@3" in got["sensitive"]


def test_sampled_beyond_the_exact_limit(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past EXACT_ORDERS the expectation is a seeded sample's mean (near the exact one, the
    same on a rerun) and worst and best come from the constructed extreme orders."""
    monkeypatch.setattr(fused_ties, "EXACT_ORDERS", 10)
    persona = _twins(tmp_path)
    qvec = persona.vectors[0] + 0.3 * persona.vectors[6]
    gold = ("sess_02",)
    _, got, scored = _report(r.HybridRetriever(), persona, "cat Luna", qvec, gold)
    assert isinstance(_judged(scored, 10), ties.TieOrders)
    assert len(_judged(scored, 10).orders) == fused_ties.SAMPLED_ORDERS  # type: ignore[attr-defined]
    want = _brute(persona, "cat Luna", qvec, gold, vipune.candidate_pool(10), 10, KS)
    _check(got, want, expected_tol=0.1)
    _, again, _ = _report(r.HybridRetriever(), persona, "cat Luna", qvec, gold)
    assert again == got


def test_no_input_tie_keeps_the_plain_tie_list(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    rng = np.random.default_rng(3)
    qvec = rng.standard_normal(vipune.EMBEDDING_DIM).astype(np.float32)
    _, got, scored = _report(r.HybridRetriever(), persona, "garden", qvec, ("sess_01",))
    assert all(isinstance(_judged(scored, k), tuple) for k in scored)
    assert got == {"sensitive": {}}


def test_count_sequences_equals_enumeration() -> None:
    for counts, m in [([1, 4], 5), ([2, 2, 1], 3), ([1, 1, 1], 2), ([3], 2), ([1, 9], 4)]:
        seqs = {tuple(s) for s in fused_ties._sequences(list(counts), m)}
        assert fused_ties._count_sequences(counts, m, 10**6) == len(seqs)
        assert len(seqs) == len(list(fused_ties._sequences(list(counts), m)))
    assert fused_ties._count_sequences([1, 10**4], 100, 1000) == 101


def _identical(n: int) -> Persona:
    """``n`` rows with one vector (a store is never built: semantic needs none)."""
    ids = tuple(f"s{i}" for i in range(n))
    vectors = np.tile(np.linspace(-1, 1, vipune.EMBEDDING_DIM, dtype=np.float32), (n, 1))
    dates = tuple("2023-05-01T10:00:00+00:00" for _ in range(n))

    def no_store() -> Path:
        raise AssertionError("semantic needs no store")

    return Persona("k", ids, dates, vectors, ["same"] * n, no_store)


def test_semantic_counts_a_tie_past_vipunes_10000_rows() -> None:
    """12,000 identical rows, the gold the 11,501st: vipune's search returns 10,000 rows at
    most, and before 27.3 the tie list stopped there (0 sensitive pairs); now the whole
    block counts: recall@k expected k / 12,000, as bm25 reports for the same history."""
    persona = _identical(12_000)
    query = make_query("anything", persona.vectors[0], ("s11500",))
    scored: dict[int, object] = {}
    start = time.perf_counter()
    rankings, _ = rank_per_k(r.SemanticRetriever(), persona, query, [10, 10_000],
                             scored)  # type: ignore[arg-type]
    got = ties.pair_ties(scored, ("s11500",), [10, 10_000],  # type: ignore[arg-type]
                         rankable=persona.session_ids)
    elapsed = time.perf_counter() - start
    assert len(rankings[10_000]) == 10_000 and "s11500" not in rankings[10_000]
    assert got is not None
    assert got["sensitive"]["recall@10000"] == pytest.approx(
        {"expected": 10_000 / 12_000, "worst": 0.0, "best": 1.0})
    assert got["sensitive"]["recall@10"]["expected"] == pytest.approx(10 / 12_000)
    assert elapsed < 5.0, elapsed


def test_fts_counts_a_tie_past_its_limit(tmp_path: Path) -> None:
    """Five sessions of one text: asked for 2, FTS5's LIMIT returns 2 of them; the tie list
    holds all five (before 27.3 only the two), the gold the fourth: recall@2 2/5 expected."""
    persona = _twins(tmp_path)
    query = make_query("cat Luna", None, ("sess_03",))
    scored: dict[int, object] = {}
    rankings, _ = rank_per_k(r.FtsRetriever(), persona, query, [2], scored)  # type: ignore[arg-type]
    assert len(rankings[2]) == 2
    got = ties.pair_ties(scored, ("sess_03",), [2],  # type: ignore[arg-type]
                         rankable=persona.session_ids)
    assert got is not None
    assert sorted(_judged(scored, 2)[0]) == [f"sess_0{i}" for i in range(5)]  # type: ignore[index]
    assert got["sensitive"]["recall@2"] == pytest.approx(
        {"expected": 0.4, "worst": 0.0, "best": 1.0})


def _brute_inputs(inputs: fused_ties.FusionInputs, gold: Sequence[str], limit: int,
                  ks: Sequence[int], rankable: Sequence[str],
                  ) -> dict[str, tuple[float, float, float]]:
    """Every order of every tie block of each whole input list, each list then cut at its
    cap, fused, and judged by tie_ranges (the fused ties): mean, min and max."""
    per_list = [_orders(ids, scores) for ids, scores in inputs.lists]
    values: dict[str, list[tuple[float, float, float]]] = {}
    for combo in itertools.product(*per_list):
        fused = inputs.fuse([order[:cap] for order, cap in zip(combo, inputs.caps,
                                                               strict=True)])
        ids, scores = fused_ties._cut(fused, limit)
        for k in ks:
            for name, rng in ties.tie_ranges(ids, scores, gold, k, rankable=rankable).items():
                values.setdefault(f"{name}@{k}", []).append(tuple(rng))
    return {key: (sum(v[0] for v in vals) / len(vals), min(v[1] for v in vals),
                  max(v[2] for v in vals)) for key, vals in values.items()}


@pytest.mark.parametrize("seed", range(40))
def test_random_fusions_equal_brute_force(seed: int) -> None:
    """Random small semantic and FTS lists with ties (shared members, blocks cut by the
    cap, several gold, a recency weight on some): the exact enumeration, with its
    reduction to members nothing tells apart, equals every order averaged."""
    rng = np.random.default_rng(seed)
    pool = [f"m{i}" for i in range(9)]
    n_sem = int(rng.integers(3, 8))
    sem_ids = list(rng.permutation(pool)[:n_sem])
    sem_scores = sorted((float(x) for x in rng.integers(0, 3, n_sem)), reverse=True)
    n_fts = int(rng.integers(0, 6))
    fts_ids = list(rng.permutation(pool)[:n_fts])
    fts_scores = sorted((float(x) for x in rng.integers(0, 2, n_fts)), reverse=True)
    caps = (int(rng.integers(2, n_sem + 1)), int(rng.integers(1, 6)))
    gold = list(rng.permutation(pool)[:int(rng.integers(1, 3))])
    weight = 0.5 if seed % 4 == 0 else 0.0
    dates = {x: f"2023-05-{1 + i % 2:02d}T10:00:00+00:00" for i, x in enumerate(pool)}
    now = vipune.parse_rfc3339("2023-06-01T00:00:00+00:00")

    def fuse(lists: Sequence[Sequence[str]]) -> list[tuple[str, float]]:
        return vipune.fuse_lists(lists[0], lists[1], 25, weight, created_at=dates, now=now)

    inputs = fused_ties.FusionInputs(((sem_ids, sem_scores), (fts_ids, fts_scores)), caps,
                                     fuse, dates if weight else None)
    limit = int(rng.integers(1, 5))
    ks = sorted({1, limit})
    orders = fused_ties.tie_orders(inputs, gold, limit, "q")
    want = _brute_inputs(inputs, gold, limit, ks, pool)
    if orders is None:  # no input tie the fusion reads: the run's own fused ranking
        ids, scores = fused_ties._cut(fuse([sem_ids[:caps[0]], fts_ids[:caps[1]]]), limit)
        orders = ties.TieOrders([(1.0, ids, scores)], [])
    assert len(orders.orders) <= fused_ties.EXACT_ORDERS
    for k in ks:
        got = ties.orders_ranges(orders, gold, k, rankable=pool)
        for name, r_ in got.items():
            mean, low, high = want[f"{name}@{k}"]
            assert r_ == pytest.approx((mean, low, high), abs=1e-9), (seed, name, k)


def test_fused_and_fts_ties_are_judged_after_the_timing(tmp_path: Path) -> None:
    """hybrid's re-fusions and FTS's extra query run when the tie report asks (pair_ties,
    after the run has timed the retrieval), once per call however many k share it."""
    persona = _twins(tmp_path)
    qvec = persona.vectors[0] + 0.3 * persona.vectors[6]
    for retriever in (r.HybridRetriever(), r.FtsRetriever()):
        scored: dict[int, object] = {}
        rank_per_k(retriever, persona, make_query("cat Luna", qvec, ("sess_02",)),
                   [1, 5], scored)  # type: ignore[arg-type]
        assert all(callable(v) for v in scored.values())
    calls: list[int] = []

    def judged() -> tuple[list[str], list[float]]:
        calls.append(1)
        return ["a", "b"], [1.0, 1.0]

    got = ties.pair_ties({1: judged, 2: judged}, ["b"], [1, 2], rankable=["a", "b"])
    assert calls == [1] and got is not None and "recall@1" in got["sensitive"]
    assert ties.pair_ties({1: lambda: None}, ["b"], [1]) is None
