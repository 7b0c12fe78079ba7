"""``semantic_top`` (issue 44): the first rows of the semantic ranking without the rule's scan
of every row, bit for bit the rule's rows, order and cosines, ties in row order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_retrieval_eval.vipune import semantic_group_order, semantic_ranking, semantic_top
from pytest_retrieval_eval.vipune.semantic import _TOP_SCAN_ROWS, _similarities


def _same_as_rule(mat: np.ndarray, q: np.ndarray, count: int) -> None:
    full = _similarities(mat, q)
    order = np.argsort(-full, kind="stable")[:count]
    rows, sims = semantic_top(mat, q, count)
    assert rows.tolist() == order.tolist()
    assert sims.view(np.int64).tolist() == full[order].view(np.int64).tolist()
    ids = [f"r{i}" for i in range(len(mat))]
    assert [(ids[r], s) for r, s in zip(rows.tolist(), sims.tolist(), strict=True)] == \
        semantic_ranking(mat, ids, q)[:count]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(_TOP_SCAN_ROWS + 1, 1500),
       dim=st.sampled_from([2, 7, 384]), scale=st.integers(-25, 25),
       ties=st.booleans(), zeros=st.booleans(), tiny=st.booleans())
def test_top_rows_are_the_rules(seed: int, n: int, dim: int, scale: int, ties: bool,
                                zeros: bool, tiny: bool) -> None:
    rng = np.random.default_rng(seed)
    mat = (rng.standard_normal((n, dim)) * 10.0 ** scale).astype(np.float32)
    if ties:  # many rows equal to one another, and to the best row
        mat[rng.integers(0, n, n // 2)] = mat[int(np.argmax(mat[:, 0]))]
    if zeros:
        mat[rng.integers(0, n, n // 4)] = 0.0
    if tiny:  # squares below float32's normal range: always by the rule
        mat[rng.integers(0, n, n // 4)] *= np.float32(1e-25)
    q = rng.standard_normal(dim).astype(np.float32)
    for count in (1, 10, int(rng.integers(1, n + 1)), n):
        _same_as_rule(mat, q, count)


def _groups_as_rule(mat: np.ndarray, q: np.ndarray, groups: np.ndarray) -> None:
    """semantic_group_order is the order of each group's first row in the rule's ranking of
    every row (ties in row order)."""
    order = np.argsort(-_similarities(mat, q), kind="stable")
    expected = list(dict.fromkeys(groups[order].tolist()))
    assert semantic_group_order(mat, q, groups).tolist() == expected


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 1500),
       dim=st.sampled_from([2, 7, 384]), scale=st.integers(-25, 25),
       ties=st.booleans(), zeros=st.booleans(), tiny=st.booleans(),
       sessions=st.integers(1, 600), sparse=st.booleans())
def test_group_order_is_the_rules(seed: int, n: int, dim: int, scale: int, ties: bool,
                                  zeros: bool, tiny: bool, sessions: int,
                                  sparse: bool) -> None:
    rng = np.random.default_rng(seed)
    mat = (rng.standard_normal((n, dim)) * 10.0 ** scale).astype(np.float32)
    if ties:
        mat[rng.integers(0, n, n // 2)] = mat[int(np.argmax(mat[:, 0]))]
    if zeros:
        mat[rng.integers(0, n, n // 4)] = 0.0
    if tiny:
        mat[rng.integers(0, n, n // 4)] *= np.float32(1e-25)
    groups = np.sort(rng.integers(0, sessions, n))  # turn rows: a session's rows together
    if sparse:  # groups numbered with gaps (sessions without turns), not in row order
        groups = rng.permutation(sessions * 3)[groups]
    _groups_as_rule(mat, rng.standard_normal(dim).astype(np.float32), groups)


def test_group_order_near_ties() -> None:
    """Groups whose best rows differ in the last bits only are ordered by the rule."""
    rng = np.random.default_rng(11)
    base = rng.standard_normal(384).astype(np.float32)
    mat = np.repeat(base[None, :], 900, axis=0)
    steps = rng.integers(-3, 4, size=(900, 384)).astype(np.float32)
    mat = np.nextafter(mat, mat + steps)
    mat[::9] = base
    groups = np.repeat(np.arange(300), 3)
    _groups_as_rule(mat, base, groups)
    with pytest.raises(ValueError, match="groups"):
        semantic_group_order(mat, base, groups[:-1])


def test_near_ties_within_the_estimates_error() -> None:
    """Rows whose cosines differ in the last bits only: the float32 estimate cannot order
    them, the rule does."""
    rng = np.random.default_rng(7)
    base = rng.standard_normal(384).astype(np.float32)
    mat = np.repeat(base[None, :], 600, axis=0)
    steps = rng.integers(-3, 4, size=(600, 384)).astype(np.float32)
    mat = np.nextafter(mat, mat + steps)  # one float32 step up or down, here and there
    mat[::7] = base
    for count in (1, 5, 50, 599):
        _same_as_rule(mat, base, count)


def test_checks_are_the_rules() -> None:
    mat = np.ones((_TOP_SCAN_ROWS + 10, 3), dtype=np.float32)
    mat[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        semantic_top(mat, np.ones(3, dtype=np.float32), 3)
    with pytest.raises(ValueError, match="Mismatched dimensions"):
        semantic_top(np.ones((_TOP_SCAN_ROWS + 10, 3), dtype=np.float32),
                     np.ones(4, dtype=np.float32), 3)


@pytest.mark.parametrize("values", [[np.nan], [np.inf], [-np.inf], [np.inf, -np.inf],
                                    [1e30], [-1e30, 1e30], [3e38, 3e38]])
def test_a_value_is_refused_as_the_rule_refuses_it(values: list[float]) -> None:
    """The matrix's values are looked at only when a row's square is not finite: a NaN or
    an infinity (alone or with its opposite in the row) is refused as the rule refuses it,
    a finite value whose square overflows is not (the rule takes it)."""
    mat = np.ones((_TOP_SCAN_ROWS + 10, 4), dtype=np.float32)
    mat[7, :len(values)] = values
    refused = not np.isfinite(mat).all()
    try:
        semantic_top(mat, np.ones(4, dtype=np.float32), 3)
    except ValueError as exc:
        assert refused and "NaN or infinite" in str(exc)
    else:
        assert not refused


def test_a_read_only_matrix_s_row_facts_are_kept_and_give_the_same_top() -> None:
    """A turn what-if ranks each persona's (read-only) turn matrix once a query and again
    for a budget's read: its squares and finiteness are made once; a writeable matrix (its
    values could change) is never kept."""
    from pytest_retrieval_eval.vipune import semantic

    rng = np.random.default_rng(3)
    mat = rng.standard_normal((3000, 16)).astype(np.float32)
    queries = rng.standard_normal((4, 16)).astype(np.float32)
    fresh = [semantic.semantic_top(mat, q, 50) for q in queries]
    assert semantic._LAST_ROWS is None or semantic._LAST_ROWS[0]() is not mat
    frozen = mat.copy()
    frozen.flags.writeable = False
    groups = np.arange(3000) // 7
    for q, (rows, sims) in zip(queries, fresh, strict=True):
        got = semantic.semantic_top(frozen, q, 50)
        assert semantic._LAST_ROWS is not None and semantic._LAST_ROWS[0]() is frozen
        assert np.array_equal(got[0], rows) and np.array_equal(got[1], sims)
        # the query's dot products are kept for explain's whole order, for this query only
        assert semantic._LAST_DOTS is not None and semantic._LAST_DOTS[0]() is frozen
        assert semantic._LAST_DOTS[1] == q.tobytes()
        _groups_as_rule(frozen, q, groups)
    view = mat[:2000]  # read-only view of a writeable array: not kept
    view.flags.writeable = False
    semantic.semantic_top(view, queries[0], 50)
    assert semantic._LAST_ROWS[0]() is frozen and semantic._LAST_DOTS[0]() is frozen
    bad = frozen.copy()
    bad[7, 3] = np.nan
    bad.flags.writeable = False
    with pytest.raises(ValueError, match="NaN or infinite"):
        semantic.semantic_top(bad, queries[0], 50)
