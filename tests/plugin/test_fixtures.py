"""The public fixtures in a user's own tests, through pytester: parametrization and ids, the
store, vectors and query vector (checked against the built-in retrievers' scores), recorded
rankings in the summary (serial and xdist), errors, and the bundled TF-IDF example."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

import pytest_retrieval_eval.run.session  # noqa: F401  (loaded once: in-process runs reuse numpy)
import tests.support.preload  # noqa: F401  (the plugin's modules, once: runs reuse them)
from pytest_retrieval_eval.data.generator.instances import SAMPLE, iter_instances
from tests.support import ROOT

USABLE = [i for i in iter_instances(SAMPLE) if not i["question_id"].endswith("_abs")]
EXAMPLE = ROOT / "examples" / "tfidf"

pytestmark = pytest.mark.usefixtures("isolated_cache")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning", *args)


def report_of(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = pytester.path / "report.json"
    result = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-json", str(out),
                 *args)
    assert result.ret == 0, result.stdout.str()
    return result, json.loads(out.read_text())


USER_TESTS = textwrap.dedent('''
    import sqlite3

    import numpy as np

    from pytest_retrieval_eval.vipune import store


    def test_oracle_by_hand(retrieval_eval_pair, retrieval_eval_record):
        pair = retrieval_eval_pair
        gold = [g for g in pair.gold if g in pair.session_ids]
        rest = [s for s in pair.session_ids if s not in gold]
        result = retrieval_eval_record(gold + rest)
        assert result["retriever"] == "test_oracle_by_hand"


    def test_cosine_by_hand(retrieval_eval_pair, retrieval_eval_vectors,
                            retrieval_eval_query_vector, retrieval_eval_record):
        ids, vectors = retrieval_eval_vectors
        assert ids == retrieval_eval_pair.session_ids
        v = vectors.astype(np.float64)
        q = np.asarray(retrieval_eval_query_vector, dtype=np.float64)
        sims = v @ q / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))
        retrieval_eval_record([ids[i] for i in np.argsort(-sims, kind="stable")])


    def test_store_holds_the_pair(retrieval_eval_pair, retrieval_eval_store,
                                  retrieval_eval_corpus):
        assert store.store_ids(retrieval_eval_store) == retrieval_eval_pair.session_ids
        db = sqlite3.connect(f"file:{retrieval_eval_store}?mode=ro", uri=True)
        texts = dict(db.execute("SELECT id, content FROM memories"))
        db.close()
        keys = list(retrieval_eval_pair.text_keys)
        assert [texts[s] for s in retrieval_eval_pair.session_ids] == (
            retrieval_eval_corpus.texts(keys))
''')


def test_recorded_rankings_score_as_the_builtin_retrievers_serially_and_under_xdist(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result, report = report_of(pytester, "--retrieval-eval-retriever", "oracle,semantic")
    n = len(USABLE)
    result.assert_outcomes(passed=2 * n + 3 * n)
    summary = report["summary"]
    assert report["retrievers"] == ["oracle", "semantic", "test_oracle_by_hand",
                                    "test_cosine_by_hand"]
    assert summary["test_oracle_by_hand"] == summary["oracle"]
    assert summary["test_cosine_by_hand"] == summary["semantic"]
    assert "test_store_holds_the_pair" not in summary  # it recorded nothing
    result.stdout.fnmatch_lines(["retrievers: oracle, semantic, test_oracle_by_hand, "
                                 "test_cosine_by_hand *",
                                 "*test_oracle_by_hand*test_cosine_by_hand*"])
    _, spread = report_of(pytester, "--retrieval-eval-retriever", "oracle,semantic", "-n", "2")
    assert spread["summary"] == summary
    assert "test_cosine_by_hand" in spread["summary"]


def test_recorded_rankings_follow_the_protocol_and_the_subset(
        pytester: pytest.Pytester) -> None:
    """A recorded ranking is scored by the run's own rules: under LongMemEval's protocol the
    recorded oracle carries the same metrics as the built-in oracle (recall_any@k, not the
    vipune protocol's recall@k), and under --retrieval-eval-subset a user's pair test runs for
    the subset's pairs only, as the plugin's items do."""
    pytester.makepyfile(test_user=USER_TESTS.split("def test_cosine_by_hand")[0])
    _, report = report_of(pytester, "--retrieval-eval-protocol", "longmemeval",
                          "--retrieval-eval-retriever", "oracle")
    summary = report["summary"]
    assert summary["test_oracle_by_hand"] == summary["oracle"]
    assert "recall_any@1" in summary["oracle"]["overall"]
    result, report = report_of(pytester, "--retrieval-eval-retriever", "oracle",
                               "--retrieval-eval-subset", "6")
    result.assert_outcomes(passed=6 + 6)
    assert report["summary"]["test_oracle_by_hand"] == report["summary"]["oracle"]


def test_ids_and_k_selection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user="def test_one(retrieval_eval_pair): pass")
    first = USABLE[0]
    listed = run(pytester, "--retrieval-eval", "--no-model", "--collect-only", "-q")
    assert f"test_user.py::test_one[{first['question_type']}::{first['question_id']}]" in (
        listed.stdout.str())
    wanted = [i for i in USABLE if i["question_type"] == "temporal-reasoning"]
    picked = run(pytester, "--retrieval-eval", "--no-model", "-k",
                 "temporal-reasoning and test_one")
    picked.assert_outcomes(passed=len(wanted), deselected=2 * len(USABLE) - len(wanted))
    one = run(pytester, "--retrieval-eval", "--no-model", "-k",
              f"test_one and {first['question_id']}")
    one.assert_outcomes(passed=1, deselected=2 * len(USABLE) - 1)


def test_without_the_flag_a_pair_test_is_skipped(pytester: pytest.Pytester,
                                                 isolated_cache: Path) -> None:
    pytester.makepyfile(test_user="def test_one(retrieval_eval_pair): pass\n"
                                  "def test_own(): pass\n")
    result = run(pytester, "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*retrieval_eval_pair needs --retrieval-eval*"])
    assert not isolated_cache.exists()


def test_record_reads_an_endless_iterator_to_a_bound_and_refuses_none(
        pytester: pytest.Pytester) -> None:
    """Issue 27.5 and 27.12, for a ranking a test hands in: ``itertools.cycle`` does not hang,
    ``None`` fails the test in one line (was a TypeError)."""
    pytester.makepyfile(test_user='''
        import itertools

        def test_endless(retrieval_eval_pair, retrieval_eval_record):
            retrieval_eval_record(itertools.cycle(retrieval_eval_pair.session_ids))

        def test_none(retrieval_eval_record):
            retrieval_eval_record(None)
    ''')
    n = len(USABLE)
    result = run(pytester, "--retrieval-eval", "--no-model", "-k", "test_")
    result.assert_outcomes(failed=n, passed=n, deselected=n)
    result.stdout.fnmatch_lines(["*test_none: question *: retrieval_eval_record was given None "
                                 "(NoneType), not a list of ids; return a list of session "
                                 "ids, or of (id, score) pairs*"])
    assert "TypeError" not in result.stdout.str()


def test_fixture_errors_are_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user='''
        def test_embedder(retrieval_eval_embedder):
            pass

        def test_stranger(retrieval_eval_record):
            retrieval_eval_record(["not-a-session"])

        def test_vectors(retrieval_eval_vectors):
            pass
    ''')
    n = len(USABLE)
    result = run(pytester, "--retrieval-eval", "--no-model", "-k", "test_")
    result.assert_outcomes(failed=n, errors=1, passed=n, deselected=n)
    out = result.stdout.str()
    assert "retrieval_eval_embedder: --no-model loads no model; drop --no-model to embed" in out
    assert "test_stranger: question " in out and "'not-a-session', not a session of" in out
    # fts reads no vectors: no model, no vector cache
    fts = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-retriever", "fts",
              "-k", "test_vectors")
    fts.assert_outcomes(errors=n)
    assert "retrieval_eval_vectors: this run holds no vectors (none of its retrievers reads " \
           "them); add one that does" in fts.stdout.str()
    assert "def test_vectors" not in fts.stdout.str()  # no traceback


def test_the_tfidf_example_runs(pytester: pytest.Pytester) -> None:
    for source in EXAMPLE.iterdir():
        if source.suffix in (".py", ".ini"):
            shutil.copy(source, pytester.path / source.name)
    result = run(pytester, "-p", "no:cacheprovider", "-v")  # -v: a diagnostics line each
    result.assert_outcomes(passed=2 * len(USABLE))
    result.stdout.fnmatch_lines(["*hybrid*test_tfidf*", "overall * 15 *",
                                 "test_tfidf: first gold at mean rank *"])


SPY_CONFTEST = textwrap.dedent('''
    from pathlib import Path

    import numpy as np
    import pytest


    @pytest.fixture
    def retrieval_eval_query_vector(retrieval_eval_query_vector):
        return np.full_like(retrieval_eval_query_vector, 7.0)


    @pytest.fixture
    def retrieval_eval_vectors(retrieval_eval_vectors):
        return retrieval_eval_vectors._replace(
            vectors=np.full_like(retrieval_eval_vectors.vectors, 3.0))


    @pytest.fixture
    def retrieval_eval_store(retrieval_eval_store):
        return Path(f"{retrieval_eval_store}.sentinel")


    class Spy:
        needs_store = True

        def rank(self, persona, query, limit):
            assert (query.vector == 7.0).all(), "query vector not the fixture's"
            assert (persona.vectors == 3.0).all(), "passage vectors not the fixture's"
            assert persona.store_path().name.endswith(".sentinel"), "store not the fixture's"
            return list(persona.session_ids)[:limit]


    @pytest.fixture(scope="session")
    def retrieval_eval_custom_retriever():
        return Spy()
''')


def test_the_plugin_items_take_vectors_query_and_store_from_the_fixtures(
        pytester: pytest.Pytester) -> None:
    """A conftest overriding the public fixtures changes what the plugin's own items hand
    their retriever: the items go through the same fixtures as user tests."""
    pytester.makeconftest(SPY_CONFTEST)
    for spread in ((), ("-n", "2")):  # in each xdist worker too
        result, report = report_of(pytester, "--retrieval-eval-retriever", "custom", *spread)
        result.assert_outcomes(passed=len(USABLE))
        assert [p["retriever"] for p in report["pairs"]] == ["custom"] * len(USABLE)
        assert not report["errors"]


def test_a_turn_what_if_item_does_not_ask_for_the_session_vectors(
        pytester: pytest.Pytester) -> None:
    """Issue 44: a +unit:turn item ranks its turns' own vectors, so it does not ask for
    retrieval_eval_vectors (nor is the session matrix read for it); a session retriever's
    item does (a conftest's fixture that fails shows which)."""
    pytester.makeconftest(textwrap.dedent('''
        import pytest

        @pytest.fixture
        def retrieval_eval_vectors():
            raise RuntimeError("the session vectors were asked for")
    '''))
    result, report = report_of(pytester, "--retrieval-eval-retriever", "semantic+unit:turn")
    result.assert_outcomes(passed=len(USABLE))
    assert not report["errors"]
    failing = run(pytester, "--retrieval-eval", "--no-model", "--retrieval-eval-retriever",
                  "semantic", "--tb=line")  # a line each: the tracebacks are not the point
    failing.assert_outcomes(failed=len(USABLE))
    assert "the session vectors were asked for" in failing.stdout.str()
