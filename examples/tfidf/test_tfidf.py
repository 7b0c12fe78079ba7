"""TF-IDF over each pair's vipune store, scored beside vipune's hybrid search."""

import math
import re
import sqlite3
from collections import Counter


def words(text):
    return re.findall(r"\w+", text.lower())


def test_tfidf(retrieval_eval_pair, retrieval_eval_store, retrieval_eval_record):
    db = sqlite3.connect(f"file:{retrieval_eval_store}?mode=ro", uri=True)
    docs = {i: Counter(words(c)) for i, c in db.execute("SELECT id, content FROM memories")}
    db.close()
    df = Counter(w for counts in docs.values() for w in counts)
    query = set(words(retrieval_eval_pair.question))

    def score(i):
        total = sum(docs[i].values()) or 1
        return sum(docs[i][w] / total * math.log(len(docs) / df[w]) for w in query & docs[i].keys())

    retrieval_eval_record(sorted(docs, key=score, reverse=True))
