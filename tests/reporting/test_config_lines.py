"""The stores' configs in words (reporting/config_lines.py): bounded on the terminal, per lane
in compare, the runs' only recorded difference said only when data, lane, model and protocol
agree."""

from __future__ import annotations

from typing import Any

from pytest_retrieval_eval.reporting.config_lines import (
    SHOWN,
    collect,
    compare_config_lines,
    config_changes,
    config_text,
    retrievers_text,
)


def test_a_config_in_words_is_bounded() -> None:
    assert config_text({"ef": 64, "metric": "cosine", "sizes": [1, 2], "x": None}) == \
        "ef:64, metric:cosine, sizes:[1,2], x:null"
    long = config_text({"model": "m" * 200})
    assert len(long) == SHOWN and long.endswith("…")
    assert config_text({"k": "a\nb"}) == "k:a\\nb"  # one line
    assert retrievers_text(["hybrid", "faiss"], {"faiss": {"ef": 8}}) == "hybrid, faiss [ef:8]"
    assert retrievers_text(["hybrid"], None) == "hybrid"


def test_collect_keeps_one_config_per_retriever_and_drops_it_from_the_pairs() -> None:
    results: list[dict[str, Any]] = [{"retriever": "a", "config": {"x": 1}, "index": 0},
                                     {"retriever": "a", "config": {"x": 1}, "index": 1},
                                     {"retriever": "b", "index": 0}]
    configs, out = collect(results)
    assert configs == {"a": {"x": 1}}
    assert [r.get("config") for r in out] == [None, None, None]
    assert results[0]["config"] == {"x": 1}  # the results themselves are left as they were


def _cmp(kind: str, changes: dict[str, Any], **new: Any) -> dict[str, Any]:
    side = {"sha256": "s", "lane": "model-free", "model": None, "protocol": "vipune"}
    return {"kind": kind, "base": side, "new": {**side, **new}, "config": changes}


def test_compare_words_each_lane_and_the_only_difference() -> None:
    base = {"config": {"faiss": {"ef": 10}, "same": {"m": 1}}}
    new = {"config": {"faiss": {"ef": 64}, "same": {"m": 1}}}
    changes = config_changes(base, new, [("faiss", "faiss", "faiss"), ("same", "same", "same"),
                                         ("bm25", "bm25", "bm25")])
    assert changes == {"faiss": {"base": {"ef": 10}, "new": {"ef": 64}, "same": False},
                       "same": {"base": {"m": 1}, "new": {"m": 1}, "same": True}}
    assert compare_config_lines(_cmp("reports", changes)) == [
        "config faiss differs: base ef:10 -> new ef:64",
        "config same: m:1 (both)",
        "the runs' only recorded difference is the config of faiss (same data, lane, model "
        "and protocol)"]
    # another model, or two retrievers of one report: the configs only
    assert len(compare_config_lines(_cmp("reports", changes, model="other"))) == 2
    assert len(compare_config_lines(_cmp("retrievers", changes))) == 2
    assert compare_config_lines(_cmp("reports", {})) == []
    assert config_changes({"config": None}, new, [("x", "x", "x")]) == {}
