"""``retrieval-eval generate``: write deterministic LongMemEval-shaped data
(:mod:`pytest_retrieval_eval.data.generator`). ``python -m pytest_retrieval_eval.generator``
runs this same command through :func:`.console.main`."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..config.options import positive_int
from ..errors import RetrievalEvalError, write_fault
from ..io.user_files import TargetRefused, same_file, sweep_dead_temps
from .args import cache_clash, file_path, write_fitted
from .progress_bar import ProgressBar

if TYPE_CHECKING:
    from ..data.generator import GeneratorConfig

__all__ = ["add_commands", "run"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """The ``generate`` subcommand."""
    from ..data.generator import PRESETS

    parser = sub.add_parser(
        "generate", help="write deterministic LongMemEval-shaped data (the bundled sample, "
        "a synthetic LongMemEval_M)",
        description="Write deterministic LongMemEval-shaped data: the bundled sample "
        "(--preset sample) or a full-size synthetic LongMemEval_M (--preset full_m), byte for "
        "byte the same on every run.")
    parser.add_argument("out", type=file_path, metavar="OUT.json", help="output JSON file")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="sample",
                        help="what to write (default: sample)")
    parser.add_argument("--instances", type=positive_int, default=None, metavar="N",
                        help="scale to this many instances (default: the preset's)")
    parser.add_argument("--sessions", type=positive_int, default=None, metavar="N",
                        help="scale to this mean history length (default: the preset's)")
    parser.add_argument("--seed", type=int, default=None,
                        help="override the preset's seed (default: the preset's)")
    parser.add_argument("--no-progress", action="store_true", help="draw no progress bar")


def _check_pool(args: argparse.Namespace, preset: GeneratorConfig,
                config: GeneratorConfig) -> None:
    """Refuse, in one line before anything is written, a size whose filler pool is past the
    generator's limit (:data:`~..data.generator.instances.MAX_POOL` unique ids)."""
    from ..data.generator import instances

    if instances.fits_the_pool(config):
        return
    most = instances.most_instances(preset, args.sessions)
    sessions = config.sessions_per_history
    fix = (f"pass --instances {most} or fewer at {sessions} sessions, or fewer --sessions"
           if most else "pass fewer --sessions")
    raise RetrievalEvalError(
        f"generate: --preset {args.preset} at {config.n_instances} instances of {sessions} "
        f"sessions needs {config.filler_pool_size + config.oversize_sessions:,} filler "
        f"sessions, past the generator's limit of {instances.MAX_POOL - 1:,} (their ids must "
        f"stay unique); {fix}")


def _check_target(path: Path) -> None:
    """Refuse, before anything is written (and before the folder's temps are swept), an OUT
    inside a cache folder or over the bundled sample's dataset, which every run of the
    sample reads (its sha256 is pinned with its vectors)."""
    from ..data.dataset import SAMPLE_PATH

    inside = cache_clash("OUT", path)
    if inside is not None:
        raise RetrievalEvalError(f"generate: {inside}")
    if same_file(path, SAMPLE_PATH):
        raise RetrievalEvalError(
            f"generate: OUT {path} is the bundled sample's dataset: writing it would replace "
            "that file; give OUT a path of its own")
    from ..boundary.outputs import output_refusal

    refused = output_refusal("generate: OUT", path, "dataset")  # issue 43.11
    if refused is not None:
        raise RetrievalEvalError(refused)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``timeout``, a CI cancel, a container stop) handled as Ctrl-C is: raised as
    ``KeyboardInterrupt``, so the write removes its temp file. The old handler comes back
    after; off the main thread (where no handler can be set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Write the dataset; one summary line on ``out``, the progress bar on ``err``."""
    from ..data.generator import PRESETS, write_dataset

    config = preset = PRESETS[args.preset]
    if args.instances or args.sessions:
        config = config.scaled(instances=args.instances, sessions=args.sessions)
    if args.seed is not None:
        config = replace(config, seed=args.seed)
    _check_pool(args, preset, config)
    _check_target(args.out)
    bar = None if args.no_progress else ProgressBar(err)
    began = time.monotonic()
    sweep_dead_temps(args.out.parent)  # what killed generates left, whatever their OUT
    try:
        with _sigterm_as_interrupt():
            size = write_dataset(config, args.out, bar)
    except OSError as exc:
        if isinstance(exc, TargetRefused):  # a FIFO, device, socket or folder stands there
            advice = "give the path of a regular file"
        elif isinstance(exc, (FileExistsError, NotADirectoryError)):  # a file where a folder is
            advice = f"{exc.filename} is a file, not a folder; give a path in a folder"
        else:
            advice = write_fault(exc, args.out.parent)
        raise RetrievalEvalError(
            f"generate: {args.out} cannot be written ({exc.strerror or exc}); {advice}"
        ) from None
    finally:
        if bar is not None:
            bar.finish()
    seconds = time.monotonic() - began
    floor = config.persona_sessions + config.topical_sessions + 2 + 1
    if args.sessions is not None and args.sessions < floor:  # issue 48, item 7
        write_fitted(out, [
            f"generate: --sessions {args.sessions} is under the preset's floor: a {args.preset} "
            f"history holds at least {floor} sessions ({config.persona_sessions} persona, "
            f"{config.topical_sessions} topical, 2 filler and its evidence), so its "
            f"histories hold {floor} or more"])
    write_fitted(out, [f"generate: wrote {args.out}: {config.n_instances} instances, "
                       f"{size:,} bytes, {seconds:.1f}s "
                       f"({size / 1e6 / max(seconds, 1e-9):.1f} MB/s)"])
    return 0
