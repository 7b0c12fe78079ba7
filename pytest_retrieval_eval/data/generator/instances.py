"""Deterministic LongMemEval-shaped data: the bundled sample and a full-size synthetic M.

The output has LongMemEval's exact layout (one JSON array of instances with ``question_id``,
``question_type``, ``question``, ``answer``, ``question_date``, ``haystack_session_ids``,
``haystack_dates``, ``haystack_sessions`` and ``answer_session_ids``; evidence turns carry
``has_answer: true``) and the traits of the real files that matter to a retrieval harness:

* every question type, plus ``_abs`` abstention instances that still list answer sessions;
* evidence stated in natural turns (by the user, or by the assistant for
  ``single-session-assistant``), questions that sometimes reuse the evidence words and
  sometimes paraphrase them, knowledge updates (gold = old and new session), temporal
  questions computed from the session dates, multi-session aggregates (2-4 gold sessions);
* filler sessions on everyday topics drawn from one shared pool (same id, same content in
  every history that holds them), repeated ids inside a history, persona sessions that hold
  other facts (hard negatives), topical distractor sessions (the evidence's topic and
  entities, the same puppy or commute or book club, but no answer: the near misses that make
  real LongMemEval hard), heavy-tailed session lengths and a few sessions over 100,000 bytes.

Everything derives from ``GeneratorConfig.seed`` through ``random.Random`` instances seeded
with strings, so the same config writes a byte-identical file on every run and platform.
:func:`write_dataset` streams (one instance in memory at a time) and replaces the target
atomically. ``retrieval-eval generate --preset sample OUT.json`` (or ``python -m
pytest_retrieval_eval.generator``) is its command line (:mod:`pytest_retrieval_eval.cli.generate`).

The words live in :mod:`.text` (vocabularies, templates, the text engine) and the evidence
tables in :mod:`.questions`; this module plans and assembles instances.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from ...io import user_files
from .questions import _AGGS, _EVENTS, _FACTS, _PREFS, _TOLD, _UPDATABLE, _Fact
from .text import _MISSES, _NEAR, _TOPIC_NAMES, _cap, _Exchange, _Slots, _Text

__all__ = ["FULL_M", "MAX_POOL", "PRESETS", "SAMPLE", "GeneratorConfig", "fits_the_pool",
           "iter_instances", "most_instances", "write_dataset"]

Progress = Callable[[str, int, int | None], None]
_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
          "temporal-reasoning", "knowledge-update", "multi-session")
_ABSTAINABLE = ("single-session-user", "temporal-reasoning", "knowledge-update",
                "multi-session")
_TOPICAL_MISS = 0.85  # chance that a topical distractor of a keyword question holds a miss
_PERSONA_MISS = 0.9    # ... and that a persona session (another topic) holds one
_KEYWORD_TYPES = ("single-session-user", "single-session-assistant", "knowledge-update",
                  "multi-session")   # the types with a keyword question (``_Fact.keyword`` ...)
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_B62 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate. ``type_counts`` are instances per ``question_type`` (abstention
    included); ``abstention_counts`` says how many of those get an ``_abs`` id. Lengths are
    UTF-8 bytes of a session's rendered text (``role: content`` lines)."""

    seed: int = 0
    type_counts: tuple[tuple[str, int], ...] = tuple((t, 2) for t in _TYPES)
    abstention_counts: tuple[tuple[str, int], ...] = (("multi-session", 1),)
    sessions_per_history: int = 40          # mean history length (session slots)
    sessions_jitter: float = 0.05           # +- fraction around the mean
    filler_pool_size: int = 250             # shared filler sessions (sharegpt_/ultrachat_)
    persona_sessions: int = 3               # per history: the persona's other facts, no gold
    topical_sessions: int = 6               # per history: the evidence's topic, no answer
    repeat_fraction: float = 0.9            # share of histories holding a repeated id
    max_repeats: int = 3                    # repeated slots per such history (1..max)
    session_bytes_mean: int = 2_000         # log-normal length distribution ...
    session_bytes_sigma: float = 0.8
    session_bytes_cap: int = 20_000         # ... clipped here
    oversize_sessions: int = 1              # sessions of oversize_bytes or more, spread over
    oversize_bytes: int = 105_000           # the histories (vipune refuses > 100,000 bytes)
    unlabeled_instances: int = 0            # instances whose evidence lacks has_answer
    keyword_share: float = 0.25             # of the usable ssu/ssa/ku/ms instances: asked as
                                            # a short keyword query (all words in the evidence)
    passing_share: float = 0.1              # of the usable instances but ssa: evidence said
                                            # in passing, in a session on another topic
    history_days: tuple[int, int] = (60, 240)   # span of one history's dates

    @property
    def n_instances(self) -> int:
        """Total number of instances (abstention included)."""
        return sum(n for _, n in self.type_counts)

    @property
    def n_abstention(self) -> int:
        """Number of ``_abs`` instances."""
        return sum(n for _, n in self.abstention_counts)

    def scaled(self, instances: int | None = None, sessions: int | None = None,
               seed: int | None = None) -> GeneratorConfig:
        """The same shape at another size: per-type, abstention, pool, oversize and unlabeled
        counts scale with the instance count (every type present when ``instances >= 6``);
        the filler pool also scales with the history length."""
        n_old, n_new = self.n_instances, instances or self.n_instances
        s_new = sessions or self.sessions_per_history
        counts = dict(zip([t for t, _ in self.type_counts],
                          _apportion([n for _, n in self.type_counts], n_new), strict=True))
        want = _apportion([n for _, n in self.abstention_counts],
                          max(1, round(self.n_abstention * n_new / n_old)) if
                          self.n_abstention else 0)
        abst = tuple((t, min(a, counts[t] - 1 if counts[t] > 1 else 0))
                     for (t, _), a in zip(self.abstention_counts, want, strict=True))
        slots = n_new * s_new / (n_old * self.sessions_per_history)
        return replace(
            self, seed=self.seed if seed is None else seed,
            type_counts=tuple(counts.items()), abstention_counts=abst,
            sessions_per_history=s_new,
            filler_pool_size=max(4 * s_new, round(self.filler_pool_size * slots)),
            oversize_sessions=min(n_new, max(1 if self.oversize_sessions else 0,
                                             round(self.oversize_sessions * n_new / n_old))),
            unlabeled_instances=round(self.unlabeled_instances * n_new / n_old))


