"""What a run tells its reader: the summary, the JSON report and everything built from them.

``report`` (aggregation, terminal tables fitted to the width, JSON), ``diagnostic_lines``
(the diagnostics in words), ``report_file`` (a saved report read and checked), ``compare``
(two runs pair by pair; ``agreement_lines``: how alike their rankings are), ``markdown``,
``plot`` (the ``[plot]`` extra, only on ask) and ``publish`` (Markdown file, job summary,
JUnit properties).

Public: ``report.build_report``, ``terminal_lines``, ``write_json``;
``compare.load_report`` (``report_file``'s), ``compare_reports``, ``compare_retrievers``,
``parse_retrievers``, ``comparison_lines``;
``markdown.run_markdown``; ``plot.plot_report``, ``plot_comparison``.
"""
