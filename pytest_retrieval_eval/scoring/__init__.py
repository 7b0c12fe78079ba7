"""Numbers from rankings: small pure functions over ranked ids and gold ids.

``metrics`` (recall@k and LongMemEval's families under the vipune protocol),
``longmemeval_metrics`` (LongMemEval's eval_utils.py metrics, turn -> session),
``diagnostics`` (per-pair facts and per-retriever figures), ``agreement`` (identical top k
and overlap@k of two rankings) and ``significance`` (paired bootstrap, randomization test,
Holm). Nothing here reads a file or knows pytest.

Public: ``metrics.score_ranking``, ``score_rankings``, ``session_recall``, ``mean_metrics``;
``longmemeval_metrics.score_ranking``, ``strip_turn``; ``diagnostics.pair_facts``,
``summarize``; ``significance.bootstrap_ci``, ``randomization_test``, ``holm``.
"""