def _apportion(weights: Sequence[int], total: int) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainder); each nonzero weight
    gets at least one when ``total`` allows it."""
    if not any(weights):
        return [0] * len(weights)
    whole = sum(weights)
    exact = [w * total / whole for w in weights]
    out = [int(x) for x in exact]
    floor = 1 if total >= sum(1 for w in weights if w) else 0  # per nonzero weight
    if floor:
        out = [max(o, 1 if w else 0) for o, w in zip(out, weights, strict=True)]
    order = sorted(range(len(weights)), key=lambda i: (out[i] - exact[i], -weights[i]))
    i = 0
    while sum(out) != total:
        j = order[i % len(order)]
        step = 1 if sum(out) < total else -1
        if weights[j] and out[j] + step >= floor:
            out[j] += step
        i += 1
    return out


SAMPLE = GeneratorConfig(
    seed=20240610,
    type_counts=(("multi-session", 4), ("temporal-reasoning", 4), ("knowledge-update", 3),
                 ("single-session-user", 3), ("single-session-assistant", 2),
                 ("single-session-preference", 2)),
    abstention_counts=(("multi-session", 1), ("temporal-reasoning", 1),
                       ("knowledge-update", 1)),
    sessions_per_history=40, filler_pool_size=260, persona_sessions=3, topical_sessions=8,
    session_bytes_mean=1_500, session_bytes_sigma=0.8, session_bytes_cap=20_000,
    oversize_sessions=1, oversize_bytes=105_000, unlabeled_instances=1,
    keyword_share=0.8, passing_share=0.7)
"""The bundled sample (``data/sample/longmemeval_sample.json``): 18 instances, ~1.6 MB."""

FULL_M = GeneratorConfig(
    seed=20240602,
    type_counts=(("multi-session", 133), ("temporal-reasoning", 133), ("knowledge-update", 78),
                 ("single-session-user", 70), ("single-session-assistant", 56),
                 ("single-session-preference", 30)),
    abstention_counts=(("multi-session", 12), ("temporal-reasoning", 8),
                       ("knowledge-update", 4), ("single-session-user", 6)),
    sessions_per_history=500, filler_pool_size=30_000, persona_sessions=8,
    topical_sessions=12,
    session_bytes_mean=10_100, session_bytes_sigma=0.85, session_bytes_cap=90_000,
    oversize_sessions=12, oversize_bytes=110_000, unlabeled_instances=21,
    history_days=(120, 420))
"""LongMemEval_M's shape: 500 instances (30 ``_abs``), ~250,000 slots, ~2.7 GB."""

