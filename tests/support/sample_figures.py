"""What each part of vipune's hybrid search decides on a LongMemEval-shaped file.

For every scored pair (abstention skipped) the persona's rows go into a vipune store
(``store.build_store``) and are searched with the plugin's reference (``vipune.py``):
``semantic_search``, ``fts_search`` and ``search_hybrid`` at each cut-off. Beside the
reference, :func:`fuse` re-implements the small fusion step with its constants as arguments
(RRF k, the candidate pool, the direction of the id tie-break), so that a figure says whether
the sample can tell a constant from another:

* ``fts_rows``: rows FTS5 returns for the question (vipune ANDs every quoted word);
* ``hybrid_differs``: the fused top 10 is not the semantic top 10 (order counts);
* ``rrf_k_matters``: RRF k = 60 instead of 25 changes the ranking at some cut-off;
* ``pool_clamp_matters``: the unclamped pool (``limit * 10``) changes the ranking at some
  cut-off; only the lower bound (50) can, and only at cut-offs under 5: the upper bound
  (10,000) needs a persona of more than 10,000 rows and a limit over 1,000;
* ``tie_break_matters``: breaking equal fused scores by id *descending* changes the ranking.

Used by ``tests/data/test_bundled_sample.py`` on the shipped sample and its shipped vectors, and by
whoever regenerates the sample (``scripts/build_sample_cache.py`` prints the figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_retrieval_eval import vipune
from pytest_retrieval_eval.data import corpus
from pytest_retrieval_eval.vectors import cache, prep
from pytest_retrieval_eval.vipune import store

KS = (1, 5, 10)


def fuse(semantic: Sequence[str], fts: Sequence[str], limit: int, *, k: int = 25,
         pool: int | None = None, ties_descending: bool = False) -> list[str]:
    """RRF of the first ``pool`` ids of each list (pool None: clamp(limit*10, 50, 10000)),
    score descending, equal scores by id (bytes) ascending or descending; top ``limit``."""
    size = min(max(limit * 10, 50), 10_000) if pool is None else pool
    scores: dict[str, float] = {}
    for ranked in (semantic[:size], fts[:size]):
        for rank, mem_id in enumerate(ranked, start=1):
            scores[mem_id] = scores.get(mem_id, 0.0) + 1.0 / (k + rank)
    by_id = sorted(scores, key=lambda i: i.encode("utf-8"), reverse=ties_descending)
    return sorted(by_id, key=lambda i: -scores[i])[:limit]


@dataclass(frozen=True)
class PairFigures:
    question_id: str
    question_type: str
    fts_rows: int
    hybrid_differs: bool
    rrf_k_matters: bool
    pool_clamp_matters: bool
    tie_break_matters: bool
    reference_agrees: bool        # fuse() with vipune's constants == vipune.search_hybrid
    hybrid_top10: tuple[str, ...]
    semantic_top10: tuple[str, ...]


def pair_figures(pair: corpus.PairRecord, texts: Sequence[str], vectors: np.ndarray,
                 qvec: np.ndarray, workdir: Path) -> PairFigures:
    """The figures of one pair (its store is written under ``workdir``)."""
    ids = list(pair.session_ids)
    path = store.build_store(workdir / f"{pair.question_id}.sqlite",
                             store.rows_from_arrays(ids, texts, vectors, pair.created_at))
    semantic = [i for i, _ in vipune.semantic_search(vectors, ids, qvec, len(ids))]
    fts = [i for i, _ in vipune.fts_search(path, pair.question, store.PROJECT_ID,
                                           vipune.MAX_SEARCH_LIMIT)]
    agrees = k_matters = clamp_matters = ties_matter = False
    agrees = True
    for limit in KS:
        reference = [i for i, _ in vipune.search_hybrid(
            path, vectors, ids, pair.question, qvec, limit, project_id=store.PROJECT_ID)]
        ours = fuse(semantic, fts, limit)
        agrees &= reference == ours
        k_matters |= fuse(semantic, fts, limit, k=60) != ours
        clamp_matters |= fuse(semantic, fts, limit, pool=limit * 10) != ours
        ties_matter |= fuse(semantic, fts, limit, ties_descending=True) != ours
    hybrid10 = fuse(semantic, fts, 10)
    return PairFigures(pair.question_id, pair.question_type, len(fts),
                       hybrid10 != semantic[:10], k_matters, clamp_matters, ties_matter, agrees,
                       tuple(hybrid10), tuple(semantic[:10]))


def sample_figures(data: corpus.Corpus, vectors: cache.VectorCache, model: object,
                   workdir: Path) -> list[PairFigures]:
    """Figures of every scored pair of ``data``, with the vectors (and query vectors) of
    ``model`` (its info mapping) from ``vectors``."""
    out = []
    for pair in data.pairs:
        if pair.abstention:
            continue
        rows = vectors.get(list(pair.text_keys))
        qvec = vectors.get([prep.query_key(pair.question, model)])[0]
        out.append(pair_figures(pair, data.texts(list(pair.text_keys)), rows, qvec, workdir))
    return out


def summary(figures: Sequence[PairFigures]) -> dict[str, int]:
    """Counts over the pairs, as the sample's test checks them."""
    return {
        "pairs": len(figures),
        "fts_nonempty": sum(f.fts_rows > 0 for f in figures),
        "hybrid_differs": sum(f.hybrid_differs for f in figures),
        "rrf_k_matters": sum(f.rrf_k_matters for f in figures),
        "pool_clamp_matters": sum(f.pool_clamp_matters for f in figures),
        "tie_break_matters": sum(f.tie_break_matters for f in figures),
        "reference_agrees": sum(f.reference_agrees for f in figures),
    }
