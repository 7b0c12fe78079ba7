"""The content-addressed vector cache: round trips, integrity, model separation, concurrency."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from pytest_retrieval_eval.errors import CacheError
from pytest_retrieval_eval.vectors import cache as cache_mod
from pytest_retrieval_eval.vectors.cache import VectorCache, list_models, models_holding

DIM = 8
FP_A = "a" * 64
FP_B = "b" * 64


def key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def vec(text: str, dim: int = DIM) -> npt.NDArray[np.float32]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    out: npt.NDArray[np.float32] = (v / np.linalg.norm(v)).astype(np.float32)
    return out


def vecs(texts: Sequence[str], dim: int = DIM) -> np.ndarray:
    return np.stack([vec(t, dim) for t in texts]).astype(np.float32)


def info(fp: str = FP_A, dim: int = DIM, name: str = "model-a") -> dict[str, object]:
    return {"name": name, "fingerprint": fp, "dim": dim, "pooling": "mean", "max_length": 512,
            "query_prefix": ""}


def open_cache(root: Path, fp: str = FP_A, dim: int = DIM, **kw: object) -> VectorCache:
    return VectorCache(root, fp, dim, info(fp, dim), **kw)  # type: ignore[arg-type]


def fill(cache: VectorCache, texts: Sequence[str]) -> list[str]:
    keys = [key(t) for t in texts]
    cache.add(keys, vecs(texts, cache.dim))
    return keys


def shards(root: Path, fp: str = FP_A) -> list[Path]:
    return sorted((root / "vectors" / fp).glob("shard-*.parquet"))


def assert_one_line(exc: BaseException, *needles: str) -> None:
    text = str(exc)
    assert "\n" not in text
    for needle in needles:
        assert needle in text, text


# --------------------------------------------------------------------------- basics


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(tmp_path / "x"))
    assert cache_mod.default_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("RETRIEVAL_EVAL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_mod.default_cache_dir() == tmp_path / "xdg" / "pytest-retrieval-eval"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_mod.default_cache_dir() == Path.home() / ".cache" / "pytest-retrieval-eval"


def test_round_trip_keeps_requested_order(tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    texts = [f"text {i}" for i in range(50)]
    keys = fill(cache, texts[:30])
    keys += fill(cache, texts[30:])
    order = [7, 45, 0, 7, 31, 12]
    got = cache.get([keys[i] for i in order])
    assert got.dtype == np.float32 and got.shape == (len(order), DIM)
    np.testing.assert_array_equal(got, vecs([texts[i] for i in order]))
    # A fresh object (another process) reads the same.
    again = open_cache(tmp_path).get([keys[i] for i in order])
    np.testing.assert_array_equal(again, got)
    assert open_cache(tmp_path).get([]).shape == (0, DIM)


def test_manifest_written_with_model_info(tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    fill(cache, ["one"])
    manifest = json.loads((tmp_path / "vectors" / FP_A / "manifest.json").read_text())
    assert manifest["fingerprint"] == FP_A and manifest["dim"] == DIM
    assert manifest["name"] == "model-a" and manifest["format"] == cache_mod.FORMAT_VERSION


def test_missing_and_get_error(tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    keys = fill(cache, ["a", "b"])
    absent = [key("c"), key("d")]
    assert cache.missing([*keys, *absent, absent[0]]) == absent
    with pytest.raises(CacheError) as err:
        cache.get([keys[0], *absent])
    assert_one_line(err.value, "lacks 2 of 3", "retrieval-eval prep --data <dataset>",
                    "--model model-a", f"--cache {tmp_path}")
    named = open_cache(tmp_path, data="longmemeval_s")
    with pytest.raises(CacheError, match="prep --data longmemeval_s --model model-a"):
        named.get(absent)


def test_sees_shards_written_by_another_process(tmp_path: Path) -> None:
    reader = open_cache(tmp_path)
    assert reader.missing([key("x")]) == [key("x")]
    fill(open_cache(tmp_path), ["x"])  # another writer
    assert reader.missing([key("x")]) == []
    np.testing.assert_array_equal(reader.get([key("x")]), vecs(["x"]))


def test_add_validates(tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    with pytest.raises(ValueError):
        cache.add([key("a")], np.zeros((1, DIM + 1), np.float32))
    with pytest.raises(ValueError):
        cache.add([key("a"), key("b")], np.zeros((1, DIM), np.float32))
    cache.add([], np.zeros((0, DIM), np.float32))
    assert shards(tmp_path) == []
    # A key given twice keeps its last vector.
    cache.add([key("a"), key("a")], vecs(["x", "y"]))
    np.testing.assert_array_equal(cache.get([key("a")]), vecs(["y"]))
    with pytest.raises(ValueError):
        VectorCache(tmp_path, "../evil", DIM, info())


def test_unwritable_root_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = open_cache(blocker / "cache")
    assert cache.missing([key("a")]) == [key("a")]  # reading an absent cache is fine
    with pytest.raises(CacheError) as err:
        fill(cache, ["a"])
    assert_one_line(err.value, "cannot be written", str(blocker / "cache"))


# --------------------------------------------------------------------------- model separation


def test_other_models_manifest_refused(tmp_path: Path) -> None:
    fill(open_cache(tmp_path), ["a"])
    manifest = tmp_path / "vectors" / FP_A / "manifest.json"
    data = json.loads(manifest.read_text())
    data["fingerprint"] = FP_B
    data["name"] = "other-model"
    manifest.write_text(json.dumps(data))
    with pytest.raises(CacheError) as err:
        open_cache(tmp_path)
    assert_one_line(err.value, str(manifest.parent), "other-model", "bbbbbbbbbbbb",
                    "aaaaaaaaaaaa", "never served")


def test_other_dim_refused(tmp_path: Path) -> None:
    fill(open_cache(tmp_path), ["a"])
    with pytest.raises(CacheError) as err:
        open_cache(tmp_path, dim=DIM * 2)
    assert_one_line(err.value, f"dim {DIM}", f"dim {DIM * 2}")


def test_models_are_kept_apart(tmp_path: Path) -> None:
    a = open_cache(tmp_path, FP_A)
    b = VectorCache(tmp_path, FP_B, DIM, info(FP_B, name="model-b"))
    fill(a, ["shared text"])
    assert b.missing([key("shared text")]) == [key("shared text")]
    with pytest.raises(CacheError):
        b.get([key("shared text")])


def test_shards_without_manifest_refused(tmp_path: Path) -> None:
    fill(open_cache(tmp_path), ["a"])
    (tmp_path / "vectors" / FP_A / "manifest.json").unlink()
    with pytest.raises(CacheError, match=r"no manifest\.json"):
        open_cache(tmp_path)


# --------------------------------------------------------------------------- integrity


def test_truncated_shard_detected(tmp_path: Path) -> None:
    keys = fill(open_cache(tmp_path), [f"t{i}" for i in range(20)])
    (shard,) = shards(tmp_path)
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    with pytest.raises(CacheError) as err:
        open_cache(tmp_path).get(keys[:1])
    assert_one_line(err.value, str(shard), "corrupt",
                    "delete it; the next prep re-embeds only what it held")


def test_flipped_byte_detected(tmp_path: Path) -> None:
    keys = fill(open_cache(tmp_path), [f"t{i}" for i in range(20)])
    (shard,) = shards(tmp_path)
    data = bytearray(shard.read_bytes())
    # Flip a byte inside the vector data: the file still parses, only the hash tells.
    raw = vec("t5").tobytes()
    at = bytes(data).find(raw)
    assert at > 0
    data[at + 1] ^= 0x40
    shard.write_bytes(bytes(data))
    cache = open_cache(tmp_path)
    assert cache.missing(keys) == []  # the keys are intact ...
    with pytest.raises(CacheError) as err:  # ... but no vector of the shard is served
        cache.get(keys[:1])
    assert_one_line(err.value, str(shard), "sha256", "delete it")


def test_repair_quarantines_corrupt_shard(tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    good = fill(cache, ["g1", "g2"])
    bad = fill(cache, ["b1", "b2"])
    shard = shards(tmp_path)[1]  # names sort by creation time
    shard.write_bytes(shard.read_bytes()[:-10])
    cache = open_cache(tmp_path)
    assert cache.repair() == [shard]
    assert shard.with_name(shard.name + ".corrupt").exists()
    assert cache.missing(good + bad) == bad
    np.testing.assert_array_equal(cache.get(good), vecs(["g1", "g2"]))


def test_temp_files_and_uncommitted_shards_ignored(tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    keys = fill(cache, ["a"])
    directory = tmp_path / "vectors" / FP_A
    (directory / ".tmp-123-shard-0.parquet").write_bytes(b"half written")
    # A shard renamed into place whose sidecar never came (writer killed in between).
    (directory / "shard-00000000000000000001-dead.parquet").write_bytes(b"garbage")
    fresh = open_cache(tmp_path)
    assert fresh.missing(keys) == [] and len(fresh) == 1
    np.testing.assert_array_equal(fresh.get(keys), vecs(["a"]))
    fill(fresh, ["b"])  # the next writer sweeps them away
    names = sorted(p.name for p in directory.iterdir())
    assert not any(n.startswith(".tmp-") or "dead" in n for n in names)


def test_interrupted_add_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = open_cache(tmp_path)
    fill(cache, ["a"])
    real_replace = os.replace
    calls = {"n": 0}

    def replace(src: object, dst: object) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # the shard went into place, the sidecar not yet
            raise KeyboardInterrupt
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        fill(cache, ["b"])
    monkeypatch.undo()
    directory = tmp_path / "vectors" / FP_A
    names = sorted(p.name for p in directory.iterdir() if p.name != ".lock")
    assert len([n for n in names if n.endswith(".parquet")]) == 1
    assert not any(n.startswith(".tmp-") for n in names)
    assert open_cache(tmp_path).missing([key("a"), key("b")]) == [key("b")]


def test_an_interrupt_right_after_the_commit_point_keeps_the_shard(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C delivered as the sidecar's rename returns: the shard is committed, so it stays,
    is counted as saved, and leaves no orphan sidecar (it used to be unlinked under it)."""
    from pytest_retrieval_eval.vectors import shard_writer

    cache = open_cache(tmp_path)
    fill(cache, ["a"])
    real = shard_writer.write_sidecar

    def write_then_interrupt(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr(shard_writer, "write_sidecar", write_then_interrupt)
    added = cache.added
    with pytest.raises(KeyboardInterrupt):
        fill(cache, ["b"])
    monkeypatch.undo()
    assert cache.added == added + 1
    directory = tmp_path / "vectors" / FP_A
    names = {p.name for p in directory.iterdir() if p.name not in (".lock", "manifest.json")}
    parquets = {n for n in names if n.endswith(".parquet")}
    assert len(parquets) == 2 and names == parquets | {n + ".sha256" for n in parquets}
    assert open_cache(tmp_path).missing([key("a"), key("b")]) == []


# --------------------------------------------------------------------------- read-only roots


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_read_only_roots_served_never_written(tmp_path: Path) -> None:
    bundled = tmp_path / "bundled"
    ro_keys = fill(open_cache(bundled), ["ro1", "ro2"])
    (bundled / "vectors" / FP_A / ".lock").unlink()  # as shipped: no lock file
    before = snapshot(bundled)
    cache = open_cache(tmp_path / "mine", read_only_roots=[bundled])
    assert cache.missing([*ro_keys, key("new")]) == [key("new")]
    fill(cache, ["new"])
    cache.repair()
    cache.compact()
    np.testing.assert_array_equal(cache.get([key("new"), ro_keys[1]]), vecs(["new", "ro2"]))
    assert snapshot(bundled) == before
    assert not (bundled / "vectors" / FP_A / ".lock").exists()


def test_corrupt_read_only_shard_says_reinstall(tmp_path: Path) -> None:
    bundled = tmp_path / "bundled"
    ro_keys = fill(open_cache(bundled), ["ro1"])
    (shard,) = shards(bundled)
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    cache = open_cache(tmp_path / "mine", read_only_roots=[bundled])
    with pytest.raises(CacheError) as err:
        cache.get(ro_keys)
    assert_one_line(err.value, str(shard), "reinstall")
    with pytest.raises(CacheError):
        cache.repair()


def test_read_only_root_of_other_model_refused(tmp_path: Path) -> None:
    bundled = tmp_path / "bundled"
    fill(open_cache(bundled, dim=4), ["x"])
    with pytest.raises(CacheError, match="dim 4"):
        open_cache(tmp_path / "mine", read_only_roots=[bundled])


# --------------------------------------------------------------------------- listing models


def test_list_models_and_models_holding(tmp_path: Path) -> None:
    mine, bundled = tmp_path / "mine", tmp_path / "bundled"
    a = open_cache(mine, FP_A)
    b = VectorCache(mine, FP_B, DIM, info(FP_B, name="model-b"))
    fill(a, ["s1", "s2"])
    fill(open_cache(bundled, FP_A), ["s3"])
    fill(b, ["s1", "s2", "s3"])
    roots = [mine, bundled]

    models = list_models(roots)
    assert [(m["name"], m["vectors"]) for m in models] == [("model-a", 3), ("model-b", 3)]
    assert models[0]["roots"] == [str(mine), str(bundled)]

    both = models_holding(roots, [key("s1"), key("s3")])
    assert [m["fingerprint"] for m in both] == [FP_A, FP_B]
    only_a = models_holding(roots, [key("s1")])
    assert len(only_a) == 2
    fill(b, ["s4"])
    assert [m["name"] for m in models_holding(roots, [key("s4"), key("s1")])] == ["model-b"]
    assert models_holding([mine], [key("s3"), key("s1")]) == [
        m for m in models_holding([mine], [key("s3")]) if m["name"] == "model-b"
    ]
    assert models_holding(roots, [key("nowhere")]) == []
    assert models_holding([tmp_path / "empty"], [key("s1")]) == []


# --------------------------------------------------------------------------- compaction


def test_compact_merges_and_stale_readers_recover(tmp_path: Path) -> None:
    writer = open_cache(tmp_path)
    texts = [f"c{i}" for i in range(40)]
    for i in range(0, 40, 4):
        fill(writer, texts[i : i + 4])
    fill(writer, texts[:2])  # duplicates across shards are kept once
    reader = open_cache(tmp_path)
    assert len(reader) == 40  # indexed the 11 small shards
    assert writer.compact() == 11
    assert len(shards(tmp_path)) == 1
    got = reader.get([key(t) for t in reversed(texts)])  # its shards vanished: re-index
    np.testing.assert_array_equal(got, vecs(list(reversed(texts))))
    assert len(open_cache(tmp_path)) == 40
    assert writer.compact() == 0


def test_compact_respects_target(tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    for i in range(6):
        fill(cache, [f"r{i}-{j}" for j in range(10)])
    assert cache.compact(target_rows=25) == 6
    sizes = sorted(len(cache_mod._read_keys(p, DIM, False, fingerprint=FP_A)[0])
                   for p in shards(tmp_path))
    assert sizes == [20, 20, 20]
    assert cache.missing([key(f"r{i}-{j}") for i in range(6) for j in range(10)]) == []


def test_many_keys_fast_path(tmp_path: Path) -> None:
    # Several row groups per shard; the get groups rows by row group.
    cache = open_cache(tmp_path, max_cached_bytes=1)  # an LRU that keeps one group
    n = cache_mod.ROW_GROUP_ROWS * 2 + 100
    keys = [key(f"k{i}") for i in range(n)]
    data = np.arange(n * DIM, dtype=np.float32).reshape(n, DIM)
    cache.add(keys, data)
    rng = np.random.default_rng(0)
    pick = rng.choice(n, 500)
    fresh = open_cache(tmp_path, max_cached_bytes=1)
    np.testing.assert_array_equal(fresh.get([keys[i] for i in pick]), data[pick])
    np.testing.assert_array_equal(fresh.get([keys[i] for i in pick[::-1]]), data[pick[::-1]])


# --------------------------------------------------------------------------- concurrency


def _writer_process(root: str, worker: int, texts: list[str], chunk: int) -> None:
    cache = open_cache(Path(root))
    for i in range(0, len(texts), chunk):
        part = texts[i : i + chunk]
        cache.add([key(t) for t in part], vecs(part))
    # Each writer also compacts once, racing the other's adds.
    if worker == 0:
        cache.compact()


def test_concurrent_writers(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")  # no fork of a process running Arrow threads
    shared = [f"shared {i}" for i in range(60)]
    texts = [[*shared, *(f"w{w} {i}" for i in range(150))] for w in range(2)]
    procs = [ctx.Process(target=_writer_process, args=(str(tmp_path), w, texts[w], 5))
             for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    everything = sorted(set(texts[0]) | set(texts[1]))
    cache = open_cache(tmp_path)
    assert cache.repair() == []  # every shard passes its check
    assert cache.missing([key(t) for t in everything]) == []
    np.testing.assert_array_equal(cache.get([key(t) for t in everything]), vecs(everything))
    leftovers = [p.name for p in (tmp_path / "vectors" / FP_A).iterdir()
                 if p.name.startswith(".tmp-")]
    assert leftovers == []


# --------------------------------------------------------------------------- model in the shard


def _smuggle(root: Path) -> tuple[Path, list[str]]:
    """Model B's shard and sidecar copied into model A's folder (issue 23.4)."""
    other = VectorCache(root / "other", FP_B, DIM, info(FP_B, name="model-b"))
    keys = fill(other, ["s1", "s2"])
    [src] = shards(root / "other", FP_B)
    dest = root / "vectors" / FP_A / src.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    for part in (src, src.with_name(src.name + ".sha256")):
        dest.with_name(part.name).write_bytes(part.read_bytes())
    return dest, keys


def test_a_shard_names_its_model_and_another_models_shard_is_refused(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    cache = open_cache(tmp_path)
    good = fill(cache, ["g1"])
    [own] = shards(tmp_path)
    assert pq.read_schema(own).metadata[cache_mod.FINGERPRINT_KEY] == FP_A.encode()
    dest, smuggled = _smuggle(tmp_path)
    for read in (lambda c: c.get(smuggled), lambda c: c.verify(), lambda c: len(c),
                 lambda c: list_models([tmp_path])):
        with pytest.raises(CacheError) as err:
            read(open_cache(tmp_path))
        assert_one_line(err.value, str(dest), "holds vectors of model model-b (fingerprint "
                        "bbbbbbbbbbbb), not of this folder's model",
                        "delete it")
    # prep's repair quarantines it like a corrupt shard; what A holds stays served.
    cache = open_cache(tmp_path)
    assert cache.repair() == [dest]
    assert dest.with_name(dest.name + ".corrupt").exists()
    assert cache.missing(good + smuggled) == smuggled
    np.testing.assert_array_equal(cache.get(good), vecs(["g1"]))


def test_a_shard_without_its_model_is_refused_and_repaired(tmp_path: Path) -> None:
    """Legacy shards (written before shards named their model) are not trusted."""
    import pyarrow.parquet as pq

    cache = open_cache(tmp_path)
    keys = fill(cache, ["l1", "l2"])
    [shard] = shards(tmp_path)
    table = pq.read_table(shard)
    pq.write_table(table.replace_schema_metadata(None), shard)
    digest = hashlib.sha256(shard.read_bytes()).hexdigest()
    shard.with_name(shard.name + ".sha256").write_text(f"{digest}  {shard.name}\n")
    with pytest.raises(CacheError) as err:
        open_cache(tmp_path).get(keys)
    assert_one_line(err.value, str(shard), "does not record which model made it", "delete it")
    cache = open_cache(tmp_path)
    assert cache.repair() == [shard]
    assert cache.missing(keys) == keys


def test_verify_of_keys_checks_only_the_shards_holding_them(tmp_path: Path) -> None:
    """Issue 44: a run's start checks the shards it reads (``verify(keys)``); a shard of
    other keys (a +unit:turn prep's turn vectors, in a run that ranks no turns) is not read
    then, and is checked before any vector of it is served."""
    cache = open_cache(tmp_path)
    good = fill(cache, ["g1", "g2"])
    other = fill(cache, ["t1", "t2"])
    shard = shards(tmp_path)[1]
    side = shard.with_name(shard.name + ".sha256")
    side.write_text("0" * 64 + "  " + shard.name + "\n")  # its bytes no longer match it
    cache = open_cache(tmp_path)
    assert cache.verify(good) == 1
    np.testing.assert_array_equal(cache.get(good), vecs(["g1", "g2"]))
    with pytest.raises(CacheError):
        cache.verify([*good, other[0]])
    with pytest.raises(CacheError):
        open_cache(tmp_path).verify()
    with pytest.raises(CacheError):
        open_cache(tmp_path).get(other)
