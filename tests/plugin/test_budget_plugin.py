"""--retrieval-eval-budget through pytest (pytester): recall@<B>tok and tokens@k of a
hand-made history ranked by a hand-made TREC run, every number worked out by hand from the
tokenizer's own counts (tiktoken's encoder on the same ranks); the header, the JSON, the
budget table; the option's bad values and combinations; a run without a budget imports no
tokenizer."""

from __future__ import annotations

import functools
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.data.pairs import render_session
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.reliability_support import joined_errors, match_errors

pytestmark = [pytest.mark.usefixtures("isolated_cache"),
              pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")]

#: Four sessions of very different lengths; the run ranks s2, s0, s3, s1; gold is s0 and s1.
SESSIONS = [
    [{"role": "user", "content": "I moved to Lisbon in spring.", "has_answer": True},
     {"role": "assistant", "content": "How exciting!"}],
    [{"role": "user", "content": "My cat is called Miso.", "has_answer": True}],
    [{"role": "user", "content": "What should I cook tonight?"},
     {"role": "assistant", "content": "Try a risotto with mushrooms and thyme."}],
    [{"role": "user", "content": " ".join(["We talked about the weather a lot."] * 40)}],
]
ORDER = [2, 0, 3, 1]


@functools.cache
def _o200k_counts() -> tuple[int, ...]:
    """tiktoken's own count of o200k_base, on the rank file bpe-openai ships, of each
    session's text as the store holds it; worked out once a test process (building the
    encoder reads the whole rank file: seconds)."""
    import tiktoken
    from bpe_openai import registry

    spec = registry.o200k_base()
    enc = tiktoken.Encoding(name="o200k_base", pat_str=spec["pat_str"],
                            mergeable_ranks=spec["mergeable_ranks"],
                            special_tokens=spec["special_tokens"])
    return tuple(len(enc.encode_ordinary(render_session(turns))) for turns in SESSIONS)


def _history(tmp: Path) -> tuple[Path, Path, list[int]]:
    raw = make_instance("q1", n_sessions=4, gold=(0, 1))
    raw["haystack_sessions"] = SESSIONS
    raw["answer_session_ids"] = ["q1_s0", "q1_s1"]
    data = write_dataset(tmp / "lme.json", [raw])
    run = tmp / "hand.run"
    run.write_text("".join(f"q1 Q0 q1_s{s} {i + 1} {10 - i} hand\n"
                           for i, s in enumerate(ORDER)), encoding="utf-8")
    return data, run, list(_o200k_counts())


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:randomly", "-W",
                              "ignore::pytest.PytestAssertRewriteWarning", "--retrieval-eval",
                              "--no-model", *args)


def test_budget_numbers_by_hand(pytester: pytest.Pytester, tmp_path: Path) -> None:
    data, run, c = _history(tmp_path)
    c2, c0, c3, c1 = (c[i] for i in ORDER)
    assert c3 > c1 + 100  # s3 is long, s1 short: the prefix rule matters below
    budgets = {
        c2 - 1: 0.0,              # the first memory does not fit: an empty context
        c2 + c0: 0.5,             # s2, s0: gold s0
        c2 + c0 + c1: 0.5,        # s3 does not fit and ends the context: s1 never taken
        c2 + c0 + c3 + c1: 1.0,   # every memory: the ranking ran out, not the budget
    }
    out = tmp_path / "r.json"
    result = _run(pytester, f"--retrieval-eval-data={data}",
                  f"--retrieval-eval-retriever=run:{run}", "--retrieval-eval-k=1,2,5",
                  f"--retrieval-eval-json={out}", "--retrieval-eval-tables=recall,budget",
                  "--retrieval-eval-budget=" + ",".join(map(str, budgets)))
    assert result.ret == 0, result.stdout.str()
    report: dict[str, Any] = json.loads(out.read_text())
    metrics = report["pairs"][0]["metrics"]
    for budget, want in budgets.items():
        assert metrics[f"recall@{budget}tok"] == want, budget
    assert metrics["tokens@1"] == c2
    assert metrics["tokens@2"] == c2 + c0
    assert metrics["tokens@5"] == c2 + c0 + c3 + c1  # 4 sessions: all of them
    pair_budget = report["pairs"][0]["budget"]
    assert pair_budget["tokens"] == [c2, c0, c3, c1]
    assert pair_budget["fit"] == {str(b): n for b, n in zip(budgets, [0, 2, 2, 4], strict=True)}
    assert report["budget"]["budgets"] == sorted(budgets)
    assert report["budget"]["tokenizer"]["name"] == "o200k_base"
    assert report["budget"]["tokenizer"]["library"] == "bpe-openai"
    assert report["budget"]["ended_by_ranking"] == {
        "hand": {str(b): int(b == c2 + c0 + c3 + c1) for b in sorted(budgets)}}
    text = result.stdout.str()
    assert re.search(r"budget [\d,]+ tokens of o200k_base", text)  # pytest's header
    assert "tokens of o200k_base (bpe-openai" in text  # the summary's header
    # The budget table's overall rows are the JSON summary's values.
    overall = report["summary"]["hand"]["overall"]
    row = [line for line in text.splitlines() if line.startswith("overall")]
    recall_cells = [f"{overall[f'recall@{b}tok']:.3f}" for b in sorted(budgets)]
    token_cells = [f"{overall[f'tokens@{k}']:.0f}" for k in (1, 2, 5)]
    assert any(line.split()[2:] == recall_cells for line in row), row
    assert any(line.split()[2:] == token_cells for line in row), row
    assert "R@" in text and "tokens@1" in text


