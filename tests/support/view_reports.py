"""The reports the HTML view's tests show, made by real runs of the plugin (in a child
process, each in a folder of its own, with a cache of its own):

* :func:`sample_report`: the bundled sample, the retrievers of examples/vipune, budgets;
* :func:`generated_report`: 75 generated questions, four retrievers (bm25, fts and two
  memory stores: a turn store and a store of extracted facts), budgets;
* :func:`hostile_report`: a hand-made dataset whose ids, types and texts hold markup,
  ``javascript:`` links and U+2028 (:data:`HOSTILE`), ranked by bm25 and a turn store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.processes import CHILD_ADDOPTS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_MEMORIES = ROOT / "examples" / "memories"

#: Strings a hostile dataset puts where the page shows ids, types and texts: each would run
#: a script or load something if it were ever parsed as HTML (``__pwned`` set, a dialog, an
#: image request).
HOSTILE = {
    "script": "<script>window.__pwned=1;alert(1)</script>",
    "close": "</script><script>window.__pwned=2</script><!--",
    "img": '<img src=x onerror="window.__pwned=3;alert(3)">',
    "link": "javascript:window.__pwned=4",
    "separators": "line\u2028separator\u2029paragraph",
}


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"RETRIEVAL_EVAL_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1",
                "HF_HOME": str(cache.parent / "hf-empty"),
                "PYTHONPATH": os.pathsep.join([str(ROOT), str(EXAMPLE_MEMORIES),
                                               env.get("PYTHONPATH", "")]).rstrip(os.pathsep)})
    env.pop("GITHUB_STEP_SUMMARY", None)
    env["PYTEST_ADDOPTS"] = CHILD_ADDOPTS
    return env


def run_plugin(folder: Path, *args: str, html: bool = False) -> Path:
    """``pytest --retrieval-eval --no-model ARGS`` in ``folder`` (a child process; exit 0
    asserted); the JSON report's path (and the HTML view beside it, ``html``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    out = folder / "report.json"
    extra = [f"--retrieval-eval-html={folder / 'report.html'}"] if html else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-p", "no:xdist", "--retrieval-eval", "--no-model", f"--retrieval-eval-json={out}",
         *extra, *args],
        cwd=folder, env=_env(folder / "cache"), capture_output=True, text=True, timeout=300,
        check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def write_json(path: Path, report: dict[str, Any]) -> Path:
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def sample_report(folder: Path, html: bool = False) -> Path:
    return run_plugin(folder, "--retrieval-eval-budget=500,2000", "--retrieval-eval-retriever",
                      "hybrid,semantic,fts,bm25,oracle,semantic+unit:turn", html=html)


def generated_report(folder: Path) -> Path:
    """75 generated questions (90 instances, abstentions left out), four retrievers."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "generated.json"
    from pytest_retrieval_eval.cli import main

    assert main(["generate", "--instances", "90", "--sessions", "12", "--no-progress",
                 str(data)]) == 0
    return run_plugin(folder, f"--retrieval-eval-data={data}",
                      "--retrieval-eval-budget=300,1000", "--retrieval-eval-retriever",
                      "bm25,fts,tests.support.memory_store:TurnStore,facts_store:FactStore")


def hostile_instances() -> list[dict[str, Any]]:
    from tests.support.lme_factory import make_instance, make_turns

    out = []
    for i, (key, text) in enumerate(HOSTILE.items()):
        turns = make_turns(f"{text} topic", n=2, evidence=True)
        sessions = [turns, make_turns("weather", n=2), make_turns(f"{text} other", n=2)]
        ids = [f"{text}_s{i}_{n}" for n in range(3)]
        out.append(make_instance(
            f"{text}#{i}", question_type="single-session-user", n_sessions=3, gold=(0,),
            question=f"What did I say about {text} topic? ({key})",
            haystack_session_ids=ids, haystack_sessions=sessions,
            answer_session_ids=[ids[0]]))
    return out


def hostile_report(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "hostile.json"
    data.write_text(json.dumps(hostile_instances(), indent=1), encoding="utf-8")
    return run_plugin(folder, f"--retrieval-eval-data={data}",
                      "--retrieval-eval-budget=40", "--retrieval-eval-k=1,3",
                      "--retrieval-eval-retriever",
                      "bm25,tests.support.memory_store:TurnStore")
