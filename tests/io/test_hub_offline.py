"""Hugging Face Hub access fails fast and points at what works; ``--no-model`` opens no socket.

The Hub here is a server on 127.0.0.1 (``HF_ENDPOINT``) that never answers, or a port that
refuses: the run must end in ONE line after ONE request (huggingface_hub's own loop retries
five times, ~25 s, printing a line per retry), and, since the bundled sample's vectors make it
work, that line names the ``--no-model`` command.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_retrieval_eval.data.dataset import DEFAULT_REPO, KNOWN, SAMPLE_PATH
from tests.support.reliability_support import joined_errors

pytest_plugins = ["pytester"]

USAGE_ERROR = 4
SAMPLE_USABLE = sum(1 for i in json.loads(SAMPLE_PATH.read_text(encoding="utf-8"))
                    if not i["question_id"].endswith("_abs"))
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class SilentServer:
    """Accepts connections on 127.0.0.1, reads each request line, never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.requests: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)
            conn.settimeout(5)
            try:
                self.requests.append(conn.recv(4096).split(b"\r\n", 1)[0].decode())
            except OSError:
                self.requests.append("")

    def file_requests(self) -> list[str]:
        """Requests for repository files: huggingface_hub >= 2 also asks, once a day, for its
        agent registry (``/api/agent-harnesses``, its own 3 s limit), which is not ours."""
        return [r for r in self.requests if "/resolve/" in r]

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def hub_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty Hugging Face cache, an empty plugin cache, network allowed, no proxy."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_ETAG_TIMEOUT", raising=False)
    monkeypatch.setenv("RETRIEVAL_EVAL_CACHE_DIR", str(tmp_path / "cache"))
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def known_agent_registry(hf_home: Path) -> None:
    """huggingface_hub's agent registry, fetched today (an empty one): a home that has used
    the Hub within a day has it, and its request (its own 3 s limit, not ours) is not sent.
    One test (the first) keeps the empty home of a first use: it waits for it."""
    hf_home.mkdir(parents=True, exist_ok=True)
    (hf_home / ".agent_harnesses.json").write_text(
        json.dumps({"standardEnvVars": [], "harnesses": {}}), encoding="utf-8")


def _one_error_line(result: pytest.RunResult) -> str:
    return _one_line_of(result.ret, result.stdout.str() + result.stderr.str())


def _one_line_of(ret: int | pytest.ExitCode, text: str, case: str = "") -> str:
    said = f"{case}: {text}" if case else text
    assert ret == USAGE_ERROR, said
    assert "Retry" not in text and "Traceback" not in text, said
    lines = [line for line in joined_errors(text) if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), said
    return lines[0]


def test_model_lane_with_a_refusing_hub_is_one_line(
    pytester: pytest.Pytester, hub_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now: connections are refused
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--retrieval-eval",
                                           "--retrieval-eval-k", "1,5")
    line = _one_error_line(result)
    assert "unreachable" in line and "`pytest --retrieval-eval --no-model`" in line, line


