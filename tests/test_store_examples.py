"""The real-store examples of docs/your-store.md (examples/stores/python: faiss-cpu and
sqlite-vec) on the bundled sample: each ranks every pair exactly as the built-in ``semantic``
does, ingests once per history through ``index``, and reuses its saved index on the next run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.plugin_runs import run_with_report

pytest.importorskip("faiss")  # the [stores] extra (part of [test]): CI always has them
pytest.importorskip("sqlite_vec")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "stores" / "python"
STORES = ("faiss-flat", "sqlite-vec")


@pytest.fixture
def store_project(pytester: pytest.Pytester, isolated_cache: Path) -> pytest.Pytester:
    for name in ("faiss_store.py", "sqlite_vec_store.py", "pytest.ini"):
        shutil.copy(EXAMPLES / name, pytester.path / name)
    return pytester


def test_each_store_ranks_every_pair_as_semantic(store_project: pytest.Pytester,
                                                 isolated_cache: Path) -> None:
    _, report = run_with_report(store_project, "-p", "no:randomly")
    assert report["retrievers"] == ["semantic", *STORES]  # columns named by the stores' names
    by_pair: dict[str, dict[str, list[str]]] = {}
    for pair in report["pairs"]:
        by_pair.setdefault(pair["question_id"], {})[pair["retriever"]] = pair["ranked"]
    assert len(by_pair) == 15 and all(len(r) == 3 for r in by_pair.values())
    for question, ranked in by_pair.items():
        for store in STORES:
            assert ranked[store] == ranked["semantic"], (question, store)
    for store in STORES:
        assert report["summary"][store] == report["summary"]["semantic"]
        assert report["timing"][store]["ingest"]["personas"] > 0
    # Each history's index was saved in its own folder under the cache, and is read back.
    saved = sorted(isolated_cache.glob("workdirs/*/*/*"))
    assert {p.name for p in saved} == {"flat.faiss", "memories.sqlite"}
    stamps = {p: p.stat().st_mtime_ns for p in saved}
    _, again = run_with_report(store_project, "-p", "no:randomly")
    assert {p: p.stat().st_mtime_ns for p in saved} == stamps  # reused, not rebuilt
    assert again["summary"] == report["summary"]
