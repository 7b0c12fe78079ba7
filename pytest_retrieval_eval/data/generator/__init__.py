"""Deterministic LongMemEval-shaped data: the bundled sample and a full-size synthetic M.

``instances`` holds the configuration, its presets, the planning and assembly of instances and
:func:`write_dataset`; ``text`` the words (vocabularies, templates, the text engine);
``questions`` the evidence tables per question type.
"""

from __future__ import annotations

from .instances import FULL_M, PRESETS, SAMPLE, GeneratorConfig, iter_instances, write_dataset

__all__ = ["FULL_M", "PRESETS", "SAMPLE", "GeneratorConfig", "iter_instances", "write_dataset"]
