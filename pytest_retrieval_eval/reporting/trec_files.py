"""A saved JSON report as TREC files: one run file per retriever and one qrels file, what
trec_eval, ranx, ir_measures and pyserini read (``retrieval-eval export --format trec``).

* A run file ``<retriever>.run`` holds ``qid Q0 docid rank score tag`` per line: each scored
  question's ``ranked`` ids (the top max(k) the report keeps) in the report's order, ranks
  from 1, ``tag`` the retriever's name. A report keeps no scores, so the score is synthetic
  and strictly decreasing, ``n, n-1, ..., 1`` for a ranking of ``n`` ids: trec_eval re-sorts
  by score, then by docid descending (``comp_sim_docno`` in usnistgov/trec_eval
  ``form_res_rels.c``), and only a strictly decreasing score keeps the report's order. A
  repeated id keeps its first rank (the plugin's metrics dedupe so too; trec_eval refuses
  duplicates).
* ``qrels`` holds ``qid 0 docid 1`` for each gold session (or turn) of each scored question:
  a question abstention or the selection left out is not in the report's pairs, so not here.
* TREC files are whitespace-separated: a question id, id or retriever name holding
  whitespace (or empty) is refused in one line naming it, before anything is written.

What the files reproduce of the report, measure by measure, is in docs/trec.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..boundary.outputs import output_refusal
from ..errors import RetrievalEvalError
from ..io.user_files import fault, replace_text, same_file
from ..scoring.metrics import dedupe, recall, recall_any

__all__ = ["QRELS_NAME", "RUN_SUFFIX", "TrecExport", "TrecExportError", "qrels_lines",
           "run_file_name", "run_file_names", "run_lines", "trec_export", "write_trec_files"]

#: The qrels file's name in the output folder; run files end in :data:`RUN_SUFFIX`, so no
#: retriever's run file can take it.
QRELS_NAME = "qrels"
RUN_SUFFIX = ".run"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")
_SPACE = re.compile(r"\s")


class TrecExportError(RetrievalEvalError):
    """The report cannot be written as TREC files, or the files cannot be written."""


@dataclass(frozen=True)
class TrecExport:
    """The TREC files of a report, in memory: ``files`` maps each file name to its text.
    ``questions``: the questions of the qrels; ``rankings``: the (question, retriever)
    rankings of the run files; ``failed``: the report's failed items (no lines anywhere);
    ``other_answer``: per retriever, the pairs whose report metrics at some k were scored on
    another answer than the first k of ``ranked`` (a limit-sensitive retriever such as
    ``hybrid`` is asked once per candidate pool), where TREC tools give other numbers."""

    files: dict[str, str]
    questions: int
    rankings: int
    failed: int
    other_answer: dict[str, int] = field(default_factory=dict)


def _checked(value: object, what: str, where: str) -> str:
    text = str(value)
    if not text or _SPACE.search(text):
        raise TrecExportError(
            f"{where}: {what} {text!r} {'is empty' if not text else 'holds whitespace'}, "
            "which the whitespace-separated TREC format cannot hold; rename it in the data "
            "(or the retriever) and write the report again")
    return text


def _file_base(retriever: str) -> str:
    """The retriever's name with characters outside ``[A-Za-z0-9._+=-]`` as ``_`` and no
    leading dot (no hidden file, no ``..``)."""
    return _UNSAFE.sub("_", retriever).lstrip(".") or "retriever"


def run_file_name(retriever: str, taken: Iterable[str] = ()) -> str:
    """The run file of ``retriever``: its name with characters outside ``[A-Za-z0-9._+=-]``
    as ``_`` (``pkg.mod:attr`` -> ``pkg.mod_attr.run``), numbered when that name is taken."""
    base = _file_base(retriever)
    used = set(taken)
    name, n = base + RUN_SUFFIX, 1
    while name in used or name == QRELS_NAME:
        n += 1
        name = f"{base}-{n}{RUN_SUFFIX}"
    return name


def run_file_names(retrievers: Iterable[str]) -> dict[str, str]:
    """Each retriever's run file. A name that needs no change keeps its own file name
    (``a_b`` -> ``a_b.run``, whatever comes first); only the changed names (``a:b``,
    ``a?b``) are numbered where their file name is taken (``a_b-2.run``, ``a_b-3.run``), in
    the report's order. Names given twice are one retriever (one file)."""
    names = list(dict.fromkeys(retrievers))
    files = {name: name + RUN_SUFFIX for name in names if _file_base(name) == name}
    taken = set(files.values())
    for name in names:
        if name not in files:
            files[name] = run_file_name(name, taken)
            taken.add(files[name])
    return {name: files[name] for name in names}