PRESETS = {"sample": SAMPLE, "full_m": FULL_M}


# --------------------------------------------------------------------------- ids, dates
def _b62(value: int, width: int) -> str:
    out = []
    for _ in range(width):
        value, r = divmod(value, 62)
        out.append(_B62[r])
    return "".join(out)


#: Filler and oversize sessions together stay below this: their ids (``ultrachat_`` mod
#: 600,000, :func:`_pool_id`) must stay unique.
MAX_POOL = 600_000


def fits_the_pool(config: GeneratorConfig) -> bool:
    """Whether ``config``'s filler pool and oversize sessions have unique ids."""
    return config.filler_pool_size + config.oversize_sessions < MAX_POOL


def most_instances(config: GeneratorConfig, sessions: int | None = None) -> int:
    """The most instances ``config.scaled(instances, sessions)`` fits the pool with; 0 when
    not even one does (the history is too long). The pool grows with instances, so a
    binary search."""
    low, high = 0, MAX_POOL  # the pool holds at least one session per instance
    while low < high:
        mid = (low + high + 1) // 2
        if fits_the_pool(config.scaled(instances=mid, sessions=sessions)):
            low = mid
        else:
            high = mid - 1
    return low


def _pool_id(seed: int, idx: int, rng: random.Random) -> str:
    """A unique ShareGPT/UltraChat-looking id for filler ``idx`` (bijective in ``idx``)."""
    if rng.random() < 0.5:
        return f"ultrachat_{(idx * 7919 + seed * 31) % 600_000:d}"
    return f"sharegpt_{_b62((idx * 1_000_003 + seed * 7_777_777) % 62 ** 7, 7)}_{idx % 4}"


def _date(moment: datetime) -> str:
    return moment.strftime(f"%Y/%m/%d ({_WEEKDAYS[moment.weekday()]}) %H:%M")


