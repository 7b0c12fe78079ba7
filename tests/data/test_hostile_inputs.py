"""Hostile files end in one line, in bounded work (issue 11, "Reliability II").

Memory bounds are asserted the only way that cannot be flaky: the command runs in a child
process under ``RLIMIT_AS`` (an address-space cap). Before the fixes, each of these cases
needed gigabytes (or never ended); under the cap they became a ``MemoryError`` traceback.
"""

from __future__ import annotations

import io
import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_retrieval_eval.cli.console import ProgressBar
from pytest_retrieval_eval.data import dataset, json_stream
from pytest_retrieval_eval.data.pairs import DuplicateKeys, Rejection, parse_instance
from pytest_retrieval_eval.errors import DataError
from tests.support.lme_factory import make_instance, write_dataset
from tests.support.model_factory import make_model_dir
from tests.support.reliability_support import (
    partials,
    run_plugin,
    subprocess_env,
    usage_error_line,
)

#: The address-space cap of the child: enough for Python, numpy and the JSON reader; far
#: below what the hostile files cost without the fixes (depth 100,000: over 24 GB).
CAP = 1536 << 20
PREP = ("from pytest_retrieval_eval.cli import main; import sys; "
        "sys.exit(main(sys.argv[1:]))")


def capped_prep(tmp_path: Path, data: Path | str, *extra: str,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``retrieval-eval prep --data DATA`` in a child process limited to :data:`CAP` bytes of
    address space (and one BLAS thread, whose arena would count against it)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))

    env = subprocess_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                         RETRIEVAL_EVAL_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run(
        [sys.executable, "-c", PREP, "prep", "--data", str(data), "--cache",
         str(tmp_path / "cache"), "--no-progress", "--offline", *extra],
        capture_output=True, text=True, env=env, preexec_fn=cap, timeout=timeout,
        check=False)


