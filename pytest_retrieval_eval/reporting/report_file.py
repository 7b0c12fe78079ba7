"""A saved JSON report read and checked: what ``compare``, ``plot``, ``markdown`` and
``--retrieval-eval-compare`` read.

* :func:`load_report` reads the file with the dataset path's guards
  (:func:`..data.json_file.read_json_file`: a regular file, opened without blocking, of at
  most :data:`MAX_REPORT_BYTES`, nested at most 64 levels), optionally slim (each pair keeps
  :data:`PAIR_FIELDS`, dropped as the JSON is parsed);
* :func:`check_report` refuses, in one line naming the pair and the field, a metric that is
  not a finite number in [0, 1], ``ks`` / ``retrievers`` / ``summary`` of the wrong kind, and
  a repeated ``(question_id, retriever)``.

Every refusal is a :class:`CompareError` (:mod:`.compare` names it too).
"""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path
from typing import Any

from ..data.json_file import read_json_file, stream_json_file
from ..errors import DataError, RetrievalEvalError
from ..scoring.budget import is_tokens_key
from .report import SCHEMA_VERSION

__all__ = ["MAX_REPORT_BYTES", "PAIR_FIELDS", "CompareError", "check_report", "load_report"]

#: The largest report compare, plot, markdown and ``--retrieval-eval-compare`` read (a full
#: LongMemEval_M run of five retrievers is about 3 MiB; a pair takes about 1.2 KiB).
MAX_REPORT_BYTES = 256 << 20
_FIX = "write it again with --retrieval-eval-json"


class CompareError(RetrievalEvalError):
    """Two reports (or two retrievers) cannot be compared; the message says why."""


def load_report(path: Path, *, slim: bool = False) -> dict[str, Any]:
    """Read a JSON report written by ``--retrieval-eval-json``; one line if it cannot be.

    The file is read with the dataset path's guards (:func:`..data.json_file.read_json_file`:
    a regular file of at most :data:`MAX_REPORT_BYTES`, nested at most
    :data:`..data.json_file.MAX_DEPTH` deep), then checked by :func:`check_report`: every
    refusal is a :class:`CompareError` (a :class:`RetrievalEvalError`) of one line.
    ``slim``: each pair keeps only what compare, plot and markdown read (:data:`PAIR_FIELDS`),
    dropped as the file is parsed, with equal metric values sharing one float: a 50,000-pair
    report then takes about a fifth of the memory.
    """
    data = _streamed_slim(Path(path)) if slim else None
    if data is None:
        try:
            data = read_json_file(Path(path), what="report", fix=_FIX,
                                  max_bytes=MAX_REPORT_BYTES,
                                  object_hook=_Slimmer() if slim else None)
        except DataError as exc:
            raise CompareError(str(exc)) from None
    check_report(data, str(path))
    assert isinstance(data, dict)
    return dict(data)


#: The fields of a pair that compare, plot and markdown read (``load_report(slim=True)``).
PAIR_FIELDS = ("retriever", "question_id", "question_type", "metrics", "ranked")


class _Slimmer:
    """``json.loads``'s object hook for :func:`load_report`'s ``slim``: a pair (an object with
    question_id, retriever and metrics) keeps :data:`PAIR_FIELDS` in a dict of its own; its
    strings (ids, retriever, type) that are equal share one str, its metrics' equal values
    one float, and pairs whose metrics are equal (names and float values) one metrics dict,
    read-only (issue 34, item 16: a pair then costs its ids and little more)."""

    #: Metrics dicts shared only while sharing pays: past this many distinct ones, a table
    #: missed more often than hit is dropped (each entry costs about what a dict saves).
    DISTINCT = 1024

    def __init__(self) -> None:
        self.floats: dict[float, float] = {}
        self.ids: dict[str, str] = {}
        self.metric_sets: dict[tuple[tuple[str, ...], tuple[float, ...]], dict[str, Any]] = {}
        self.names: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.hits = 0

    def __call__(self, obj: dict[str, Any]) -> dict[str, Any]:
        if "question_id" in obj and "retriever" in obj and isinstance(obj.get("metrics"), dict):
            return {key: self.shared(key, obj[key]) for key in PAIR_FIELDS if key in obj}
        return obj

    def share_in_place(self, pair: dict[str, Any]) -> None:
        """A whole pair's kept fields shared (:meth:`shared`) in place, as the parser goes
        on: its ranked ids, its metrics, its strings."""
        for key in PAIR_FIELDS:
            if key in pair:
                dict.__setitem__(pair, key, self.shared(key, pair[key]))

    def shared(self, key: str, value: Any) -> Any:
        """A pair's field with its equal parts as one object: ``metrics`` (:meth:`metrics`),
        ``ranked`` as an exact-sized list of shared ids (ids repeat across retrievers), a
        string (question id, retriever, type) shared; any other value as it is."""
        if key == "metrics" and isinstance(value, dict):
            return self.metrics(value)
        if key == "ranked" and isinstance(value, list):
            out = list(value)  # exact size: a parser's list is over-allocated
            for i, x in enumerate(out):
                if isinstance(x, str):
                    out[i] = self.ids.setdefault(x, x)
            return out
        if isinstance(value, str):
            return self.ids.setdefault(value, value)
        return value

    def metrics(self, value: dict[str, Any]) -> dict[str, Any]:
        """The metrics with equal floats as one object (NaN is checked and named later);
        all floats, and equal to an earlier pair's, that pair's very dict."""
        plain = {k: self.floats.setdefault(v, v) if type(v) is float and v == v else v
                 for k, v in value.items()}
        table = self.metric_sets
        if not all(type(v) is float for v in plain.values()) or (
                len(table) > self.DISTINCT and len(table) > self.hits):
            return plain  # another kind of value (refused or kept as given); or mostly distinct
        names = tuple(plain)
        shared = table.setdefault((self.names.setdefault(names, names),
                                   tuple(plain.values())), plain)
        if shared is not plain:
            self.hits += 1
        return shared

    def release(self) -> None:
        """The sharing tables dropped: what was shared stays shared in the pairs."""
        for table in (self.floats, self.ids, self.metric_sets, self.names):
            table.clear()


