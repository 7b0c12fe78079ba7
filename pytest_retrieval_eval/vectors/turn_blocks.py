"""Turn vectors laid out a session at a time: what a ``+unit:turn`` what-if reads of a persona
in a few reads, not one per scattered run of rows (issue 44).

The vector cache holds each text's vector once, where the text was first seen: a persona's
~8,000 turn vectors lie in thousands of separate runs of rows (LongMemEval's haystacks share
sessions and repeat turns), each a ``pread`` and each key a lookup. Here each session's turn
vectors are kept together as a **block**, addressed by the session's block digest (the sha256
of its rows' text keys in order, :func:`..data.turn_rows.block_digest`): the same turns give
the same block in any persona or dataset, a changed turn text a new one. A persona's turn
matrix is its sessions' blocks in order: one lookup and at most one ``pread`` a session, and
blocks written together (a persona's new sessions) are read together.

Layout, under the model's folder of the vector cache (one model's vectors only)::

    <root>/vectors/<fingerprint>/turn-blocks/blocks-<uuid>.tb        (+ .sha256, .verified)

A file holds the blocks one run wrote: ``MAGIC``, a uint32 header length, the header (JSON:
format, dim, blocks, rows), the blocks' digests (32 bytes each), their row counts (int32), then
their vectors (little-endian float32, rows x dim, block after block). Files are immutable and
written whole through a temp file, committed with a sha256 sidecar and a ``.verified`` stamp
(:func:`..io.checksums.commit_file`); a reader trusts a file whose stamp matches
(``verify="stamp"``), rehashes one whose stamp differs (or every one under ``full``), and
removes one that fails its sidecar or whose size its header contradicts: its blocks are read
from the shards again and written anew. Blocks are derived data: what they hold is what the
shards hold for the same keys, so a file may be deleted at any time.

A run writes the blocks of the sessions it read from the shards, a file per
:data:`FLUSH_BYTES` of them and at its end; xdist workers write files of their own (a block
two of them wrote is read from the first file listed). A temp file left by a killed writer is
removed by the next writer of the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..io.checksums import check_committed, commit_file, drop_committed, owner_is_dead, owner_tag
from ..io.framed import read_header

__all__ = ["BLOCKS_DIR", "FLUSH_BYTES", "TurnBlocks"]

#: The folder beside a model's shards.
BLOCKS_DIR = "turn-blocks"
#: Bumped whenever what a blocks file holds changes.
FORMAT = 1
MAGIC = b"PRE-TURNBLOCKS\x00\x01"
_SUFFIX = ".tb"
#: Vectors a run holds before it writes them as a file (bytes): a run's memory does not grow
#: with the dataset, and LongMemEval_M's first run writes ~20 files.
FLUSH_BYTES = 64 << 20
_TEMP_RE = re.compile(r"\.tmp-([A-Za-z0-9]+)-(\d+)-\d+(?:\.sha256)?$")


class TurnBlocks:
    """The turn blocks of one model's folder (see the module's docstring). ``verify``: the
    run's ``--retrieval-eval-verify``; ``writable``: whether this run writes blocks."""

    def __init__(self, directory: Path, dim: int, verify: str = "stamp", *,
                 writable: bool = True, flush_bytes: int = FLUSH_BYTES) -> None:
        self.directory = Path(directory) / BLOCKS_DIR
        self.dim = int(dim)
        self.verify = verify
        self.writable = writable
        self.flush_bytes = flush_bytes
        #: Files this process wrote, and block reads it served (a run's facts; tests).
        self.written = 0
        self.served = 0
        self._files: list[tuple[Path, int]] | None = None  # path, where its vectors start
        self._index: dict[bytes, tuple[int, int, int]] = {}  # digest -> file, first row, rows
        self._pending: dict[bytes, npt.NDArray[np.float32]] = {}
        self._pending_bytes = 0

    # -- reading -------------------------------------------------------------------------

    def _load(self) -> list[tuple[Path, int]]:
        """Index every committed file once (its header and digests; its vectors when read)."""
        if self._files is None:
            self._files = []
            try:
                names = sorted(p for p in self.directory.glob(f"blocks-*{_SUFFIX}"))
            except OSError:
                names = []
            for path in names:
                self._index_file(path)
        return self._files

    def _index_file(self, path: Path) -> None:
        assert self._files is not None
        if not check_committed(path, self.verify):
            return
        parsed = self._parse(path)
        if parsed is None:
            drop_committed(path)  # committed, yet not a whole blocks file: written anew
            return
        data_at, digests, counts = parsed
        number = len(self._files)
        self._files.append((path, data_at))
        first = 0
        for digest, rows in zip(digests, counts.tolist(), strict=True):
            self._index.setdefault(digest, (number, first, rows))
            first += rows

    def _parse(self, path: Path) -> tuple[int, list[bytes], np.ndarray] | None:
        """A file's vector offset, digests and row counts; None: not a whole blocks file of
        this folder's dimension."""
        try:
            with open(path, "rb") as handle:
                header = read_header(handle, MAGIC)
                if header is None:
                    return None
                header_end = handle.tell()
                blocks, rows = int(header["blocks"]), int(header["rows"])
                if header.get("format") != FORMAT or int(header["dim"]) != self.dim \
                        or blocks < 0 or rows < 0:
                    return None
                table = handle.read(36 * blocks)
                total = os.fstat(handle.fileno()).st_size
        except (OSError, ValueError, KeyError, TypeError, UnicodeError):
            return None
        data_at = header_end + 36 * blocks
        if len(table) != 36 * blocks or total != data_at + rows * self.dim * 4:
            return None
        counts = np.frombuffer(table, "<i4", blocks, 32 * blocks).astype(np.int64)
        if blocks and (counts.min() < 1 or int(counts.sum()) != rows):
            return None
        return data_at, [table[i:i + 32] for i in range(0, 32 * blocks, 32)], counts

    def read(self, digests: Sequence[bytes], counts: Sequence[int]
             ) -> npt.NDArray[np.float32] | None:
        """The vectors of the sessions ``digests`` (``counts[i]`` rows each; a session of no
        rows has no block) one after another, shape ``(sum(counts), dim)``; None when a
        block is missing (or its file cannot be read whole): the caller reads the shards."""
        files = self._load()
        sizes = np.asarray(counts, dtype=np.int64)
        if len(sizes) != len(digests):
            raise ValueError(f"{len(digests)} blocks for {len(sizes)} row counts")
        live = np.flatnonzero(sizes)  # a session of no rows has no block
        wanted = digests if len(live) == len(sizes) else [digests[i] for i in live.tolist()]
        got = list(map(self._index.get, wanted))  # file, first row, rows of each block
        if None in got:
            return None
        table = np.array(got, dtype=np.int64).reshape(-1, 3)
        if not np.array_equal(table[:, 2], sizes[live]):
            return None
        number, first, rows = table[:, 0], table[:, 1], table[:, 2]
        # a span a read: blocks lying one after another in one file are read together
        begins = np.ones(len(table), dtype=bool)
        begins[1:] = (number[1:] != number[:-1]) | (first[1:] != first[:-1] + rows[:-1])
        heads = np.flatnonzero(begins)
        span_rows = np.add.reduceat(rows, heads) if len(heads) else rows
        ends = np.cumsum(span_rows)
        at = int(ends[-1]) if len(ends) else 0
        spans = zip(number[heads].tolist(), first[heads].tolist(), span_rows.tolist(),
                    (ends - span_rows).tolist(), strict=True)
        out = np.empty((at, self.dim), dtype="<f4")
        width = self.dim * 4
        handles: dict[int, int] = {}
        try:
            for file_no, row0, span, where in spans:
                fd = handles.get(file_no)
                if fd is None:
                    fd = handles[file_no] = os.open(files[file_no][0], os.O_RDONLY)
                offset = files[file_no][1] + row0 * width
                if os.preadv(fd, [out[where:where + span].data], offset) != span * width:
                    return None
        except OSError:
            return None
        finally:
            for fd in handles.values():
                os.close(fd)
        self.served += 1
        # the array itself, not a view of it: a ranking keeps facts of a read-only matrix
        # only when no array beneath it can be written (vipune.semantic._row_facts)
        return out if out.dtype == np.float32 else out.astype(np.float32)

    # -- writing -------------------------------------------------------------------------

    def add(self, digests: Sequence[bytes], counts: Sequence[int],
            vectors: npt.NDArray[np.float32]) -> None:
        """Keep the blocks of the sessions ``digests`` whose rows ``vectors`` holds one after
        another (``counts[i]`` rows each), those not held yet; written as a file once
        :attr:`flush_bytes` are waiting, and by :meth:`flush`."""
        if not self.writable:
            return
        self._load()
        at = 0
        for digest, rows in zip(digests, counts, strict=True):
            if rows and digest not in self._index and digest not in self._pending:
                # a copy: a view would keep the persona's whole matrix alive until written
                block = np.array(vectors[at:at + rows], dtype="<f4", order="C", copy=True)
                self._pending[digest] = block
                self._pending_bytes += block.nbytes
            at += rows
        if at != len(vectors):
            raise ValueError(f"{len(vectors)} vectors for {at} rows of blocks")
        if self._pending_bytes >= self.flush_bytes:
            self.flush()

    def flush(self) -> None:
        """Write the blocks waiting as one committed file (best effort: a folder that cannot
        be written only costs later runs the shards' reads)."""
        pending, self._pending, self._pending_bytes = self._pending, {}, 0
        if not pending or not self.writable:
            return
        target = self.directory / f"blocks-{uuid.uuid4().hex}{_SUFFIX}"
        tmp = self.directory / f".{target.name}.tmp-{owner_tag()}-0"
        counts = [len(v) for v in pending.values()]
        header = json.dumps({"format": FORMAT, "dim": self.dim, "blocks": len(pending),
                             "rows": sum(counts)}, sort_keys=True).encode("utf-8")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._sweep()
            with open(tmp, "wb") as out:
                out.write(MAGIC + len(header).to_bytes(4, "little") + header)
                out.write(b"".join(pending))
                out.write(np.asarray(counts, dtype="<i4").tobytes())
                for block in pending.values():
                    out.write(block.tobytes())
            commit_file(tmp, target)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            self.writable = False
            return
        self.written += 1
        if self._files is not None:
            self._index_file(target)

    def _sweep(self) -> None:
        """Remove the temp files of writers of this host that are no longer alive."""
        for leftover in self.directory.glob(".blocks-*.tmp-*"):
            match = _TEMP_RE.search(leftover.name)
            if match is not None and owner_is_dead(match.group(1), int(match.group(2))):
                with contextlib.suppress(OSError):
                    leftover.unlink()
