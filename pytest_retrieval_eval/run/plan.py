"""What the controller decided for the run (:class:`Plan`): it crosses to xdist workers through
``workerinput`` as a plain dict, so the dataset is read and the model chosen once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Plan:
    """What the controller decided; crosses to xdist workers as a plain dict."""

    corpus_path: str
    cache_root: str
    lane: str  # "model" or "model-free"
    model: dict[str, Any] | None  # the embedder's info(): name, fingerprint, dim, pooling…
    model_spec: str | None  # what to load for live query embedding (model lane only)
    dataset_path: str = ""  # the dataset file: where items' reports point (collection.py)
    #: run:PATH -> {"sha256", "tag"} the controller read: each worker checks (trec_run.py)
    runs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: The budget tokenizer's identity as the controller read it (a file's sha256): each
    #: worker counts with those bytes or stops (issue 43.8, vectors/token_counts.py)
    tokenizer: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        return cls(**data)
