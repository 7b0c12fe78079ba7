"""vipune's semantic search: embeddings as BLOBs, float64 cosine of float32 values summed
left to right, and ``Database::search``'s stable sort (``src/sqlite/embedding.rs``,
``src/sqlite/search.rs``).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

import numpy as np

from .limits import SearchResult, validate_limit

__all__ = [
    "EMBEDDING_BLOB_SIZE",
    "EMBEDDING_DIM",
    "blob_to_vector",
    "cosine_similarity",
    "semantic_group_order",
    "semantic_ranking",
    "semantic_search",
    "semantic_top",
    "vector_to_blob",
]

#: ``src/sqlite/embedding.rs``: embeddings are exactly 384 little-endian float32 values.
EMBEDDING_DIM = 384
EMBEDDING_BLOB_SIZE = EMBEDDING_DIM * 4


def vector_to_blob(vector: np.ndarray, *, dim: int | None = EMBEDDING_DIM) -> bytes:
    """``vec_to_blob``: little-endian float32 bytes; exactly ``dim`` values (None: any)."""
    arr = np.asarray(vector)
    if arr.ndim != 1:
        raise ValueError(f"an embedding is one vector, got shape {arr.shape}")
    if dim is not None and arr.shape[0] != dim:
        raise ValueError(
            f"Mismatched dimensions: expected {dim} dimensions, got {arr.shape[0]} dimensions"
        )
    return np.ascontiguousarray(arr, dtype="<f4").tobytes()


def blob_to_vector(blob: bytes, *, dim: int | None = EMBEDDING_DIM) -> np.ndarray:
    """``blob_to_vec``: exactly ``dim * 4`` bytes (None: any multiple of 4) -> float32."""
    if dim is not None and len(blob) != dim * 4:
        raise ValueError(f"Invalid BLOB size: expected {dim * 4} bytes, got {len(blob)} bytes")
    if len(blob) % 4:
        raise ValueError(f"Invalid BLOB size: {len(blob)} bytes is not a multiple of 4")
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def _check_finite(arr: np.ndarray) -> None:
    if not np.isfinite(arr).all():
        raise ValueError("Invalid embedding: Vector contains NaN or infinite values")


def cosine_similarity(a: np.ndarray | Sequence[float], b: np.ndarray | Sequence[float]) -> float:
    """``cosine_similarity``: float64 from float32, sums left to right, 0.0 for a zero norm.

    Errors (``ValueError``): an empty vector, a length mismatch, NaN or infinite values.
    """
    va = np.asarray(a, dtype=np.float32)
    vb = np.asarray(b, dtype=np.float32)
    if va.ndim != 1 or vb.ndim != 1:
        raise ValueError("cosine similarity takes two 1-d vectors")
    if va.size == 0 or vb.size == 0:
        raise ValueError("Cannot compute similarity with empty vector")
    if va.size != vb.size:
        raise ValueError(
            f"Mismatched dimensions: expected {va.size} dimensions, got {vb.size} dimensions"
        )
    _check_finite(va)
    _check_finite(vb)
    a64 = va.astype(np.float64)
    b64 = vb.astype(np.float64)
    # float32 x float32 products are exact in float64; only the summation order matters,
    # and ``add.accumulate`` adds strictly left to right, as Rust's ``Iterator::sum`` does.
    dot = float(np.add.accumulate(a64 * b64)[-1])
    norm_a = math.sqrt(float(np.add.accumulate(a64 * a64)[-1]))
    norm_b = math.sqrt(float(np.add.accumulate(b64 * b64)[-1]))
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return dot / (norm_a * norm_b)


def _similarities(vectors: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """Cosine of every row against the query, bit-identical to the per-row rule."""
    q = np.asarray(query_vector, dtype=np.float32)
    mat = np.asarray(vectors, dtype=np.float32)
    if q.ndim != 1:
        raise ValueError("the query vector must be 1-d")
    if q.size == 0:
        raise ValueError("Cannot compute similarity with empty vector")
    if mat.ndim != 2:
        raise ValueError(f"the stored vectors must form a 2-d array, got shape {mat.shape}")
    if mat.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    if mat.shape[1] != q.size:
        raise ValueError(
            f"Mismatched dimensions: expected {q.size} dimensions, got {mat.shape[1]} dimensions"
        )
    _check_finite(q)
    _check_finite(mat)
    q64 = q.astype(np.float64)
    if mat.shape[0] == 1:  # one row: its own left-to-right sums (the rule itself)
        return np.array([cosine_similarity(mat[0], q)], dtype=np.float64)
    # Column-major float64 copy (exact: float32 x float32 fits float64). Reducing its
    # leading axis adds each row's products left to right, as Rust's per-row ``sum`` does:
    # with two rows or more the rows are the iteration's inner, vectorised axis and the
    # dimensions its outer one, so each sum takes the products in order (numpy sums
    # pairwise only along an inner axis, which a single row would make the dimensions).
    # Four vector operations, where a step per dimension took 4 x 384 (issue 35).
    cols = np.ascontiguousarray(mat.T, dtype=np.float64)
    dots = np.add.reduce(cols * q64[:, None], axis=0)
    np.multiply(cols, cols, out=cols)
    squares = np.add.reduce(cols, axis=0)
    row_norms = np.sqrt(squares)
    query_norm = math.sqrt(float(np.add.accumulate(q64 * q64)[-1]))
    sims = np.zeros(mat.shape[0], dtype=np.float64)
    if query_norm == 0.0:
        return sims
    nonzero = row_norms != 0.0
    sims[nonzero] = dots[nonzero] / (query_norm * row_norms[nonzero])
    return sims


def _order(vectors: np.ndarray, ids: Sequence[str],
           query_vector: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Every row's cosine, and the rows best first (stable: ties keep row order)."""
    if len(ids) != np.asarray(vectors).shape[0]:
        raise ValueError(f"{len(ids)} ids for {np.asarray(vectors).shape[0]} vectors")
    if len(ids) == 0:
        return np.zeros(0, dtype=np.float64), []
    sims = _similarities(vectors, query_vector)
    return sims, np.argsort(-sims, kind="stable").tolist()


