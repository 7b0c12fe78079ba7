"""The summary's header lines: dataset, protocol, lane and model, retrievers, pair counts,
the subset and budget lines, the data notes and the rejected instances."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import printable

#: How the header words each data note (counts over the whole dataset).
NOTE_TEXT: dict[str, str] = {
    "repeated_session_ids": "{n} repeated session id(s) (first occurrence kept)",
    "repeated_slots_kept": "{n} repeated session slot(s), each kept as its own item (as "
                           "LongMemEval does)",
    "conflicting_repeats": "{n} of them with different content",
    "histories_with_repeats": "{n} history(ies) with repeats",
    "gold_not_in_haystack": "{n} pair(s) with gold ids not in the haystack (scored; those "
                            "ids count as misses)",
    "oversize_sessions": "{n} session(s) over vipune's {limit}-byte input limit (scored; "
                         "vipune's add would refuse them)",
    "empty_sessions": "{n} empty session(s) dropped",
    "undated_sessions": "{n} session(s) without a date (stored undated; recency 0 ignores it)",
    "gold_from_has_answer": "{n} pair(s) with gold from has_answer turns",
}
#: Rejections the terminal header lists one by one; the JSON report lists them all.
SHOWN_REJECTIONS = 5


def note_lines(notes: Mapping[str, Any]) -> list[str]:
    """The ``notes:`` line: data anomalies that were counted, not rejected."""
    from ..data.pairs import VIPUNE_MAX_INPUT_BYTES

    noted = [NOTE_TEXT.get(k, f"{k.replace('_', ' ')}: {{n}}").format(
                 n=v, limit=VIPUNE_MAX_INPUT_BYTES)
             for k, v in notes.items() if v]
    return ["notes: " + "; ".join(noted)] if noted else []


def run_file_lines(run_files: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A line per ``run:PATH`` file whose lines name questions the dataset lacks: in the
    summary too, since ``-q`` hides pytest's session header, which says it first."""
    if not run_files:
        return []  # no run: file: its module is never loaded (a warm run's import set)
    from ..retrievers.trec_run import unknown_line

    lines = (unknown_line(name, facts) for name, facts in run_files.items())
    return [line for line in lines if line is not None]