def _streamed_slim(path: Path) -> Any:
    """The slim report parsed as the file is read (issue 34, item 16): neither the file's
    bytes nor its text are ever held whole, and each pair's fields past
    :data:`PAIR_FIELDS` (``explain`` first) are dropped as they are parsed, so the memory
    depends on the pairs, not on the report's size. Each pair is then made a plain dict of
    shared parts (:class:`_Slimmer`) in place, one at a time, so the parsed pairs and the
    kept ones are never all held at once. None when the stream refuses the file
    (:func:`..data.json_file.stream_json_file`): the whole read then names the fault."""
    slimmer = _Slimmer()
    keys: dict[str, str] = {}
    last: list[dict[str, Any]] = []  # the pair parsed last: whole once the next one starts

    class SlimDict(dict[str, Any]):
        """An object as parsed: once it holds ``question_id`` and ``retriever`` (a pair:
        they come first), a field outside :data:`PAIR_FIELDS` is dropped as it arrives (the
        parser fills a container after handing it over: a dropped one is freed when
        done). Keys and floats share one object each as they come; a pair's other kept
        parts once the next pair starts (:meth:`_Slimmer.share_in_place`)."""

        __slots__ = ()

        def __setitem__(self, key: str, value: Any) -> None:
            if key in _KEPT or "question_id" not in self or "retriever" not in self:
                if type(value) is float:
                    value = slimmer.floats.setdefault(value, value)
                dict.__setitem__(self, keys.setdefault(key, key), value)
                if key == "question_id" and "retriever" in self:
                    if last:
                        slimmer.share_in_place(last.pop())
                    last.append(self)
    try:
        data = stream_json_file(path, max_bytes=MAX_REPORT_BYTES, map_type=SlimDict)
        if last:
            slimmer.share_in_place(last.pop())
        if not isinstance(data, dict):
            return data
        pairs = data.get("pairs")
        if isinstance(pairs, list):
            for i, pair in enumerate(pairs):  # in place: each parsed pair freed as it goes
                if isinstance(pair, dict):
                    pairs[i] = _kept(pair)  # its parts shared already: a plain dict
        return {k: v if k == "pairs" and isinstance(v, list) else _plain(v)
                for k, v in data.items()}
    finally:
        slimmer.release()
        keys.clear()


def _kept(pair: dict[str, Any]) -> dict[str, Any]:
    """A parsed pair as a plain dict of :data:`PAIR_FIELDS` (a field that came before its
    question id, such as ``index``, was not dropped as it was parsed)."""
    if "question_id" in pair and "retriever" in pair:
        return {key: pair[key] for key in PAIR_FIELDS if key in pair}
    return dict(pair)


