"""``retrieval-eval prep --ray [ADDRESS]``: prep's embedding loop on a Ray cluster (Ray Data).

Optional extra ``[ray]`` (``ray[data]>=2.9``), imported only when ``--ray`` is given; without it
the command stops with one line naming the extra.

How it runs (:func:`ray_embed_missing`, plugged into :func:`prep.run_prep` as its ``embed``
loop, so the plan, the turn lock, ``--shard`` and ``--subset`` are those of local prep):

* The missing texts are cut into **the very chunks local prep embeds** (``chunk_size`` texts in
  plan order). One Ray Data row is one chunk: its keys and texts.
* ``map_batches`` sends the rows to an **actor pool** (:class:`_EmbedActor`). Each actor loads
  the model once and embeds a chunk with :meth:`Embedder.embed`, which tokenizes it, sorts it by
  token count and runs it in **length-bucketed batches**. Batches are cut per chunk, exactly as
  local prep cuts them: onnxruntime gives float32 results that depend (in the last bit) on what
  is padded together, so the same batches are what makes Ray's vectors **bit-identical** to
  local prep's. Re-bucketing across chunks would balance load a little better and break that.
* Each actor checks that it loaded the driver's model (same fingerprint and dimension).
* Vectors come back as raw float32 bytes and the driver commits each chunk as it arrives with
  :meth:`VectorCache.add`: temp file, fsync, rename, sidecar, the same atomic path as local prep.
  An interrupted Ray prep keeps the chunks committed so far; the next prep embeds the rest.

``ADDRESS`` is what ``ray.init(address=...)`` takes (``auto``, ``ray://host:10001``...);
without it, Ray's own default (``RAY_ADDRESS``, else a running local cluster, else a new local
one). A Ray already initialized in this process is used as it is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ModelError, RetrievalEvalError, one_line
from .embedding import EmbedConfig, load_embedder
from .prep import CorpusLike, EmbedMissing

__all__ = ["RayUnavailable", "import_ray", "ray_embed_missing"]

Progress = Callable[[str, int, "int | None"], None]
EXTRA_HINT = "pip install 'ray[data]>=2.9' (the plugin's [ray] extra)"


class RayUnavailable(RetrievalEvalError):
    """``--ray`` without the ``[ray]`` extra, or a Ray cluster that cannot be reached."""


def import_ray() -> tuple[Any, Any]:
    """``ray`` and ``ray.data``, or one line naming the extra."""
    try:
        ray = importlib.import_module("ray")
        data = importlib.import_module("ray.data")
    except ImportError as exc:
        raise RayUnavailable(
            f"prep --ray needs Ray Data, which is not installed ({one_line(exc, 80)}); "
            f"{EXTRA_HINT}"
        ) from None
    return ray, data


class _EmbedActor:
    """One model per actor; embeds whole chunks (length bucketing happens inside embed)."""

    def __init__(self, spec: str, config: Mapping[str, Any], offline: bool,
                 fingerprint: str, dim: int) -> None:
        self.embedder = load_embedder(spec, EmbedConfig(**config), offline=offline)
        if self.embedder.fingerprint != fingerprint or self.embedder.dim != dim:
            raise ModelError(
                f"a Ray actor loaded model {spec} as fingerprint "
                f"{self.embedder.fingerprint[:12]} (dim {self.embedder.dim}), not the driver's "
                f"{fingerprint[:12]} (dim {dim}); give every node the same model files"
            )

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        chunks = [int(c) for c in batch["chunk"]]
        out: list[bytes] = []
        for texts in batch["texts"]:
            vectors = self.embedder.embed([str(t) for t in texts])
            out.append(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
        return {"chunk": np.asarray(chunks, dtype=np.int64),
                "vectors": np.asarray(out, dtype=object)}


def _init(ray: Any, address: str | None) -> bool:
    """Connect (or start) Ray; True when this call started it (and must shut it down)."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    except Exception as exc:
        where = f"at {address}" if address else "(RAY_ADDRESS, or a local one)"
        raise RayUnavailable(
            f"prep --ray: no Ray cluster {where} could be used ({type(exc).__name__}: "
            f"{one_line(exc, 160)}); check the address, or start one with `ray start --head`"
        ) from None
    return True