def one_error_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The command failed with one line carrying every needle, and no traceback."""
    text = proc.stdout + proc.stderr
    assert proc.returncode not in (0, None), text
    assert "Traceback" not in text and "MemoryError" not in text, text
    lines = [line for line in proc.stderr.splitlines() if needles[0] in line]
    assert len(lines) == 1, text
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# =========================================================================== deep nesting


def deep(path: Path, depth: int) -> Path:
    path.write_text("[" + "[" * depth + "]" * depth + "]", encoding="ascii")
    return path


def test_deeply_nested_json_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    data = deep(tmp_path / "deep.json", 100_000)  # 200 KB; 24 GB before the fix
    line = one_error_line(capped_prep(tmp_path, data), "deep.json",
                          f"more than {json_stream.MAX_DEPTH} levels deep", "LongMemEval needs 5")
    assert "at byte " in line
    assert partials(tmp_path / "cache") == []


def test_the_memory_cap_leaves_room_for_a_normal_prep(tmp_path: Path) -> None:
    """The cap is not what refuses the file: a valid file gets past the corpus under it
    (and stops only at the model, which this offline test has not got)."""
    data = write_dataset(tmp_path / "ok.json", [make_instance("ok1")])
    proc = capped_prep(tmp_path, data, "--model", str(tmp_path / "no-model"))
    assert "MemoryError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert list((tmp_path / "cache" / "corpus").glob("*.sqlite")), proc.stderr


def test_nesting_at_the_limit_is_read_one_past_it_refused(tmp_path: Path) -> None:
    extra = json.loads("[" * (json_stream.MAX_DEPTH - 2) + "]" * (json_stream.MAX_DEPTH - 2))
    ok = write_dataset(tmp_path / "ok.json", [make_instance("q1", extra=extra)])
    assert len(list(json_stream.iter_instances(ok))) == 1  # array > instance > extra: exactly 64
    extra = json.loads("[" * (json_stream.MAX_DEPTH - 1) + "]" * (json_stream.MAX_DEPTH - 1))
    bad = write_dataset(tmp_path / "bad.json", [make_instance("q1", extra=extra)])
    with pytest.raises(DataError, match="more than 64 levels deep"):
        list(json_stream.iter_instances(bad))


def test_brackets_inside_strings_do_not_count(tmp_path: Path) -> None:
    text = '["\\\\"]' + "[" * 500 + '\\"' + "{" * 500 + "\\\\"
    data = write_dataset(tmp_path / "s.json", [make_instance("q1", question=text)])
    ((_, item),) = list(json_stream.iter_instances(data))
    assert isinstance(item, dict) and item["question"] == text


def _max_depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_max_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_max_depth(v) for v in value.values()), default=0)
    return 0


def _random_value(rng: random.Random, depth: int) -> Any:
    alphabet = ['"', "\\", "[", "]", "{", "}", "a", " ", "\\\\", '\\"']
    roll = rng.random()
    if depth > 9 or roll < 0.35:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
    if roll < 0.7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {"".join(rng.choice(alphabet) for _ in range(3)): _random_value(rng, depth + 1)
            for _ in range(rng.randint(0, 3))}


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 4096])
def test_the_nesting_guard_tracks_the_true_depth_across_any_chunking(chunk: int) -> None:
    """An independent reference: the depth of the parsed value, against the guard's count
    over the bytes fed to it in chunks of any size (escapes split between chunks too)."""
    rng = random.Random(chunk)
    for _ in range(300):
        value = [_random_value(rng, 1)]
        raw = json.dumps(value).encode("utf-8")
        want = _max_depth(value)
        fits = json_stream._NestingGuard(io.BytesIO(raw), 0, limit=want)
        while fits.read(chunk):
            pass
        assert (fits.depth, fits.in_string) == (0, False), raw
        tight = json_stream._NestingGuard(io.BytesIO(raw), 0, limit=want - 1)
        with pytest.raises(json_stream._TooDeep):
            while tight.read(chunk):
                pass


# =========================================================================== not a file


def test_a_fifo_as_the_data_path_is_refused_before_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "data.json"
    os.mkfifo(fifo)
    proc = capped_prep(tmp_path, fifo, timeout=60)  # used to block forever in open()
    one_error_line(proc, "data.json", "is a FIFO (named pipe), not a regular file")


def test_dev_zero_as_the_data_path_is_refused_before_hashing(tmp_path: Path) -> None:
    proc = capped_prep(tmp_path, "/dev/zero", timeout=60)  # used to be hashed forever
    one_error_line(proc, "/dev/zero", "is a character device, not a regular file")


def test_a_non_regular_file_is_refused_by_the_hash_too(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="character device"):
        dataset.file_sha256(Path("/dev/zero"))


def test_a_symlink_to_a_device_is_refused(pytester: pytest.Pytester, isolated_cache: Path,
                                          tmp_path: Path) -> None:
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever", "bm25",
                        "--retrieval-eval-data", str(link))
    usage_error_line(result, "zero.json", "character device", "regular file")


# =========================================================================== progress


class _Log(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_progress_whose_total_is_overrun_does_not_flood_a_log() -> None:
    """``/dev/zero`` reported size 0: every chunk was 'final' and printed a line (1,200 a
    second). Past its total, a step is rate-limited like an open-ended one."""
    log = _Log()
    bar = ProgressBar(log)
    bar.GRACE = 0.0
    for done in range(0, 5000 << 20, 1 << 20):
        bar("sha256 zero", done, 0)
    bar.finish()
    assert len(log.getvalue().splitlines()) <= 2, log.getvalue()[:500]


def test_progress_of_an_open_ended_step_is_rate_limited_in_a_log() -> None:
    log = _Log()
    bar = ProgressBar(log)
    bar.GRACE = 0.0  # drawn from the start (tests/cli/test_progress.py covers the grace)
    for done in range(100_000):
        bar("ingest x", done, None)
    bar("ingest x", 100_000, 100_000)
    bar.finish()
    lines = log.getvalue().splitlines()
    assert len(lines) <= 3 and lines[-1].startswith("ingest x [") and "100000/100000" in lines[-1]


def test_plugin_progress_never_floods_a_log() -> None:
    from pytest_retrieval_eval.run.terminal_progress import Progress as _Progress

    written: list[str] = []

    class Reporter:
        isatty = False

        def write_line(self, line: str) -> None:
            written.append(line)

    progress = _Progress.__new__(_Progress)
    progress.tr = Reporter()
    progress.last, progress.label, progress.started = 0.0, "", 0.0
    for done in range(0, 3000 << 20, 1 << 20):
        progress("sha256 zero", done, 0)
    for done in range(50_000):
        progress("ingest x", done, None)
    assert len(written) <= 4, written[:10]


# =========================================================================== duplicate keys


def test_duplicate_keys_reject_the_instance_naming_the_key(tmp_path: Path) -> None:
    good = json.dumps(make_instance("ok1"))
    twice = json.dumps(make_instance("dup1"))
    # "question" twice at the top, "content" twice in a turn: JSON readers keep the last.
    twice = twice.replace('"question": ', '"question": "first?", "question": ', 1)
    twice = twice.replace('"content": ', '"content": "x", "content": ', 1)
    path = tmp_path / "dup.json"
    path.write_text(f"[{good}, {twice}, {good.replace('ok1', 'ok2')}]", encoding="utf-8")
    items = list(json_stream.iter_instances(path))
    assert [type(item).__name__ for _, item in items] == ["JsonObject", "DuplicateKeys",
                                                          "JsonObject"]
    dup = items[1][1]
    assert isinstance(dup, DuplicateKeys) and dup.keys == ("question", "content")
    parsed = [parse_instance(i, item) for i, item in items]
    assert isinstance(parsed[1], Rejection)
    assert parsed[1].question_id == "dup1"
    assert "key 'question', 'content' appears twice" in parsed[1].reason
    assert not isinstance(parsed[0], Rejection) and not isinstance(parsed[2], Rejection)


def test_duplicate_keys_are_counted_in_the_report(pytester: pytest.Pytester,
                                                  isolated_cache: Path, tmp_path: Path) -> None:
    good = [json.dumps(make_instance("ok1")), json.dumps(make_instance("ok2"))]
    twice = json.dumps(make_instance("dup1")).replace(
        '"question_type": ', '"question_type": "multi-session", "question_type": ', 1)
    path = tmp_path / "dup.json"
    path.write_text(f"[{good[0]}, {good[1]}, {twice}]", encoding="utf-8")
    out = tmp_path / "report.json"
    result = run_plugin(pytester, "--no-model", "--retrieval-eval-retriever", "bm25",
                        "--retrieval-eval-data", str(path), "--retrieval-eval-json", str(out))
    assert result.ret == 0, result.stdout.str()
    report = json.loads(out.read_text(encoding="utf-8"))
    (rejection,) = report["rejections"]
    assert rejection["question_id"] == "dup1"
    assert "key 'question_type' appears twice" in rejection["reason"]
    result.stdout.fnmatch_lines(["*instance 2 (dup1): key 'question_type' appears twice*"])


# =========================================================================== long texts


def _tokenizers(tmp_path: Path) -> dict[str, Any]:
    """The test model's WordPiece tokenizer and a byte-level BPE one trained here (another
    pre-tokenizer family: spaces belong to the following word)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    wordpiece = make_model_dir(tmp_path).tokenizer
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = [" ".join(random.Random(i).choice(WORDS) for _ in range(50)) for i in range(50)]
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, show_progress=False))
    return {"wordpiece": wordpiece, "bpe": bpe}


