"""Store copies at --retrieval-eval-store-dir: unique, bounded names and the map file
(issue 27.6)."""

from __future__ import annotations

import errno
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.io import user_files
from pytest_retrieval_eval.vipune import exports, store


def test_ids_that_once_shared_a_name_get_their_own() -> None:
    ids = ["a/b", "a_b", "a:b", "a b", "a\nb", "\u00e9\u00e8", "\u4e2d\u6587"]
    names = [exports.export_name(q) for q in ids]
    assert len(set(names)) == len(ids)
    for qid, name in zip(ids, names, strict=True):  # a readable prefix, the sha256
        digest = hashlib.sha256(qid.encode("utf-8")).hexdigest()[:12]
        assert name.endswith(f"-{digest}.sqlite")
        assert "/" not in name and "\n" not in name and name.isascii()


def test_a_long_id_makes_a_bounded_name(tmp_path: Path) -> None:
    src = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(384), "")])
    long_id = "x" * 10_000
    name = exports.export_name(long_id)
    assert len(name.encode()) <= 64 and name.startswith("x" * exports.PREFIX_CHARS + "-")
    out = exports.export_persona_store(src, tmp_path / "out", long_id)
    assert out.name == name and out.read_bytes() == src.read_bytes()


def test_the_map_file_names_each_copy(tmp_path: Path) -> None:
    src = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(384), "")])
    folder = tmp_path / "out"
    for qid in ("a/b", "a_b", "a:b", "a_b"):  # one entry per id, again is a no-op
        exports.export_persona_store(src, folder, qid)
    mapping = json.loads((folder / exports.MAP_NAME).read_text())
    assert mapping == {q: exports.export_name(q) for q in ("a/b", "a_b", "a:b")}
    assert exports.read_map(folder) == mapping
    assert all((folder / name).is_file() for name in mapping.values())
    assert not list(folder.glob("*.tmp"))


def test_a_map_or_copy_the_plugin_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    """Issue 43.11 at --retrieval-eval-store-dir: a stores.json or a copy's name holding a
    file of someone else's is one line, left as it was; the plugin's own are replaced."""
    from pytest_retrieval_eval.errors import CacheError

    src = store.build_store(tmp_path / "s.sqlite", [("a", "b", np.ones(384), "")])
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / exports.MAP_NAME).write_text("[1, 2")  # not a map of ours
    with pytest.raises(CacheError, match=r"store map .*stores\.json is a file this plugin "
                                         r"did not write"):
        exports.export_persona_store(src, folder, "q1")
    assert (folder / exports.MAP_NAME).read_text() == "[1, 2"
    (folder / exports.MAP_NAME).unlink()
    theirs = folder / exports.export_name("q2")
    theirs.write_text("my notes")
    with pytest.raises(CacheError, match=r"store copy .* is a file this plugin did not write"):
        exports.export_persona_store(src, folder, "q2")
    assert theirs.read_text() == "my notes"
    exports.export_persona_store(src, folder, "q1")  # no file there: written
    exports.export_persona_store(src, folder, "q1")  # the plugin's own copy and map: again
    assert exports.read_map(folder) == {"q1": exports.export_name("q1")}


def test_a_name_too_long_is_said_so() -> None:
    exc = OSError(errno.ENAMETOOLONG, "File name too long")
    assert "too long" in user_files.fault(exc, Path("x" * 300))
    assert "disk" not in user_files.fault(exc, Path("x" * 300))


@pytest.mark.parametrize("qid", [".hidden", "../up"])
def test_a_name_never_leaves_the_folder_nor_hides(qid: str) -> None:
    name = exports.export_name(qid)
    assert not name.startswith(".") and "/" not in name