def rejection_lines(rejections: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per rejected instance (the first few), each with its reason."""
    if not rejections:
        return []
    lines = [f"rejected: {len(rejections)} instance(s) not scored, each with its reason:"]
    for r in rejections[:SHOWN_REJECTIONS]:
        qid = printable(r.get("question_id") or "no question_id")
        lines.append(f"  instance {r.get('index')} ({qid}): {printable(r.get('reason'))}")
    if len(rejections) > SHOWN_REJECTIONS:
        lines.append(f"  ... and {len(rejections) - SHOWN_REJECTIONS} more: the JSON report "
                     "(--retrieval-eval-json) lists every one under \"rejections\"")
    return lines


#: Where the max length came from (``max_length_from`` of the model info), in words.
_LENGTH_FROM = {"asked": "asked for", "model": "sentence_bert_config.json",
                "vipune": "vipune's"}


def _length_text(model: Mapping[str, Any]) -> str:
    """``256 tokens (sentence_bert_config.json), ``: the recipe's truncation and
    where it came from (vectors cached before it was recorded: the length alone)."""
    length = model.get("max_length")
    if not isinstance(length, int) or isinstance(length, bool):
        return ""
    source = _LENGTH_FROM.get(str(model.get("max_length_from")))
    return f"{length} tokens{f' ({source})' if source else ''}, "


def header_lines(info: Mapping[str, Any], *, budget_words: bool = True) -> list[str]:
    """Dataset, gold source, lane, model, retrievers and pair counts (``budget_words``: the
    budget line says what recall@<B>tok and tokens@k are, as the budget table is shown)."""
    ds = info["dataset"]
    model = info.get("model")
    model_text = "none (no retriever of this run reads vectors)" if not model else (
        f"{model['name']} (fingerprint {str(model['fingerprint'])[:12]}, "
        f"{model.get('pooling', 'mean')} pooling, {_length_text(model)}dim {model.get('dim')})")
    skipped = info["skipped"]
    run = info.get("run") or {}
    stop = [] if not run.get("interrupted") else [
        f"interrupted after {run['items_run']} of {run.get('items_selected', '?')} items: the "
        f"numbers below cover only what ran; run again for the rest"]
    protocol = info.get("protocol", "vipune")
    lines = [
        *stop,
        (f"dataset: {printable(ds['name'])} (sha256 {ds['sha256'][:16]}…)  gold: "
         f"{ds['gold_source']}"),
        (f"protocol: {protocol}  granularity: {info.get('granularity', 'session')}"
         + ("  (LongMemEval's own retrieval experiment)" if protocol == "longmemeval" else "")),
        f"lane: {info['lane']}  model: {model_text}",
        (f"retrievers: {_retrievers_text(info['retrievers'], info.get('config'))}  "
         f"k: {', '.join(map(str, info['ks']))}"),
        (f"pairs: {info['scored']} scored"
         + (f" ({info['scored_by_all']} by every retriever)"
            if info.get("scored_by_all", info["scored"]) != info["scored"] else "")
         + (f" of {info['subset']['of_usable']} usable, {info['subset']['chosen']} in the "
            "subset; skipped " if info.get("subset") else f" of {info['usable']} usable; skipped ")
         + f"{skipped['abstention']} abstention, "
         + (f"{skipped['no_user_evidence']} without a user has_answer turn, "
            if skipped.get("no_user_evidence") else "")
         + f"{skipped['rejected']} rejected, "
         f"{skipped['not_selected']} not selected"
         + (f", {skipped['not_run']} not run" if run.get("interrupted") else "")
         + (f"; {skipped['items_skipped']} item(s) skipped by pytest"
            if skipped.get("items_skipped") else "")),
    ]
    if info.get("subset"):
        from ..data.subset import subset_lines

        lines.extend(subset_lines(info["subset"]))
    lines.extend(budget_header(info.get("budget"), full=budget_words))
    lines.extend(note_lines(info.get("notes") or {}))
    lines.extend(run_file_lines(info.get("run_files") or {}))
    lines.extend(rejection_lines(info.get("rejections") or []))
    if protocol == "vipune" and info.get("granularity", "session") == "session" and \
            ds["gold_source"] != "answer_session_ids":
        lines.append("gold: answer_session_ids absent for some pairs; their gold is the "
                     "sessions with a has_answer turn (an approximation)")
    return lines


def tokenizer_text(tokenizer: Mapping[str, Any]) -> str:
    """A tokenizer's identity in words: ``o200k_base (bpe-openai 0.1.4)``."""
    library = tokenizer.get("library", "?")
    extra = tokenizer.get("version") or str(tokenizer.get("sha256", ""))[:12]
    return f"{printable(tokenizer.get('name'))} ({library}{' ' + extra if extra else ''})"


def budget_header(budget: Mapping[str, Any] | None, *, full: bool = True) -> list[str]:
    """The header's budget line: the budgets and the tokenizer they count in (``full``: and
    what the budget table's figures are)."""
    if not budget:
        return []
    line = (f"budget: {', '.join(map(str, budget['budgets']))} tokens of "
            f"{tokenizer_text(budget.get('tokenizer') or {})}")
    return [line + ("; recall@<B>tok takes memories in rank order while they fit, tokens@k "
                    "is the mean tokens of the first k" if full else
                    "; its table: -v")]


def _retrievers_text(retrievers: Sequence[str], configs: Mapping[str, Any] | None) -> str:
    """:func:`.config_lines.retrievers_text`, loaded only when some store has a config."""
    if not configs:
        return ", ".join(retrievers)
    from .config_lines import retrievers_text

    return retrievers_text(retrievers, configs)