def _dataset(data: Any, rows: list[dict[str, Any]]) -> Any:
    # One block per chunk, so the pool can hand chunks to different actors.
    try:
        return data.from_items(rows, override_num_blocks=len(rows))
    except TypeError:  # pragma: no cover - Ray before 2.10 names it parallelism
        return data.from_items(rows, parallelism=len(rows))


def ray_embed_missing(
    *,
    address: str | None,
    model_spec: str,
    config: EmbedConfig,
    offline: bool,
    fingerprint: str,
    dim: int,
    cache: Any,
    progress: Progress | None = None,
    chunk_size: int = 1024,
    actors: int | None = None,
) -> EmbedMissing:
    """The ``embed`` loop for :func:`prep.run_prep` that runs on Ray (see the module text).

    ``actors`` defaults to the cluster's CPUs divided by the CPUs one actor takes
    (``config.threads``, default 1).
    """
    ray, data = import_ray()

    def embed(missing: Sequence[str], needed: Mapping[str, str | None],
              corpus: CorpusLike) -> None:
        total = len(missing)
        if progress is not None:
            progress("embed (ray)", 0, total)
        if not total:
            return
        chunks = [list(missing[i : i + chunk_size]) for i in range(0, total, chunk_size)]
        rows = [{"chunk": n, "texts": _texts(chunk, needed, corpus)}
                for n, chunk in enumerate(chunks)]
        started = _init(ray, address)
        try:
            threads = config.threads or 1
            size = actors or max(1, int(ray.cluster_resources().get("CPU", 1) // threads))
            size = min(size, len(chunks))
            actor_config = {"pooling": config.pooling, "max_length": config.max_length,
                            "query_prefix": config.query_prefix, "device": config.device,
                            "threads": threads, "batch_size": config.batch_size}
            mapped = _dataset(data, rows).map_batches(
                _EmbedActor, batch_size=1, batch_format="numpy",
                compute=data.ActorPoolStrategy(size=size), num_cpus=threads,
                fn_constructor_kwargs={"spec": model_spec, "config": actor_config,
                                       "offline": offline, "fingerprint": fingerprint,
                                       "dim": dim})
            done = 0
            for row in mapped.iter_rows():
                chunk = chunks[int(row["chunk"])]
                vectors = np.frombuffer(row["vectors"], dtype=np.float32).reshape(
                    len(chunk), dim)
                cache.add(chunk, vectors)  # the same atomic commit as local prep
                done += len(chunk)
                if progress is not None:
                    progress("embed (ray)", done, total)
        except RetrievalEvalError:
            raise
        except Exception as exc:
            cause = _root_cause(exc)
            if isinstance(cause, RetrievalEvalError):
                raise cause from None
            raise RayUnavailable(
                f"prep --ray failed on the cluster ({type(cause).__name__}: "
                f"{one_line(cause, 200)}); what was committed stays, run the same command "
                f"to resume"
            ) from None
        finally:
            if started:
                ray.shutdown()

    return embed


def _root_cause(exc: BaseException) -> BaseException:
    """The user's exception inside Ray's wrappers (RayTaskError keeps it as ``cause``)."""
    seen = 0
    while seen < 10:
        inner = getattr(exc, "cause", None) or exc.__cause__
        if inner is None or inner is exc:
            return exc
        exc = inner
        seen += 1
    return exc


def _texts(chunk: Sequence[str], needed: Mapping[str, str | None],
           corpus: CorpusLike) -> list[str]:
    """A chunk's texts in its order: passages from the corpus, queries from the plan."""
    passages = [k for k in chunk if needed[k] is None]
    found = dict(zip(passages, corpus.texts(passages), strict=True)) if passages else {}
    return [found[k] if needed[k] is None else str(needed[k]) for k in chunk]
