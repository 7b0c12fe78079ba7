"""Turn blocks (issue 44, full scale): each session's turn vectors laid out together, addressed
by the digest of its turns' text keys, kept across runs, trusted like every other kept file,
and read by a run's turn what-if instead of a lookup and a read per scattered turn vector.
Each test pins one convention of pytest_retrieval_eval/vectors/turn_blocks.py."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_retrieval_eval.data.turn_rows import block_digest, build_turn_rows
from pytest_retrieval_eval.io import checksums
from pytest_retrieval_eval.vectors.turn_blocks import BLOCKS_DIR, TurnBlocks

DIM = 8


def _session(tag: str, rows: int) -> tuple[bytes, np.ndarray]:
    """A session's digest and its rows' vectors, both made from ``tag``."""
    keys = [hashlib.sha256(f"{tag} {i}".encode()).hexdigest() for i in range(rows)]
    rng = np.random.default_rng(zlib.crc32(tag.encode()))
    return block_digest(keys), rng.standard_normal((rows, DIM)).astype(np.float32)


def _persona(tags: list[tuple[str, int]]) -> tuple[list[bytes], list[int], np.ndarray]:
    sessions = [_session(tag, rows) for tag, rows in tags]
    return ([d for d, _ in sessions], [rows for _, rows in tags],
            np.concatenate([v for _, v in sessions]) if sessions else np.zeros((0, DIM)))


def _files(root: Path) -> list[Path]:
    return sorted((root / BLOCKS_DIR).glob("blocks-*.tb"))


def test_blocks_are_kept_and_a_later_run_reads_them_whole(tmp_path: Path) -> None:
    """What a run read by key is written at its end; a later run reads a persona's turn
    vectors from the blocks alone, a session's rows together, sessions of no rows skipped;
    sessions written together are read with one pread."""
    digests, counts, vectors = _persona([("a", 3), ("empty", 0), ("b", 5), ("c", 1)])
    first = TurnBlocks(tmp_path, DIM)
    assert first.read(digests, counts) is None  # nothing kept yet
    first.add(digests, counts, vectors)
    assert _files(tmp_path) == []  # written at the end (or past flush_bytes)
    first.flush()
    assert len(_files(tmp_path)) == 1 and first.written == 1
    later = TurnBlocks(tmp_path, DIM)
    reads: list[int] = []
    real = os.preadv

    def counted(fd: int, buffers: list[memoryview], offset: int) -> int:
        reads.append(offset)
        return real(fd, buffers, offset)

    try:
        os.preadv = counted  # type: ignore[assignment]
        got = later.read(digests, counts)
        # another persona holding some of the same sessions, in another order
        other = later.read([digests[3], digests[0]], [1, 3])
    finally:
        os.preadv = real  # type: ignore[assignment]
    assert got is not None and got.dtype == np.float32
    assert np.array_equal(got, vectors)
    assert other is not None and np.array_equal(other, np.concatenate([vectors[8:], vectors[:3]]))
    assert len(reads) == 1 + 2  # a, b, c written together: one read; then two
    assert later.served == 2


def test_a_missing_block_or_another_row_count_reads_by_key(tmp_path: Path) -> None:
    """A session whose block is not kept (its turns changed: another digest) or holds
    another number of rows makes the persona read by key; add() then keeps only the blocks
    not held yet."""
    digests, counts, vectors = _persona([("a", 3), ("b", 2)])
    blocks = TurnBlocks(tmp_path, DIM)
    blocks.add(digests, counts, vectors)
    blocks.flush()
    later = TurnBlocks(tmp_path, DIM)
    changed, _, new = _persona([("b changed", 2)])
    assert later.read([digests[0], changed[0]], [3, 2]) is None
    assert later.read(digests, [3, 3]) is None
    later.add([digests[0], changed[0]], [3, 2], np.concatenate([vectors[:3], new]))
    later.flush()
    assert len(_files(tmp_path)) == 2
    third = TurnBlocks(tmp_path, DIM)
    got = third.read([changed[0], digests[0]], [2, 3])
    assert got is not None and np.array_equal(got, np.concatenate([new, vectors[:3]]))
    with pytest.raises(ValueError, match="vectors"):
        third.add([b"x" * 32], [4], new)


def test_a_run_writes_a_file_per_flush_bytes(tmp_path: Path) -> None:
    """A run's memory does not grow with the dataset: past flush_bytes the blocks waiting
    are written (and read back by the same run)."""
    blocks = TurnBlocks(tmp_path, DIM, flush_bytes=5 * DIM * 4)
    for tag in ("a", "b", "c"):
        digests, counts, vectors = _persona([(tag, 3)])
        blocks.add(digests, counts, vectors)
    assert len(_files(tmp_path)) == 1  # a and b: 6 rows, past 5
    digests, counts, vectors = _persona([("a", 3), ("b", 3)])
    got = blocks.read(digests, counts)
    assert got is not None and np.array_equal(got, vectors)


def _kept(tmp_path: Path) -> tuple[list[bytes], list[int], np.ndarray, Path]:
    digests, counts, vectors = _persona([("a", 4), ("b", 4)])
    blocks = TurnBlocks(tmp_path, DIM)
    blocks.add(digests, counts, vectors)
    blocks.flush()
    (path,) = _files(tmp_path)
    return digests, counts, vectors, path


@pytest.mark.parametrize("verify", ["stamp", "full"])
def test_bit_rot_under_a_valid_stamp_is_caught_by_full(tmp_path: Path, verify: str) -> None:
    """Under ``stamp`` a file whose stamp vouches for its version is read unhashed; under
    ``full`` it is rehashed, and one that fails its sidecar is removed: the run reads by key
    and writes the blocks anew."""
    digests, counts, vectors, path = _kept(tmp_path)
    digest = checksums.read_sidecar(path)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x40  # in the last vector
    path.write_bytes(bytes(data))
    checksums.write_stamp(path, path.stat(), digest)
    got = TurnBlocks(tmp_path, DIM, verify).read(digests, counts)
    if verify == "stamp":
        assert got is not None and not np.array_equal(got, vectors)  # trusted, as documented
    else:
        assert got is None and not path.exists()
        assert not checksums.sidecar_path(path).exists()


def test_a_changed_file_is_rehashed_and_a_damaged_one_removed(tmp_path: Path) -> None:
    """A file changed since its stamp (a truncation, a flipped byte) is rehashed even under
    ``stamp``, fails its sidecar and is removed; one whose header contradicts its size, or
    made for another dimension, is removed too."""
    digests, counts, _, path = _kept(tmp_path)
    path.write_bytes(path.read_bytes()[:-4])
    assert TurnBlocks(tmp_path, DIM).read(digests, counts) is None
    assert not path.exists()
    digests, counts, _, path = _kept(tmp_path)
    assert TurnBlocks(tmp_path, DIM + 1).read(digests, counts) is None
    assert not path.exists()  # committed, but not a blocks file of this model's dimension


def test_a_killed_writers_temp_file_is_swept_by_the_next_writer(tmp_path: Path) -> None:
    """A temp file of a writer no longer alive goes at the next flush; a live writer's
    stays."""
    folder = tmp_path / BLOCKS_DIR
    folder.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    host = checksums.owner_tag().rsplit("-", 1)[0]
    left = folder / f".blocks-x.tb.tmp-{host}-{dead}-0"
    live = folder / f".blocks-y.tb.tmp-{checksums.owner_tag()}-1"
    left.write_bytes(b"partial")
    live.write_bytes(b"writing")
    _kept(tmp_path)
    assert not left.exists() and live.exists()


def test_a_folder_that_cannot_be_written_costs_only_the_reads(tmp_path: Path) -> None:
    """Best effort: a blocks folder that cannot be made leaves the run reading by key."""
    (tmp_path / BLOCKS_DIR).write_bytes(b"a file where the folder goes")
    digests, counts, vectors = _persona([("a", 2)])
    blocks = TurnBlocks(tmp_path, DIM)
    blocks.add(digests, counts, vectors)
    blocks.flush()
    assert not blocks.writable and blocks.written == 0
    assert blocks.read(digests, counts) is None


def test_a_sessions_digest_is_its_turns_text_keys() -> None:
    """The block address: the same turns give the same digest in any persona; a changed,
    added or dropped turn text (blank turns are no rows) gives another."""
    turns = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
             [{"role": "user", "content": "  "}, {"role": "user", "content": "bye"}]]
    rows, _ = build_turn_rows(turns)
    assert len(rows.blocks) == 2
    assert rows.blocks[0] == block_digest(rows.keys[:2])
    again, _ = build_turn_rows([turns[1], turns[0]])
    assert again.blocks == (rows.blocks[1], rows.blocks[0])
    for changed in ([{"role": "user", "content": "hi!"}, turns[0][1]], turns[0][:1],
                    [*turns[0], {"role": "user", "content": "more"}]):
        other, _ = build_turn_rows([changed])
        assert other.blocks[0] != rows.blocks[0]
    blank, _ = build_turn_rows([[{"role": "user", "content": " "}, *turns[1][1:]]])
    assert blank.blocks[0] == rows.blocks[1]  # the same rows: blank turns are none


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(written=st.lists(st.lists(st.integers(0, 4), max_size=5), min_size=1, max_size=4),
       picks=st.lists(st.tuples(st.integers(0, 19), st.booleans()), max_size=12))
def test_any_persona_reads_its_sessions_blocks_in_order(
        tmp_path_factory: pytest.TempPathFactory, written: list[list[int]],
        picks: list[tuple[int, bool]]) -> None:
    """Blocks written by several runs (a file each): any persona of them, sessions in any
    order, repeated or of no rows, reads exactly its sessions' vectors one after another;
    a session whose block is missing (or whose count differs) reads None."""
    root = tmp_path_factory.mktemp("blocks")
    sessions: list[tuple[str, int]] = []
    for run, sizes in enumerate(written):
        kept = TurnBlocks(root, DIM)
        tags = [(f"r{run}s{i}", rows) for i, rows in enumerate(sizes)]
        sessions.extend(tags)
        kept.add(*_persona(tags))
        kept.flush()
    chosen: list[tuple[str, int]] = []
    for at, odd in picks:
        if sessions and not odd:
            chosen.append(sessions[at % len(sessions)])
        elif odd:  # a session never written: no block unless it has no rows
            chosen.append((f"never{at}", at % 2))
    digests, counts, vectors = _persona(chosen)
    got = TurnBlocks(root, DIM).read(digests, counts)
    if any(tag.startswith("never") and rows for tag, rows in chosen):
        assert got is None
    else:
        assert got is not None and got.shape == (sum(counts), DIM)
        assert np.array_equal(got, vectors.reshape(-1, DIM))
