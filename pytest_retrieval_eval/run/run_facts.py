"""The run's header facts for the report: dataset, lane, model, ks, retrievers, protocol,
what was skipped and selected, notes, the budget, run files (plain data, JSON-able)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..data.protocol import LONGMEMEVAL, NO_GOLD_TURNS, NO_USER_EVIDENCE, REPEATED_SLOTS_KEPT
from ..reporting.report import NOTE_TEXT

if TYPE_CHECKING:
    from ..data.pairs import Rejection
    from .session import EvalSession


def _selected_retrievers(session: EvalSession) -> list[str]:
    """The run's retrievers less those whose every item ``-k``/``-m`` (or node ids)
    deselected: their column would be empty (issue 38.12). A retriever with a selected item
    keeps its column whether that item scored, failed or was skipped. When no pair item was
    selected and no test recorded a ranking either, every retriever is named (the header
    says what the run held); recording tests' columns come from their results."""
    selectors = session.settings.retrievers
    if session.selected is None:
        return list(selectors)
    chosen = {name for _, name in session.selected}
    kept = [name for name in selectors if name in chosen]
    return kept if kept or session.results else list(selectors)


def rejection_reason(session: EvalSession, rejection: Rejection) -> str:
    """A rejection's reason as the run words it: the turn view's refusal of a question
    without a has_answer turn also names the first question the run scores, to pick with
    ``-k`` instead (issue 38.14)."""
    assert session.corpus is not None
    positions = session.scored_positions()
    if not positions or not rejection.reason.startswith(NO_GOLD_TURNS):
        return rejection.reason
    first = session.corpus.pairs[positions[0]]
    return (f"{rejection.reason}; turn granularity cannot score it: -k {first.question_id} "
            f"picks a question ({first.question_type}) it scores")


def _rejections(session: EvalSession) -> list[dict[str, Any]]:
    assert session.corpus is not None
    return [{**asdict(r), "reason": rejection_reason(session, r)}
            for r in session.corpus.rejections]


def run_info(session: EvalSession, *, stopped: bool = False, interrupted: bool = False,
             project: Path | None = None) -> dict[str, Any]:
    """Header facts of the run for the report (plain data).

    ``interrupted``: Ctrl-C; ``stopped``: the run ended before its last item (``-x``,
    ``--maxfail``): either way the report says how many selected items ran. ``project``:
    pytest's rootdir, whose git commit and branch the report records (``io.git_facts``:
    None when it is no checkout; ``retrieval-eval history`` reads them)."""
    from ..io.git_facts import git_facts

    assert session.plan is not None and session.corpus is not None
    corpus = session.corpus
    selection: dict[str, Any] = {"stopped": stopped, "interrupted": interrupted}
    if session.selected is not None:
        selection["selected"] = [[corpus.pairs[i].question_id, session.display_name(name)]
                                 for i, name in session.selected]
    selection["skipped_items"] = session.outcomes.skipped_items()
    abstention = sum(1 for p in corpus.pairs if p.abstention)
    no_evidence = sum(1 for p in corpus.pairs if p.notes.get(NO_USER_EVIDENCE))
    stats = dict(corpus.stats)
    notes = {name: stats.get(name, 0) for name in NOTE_TEXT}  # the header's notes
    subset = {} if session.subset is None else {"subset": session.subset.to_dict()}
    if session.settings.protocol == LONGMEMEVAL:  # every slot kept: nothing was dropped
        repeats = [p.notes.get(REPEATED_SLOTS_KEPT, 0) for p in corpus.pairs]
        notes = {REPEATED_SLOTS_KEPT: sum(repeats),
                 "histories_with_repeats": sum(1 for n in repeats if n)}
    budget = {} if session.token_counts is None else {"budget": {
        "budgets": list(session.settings.budgets),
        "tokenizer": dict(session.token_counts.counter.identity)}}
    return {
        **subset,
        **budget,
        "dataset": {**session.dataset_info, "stats": stats},
        "lane": session.plan.lane,
        "model": session.plan.model,
        "ks": list(session.settings.ks),
        "retrievers": session.names.listed(_selected_retrievers(session)),
        "protocol": session.settings.protocol,
        "granularity": session.settings.granularity,
        **({"reference": session.settings.reference} if session.settings.reference else {}),
        "usable": len(session.scored_positions()),
        "skipped": {"abstention": abstention - no_evidence, "rejected": len(corpus.rejections),
                    **({NO_USER_EVIDENCE: no_evidence} if no_evidence else {})},
        "rejections": _rejections(session),
        "notes": notes,
        **({"run_files": runs} if (runs := session.run_files()) else {}),
        "selection": selection,
        # When the report was made (UTC): `retrieval-eval plot` tells BASE from NEW by it.
        "created": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "git": None if project is None else git_facts(project),
    }