# --------------------------------------------------------------------------- instances
class _Generator:
    def __init__(self, config: GeneratorConfig) -> None:
        if not fits_the_pool(config):
            raise ValueError(f"filler_pool_size + oversize_sessions must stay below "
                             f"{MAX_POOL:,} (ids must stay unique)")
        counts = dict(config.type_counts)
        for t, n in config.abstention_counts:
            if t not in _ABSTAINABLE or n > counts.get(t, 0):
                raise ValueError(f"abstention_counts: {n} x {t!r} is not possible; use "
                                 f"{', '.join(_ABSTAINABLE)} and at most type_counts")
        self.cfg, self.text = config, _Text(config.seed)
        plan = random.Random(f"{config.seed}:plan")
        types = [t for t, n in config.type_counts for _ in range(n)]
        plan.shuffle(types)
        abst: set[int] = set()
        for t, n in config.abstention_counts:
            abst.update(plan.sample([i for i, x in enumerate(types) if x == t], n))
        usable = [i for i in range(len(types)) if i not in abst]
        self.unlabeled = set(plan.sample(usable, min(config.unlabeled_instances, len(usable))))
        askable = [i for i in usable if types[i] in _KEYWORD_TYPES]
        self.keyword = set(plan.sample(askable, round(config.keyword_share * len(askable))))
        aside = [i for i in usable if types[i] != "single-session-assistant"]
        self.passing = set(plan.sample(aside, round(config.passing_share * len(aside))))
        self.plan = [(t, i in abst) for i, t in enumerate(types)]
        n, o = len(types), config.oversize_sessions
        self.oversize: dict[int, list[int]] = {}
        for j in range(o):
            self.oversize.setdefault(j * n // o, []).append(config.filler_pool_size + j)
        self.hexes: set[str] = set()
        self.near: list[tuple[str, _Slots]] = []   # the current instance's evidence topics
        self.misses: tuple[str, ...] = ()             # its keyword question's near misses

    def _length(self, rng: random.Random) -> int:
        c = self.cfg
        mu = math.log(c.session_bytes_mean) - c.session_bytes_sigma ** 2 / 2
        drawn = rng.lognormvariate(mu, c.session_bytes_sigma)
        return int(min(c.session_bytes_cap, max(300, drawn)))

    def filler(self, idx: int) -> tuple[str, list[dict[str, Any]]]:
        """Pool session ``idx``: its id and turns depend on (seed, idx) only."""
        rng = random.Random(f"{self.cfg.seed}:pool:{idx}")
        sid = _pool_id(self.cfg.seed, idx, rng)
        big = idx >= self.cfg.filler_pool_size
        size = int(self.cfg.oversize_bytes * rng.uniform(1.0, 1.4)) if big else self._length(rng)
        topic = "programming" if big else rng.choice(_TOPIC_NAMES)
        return sid, self.text.session(rng, topic, size)

    def _hex(self, rng: random.Random) -> str:
        while True:
            h = f"{rng.getrandbits(32):08x}"
            if h not in self.hexes:
                self.hexes.add(h)
                return h

    def instance(self, index: int) -> dict[str, Any]:
        cfg, (qtype, abstain) = self.cfg, self.plan[index]
        rng = random.Random(f"{cfg.seed}:instance:{index}")
        labeled = index not in self.unlabeled
        qhex, ahex = self._hex(rng), self._hex(rng)
        gpt4 = qtype in ("temporal-reasoning", "multi-session") and rng.random() < 0.5
        qid = ("gpt4_" if gpt4 else "") + qhex + ("_abs" if abstain else "")
        self.near, self.misses = [], ()
        evidence, finish, used = self._question(rng, qtype, abstain, index in self.keyword,
                                                index in self.passing)
        # slots: ("e", k) evidence, ("p", k) persona noise, ("t", k) topical distractor,
        # ("f", pool idx) filler
        n = round(cfg.sessions_per_history * (1 + rng.uniform(-1, 1) * cfg.sessions_jitter))
        noise = cfg.persona_sessions
        extra = self.oversize.get(index, [])
        repeats = rng.randint(1, cfg.max_repeats) if rng.random() < cfg.repeat_fraction else 0
        topical = cfg.topical_sessions
        k_fill = max(2, n - len(evidence) - noise - topical - len(extra) - repeats)
        fill = rng.sample(range(cfg.filler_pool_size), min(k_fill, cfg.filler_pool_size))
        fill += [rng.choice(fill) for _ in range(repeats)] + extra
        slots = ([("e", k) for k in range(len(evidence))] + [("p", k) for k in range(noise)]
                 + [("t", k) for k in range(topical)] + [("f", i) for i in fill])
        rng.shuffle(slots)
        ev_pos = [i for i, s in enumerate(slots) if s[0] == "e"]
        for k, pos in enumerate(ev_pos):          # evidence in narrative order
            slots[pos] = ("e", k)
        start = datetime(2022, 1, 1) + timedelta(days=rng.randint(0, 420))
        span = rng.randint(*cfg.history_days) * 1440
        dates = [start + timedelta(minutes=m)
                 for m in sorted(rng.randrange(span) for _ in slots)]
        qdate = dates[-1] + timedelta(days=rng.randint(1, 30), minutes=rng.randrange(1440))
        question, answer = finish([dates[p] for p in ev_pos], qdate)
        question = _cap(question)
        others = [f for f in _FACTS if f not in used]
        # LongMemEval's ids (data/custom_history/sample_haystack_and_timestamp.py, ~line 216
        # and ~234): "answer_" + the source id for one evidence session, + "_<n>" for several.
        gold = ([f"answer_{ahex}"] if qtype.startswith("single-session")
                else [f"answer_{ahex}_{k + 1}" for k in range(len(ev_pos))])
        ids, sessions = [], []
        for kind, k in slots:
            if kind == "f":
                sid, turns = self.filler(k)
            elif kind == "t":   # user sessions of other sources: ids of their own, as in
                sid = f"{self._hex(rng)}_{rng.randint(1, 3)}"   # LongMemEval's haystacks
                turns = self._topical(rng)
            elif kind == "e":
                sid = gold[k]
                topic, inserts = evidence[k]
                turns = self.text.session(rng, topic, self._length(rng), inserts, labeled,
                                          evidence=True)
            else:
                sid = f"{self._hex(rng)}_{rng.randint(1, 3)}"
                facts = rng.sample(others, 2)
                inserts = [_Exchange(self._state(rng, f.says, _Slots(rng, v=rng.choice(
                    f.values)), f.topic), None, None) for f in facts]
                if self.misses and rng.random() < _PERSONA_MISS:   # the words, off topic
                    miss = self._state(rng, rng.choice(self.misses), self.near[0][1],
                                       facts[0].topic)
                    inserts.append(_Exchange(miss, None, None))
                turns = self.text.session(rng, facts[0].topic, self._length(rng), inserts)
            ids.append(sid)
            sessions.append(turns)
        return {"question_id": qid, "question_type": qtype, "question": question,
                "answer": answer, "question_date": _date(qdate),
                "haystack_session_ids": ids, "haystack_dates": [_date(d) for d in dates],
                "haystack_sessions": sessions,
                "answer_session_ids": gold}

    def _topical(self, rng: random.Random) -> list[dict[str, Any]]:
        """A distractor session on an evidence topic: near misses with the evidence's
        entities, no answer."""
        topic, slots = rng.choice(self.near)
        near = _NEAR.get(topic, ())
        says = rng.sample(near, min(len(near), rng.randint(1, 2)))
        if self.misses and rng.random() < _TOPICAL_MISS:   # a near miss with the keyword's words
            says = [rng.choice(self.misses), *says[:1]]
        inserts = [_Exchange(self._state(rng, s, slots, topic), None, None) for s in says]
        return self.text.session(rng, topic, self._length(rng), inserts)

    def _state(self, rng: random.Random, says: str, slots: _Slots, topic: str) -> str:
        """A user turn that mentions ``says`` in passing, then asks something on ``topic``."""
        opener = rng.choice(("", "By the way, ", "Quick update: ", "So, ", "Funny thing, "))
        return f"{_cap(opener + says.format_map(slots))}. {self.text.user(rng, topic)}"

    def _question(self, rng: random.Random, qtype: str, abstain: bool, keyword: bool,
                  passing: bool) -> tuple[
            list[tuple[str, list[_Exchange]]],
            Callable[[list[datetime], datetime], tuple[str, str | int]], list[_Fact]]:
        """Evidence sessions (topic, inserted exchanges) in narrative order, and a function of
        their dates and the question date giving (question, answer).

        ``keyword``: ask the short keyword query (its words are all in the evidence; the
        topical distractors may carry a near miss holding them too, see ``_MISSES``) instead
        of a sentence. ``passing``: the evidence comes up in passing, in a session about
        another topic (the question's topic then points the embedding at the distractors)."""

        def ask(asks: tuple[str, ...], short: str) -> str:   # 25%: reuse the evidence words
            if keyword:
                # near misses in the topical distractors, unless the evidence is said in
                # passing: then the lexical match is the evidence's own
                self.misses = () if passing else _MISSES[short]
                return short
            return asks[0] if rng.random() < 0.25 else rng.choice(asks[1:])

        def about(topic: str) -> str:
            return rng.choice([t for t in _TOPIC_NAMES if t != topic]) if passing else topic

        def stated(says: str, slots: _Slots, topic: str) -> tuple[str, list[_Exchange]]:
            where = about(topic)
            return where, [_Exchange(self._state(rng, says, slots, where), None, "user")]

        no = "The information provided is not enough. "
        if qtype in ("single-session-user", "knowledge-update"):
            fact = rng.choice(_FACTS if qtype == "single-session-user" else _UPDATABLE)
            old, new = rng.sample(fact.values, 2)
            slots = _Slots(rng, v=old)
            ev = [stated(fact.says, slots, fact.topic)]
            if qtype == "knowledge-update":
                upd = _Slots(rng, v=new, old=old, **{k: v for k, v in slots.items()
                                                     if k not in ("v", "old")})
                ev.append(stated(fact.update, upd, fact.topic))
                slots = upd
            self.near.append((fact.topic, slots))
            q = (fact.absent if abstain else ask(fact.asks, fact.keyword)).format_map(slots)
            a: str | int = (no + "The user never mentioned this." if abstain
                            else fact.answer.format_map(slots))
            return ev, (lambda _d, _q: (q, a)), [fact]
        if qtype == "single-session-assistant":
            told = rng.choice(_TOLD)
            slots = _Slots(rng, v=rng.choice(told.values))
            reply = self.text.assistant(rng, told.topic, told.tell.format_map(slots))
            ev = [(told.topic, [_Exchange(told.request.format_map(slots), reply,
                                          "assistant")])]
            self.near.append((told.topic, slots))
            q, a = ask(told.asks, told.keyword).format_map(slots), told.answer.format_map(slots)
            return ev, (lambda _d, _q: (q, a)), []
        if qtype == "single-session-preference":
            pref = rng.choice(_PREFS)
            slots = _Slots(rng, v=rng.choice(pref.values))
            ev = [stated(pref.says, slots, pref.topic)]
            self.near.append((pref.topic, slots))
            q, a = pref.question.format_map(slots), pref.answer.format_map(slots)
            return ev, (lambda _d, _q: (q, a)), []
        if qtype == "temporal-reasoning":
            e1, e2, e3 = rng.sample(_EVENTS, 3)
            style = "abs" if abstain else rng.choice(("between", "order", "ago"))
            slots = _Slots(rng)
            ev = [stated(e.today, slots, e.topic) for e in ((e2,) if style == "ago" else (e1, e2))]
            a1, a2, a3 = (e.noun.format_map(slots) for e in (e1, e2, e3))
            self.near.extend((e.topic, slots) for e in (e1, e2))   # never e3 (abstention)

            def temporal(d: list[datetime], qd: datetime) -> tuple[str, str | int]:
                if style == "ago":
                    weeks = (qd.date() - d[0].date()).days // 7
                    return f"How many weeks ago was {a2}?", f"{weeks} weeks ago"
                days = (d[1].date() - d[0].date()).days
                if abstain:
                    return (f"How many days passed between {a1} and {a3}?",
                            f"{no}You did not mention {a3}; you mentioned {a1} and {a2}.")
                if style == "between" and days > 0:
                    return rng.choice((f"How many days passed between {a1} and {a2}?",
                                       f"How long after {a1} did {a2} happen, in days?")), \
                        f"{days} days"
                first, second = (a1, a2) if rng.random() < 0.5 else (a2, a1)
                return f"Which happened first, {first} or {second}?", _cap(a1)
            return ev, temporal, []
        agg = rng.choice(_AGGS)
        amounts = [rng.randint(agg.low, agg.high) for _ in range(rng.randint(2, 4))]
        ev = [stated(agg.piece, _Slots(rng, n=str(x)), agg.topic) for x in amounts]
        self.near.append((agg.topic, _Slots(rng)))
        total = sum(amounts)
        q = agg.absent if abstain else ask(agg.asks, agg.keyword)
        a = (f"{no}You did not mention that; you only told me about {agg.topic}." if abstain
             else total if not agg.unit else f"${total}" if agg.unit == "$"
             else f"{total}{agg.unit}")
        return ev, (lambda _d, _q: (q, a)), []


def iter_instances(config: GeneratorConfig) -> Iterator[dict[str, Any]]:
    """Yield the instances of ``config`` one at a time (a generator: nothing is kept)."""
    gen = _Generator(config)
    for index in range(config.n_instances):
        yield gen.instance(index)


def write_dataset(config: GeneratorConfig, path: str | os.PathLike[str],
                  progress: Progress | None = None) -> int:
    """Write ``config``'s instances to ``path`` as one JSON array, streaming one instance at
    a time into a temporary file that replaces ``path`` at the end (through a symlink, at its
    target; a FIFO, device or folder there is refused: :mod:`io.user_files`). Returns the
    byte size."""
    target = Path(path)

    def write(raw: BinaryIO) -> None:
        fh = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
        fh.write("[")
        for i, instance in enumerate(iter_instances(config)):
            fh.write(("\n" if i == 0 else ",\n") + json.dumps(instance, allow_nan=False))
            if progress is not None:
                progress("instances", i + 1, config.n_instances)
        fh.write("\n]\n")
        fh.flush()
        fh.detach()  # the caller syncs and closes the file

    target = user_files.replace_file(target, write)
    return target.stat().st_size