def _plain(value: Any) -> Any:
    """A parsed value with every object a plain dict (a :func:`_streamed_slim` object drops
    a pair's fields as they are set: none is handed on)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


_KEPT = frozenset(("retriever", "question_id", "question_type", "metrics", "ranked"))


def check_report(data: object, name: str, *, version: bool = True) -> None:
    """Refuse (one line naming ``name``) what is not a valid report: the shape, the
    schema_version, ``ks`` (whole numbers >= 1, at least one), ``retrievers`` (names), the
    ``summary`` where there is one (plot and markdown read it), each pair's
    ``question_id``, ``retriever``, ``question_type`` and ``metrics`` (each a finite number in
    [0, 1], named by its pair and field), and a ``(question_id, retriever)`` given twice.
    ``version=False`` leaves the schema_version to :func:`check_comparable`."""
    problem = _shape_problem(data)
    if problem:
        raise CompareError(f"report {name}: not a retrieval-eval JSON report ({problem}); "
                           "give a file written by --retrieval-eval-json")
    assert isinstance(data, dict)
    if version and data["schema_version"] != SCHEMA_VERSION:
        raise CompareError(
            f"report {name}: schema_version {data['schema_version']}, this "
            f"pytest-retrieval-eval reads {SCHEMA_VERSION}; write both reports with the same "
            "pytest-retrieval-eval version")
    for k in data["ks"]:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise CompareError(f"report {name}: ks holds {_show(k)}, not a whole number >= 1 "
                               f"(ks {_show(data['ks'])}); {_FIX}")
    for retriever in data["retrievers"]:
        if not isinstance(retriever, str) or not retriever:
            raise CompareError(f"report {name}: retrievers holds {_show(retriever)}, not a "
                               f"retriever name; {_FIX}")
    if not data["ks"]:
        raise CompareError(f"report {name}: ks is empty; {_FIX}")
    problem = _summary_problem(data.get("summary", {}))
    if problem:
        raise CompareError(f"report {name}: summary{problem}; {_FIX}")
    seen: dict[tuple[str, str], int] = {}
    for i, pair in enumerate(data["pairs"]):
        qid, retriever = pair["question_id"], pair["retriever"]
        where = f"report {name}: pair {i} ({qid}, {retriever})"
        if not isinstance(pair.get("question_type", ""), str):
            raise CompareError(f"{where}: question_type is {_show(pair['question_type'])}, "
                               f"not a name; {_FIX}")
        first = seen.setdefault((qid, retriever), i)
        if first != i:
            raise CompareError(f"{where} repeats pair {first}: a report holds each question "
                               f"once per retriever, and compare never drops one silently; "
                               f"{_FIX}")
        for field, value in pair["metrics"].items():
            if not _is_metric(field, value):
                raise CompareError(f"{where}: metrics.{field} is {_show(value)}, not "
                                   f"{_wanted(field)}; {_FIX}")


def _is_metric(field: object, value: object) -> bool:
    """A metric's value: a score in [0, 1], or for ``tokens@k`` (a count of tokens, the
    budget's) a finite number >= 0."""
    if isinstance(field, str) and is_tokens_key(field):
        return (not isinstance(value, bool) and isinstance(value, numbers.Real)
                and math.isfinite(float(value)) and float(value) >= 0.0)
    return _is_score(value)


def _wanted(field: object) -> str:
    return ("a count of tokens (a number >= 0)" if isinstance(field, str)
            and is_tokens_key(field) else "a number in [0, 1]")


def _is_score(value: object) -> bool:
    """A finite number in [0, 1] (not a bool)."""
    return (not isinstance(value, bool) and isinstance(value, numbers.Real)
            and math.isfinite(float(value)) and 0.0 <= float(value) <= 1.0)


def _summary_problem(summary: object) -> str:
    """What is wrong with a report's ``summary`` (as a path and a fault: ``.hybrid.overall
    is null, not an object``), or ``""``: what plot and markdown read of it."""
    if not isinstance(summary, dict):
        return f" is {_show(summary)}, not an object"
    for retriever, entry in summary.items():
        if not isinstance(entry, dict):
            return f".{retriever} is {_show(entry)}, not an object"
        by_type = entry.get("by_type", {})
        if not isinstance(by_type, dict):
            return f".{retriever}.by_type is {_show(by_type)}, not an object"
        cells = [("overall", entry.get("overall")),
                 *((f"by_type.{t}", cell) for t, cell in by_type.items())]
        for where, cell in cells:
            if not isinstance(cell, dict):
                return f".{retriever}.{where} is {_show(cell)}, not an object"
            n = cell.get("n")
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                return f".{retriever}.{where}.n is {_show(n)}, not a count"
            for field, value in cell.items():
                if field != "n" and not _is_metric(field, value):
                    return f".{retriever}.{where}.{field} is {_show(value)}, not {_wanted(field)}"
    return ""


def _show(value: object) -> str:
    """A value in a message: JSON's spelling (``NaN``, ``"5"``, ``[1, 2]``), cut short."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, int)):
        value = float(value)  # numpy's floats as JSON spells them
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):  # pragma: no cover - parsed JSON always dumps
        text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _shape_problem(data: object) -> str:
    if not isinstance(data, dict):
        return "not a JSON object"
    for key, kind in (("schema_version", int), ("dataset", dict), ("ks", list),
                      ("retrievers", list), ("pairs", list)):
        value = data.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"no {key!r} {kind.__name__}"
    if not isinstance(data["dataset"].get("sha256"), str):
        return "no dataset sha256"
    for pair in data["pairs"]:
        if not (isinstance(pair, dict) and isinstance(pair.get("question_id"), str)
                and isinstance(pair.get("retriever"), str)
                and isinstance(pair.get("metrics"), dict)):
            return "a pair without question_id, retriever or metrics"
    return ""
