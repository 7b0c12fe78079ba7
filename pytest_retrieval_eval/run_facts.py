"""The run's header facts for the report: dataset, lane, model, ks, retrievers, protocol,
what was skipped and selected, notes, the budget, run files (plain data, JSON-able)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .data.protocol import LONGMEMEVAL, NO_USER_EVIDENCE, REPEATED_SLOTS_KEPT
from .reporting.report import NOTE_TEXT

if TYPE_CHECKING:
    from .session import EvalSession


def run_info(session: EvalSession, *, stopped: bool = False,
             interrupted: bool = False) -> dict[str, Any]:
    """Header facts of the run for the report (plain data).

    ``interrupted``: Ctrl-C; ``stopped``: the run ended before its last item (``-x``,
    ``--maxfail``): either way the report says how many selected items ran."""
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
        "retrievers": session.names.listed(session.settings.retrievers),
        "protocol": session.settings.protocol,
        "granularity": session.settings.granularity,
        **({"reference": session.settings.reference} if session.settings.reference else {}),
        "usable": len(session.scored_positions()),
        "skipped": {"abstention": abstention - no_evidence, "rejected": len(corpus.rejections),
                    **({NO_USER_EVIDENCE: no_evidence} if no_evidence else {})},
        "rejections": [asdict(r) for r in corpus.rejections],
        "notes": notes,
        **({"run_files": runs} if (runs := session.run_files()) else {}),
        "selection": selection,
        # When the report was made (UTC): `retrieval-eval plot` tells BASE from NEW by it.
        "created": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
    }