def test_counts_are_cached_across_runs(pytester: pytest.Pytester, tmp_path: Path,
                                       isolated_cache: Path) -> None:
    data, run, _ = _history(tmp_path)
    args = (f"--retrieval-eval-data={data}", f"--retrieval-eval-retriever=run:{run}",
            "--retrieval-eval-budget=100")
    assert _run(pytester, *args).ret == 0
    shards = list((isolated_cache / "tokens").glob("*/counts-*.json"))
    assert len(shards) == 1
    held = json.loads(shards[0].read_text())
    assert held["tokenizer"]["name"] == "o200k_base" and len(held["counts"]) == 4
    assert _run(pytester, *args).ret == 0
    assert list((isolated_cache / "tokens").glob("*/counts-*.json")) == shards  # none new


def test_ini_twins_and_a_tokenizer_json(pytester: pytest.Pytester, tmp_path: Path) -> None:
    from tests.support.model_factory import build_wordpiece_tokenizer

    data, run, _ = _history(tmp_path)
    build_wordpiece_tokenizer(pytester.path / "tok" / "tokenizer.json")
    pytester.makeini(textwrap.dedent("""\
        [pytest]
        retrieval_eval_budget = 50,20
        retrieval_eval_budget_tokenizer = tok/tokenizer.json
    """))
    out = tmp_path / "r.json"
    result = _run(pytester, f"--retrieval-eval-data={data}",
                  f"--retrieval-eval-retriever=run:{run}", f"--retrieval-eval-json={out}")
    assert result.ret == 0, result.stdout.str()
    report = json.loads(out.read_text())
    assert report["budget"]["budgets"] == [20, 50]
    assert report["budget"]["tokenizer"]["library"] == "tokenizers"
    assert report["budget"]["tokenizer"]["name"] == str(pytester.path / "tok" / "tokenizer.json")
    assert {"recall@20tok", "recall@50tok", "tokens@10"} <= set(report["pairs"][0]["metrics"])


