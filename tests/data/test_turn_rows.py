"""A persona's kept turn rows (issue 44): built once, read back as built, keyed by the
sessions' texts, a damaged file rebuilt, never served."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.data.pairs import render_session, text_key
from pytest_retrieval_eval.data.turn_rows import (
    TurnRowsCache,
    build_turn_rows,
    turn_rows_key,
)
from pytest_retrieval_eval.data.turn_texts import turn_items

TURNS = [
    [{"role": "user", "content": "I adopted a cat"}, {"role": "assistant", "content": "  "},
     {"role": "assistant", "content": "Congratulations!"}],
    [],
    [{"role": "user", "content": "My sister's name is Ann"}],
]
IDS = ["s1", "s2", "s3"]
DATES = ["2023-01-01T00:00:00+00:00"] * 3


def _key(turns: list[list[dict[str, str]]]) -> str:
    return turn_rows_key(IDS, [text_key(render_session(t)) for t in turns], DATES)


def test_rows_are_the_turn_granularitys() -> None:
    rows, texts = build_turn_rows(TURNS)
    expected = [item for sid, own in zip(IDS, TURNS, strict=True)
                for item in turn_items(sid, own)]
    assert list(zip(rows.ids(IDS), texts, strict=True)) == expected
    assert rows.keys == tuple(text_key(t) for t in texts)
    assert rows.texts_from([[render_session([t]) for t in turns] for turns in TURNS]) == texts
    assert rows.turn_counts.tolist() == [3, 0, 1]


def test_texts_of_rows_without_blank_turns_are_every_turn_in_order() -> None:
    """No blank turn: the rows are each session's turns in order, taken in one pass; the
    same texts the row-by-row rule gives (with a blank turn, the rule itself: above)."""
    turns = [[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], [],
             [{"role": "user", "content": "c"}]]
    rows, texts = build_turn_rows(turns)
    rendered = [[render_session([t]) for t in own] for own in turns]
    assert rows.texts_from(rendered) == texts == ["user: a", "assistant: b", "user: c"]
    rule = [rendered[s][n - 1] for s, n in zip(rows.session_rows.tolist(),
                                                rows.numbers.tolist(), strict=True)]
    assert rows.texts_from(rendered) == rule


def test_texts_of_some_rows_read_only_their_sessions() -> None:
    """A few rows' texts (bm25 counting only the turns it has not seen) are :meth:`texts`'s
    for those rows, each session they lie in read once, no other."""
    turns = [*TURNS, [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]]
    rows, texts = build_turn_rows(turns)
    read: list[list[int]] = []

    def of_rows(sessions: list[int]) -> list[list[str]]:
        read.append(sessions)
        return [[render_session([t]) for t in turns[s]] for s in sessions]

    assert rows.texts_of([4, 0, 3, 1], of_rows) == [texts[4], texts[0], texts[3], texts[1]]
    assert read == [[3, 0]]
    assert rows.texts_of([], of_rows) == [] and len(read) == 1


def _built(cache: TurnRowsCache, key: str, turns: list[list[dict[str, str]]]
           ) -> tuple[object, bool]:
    calls: list[int] = []

    def build() -> tuple[object, list[str]]:
        calls.append(1)
        return build_turn_rows(turns)

    rows, _ = cache.get_or_build(key, len(turns), build)  # type: ignore[arg-type]
    return rows, bool(calls)


@pytest.mark.parametrize("verify", ["stamp", "full"])
def test_built_once_then_read_back(tmp_path: Path, verify: str) -> None:
    key = _key(TURNS)
    first, built = _built(TurnRowsCache(tmp_path, verify), key, TURNS)
    assert built
    again, built = _built(TurnRowsCache(tmp_path, verify), key, TURNS)
    assert not built
    assert again.keys == first.keys  # type: ignore[attr-defined]
    assert np.array_equal(again.numbers, first.numbers)  # type: ignore[attr-defined]
    assert np.array_equal(again.turn_counts, first.turn_counts)  # type: ignore[attr-defined]


def test_a_changed_turn_text_is_another_persona(tmp_path: Path) -> None:
    cache = TurnRowsCache(tmp_path)
    _built(cache, _key(TURNS), TURNS)
    changed = [[dict(t) for t in own] for own in TURNS]
    changed[2][0]["content"] = "My sister's name is Anne"
    assert _key(changed) != _key(TURNS)
    rows, built = _built(cache, _key(changed), changed)
    assert built
    assert rows.keys[-1] == text_key("user: My sister's name is Anne")  # type: ignore[attr-defined]


def test_files_of_an_older_format_are_swept_by_the_first_write(tmp_path: Path) -> None:
    """A format bump leaves the old files unreachable (the format is part of every key): the
    first run that writes one removes them, sidecars and stamps too; a newer format's file,
    a current one and a file that is no turn-rows file stay; a run that only reads sweeps
    nothing."""
    from pytest_retrieval_eval.data import turn_rows
    from pytest_retrieval_eval.io.checksums import commit_file

    def committed(name: str, data: bytes) -> Path:
        path = tmp_path / name[:2] / f"{name}.turns"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        commit_file(tmp, path)
        return path

    def with_format(found: object) -> bytes:
        header = f'{{"format": {found}, "rows": 0, "sessions": 0}}'.encode()
        return turn_rows.MAGIC + len(header).to_bytes(4, "little") + header

    older = committed("aa" + "0" * 62, with_format(turn_rows.FORMAT - 1))
    newer = committed("ab" + "0" * 62, with_format(turn_rows.FORMAT + 1))
    alien = committed("ac" + "0" * 62, b"not rows at all")
    quoted = committed("ad" + "0" * 62, with_format('"1"'))
    key = _key(TURNS)
    reader = TurnRowsCache(tmp_path)
    assert reader.load(key, len(TURNS)) is None and reader.swept is None
    assert older.exists()
    cache = TurnRowsCache(tmp_path)
    _, built = _built(cache, key, TURNS)
    assert built and cache.swept == 1
    assert not older.exists()
    assert not [p for p in older.parent.iterdir()]  # sidecar and stamp gone with it
    assert newer.exists() and alien.exists() and quoted.exists()
    assert cache.path_for(key).exists()
    again = TurnRowsCache(tmp_path)
    _, built = _built(again, key, TURNS)
    assert not built and again.swept is None  # a warm run lists nothing


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_a_damaged_file_is_rebuilt(tmp_path: Path, damage: str) -> None:
    cache = TurnRowsCache(tmp_path)
    key = _key(TURNS)
    first, _ = _built(cache, key, TURNS)
    path = cache.path_for(key)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-1] ^= 0xFF  # one key's byte: the file still parses
        path.write_bytes(bytes(data))
    elif damage == "truncate":
        path.write_bytes(bytes(data[:-7]))
    else:  # a file that matches its sidecar and stamp but is no rows file
        from pytest_retrieval_eval.io.checksums import commit_file

        tmp = path.with_name("x.tmp")
        tmp.write_bytes(b"not rows")
        commit_file(tmp, path)
    rows, built = _built(cache, key, TURNS)
    assert built
    assert rows.keys == first.keys  # type: ignore[attr-defined]
    _, built = _built(cache, key, TURNS)
    assert not built  # the rebuilt file is kept


def test_rows_the_start_read_are_handed_to_the_persona_once(tmp_path: Path) -> None:
    """The run's start reads every persona's rows (their turn keys); the persona's first
    load through the same cache takes those rows, not a second read and decode; a later load
    (and a start's own pass) reads the file; another cache (another run) is handed nothing;
    release() drops what no persona took."""
    key = _key(TURNS)
    _built(TurnRowsCache(tmp_path), key, TURNS)
    run = TurnRowsCache(tmp_path)
    handed, _ = run.get_or_build(key, len(TURNS), lambda: pytest.fail("built"), hand_on=True)
    assert run.read == 1
    assert run.get_or_build(key, len(TURNS), lambda: pytest.fail("built"),
                            hand_on=True)[0] is not handed  # a start's pass reads
    assert run.read == 2
    other = TurnRowsCache(tmp_path)
    assert other.load(key, len(TURNS)) is not None and other.read == 1  # not handed there
    assert run.load(key, len(TURNS)) is handed and run.read == 2  # handed
    assert run.load(key, len(TURNS)) is not None and run.read == 3  # read
    run.get_or_build(key, len(TURNS), lambda: pytest.fail("built"), hand_on=True)
    run.release()  # the run's end: what no persona took is dropped
    assert run.load(key, len(TURNS)) is not None and run.read == 5


def test_rows_handed_on_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past HANDED_ROWS rows held, a persona's rows are not handed on (it reads its file):
    a run's memory does not grow with the dataset."""
    from pytest_retrieval_eval.data import turn_rows

    other = [[{"role": "user", "content": f"other {i}"}] for i in range(3)]
    first, second = _key(TURNS), _key(other)
    _built(TurnRowsCache(tmp_path), first, TURNS)
    _built(TurnRowsCache(tmp_path), second, other)
    rows = len(TurnRowsCache(tmp_path).load(first, len(TURNS)).keys)  # type: ignore[union-attr]
    monkeypatch.setattr(turn_rows, "HANDED_ROWS", rows + 1)
    run = TurnRowsCache(tmp_path)
    handed, _ = run.get_or_build(first, len(TURNS), lambda: pytest.fail("built"),
                                 hand_on=True)
    run.get_or_build(second, len(other), lambda: pytest.fail("built"), hand_on=True)
    assert run.read == 2
    assert run.load(first, len(TURNS)) is handed and run.read == 2
    assert run.load(second, len(other)) is not None and run.read == 3  # over the bound


class _CountingCorpus:
    """The bundled sample's corpus, counting the sessions whose turns are decoded."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.decoded = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def turns(self, keys: list[str]) -> object:
        self.decoded += len(keys)
        return self.inner.turns(keys)  # type: ignore[attr-defined]


def test_turn_texts_with_kept_rows_decode_each_session_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """prep --turns (WithTurnTexts over kept turn rows): every turn text rendered while the
    rows are built is kept, so embedding them decodes no session again; a later prep that
    reads the rows back renders a text it lacks from its own session alone (it once decoded
    every session of the corpus for each chunk of texts asked)."""
    from collections import OrderedDict

    from pytest_retrieval_eval.data import dataset, ingest, turn_rows
    from pytest_retrieval_eval.data.turn_texts import WithTurnTexts

    # the process's memo of sessions made into rows starts empty (a run of the sample
    # earlier in this process would otherwise spare their decoding)
    monkeypatch.setattr(turn_rows, "_SESSIONS", OrderedDict())

    corpus = _CountingCorpus(ingest.load_corpus(dataset.resolve_dataset("sample"),
                                                tmp_path / "corpus"))
    sessions = {k for p in corpus.pairs for k in p.text_keys}  # type: ignore[attr-defined]
    first = WithTurnTexts(corpus, TurnRowsCache(tmp_path / "turns"), hand_on=False)
    turn_keys = sorted({k for p in first.pairs for k in p.text_keys} - sessions)
    assert corpus.decoded == len(sessions)  # each session once, for its rows
    texts = first.texts(turn_keys)
    assert corpus.decoded == len(sessions)  # nothing decoded again
    assert [text_key(t) for t in texts] == turn_keys
    later = WithTurnTexts(corpus, TurnRowsCache(tmp_path / "turns"), hand_on=False)
    later.pairs  # noqa: B018 - read back: no session decoded
    assert corpus.decoded == len(sessions)
    some = turn_keys[::50]
    assert later.texts(some) == [t for k, t in zip(turn_keys, texts, strict=True) if k in some]
    assert corpus.decoded - len(sessions) <= len(some)  # their sessions alone


@pytest.mark.parametrize("session_ids", [["s1", "s2", "s3"], ["a\x00b", "s2", "é 3"]])
def test_a_personas_turn_ids_are_kept_as_they_are_made(tmp_path: Path,
                                                       session_ids: list[str]) -> None:
    """The rows' turn ids are kept in the file (read back by splitting one string) and
    equal those made from the session ids; an id holding the separator (NUL) is not kept:
    its rows' ids are made again, the same."""
    from pytest_retrieval_eval.data.turn_rows import persona_turn_rows

    keys = [text_key(render_session(t)) for t in TURNS]
    by_key = dict(zip(keys, TURNS, strict=True))

    def turns_of(wanted: list[str]) -> list[list[dict[str, str]]]:
        return [by_key[k] for k in wanted]

    expected = [f"{session_ids[s]}_{n}" for s, own in enumerate(TURNS)
                for n, turn in enumerate(own, 1) if turn["content"].strip()]
    built, _ = persona_turn_rows(TurnRowsCache(tmp_path), session_ids, keys, DATES, turns_of)
    assert built.ids(session_ids) == expected
    back = TurnRowsCache(tmp_path)
    read, _ = persona_turn_rows(back, session_ids, keys, DATES, lambda _: pytest.fail("built"))
    assert back.read == 1
    assert read.ids(session_ids) == expected
    assert (read.made_ids is None) == any("\x00" in sid for sid in session_ids)
    assert read.keys == built.keys