def test_a_silent_hub_fails_after_one_request(pytester: pytest.Pytester, hub_env: Path
                                              ) -> None:
    """Three runs against a Hub that never answers, each its own child pytest, its own
    silent server (one request each) and its own Hugging Face home, started at once so the
    test waits out their waits (huggingface_hub's 1 s HF_HUB_ETAG_TIMEOUT; on a home's first
    use, its agent registry's own 3 s) together:

    * model lane: the model's file is unreachable; the bundled sample's vectors make the
      model-free lane work, so the line names ``--no-model`` (an empty home: first use);
    * no hint: data no cached vectors cover: the line names no ``--no-model``;
    * named dataset: longmemeval_oracle could not be downloaded.
    """
    data = pytester.path / "other.json"
    instances = json.loads(SAMPLE_PATH.read_text(encoding="utf-8"))
    instances[0]["question"] = "A question no prep has embedded?"
    data.write_text(json.dumps(instances), encoding="utf-8")
    cases = {"model lane": ([], False), "no hint": (["--retrieval-eval-data", str(data)], True),
             "named dataset": (["--retrieval-eval-data", "longmemeval_oracle"], True)}
    servers: dict[str, SilentServer] = {}
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for n, (case, (args, registry)) in enumerate(cases.items()):
            servers[case] = server = SilentServer()
            home = hub_env / f"case{n}"
            if registry:
                known_agent_registry(home / "hf")
            env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{server.port}",
                   "HF_HUB_ETAG_TIMEOUT": "1",  # the one request's wait, kept short here
                   "HF_HOME": str(home / "hf"), "RETRIEVAL_EVAL_CACHE_DIR": str(home / "cache")}
            where = pytester.path / f"case{n}"
            where.mkdir()
            procs[case] = subprocess.Popen(
                [sys.executable, "-m", "pytest", f"--basetemp={home / 'basetemp'}",
                 "-p", "no:cacheprovider", "--retrieval-eval", *args],
                cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True)
        outcomes = {case: (proc.communicate(timeout=240)[0], proc.returncode)
                    for case, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for server in servers.values():
            server.close()

    case = "model lane"
    line = _one_line_of(outcomes[case][1], outcomes[case][0], case)
    assert "'BAAI/bge-small-en-v1.5'" in line and "unreachable" in line, f"{case}: {line}"
    # The bundled sample's vectors make the model-free lane work: the line says how.
    assert line.endswith("`pytest --retrieval-eval --no-model`"), f"{case}: {line}"
    # One request for the model's file, no retry loop.
    assert servers[case].file_requests() == [
        "HEAD /BAAI/bge-small-en-v1.5/resolve/main/onnx/model.onnx HTTP/1.1"], case

    case = "no hint"
    line = _one_line_of(outcomes[case][1], outcomes[case][0], case)
    assert "unreachable" in line and "--no-model" not in line, f"{case}: {line}"
    assert len(servers[case].file_requests()) == 1, f"{case}: {servers[case].requests}"

    case = "named dataset"
    line = _one_line_of(outcomes[case][1], outcomes[case][0], case)
    assert "longmemeval_oracle could not be downloaded" in line, f"{case}: {line}"
    assert len(servers[case].file_requests()) == 1, f"{case}: {servers[case].requests}"


# ------------------------------------------------------------------ --no-model: no socket


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any socket use fails, and is recorded (a library may swallow the error)."""
    used: list[str] = []

    def refuse(name: str) -> object:
        def call(*args: object, **kwargs: object) -> object:
            used.append(f"{name}{args[1:] if name == 'connect' else args}")
            raise OSError(f"test: no socket may be used ({name})")
        return call

    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    return used


def _cache_dataset(hf_home: Path, name: str) -> None:
    """Put the bundled sample in the Hugging Face cache as dataset ``name`` would be."""
    repo = hf_home / "hub" / f"datasets--{DEFAULT_REPO.replace('/', '--')}"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    shutil.copyfile(SAMPLE_PATH, snapshot / KNOWN[name])


def test_no_model_named_dataset_comes_from_the_local_hub_cache_without_a_socket(
    pytester: pytest.Pytester, hub_env: Path, no_sockets: list[str]
) -> None:
    _cache_dataset(hub_env / "hf", "longmemeval_s")
    result = pytester.runpytest("-p", "no:cacheprovider", "--retrieval-eval", "--no-model",
                                "--retrieval-eval-data", "longmemeval_s")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=SAMPLE_USABLE)
    result.stdout.fnmatch_lines(["dataset: longmemeval_s *"])
    assert no_sockets == []


def test_no_model_named_dataset_not_cached_is_one_line_without_a_socket(
    pytester: pytest.Pytester, hub_env: Path, no_sockets: list[str]
) -> None:
    result = pytester.runpytest("-p", "no:cacheprovider", "--retrieval-eval", "--no-model",
                                "--retrieval-eval-data", "longmemeval_m")
    line = _one_error_line(result)
    assert "longmemeval_m" in line and "--no-model never downloads" in line, line
    assert no_sockets == []


def test_no_hint_when_a_retriever_cannot_use_the_cached_vectors(
    pytester: pytest.Pytester, hub_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vipune embeds with bge-small: the bundled MiniLM vectors would not serve it, so the
    line names no --no-model command that would only fail next."""
    from tests.support.reliability_support import fake_vipune_wrapper

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    binary = fake_vipune_wrapper(hub_env / "bin")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--retrieval-eval", "--retrieval-eval-retriever",
        "hybrid,vipune", "--retrieval-eval-vipune", str(binary))
    line = _one_error_line(result)
    assert "'BAAI/bge-small-en-v1.5'" in line and "--no-model" not in line, line
    # ...whereas without vipune the same run names it.
    result = pytester.runpytest("-p", "no:cacheprovider", "--retrieval-eval")
    assert _one_error_line(result).endswith("`pytest --retrieval-eval --no-model`")


def test_the_no_model_hint_writes_path_options_in_the_equals_form(
    pytester: pytest.Pytester, hub_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README says write path options with ``=`` (a space form's value may move pytest's
    rootdir off the ini file): the command the line hands over does so, quoted for the shell."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = hub_env / "my cache"
    result = pytester.runpytest("-p", "no:cacheprovider", "--retrieval-eval",
                                           f"--retrieval-eval-cache={cache}")
    line = _one_error_line(result)
    assert line.endswith(
        f"`pytest --retrieval-eval --no-model --retrieval-eval-cache='{cache}'`"), line


@pytest.mark.parametrize("name, value", [("HF_HUB_ETAG_TIMEOUT", "0.5"),
                                         ("HF_HUB_DOWNLOAD_TIMEOUT", "")])
def test_a_setting_huggingface_hub_cannot_read_is_one_line_naming_it(
    pytester: pytest.Pytester, hub_env: Path, monkeypatch: pytest.MonkeyPatch,
    name: str, value: str
) -> None:
    # huggingface_hub int()-parses both when imported: the library's traceback, before the
    # check in io/hub_settings.py; the model lane's first Hub call is where it is imported.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv(name, value)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--retrieval-eval")
    line = _one_error_line(result)
    assert f"{name}={value!r}" in line and "whole number" in line, line


@given(st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
               max_size=6))
def test_the_settings_check_refuses_exactly_what_the_library_cannot_parse(
    value: str) -> None:
    # huggingface_hub is imported under the suite's own settings first: it reads them into
    # its constants once a process, and a value tried here must not become this worker's
    # Hub timeouts for every later test
    import huggingface_hub  # noqa: F401

    from pytest_retrieval_eval.io.hub_settings import HubSettingError, library

    try:
        int(value)  # what huggingface_hub/constants.py does with it
        parses = True
    except ValueError:
        parses = False
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_ETAG_TIMEOUT", value)
        patch.delenv("HF_HUB_DOWNLOAD_TIMEOUT", raising=False)
        from pytest_retrieval_eval.io.hub import PROBE_TIMEOUT, probe_timeout

        if parses:
            assert library().__name__ == "huggingface_hub"
            # the plugin's own probe reads the variable as the library does, once
            assert probe_timeout() == (int(value) if int(value) > 0 else PROBE_TIMEOUT)
        else:
            with pytest.raises(HubSettingError, match="HF_HUB_ETAG_TIMEOUT="):
                library()
            with pytest.raises(HubSettingError, match="HF_HUB_ETAG_TIMEOUT="):
                probe_timeout()
