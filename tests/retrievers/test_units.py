"""The ``+unit:turn`` what-ifs (issue 36 section 4): the persona's turns, named and rendered as
the turn granularity's rows, ranked by the base retriever, returned as turn memories read until
they cover ``limit`` sessions.

The reference is the turn granularity itself: the same base retriever on the bundled sample's
turn-view persona (its own corpus, its own store, its shipped turn vectors) must rank the very
turns ``+unit:turn`` ranks on the session view.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.data import dataset, ingest
from pytest_retrieval_eval.data.protocol import View
from pytest_retrieval_eval.data.turn_texts import WithTurnTexts, turn_items
from pytest_retrieval_eval.errors import RetrievalEvalError
from pytest_retrieval_eval.retrievers import Memory, get_retriever
from pytest_retrieval_eval.retrievers.units import TurnUnit, turn_memories
from pytest_retrieval_eval.retrievers.variants import VariantError, parse_variant
from pytest_retrieval_eval.run import personas
from pytest_retrieval_eval.scoring.longmemeval_metrics import strip_turn
from pytest_retrieval_eval.vectors import cache, prep
from pytest_retrieval_eval.vectors.store_embedding import StoreEmbedding
from pytest_retrieval_eval.vipune import store as store_mod


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("units")
    source = dataset.resolve_dataset("sample")
    sessions = ingest.load_corpus(source, root, view=View("vipune", "session"))
    turns = ingest.load_corpus(source, root, view=View("vipune", "turn"))
    model = cache.list_models([cache.bundled_cache_dir()])[0]
    vectors = cache.VectorCache(root / "cache", model["fingerprint"], int(model["dim"]), model,
                                read_only_roots=[cache.bundled_cache_dir()])
    return {"sessions": sessions, "turns": turns, "model": model, "vectors": vectors,
            "stores": store_mod.StoreCache(root / "stores")}


def _usable(corpus: object) -> list[object]:
    return [p for p in corpus.pairs if not p.abstention]  # type: ignore[attr-defined]


def test_turn_items_are_the_turn_granularitys_rows(views: dict[str, object]) -> None:
    sessions, turns = views["sessions"], views["turns"]
    by_id = {p.question_id: p for p in turns.pairs}  # type: ignore[attr-defined]
    checked = 0
    for pair in _usable(sessions):
        items = [item for sid, own in zip(pair.session_ids,  # type: ignore[attr-defined]
                                          sessions.turns(list(pair.text_keys)),  # type: ignore
                                          strict=True)
                 for item in turn_items(sid, own)]
        other = by_id.get(pair.question_id)  # type: ignore[attr-defined]
        if other is None:
            continue  # rejected by the turn view (no has_answer turn to be its gold)
        assert [i for i, _ in items] == list(other.session_ids)
        assert [t for _, t in items] == turns.texts(list(other.text_keys))  # type: ignore
        checked += 1
    assert checked > 5


def test_turn_items_number_all_turns_and_skip_blank_ones() -> None:
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "  "},
             {"role": "user", "content": "a: b"}]
    assert turn_items("s_1", turns) == [("s_1_1", "user: hi"), ("s_1_3", "user: a: b")]


def _persona(views: dict[str, object], pair: object, view: str) -> object:
    corpus = views[view]
    vectors = views["vectors"]
    fingerprint = str(views["model"]["fingerprint"])  # type: ignore[index]
    embed = StoreEmbedding(vectors, None, "MiniLM")  # type: ignore[arg-type]
    return personas.build_persona(pair, corpus, vectors, views["stores"],  # type: ignore
                                  fingerprint, None, embed=embed,
                                  session_rows=view == "sessions")


@pytest.mark.parametrize("base", ["semantic", "bm25", "fts"])
def test_unit_turn_ranks_what_the_turn_granularity_ranks(views: dict[str, object],
                                                         base: str) -> None:
    by_id = {p.question_id: p for p in views["turns"].pairs}  # type: ignore[attr-defined]
    unit = get_retriever(f"{base}+unit:turn")
    assert isinstance(unit, TurnUnit) and unit.unit == "turn"
    pairs = [p for p in _usable(views["sessions"]) if p.question_id in by_id]  # type: ignore
    assert len(pairs) > 5
    for pair in pairs:
        persona = _persona(views, pair, "sessions")
        turned = _persona(views, by_id[pair.question_id], "turns")  # type: ignore[attr-defined]
        query, _ = personas.build_query(pair, None, views["vectors"],  # type: ignore[arg-type]
                                        views["model"])  # type: ignore[arg-type]
        unit.index(persona)  # type: ignore[arg-type]
        limit = 5
        got = unit.rank(persona, query, limit)  # type: ignore[arg-type]
        reference = get_retriever(base)
        expected = list(reference.rank(turned, query, len(turned.session_ids)))  # type: ignore
        # Read in rank order until the turns cover `limit` sessions.
        covered: list[str] = []
        cut = 0
        for turn_id in expected:
            if len(set(covered)) >= limit:
                break
            covered.append(turn_id.rpartition("_")[0])
            cut += 1
        assert [m.id for m in got] == expected[:cut], (base, pair.question_id)  # type: ignore
        assert all(m.turns == (m.id,) and m.sessions == () for m in got)
        scores = dict(reference.last_scores or [])  # type: ignore[attr-defined]
        assert [m.score for m in got] == [scores[m.id] for m in got]
        assert len({m.id.rpartition("_")[0] for m in got}) == min(
            limit, len({t.rpartition("_")[0] for t in expected}))


def test_semantic_unit_turn_is_a_float64_cosine_of_the_shipped_turn_vectors(
        views: dict[str, object]) -> None:
    pair = _usable(views["sessions"])[0]
    persona = _persona(views, pair, "sessions")
    query, _ = personas.build_query(pair, None, views["vectors"],  # type: ignore[arg-type]
                                    views["model"])  # type: ignore[arg-type]
    turns = persona.turn_rows()  # type: ignore[attr-defined]
    shipped = views["vectors"].get(list(turns.text_keys))  # type: ignore[attr-defined]
    rows = shipped.astype(np.float64)
    q = np.asarray(query.vector, dtype=np.float64)
    sims = rows @ q / (np.linalg.norm(rows, axis=1) * np.linalg.norm(q))
    order = np.argsort(-sims, kind="stable")
    got = get_retriever("semantic+unit:turn").rank(persona, query, 3)  # type: ignore[arg-type]
    assert [m.id for m in got] == [turns.session_ids[i] for i in order[:len(got)]]
    assert got[0].score == pytest.approx(sims[order[0]], abs=1e-12)


def test_turn_memories_read_until_limit_sessions_are_covered() -> None:
    session_of = {"a_1": "a", "a_2": "a", "b_1": "b", "c_3": "c", "a_4": "a"}
    ranked = [("a_1", 0.9), ("a_2", 0.8), ("b_1", 0.7), ("a_4", 0.6), ("c_3", 0.5)]
    got = turn_memories(ranked, session_of, 2)  # a, a, b: two sessions, a_4 not read
    assert got == [Memory("a_1", 0.9, turns=("a_1",)), Memory("a_2", 0.8, turns=("a_2",)),
                   Memory("b_1", 0.7, turns=("b_1",))]
    assert [m.id for m in turn_memories(ranked, session_of, 3)] == [i for i, _ in ranked]
    assert [m.id for m in turn_memories(ranked, session_of, 9)] == [i for i, _ in ranked]


def test_the_grammar_takes_unit_on_semantic_bm25_and_fts() -> None:
    for base in ("semantic", "bm25", "fts"):
        assert parse_variant(f"{base}+unit:turn").params == {"unit": "turn"}
    assert parse_variant("fts+unit:turn+mode:or").params == {"unit": "turn", "mode": "or"}
    with pytest.raises(VariantError, match=r"unit must be session\|turn"):
        parse_variant("bm25+unit:chunk")
    with pytest.raises(VariantError, match="unknown parameter 'unit'"):
        parse_variant("hybrid+unit:turn")
    assert get_retriever("bm25+unit:turn").needs_vectors is False  # type: ignore[attr-defined]
    assert get_retriever("fts+unit:turn").needs_vectors is False  # type: ignore[attr-defined]
    assert get_retriever("semantic+unit:turn").needs_vectors is True  # type: ignore


def test_a_persona_of_turn_rows_has_no_turns_to_rank(views: dict[str, object]) -> None:
    pair = _usable(views["turns"])[0]
    persona = _persona(views, pair, "turns")
    query, _ = personas.build_query(pair, None, views["vectors"],  # type: ignore[arg-type]
                                    views["model"])  # type: ignore[arg-type]
    with pytest.raises(RetrievalEvalError, match="rows are not sessions"):
        get_retriever("semantic+unit:turn").rank(persona, query, 5)  # type: ignore[arg-type]


def test_prep_sees_the_turn_texts(views: dict[str, object], tmp_path: Path) -> None:
    sessions, turns = views["sessions"], views["turns"]
    wide = WithTurnTexts(sessions)
    prefix = prep.query_prefix(views["model"])  # type: ignore[arg-type]
    keys = set(prep.needed_keys(wide, prefix))  # type: ignore[arg-type]
    plain = set(prep.needed_keys(sessions, prefix))  # type: ignore[arg-type]
    turn_keys = {k for p in _usable(turns) for k in p.text_keys}  # type: ignore[attr-defined]
    assert plain < keys and turn_keys <= keys
    some = sorted(turn_keys)[:5]
    assert wide.texts(some) == turns.texts(some)  # type: ignore[attr-defined]
    # The bundled sample ships every turn vector +unit:turn reads (no model needed).
    assert views["vectors"].missing(sorted(keys)) == []  # type: ignore[attr-defined]


def _some_pair(views: dict[str, object]) -> tuple[object, object, object]:
    pair = _usable(views["sessions"])[0]
    persona = _persona(views, pair, "sessions")
    query, _ = personas.build_query(pair, None, views["vectors"],  # type: ignore[arg-type]
                                    views["model"])  # type: ignore[arg-type]
    return pair, persona, query


def test_bm25s_turn_index_is_kept_and_a_damaged_one_rebuilt(views: dict[str, object],
                                                            tmp_path: Path) -> None:
    """Issue 44: bm25+unit:turn keeps its turn rows' index in the persona's workdir; a later
    run ranks from the file alone, a damaged file or another persona's is built again."""
    from dataclasses import replace

    _, persona, query = _some_pair(views)
    work = replace(persona, workdir=tmp_path)  # type: ignore[type-var]
    first = get_retriever("bm25+unit:turn")
    first.index(work)  # type: ignore[attr-defined]
    kept = list(tmp_path.glob("turns-*.bm25"))
    assert len(kept) == 1
    expected = first.rank(persona, query, 5)  # type: ignore[arg-type]

    def again() -> tuple[list[Memory], int]:
        unit = get_retriever("bm25+unit:turn")
        built: list[int] = []
        base = unit.base  # type: ignore[attr-defined]
        original = base._build
        base._build = lambda p: built.append(1) or original(p)
        unit.index(work)  # type: ignore[attr-defined]
        return unit.rank(persona, query, 5), len(built)  # type: ignore[arg-type]

    assert again() == (expected, 0)  # read back, nothing counted
    data = bytearray(kept[0].read_bytes())
    data[len(data) // 2] ^= 0x01
    kept[0].write_bytes(bytes(data))
    assert again() == (expected, 1)  # damaged: built again (and kept again)
    assert again() == (expected, 0)
    other = _persona(views, _usable(views["sessions"])[1], "sessions")
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    get_retriever("bm25+unit:turn").index(replace(other, workdir=other_dir))  # type: ignore
    for suffix in ("", ".sha256", ".verified"):  # another persona's file, sidecar and all
        (tmp_path / (kept[0].name + suffix)).write_bytes(
            (other_dir / (kept[0].name + suffix)).read_bytes())
    assert again() == (expected, 1)


@pytest.mark.parametrize("verify", ["stamp", "full"])
def test_bm25s_turn_index_is_rehashed_under_verify_full(views: dict[str, object],
                                                        tmp_path: Path, verify: str) -> None:
    """bm25+unit:turn's kept turn index is trusted as the session stores are: under
    ``--retrieval-eval-verify full`` a later process rehashes it whatever its stamp says (a
    stamp cannot see bit rot beneath the filesystem), and a file that no longer matches its
    sidecar is built again; under ``stamp`` a valid stamp is trusted."""
    from dataclasses import replace

    from pytest_retrieval_eval.io import checksums

    _, persona, query = _some_pair(views)
    work = replace(persona, workdir=tmp_path)  # type: ignore[type-var]
    get_retriever("bm25+unit:turn").index(work)  # type: ignore[attr-defined]
    (kept,) = tmp_path.glob("turns-*.bm25")
    expected = get_retriever("bm25+unit:turn").rank(persona, query, 5)  # type: ignore[arg-type]
    # Bit rot the stamp cannot see: the bytes change, the stamp vouches for the new stat.
    digest = checksums.read_sidecar(kept)
    data = bytearray(kept.read_bytes())
    data[-9] ^= 0x01
    kept.write_bytes(bytes(data))
    checksums.write_stamp(kept, kept.stat(), digest)
    checksums._memo.clear()  # a later process: only what is on disk is left
    unit = get_retriever("bm25+unit:turn", {"verify": verify})
    assert unit.verify == verify  # type: ignore[attr-defined]
    built: list[int] = []
    base = unit.base  # type: ignore[attr-defined]
    original = base._build
    base._build = lambda p: built.append(1) or original(p)
    unit.index(work)  # type: ignore[attr-defined]
    assert built == ([1] if verify == "full" else [])
    if verify == "full":  # built again, and the same ranking as the first
        assert unit.rank(persona, query, 5) == expected  # type: ignore[arg-type]
        assert checksums.read_committed(kept, "full") is not None


def test_first_memories_are_the_whole_rankings_first(views: dict[str, object]) -> None:
    """The budget's longer read of a turn what-if (first_memories) is the ranking at the
    persona's size, as read_distinct reads it, cut at ``count``."""
    from pytest_retrieval_eval.retrievers.ranked_output import read_distinct

    _, persona, query = _some_pair(views)
    n = len(persona.session_ids)  # type: ignore[attr-defined]
    for base in ("semantic", "bm25", "fts", "fts+mode:or"):
        unit = get_retriever(f"{base}+unit:turn")
        unit.index(persona)  # type: ignore[attr-defined]
        whole = read_distinct(unit.rank(persona, query, n), base, "q", n, n)  # type: ignore
        assert whole or base == "fts", base  # the OR query matches turns
        # growing, as a budget's read asks, then shorter again: what was made for the
        # last read of the same (persona, query) is reused as the ranking's prefix
        for count in (1, 7, len(whole), len(whole) + 5, 3):
            assert unit.first_memories(persona, query, count) == whole[:count]  # type: ignore


@pytest.mark.parametrize("first", [1, 64])
def test_an_fts_turn_ranking_reads_rows_until_its_sessions_are_covered(
        views: dict[str, object], first: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """fts+unit:turn reads FTS5's rows a LIMIT at a time, each four times the last, until
    they cover the sessions asked (not every matching turn fetched): the memories of the
    whole ranking's first rows that cover them, for any limit (reads grown from one row
    a session, and as they start in a run)."""
    from pytest_retrieval_eval.retrievers import units

    monkeypatch.setattr(units, "_READ_PER_SESSION", first)
    monkeypatch.setattr(units, "_FIRST_READ", first)
    for pair in _usable(views["sessions"])[:4]:
        persona = _persona(views, pair, "sessions")
        query, _ = personas.build_query(pair, None, views["vectors"],  # type: ignore[arg-type]
                                        views["model"])  # type: ignore[arg-type]
        rows = len(persona.turn_rows().session_ids)  # type: ignore[attr-defined]
        for base in ("fts", "fts+mode:or"):
            unit = get_retriever(f"{base}+unit:turn")
            unit.index(persona)  # type: ignore[attr-defined]
            whole = unit.first_memories(persona, query, rows)  # type: ignore[attr-defined]
            sessions = [strip_turn(m.id) for m in whole]
            asked: list[int] = []
            ranking = unit.base.rank  # type: ignore[attr-defined]
            monkeypatch.setattr(unit.base, "rank",  # type: ignore[attr-defined]
                                lambda p, q, k, f=ranking, a=asked: a.append(k) or f(p, q, k))
            n = len(persona.session_ids)  # type: ignore[attr-defined]
            for lim in sorted({min(lim, n) for lim in (1, 2, 3, 5, 10, 20, n)}):
                cut = next((i + 1 for i in range(len(whole))
                            if len(set(sessions[:i + 1])) >= lim), len(whole))
                asked.clear()
                assert unit.rank(persona, query, lim) == whole[:cut], (base, lim)
                assert asked[0] == min(rows, max(first * lim, first))  # not every row
                assert asked == [min(rows, asked[0] * 4 ** i) for i in range(len(asked))]


@pytest.mark.parametrize("scan", [True, False])
def test_session_order_is_the_whole_rankings_sessions(views: dict[str, object], scan: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """What explain reads past a turn what-if's top (session_order) is the sessions of
    its whole turn ranking, first turn first: every base, the semantic one without
    ranking every turn by the rule."""
    from dataclasses import replace

    from pytest_retrieval_eval.retrievers.memories import session_ranking
    from pytest_retrieval_eval.vipune import semantic

    if not scan:  # the sample's ~170 turns a persona: estimated, not scanned by the rule
        monkeypatch.setattr(semantic, "_TOP_SCAN_ROWS", 0)
    bases = ("semantic", "bm25", "fts", "fts+mode:or")
    units = {base: get_retriever(f"{base}+unit:turn") for base in bases}  # reused: no
    # answer kept for one (persona, question) may be given for another
    for pair in _usable(views["sessions"])[:6]:
        persona = _persona(views, pair, "sessions")
        query, _ = personas.build_query(pair, None, views["vectors"],  # type: ignore[arg-type]
                                        views["model"])  # type: ignore[arg-type]
        rows = len(persona.turn_rows().session_ids)  # type: ignore[attr-defined]
        other = replace(query, question="what did I say about my plans")  # type: ignore
        for base, unit in units.items():
            unit.index(persona)  # type: ignore[attr-defined]
            whole = session_ranking(unit.first_memories(persona, query, rows))  # type: ignore
            assert unit.session_order(persona, query) == whole, base  # type: ignore
            assert whole or base == "fts", base
            if base != "semantic":  # (its query vector is the question's)
                fresh = get_retriever(f"{base}+unit:turn")
                fresh.index(persona)  # type: ignore[attr-defined]
                assert unit.session_order(persona, other) == \
                    fresh.session_order(persona, other), base  # type: ignore[attr-defined]


def test_an_fts_limit_keeps_the_first_rows_of_a_larger_one(tmp_path: Path) -> None:
    """FtsRetriever.limit_is_prefix: vipune's FTS_SQL at LIMIT k gives the first k rows of
    any larger LIMIT, tied rows in the same order (SQLite's sorter keys end in a sequence
    number under a LIMIT), which the budget's read of fts+unit:turn relies on."""
    from pytest_retrieval_eval import vipune

    rng = np.random.default_rng(7)
    texts = ["alpha beta", "alpha", "beta gamma alpha", "alpha alpha delta", "gamma"]
    rows = [(f"r{i}", texts[int(rng.integers(len(texts)))],
             rng.standard_normal(384).astype(np.float32), "2024-01-01T00:00:00Z")
            for i in range(300)]
    path = store_mod.build_store(tmp_path / "ties.sqlite", rows)
    for query, mode in (("alpha", "and"), ("alpha gamma", "or"), ("beta alpha", "and")):
        whole = vipune.fts_search(path, query, store_mod.PROJECT_ID, 10_000, mode=mode)
        scores = [score for _, score in whole]
        assert len(set(scores)) < len(scores) // 10  # mostly ties
        for k in (1, 2, 17, 64, len(whole) - 1, len(whole)):
            got = vipune.fts_search(path, query, store_mod.PROJECT_ID, k, mode=mode)
            assert got == whole[:k], (query, k)


def test_prep_reads_the_turn_keys_from_the_kept_rows(views: dict[str, object],
                                                     tmp_path: Path) -> None:
    from pytest_retrieval_eval.data.turn_rows import TurnRowsCache

    sessions = views["sessions"]
    plain = WithTurnTexts(sessions)
    for _ in range(2):  # built and kept, then read back
        kept = WithTurnTexts(sessions, TurnRowsCache(tmp_path))
        assert [p.text_keys for p in kept.pairs] == [p.text_keys for p in plain.pairs]
        some = [k for p in kept.pairs for k in p.text_keys][-7:]
        assert kept.texts(some) == plain.texts(some)
    assert kept.kept is not None and kept.kept.read == len(sessions.pairs)  # type: ignore


def test_an_fts_turn_stores_bytes_are_its_footprint(views: dict[str, object],
                                                    tmp_path: Path) -> None:
    """Issue 44: the turn store fts+unit:turn builds lies with the session stores, not in
    the workdir; its bytes are the persona's disk footprint all the same."""
    from pytest_retrieval_eval.run import store_costs

    _, persona, _ = _some_pair(views)
    for base, stored in (("fts", True), ("bm25", False)):
        unit = get_retriever(f"{base}+unit:turn")
        unit.index(persona)  # type: ignore[attr-defined]
        turns = persona.turn_rows()  # type: ignore[attr-defined]
        size = turns.store_path().stat().st_size if stored else 0
        assert unit.held_bytes == size  # type: ignore[attr-defined]
        folder = tmp_path / base
        folder.mkdir()
        facts = store_costs.footprint(unit, "p", folder, None)
        assert facts["disk_bytes"] == size and (size > 0) == stored
