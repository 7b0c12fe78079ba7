"""Small hand-made LongMemEval instances for tests (reusable by any test module).

``make_instance()`` returns a valid raw instance (a plain dict, as the JSON reader yields it);
keyword arguments override fields, ``drop=`` removes some. ``write_dataset()`` writes a list of
instances as a LongMemEval file (one JSON array).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

DATE = "2023/05/30 (Tue) 23:40"
DATE_RFC3339 = "2023-05-30T23:40:00+00:00"


def make_turns(topic: str, n: int = 2, *, evidence: bool = False) -> list[dict[str, Any]]:
    """``n`` alternating user/assistant turns about ``topic``; the first user turn marked
    ``has_answer`` when ``evidence``."""
    turns: list[dict[str, Any]] = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        turn: dict[str, Any] = {"role": role, "content": f"{role} turn {i} about {topic}"}
        if evidence and i == 0:
            turn["has_answer"] = True
        turns.append(turn)
    return turns


def make_instance(
    question_id: str = "q1",
    *,
    question_type: str = "multi-session",
    n_sessions: int = 4,
    gold: Sequence[int] = (1,),
    session_prefix: str | None = None,
    drop: Iterable[str] = (),
    **overrides: Any,
) -> dict[str, Any]:
    """A valid raw instance with ``n_sessions`` sessions; ``gold`` holds gold positions.

    Session ids are ``f"{session_prefix}_{i}"`` (prefix defaults to the question id) and the
    gold sessions' first turn carries ``has_answer: true``.
    """
    prefix = session_prefix if session_prefix is not None else question_id
    ids = [f"{prefix}_s{i}" for i in range(n_sessions)]
    sessions = [make_turns(f"{prefix} topic {i}", evidence=i in gold) for i in range(n_sessions)]
    dates = [
        f"2023/05/{10 + i % 18:02d} (Wed) {10 + i % 12:02d}:{i % 60:02d}" for i in range(n_sessions)
    ]
    instance: dict[str, Any] = {
        "question_id": question_id,
        "question_type": question_type,
        "question": f"What did I say about {prefix} topic {gold[0] if gold else 0}?",
        "answer": "something",
        "question_date": DATE,
        "haystack_session_ids": ids,
        "haystack_dates": dates,
        "haystack_sessions": sessions,
        "answer_session_ids": [ids[i] for i in gold],
    }
    instance.update(overrides)
    for name in drop:
        instance.pop(name, None)
    return instance


def write_dataset(path: Path, instances: Sequence[object]) -> Path:
    """Write ``instances`` as one JSON array (LongMemEval's file layout)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(list(instances), indent=1), encoding="utf-8")
    return path


def small_dataset(path: Path, pairs: int, *, sessions: int = 5, shared: int = 2) -> Path:
    """A dataset file of ``pairs`` instances ``q0``, ``q1``... of ``sessions`` sessions each,
    the first ``shared`` of which hold the same session ids and texts (as LongMemEval's
    histories share sessions)."""
    return write_dataset(path, [
        make_instance(f"q{i}", n_sessions=sessions, session_prefix="shared" if i < shared else None)
        for i in range(pairs)])

