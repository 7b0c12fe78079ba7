"""LongMemEval data: where a dataset comes from, how it is read, parsed and kept.

``dataset`` (bundled sample, Hub, path; sha256; the streamed reader), ``pairs`` (one
instance -> memory rows and gold), ``protocol`` (the vipune and LongMemEval views, session or
turn), ``corpus`` (the compact SQLite file every later phase reads), ``subset`` (stratified
subsets) and ``generator/`` (deterministic LongMemEval-shaped data). ``sample/`` is the
bundled sample with its prepped vectors.
"""
