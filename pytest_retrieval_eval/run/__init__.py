"""The run: one pytest session's state and a pair item's walk.

``session.EvalSession`` (kept in ``config.stash``) holds the settings, the dataset, the lanes'
stores and every pair's result; ``pair_run`` walks one pair (inputs, ranking, metrics, costs);
``columns``, ``lanes``, ``personas``, ``plan``, ``store_costs``, ``worker_results``,
``record_columns``, ``run_facts`` and ``terminal_progress`` hold the pieces it needs. The
pytest hooks above (``plugin``, ``run_hooks``, ``collection``, ``fixtures``) call in here.
"""
