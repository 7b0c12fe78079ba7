"""Files on disk and on the Hugging Face Hub: the floor every other wing reads through.

``checksums`` (sha256 of files, sidecars, memos, atomic commits, the umask's mode), ``hub``
(Hub file access: cache lookup by folders, one short metadata request, download) and
``hub_transfer`` (one Hub connection with one-line errors, listings, resumable downloads),
``signals`` (SIGTERM handled as Ctrl-C for the length of a run), ``ini_file`` (the keys of
pytest's config file as written, a misspelled key's twin named),
``user_files`` (files at paths the user names: through symlinks, never over a FIFO or device).

Public: ``checksums.sha256_file``, ``memoised_sha256``, ``commit_file``, ``matches_sidecar``,
``share_as_umask``; ``hub.cached_file``, ``hub.download_file``, ``hub.offline_mode``;
``hub_transfer.connect``, ``Fetcher``; ``user_files.replace_text``, ``append_text``,
``json_text``.

PYTEST_DONT_REWRITE: loaded while the plugin is off; holds no test asserts.
"""