@pytest.mark.parametrize(("args", "line"), [
    (["--retrieval-eval-budget=abc"],
     "ERROR: --retrieval-eval-budget: budget 'abc' is not a whole number of tokens*"),
    (["--retrieval-eval-budget=0"], "ERROR: --retrieval-eval-budget: budget 0 is out of range*"),
    (["--retrieval-eval-budget=,"], "ERROR: --retrieval-eval-budget: budget list ',' is empty*"),
    (["--retrieval-eval-budget-tokenizer=cl100k_base"],
     "ERROR: --retrieval-eval-budget-tokenizer names the tokenizer a context budget counts in, "
     "but no budget is given; add --retrieval-eval-budget=*"),
    (["--retrieval-eval-budget=500", "--retrieval-eval-budget-tokenizer=o200k"],
     "ERROR: --retrieval-eval-budget-tokenizer o200k: no such file; give o200k_base, "
     "cl100k_base or the path of a tokenizer.json"),
])
def test_bad_values_are_one_line(pytester: pytest.Pytester, tmp_path: Path,
                                 args: list[str], line: str) -> None:
    data, run, _ = _history(tmp_path)
    result = _run(pytester, f"--retrieval-eval-data={data}",
                  f"--retrieval-eval-retriever=run:{run}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(), [line])
    assert len([x for x in joined_errors(result.stderr.str()) if x.strip()]) == 1, (
        result.stderr.str())


def test_the_ini_twin_refuses_a_bad_value(pytester: pytest.Pytester, tmp_path: Path) -> None:
    data, run, _ = _history(tmp_path)
    pytester.makeini("[pytest]\nretrieval_eval_budget = 10,x\n")
    result = _run(pytester, f"--retrieval-eval-data={data}",
                  f"--retrieval-eval-retriever=run:{run}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    match_errors(result.stderr.str(),
                 ["ERROR: ini option retrieval_eval_budget: budget 'x' is not*"])


NO_TOKENIZER = """
import sys

def pytest_unconfigure(config):
    loaded = [m for m in ("bpe_openai._bindings", "pytest_retrieval_eval.vectors.token_counts",
                          "pytest_retrieval_eval.retrievers.memory_tokens") if m in sys.modules]
    print("LOADED:", loaded)
"""


def test_a_run_without_a_budget_loads_no_tokenizer(pytester: pytest.Pytester,
                                                   tmp_path: Path) -> None:
    data, run, _ = _history(tmp_path)
    pytester.makeconftest(NO_TOKENIZER)
    out = tmp_path / "r.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-s", "--retrieval-eval", "--no-model",
        f"--retrieval-eval-data={data}", f"--retrieval-eval-retriever=run:{run}",
        f"--retrieval-eval-json={out}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["LOADED: []"])
    report = json.loads(out.read_text())
    assert "budget" not in report and "budget" not in report["pairs"][0]
    assert not any(k.startswith("tokens@") or k.endswith("tok")
                   for k in report["pairs"][0]["metrics"])


def test_a_warm_budget_run_loads_no_tokenizer(pytester: pytest.Pytester,
                                              tmp_path: Path, isolated_cache: Path) -> None:
    """The tokenizer is built at the first missing count: the first budget run loads
    bpe-openai and counts; the next, every count cached, never imports it (its rank file
    alone is about 0.6 s of CPU a run) and scores the same."""
    data, run, _ = _history(tmp_path)
    pytester.makeconftest(NO_TOKENIZER)
    reports, loaded = [], []
    for n in range(2):
        out = tmp_path / f"r{n}.json"
        result = pytester.runpytest_subprocess(
            "-p", "no:randomly", "-s", "--retrieval-eval", "--no-model",
            f"--retrieval-eval-data={data}", f"--retrieval-eval-retriever=run:{run}",
            "--retrieval-eval-budget=20,100000", f"--retrieval-eval-json={out}")
        assert result.ret == 0, result.stdout.str()
        line = next(x for x in result.stdout.lines if x.startswith("LOADED:"))
        loaded.append(line)
        reports.append(json.loads(out.read_text()))
    assert "'bpe_openai._bindings'" in loaded[0] and "'bpe_openai" not in loaded[1], loaded
    assert list((isolated_cache / "tokens").iterdir())  # the counts the first run kept
    cold, warm = reports
    assert cold["budget"] == warm["budget"]
    assert cold["pairs"][0]["metrics"] == warm["pairs"][0]["metrics"]
    assert cold["pairs"][0]["budget"] == warm["pairs"][0]["budget"]
    assert cold["summary"] == warm["summary"]


def test_toml_list_and_xdist_equal_serial(pytester: pytest.Pytester, tmp_path: Path,
                                          isolated_cache: Path) -> None:
    data, run, c = _history(tmp_path)
    pytester.makefile(".toml", pytest=textwrap.dedent(f"""\
        [pytest]
        retrieval_eval_budget = [{c[2]}, 100000]
    """))
    reports = []
    for extra in ((), ("-n", "2")):
        out = tmp_path / f"r{len(reports)}.json"
        result = _run(pytester, f"--retrieval-eval-data={data}",
                      f"--retrieval-eval-retriever=run:{run}", f"--retrieval-eval-json={out}",
                      *extra)
        assert result.ret == 0, result.stdout.str()
        reports.append(json.loads(out.read_text()))
    serial, parallel = reports
    assert serial["budget"]["budgets"] == [c[2], 100000]
    assert serial["pairs"][0]["metrics"] == parallel["pairs"][0]["metrics"]
    assert serial["pairs"][0]["metrics"][f"recall@{c[2]}tok"] == 0.0  # s2 alone: no gold
    assert serial["summary"] == parallel["summary"]


def test_a_listing_run_counts_nothing_into_the_cache(pytester: pytest.Pytester,
                                                     tmp_path: Path,
                                                     isolated_cache: Path) -> None:
    data, run, _ = _history(tmp_path)
    result = _run(pytester, f"--retrieval-eval-data={data}",
                  f"--retrieval-eval-retriever=run:{run}", "--retrieval-eval-budget=100", "--co")
    assert result.ret == 0, result.stdout.str()
    assert not (isolated_cache / "tokens").exists()


def test_the_context_reads_on_past_k(pytester: pytest.Pytester, tmp_path: Path) -> None:
    # k = 1 reads one session; a budget of every session's tokens reads the store again, to
    # the history's size: the context holds all four, so recall is 1.0 (not s2's 0.0).
    data, run, c = _history(tmp_path)
    out = tmp_path / "r.json"
    result = _run(pytester, f"--retrieval-eval-data={data}",
                  f"--retrieval-eval-retriever=run:{run}", "--retrieval-eval-k=1",
                  f"--retrieval-eval-json={out}", f"--retrieval-eval-budget={sum(c)}")
    assert result.ret == 0, result.stdout.str()
    pair = json.loads(out.read_text())["pairs"][0]
    assert pair["ranked"] == ["q1_s2"] and pair["metrics"]["recall@1"] == 0.0
    assert pair["metrics"][f"recall@{sum(c)}tok"] == 1.0
    assert pair["metrics"]["tokens@1"] == c[2]
    assert pair["budget"]["read"] == 4 and pair["budget"]["reread"] is True
    assert pair["budget"]["ended"] == {str(sum(c)): "ranking"}
    assert pair["latency_ms"]["budget"] >= 0.0


LIMIT_STORE = '''
import json, sys
from pathlib import Path

personas = {}
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "hello":
        answer = {"name": "limits", "vectors": False}
    elif request["op"] == "index":
        personas[request["persona"]] = [s["id"] for s in request["sessions"]]
        answer = {"ok": True}
    else:
        ids = personas[request["persona"]]
        with Path("limits.txt").open("a") as log:
            log.write(f"{request['limit']} {len(ids)}\\n")
        answer = {"ids": ids[: request["limit"]]}
    sys.stdout.write(json.dumps(answer) + "\\n")
    sys.stdout.flush()
'''


def test_the_cmd_protocol_page_says_a_budget_asks_a_second_time(
        pytester: pytest.Pytester) -> None:
    """Issue 43.20: docs/cmd-protocol.md said "one rank request per item"; under a budget
    an item asks again, with the persona's size as the limit. The page says so, and a
    ``cmd:`` store sees exactly that: the largest k, then the persona's size."""
    import sys

    from tests.support import ROOT

    page = " ".join((ROOT / "docs" / "cmd-protocol.md").read_text(encoding="utf-8").split())
    assert "an item may ask **a second time**, with `limit` the persona's size" in page
    pytester.makepyfile(limit_store=LIMIT_STORE)
    result = _run(pytester, "--retrieval-eval-k=1", "--retrieval-eval-budget=10000000",
                  f"--retrieval-eval-retriever=cmd:{sys.executable} limit_store.py",
                  "-k", "2819ce0a")  # one pair of the bundled sample
    assert result.ret == 0, result.stdout.str()
    asked = (pytester.path / "limits.txt").read_text().split("\n")[:-1]
    size = asked[0].split()[1]
    assert asked == [f"1 {size}", f"{size} {size}"]


ITER_STORE = '''
class Store:
    """A store whose rank is an iterator: the first session, then the same session again
    and again before the rest (a read is bounded only for an iterator, issue 43.4)."""
    name = "iter"
    needs_vectors = False

    def rank(self, persona, query, limit):
        ids = list(persona.session_ids)
        yield ids[0]
        if limit > 1:
            yield from [ids[0]] * 1000
            yield from ids[1:]
'''


def test_the_budgets_longer_read_of_an_iterator_says_where_it_was_cut(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Issue 43.4: the budget's second read (to the persona's size) of an iterator stops at
    the read's bound like the first; the pair's ``read_cut`` says where, as for the first."""
    from pytest_retrieval_eval.retrievers.ranked_output import REPEATS_READ

    data, _, c = _history(tmp_path)
    pytester.makepyfile(iter_store_43=ITER_STORE)
    pytester.syspathinsert()
    out = tmp_path / "r.json"
    result = _run(pytester, f"--retrieval-eval-data={data}",
                  "--retrieval-eval-retriever=iter_store_43:Store", "--retrieval-eval-k=1",
                  f"--retrieval-eval-json={out}", f"--retrieval-eval-budget={sum(c)}")
    assert result.ret == 0, result.stdout.str()
    pair = json.loads(out.read_text())["pairs"][0]
    assert pair["budget"]["reread"] is True
    assert pair["read_cut"] == REPEATS_READ * 4  # the four sessions' bound
    assert "read cut: iter: 1 pair(s)" in " ".join(result.stdout.str().split())
