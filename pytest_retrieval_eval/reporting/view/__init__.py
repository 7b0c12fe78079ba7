"""One self-contained HTML page per run (issue 47): ``retrieval-eval view`` and
``--retrieval-eval-html``.

:mod:`.page` gathers what the page shows from one or more JSON reports (the run, its
comparison with a base, or a history of several) and fills the template, whose HTML, CSS and
JavaScript are package data files beside it (``template.html``, ``view.css``, ``view.js``).
The page reads its data from a ``<script type="application/json">`` element and renders every
value from it through text nodes: nothing from a report is ever parsed as HTML (docs/view.md).
"""

from __future__ import annotations

from .page import ViewError, page_data, render_html, write_view

__all__ = ["ViewError", "page_data", "render_html", "write_view"]
