"""The LongMemEval-shaped data generator: determinism, shapes, the shipped sample, full-M."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.cli import main as cli_main
from pytest_retrieval_eval.data.dataset import SAMPLE_PATH
from pytest_retrieval_eval.data.generator import instances as generator
from pytest_retrieval_eval.data.generator.instances import (
    FULL_M,
    SAMPLE,
    GeneratorConfig,
    iter_instances,
    write_dataset,
)
from tests.support.wrapped import unwrap

SHIPPED = SAMPLE_PATH
TYPES = {"single-session-user", "single-session-assistant", "single-session-preference",
         "temporal-reasoning", "knowledge-update", "multi-session"}
KEYS = {"question_id", "question_type", "question", "answer", "question_date",
        "haystack_session_ids", "haystack_dates", "haystack_sessions", "answer_session_ids"}
DATE_RE = re.compile(r"\d{4}/\d{2}/\d{2} \((Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) \d{2}:\d{2}")
QID_RE = re.compile(r"(gpt4_)?[0-9a-f]{8}(_abs)?")
SID_RE = re.compile(r"sharegpt_[0-9A-Za-z]{7}_\d|ultrachat_\d+|answer_[0-9a-f]{8}(_\d+)?|"
                    r"[0-9a-f]{8}_\d+")
SMALL_M = FULL_M.scaled(instances=20, sessions=60)


def parse_date(text: str) -> datetime:
    return datetime.strptime(text[:10] + text[-6:], "%Y/%m/%d %H:%M")


def rendered(turns: list[dict[str, Any]]) -> str:
    return "\n".join(f"{t['role']}: {t['content']}" for t in turns)


def slots(x: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(session id, turns) per history slot."""
    return list(zip(x["haystack_session_ids"], x["haystack_sessions"], strict=True))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def sample() -> list[dict[str, Any]]:
    return list(json.loads(SHIPPED.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def small_m() -> list[dict[str, Any]]:
    return list(iter_instances(SMALL_M))


# --------------------------------------------------------------------------- determinism
def test_shipped_sample_is_the_sample_preset_regenerated(tmp_path: Path) -> None:
    out = tmp_path / "sample.json"
    write_dataset(SAMPLE, out)
    assert sha(out) == sha(SHIPPED), (
        "regenerate: python -m pytest_retrieval_eval.generator --preset sample " + str(SHIPPED))


def test_same_config_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    config = FULL_M.scaled(instances=8, sessions=30)
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    size = write_dataset(config, a)
    write_dataset(config, b)
    write_dataset(config.scaled(seed=config.seed + 1), c)
    assert size == a.stat().st_size
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_iter_instances_matches_the_written_file(tmp_path: Path) -> None:
    config = SAMPLE.scaled(instances=6, sessions=12)
    out = tmp_path / "x.json"
    write_dataset(config, out)
    assert json.loads(out.read_text(encoding="utf-8")) == list(iter_instances(config))


def test_iter_instances_is_a_generator() -> None:
    assert inspect.isgenerator(iter_instances(SAMPLE))
    assert next(iter_instances(SAMPLE))["question_id"]


def test_writer_serializes_instance_by_instance(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    events: list[str] = []
    real_iter, real_dumps = generator.iter_instances, json.dumps

    def spy_iter(config: GeneratorConfig) -> Iterator[dict[str, Any]]:
        for instance in real_iter(config):
            events.append("made")
            yield instance

    def spy_dumps(obj: Any, **kwargs: Any) -> str:
        assert isinstance(obj, dict) and "question_id" in obj   # one instance, never a list
        events.append("dumped")
        return real_dumps(obj, **kwargs)

    monkeypatch.setattr(generator, "iter_instances", spy_iter)
    monkeypatch.setattr(json, "dumps", spy_dumps)
    config = SAMPLE.scaled(instances=6, sessions=10)
    write_dataset(config, tmp_path / "x.json")
    assert events == ["made", "dumped"] * config.n_instances


def test_writer_is_atomic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "data.json"
    out.write_text("old", encoding="utf-8")
    real_iter = generator.iter_instances

    def failing(config: GeneratorConfig) -> Iterator[dict[str, Any]]:
        it = real_iter(config)
        yield next(it)
        raise RuntimeError("boom")

    monkeypatch.setattr(generator, "iter_instances", failing)
    with pytest.raises(RuntimeError):
        write_dataset(SAMPLE, out)
    assert out.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["data.json"]


def test_cli_writes_a_scaled_preset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sub" / "m.json"
    assert cli_main(["generate", "--preset", "full_m", "--instances", "7", "--sessions", "15",
                     "--seed", "3", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert len(data) == 7
    assert {x["question_type"] for x in data} >= TYPES - {"single-session-preference"}
    # 15 is under full_m's floor (8 persona, 12 topical, 2 filler sessions and the
    # evidence): it says so, and what the histories hold (issue 48, item 7)
    floor, line = unwrap(capsys.readouterr().out).splitlines()
    assert floor.startswith("generate: --sessions 15 is under the preset's floor: a full_m "
                            "history holds at least 23 sessions")
    assert min(len(x["haystack_sessions"]) for x in data) >= 23
    assert line.startswith(f"generate: wrote {out}: 7 instances, ")
    assert cli_main(["generate", "--preset", "full_m", "--instances", "7", "--sessions", "30",
                     "--seed", "3", str(out)]) == 0
    line, = unwrap(capsys.readouterr().out).splitlines()  # above the floor: no word of it
    assert line.startswith(f"generate: wrote {out}: 7 instances, ")


def test_both_spellings_write_the_shipped_sample(tmp_path: Path) -> None:
    """``retrieval-eval generate`` and the documented ``python -m
    pytest_retrieval_eval.generator`` write the bundled sample byte for byte."""
    for argv, name in (([sys.executable, "-m", "pytest_retrieval_eval.generator"], "a.json"),
                       ([sys.executable, "-m", "pytest_retrieval_eval.cli", "generate"],
                        "b.json")):
        done = subprocess.run([*argv, "--preset", "sample", str(tmp_path / name)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert sha(tmp_path / name) == sha(SHIPPED)
        assert unwrap(done.stdout).startswith(f"generate: wrote {tmp_path / name}: 18 instances")


def test_generate_past_the_pool_limit_is_one_line_naming_the_limit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27.12: a size whose filler pool is past the unique ids is one line before
    anything is written (it raised ValueError: filler_pool_size is too large), with the
    most instances that fit; that many do fit, one more does not."""
    out = tmp_path / "big.json"
    assert cli_main(["generate", "--preset", "full_m", "--instances", "10000", "--sessions",
                     "500", "--no-progress", str(out)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and not out.exists()
    most = generator.most_instances(FULL_M, 500)
    assert err == (
        "retrieval-eval: error: generate: --preset full_m at 10000 instances of 500 sessions "
        "needs 600,240 filler sessions, past the generator's limit of 599,999 (their ids "
        f"must stay unique); pass --instances {most} or fewer at 500 sessions, or fewer "
        "--sessions\n")
    assert generator.fits_the_pool(FULL_M.scaled(instances=most, sessions=500))
    assert not generator.fits_the_pool(FULL_M.scaled(instances=most + 1, sessions=500))
    assert cli_main(["generate", "--preset", "full_m", "--sessions", "200000",
                     "--no-progress", str(out)]) == 4
    assert capsys.readouterr().err.endswith("; pass fewer --sessions\n")
    assert generator.most_instances(FULL_M, 200_000) == 0


def test_generate_refusals_are_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert cli_main(["generate", str(blocker / "out.json")]) == 4
    assert capsys.readouterr().err == (
        f"retrieval-eval: error: generate: {blocker / 'out.json'} cannot be written (File "
        f"exists); {blocker} is a file, not a folder; give a path in a folder\n")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code = cli_main(["generate", str(locked / "out.json")])
    finally:
        locked.chmod(0o700)
    err = capsys.readouterr().err
    if os.geteuid() != 0:  # root writes anywhere
        assert code == 4 and err.startswith(
            f"retrieval-eval: error: generate: {locked / 'out.json'} cannot be written (")
        assert err.endswith(f"; permission denied; make {locked} writable for this user\n")
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["generate", "--instances", "0", str(tmp_path / "x.json")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "retrieval-eval generate: error: argument --instances: 0 must be at least 1; see "
        "retrieval-eval generate --help\n")
    assert not (tmp_path / "x.json").exists()


# --------------------------------------------------------------------------- shapes
def check_shapes(data: list[dict[str, Any]]) -> None:
    qids = [x["question_id"] for x in data]
    assert len(set(qids)) == len(qids)
    contents: dict[str, str] = {}
    for x in data:
        assert set(x) == KEYS
        assert QID_RE.fullmatch(x["question_id"])
        assert x["question_type"] in TYPES
        assert isinstance(x["question"], str) and x["question"].endswith("?")
        assert isinstance(x["answer"], (str, int)) and not isinstance(x["answer"], bool)
        assert DATE_RE.fullmatch(x["question_date"])
        ids, dates, sessions = (x["haystack_session_ids"], x["haystack_dates"],
                                x["haystack_sessions"])
        assert len(ids) == len(dates) == len(sessions) > 0
        assert all(SID_RE.fullmatch(i) for i in ids)
        assert all(DATE_RE.fullmatch(d) for d in dates)
        moments = [parse_date(d) for d in dates]
        assert moments == sorted(moments) and moments[-1] < parse_date(x["question_date"])
        gold = x["answer_session_ids"]
        assert 1 <= len(gold) <= 6 and len(set(gold)) == len(gold)
        assert set(gold) <= set(ids)
        # LongMemEval's ids: answer_<hash> for one evidence session, answer_<hash>_<n> for more
        single = x["question_type"].startswith("single-session")
        assert all(re.fullmatch(r"answer_[0-9a-f]{8}" + ("" if single else r"_\d+"), g)
                   for g in gold)
        assert {i for i in ids if "answer" in i} == set(gold)
        for sid, turns in slots(x):
            assert turns and [t["role"] for t in turns] == ["user", "assistant"] * (len(turns) // 2)
            for t in turns:
                assert set(t) <= {"role", "content", "has_answer"}
                assert isinstance(t["content"], str) and t["content"]
                if sid not in gold:                      # only evidence sessions carry the key
                    assert "has_answer" not in t
                elif t["role"] == "user":                # ... on every user turn of them
                    assert t["has_answer"] in (True, False)
                else:
                    assert t.get("has_answer", True) is True
            text = json.dumps(turns)
            assert contents.setdefault(sid, text) == text   # an id always means one content


def test_sample_shapes(sample: list[dict[str, Any]]) -> None:
    check_shapes(sample)


def test_small_full_m_shapes(small_m: list[dict[str, Any]]) -> None:
    check_shapes(small_m)


# --------------------------------------------------------------------------- the sample
def test_sample_counts(sample: list[dict[str, Any]]) -> None:
    assert SHIPPED.stat().st_size < 3_000_000
    assert Counter(x["question_type"] for x in sample) == dict(SAMPLE.type_counts)
    assert {x["question_type"] for x in sample} == TYPES
    abstention = [x for x in sample if x["question_id"].endswith("_abs")]
    assert len(abstention) == SAMPLE.n_abstention >= 2
    assert all(x["answer_session_ids"] for x in abstention)
    assert len({x["question_type"] for x in abstention}) == len(abstention)


def test_sample_gold_and_labels(sample: list[dict[str, Any]]) -> None:
    unlabeled = 0
    for x in sample:
        gold = set(x["answer_session_ids"])
        labelled = {sid for sid, turns in slots(x) if any(t.get("has_answer") for t in turns)}
        assert labelled <= gold                          # no evidence outside the gold
        if not labelled:
            unlabeled += 1
            continue
        assert labelled == gold
        roles = {t["role"] for turns in x["haystack_sessions"] for t in turns
                 if t.get("has_answer")}
        want = "assistant" if x["question_type"] == "single-session-assistant" else "user"
        assert roles == {want}
    assert unlabeled == SAMPLE.unlabeled_instances


def test_sample_multi_gold_updates_and_time(sample: list[dict[str, Any]]) -> None:
    by_type: dict[str, list[dict[str, Any]]] = {}
    for x in sample:
        by_type.setdefault(x["question_type"], []).append(x)
    assert all(2 <= len(x["answer_session_ids"]) <= 4 for x in by_type["multi-session"])
    for x in by_type["knowledge-update"]:
        old, new = (x["haystack_session_ids"].index(g) for g in x["answer_session_ids"])
        assert old < new
    checked = 0
    for x in by_type["temporal-reasoning"]:
        when = [parse_date(x["haystack_dates"][x["haystack_session_ids"].index(g)]).date()
                for g in x["answer_session_ids"]]
        if m := re.fullmatch(r"(\d+) days", str(x["answer"])):
            assert (when[1] - when[0]).days == int(m.group(1))
            checked += 1
        elif m := re.fullmatch(r"(\d+) weeks ago", str(x["answer"])):
            assert (parse_date(x["question_date"]).date() - when[0]).days // 7 == int(m.group(1))
            checked += 1
    assert checked >= 2
    for x in by_type["single-session-user"] + by_type["single-session-assistant"]:
        assert len(x["answer_session_ids"]) == 1


def test_sample_repeats_shared_filler_and_oversize(sample: list[dict[str, Any]]) -> None:
    with_repeats = [x for x in sample
                    if len(set(x["haystack_session_ids"])) < len(x["haystack_session_ids"])]
    assert len(with_repeats) >= len(sample) // 2
    holders: dict[str, set[str]] = {}
    for x in sample:
        for sid in x["haystack_session_ids"]:
            holders.setdefault(sid, set()).add(x["question_id"])
    shared = [sid for sid, qs in holders.items() if len(qs) > 1]
    assert len(shared) > 50
    assert all(sid.startswith(("sharegpt_", "ultrachat_")) for sid in shared)
    big = {sid for x in sample for sid, turns in slots(x)
           if len(rendered(turns).encode()) > 100_000}
    assert len(big) == SAMPLE.oversize_sessions


def test_sample_questions_vary_in_wording(sample: list[dict[str, Any]]) -> None:
    """Some questions reuse the evidence's words, some paraphrase them."""
    words = re.compile(r"[a-z]{4,}")
    overlaps = []
    for x in sample:
        if x["question_id"].endswith("_abs"):
            continue
        evidence = " ".join(t["content"] for sid, turns in slots(x)
                            if sid in x["answer_session_ids"] for t in turns
                            if t.get("has_answer"))
        q = set(words.findall(x["question"].lower()))
        if evidence and q:
            overlaps.append(len(q & set(words.findall(evidence.lower()))) / len(q))
    assert min(overlaps) < 0.3 and max(overlaps) > 0.5


# --------------------------------------------------------------------------- full M
def test_full_m_preset_matches_longmemeval_m() -> None:
    assert FULL_M.n_instances == 500 and FULL_M.n_abstention == 30
    assert dict(FULL_M.type_counts) == {
        "multi-session": 133, "temporal-reasoning": 133, "knowledge-update": 78,
        "single-session-user": 70, "single-session-assistant": 56,
        "single-session-preference": 30}
    assert FULL_M.sessions_per_history == 500
    assert FULL_M.oversize_sessions > 0 and FULL_M.repeat_fraction == pytest.approx(0.9, 0.01)
    assert FULL_M.scaled() == FULL_M


@pytest.mark.parametrize("n", [6, 20, 50, 137])
def test_scaled_counts(n: int) -> None:
    config = FULL_M.scaled(instances=n, sessions=40)
    counts = dict(config.type_counts)
    assert config.n_instances == n and set(counts) == TYPES and min(counts.values()) >= 1
    assert config.n_abstention >= (1 if n > 6 else 0)   # 6: one each, none can abstain
    assert all(a < counts[t] for t, a in config.abstention_counts)
    assert config.sessions_per_history == 40 and config.filler_pool_size >= 160


def test_small_full_m(small_m: list[dict[str, Any]]) -> None:
    assert Counter(x["question_type"] for x in small_m) == dict(SMALL_M.type_counts)
    assert sum(x["question_id"].endswith("_abs") for x in small_m) == SMALL_M.n_abstention
    lengths = [len(x["haystack_session_ids"]) for x in small_m]
    assert 0.9 * 60 <= sum(lengths) / len(lengths) <= 1.1 * 60
    repeats = sum(len(set(x["haystack_session_ids"])) < len(x["haystack_session_ids"])
                  for x in small_m)
    assert repeats >= 0.7 * len(small_m)
    big = [turns for x in small_m for turns in x["haystack_sessions"]
           if len(rendered(turns).encode()) > 100_000]
    assert len(big) == SMALL_M.oversize_sessions >= 1
    sizes = sorted(len(json.dumps(turns)) for x in small_m for turns in x["haystack_sessions"])
    mean = sum(sizes) / len(sizes)
    assert 8_000 < mean < 14_000                     # ~11 KB of JSON per session, as in M
    assert sizes[len(sizes) // 2] < mean             # heavy right tail


def test_oversize_sessions_follow_the_config() -> None:
    config = SAMPLE.scaled(instances=6, sessions=10)
    for count in (0, 3):
        cfg = GeneratorConfig(**{**config.__dict__, "oversize_sessions": count})
        big = {sid for x in iter_instances(cfg)
               for sid, turns in slots(x) if len(rendered(turns).encode()) > 100_000}
        assert len(big) == count


def test_impossible_abstention_is_refused() -> None:
    bad = GeneratorConfig(abstention_counts=(("single-session-preference", 1),))
    with pytest.raises(ValueError, match="abstention_counts"):
        next(iter_instances(bad))


def test_apportion_gives_each_nonzero_weight_one_when_it_can() -> None:
    from pytest_retrieval_eval.data.generator.instances import _apportion

    assert _apportion([0, 2, 100, 2, 2, 0], 4) == [0, 1, 1, 1, 1, 0]
    assert _apportion([0, 2, 100, 2, 2, 0], 10) == [0, 1, 7, 1, 1, 0]
    assert _apportion([3, 0, 1], 2) == [1, 0, 1]
    assert sum(_apportion([5, 0, 5], 7)) == 7


def test_generate_writes_through_a_symlink_and_refuses_a_fifo(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23.3: the output is written at a symlink's target; a FIFO is refused unopened."""
    real = tmp_path / "real.json"
    real.write_text('[\n{"question_id": "old"}\n]\n')  # an earlier generated one (43.11)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert cli_main(["generate", "--preset", "sample", "--no-progress", str(link)]) == 0
    assert link.is_symlink() and sha(real) == sha(SHIPPED)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    capsys.readouterr()
    assert cli_main(["generate", "--no-progress", str(fifo)]) == 4
    assert capsys.readouterr().err == (
        f"retrieval-eval: error: generate: {fifo} cannot be written (it is a FIFO (named pipe), "
        f"not a regular file); give the path of a regular file\n")
