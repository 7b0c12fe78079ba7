"""Recall at a context budget, and the context that recall@k costs: pure functions.

A ranking of memories (a session store's sessions are one-session memories) is handed to a
reader as a context, best first. Given each memory's token count and the sessions it covers:

* :func:`budget_fit`: how many memories a budget of ``B`` tokens holds: memories are taken in
  rank order while the running total stays within ``B``; the first one that does not fit ends
  the context (a shorter one after it is not taken: the reader's context is a prefix of the
  ranking, as a store hands it over).
* :func:`budget_recall` (``recall@<B>tok``): the fraction of the gold sessions covered by the
  memories of that context.
* :func:`tokens_at_k` (``tokens@k``): the tokens of the first ``k`` memories, the context
  recall@k is measured on; its mean over pairs is what that recall costs a reader.

No upstream defines these (not LongMemEval's scripts, ranx or trec_eval): issue 36 does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

# ``recall@500tok``'s suffix and the family of ``tokens@k``: named in .metrics, which the
# summary table reads without loading this module.
from .metrics import BUDGET_SUFFIX as BUDGET_SUFFIX
from .metrics import TOKENS as TOKENS

__all__ = ["BUDGET_SUFFIX", "TOKENS", "budget_fit", "budget_key", "budget_recall",
           "gold_reach", "is_budget_key", "is_tokens_key", "parse_budget_key", "score_budget",
           "tokens_at_k", "tokens_key"]


def budget_key(budget: int) -> str:
    """The report's name for recall at a budget: ``recall@500tok``."""
    return f"recall@{budget}{BUDGET_SUFFIX}"


def tokens_key(k: int) -> str:
    """The report's name for the tokens of the first k memories: ``tokens@10``."""
    return f"{TOKENS}@{k}"


def parse_budget_key(key: str) -> int | None:
    """The budget of a ``recall@<B>tok`` key, else None."""
    family, at, cut = key.partition("@")
    if family != "recall" or not at or not cut.endswith(BUDGET_SUFFIX):
        return None
    digits = cut[:-len(BUDGET_SUFFIX)]
    return int(digits) if digits.isascii() and digits.isdigit() else None


def is_budget_key(key: str) -> bool:
    return parse_budget_key(key) is not None


def is_tokens_key(key: str) -> bool:
    family, at, k = key.partition("@")
    return family == TOKENS and bool(at) and k.isascii() and k.isdigit()


def budget_fit(tokens: Sequence[int], budget: int) -> int:
    """How many of the first memories fit in ``budget`` tokens together: the running total
    stays within the budget; the first memory that would pass it ends the context."""
    total = 0
    for n, count in enumerate(tokens):
        total += count
        if total > budget:
            return n
    return len(tokens)


def _covered(covered: Iterable[Sequence[str]]) -> set[str]:
    return {session for sessions in covered for session in sessions}


def budget_recall(tokens: Sequence[int], covered: Sequence[Sequence[str]],
                  gold: Collection[str], budget: int) -> float:
    """``recall@<B>tok``: the share of ``gold`` covered by the memories that fit in
    ``budget`` tokens (:func:`budget_fit`); ``covered[i]``: the sessions memory ``i``
    covers, ``tokens[i]`` its tokens. 0.0 for an empty gold set."""
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    fit = budget_fit(tokens, budget)
    return len(gold_set & _covered(covered[:fit])) / len(gold_set)


def gold_reach(tokens: Sequence[int], covered: Sequence[Sequence[str]],
               gold: Collection[str]) -> dict[str, int | None]:
    """For each gold session, the tokens of the shortest context (a prefix of the ranking)
    that covers it: the running total through the first memory covering it; None when no
    memory read covers it. A pair's ``recall@<B>tok`` for any ``B`` is then the share of
    gold whose reach is at most ``B`` (running totals never fall, so a memory at index
    ``i`` is inside :func:`budget_fit`'s context exactly when its running total is within
    ``B``): the HTML view draws recall against every budget from it (docs/view.md)."""
    reach: dict[str, int | None] = dict.fromkeys(sorted(set(gold)))
    total = 0
    for count, sessions in zip(tokens, covered, strict=False):
        total += count
        for session in sessions:
            if session in reach and reach[session] is None:
                reach[session] = total
    return reach


def tokens_at_k(tokens: Sequence[int], k: int) -> int:
    """The tokens of the first ``k`` memories (all of them when fewer were ranked)."""
    return sum(tokens[:k])


def score_budget(context: Sequence[int], covered: Sequence[Sequence[str]],
                 gold: Collection[str], budgets: Sequence[int],
                 per_k: Mapping[int, Sequence[int]]) -> dict[str, float]:
    """A pair's ``recall@<B>tok`` for each budget (on ``context``, the tokens of the ranking's
    memories, and ``covered``, their sessions) and ``tokens@k`` for each k (``per_k[k]``: the
    tokens of the memories of the ranking k is scored on)."""
    out: dict[str, float] = {budget_key(b): budget_recall(context, covered, gold, b)
                             for b in budgets}
    out.update({tokens_key(k): float(tokens_at_k(counts, k)) for k, counts in per_k.items()})
    return out
