"""Vectors: the embedding model and the content-addressed cache of what it made.

``embedding`` (model files, vipune's recipe on onnxruntime), ``cache`` (VectorCache: the
reading side and every public name), ``shards`` (the on-disk format), ``shard_writer``
(locked, atomic writes), ``cached_models`` (which models a cache holds), ``prep`` (embed what
is missing), ``ray_prep`` (the same on Ray), ``merge`` and ``hub_sync`` (caches combined,
pushed to and pulled from the Hub).
"""
