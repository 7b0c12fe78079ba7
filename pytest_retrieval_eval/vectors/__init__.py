"""Vectors: the embedding model and the content-addressed cache of what it made.

``model_files`` (a model's files, local or from the Hub), ``embedding`` (vipune's recipe on
onnxruntime), ``long_texts`` (bounded tokenizing of long texts), ``cache`` (VectorCache: the
reading side and every public name of the cache), ``shards`` (the on-disk format),
``shard_writer`` (locked, atomic writes), ``cached_models`` (which models a cache holds),
``prep`` (embed what is missing), ``ray_prep`` (the same on Ray), ``merge`` and ``hub_sync``
(caches combined, pushed to and pulled from the Hub).

Public: ``embedding.load_embedder``, ``EmbedConfig``, ``Embedder``; ``cache.VectorCache``,
``default_cache_dir``, ``list_models``, ``models_holding``; ``prep.run_prep``;
``merge.merge_caches``; ``hub_sync.push``, ``pull``.
"""
