"""Paired significance of a difference in mean scores: pure numpy functions.

Every function takes the per-pair scores of two systems on the *same* pairs (``base[i]`` and
``new[i]`` belong to pair ``i``), or their differences ``d = new - base``. Columns are
independent metrics scored on those pairs: a 2-D ``(n, m)`` array tests ``m`` metrics at once
on one set of resamples, which is how :mod:`.compare` keeps a full-size comparison fast.

- :func:`bootstrap_ci`: percentile confidence interval of the mean difference, from
  resampling pairs with replacement (seeded).
- :func:`randomization_test`: two-sided paired randomization (sign-flip) test of the mean
  difference. Under the null hypothesis each pair's two scores are exchangeable, so each
  difference keeps or flips its sign with probability 1/2. When at most
  :data:`EXACT_MAX_DIFFERING` pairs differ every sign pattern is enumerated (an exact p-value);
  otherwise ``permutations`` random patterns are drawn and ``p = (hits + 1) / (draws + 1)``
  (a Monte-Carlo p-value that is never 0). This is Fisher's randomization test as used in IR
  evaluation (Smucker et al., CIKM '07; ranx's ``fisher_randomization_test``).
- :func:`least_pvalue`: the smallest p that test can give when ``m`` pairs differ,
  ``2**(1-m)``; :func:`fewest_differing`: the fewest differing pairs that can reach a level.
- :func:`detectable_delta`: an estimate of the smallest mean difference ``n`` pairs could
  detect with a given power (normal approximation from the paired differences).
- :func:`holm`: Holm-Bonferroni adjusted p-values across a family of tests.

Resamples and permutations are drawn in chunks of :data:`CHUNK_CELLS` cells, so memory is
bounded whatever the number of pairs, with the same random stream (and numbers) as drawing
them all at once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: At most this many differing pairs: every one of 2**m sign patterns is enumerated.
EXACT_MAX_DIFFERING = 16
DEFAULT_PERMUTATIONS = 10_000
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95
DEFAULT_ALPHA = 0.05
#: The power at which :func:`detectable_delta` sizes the smallest detectable difference.
DEFAULT_POWER = 0.8
#: Resample (or permutation) x pair cells drawn at once: memory is bounded by this chunk
#: (about 16 bytes a cell: 16 MiB), whatever the number of pairs.
CHUNK_CELLS = 1 << 20
# Sums of the same float scores in another order differ in the last bits: a permuted
# statistic within this much of the observed one counts as "at least as extreme".
_TIE = 1e-9


def _columns(values: ArrayLike) -> tuple[NDArray[np.float64], bool]:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        return array[:, None], True
    if array.ndim != 2:
        raise ValueError(f"scores must be 1-D or 2-D, not {array.ndim}-D")
    return array, False


def differences(base: ArrayLike, new: ArrayLike) -> NDArray[np.float64]:
    """``new - base`` per pair, checking that both hold the same pairs (same shape)."""
    b = np.asarray(base, dtype=np.float64)
    n = np.asarray(new, dtype=np.float64)
    if b.shape != n.shape:
        raise ValueError(f"paired scores differ in shape: {b.shape} vs {n.shape}")
    return n - b


def bootstrap_ci(diffs: ArrayLike, *, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Percentile bootstrap interval of the mean of ``diffs`` (per column).

    Pairs are drawn with replacement ``resamples`` times (the same draws for every column);
    the interval is the ``(1-level)/2`` and ``(1+level)/2`` quantiles of the resampled means.
    Returns ``(low, high)``, each of shape ``(m,)`` (or 0-D for a 1-D input). No pair: NaN.
    """
    d, flat = _columns(diffs)
    n, m = d.shape
    if n == 0:
        nan = np.full(m, np.nan)
        return (nan[0:1].reshape(()), nan[0:1].reshape(())) if flat else (nan, nan)
    rng = np.random.default_rng(seed)
    # Resamples go in chunks of about CHUNK_CELLS (resample, pair) cells, so memory does not
    # grow with n. The draws are int32 from one generator: the same stream as one call
    # drawing all resamples at once (PCG64 keeps its spare 32-bit half between calls).
    rows = max(1, CHUNK_CELLS // n)
    d32 = d.astype(np.float32)
    means = np.empty((resamples, m), dtype=np.float64)
    for start in range(0, resamples, rows):
        r = min(rows, resamples - start)
        # How often each pair is drawn in each resample (one bincount over the chunk): the
        # resampled means of every column are then one matrix product.
        draws = rng.integers(0, n, size=(r, n), dtype=np.int32)
        draws += (n * np.arange(r, dtype=np.int32))[:, None]
        counts = np.bincount(draws.ravel(), minlength=r * n).reshape(r, n)
        del draws
        # float32 is ample for quantiles of means of scores in [-1, 1] (and twice as fast).
        means[start:start + r] = (counts.astype(np.float32) @ d32).astype(np.float64) / n
        del counts
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    # All differences equal (often all zero): the interval is that value exactly.
    const = np.ptp(d, axis=0) == 0
    low = np.where(const, d[0], low)
    high = np.where(const, d[0], high)
    return (low.reshape(()), high.reshape(())) if flat else (low, high)


@functools.lru_cache(maxsize=EXACT_MAX_DIFFERING + 1)
def _all_signs(m: int) -> NDArray[np.float64]:
    """The ``2**m`` sign patterns of ``m`` pairs, as a read-only ``(2**m, m)`` array of +-1."""
    patterns = np.arange(2**m, dtype=np.int64)[:, None] >> np.arange(m, dtype=np.int64)
    signs = (1 - 2 * (patterns & 1)).astype(np.float64)
    signs.setflags(write=False)
    return signs


def _exact_pvalue(d: NDArray[np.float64]) -> float:
    """Every sign pattern of the non-zero differences ``d``: the share at least as extreme."""
    m = d.size
    if m == 0:
        return 1.0
    stats = np.abs(_all_signs(m) @ d)
    observed = abs(float(d.sum()))
    return float(np.count_nonzero(stats >= observed - _TIE)) / float(2**m)


def randomization_test(diffs: ArrayLike, *, permutations: int = DEFAULT_PERMUTATIONS,
                       seed: int = DEFAULT_SEED,
                       exact_max: int = EXACT_MAX_DIFFERING) -> NDArray[np.float64]:
    """Two-sided paired randomization test of ``mean(diffs) == 0`` (per column).

    The statistic is ``|sum(d)|`` (the same test as ``|mean(d)|``: ``n`` is fixed). Pairs
    with ``d == 0`` cannot change it and are left out. A column whose differing pairs number
    at most ``exact_max`` gets the exact p-value; the others share ``permutations`` seeded
    random sign patterns (one per pair: the same for a column alone or beside others).
    Returns p-values of shape ``(m,)`` (or a 0-D array for 1-D input).
    """
    d, flat = _columns(diffs)
    m = d.shape[1]
    out = np.ones(m)
    nonzero = d != 0
    differing = nonzero.sum(axis=0)
    sampled = [j for j in range(m) if differing[j] > exact_max]
    for j in range(m):
        if 0 < differing[j] <= exact_max:
            out[j] = _exact_pvalue(d[nonzero[:, j], j])
    if sampled:
        # One sign per pair (zeros add nothing), drawn from the seed alone: a column gets the
        # same p-value whatever other columns are tested beside it.
        sub = d[:, sampled]
        n = sub.shape[0]
        rng = np.random.default_rng(seed)
        observed = np.abs(sub.sum(axis=0))
        hits = np.zeros(len(sampled), dtype=np.int64)
        # Permutations in chunks of about CHUNK_CELLS (permutation, pair) cells, a multiple
        # of 4 rows: int8 signs come 4 to a 32-bit draw, so the chunks read the same stream
        # as one call drawing every permutation at once.
        rows = max(4, (CHUNK_CELLS // max(n, 1)) // 4 * 4)
        for start in range(0, permutations, rows):
            r = min(rows, permutations - start)
            signs = rng.integers(0, 2, size=(r, n), dtype=np.int8)
            signed = (1 - 2 * signs).astype(np.float64)
            del signs
            stats = np.abs(signed @ sub)  # (r, len(sampled))
            hits += np.count_nonzero(stats >= observed - _TIE, axis=0)
        out[sampled] = (hits + 1.0) / (permutations + 1.0)
    return out.reshape(()) if flat else out


def least_pvalue(differing: int) -> float:
    """The smallest two-sided p the paired randomization test can give when ``differing``
    pairs differ: the observed sign pattern and its mirror are always as extreme, so
    ``2 / 2**m`` (1.0 when none differ). Above the significance level, no result of these
    pairs could have been significant."""
    if differing <= 0:
        return 1.0
    return min(1.0, math.ldexp(1.0, 1 - differing))  # 2**(1 - m), 0.0 once it underflows


def fewest_differing(alpha: float = DEFAULT_ALPHA) -> int:
    """The fewest differing pairs whose least p (:func:`least_pvalue`) is at most ``alpha``:
    6 at 0.05 (``2**-5 = 0.031``; 5 pairs give at best 0.0625)."""
    m = 1
    while least_pvalue(m) > alpha:
        m += 1
    return m


#: Why :func:`detectable_delta` gives no estimate.
TOO_FEW_DIFFER = "too few differ"
TOO_FEW_PAIRS = "fewer than 2 pairs"
ALL_EQUAL = "all differences equal"


def detectable_delta(diffs: ArrayLike, *, alpha: float = DEFAULT_ALPHA,
                     power: float = DEFAULT_POWER) -> tuple[float | None, str | None]:
    """An estimate of the smallest mean difference these pairs could detect with a
    two-sided test at ``alpha`` with probability ``power`` (the minimum detectable effect).

    The normal approximation: ``(z(1 - alpha/2) + z(power)) * sd(d) / sqrt(n)``, ``sd`` of
    the paired differences ``diffs`` (1-D) with ``ddof=1`` standing in for the spread of
    differences a rerun would see. It ignores that ``sd`` is itself estimated (a t quantile
    would be larger: about 10% at n = 12, 2% at n = 50) and that the randomization test's
    p-values are discrete, so it is an estimate, best for tens of differing pairs or more.

    Returns ``(estimate, None)``, or ``(None, why)``: :data:`TOO_FEW_DIFFER` when so few
    pairs differ that the test cannot reach ``alpha`` at all (:func:`least_pvalue`; no
    shift of these n could then be detected), :data:`TOO_FEW_PAIRS` when ``n < 2``,
    :data:`ALL_EQUAL` when ``sd`` is 0.
    """
    d = np.asarray(diffs, dtype=np.float64).ravel()
    if d.size < 2:
        return None, TOO_FEW_PAIRS
    if least_pvalue(int(np.count_nonzero(d))) > alpha:
        return None, TOO_FEW_DIFFER
    sd = float(np.std(d, ddof=1))
    if not sd > 1e-12:  # equal differences: sums of floats may leave a few ulps of spread
        return None, ALL_EQUAL
    z = NormalDist()
    return (z.inv_cdf(1.0 - alpha / 2.0) + z.inv_cdf(power)) * sd / math.sqrt(d.size), None


def holm(pvalues: Sequence[float] | NDArray[np.float64]) -> NDArray[np.float64]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    Sorted ascending, the i-th smallest (0-based) of ``m`` gets ``(m - i) * p``, made
    non-decreasing along the sorted order and capped at 1. A test is significant at level
    ``alpha`` family-wise when its adjusted p-value is at most ``alpha``. NaN stays NaN and
    does not count toward ``m``.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = valid.size
    if m == 0:
        return out
    order = valid[np.argsort(p[valid], kind="stable")]
    scaled = p[order] * (m - np.arange(m))
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return out
