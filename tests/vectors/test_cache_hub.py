"""Caches shared through the Hub: push and pull against a local stand-in of the Hub's
endpoints (tests/support/hub_standin.py), so huggingface-hub's own client code runs end to end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_retrieval_eval.errors import CacheHubError, RetrievalEvalError
from pytest_retrieval_eval.vectors import hub_sync as cache_hub
from pytest_retrieval_eval.vectors.cache import VectorCache
from tests.support.hub_standin import READ_TOKEN, HubStandIn, serve

REPO = "org/vectors"
DIM = 8
FP_A = "a" * 16 + "0123"
FP_B = "b" * 16 + "4567"


def model_info(fingerprint: str, name: str = "tiny-model") -> dict[str, object]:
    return {"name": name, "fingerprint": fingerprint, "dim": DIM, "pooling": "mean",
            "max_length": 512, "query_prefix": ""}


def make_cache(root: Path, fingerprint: str = FP_A, shards: int = 3, rows: int = 50,
               name: str = "tiny-model", start: int = 0) -> dict[str, np.ndarray]:
    """A vector cache of ``shards`` shards of ``rows`` random vectors; key -> vector."""
    cache = VectorCache(root, fingerprint, DIM, model_info(fingerprint, name))
    rng = np.random.default_rng(start + len(fingerprint))
    held: dict[str, np.ndarray] = {}
    for s in range(shards):
        keys = [f"{fingerprint[:4]}-{start + s}-{i}" for i in range(rows)]
        vectors = rng.standard_normal((rows, DIM)).astype(np.float32)
        cache.add(keys, vectors)
        held.update(zip(keys, vectors, strict=True))
    return held


def tree(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` but locks: relative path -> bytes."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    yield from serve(tmp_path, monkeypatch)


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


# --------------------------------------------------------------------------- round trip


def test_push_then_pull_gives_identical_files(hub: HubStandIn, tmp_path: Path) -> None:
    held = make_cache(tmp_path / "a")
    pushed = cache_hub.push(REPO, tmp_path / "a")
    assert pushed.uploaded == 2 + 2 * 3 and pushed.already == 0 and pushed.commit
    remote = hub.files(REPO)
    assert f"vectors/{FP_A}/manifest.json.sha256" in remote
    assert sum(p.endswith(".parquet") for p in remote) == 3
    # The real client went through the stand-in's endpoints.
    paths = {p for _m, p, _r in hub.requests}
    assert "/api/repos/create" in paths
    assert f"/api/datasets/{REPO}/preupload/main" in paths
    assert f"/api/datasets/{REPO}/commit/main" in paths

    seen: list[tuple[str, int, int | None]] = []
    pulled = cache_hub.pull(REPO, tmp_path / "b",
                            progress=lambda *step: seen.append(step))
    assert (pulled.fingerprint, pulled.fetched, pulled.already) == (FP_A, 3, 0)
    # Progress in kB of the shards only; it ends at their total.
    shard_kb = sum(len(v) for p, v in remote.items() if p.endswith(".parquet")) // 1000
    assert {label for label, _d, _t in seen} == {f"pull {REPO} (kB)"}
    assert seen[-1][1:] == (shard_kb, shard_kb)
    assert [d for _l, d, _t in seen] == sorted(d for _l, d, _t in seen)
    assert pulled.model == "tiny-model" and pulled.resumed == 0
    source, copy = tree(tmp_path / "a" / "vectors"), tree(tmp_path / "b" / "vectors")
    assert source.keys() == copy.keys() and source == copy
    cache = VectorCache(tmp_path / "b", FP_A, DIM, model_info(FP_A))
    keys = sorted(held)
    assert np.array_equal(cache.get(keys), np.stack([held[k] for k in keys]))
    assert cache.verify() == 3
    assert not any((tmp_path / "b" / cache_hub.STAGING_DIR).rglob("*.part"))


def test_pull_fetches_only_what_the_cache_lacks(hub: HubStandIn, tmp_path: Path) -> None:
    make_cache(tmp_path / "a", shards=2)
    cache_hub.push(REPO, tmp_path / "a")
    cache_hub.pull(REPO, tmp_path / "b")
    first = len(hub.gets(".parquet"))
    assert first == 2

    again = cache_hub.pull(REPO, tmp_path / "b")
    assert (again.fetched, again.already, again.bytes) == (0, 2, 0)
    assert len(hub.gets(".parquet")) == first  # no shard downloaded again

    make_cache(tmp_path / "a", shards=1, start=10)  # one more shard at the source
    pushed = cache_hub.push(REPO, tmp_path / "a")
    assert pushed.uploaded == 2 and pushed.already == 2 + 2 * 2  # only the new shard
    new = [p for p in hub.files(REPO) if p.endswith(".parquet")
           and not (tmp_path / "b" / p).exists()]
    assert len(new) == 1
    third = cache_hub.pull(REPO, tmp_path / "b")
    assert (third.fetched, third.already) == (1, 2)
    shard_gets = [p for p, _r in hub.gets(".parquet")]
    assert len(shard_gets) == first + 1 and shard_gets[-1].endswith(new[0])
    assert tree(tmp_path / "a" / "vectors") == tree(tmp_path / "b" / "vectors")


def test_two_pulls_into_one_cache_take_turns(hub: HubStandIn, tmp_path: Path) -> None:
    import threading

    make_cache(tmp_path / "a", shards=3, rows=300)
    cache_hub.push(REPO, tmp_path / "a")
    results: list[cache_hub.PullResult] = []
    threads = [threading.Thread(target=lambda: results.append(
        cache_hub.pull(REPO, tmp_path / "b"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.fetched for r in results) == [0, 3]  # the second found all committed
    assert len(hub.gets(".parquet")) == 3
    assert tree(tmp_path / "a" / "vectors") == tree(tmp_path / "b" / "vectors")


def test_push_sends_only_what_the_repo_lacks(hub: HubStandIn, tmp_path: Path) -> None:
    make_cache(tmp_path / "a", shards=1)
    cache_hub.push(REPO, tmp_path / "a")
    commits = len(hub.repos[REPO].commits)
    again = cache_hub.push(REPO, tmp_path / "a")
    assert (again.uploaded, again.commit) == (0, None)
    assert len(hub.repos[REPO].commits) == commits


def test_corpus_file_travels_with_include_corpus(hub: HubStandIn, tmp_path: Path) -> None:
    from pytest_retrieval_eval.io.checksums import commit_file, temp_path

    make_cache(tmp_path / "a", shards=1)
    target = tmp_path / "a" / "corpus" / ("c" * 64 + ".sqlite")
    target.parent.mkdir(parents=True)
    tmp = temp_path(target)
    tmp.write_bytes(b"corpus bytes" * 100)
    commit_file(tmp, target)
    cache_hub.push(REPO, tmp_path / "a", corpus_file=target)
    assert f"corpus/{target.name}" in hub.files(REPO)

    without = cache_hub.pull(REPO, tmp_path / "b")
    assert without.fetched == 1 and not (tmp_path / "b" / "corpus").exists()
    pulled = cache_hub.pull(REPO, tmp_path / "b", include_corpus=True)
    assert (pulled.fetched, pulled.corpus_files) == (0, 1)
    copy = tmp_path / "b" / "corpus" / target.name
    assert copy.read_bytes() == target.read_bytes()
    assert Path(f"{copy}.sha256").read_text() == Path(f"{target}.sha256").read_text()


# --------------------------------------------------------------------------- resume


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface-hub writes a download in chunks of DOWNLOAD_CHUNK_SIZE (10 MB): a cut
    keeps only whole chunks. Small chunks let a small test file be cut part-way."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "DOWNLOAD_CHUNK_SIZE", 500)


@pytest.mark.usefixtures("small_chunks")
def test_a_dropped_connection_resumes_with_a_range_request(hub: HubStandIn,
                                                           tmp_path: Path) -> None:
    make_cache(tmp_path / "a", shards=1, rows=200)
    cache_hub.push(REPO, tmp_path / "a")
    shard = next(p for p in hub.files(REPO) if p.endswith(".parquet"))
    hub.drop[shard] = [1000, 1]  # the first GET is cut after 1000 bytes
    pulled = cache_hub.pull(REPO, tmp_path / "b")
    assert pulled.fetched == 1
    assert [r for _p, r in hub.gets(shard)] == [None, "bytes=1000-"]
    assert tree(tmp_path / "a" / "vectors") == tree(tmp_path / "b" / "vectors")


@pytest.mark.usefixtures("small_chunks")
def test_a_killed_pull_resumes_where_it_stopped(hub: HubStandIn, tmp_path: Path) -> None:
    make_cache(tmp_path / "a", shards=2, rows=200)
    cache_hub.push(REPO, tmp_path / "a")
    shard = sorted(p for p in hub.files(REPO) if p.endswith(".parquet"))[1]
    size = len(hub.files(REPO)[shard])
    hub.drop[shard] = [1500, 1]
    hub.vanish.add(shard)  # after the cut, that file answers 503: the pull gives up
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull(REPO, tmp_path / "b")
    assert "HTTP 503" in one_line(exc)
    # Nothing committed: not even the shard that arrived whole.
    assert not list((tmp_path / "b").glob("vectors/*/shard-*"))
    parts = list((tmp_path / "b" / cache_hub.STAGING_DIR).rglob(f"*{Path(shard).name}*.part"))
    assert [p.stat().st_size for p in parts] == [1500]  # kept for the next pull

    hub.refuse.clear()
    stale = parts[0].with_name("vectors--gone--shard-x.parquet.0123456789ab.part")
    stale.write_bytes(b"an earlier pull's, of a file the repo no longer holds")
    pulled = cache_hub.pull(REPO, tmp_path / "b")
    assert pulled.fetched == 2 and pulled.resumed >= 1500
    assert not list((tmp_path / "b" / cache_hub.STAGING_DIR).rglob("*.part"))
    assert hub.gets(shard)[-1][1] == "bytes=1500-"
    assert pulled.bytes < sum(len(v) for k, v in hub.files(REPO).items()
                              if k.startswith("vectors/")) - 1500 + size
    assert tree(tmp_path / "a" / "vectors") == tree(tmp_path / "b" / "vectors")


# --------------------------------------------------------------------------- checksum


def test_a_file_failing_its_checksum_commits_nothing(hub: HubStandIn, tmp_path: Path) -> None:
    make_cache(tmp_path / "a", shards=2)
    cache_hub.push(REPO, tmp_path / "a")
    shard = sorted(p for p in hub.files(REPO) if p.endswith(".parquet"))[1]
    good = hub.files(REPO)[shard]
    hub.corrupt[shard] = good[:100] + bytes([good[100] ^ 0xFF]) + good[101:]
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull(REPO, tmp_path / "b")
    line = one_line(exc)
    assert shard in line and "fails its checksum" in line and "nothing was committed" in line
    assert not (tmp_path / "b" / "vectors").exists()  # not even a manifest
    assert not list((tmp_path / "b" / cache_hub.STAGING_DIR).rglob(f"*{Path(shard).name}*"))

    del hub.corrupt[shard]
    cache_hub.pull(REPO, tmp_path / "b")
    assert tree(tmp_path / "a" / "vectors") == tree(tmp_path / "b" / "vectors")


@pytest.mark.parametrize("where", [50, 0.6], ids=["unreadable", "vector-bytes"])
def test_a_corrupt_local_shard_is_never_pushed(hub: HubStandIn, tmp_path: Path,
                                               where: float) -> None:
    make_cache(tmp_path / "a", shards=1)
    shard = next((tmp_path / "a" / "vectors" / FP_A).glob("shard-*.parquet"))
    data = bytearray(shard.read_bytes())
    data[int(where if where >= 1 else len(data) * where)] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(RetrievalEvalError) as exc:
        cache_hub.push(REPO, tmp_path / "a")
    assert str(shard) in one_line(exc)
    assert REPO not in hub.repos


# --------------------------------------------------------------------------- errors


def test_a_missing_repo_is_one_line(hub: HubStandIn, tmp_path: Path) -> None:
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull("org/nothing-here", tmp_path / "b")
    line = one_line(exc)
    assert "org/nothing-here" in line and "does not exist" in line and "404" in line


def test_a_missing_repo_without_a_token_is_one_line(hub: HubStandIn, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull("org/nothing-here", tmp_path / "b")
    assert "does not exist or is private (HTTP 401 without a token)" in one_line(exc)


def test_a_wrong_token_is_one_line(hub: HubStandIn, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    make_cache(tmp_path / "a", shards=1)
    cache_hub.push(REPO, tmp_path / "a")
    monkeypatch.setenv("HF_TOKEN", "not-a-token")
    for call in (lambda: cache_hub.pull(REPO, tmp_path / "b"),
                 lambda: cache_hub.push(REPO, tmp_path / "a")):
        with pytest.raises(CacheHubError) as exc:
            call()
        assert "refused the token (HTTP 401)" in one_line(exc)
        assert "HF_TOKEN" in one_line(exc)


def test_a_read_only_token_cannot_push(hub: HubStandIn, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    make_cache(tmp_path / "a", shards=1)
    monkeypatch.setenv("HF_TOKEN", READ_TOKEN)
    with pytest.raises(CacheHubError) as exc:
        cache_hub.push(REPO, tmp_path / "a")
    assert "no write access" in one_line(exc) and "403" in one_line(exc)


def test_offline_is_one_line_and_touches_nothing(hub: HubStandIn, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull(REPO, tmp_path / "b")
    assert "offline (HF_HUB_OFFLINE is set)" in one_line(exc)
    assert hub.requests == []
    assert not (tmp_path / "b").exists()


def test_an_unreachable_hub_is_one_line(hub: HubStandIn, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with socket_port() as port:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull(REPO, tmp_path / "b")
    assert "cannot be reached" in one_line(exc)


def test_another_models_vectors_are_refused(hub: HubStandIn, tmp_path: Path) -> None:
    make_cache(tmp_path / "a", shards=1)
    cache_hub.push(REPO, tmp_path / "a")
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull(REPO, tmp_path / "b", fingerprint=FP_B, model="other-model")
    line = one_line(exc)
    assert f"holds vectors of tiny-model (fingerprint {FP_A[:12]})" in line
    assert f"not of other-model (fingerprint {FP_B[:12]})" in line
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull(REPO, tmp_path / "b", model="other-model")
    assert "not of model other-model" in one_line(exc)
    assert not (tmp_path / "b" / "vectors").exists()


def test_a_manifest_naming_another_fingerprint_is_refused(hub: HubStandIn,
                                                          tmp_path: Path) -> None:
    make_cache(tmp_path / "a", shards=1)
    cache_hub.push(REPO, tmp_path / "a")
    files = hub.files(REPO)
    renamed = {p.replace(FP_A, FP_B): v for p, v in files.items()}
    hub.commit(REPO, renamed)  # vectors/FP_B/ holding FP_A's manifest
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull(REPO, tmp_path / "b")
    assert "not the fingerprint its folder names" in one_line(exc)


def test_several_models_need_a_name(hub: HubStandIn, tmp_path: Path) -> None:
    make_cache(tmp_path / "a", shards=1)
    make_cache(tmp_path / "a", fingerprint=FP_B, shards=1, name="other-model")
    with pytest.raises(CacheHubError) as exc:
        cache_hub.push(REPO, tmp_path / "a")
    assert "several models" in one_line(exc) and "--model" in one_line(exc)
    cache_hub.push(REPO, tmp_path / "a", model="tiny-model")
    cache_hub.push(REPO, tmp_path / "a", model="other-model")
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull(REPO, tmp_path / "b")
    assert "several models" in one_line(exc)
    pulled = cache_hub.pull(REPO, tmp_path / "b", model="other-model")
    assert pulled.fingerprint == FP_B


def test_a_bad_repo_id_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull("no-slash", tmp_path)
    assert "ORG/NAME" in one_line(exc)


class socket_port:
    """A free local port with nothing listening on it."""

    def __enter__(self) -> int:
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = int(sock.getsockname()[1])
        sock.close()
        return self.port

    def __exit__(self, *exc: object) -> None:
        return None



def test_an_oversized_manifest_is_refused_before_download(hub: HubStandIn,
                                                          tmp_path: Path) -> None:
    """Issue 23.6 (cache side): a Hub manifest is read bounded, refused by its listed size."""
    make_cache(tmp_path / "a", shards=1)
    cache_hub.push(REPO, tmp_path / "a")
    files = dict(hub.files(REPO))
    manifest = f"vectors/{FP_A}/manifest.json"
    files[manifest] = b'{"pad": "' + b"x" * 300_000 + b'"}'
    files.pop(manifest + ".sha256")
    hub.commit(REPO, files)
    with pytest.raises(CacheHubError) as exc:
        cache_hub.pull(REPO, tmp_path / "b")
    line = one_line(exc)
    assert manifest in line and "more than a manifest may" in line
    assert not (tmp_path / "b" / "vectors").exists()


def test_a_pulled_shard_of_another_model_is_refused(hub: HubStandIn, tmp_path: Path) -> None:
    """Issue 23.4: each shard names its model inside the file, so one moved into another
    model's folder on the Hub (sidecar and all) is refused when adopted."""
    make_cache(tmp_path / "a", shards=1)
    make_cache(tmp_path / "o", fingerprint=FP_B, shards=1, name="other-model")
    cache_hub.push(REPO, tmp_path / "a")
    files = dict(hub.files(REPO))
    [foreign] = (tmp_path / "o" / "vectors" / FP_B).glob("shard-*.parquet")
    files[f"vectors/{FP_A}/{foreign.name}"] = foreign.read_bytes()
    files[f"vectors/{FP_A}/{foreign.name}.sha256"] = Path(f"{foreign}.sha256").read_bytes()
    hub.commit(REPO, files)
    with pytest.raises(RetrievalEvalError) as exc:
        cache_hub.pull(REPO, tmp_path / "b")
    line = one_line(exc)
    assert foreign.name in line and "holds vectors of model other-model" in line
    assert not list((tmp_path / "b" / "vectors").rglob("shard-*.parquet"))