WORDS = ["morning", "doctor", "plan", "x" * 150, "a", "zz", "birthday", "gift!", "\u00e9t\u00e9",
         "[", "\u3000", "night\n", "\t", "  "]


def _random_text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.25:  # one giant word, maybe between a few words
        return " ".join([*(rng.choice(WORDS) for _ in range(rng.randint(0, 3))),
                         rng.choice(["morning", "q", "\u00e9", "ab"]) * rng.randint(100, 3000),
                         *(rng.choice(WORDS) for _ in range(rng.randint(0, 40)))])
    sep = rng.choice([" ", "\n", "  ", "\t", ""])
    return sep.join(rng.choice(WORDS) for _ in range(rng.randint(0, 600)))


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
@pytest.mark.parametrize("max_length", [8, 33])
def test_a_bounded_prefix_gives_the_whole_texts_first_tokens(
        tmp_path: Path, kind: str, max_length: int) -> None:
    """The independent reference: the whole text, tokenized and truncated. Small budgets
    (a few characters per token) drive every path: whitespace cuts, retries, giant words."""
    from pytest_retrieval_eval.vectors.long_texts import encode_bounded

    tokenizer = _tokenizers(tmp_path)[kind]
    tokenizer.no_padding()
    rng = random.Random(max_length)
    texts = [_random_text(rng) for _ in range(150)]
    for per_token in (1, 4, 64):
        tokenizer.enable_truncation(max_length=max_length)
        bounded = encode_bounded(tokenizer, texts, max_length * per_token)
        for text, encoding in zip(texts, bounded, strict=True):
            assert encoding.ids == tokenizer.encode(text).ids, (per_token, text[:200])


