"""A badge of one number of a saved report (issue 38, item 6): shields.io's endpoint JSON,
or a self-contained SVG drawn here.

* :func:`badge_value`: a retriever's overall value of a metric (``recall@10``), or one line
  naming the report's retrievers or metrics;
* :func:`color`: the band a value falls in (:data:`BANDS`, docs/ci.md): a colour for the
  eye, never a verdict (nothing passes or fails by it); only a share (recall, nDCG) is put
  in a band: a count of tokens (``tokens@k``) is :data:`NEUTRAL` blue, its message
  ``4596 tokens`` (:func:`metric_color`, :func:`message`);
* :func:`endpoint_json`: the object https://shields.io/badges/endpoint-badge reads
  (``schemaVersion`` 1, ``label``, ``message``, ``color``);
* :func:`badge_svg`: the same badge as SVG in shields' flat style, with no font file, no
  script and no link to fetch: each text's width is estimated from Verdana 11 px's advance
  widths (:func:`text_width`) and pinned with ``textLength``, so any font renders it in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape

from ..boundary.outputs import MARKER
from ..errors import RetrievalEvalError, printable
from ..scoring.metrics import TOKENS

__all__ = ["BANDS", "NEUTRAL", "BadgeError", "badge_svg", "badge_value", "color",
           "endpoint_json", "message", "metric_color", "text_width"]

#: (lowest value, shields.io colour name, hex) from the top band down: a value gets the first
#: band whose lowest value it reaches.
BANDS: tuple[tuple[float, str, str], ...] = (
    (0.90, "brightgreen", "#4c1"),
    (0.75, "green", "#97ca00"),
    (0.60, "yellowgreen", "#a4a61d"),
    (0.45, "yellow", "#dfb317"),
    (0.30, "orange", "#fe7d37"),
    (0.00, "red", "#e05d44"),
)
_LABEL_GREY = "#555"
#: The colour of a number that is no share (a count of tokens): no band, no judgement.
NEUTRAL = ("blue", "#007ec6")


class BadgeError(RetrievalEvalError):
    """A badge cannot be made of the report (an unknown retriever or metric)."""


def badge_value(report: Mapping[str, Any], retriever: str, metric: str) -> float:
    """``retriever``'s overall ``metric`` in the report's summary, or one line naming the
    retrievers (or the metrics) the report holds."""
    summary = report.get("summary") or {}
    known = [r for r in report.get("retrievers", ()) if r in summary]
    if retriever not in summary:
        raise BadgeError(f"badge: retriever {printable(retriever)!r} is not in the report; "
                         f"it holds {printable(', '.join(known)) or 'no scored retriever'} "
                         "(pass one with --retriever)")
    overall = summary[retriever].get("overall") or {}
    if metric not in overall or metric == "n":
        metrics = [m for m in overall if m != "n"]
        raise BadgeError(f"badge: metric {printable(metric)!r} is not in the report for "
                         f"{printable(retriever)}; it holds "
                         f"{printable(', '.join(metrics)) or 'none'} (pass one with --metric)")
    return float(overall[metric])


def color(value: float) -> tuple[str, str]:
    """The band of ``value``: (shields.io colour name, hex)."""
    for low, name, hex_ in BANDS:
        if value >= low:
            return name, hex_
    return BANDS[-1][1], BANDS[-1][2]


def _is_count(metric: str | None) -> bool:
    return metric is not None and metric.split("@", 1)[0] == TOKENS


def metric_color(metric: str | None, value: float) -> tuple[str, str]:
    """``metric``'s colour: the band of a share (:func:`color`), :data:`NEUTRAL` for a count
    of tokens (more tokens is no better recall)."""
    return NEUTRAL if _is_count(metric) else color(value)


def message(metric: str | None, value: float) -> str:
    """The badge's number: a share to three places, a count of tokens whole (``4596
    tokens``)."""
    return f"{value:.0f} tokens" if _is_count(metric) else f"{value:.3f}"


def endpoint_json(label: str, value: float, metric: str | None = None) -> dict[str, Any]:
    """shields.io's endpoint object: ``{"schemaVersion": 1, "label", "message", "color"}``."""
    return {"schemaVersion": 1, "label": label, "message": message(metric, value),
            "color": metric_color(metric, value)[0]}


# Advance widths of Verdana at 11 px (in px, rounded to tenths), the font shields' flat badges
# are laid out in; any other character is counted as a wide one.
_NARROW = dict.fromkeys("ijl'|!.,:;", 3.1) | dict.fromkeys("frt()[]/\\-` ", 4.6)
_WIDE = dict.fromkeys("mw", 10.7) | dict.fromkeys("MW@%", 11.5)
_UPPER = 7.5
_DEFAULT = 6.9  # lowercase letters, digits, most punctuation


def text_width(text: str) -> float:
    """The estimated width of ``text`` in px at Verdana 11 px."""
    total = 0.0
    for ch in text:
        if ch in _NARROW:
            total += _NARROW[ch]
        elif ch in _WIDE:
            total += _WIDE[ch]
        elif ch.isascii() and ch.isupper():
            total += _UPPER
        elif ch.isascii():
            total += _DEFAULT
        else:
            total += _WIDE["M"]  # a wide guess for anything outside ASCII
    return total


def badge_svg(label: str, value: float, metric: str | None = None) -> str:
    """The badge as a self-contained SVG (flat style: grey label, coloured message)."""
    shown = message(metric, value)
    hex_ = metric_color(metric, value)[1]
    label = printable(label)  # no control character: XML 1.0 allows almost none
    lw = round(text_width(label)) + 10
    mw = round(text_width(shown)) + 10
    total = lw + mw
    label_x, message_x = lw * 5, (lw + mw / 2) * 10  # tenths of px, as shields scales
    title = escape(f"{label}: {shown}", {'"': "&quot;"})
    safe_label = escape(label)

    def text(x: float, body: str, width: float) -> str:
        length = round(width * 10)
        return (f'<text aria-hidden="true" x="{x:.0f}" y="150" fill="#010101" '
                f'fill-opacity=".3" transform="scale(.1)" textLength="{length}">{body}</text>'
                f'<text x="{x:.0f}" y="140" transform="scale(.1)" fill="#fff" '
                f'textLength="{length}">{body}</text>')

    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="20" role="img" '
        f'aria-label="{title}"><!-- {MARKER} --><title>{title}</title>'
        '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" '
        'stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{total}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{lw}" height="20" fill="{_LABEL_GREY}"/>'
        f'<rect x="{lw}" width="{mw}" height="20" fill="{hex_}"/>'
        f'<rect width="{total}" height="20" fill="url(#s)"/></g>'
        '<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,'
        'sans-serif" text-rendering="geometricPrecision" font-size="110">'
        f'{text(label_x, safe_label, lw - 10)}{text(message_x, shown, mw - 10)}'
        '</g></svg>\n')