def run_lines(pairs: Sequence[Mapping[str, Any]], tag: str, source: str) -> list[str]:
    """The run file's lines of one retriever's pairs: ``qid Q0 docid rank score tag``, in the
    report's order, scores ``n .. 1`` (strictly decreasing: see the module's docstring)."""
    lines: list[str] = []
    for pair in pairs:
        where = f"report {source}: question {pair['question_id']!r} ({tag})"
        qid = _checked(pair["question_id"], "question id", where)
        ranked = dedupe(str(x) for x in pair.get("ranked") or [])
        n = len(ranked)
        for i, doc in enumerate(ranked):
            doc = _checked(doc, "ranked id", where)
            lines.append(f"{qid} Q0 {doc} {i + 1} {n - i} {tag}")
    return lines


def qrels_lines(pairs: Sequence[Mapping[str, Any]], source: str) -> list[str]:
    """``qid 0 docid 1`` per gold id of each question of ``pairs`` (first pair of a question
    gives its gold; every pair of a question holds the same)."""
    lines: list[str] = []
    seen: set[str] = set()
    for pair in pairs:
        qid = str(pair["question_id"])
        if qid in seen:
            continue
        seen.add(qid)
        where = f"report {source}: question {qid!r}"
        _checked(qid, "question id", where)
        for gold in dict.fromkeys(str(g) for g in pair.get("gold") or []):
            lines.append(f"{qid} 0 {_checked(gold, 'gold id', where)} 1")
    return lines


def _other_answer(pair: Mapping[str, Any], ks: Sequence[int]) -> bool:
    """Whether the pair's recall@k, recall_any@k or ndcg_any@1 in the report differs from
    what the first k of ``ranked`` give (the report scored k on another answer)."""
    ranked = dedupe(str(x) for x in pair.get("ranked") or [])
    gold = [str(g) for g in pair.get("gold") or []]
    metrics = pair.get("metrics") or {}
    for k in ks:
        checks = [(f"recall@{k}", recall(ranked, gold, k)),
                  (f"recall_any@{k}", recall_any(ranked, gold, k))]
        if k == 1:
            checks.append(("ndcg_any@1", recall_any(ranked, gold, 1)))
        for key, value in checks:
            if key in metrics and abs(float(metrics[key]) - value) > 1e-12:
                return True
    return False


def trec_export(report: Mapping[str, Any], source: str) -> TrecExport:
    """The TREC files of a checked report (:func:`.report_file.load_report`); refused in one
    line (:class:`TrecExportError`) when an id or a retriever name holds whitespace."""
    pairs = list(report.get("pairs") or [])
    ks = [int(k) for k in report.get("ks") or []]
    names = list(dict.fromkeys([*(str(r) for r in report.get("retrievers") or []),
                                *(str(p["retriever"]) for p in pairs)]))
    files: dict[str, str] = {}
    other: dict[str, int] = {}
    rankings = 0
    ranked = {str(p["retriever"]) for p in pairs}
    file_names = run_file_names(name for name in names if name in ranked)
    for name in names:
        tag = _checked(name, "retriever name", f"report {source}")
        mine = [p for p in pairs if p["retriever"] == name]
        if not mine:
            continue
        files[file_names[name]] = "".join(
            line + "\n" for line in run_lines(mine, tag, source))
        rankings += len(mine)
        moved = sum(1 for p in mine if _other_answer(p, ks))
        if moved:
            other[name] = moved
    qrels = qrels_lines(pairs, source)
    files[QRELS_NAME] = "".join(line + "\n" for line in qrels)
    questions = len({str(p["question_id"]) for p in pairs})
    return TrecExport(files, questions, rankings, len(report.get("errors") or []), other)


def write_trec_files(export: TrecExport, out_dir: Path,
                     inputs: Sequence[Path] = ()) -> list[Path]:
    """Write each file of ``export`` into ``out_dir`` (created when missing), each atomically
    (:func:`..io.user_files.replace_text`: a file of the same name is replaced, nothing else
    in the folder is touched). A target that is one of ``inputs`` (the report read) is
    refused before anything is written."""
    out_dir = Path(out_dir)
    targets = [out_dir / name for name in export.files]
    for target in targets:
        for given in inputs:
            if same_file(target, Path(given)):
                raise TrecExportError(
                    f"--out {out_dir}: writing {target.name} would overwrite the report "
                    f"{given} it is made from; give another --out folder")
    for target in targets:  # only where no file is, or over an export of ours (issue 43.11)
        refused = output_refusal(f"--out {out_dir}:", target, "trec")
        if refused is not None:
            raise TrecExportError(refused)
    if out_dir.exists() and not out_dir.is_dir():
        raise TrecExportError(f"--out {out_dir}: it exists and is not a folder; give a "
                              "folder (created when missing)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrecExportError(f"--out {out_dir}: cannot create the folder "
                              f"({fault(exc, out_dir / QRELS_NAME)}); give a writable "
                              "folder") from None
    written: list[Path] = []
    for target in targets:
        try:
            written.append(replace_text(target, export.files[target.name]))
        except OSError as exc:
            raise TrecExportError(f"cannot write {target} ({fault(exc, target)}); give a "
                                  "writable --out folder") from None
    return written