def test_embedding_a_huge_session_reads_a_bounded_prefix(tmp_path: Path) -> None:
    """50 MB of one session used to take 89 s and 8.2 GB (the whole text tokenized, then
    cut to 512 tokens). Under the cap, a 30 MB session and a 30 MB single word embed to the
    vectors of their first 512 tokens."""
    model = make_model_dir(tmp_path, dim=8)
    script = (
        "import sys, numpy as np\n"
        "from pytest_retrieval_eval.vectors.embedding import EmbedConfig, load_embedder\n"
        "e = load_embedder(sys.argv[1], EmbedConfig())\n"
        "texts = ['morning doctor plan ' * 1_500_000, 'q' * 30_000_000 + ' plan' * 600]\n"
        "v = e.embed(texts)\n"
        "print(v.shape, np.isfinite(v).all())\n"
    )

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))

    proc = subprocess.run([sys.executable, "-c", script, str(model.path)], capture_output=True,
                          text=True, env=subprocess_env(OMP_NUM_THREADS="1",
                                                        OPENBLAS_NUM_THREADS="1"),
                          preexec_fn=cap, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(2, 8) True" in proc.stdout


# =========================================================================== lone surrogates


def _first_lone_surrogate(raw: bytes) -> int | None:
    """An independent reference: JSON string escapes walked one by one (everything is
    inside strings here); the offset of the first \\uD800-\\uDFFF escape not in a pair."""
    i = 0
    while i < len(raw):
        if raw[i] != ord("\\"):
            i += 1
            continue
        if raw[i + 1:i + 2] != b"u":
            i += 2  # \\ \" \n ...: a two-byte escape
            continue
        unit = int(raw[i + 2:i + 6], 16)
        if 0xD800 <= unit < 0xDC00 and raw[i + 6:i + 8] == b"\\u" \
                and 0xDC00 <= int(raw[i + 8:i + 12], 16) <= 0xDFFF:
            i += 12
            continue
        if 0xD800 <= unit <= 0xDFFF:
            return i
        i += 6
    return None


@pytest.mark.parametrize("chunk", [1, 2, 5, 11, 4096])
def test_the_surrogate_guard_finds_the_first_lone_escape_across_any_chunking(
        chunk: int) -> None:
    pieces = ["\\ud800", "\\uDBFF", "\\udc00", "\\uDFFF", "\\ud83d\\ude00", "\\\\", "\\u2019",
              "u", "d800", "x", "\\n", "\\\\ud800"]
    rng = random.Random(chunk)
    for _ in range(400):
        body = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        raw = f'["{body}"]'.encode("ascii")
        want = _first_lone_surrogate(raw)
        guard = json_stream._NestingGuard(io.BytesIO(raw), 0)
        try:
            while guard.read(chunk):
                pass
        except json_stream._LoneSurrogate as lone:
            assert lone.offset == want, raw
        else:
            assert want is None, raw


@pytest.mark.parametrize(("escape", "offset"), [
    ("\\udfff", 0), ("\\ud800", 0), ("\\ud800\\ud800", 0), ("\\ud83d\\ud83d\\ude00", 0),
    ("ok \\ud83d\\ude00 \\udc00", 16), ("\\\\\\ud800", 2), ("\\ud800\\\\udc00", 0)])
def test_a_lone_surrogate_escape_is_refused_at_its_file_offset(
        tmp_path: Path, escape: str, offset: int) -> None:
    """Issue 23: '\\udfff' was 'not valid JSON in bytes 0-97280 ... position 32'; a lone
    '\\ud800' was read as '?', and '\\ud800\\ud800' became U+10000, silently."""
    instance = make_instance("q1")
    instance["question"] = "PLACEHOLDER"
    text = json.dumps([make_instance("q0"), instance], indent=1)
    text = text.replace("PLACEHOLDER", escape)
    path = tmp_path / "data.json"
    path.write_text(text, encoding="ascii")
    at = text.index(escape) + offset
    with pytest.raises(DataError) as info:
        list(json_stream.iter_instances(path))
    line = str(info.value)
    assert "\n" not in line and "holds a lone surrogate escape" in line
    assert f"at byte {at} " in line and "download" not in line
    assert path.read_bytes()[at:at + 2] == b"\\u"


def test_valid_surrogate_pairs_and_escaped_backslashes_are_read_unchanged(
        tmp_path: Path) -> None:
    instance = make_instance("q1")
    instance["question"] = "emoji \U0001F600 \\ud800 literal"
    path = write_dataset(tmp_path / "data.json", [instance])  # json.dumps: ensure_ascii
    assert b"\\ud83d\\ude00" in path.read_bytes() and b"\\\\ud800" in path.read_bytes()
    [(_, item)] = list(json_stream.iter_instances(path))
    assert isinstance(item, dict) and item["question"] == instance["question"]