def semantic_search(
    vectors: np.ndarray,
    ids: Sequence[str],
    query_vector: np.ndarray,
    limit: int,
) -> list[SearchResult]:
    """``Database::search``: cosine of every row, stable sort (ties keep row order), top ``limit``.

    ``vectors[i]`` is the embedding of ``ids[i]``, rows in the store's scan order.
    """
    validate_limit(limit)
    sims, order = _order(vectors, ids, query_vector)
    return [(ids[i], float(sims[i])) for i in order[:limit]]


def semantic_ranking(vectors: np.ndarray, ids: Sequence[str],
                     query_vector: np.ndarray) -> list[SearchResult]:
    """Every row, best first, in :func:`semantic_search`'s order, with no limit: its first
    ``limit`` rows are ``semantic_search(..., limit)``. vipune never returns more than
    ``MAX_SEARCH_LIMIT`` rows; the rest is for what the report says of ties past that cap."""
    sims, order = _order(vectors, ids, query_vector)
    return [(ids[i], float(sims[i])) for i in order]


#: Below this many rows :func:`semantic_top` scans every row by the rule itself.
_TOP_SCAN_ROWS = 256


def semantic_top(vectors: np.ndarray, query_vector: np.ndarray,
                 count: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``count`` rows of :func:`semantic_ranking`'s order (row indices) and their
    cosines, bit for bit the rule's (:func:`_similarities`), without the rule's scan of
    every row.

    Every row's cosine is first estimated in float32 with one matrix-vector product (any
    summation order; each sum of ``dim`` products within ``dim`` float32 units of the
    norms' product, Cauchy-Schwarz, as the rule's own float64 sums are within ``dim``
    float64 units). A row whose estimate lies more than twice the bound on the difference
    (:func:`_margin`) below the ``count``-th best estimate is below the ``count``-th best
    rule value, so it can be neither among the first ``count`` rows nor tied with the last
    of them; the rule is computed for the other rows alone (a row's value does not depend
    on the rows beside it), and they are ordered by it, ties in row order (the stable
    sort's). A row whose float32 squares could lose their relative precision (a norm below
    2**-50, or one past float32's range) is always computed by the rule."""
    mat = np.asarray(vectors, dtype=np.float32)
    q = np.asarray(query_vector, dtype=np.float32)
    n = mat.shape[0] if mat.ndim == 2 else 0
    if count >= n or n <= _TOP_SCAN_ROWS or q.ndim != 1 or mat.ndim != 2 \
            or mat.shape[1] != q.size or q.size == 0:
        return _top_by_rule(mat, q, count)
    _check_finite(q)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        qsq = float(np.dot(q, q))
    if not (_TINY <= qsq < _HUGE):
        return _top_by_rule(mat, q, count)
    squares, sure = _row_facts(mat)  # checks the rows are finite, as the rule does
    dots = _dots(mat, q)
    if len(sure) < count:
        return _top_by_rule(mat, q, count)
    estimate = dots[sure].astype(np.float64) / (
        np.sqrt(squares[sure].astype(np.float64)) * math.sqrt(qsq))
    kth = -np.partition(-estimate, count - 1)[count - 1]
    keep = np.zeros(n, dtype=bool)
    keep[sure[estimate >= kth - 2.0 * _margin(q.size)]] = True
    if len(sure) < n:  # the unsure rows: always by the rule
        keep[np.setdiff1d(np.arange(n), sure, assume_unique=True)] = True
    candidates = np.flatnonzero(keep)
    exact = _similarities(mat[candidates], q)
    order = np.lexsort((candidates, -exact))[:count]
    return candidates[order], exact[order]


def first_groups(groups: np.ndarray) -> np.ndarray:
    """The distinct values of ``groups`` in the order of their first appearance."""
    seq = np.asarray(groups, dtype=np.int64)
    _, first = np.unique(seq, return_index=True)
    return seq[np.sort(first)]


def semantic_group_order(vectors: np.ndarray, query_vector: np.ndarray,
                         groups: np.ndarray) -> np.ndarray:
    """The groups (``groups[i]``: row ``i``'s) in the order of their first row in
    :func:`semantic_ranking`'s order of every row, exactly, without the rule's scan of
    every row: a turn what-if's sessions, best first (what explain reads past the top).

    A group's first row in that order is its best row by the rule (the lowest of tied
    ones), and the groups come in the order of those rows. Every row's cosine is estimated
    as :func:`semantic_top` does (within :func:`_margin` of the rule's); a row whose
    estimate lies more than twice that below its group's best estimate is below its
    group's best rule value, so it is no group's first row. The rule is computed for the
    other rows alone (about one a group), and they are ordered by it, ties in row order:
    their groups' first appearances are the answer. Rows whose squares could lose their
    precision are always computed by the rule."""
    mat = np.asarray(vectors, dtype=np.float32)
    q = np.asarray(query_vector, dtype=np.float32)
    rows_of = np.asarray(groups, dtype=np.int64)
    n = mat.shape[0] if mat.ndim == 2 else 0
    if rows_of.shape != (n,):
        raise ValueError(f"{rows_of.size} groups for {n} rows")
    if n <= _TOP_SCAN_ROWS or q.ndim != 1 or mat.shape[1] != q.size or q.size == 0:
        order, _ = _top_by_rule(mat, q, n)
        return first_groups(rows_of[order])
    _check_finite(q)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        qsq = float(np.dot(q, q))
    if not (_TINY <= qsq < _HUGE):
        order, _ = _top_by_rule(mat, q, n)
        return first_groups(rows_of[order])
    squares, sure = _row_facts(mat)  # checks the rows are finite, as the rule does
    dots = _dots(mat, q)
    estimate = np.full(n, -np.inf)
    estimate[sure] = dots[sure].astype(np.float64) / (
        np.sqrt(squares[sure].astype(np.float64)) * math.sqrt(qsq))
    _, dense = np.unique(rows_of, return_inverse=True)
    best = np.full(int(dense.max()) + 1, -np.inf)
    np.maximum.at(best, dense, estimate)
    keep = estimate >= best[dense] - 2.0 * _margin(q.size)
    keep[np.setdiff1d(np.arange(n), sure, assume_unique=True)] = True  # by the rule
    candidates = np.flatnonzero(keep)
    exact = _similarities(mat[candidates], q)
    return first_groups(rows_of[candidates[np.lexsort((candidates, -exact))]])


#: The last read-only matrix's row facts (:func:`_row_facts`): a weak reference to it, its
#: squared norms and its rows whose squares are sure. A turn what-if ranks each persona's
#: turn matrix once a query and again for a budget's read: the facts are made once.
_LAST_ROWS: tuple[weakref.ref[np.ndarray], np.ndarray, np.ndarray] | None = None


def _row_facts(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's float32 squared norm (einsum's own loops, not BLAS: a threaded BLAS on a
    busy machine spins for tens of ms where these take a few) and the rows whose squares
    lie in [_TINY, _HUGE); raises the rule's ValueError for a non-finite value. Kept for
    the last matrix when it is read-only (its values cannot change under the kept facts)."""
    global _LAST_ROWS
    last = _LAST_ROWS
    if last is not None and last[0]() is mat:
        return last[1], last[2]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        squares = np.einsum("ij,ij->i", mat, mat)
    if not np.isfinite(squares).all():
        # a NaN or infinite value makes its row's square so (squares are sums of values
        # >= 0): only then is every value looked at (a finite overflow alone passes)
        _check_finite(mat)
    sure = np.flatnonzero((squares >= _TINY) & (squares < _HUGE))
    if not mat.flags.writeable and not _writeable_base(mat):
        _LAST_ROWS = (weakref.ref(mat), squares, sure)
    return squares, sure


#: The last read-only matrix's float32 dot products with a query (:func:`_dots`): a weak
#: reference to it, the query's bytes and the products. A turn what-if's top and explain's
#: whole order (:func:`semantic_group_order`) read the same ones.
_LAST_DOTS: tuple[weakref.ref[np.ndarray], bytes, np.ndarray] | None = None


def _dots(mat: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Each row's float32 dot product with ``q`` (any summation order: an estimate's),
    kept for the last read-only matrix and query (see :func:`_row_facts`)."""
    global _LAST_DOTS
    last = _LAST_DOTS
    key = q.tobytes()
    if last is not None and last[0]() is mat and last[1] == key:
        return last[2]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        dots: np.ndarray = np.einsum("ij,j->i", mat, q)
    if not mat.flags.writeable and not _writeable_base(mat):
        dots.flags.writeable = False
        _LAST_DOTS = (weakref.ref(mat), key, dots)
    return dots


def _writeable_base(mat: np.ndarray) -> bool:
    """Whether any array ``mat`` views can still be written (its values could change)."""
    base = mat.base
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return True
        base = base.base
    return False


#: float32 squares within [2**-100, 2**100): no underflow or overflow takes precision.
_TINY = 2.0 ** -100
_HUGE = 2.0 ** 100


def _top_by_rule(mat: np.ndarray, q: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    sims = _similarities(mat, q)  # every check of the rule, with its messages
    order = np.argsort(-sims, kind="stable")[:max(count, 0)]
    return order, sims[order]


def _margin(dim: int) -> float:
    """How far :func:`semantic_top`'s float32 estimate may lie from the rule's cosine: the
    dot product and each norm's square are sums of ``dim`` products, each within ``dim``
    units of 2**-24 of the norms' product, and the root and quotient round a few times
    more; taken four times over."""
    return 16.0 * (dim + 4) * 2.0 ** -24
