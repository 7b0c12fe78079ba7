"""The statistics of comparisons: hand-computed cases, exact enumeration, and ranx's Fisher
randomization test as an independent reference."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval.scoring import significance as sig


def brute_force_pvalue(d: list[float]) -> float:
    """Every sign pattern by a plain loop: the share with |sum| >= the observed |sum|."""
    observed = abs(sum(d))
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        total += 1
        if abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-12:
            hits += 1
    return hits / total


def test_exact_pvalue_by_hand() -> None:
    # d = (1, 1, 1, -1): |sum| = 2; of the 16 sign patterns, the 2 with all signs alike
    # (|sum| 4) and the 8 with one sign flipped (|sum| 2) reach it: p = 10/16.
    assert float(sig.randomization_test([1, 1, 1, -1])) == pytest.approx(10 / 16)
    # Every pair better by the same amount: only the two all-alike patterns reach it.
    assert float(sig.randomization_test([0.5] * 5)) == pytest.approx(2 / 32)
    # Zero differences are left out: the same p as without them.
    assert float(sig.randomization_test([0, 0.5, 0, 0.5, 0.5, 0, 0.5, 0.5])) == (
        pytest.approx(2 / 32))


def test_no_difference_is_p_one() -> None:
    assert float(sig.randomization_test([0, 0, 0])) == 1.0
    assert float(sig.randomization_test([])) == 1.0
    # Differences that cancel: every pattern is at least as extreme as 0.
    assert float(sig.randomization_test([1, -1])) == 1.0


@pytest.mark.parametrize("seed", range(6))
def test_exact_enumeration_matches_a_plain_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = rng.choice([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0], size=rng.integers(1, 13)).tolist()
    assert float(sig.randomization_test(d)) == pytest.approx(brute_force_pvalue(d))


def test_columns_are_tested_independently() -> None:
    d = np.array([[1, 0.5], [1, 0.5], [1, -0.5], [-1, 0.5]])
    p = sig.randomization_test(d)
    assert p.shape == (2,)
    assert p[0] == pytest.approx(brute_force_pvalue([1, 1, 1, -1]))
    assert p[1] == pytest.approx(brute_force_pvalue([0.5, 0.5, -0.5, 0.5]))


def test_monte_carlo_pvalue_is_seeded_and_near_the_exact_one() -> None:
    rng = np.random.default_rng(7)
    d = rng.choice([-1.0, 0.0, 0.5, 1.0], p=[0.2, 0.3, 0.2, 0.3], size=20)
    exact = sig.randomization_test(d, exact_max=25)  # 2**m patterns, m <= 20
    sampled = sig.randomization_test(d, exact_max=0, permutations=20_000, seed=3)
    again = sig.randomization_test(d, exact_max=0, permutations=20_000, seed=3)
    assert float(sampled) == float(again)
    p = float(exact)
    se = math.sqrt(p * (1 - p) / 20_000)
    assert abs(float(sampled) - p) < 4 * se + 1 / 20_000


def test_monte_carlo_pvalue_is_never_zero() -> None:
    d = np.ones(40)  # exact p = 2 / 2**40
    p = float(sig.randomization_test(d, permutations=1000, seed=0))
    assert p == pytest.approx(1 / 1001)


@pytest.fixture(scope="module")
def ranx_fisher() -> Any:
    """ranx's test, imported by the worker that runs these tests only (ranx imports pandas,
    scipy, matplotlib and numba: seconds, which collection paid on every worker)."""
    return pytest.importorskip(
        "ranx.statistical_tests", reason="ranx is a test dependency").fisher_randomization_test


@pytest.mark.parametrize("case", range(4))
def test_pvalues_agree_with_ranx(case: int, ranx_fisher: Any) -> None:
    """ranx's Fisher randomization test (numba, its own RNG) on the same per-pair scores."""
    rng = np.random.default_rng(100 + case)
    n = [30, 60, 133, 470][case]
    base = rng.choice([0.0, 0.5, 1.0], size=n)
    shift = [0.0, 0.08, 0.15, 0.05][case]
    new = np.clip(base + rng.choice([-0.5, 0.0, 0.5], p=[0.25 - shift, 0.5, 0.25 + shift],
                                    size=n), 0, 1)
    permutations = 10_000
    ours = float(sig.randomization_test(new - base, permutations=permutations, seed=1))
    theirs, _ = ranx_fisher(base, new, permutations, 0.01, 42)
    p = max(ours, float(theirs))
    se = math.sqrt(max(p * (1 - p), 1e-4) / permutations)
    # Two independent Monte-Carlo estimates of one p-value (ours adds 1/(N+1)).
    assert abs(ours - float(theirs)) < 5 * math.sqrt(2) * se + 2 / permutations


