"""One reading of each kind of external value (issue 43, "How"): every door (the Python store
protocol, ``cmd:`` lines, ``run:`` files, reports, tokenizer files, ini values) parses a value
of a kind with the one function of its module here, into one type, and the metrics, token
counts and explain read that type.

* :mod:`.turn_ids`: a turn id, ``<session_id>_<n>`` with ``n`` ASCII digits, no leading zero;
* :mod:`.scores`: a score, a finite real number (not a bool), as a float;
* :mod:`.texts`: a text handed to ``persona.embed``, a ``str`` (one line otherwise);
* :mod:`.outputs`: where an output file may be written (no file there, or one of ours).

Floor 1: it imports nothing of the package but :mod:`..errors`.
"""
