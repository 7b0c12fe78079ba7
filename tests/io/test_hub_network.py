"""Reliability IV (issue 27.4, 27.8, 27.13): every Hub call is bounded.

Each Hub path (``cache pull``, ``cache push``, ``--retrieval-eval-cache-repo``, a file
download) runs the real huggingface-hub client against a 127.0.0.1 listener that never
answers, one that trickles its answer, and one that serves a web page; a shard that streams
far past its listed size is cut off at that size. Deadlines here are a second or two.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_retrieval_eval.errors import CacheHubError
from pytest_retrieval_eval.io import hub as hub_files
from pytest_retrieval_eval.io import hub_deadline
from pytest_retrieval_eval.io.hub_transfer import HubConnection
from pytest_retrieval_eval.vectors import hub_sync
from tests.support.hub_standin import WRITE_TOKEN, HubStandIn, Repo, serve
from tests.support.reliability_support import joined_errors
from tests.support.slow_servers import SlowServer
from tests.vectors.test_cache_hub import FP_A, REPO, make_cache, tree

pytest_plugins = ["pytester"]

DEADLINE = 1.5
#: Where every request stalls (a SlowServer), no call has to finish first: a shorter wait.
STALLED_DEADLINE = 0.5
SLACK = 4.0  # seconds past the deadline a call may take to give up (sleeps, teardown)


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


@pytest.fixture
def hub_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What serve() sets, for a listener of our own."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_TOKEN", WRITE_TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


@pytest.fixture(params=["silent", "trickle", "trickle-headers"])
def slow(request: pytest.FixtureRequest, hub_env: None,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowServer]:
    import huggingface_hub.utils

    # huggingface_hub (>= 2) loads its agent registry once a process, at its first request,
    # from the endpoint it read at import: loaded here, outside any deadline, it cannot use
    # up the short deadline before the request under test is sent.
    getattr(huggingface_hub.utils, "detect_agent", lambda: None)()
    with SlowServer(request.param) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    yield from serve(tmp_path, monkeypatch)


def timed(call: object) -> tuple[pytest.ExceptionInfo[CacheHubError], float]:
    started = time.monotonic()
    with pytest.raises(CacheHubError) as exc:
        call()  # type: ignore[operator]
    return exc, time.monotonic() - started


# --------------------------------------------------------------------------- metadata calls


def test_pull_and_push_to_a_slow_hub_end_at_the_deadline(slow: SlowServer,
                                                         tmp_path: Path) -> None:
    """27.4: HfApi.dataset_info (pull) and HfApi.create_repo (push) waited forever (killed at
    300 s). The pull and the push run at once, each in its own thread (a deadline is a
    thread's own), so the test waits out one deadline, not two."""
    make_cache(tmp_path / "a", shards=1)
    outcomes: dict[str, tuple[pytest.ExceptionInfo[CacheHubError], float]] = {}
    calls = {"pull": lambda: hub_sync.pull(REPO, tmp_path / "b", deadline=STALLED_DEADLINE),
             "push": lambda: hub_sync.push(REPO, tmp_path / "a", deadline=STALLED_DEADLINE)}
    failed: dict[str, BaseException] = {}

    def run(what: str) -> None:
        try:
            outcomes[what] = timed(calls[what])
        except BaseException as exc:  # pytest.raises' failure, said below per call
            failed[what] = exc

    threads = [threading.Thread(target=run, args=(what,), daemon=True) for what in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=STALLED_DEADLINE + 4 * SLACK)
    assert not failed, failed
    assert set(outcomes) == {"pull", "push"}, outcomes

    exc, seconds = outcomes["pull"]
    line = one_line(exc)
    assert seconds < STALLED_DEADLINE + SLACK, f"pull: {seconds}"
    assert line == (
        f"cache pull --repo {REPO}: the Hub at {slow.url} did not finish looking up dataset "
        f"repo {REPO} within the 0.5 s network deadline (--deadline); check the network and "
        f"HF_ENDPOINT, or give a longer deadline, and run again (a pull resumes where it "
        f"stopped)")
    assert any("/api/datasets/org/vectors" in r for r in slow.requests), slow.requests
    assert not (tmp_path / "b" / "vectors").exists()

    exc, seconds = outcomes["push"]
    line = one_line(exc)
    assert seconds < STALLED_DEADLINE + SLACK, f"push: {seconds}"
    assert line.startswith(f"cache push --repo {REPO}: the Hub at {slow.url} did not finish "
                           f"creating dataset repo {REPO} within the 0.5 s network deadline")
    assert "resumes" not in line
    assert any("/api/repos/create" in r for r in slow.requests), slow.requests


STEPS = [  # (push or pull, the request that stalls, what the line says was being done)
    ("pull", ("GET", "/api/datasets/{repo}/tree/"), "listing dataset repo"),
    ("pull", ("HEAD", "/datasets/{repo}/resolve/{sha}/vectors/" + FP_A + "/manifest.json.sha256"),
     f"fetching vectors/{FP_A}/manifest.json.sha256 from dataset repo"),
    ("pull", ("GET", "/datasets/{repo}/resolve/{sha}/vectors/" + FP_A + "/manifest.json.sha256"),
     f"downloading vectors/{FP_A}/manifest.json.sha256 from dataset repo"),
    ("push", ("GET", "/api/datasets/{repo}"), "looking up dataset repo"),
    ("push", ("POST", "/api/datasets/{repo}/preupload/"), "committing to dataset repo"),
]
#: Each case's own deadline, all waited out at once: room for the calls before the stalled
#: one on a loaded machine (each call has the whole deadline).
LATER_DEADLINE = 2


def test_every_later_hub_call_ends_at_the_deadline(standin: HubStandIn, tmp_path: Path
                                                   ) -> None:
    """Past the first call: the listing, a file's HEAD and GET, push's lookup and commit,
    each stalled silent and trickling. The ten cases run at once, each in its own thread
    against its own repo on one stand-in (a deadline is a thread's own), so the test waits
    out one deadline, not ten."""
    cases = [(f"{what} {method} {part} {kind} (repo org/later{i:02d})", f"org/later{i:02d}",
              what, (method, part), doing, kind)
             for i, ((what, (method, part), doing), kind) in enumerate(
                 (step, kind) for step in STEPS for kind in ("silent", "trickle"))]
    for _case, repo, what, _request, _doing, _kind in cases:
        make_cache(tmp_path / repo / "a", shards=1)
        if what == "pull":
            hub_sync.push(repo, tmp_path / repo / "a")
    for _case, repo, what, (method, part), _doing, kind in cases:
        sha = standin.repos[repo].head[0] if what == "pull" else ""
        standin.stall[(method, part.format(repo=repo, sha=sha))] = kind

    outcomes: dict[str, tuple[BaseException | None, float]] = {}

    def run(case: str, repo: str, what: str) -> None:
        started = time.monotonic()
        try:
            if what == "pull":
                hub_sync.pull(repo, tmp_path / repo / "b", deadline=LATER_DEADLINE)
            else:
                hub_sync.push(repo, tmp_path / repo / "a", deadline=LATER_DEADLINE)
        except BaseException as exc:  # judged below, per case
            outcomes[case] = (exc, time.monotonic() - started)
        else:
            outcomes[case] = (None, time.monotonic() - started)

    threads = [threading.Thread(target=run, args=(case, repo, what), daemon=True)
               for case, repo, what, _request, _doing, _kind in cases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=LATER_DEADLINE + 4 * SLACK)
    for case, repo, what, _request, doing, _kind in cases:
        assert case in outcomes, f"{case}: still running"
        error, seconds = outcomes[case]
        assert isinstance(error, CacheHubError), f"{case}: {error!r}"
        line = str(error)
        assert "\n" not in line, f"{case}: {line}"
        assert seconds < LATER_DEADLINE + SLACK, f"{case}: {seconds}"
        assert line.startswith(f"cache {what} --repo {repo}: the Hub at {standin.url} "
                               f"did not finish {doing} {repo} within the {LATER_DEADLINE} s "
                               f"network deadline (--deadline)"), f"{case}: {line}"


def test_a_hub_serving_a_web_page_is_named_so(hub_env: None, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """27.13: an HTML answer was "JSONDecodeError"."""
    with SlowServer("html") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        with pytest.raises(CacheHubError) as exc:
            hub_sync.pull(REPO, tmp_path / "b", deadline=DEADLINE)
    line = one_line(exc)
    assert line == (
        f"cache pull --repo {REPO}: the Hub at {server.url} answered with something that is "
        f"not JSON (a web page?) while looking up dataset repo {REPO} at {server.url}; check "
        f"HF_ENDPOINT points at a Hugging Face Hub")
    assert "JSONDecodeError" not in line


def test_an_unclassified_failure_names_the_repo_and_endpoint() -> None:
    """27.13: "fetching … from failed" left out what it was fetched from."""
    hub = HubConnection("pull", REPO, "http://127.0.0.1:9", None, None)
    error = hub._classify(RuntimeError("boom"), "fetching vectors/x/manifest.json from")
    assert str(error) == (
        f"cache pull --repo {REPO}: fetching vectors/x/manifest.json from dataset repo {REPO} "
        f"at http://127.0.0.1:9 failed (RuntimeError: boom); check HF_ENDPOINT and the "
        f"network, and run again")


# --------------------------------------------------------------------------- file downloads


def _shard(standin: HubStandIn) -> str:
    return next(p for p in standin.files(REPO) if p.endswith(".parquet"))


def _a_trickling_shard_download_ends_at_the_deadline_and_resumes(
        standin: HubStandIn, tmp_path: Path) -> None:
    """27.4: a 1-byte/s trickle on a shard GET hung (no overall deadline)."""
    make_cache(tmp_path / "a", shards=1)
    hub_sync.push(REPO, tmp_path / "a")
    shard = _shard(standin)
    standin.trickle[shard] = 0.05
    exc, seconds = timed(lambda: hub_sync.pull(REPO, tmp_path / "b", deadline=DEADLINE))
    line = one_line(exc)
    assert seconds < 2 * DEADLINE + SLACK, seconds  # the listing, then the shard: one each
    assert line.startswith(f"cache pull --repo {REPO}: the Hub at {standin.url} did not "
                           f"finish downloading {shard} from dataset repo {REPO} within the "
                           f"1.5 s network deadline (--deadline)")
    assert not list((tmp_path / "b").glob("vectors/*/shard-*"))
    [part] = (tmp_path / "b" / hub_sync.STAGING_DIR).rglob(f"*{Path(shard).name}*.part")
    kept = part.stat().st_size
    assert 0 < kept < len(standin.files(REPO)[shard])  # what arrived is kept, to resume

    del standin.trickle[shard]
    pulled = hub_sync.pull(REPO, tmp_path / "b", deadline=DEADLINE)
    assert pulled.fetched == 1 and pulled.resumed == kept
    assert standin.gets(shard)[-1][1] == f"bytes={kept}-"
    assert tree(tmp_path / "a" / "vectors") == tree(tmp_path / "b" / "vectors")


def test_a_shard_streaming_past_its_listed_size_is_cut_off(standin: HubStandIn,
                                                           tmp_path: Path) -> None:
    """27.8: a shard listed at 1.3 MB streamed gigabytes until the disk was full."""
    make_cache(tmp_path / "a", shards=1)
    hub_sync.push(REPO, tmp_path / "a")
    shard = _shard(standin)
    size = len(standin.files(REPO)[shard])
    standin.flood.add(shard)
    written: list[int] = []
    real_write = hub_sync.Fetcher._download

    def spy(self: hub_sync.Fetcher, *args: object) -> int:
        try:
            return real_write(self, *args)  # type: ignore[arg-type]
        finally:
            written.append(self.downloaded)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hub_sync.Fetcher, "_download", spy)
        with pytest.raises(CacheHubError) as exc:
            hub_sync.pull(REPO, tmp_path / "b")
    line = one_line(exc)
    assert line == (
        f"cache pull --repo {REPO}: {shard} from dataset repo {REPO} at {standin.url} runs "
        f"past its listed size ({size:,} bytes); it was deleted and nothing was committed; "
        f"check HF_ENDPOINT points at a Hugging Face Hub")
    assert written and written[-1] <= size + 200  # the sidecar's bytes, then at most the size
    assert not list((tmp_path / "b" / hub_sync.STAGING_DIR).rglob("*.part"))
    assert not (tmp_path / "b" / "vectors" / FP_A).exists() or not list(
        (tmp_path / "b" / "vectors" / FP_A).glob("shard-*"))


def test_a_shard_ending_short_of_its_listed_size_is_kept_to_resume(standin: HubStandIn,
                                                                    tmp_path: Path) -> None:
    """A body that ends cleanly but short (its own Content-Length shorter than the listing)
    is said so, and the next pull resumes after the bytes that came."""
    make_cache(tmp_path / "a", shards=1)
    hub_sync.push(REPO, tmp_path / "a")
    shard = _shard(standin)
    good = standin.files(REPO)[shard]
    standin.corrupt[shard] = good[:700]
    with pytest.raises(CacheHubError) as exc:
        hub_sync.pull(REPO, tmp_path / "b")
    assert one_line(exc) == (
        f"cache pull --repo {REPO}: {shard} from dataset repo {REPO} at {standin.url} ended "
        f"after 700 of its {len(good):,} bytes; run the pull again (it resumes there)")
    del standin.corrupt[shard]
    pulled = hub_sync.pull(REPO, tmp_path / "b")
    assert pulled.resumed == 700 and standin.gets(shard)[-1][1] == "bytes=700-"
    assert tree(tmp_path / "a" / "vectors") == tree(tmp_path / "b" / "vectors")


def _a_trickling_file_download_ends_at_the_deadline(standin: HubStandIn) -> None:
    """Model and dataset downloads (io/hub.download_file) run under the deadline too (the
    stand-in trickles org/files' file.json)."""
    started = time.monotonic()
    with pytest.raises(hub_files.HubUnreachable) as exc:
        hub_files.download_file("org/files", "file.json", repo_type="dataset",
                                deadline=DEADLINE)
    assert time.monotonic() - started < DEADLINE + SLACK
    assert str(exc.value) == (f"the Hub at {standin.url} did not finish downloading file.json "
                              f"of org/files within the 1.5 s network deadline")
    assert str(exc.value.cause) == (f"no complete answer from {standin.url} within the 1.5 s "
                                    f"network deadline")  # what the dataset's line quotes


def _a_dataset_from_a_trickling_hub_is_one_line_naming_the_endpoint(
        standin: HubStandIn) -> None:
    """The stand-in trickles org/data's data.json."""
    from pytest_retrieval_eval.data import dataset as dataset_mod
    from pytest_retrieval_eval.errors import DataError

    with pytest.raises(DataError) as exc:  # the run's deadline (default 600 s): 1 s here
        dataset_mod.resolve_dataset("longmemeval_s", repo="org/data", filename="data.json",
                                    deadline=1.0)
    assert one_line(exc) == (
        "dataset longmemeval_s could not be downloaded from the Hugging Face Hub repo org/data "
        f"(data.json): DeadlinePassed: no complete answer from {standin.url} within the 1 s "
        "network deadline; download it once with network access, or pass the path to a local "
        "copy")


def test_trickling_downloads_end_at_their_deadlines(standin: HubStandIn, tmp_path: Path
                                                    ) -> None:
    """Three downloads that trickle, each waiting out its own deadline, run at once on one
    stand-in (each its own repo and file; a deadline is a thread's own): a cache shard
    (then resumed), a file through io/hub.download_file, a named dataset. A failure names
    its case."""
    # Set before the threads start: the stand-in's handlers read these while they serve.
    standin.repos["org/files"] = Repo()
    standin.commit("org/files", {"file.json": b"[" + b" " * 5000 + b"]"})
    standin.trickle["file.json"] = 0.05
    standin.repos["org/data"] = Repo()
    standin.commit("org/data", {"data.json": b"[" + b" " * 5000 + b"]"})
    standin.stall[("GET", "/org/data/resolve/main/data.json")] = "trickle"
    cases: dict[str, Callable[[], None]] = {
        "shard": lambda: _a_trickling_shard_download_ends_at_the_deadline_and_resumes(
            standin, tmp_path),
        "file": lambda: _a_trickling_file_download_ends_at_the_deadline(standin),
        "dataset": lambda: _a_dataset_from_a_trickling_hub_is_one_line_naming_the_endpoint(
            standin),
    }
    failed: dict[str, BaseException] = {}

    def run(case: str) -> None:
        try:
            cases[case]()
        except BaseException as exc:  # said below, with its case
            failed[case] = exc

    threads = {case: threading.Thread(target=run, args=(case,), daemon=True) for case in cases}
    for thread in threads.values():
        thread.start()
    for thread in threads.values():
        thread.join(timeout=120)
    assert not [c for c, t in threads.items() if t.is_alive()], "a case is still running"
    assert not failed, "; ".join(f"{case}: {exc!r}" for case, exc in failed.items())


# --------------------------------------------------------------------------- the deadline


def test_outside_a_deadline_the_client_is_the_librarys(standin: HubStandIn) -> None:
    """The factory installed for deadlines leaves calls made outside one as they were: the
    library's own request hook still runs, and no timeout is added."""
    import huggingface_hub

    with hub_deadline.bounded(5):
        inside = huggingface_hub.get_session().get(f"{standin.url}/api/datasets/{REPO}")
    assert 0 < inside.request.extensions["timeout"]["read"] <= 5  # capped at the time left
    assert hub_deadline.current() is None
    response = huggingface_hub.get_session().get(f"{standin.url}/api/datasets/{REPO}")
    assert response.status_code == 401 or response.status_code == 404
    assert response.request.extensions.get("timeout", {}).get("read") is None
    assert "x-amzn-trace-id" in {k.lower() for k in response.request.headers}


def test_nested_deadlines_keep_the_sooner() -> None:
    with hub_deadline.bounded(1) as outer, hub_deadline.bounded(100) as inner:
        assert inner.at == outer.at and inner.seconds == 1
    with hub_deadline.bounded(100) as outer, hub_deadline.bounded(1) as inner:
        assert inner.at < outer.at


# --------------------------------------------------------------------------- the options


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_deadline_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_retrieval_eval.cli import console as cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["cache", "pull", "--repo", REPO, "--deadline", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--deadline" in err and err.count("\n") == 0, err


def test_the_plugin_option_and_its_ini_twin(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nretrieval_eval_network_deadline = inf\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--retrieval-eval", "--no-model")
    assert result.ret == 4
    assert "retrieval_eval_network_deadline" in result.stderr.str()
    assert "not a finite number" in result.stderr.str()


@pytest.mark.parametrize("kind", ["silent", "trickle"])
def test_cache_repo_from_a_slow_hub_is_one_line_at_the_deadline(
        pytester: pytest.Pytester, hub_env: None, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, kind: str) -> None:
    """27.4: --retrieval-eval-cache-repo hung (killed at 120 s). The deadline comes from the
    ini twin here, the option from the command line in the CLI's test above."""
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(tmp_path / "cache"))
    pytester.makeini("[pytest]\nretrieval_eval_network_deadline = 0.5\n")
    with SlowServer(kind) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        started = time.monotonic()
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--retrieval-eval", "--no-model",
            "--retrieval-eval-model", "nobody/none", "--retrieval-eval-cache-repo", REPO)
        seconds = time.monotonic() - started
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, text
    lines = [line for line in joined_errors(text) if line.strip()]
    assert len(lines) == 1, text
    assert lines[0] == (
        f"ERROR: cache pull --repo {REPO}: the Hub at {server.url} did not finish looking up "
        f"dataset repo {REPO} within the 0.5 s network deadline "
        f"(--retrieval-eval-network-deadline); check the network and HF_ENDPOINT, or give a "
        f"longer deadline, and run again (a pull resumes where it stopped)")
    assert seconds < 30, seconds


@pytest.mark.parametrize("kind", ["silent", "trickle"])
def test_the_run_deadline_bounds_a_dataset_download(
        pytester: pytest.Pytester, hub_env: None, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, kind: str) -> None:
    """27.4: --retrieval-eval-network-deadline reaches a named dataset's download too (the
    model lane's, which may download): a Hub that never answers, or trickles, ends the run
    in one line near the deadline, not at the library's default."""
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(tmp_path / "cache"))
    with SlowServer(kind) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        started = time.monotonic()
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--retrieval-eval", "--retrieval-eval-data",
            "longmemeval_s", "--retrieval-eval-network-deadline", "0.5")
        seconds = time.monotonic() - started
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, text
    errors = [line for line in joined_errors(text) if line.startswith("ERROR:")]
    assert len(errors) == 1 and "0.5 s network deadline" in errors[0], text
    assert seconds < 30, seconds
