"""LongMemEval data: where a dataset comes from, how it is read, parsed and kept.

``dataset`` (bundled sample, Hub, path; sha256), ``json_stream`` (the streamed, guarded
reader), ``pairs`` (one instance -> memory rows and gold), ``protocol`` (the vipune and
LongMemEval views, session or turn), ``corpus`` (the compact SQLite file every later phase
reads), ``ingest`` (the dataset streamed once into it), ``subset`` (stratified subsets) and
``generator/`` (deterministic LongMemEval-shaped data). ``sample/`` is the bundled sample with
its prepped vectors.

Public: ``dataset.resolve_dataset``, ``DatasetSource``; ``ingest.load_corpus``;
``corpus.Corpus``, ``PairRecord``, ``open_corpus``; ``pairs.parse_instance``, ``text_key``;
``protocol.View``; ``subset.choose``; ``generator.write_dataset``, ``PRESETS``.
"""