def test_bootstrap_interval_of_constant_differences_is_that_value() -> None:
    low, high = sig.bootstrap_ci([0.25, 0.25, 0.25])
    assert (float(low), float(high)) == (0.25, 0.25)


def test_bootstrap_matches_the_exact_bootstrap_distribution() -> None:
    # n = 3: the 27 equally likely resamples give the exact distribution of the mean.
    d = [0.0, 0.0, 1.0]
    means = sorted(sum(d[i] for i in idx) / 3 for idx in itertools.product(range(3), repeat=3))
    # P(mean = 0) = 8/27 > 2.5%, P(mean = 1) = 1/27 > 2.5%: the 95% interval is [0, 1].
    assert means[0] == 0.0 and means[-1] == 1.0
    low, high = sig.bootstrap_ci(d, resamples=20_000, seed=5)
    assert (float(low), float(high)) == (0.0, 1.0)
    d = [0.0] * 9 + [1.0] * 31  # exact: the mean of 40 draws of Bernoulli(31/40)
    low, high = sig.bootstrap_ci(d, resamples=20_000, seed=5)
    sd = math.sqrt(31 / 40 * 9 / 40 / 40)
    assert float(low) == pytest.approx(31 / 40 - 1.96 * sd, abs=0.03)
    assert float(high) == pytest.approx(31 / 40 + 1.96 * sd, abs=0.03)


def test_bootstrap_is_seeded_and_per_column() -> None:
    rng = np.random.default_rng(0)
    d = rng.choice([-1.0, 0.0, 1.0], size=(50, 3))
    a = sig.bootstrap_ci(d, seed=9)
    b = sig.bootstrap_ci(d, seed=9)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    single = sig.bootstrap_ci(d[:, 1], seed=9)
    assert float(single[0]) == a[0][1] and float(single[1]) == a[1][1]
    assert np.all(a[0] <= d.mean(axis=0)) and np.all(d.mean(axis=0) <= a[1])


def test_bootstrap_of_no_pair_is_nan() -> None:
    low, high = sig.bootstrap_ci([])
    assert math.isnan(float(low)) and math.isnan(float(high))


def test_holm_by_hand() -> None:
    # sorted: 0.01 (x4) = 0.04, 0.03 (x3) = 0.09, 0.04 (x2) = 0.08 -> 0.09 (monotone),
    # 0.5 (x1) = 0.5
    assert sig.holm([0.01, 0.04, 0.03, 0.5]).tolist() == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert sig.holm([0.5, 0.6]).tolist() == pytest.approx([1.0, 1.0])  # capped
    out = sig.holm([0.01, float("nan"), 0.02])
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1]) and out[2] == pytest.approx(0.02)
    assert sig.holm([]).shape == (0,)


def test_paired_differences_need_the_same_pairs() -> None:
    assert sig.differences([0, 1], [1, 1]).tolist() == [1, 0]
    with pytest.raises(ValueError, match="shape"):
        sig.differences([0, 1], [1])


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 6, 10])
def test_least_pvalue_is_what_the_exact_test_gives_the_most_extreme_pairs(m: int) -> None:
    """All m differing pairs moved the same way: the exact test's p is the least possible."""
    from pytest_retrieval_eval.scoring.significance import least_pvalue, randomization_test

    d = np.array([[1.0]] * m + [[0.0]] * 3)  # three pairs that do not differ change nothing
    assert float(randomization_test(d)[0]) == pytest.approx(least_pvalue(m))
    assert least_pvalue(m) == 2.0 / 2 ** m
    assert least_pvalue(0) == 1.0
    assert least_pvalue(6) < 0.05 < least_pvalue(5)  # 6 differing pairs are the fewest
