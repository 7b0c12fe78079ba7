"""The run's configuration: the option group with its ini twins and argparse validators
(``options``), and ``settings.Settings``, the options resolved (ini and TOML values read,
combinations checked). Both heads use it: the pytest face and the ``retrieval-eval`` console
script.

PYTEST_DONT_REWRITE: the plugin-off path imports this package (for ``options``).
"""
