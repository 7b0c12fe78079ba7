"""What n can tell (docs/compare.md), checked by exact enumeration on small n.

- ``least_pvalue(m) = 2**(1-m)`` is the smallest p the project's exact sign-flip test gives
  over all ``2**m`` sign patterns of m differing pairs, whatever their sizes.
- ``detectable_delta`` (a normal approximation) is the shift at which that same exact test
  has about 80% power: the power is computed exactly, over every sample of n pairs drawn
  from a few-valued distribution of differences (multinomial counts), each with its exact
  p-value.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from pytest_retrieval_eval.scoring import significance as sig

ALPHA = 0.05


@pytest.mark.parametrize("sizes", [(1.0,), (0.5, 1.0), (0.2, 0.5, 1.0), (1.0, 1.0, 0.3, 0.7),
                                   (0.1, 0.25, 0.5, 0.75, 1.0), (1.0,) * 6,
                                   (0.3, 1.0, 0.5, 0.5, 0.2, 0.9, 0.1)])
def test_least_p_is_the_smallest_exact_p_over_every_sign_pattern(
        sizes: Sequence[float]) -> None:
    """Every one of the 2**m sign patterns of these m differing pairs (and two that do not
    differ), through randomization_test in exact mode: the least p is 2**(1-m), reached by
    the pattern of all + (and its mirror), and below it no p falls."""
    m = len(sizes)
    pvalues = []
    for signs in itertools.product((1.0, -1.0), repeat=m):
        d = np.array([s * x for s, x in zip(signs, sizes, strict=True)] + [0.0, 0.0])
        pvalues.append(float(sig.randomization_test(d, exact_max=m)))
    assert min(pvalues) == pytest.approx(sig.least_pvalue(m), abs=1e-12)
    assert pvalues[0] == pvalues[-1] == pytest.approx(2.0 ** (1 - m))  # all +, all -
    assert sig.least_pvalue(m) == math.ldexp(1.0, 1 - m)


def test_the_fewest_differing_pairs_that_can_reach_a_level() -> None:
    assert sig.fewest_differing(0.05) == 6  # 2**-5 = 0.031 <= 0.05 < 2**-4 = 0.0625
    assert sig.fewest_differing(0.01) == 8
    for alpha in (0.05, 0.01, 0.1):
        m = sig.fewest_differing(alpha)
        assert sig.least_pvalue(m) <= alpha < sig.least_pvalue(m - 1)


def _counts(n: int, k: int) -> Iterator[tuple[int, ...]]:
    """Every way to put n draws into k values (stars and bars)."""
    for bars in itertools.combinations(range(n + k - 1), k - 1):
        edges = (-1, *bars, n + k - 1)
        yield tuple(edges[i + 1] - edges[i] - 1 for i in range(k))


def exact_power(values: np.ndarray, probs: np.ndarray, n: int, alpha: float = ALPHA) -> float:
    """P(exact sign-flip p <= alpha) for n pairs drawn i.i.d. from ``values`` with ``probs``:
    the sum over every multinomial count vector (the p-value depends on the counts only)."""
    log_fact = [math.lgamma(i + 1) for i in range(n + 1)]
    power = 0.0
    for counts in _counts(n, len(values)):
        d = np.repeat(values, counts)
        if float(sig.randomization_test(d, exact_max=n)) <= alpha:
            power += math.exp(log_fact[n] + sum(
                c * math.log(p) - log_fact[c] for c, p in zip(counts, probs, strict=True)
                if c))
    return power


@pytest.mark.parametrize("counts", [(2, 2, 4, 2, 2), (1, 2, 5, 2, 2), (1, 1, 6, 2, 2)])
def test_the_detectable_delta_is_where_the_exact_test_has_about_80_percent_power(
        counts: tuple[int, ...]) -> None:
    """n = 12 pairs whose differences take values in {-1, -0.5, 0, 0.5, 1} with these
    counts. The reported estimate is then used as the true shift of that distribution
    (centred, then shifted), and the exact test's power at it is summed over all 1820
    samples of 12.

    Tolerance 0.8 ± 0.1: the estimate is a normal approximation. At n = 12 it leaves out
    the t quantile (which would make the shift about 10% larger, lowering the power it
    gives by a few points) and the discreteness of the sign-flip p-values; the population
    sd is the sample's with ddof 0 (a little smaller, raising it). At half the shift the
    power must be clearly lower (the normal approximation says 0.29)."""
    values = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    sample = np.repeat(values, counts)
    n = sample.size
    estimate, why = sig.detectable_delta(sample, alpha=ALPHA, power=0.8)
    assert why is None and estimate is not None
    assert estimate == pytest.approx(
        (1.959964 + 0.841621) * float(np.std(sample, ddof=1)) / math.sqrt(n), rel=1e-6)
    probs = np.array(counts, dtype=np.float64) / n
    centred = values - sample.mean()
    at_estimate = exact_power(centred + estimate, probs, n)
    assert 0.7 <= at_estimate <= 0.9, at_estimate
    at_half = exact_power(centred + estimate / 2, probs, n)
    assert at_half < 0.4 and at_half < at_estimate - 0.35, (at_half, at_estimate)


def test_no_estimate_where_none_can_be_given() -> None:
    assert sig.detectable_delta([0.5]) == (None, sig.TOO_FEW_PAIRS)
    assert sig.detectable_delta([]) == (None, sig.TOO_FEW_PAIRS)
    # 5 pairs differ: the test cannot reach 0.05 at all, whatever the shift
    assert sig.detectable_delta([1, -1, 1, 0.5, 1] + [0] * 40) == (None, sig.TOO_FEW_DIFFER)
    assert sig.detectable_delta([0.0] * 30) == (None, sig.TOO_FEW_DIFFER)
    assert sig.detectable_delta([0.1] * 30) == (None, sig.ALL_EQUAL)  # sd 0: no spread
    estimate, why = sig.detectable_delta([1, -1, 1, 0.5, 1, 1] + [0] * 40)
    assert why is None and estimate is not None and 0 < estimate < 1
    # four times the pairs with the same spread: half the detectable shift
    d = np.array([1.0, 0.0, -0.5, 0.5, 0.0, 1.0, 0.0, 0.0])
    one, _ = sig.detectable_delta(np.tile(d, 4))
    four, _ = sig.detectable_delta(np.tile(d, 16))
    assert one is not None and four is not None
    assert four / one == pytest.approx(0.5, rel=0.03)  # sd with ddof 1 moves a little
