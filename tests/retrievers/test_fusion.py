"""``RRF`` (retrievers/fusion.py, issue 37 item 6): any stores fused by vipune's rule.

Checked against a fusion worked by hand (the sums written out as fractions, the id
tie-break), the candidate pool each part is asked for, selectors as parts, and that
``RRF(["semantic", "fts"], k=25)`` ranks as ``hybrid`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_retrieval_eval import retrievers as r
from pytest_retrieval_eval.errors import RetrievalEvalError
from pytest_retrieval_eval.retrievers import RRF, Persona, Query
from pytest_retrieval_eval.retrievers.fusion import part_times
from tests.retrievers.test_retrievers import make_persona, make_query


class Fixed:
    """A part that returns a fixed list and records the limits it was asked for."""

    needs_vectors = False

    def __init__(self, name: str, ids: Sequence[str], scored: bool = False) -> None:
        self.name = name
        self.ids = list(ids)
        self.scored = scored
        self.asked: list[int] = []
        self.indexed: list[Path | None] = []

    def rank(self, persona: Persona, query: Query, limit: int) -> list[Any]:
        self.asked.append(limit)
        top = self.ids[:limit]
        return [(x, float(-i)) for i, x in enumerate(top)] if self.scored else top

    def index(self, persona: Persona) -> None:
        self.indexed.append(persona.workdir)


def _persona(ids: Sequence[str], workdir: Path | None = None) -> Persona:
    return Persona("key", tuple(ids), tuple("" for _ in ids),
                   np.zeros((len(ids), 4), dtype=np.float32), list(ids),
                   lambda: Path("/nonexistent"), workdir=workdir)


def _query() -> Query:
    return Query("q1", "multi-session", "anything", "", None, ())


def test_rrf_matches_a_fusion_worked_by_hand() -> None:
    a = Fixed("a", ["s1", "s2", "s3"])
    b = Fixed("b", ["s3", "s1", "s4"], scored=True)  # (id, score) pairs are read as ids
    fused = RRF([a, b])  # k = 60
    got = fused.rank(_persona(["s1", "s2", "s3", "s4"]), _query(), 3)
    # s1: 1/61 + 1/62; s3: 1/63 + 1/61; s2: 1/62; s4: 1/63
    sums = {"s1": Fraction(1, 61) + Fraction(1, 62), "s3": Fraction(1, 63) + Fraction(1, 61),
            "s2": Fraction(1, 62), "s4": Fraction(1, 63)}
    assert got == ["s1", "s3", "s2"]
    assert fused.last_scores is not None
    assert [i for i, _ in fused.last_scores] == ["s1", "s3", "s2", "s4"]
    for mem_id, score in fused.last_scores:
        assert score == pytest.approx(float(sums[mem_id]), abs=1e-15)
    assert fused.name == "rrf-a-b"
    assert fused.config == {"k": 60, "parts": ["a", "b"]}
    assert fused.last_facts is not None
    assert fused.last_facts["s3"] == {"ranks": "a 3, b 1"}
    assert fused.last_facts["s4"] == {"ranks": "a -, b 3"}
    assert fused.last_components == {"a": ["s1", "s2", "s3"], "b": ["s3", "s1", "s4"]}


def test_equal_sums_break_by_id_bytes_and_k_is_the_constant() -> None:
    # "B" (0x42) sorts before "a" (0x61) byte-wise; each sums 1/(k+1) + 1/(k+2).
    fused = RRF([Fixed("x", ["a", "B"]), Fixed("y", ["B", "a"])], k=1, name="mine")
    assert fused.rank(_persona(["a", "B"]), _query(), 2) == ["B", "a"]
    assert fused.last_scores == [("B", 1 / 2 + 1 / 3), ("a", 1 / 2 + 1 / 3)]
    assert fused.name == "mine"


@pytest.mark.parametrize(("limit", "pool"), [(1, 50), (5, 50), (7, 70), (10, 100),
                                             (2000, 10_000), (20_000, 10_000)])
def test_each_part_is_asked_for_vipunes_candidate_pool(limit: int, pool: int) -> None:
    a, b = Fixed("a", ["s1"]), Fixed("b", ["s1"])
    RRF([a, b]).rank(_persona(["s1"]), _query(), limit)
    assert a.asked == b.asked == [pool]


def test_parts_index_in_folders_of_their_own_and_report_their_times(tmp_path: Path) -> None:
    a, b = Fixed("a", ["s1"]), Fixed("a", ["s1"])  # the same name twice: told apart
    fused = RRF([a, b])
    assert fused.labels == ("a", "a#2")
    persona = _persona(["s1"], workdir=tmp_path / "w")
    fused.index(persona)
    fused.rank(persona, _query(), 1)
    assert [p.name if p else None for p in a.indexed + b.indexed] == ["part1-a", "part2-a"]
    assert all(p is not None and p.is_dir() for p in a.indexed + b.indexed)
    times = part_times(fused)
    assert times is not None and set(times) == {"a", "a#2"}
    assert set(times["a"]) == {"ingest", "retrieval"} and times["a"]["retrieval"] >= 0.0
    assert part_times(fused) is None  # taken: nothing spent since
    assert part_times(r.SemanticRetriever()) is None


def test_a_fusion_of_parts_without_index_has_no_index() -> None:
    class Plain:
        name = "plain"

        def rank(self, persona: Persona, query: Query, limit: int) -> list[str]:
            return list(persona.session_ids)[:limit]

    fused = RRF([Plain(), "semantic"])
    assert getattr(fused, "index", None) is None
    assert fused.needs_vectors and not fused.needs_store
    assert RRF(["semantic", "fts"]).needs_store


def test_rrf_of_semantic_and_fts_at_k25_ranks_as_hybrid(tmp_path: Path) -> None:
    persona = make_persona(tmp_path)
    hybrid = r.HybridRetriever()
    fused = RRF(["semantic", "fts"], k=25)
    rng = np.random.default_rng(3)
    questions = ["garden budget", "cat Miso", "road bike model", "sourdough bread starter",
                 "report Friday", "sister June visit"]
    for i, question in enumerate(questions):
        qvec = persona.vectors[i] + 0.3 * rng.standard_normal(persona.vectors.shape[1])
        query = make_query(question, qvec.astype(np.float32))
        for limit in (1, 3, 5, 8):
            assert fused.rank(persona, query, limit) == hybrid.rank(persona, query, limit)
            assert list(fused.last_scores) == list(hybrid.last_scores)


@pytest.mark.parametrize(("args", "message"), [
    (("bm25",), "list of retrievers or selectors"),
    ((["bm25"],), "two retrievers or more"),
    ((["bm25", 3],), "neither a retriever"),
    ((["bm25", "fts"], 0), "k 0 must be a whole number"),
    ((["bm25", "custom"],), "'custom' is not a store"),
    ((["bm25", "nope"],), "retriever 'nope' is unknown"),
])
def test_bad_parts_are_one_line(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(RetrievalEvalError, match=message) as caught:
        RRF(*args)
    assert "\n" not in str(caught.value)


def test_dotted_and_cmd_selectors_are_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    import shlex
    import sys

    from tests.support import ROOT

    (tmp_path / "partmod.py").write_text(
        "class Rev:\n"
        "    name = 'rev'\n"
        "    built = 0\n"
        "    def __init__(self, shift=0):\n"
        "        Rev.built += 1\n"
        "        self.config = {'shift': shift}\n"
        "    def rank(self, persona, query, limit):\n"
        "        return list(reversed(persona.session_ids))[:limit]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = ROOT / "tests" / "support" / "fake_store.py"
    command = f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(fake))} ok"
    fused = RRF(["partmod:Rev+shift:2", command], k=10)
    import partmod  # type: ignore[import-not-found]

    assert partmod.Rev.built == 0  # a dotted part is built where it first ranks
    assert fused.labels == ("rev+shift:2", command)
    persona = make_persona(tmp_path)
    query = make_query("garden budget", persona.vectors[1])
    try:
        fused.index(persona)
        got = fused.rank(persona, query, 3)
        ids = list(persona.session_ids)
        # rev: reversed order; the fake store: store order; k = 10
        sums = {x: 1 / (10 + ids[::-1].index(x) + 1) + 1 / (10 + ids.index(x) + 1)
                for x in ids}
        assert got == sorted(ids, key=lambda x: (-sums[x], x))[:3]
        assert partmod.Rev.built == 1
        assert fused.config == {"k": 10, "parts": ["rev+shift:2", "fake-ok"],  # hello's name
                                "part_config": {"rev+shift:2": {"shift": 2}}}
    finally:
        fused.close()


def test_a_parts_failure_names_the_part() -> None:
    class Broken:
        name = "broken"

        def rank(self, persona: Persona, query: Query, limit: int) -> Any:
            return None

    fused = RRF([Fixed("a", ["s1"]), Broken()])
    with pytest.raises(RetrievalEvalError, match="rrf-a-broken part broken: question q1: "
                                                  "rank returned None"):
        fused.rank(_persona(["s1"]), _query(), 1)
    assert part_times(fused) is not None  # a's time: the harness drops it before the next


def _nested(levels: int) -> RRF:
    fused = RRF([Fixed("a", ["s1", "s2"]), Fixed("b", ["s2", "s1"])])
    for _ in range(levels - 1):
        fused = RRF([fused, Fixed("c", ["s1"])])
    return fused


def test_rrf_nests_at_most_eight_levels_and_says_so(tmp_path: Path) -> None:
    """Issue 43.14: RRF nested 1000 deep ended in ``OSError: File name too long`` (each
    level's part folder inside the last). Eight levels index and rank; a ninth is one line
    before anything runs."""
    deepest = _nested(8)
    persona = _persona(["s1", "s2"], workdir=tmp_path)
    deepest.index(persona)
    assert deepest.rank(persona, _query(), 2) == ["s1", "s2"]
    with pytest.raises(RetrievalEvalError) as caught:
        RRF([deepest, Fixed("d", ["s1"])])
    assert str(caught.value) == (
        "RRF nests 9 levels deep (an RRF among an RRF's parts is one level more); RRF may "
        "nest at most 8 levels: fuse the inner stores in one RRF, e.g. RRF(['semantic', "
        "'bm25', 'fts'])")


def test_rrfs_record_of_its_parts_never_trips_the_config_limits() -> None:
    """Issue 43.15: five levels of RRF said "give config as a small mapping", about a config
    the user never wrote: the record (k, the parts, each part's own config) is the plugin's.
    A part's own config is still held to the limits."""
    from pytest_retrieval_eval.retrievers.store_config import read_config

    class Configured(Fixed):
        def __init__(self, name: str, ids: Sequence[str]) -> None:
            super().__init__(name, ids)
            self.config = {"ef": 64, "model": "m" * 1500}

    fused = RRF([Configured("a", ["s1"]), Fixed("b", ["s1"])])
    for _ in range(4):
        fused = RRF([fused, Configured("c", ["s1"])])
    got = read_config(fused)
    assert got is not None and got["k"] == 60 and len(got["parts"]) == 2
    too_big = Configured("big", ["s1"])
    too_big.config = {"ef": 64, "model": "m" * 3000}
    with pytest.raises(RetrievalEvalError, match="retriever 'big': config is 3020 bytes"):
        read_config(RRF([too_big, Fixed("b", ["s1"])]))


def test_a_configs_integer_past_64_bits_is_one_line() -> None:
    """Issue 43.14: a config holding a 4500-digit int raised ValueError from json.dumps
    (Python's int-to-text limit), a traceback."""
    from pytest_retrieval_eval.retrievers.store_config import read_config

    store = Fixed("big", ["s1"])
    store.config = {"seed": 10 ** 4500}  # type: ignore[attr-defined]
    with pytest.raises(RetrievalEvalError) as caught:
        read_config(store)
    assert str(caught.value).startswith(
        "retriever 'big': config['seed'] is an integer of 14,949 bits, past 64 bits; record "
        "it as a string; give config as a small mapping")
