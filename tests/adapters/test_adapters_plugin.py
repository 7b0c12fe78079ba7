"""The memory libraries' adapters in a run (pytester), on a small generated set with the tiny
model: the issue's command runs offline (``--no-model``) after one model-lane run and prints
every column; ``-n 2`` gives the serial numbers, each persona indexed once; mem0+infer:true's
calls and tokens to the stand-in LLM appear in the JSON and the ``-v`` timing table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
from tests.support.adapter_personas import generated_instances
from tests.support.llm_standin import llm_standin

pytest.importorskip("mem0")
pytest.importorskip("llama_index.core")
pytest.importorskip("langchain_text_splitters")
pytestmark = pytest.mark.usefixtures("isolated_cache")

DONE_WHEN = "semantic,mem0,llamaindex+chunk_size:256,langchain"
COLUMNS = ("semantic", "mem0", "llamaindex+chunk_size:256", "langchain")


def _run(pytester: pytest.Pytester, data: Path, model: Path, out: Path, *args: str
         ) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider",
               "-W", "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval",
               f"--retrieval-eval-data={data}", f"--retrieval-eval-model={model}",
               f"--retrieval-eval-json={out}", "--retrieval-eval-budget", "500,2000", *args)


def _metrics(report: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(p["retriever"], p["question_id"]): (p["metrics"], p["ranked"])
            for p in report["pairs"]}


def test_the_issues_command_runs_offline_after_one_model_lane_run(
        pytester: pytest.Pytester, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    data = pytester.path / "small.json"
    data.write_text(json.dumps(generated_instances(2, sessions=8)))
    monkeypatch.setenv("OPENAI_API_KEY", "standin-key")
    with llm_standin() as (url, tally):
        lane = _run(pytester, data, tiny_model_dir, pytester.path / "lane.json",
                    "--retrieval-eval-retriever", f"{DONE_WHEN},mem0+infer:true",
                    f"--retrieval-eval-llm-base-url={url}",
                    "--retrieval-eval-llm=openai:standin", "-v")
    assert lane.ret == 0, lane.stdout.str()
    report = json.loads((pytester.path / "lane.json").read_text())
    llm = report["timing"]["mem0+infer:true"]["llm"]
    assert (llm["calls"], llm["prompt_tokens"], llm["completion_tokens"], llm["personas"]) == (
        tally.calls, tally.prompt_tokens, tally.completion_tokens, 2)
    assert tally.calls > 0
    timing = " ".join(lane.stdout.str().split())  # the -v timing line, unwrapped
    assert (f"(approx.); LLM {tally.calls} calls, {tally.prompt_tokens:,} prompt + "
            f"{tally.completion_tokens:,} completion tokens in ingest") in timing
    per_pair = [p["footprint"]["llm"]["calls"] for p in report["pairs"]
                if p["retriever"] == "mem0+infer:true"]
    assert sum(per_pair) == tally.calls  # per persona, in each pair's footprint

    offline = _run(pytester, data, tiny_model_dir, pytester.path / "offline.json",
                   "--no-model", "--retrieval-eval-retriever", DONE_WHEN, "-v")
    assert offline.ret == 0, offline.stdout.str()
    text = offline.stdout.str()
    assert "lane: model-free" in text
    for column in COLUMNS:
        assert text.count(column) >= 3, column  # header, recall table, budget table
    offline.stdout.fnmatch_lines(["recall@k*", "memory_recall@k*", "turn_recall@k*", "recall@B*",
                                  "question type * @500tok  @2000tok*"])
    again = json.loads((pytester.path / "offline.json").read_text())
    lane_numbers = _metrics(report)
    assert {k: v for k, v in _metrics(again).items()} == {
        k: v for k, v in lane_numbers.items() if k[0] in COLUMNS}

    parallel = _run(pytester, data, tiny_model_dir, pytester.path / "parallel.json",
                    "--no-model", "--retrieval-eval-retriever", DONE_WHEN, "-n", "2")
    assert parallel.ret == 0, parallel.stdout.str()
    split = json.loads((pytester.path / "parallel.json").read_text())
    assert _metrics(split) == _metrics(again)
    for column in COLUMNS[1:]:  # index: once per persona (each pair its own persona)
        assert split["timing"][column]["ingest"]["personas"] == 2
        assert again["timing"][column]["ingest"]["personas"] == 2
