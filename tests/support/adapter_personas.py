"""Personas for the memory libraries' adapter tests (pytest_retrieval_eval/adapters), built
by hand from raw LongMemEval instances (the bundled sample, or generated ones) with a small
deterministic embedder, so that an adapter and a direct use of its library are handed the very
same vectors: ``hash_embed`` (word hashing into 32 signed buckets, float32)."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_retrieval_eval.data.generator import GeneratorConfig, iter_instances
from pytest_retrieval_eval.data.pairs import parse_date, render_session
from pytest_retrieval_eval.retrievers.base import Persona, Query

SAMPLE = Path(__file__).resolve().parents[2] / "pytest_retrieval_eval" / "data" / "sample" / \
    "longmemeval_sample.json"
DIM = 32
_WORD = re.compile(r"[a-z0-9]+")


def hash_embed(texts: Sequence[str]) -> np.ndarray:
    """Each text as the signed counts of its words hashed into :data:`DIM` buckets."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in _WORD.findall(text.lower()):
            h = zlib.crc32(word.encode())
            out[i, h % DIM] += 1.0 if (h >> 8) & 1 else -1.0
        out[i, len(text) % DIM] += 0.5  # no all-zero row
    return out


def persona_of(instance: dict[str, Any], workdir: Path | None = None,
               embed: Any = hash_embed) -> tuple[Persona, Query]:
    """The instance's persona (repeated session ids: the first kept, as the harness does)
    and its query, vectors by ``embed``."""
    seen: dict[str, int] = {}
    for i, sid in enumerate(instance["haystack_session_ids"]):
        seen.setdefault(sid, i)
    rows = list(seen.values())
    ids = tuple(instance["haystack_session_ids"][i] for i in rows)
    turns = [[{"role": t["role"], "content": t["content"]}
              for t in instance["haystack_sessions"][i]] for i in rows]
    texts = [render_session(t) for t in turns]
    dates = tuple(parse_date(instance["haystack_dates"][i]) or "" for i in rows)
    persona = Persona(key=str(instance["question_id"]), session_ids=ids, created_at=dates,
                      vectors=embed(texts), texts=texts, store_path=lambda: Path("/nonexistent"),
                      turns=turns, workdir=workdir, text_vectors=embed)
    query = Query(str(instance["question_id"]), str(instance["question_type"]),
                  str(instance["question"]), str(instance["question_date"]),
                  embed([str(instance["question"])])[0], tuple(instance["answer_session_ids"]))
    return persona, query


def sample_instances(n: int = 18) -> list[dict[str, Any]]:
    """The bundled sample's first ``n`` instances."""
    data: list[dict[str, Any]] = json.loads(SAMPLE.read_text("utf-8"))
    return data[:n]


def generated_instances(n: int = 4, seed: int = 7, sessions: int = 12
                        ) -> list[dict[str, Any]]:
    """``n`` generated instances of about ``sessions`` short sessions each."""
    config = GeneratorConfig(seed=seed, type_counts=(("multi-session", n),),
                             abstention_counts=(), sessions_per_history=sessions,
                             filler_pool_size=40, persona_sessions=2,
                             topical_sessions=min(3, sessions // 3), session_bytes_mean=900,
                             oversize_sessions=0)
    return list(iter_instances(config))


def personas(instances: Iterable[dict[str, Any]], root: Path | None = None
             ) -> list[tuple[Persona, Query]]:
    out = []
    for inst in instances:
        workdir = None
        if root is not None:
            workdir = root / str(inst["question_id"])
            workdir.mkdir(parents=True, exist_ok=True)
        out.append(persona_of(inst, workdir))
    return out
