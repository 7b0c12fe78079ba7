"""The real ``@modelcontextprotocol/server-memory`` (pinned in tests/support/npm, installed by
.ci/run into .mcp-servers/) driven through the official MCP SDK by the reference client of
the ``server-memory`` preset (tests/support/mcp_clients.py): one entity per session, then
``search_nodes`` with the question. Its answer is the sessions whose text holds the WHOLE
query, case-insensitively, in the order stored: given a question of the bundled sample, none
(what the preset's column shows, and why)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is in the [mcp] extra")

from pytest_retrieval_eval.data import dataset, ingest
from pytest_retrieval_eval.data.corpus import PairRecord
from tests.support import mcp_clients, node_servers


@pytest.fixture(scope="module")
def server() -> tuple[str, list[str]]:
    return node_servers.server_memory()


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[PairRecord, list[str]]]:
    corpus = ingest.load_corpus(dataset.resolve_dataset("sample"),
                                tmp_path_factory.mktemp("server-memory"))
    pairs = [p for p in corpus.pairs if not p.abstention][:2]
    return [(p, corpus.texts(list(p.text_keys))) for p in pairs]


def _contains(query: str, session_id: str, text: str) -> bool:
    """server-memory's match (dist/index.js, searchNodes): the query, lower-cased, within the
    name, the entityType ("session") or an observation, lower-cased."""
    q = query.lower()
    return q in session_id.lower() or q in "session" or q in text.lower()


def test_the_pinned_version_is_installed(server: tuple[str, list[str]]) -> None:
    entry = Path(server[1][0])
    manifest = json.loads((entry.parent.parent / "package.json").read_text())
    assert manifest["version"] == node_servers.pinned_version(node_servers.SERVER_MEMORY)


def test_a_whole_question_matches_no_session_of_the_sample(
        server: tuple[str, list[str]], sample: list[tuple[PairRecord, list[str]]],
        tmp_path: Path) -> None:
    for n, (pair, texts) in enumerate(sample):
        sessions = list(zip(pair.session_ids, texts, strict=True))
        workdir = tmp_path / f"p{n}"
        workdir.mkdir()
        got = mcp_clients.server_memory_ranking(server, workdir, sessions, pair.question)
        assert got == [sid for sid, text in sessions if _contains(pair.question, sid, text)]
        assert got == []  # the question is nowhere verbatim: recall 0
        # Its own memory file, one entity a session, in the order stored.
        lines = (workdir / "memory.jsonl").read_text().splitlines()
        assert [json.loads(line)["name"] for line in lines] == list(pair.session_ids)


def test_one_word_of_the_question_finds_its_sessions_in_stored_order(
        server: tuple[str, list[str]], sample: list[tuple[PairRecord, list[str]]],
        tmp_path: Path) -> None:
    pair, texts = sample[0]
    sessions = list(zip(pair.session_ids, texts, strict=True))
    # The first word of "Saxophone teacher name?" alone, upper-cased: the sessions holding
    # it, in any case, in the order stored (the whole question finds none).
    phrase = pair.question.split()[0].upper()
    want = [sid for sid, text in sessions if _contains(phrase, sid, text)]
    assert len(want) >= 2
    got = mcp_clients.server_memory_ranking(server, tmp_path, sessions, phrase)
    assert got == want


def test_ci_installs_the_pinned_lock() -> None:
    """.ci/run installs exactly the lock's versions (npm ci) before the tests run."""
    ci = (node_servers.ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install = ci.index("npm ci --ignore-scripts --no-audit --no-fund")
    assert "tests/support/npm/package-lock.json .mcp-servers/" in ci
    assert install < ci.index(".venv/bin/pytest")
    lock = json.loads((node_servers.PINNED / "package-lock.json").read_text())
    locked = lock["packages"][f"node_modules/{node_servers.SERVER_MEMORY}"]["version"]
    assert locked == node_servers.pinned_version(node_servers.SERVER_MEMORY) == "2026.8.31"
    ignored = (node_servers.ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "/.mcp-servers/" in ignored
