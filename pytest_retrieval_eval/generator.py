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
atomically. ``python -m pytest_retrieval_eval.generator --preset sample OUT.json`` is the CLI.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["FULL_M", "PRESETS", "SAMPLE", "GeneratorConfig", "iter_instances", "main",
           "write_dataset"]

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


# --------------------------------------------------------------------------- vocabulary
def _w(text: str) -> tuple[str, ...]:
    return tuple(text.split("|"))


_TOPICS: dict[str, tuple[str, ...]] = {k: _w(v) for k, v in {
    "cooking": "sourdough starter|cast iron skillet|weeknight pasta|braised short ribs|knife "
    "skills|meal prep|spice blends|stir fry|homemade stock|roasted vegetables|marinades|pan "
    "sauces|a dutch oven|curry paste|fermented pickles|bread proofing",
    "travel": "carry-on packing|travel insurance|rail passes|airport layovers|hostel bookings|"
    "jet lag|a travel budget|visa paperwork|walking tours|a road trip route|hotel loyalty "
    "points|local SIM cards|museum passes|overnight trains|currency exchange",
    "fitness": "interval training|deadlift form|marathon training|mobility drills|rest days|"
    "protein intake|kettlebell swings|resistance bands|a warm-up routine|heart rate zones|core "
    "strength|the rowing machine|progressive overload|a stretching routine",
    "programming": "unit tests|REST API design|database indexes|Python decorators|git rebase|"
    "memory leaks|async code|Docker containers|type hints|code review|regular expressions|CI "
    "pipelines|caching layers|SQL joins|error handling|logging configuration",
    "finance": "an emergency fund|index funds|credit card debt|a monthly budget|retirement "
    "accounts|tax deductions|mortgage refinancing|high-yield savings|expense tracking|student "
    "loans|dividend stocks|insurance premiums|side income|a net worth spreadsheet",
    "gardening": "raised beds|tomato seedlings|a compost pile|drip irrigation|aphids|pruning "
    "shears|perennial borders|soil pH|an herb garden|mulch|seed starting|repotting "
    "houseplants|fruit trees|companion planting",
    "music": "guitar chords|piano scales|music theory|home recording|metronome practice|vinyl "
    "records|jazz standards|songwriting|an audio interface|ear training|chord progressions|"
    "sheet music|synth patches|concert tickets",
    "photography": "aperture settings|portrait lighting|raw editing|prime lenses|golden hour|"
    "a sturdy tripod|composition rules|film cameras|white balance|street photography|photo "
    "backups|shutter speed|color grading|astrophotography",
    "home": "a leaky faucet|drywall patches|paint colors|a smart thermostat|a kitchen "
    "backsplash|a cordless drill|grout cleaning|weatherstripping|a ceiling fan|deck staining|"
    "closet shelving|the circuit breaker|tile flooring|gutter cleaning",
    "parenting": "a bedtime routine|toddler tantrums|screen time|school lunches|potty "
    "training|reading aloud|sibling rivalry|homework help|an allowance|playdates|car seats|"
    "picky eating|summer camp|family game night",
    "pets": "puppy training|the litter box|cat scratching posts|leash pulling|vet checkups|"
    "grain-free food|an aquarium filter|crate training|pet insurance|flea treatment|dog park "
    "etiquette|a bird cage|grooming brushes|senior dog care",
    "movies": "film noir|indie dramas|streaming services|sci-fi classics|movie soundtracks|"
    "documentaries|horror franchises|cinematography|animated features|director commentary|"
    "film festivals|screenwriting|foreign films",
    "books": "fantasy series|book club picks|audiobooks|literary fiction|reading goals|"
    "e-readers|mystery novels|poetry collections|memoirs|library holds|annotating books|"
    "classic literature|graphic novels|short stories",
    "language": "Spanish verb conjugation|Japanese kanji|flashcard apps|a language exchange|"
    "French pronunciation|German grammar|listening practice|vocabulary lists|Italian idioms|"
    "Mandarin tones|immersion|grammar drills|podcasts for learners|writing practice",
    "career": "resume bullet points|salary negotiation|job interviews|performance reviews|"
    "remote work|networking events|a career change|cover letters|a LinkedIn profile|manager "
    "one-on-ones|a promotion case|side projects|mentorship|burnout",
    "health": "a sleep schedule|hydration|blood pressure|vitamin D|posture|meditation|stress "
    "management|seasonal allergies|knee pain|screen breaks|healthy snacks|an annual physical|"
    "migraines|breathing exercises",
    "cars": "oil changes|tire rotation|hybrid cars|brake pads|road trip prep|car insurance|"
    "winter tires|the check engine light|used car shopping|EV charging|car detailing|fuel "
    "economy|battery replacement|dashcams",
    "science": "black holes|climate models|CRISPR|quantum computing|plate tectonics|vaccines|"
    "the periodic table|exoplanets|ocean currents|neural networks|photosynthesis|particle "
    "physics|the fossil record|renewable energy",
    "history": "the Roman Empire|the Silk Road|the Industrial Revolution|medieval castles|"
    "ancient Egypt|the printing press|the Cold War|the Renaissance|Viking voyages|the Ming "
    "dynasty|the French Revolution|the space race|ancient Greece",
    "gaming": "strategy games|speedruns|co-op campaigns|game controllers|indie games|open "
    "world RPGs|board game nights|esports|retro consoles|deck-building games|puzzle games|VR "
    "headsets|game mods|tabletop campaigns",
    "coffee": "pour-over|an espresso machine|cold brew|a burr grinder|latte art|single-origin "
    "beans|the French press|water temperature|milk frothing|decaf options|roast levels|coffee "
    "subscriptions|a moka pot|descaling",
}.items()}
_TOPIC_NAMES = tuple(_TOPICS)
_ADJ = _w("simple|steady|consistent|practical|flexible|patient|gradual|structured|relaxed|"
          "focused|careful|balanced|creative|thoughtful|sensible|budget-friendly|reliable")
_SAY = _w(
    "When it comes to {n}, the most important thing is to stay {a} and keep going.|Many "
    "people find that {n} works best when it is paired with {m}.|A common mistake with {n} is "
    "ignoring {m} until it becomes a real problem.|It also helps to think about how {n} affects "
    "{m} over the long run.|Start small by setting aside twenty minutes a few times a week for "
    "{n}.|If {n} feels overwhelming, break it into smaller steps and look at {m} first.|Most "
    "experts recommend a {a} approach to {n} rather than big sudden changes.|Keep a short log "
    "of {n} so you can compare results from week to week.|Don't worry about getting {n} "
    "perfect right away; progress matters more than polish.|There are plenty of free guides on "
    "{n}, but a {a} routine beats any single resource.|Another option is to look into {m}, "
    "which often makes {n} much easier.|Budget matters too, since {n} can get expensive if "
    "you are not careful.|People who have done {n} for years usually know the small tricks "
    "around {m}.|Give yourself a {a} timeline and revisit your plan for {n} after a month.|The "
    "difference between good and great {n} usually comes down to {m}.|Read the basics about "
    "{m} before you dive deep into {n}.|Try to make {n} part of your regular schedule so it "
    "turns into a habit.|Every situation is different, so adjust {n} to what fits your life.|"
    "A {a} checklist for {n} can save time and prevent small errors.|If you get stuck with "
    "{m}, step back and review the fundamentals of {n}.|Tracking {m} alongside {n} gives you "
    "a clearer picture of what is working.|Some people combine {n} with {m}, while others "
    "keep them completely separate.|The good news is that {n} gets noticeably easier after "
    "the first few weeks.|Write down your goals for {n} and check them every Sunday.")
_INTRO = _w("Sure! Here are a few thoughts on {n}:|Great question. Let's break down {n}.|"
            "Absolutely, {n} is a great thing to work on.|Happy to help with {n}.|Here is an "
            "overview of {n} and {m}:|Of course. There are several ways to approach {n}.")
_CLOSE = _w("Let me know if you want more detail on any of these points.|I hope this helps, "
            "and good luck with {n}!|Feel free to ask follow-up questions about {m}.|If you "
            "share more about your situation, I can tailor these suggestions.")
_ASK = _w("Can you give me some tips on {n}?|I've been struggling with {n} lately. Any "
          "advice?|What's the best way to get started with {n}?|How do {n} and {m} relate to "
          "each other?|Could you explain {n} like I'm a beginner?|Is it worth spending money "
          "on {m} if I'm just starting with {n}?|What are common mistakes people make with "
          "{n}?|How much time should I spend on {n} each week?|Can you compare {n} and {m} "
          "for me?|I keep reading about {n}. Is it overrated?")
_LEAD = _w("|Thanks!|That makes sense.|Okay, follow-up question.|Interesting.|Got it.|Hmm.")
_EXTRA: dict[str, tuple[str, ...]] = {k: _w(v) for k, v in {
    "breed": "beagle|corgi|labrador|border collie|dachshund|golden retriever",
    "transit": "bus|train|subway|ferry|light rail", "color": "red|silver|dark blue|white|"
    "forest green|black", "job": "data analyst|product designer|nurse|project manager|"
    "software engineer|marketing lead|accountant", "instrument": "cello|piano|violin|guitar|"
    "saxophone|ukulele", "streak": "12|40|63|85|120", "dish": "roasted chickpeas|banana bread|"
    "focaccia|stuffed peppers|granola|sheet-pan salmon", "city": "Copenhagen|Chicago|Porto|"
    "Montreal|Vienna|Osaka|Lisbon|Denver", "genre": "gripping|thought-provoking|"
    "lighthearted|suspenseful", "plant": "fiddle leaf fig|snake plant|monstera|pothos",
    "band": "Khruangbin|The National|Lizzo|Vampire Weekend|Florence and the Machine|Bon Iver",
    "book": "Middlemarch|The Hobbit|Beloved|Dune|Normal People|The Road", "park": "Yosemite|"
    "Big Sur|Acadia|Zion|Lake Tahoe|the Smoky Mountains", "store": "garden center|farmers "
    "market|plant swap|hardware store",
}.items()}


# Near misses: things a persona says on an evidence topic, with the evidence's entities (the
# same ``{breed}``, ``{transit}``, ``{city}`` ... through the evidence's _Slots) but no answer.
_NEAR: dict[str, tuple[str, ...]] = {k: _w(v) for k, v in {
    "pets": "the {breed} puppy we got from the shelter keeps chewing the couch cushions|we "
    "took the puppy to the vet for his shots and he was so brave|my neighbor asked me to help "
    "pick a name for their new {breed} puppy|the shelter called to ask if we could foster "
    "another kitten for a few weeks",
    "cars": "the {transit} was delayed again this morning, so my commute took forever|I test "
    "drove a {color} hatchback at the used car lot but didn't buy it|the mechanic says my car "
    "needs new brake pads before winter|I've been listening to audiobooks to make the commute "
    "to the office go faster",
    "career": "my manager wants the {job} team to take on the quarterly planning|a recruiter "
    "reached out about a {job} role at another company|the onboarding paperwork at the new "
    "job is endless|my first week at the new office was mostly meetings",
    "fitness": "my Saturday morning run got rained out so I did intervals on the treadmill|my "
    "knees were sore, so I skipped the lakeside trail this week|I signed up for another race "
    "in the spring to stay motivated|I added goblet squats and lunges to my leg workout",
    "travel": "my sister and I are planning a trip together next summer|I'm trying to plan "
    "two days in {city} and can't decide which museums to see|my sister's new apartment needs "
    "a lot of work since she moved|we went camping at {park} years ago and I'd love to go back",
    "music": "my {instrument} practice has been slipping because of work|my nephew is looking "
    "for a {instrument} teacher and asked me for advice|I missed the {band} show last year and "
    "still regret it|tickets for {band} sold out in minutes this time",
    "coffee": "the cafe near work switched its oat milk brand and I'm not a fan|I've been "
    "trying to cut back on caffeine in the afternoon|my espresso machine needs descaling "
    "again|I tried a new coffee order before the office and regretted it",
    "books": "our book club meeting got moved to next Thursday|I've been reading a lot more "
    "since I got an e-reader|I picked up {book} at the library but haven't started it|the "
    "library book sale is coming up next month and I want to go",
    "gardening": "the plants on my balcony are struggling with the heat|my {plant} is "
    "dropping leaves and I'm not sure how often to water it|I went to the {store} but didn't "
    "buy anything this time|the tomato seedlings in the raised beds need staking",
    "finance": "my landlord finally fixed the heater in my apartment|I'm trying to work out "
    "how much of my paycheck should go to savings|rent in my neighborhood keeps going up|I "
    "opened a high-yield savings account for my emergency fund",
    "language": "my language app streak almost broke last night|I'm thinking about an "
    "evening class for the foreign language I'm studying|I practiced ordering food in the "
    "language I'm learning with a friend",
    "cooking": "I want to bake sourdough for the neighbors again but my starter died|my oven runs "
    "hot, so recipes always burn a little|I've been cooking more vegetarian dinners lately|I "
    "want to make {dish} again for a potluck",
    "programming": "I spent all afternoon fighting with timestamps in a Python script|my "
    "coworker keeps recommending libraries I've never heard of|our date parsing code broke "
    "after a time zone change",
    "health": "I want to volunteer more on weekends because it keeps me grounded|the food bank "
    "near us needs more volunteers in December|my dentist wants me back for a checkup soon",
    "home": "we're still unpacking boxes in the new house|the closing paperwork on a house is "
    "endless|I'm repainting the spare room in the new house this weekend",
    "parenting": "my daughter has a loose tooth and won't stop wiggling it|bedtime has been "
    "a battle with the kids lately|my daughter wants to know how the tooth fairy works",
}.items()}


# Near misses that hold every word of a keyword question (the key): vipune's FTS, which ANDs
# the question's words, returns the topical distractors that carry one beside the evidence.
_MISSES: dict[str, tuple[str, ...]] = {k: _w(v) for k, v in {
    "{breed} puppy name?": "my neighbor asked me to help pick a name for their new {breed} "
    "puppy|the {breed} puppy at the dog park has the funniest name",
    "{transit} commute minutes?": "the {transit} commute took twenty extra minutes because of "
    "track work|my coworker's {transit} commute is ninety minutes, which sounds awful",
    "New job as a {job}?": "my friend just got a new job as a {job} too|my cousin is looking "
    "for a new job as a {job} and asked me for tips",
    "Saturday run kilometers?": "my Saturday run got cut short, so I only did three "
    "kilometers|my neighbor's Saturday run is twice as many kilometers as mine",
    "My sister moved to?": "my sister moved her furniture to storage for the summer|my sister "
    "moved all her plants to my place while she travels",
    "{instrument} teacher name?": "my nephew wants the name of a good {instrument} teacher|I "
    "can never remember the name of my old {instrument} teacher from school",
    "Usual cafe order?": "my usual cafe order got messed up this morning|the barista at the "
    "cafe already knows my usual order",
    "Used {color} car I bought?": "I almost bought a used {color} car from a coworker but the "
    "brakes were shot|my brother bought a used {color} car and I helped him haggle",
    "Book club pick this month?": "the book club couldn't pick a date this month|it's my turn "
    "to pick for the book club next month, not this month",
    "Bloomed on my balcony?": "nothing on my balcony has bloomed since the heat wave|the herbs "
    "on my balcony bloomed and went bitter",
    "My monthly rent?": "my friend's monthly rent went up again|I set up autopay for my "
    "monthly rent so I stop forgetting",
    "Learning with a language app?": "my roommate is learning with a language app too|my dad "
    "started learning with a language app before his trip",
    "Oven degrees for the {dish}?": "my oven runs twenty degrees hot, which is bad news for the "
    "{dish}|I burned the {dish} because I forgot to check the oven degrees for the second batch",
    "{city} itinerary second day?": "a friend sent me her {city} itinerary and the second day "
    "is all food markets|my {city} itinerary fell apart on the second day because of rain",
    "Python library for date strings?": "my coworker swears by one Python library for date "
    "strings|I wrote my own Python library for date strings years ago and regret it",
    "{genre} novel for a long flight?": "my sister wants a {genre} novel for a long flight "
    "too|I never finish a {genre} novel for a long flight; I fall asleep",
    "Goblet squats sets?": "I lost count of my sets of goblet squats yesterday|my trainer "
    "made me do extra sets of goblet squats as a joke",
    "Emergency fund months?": "it took me months to start my emergency fund|my partner and I "
    "argued for months about the emergency fund",
    "{plant} water days?": "I forgot to water my {plant} for days|my {plant} sat in water for "
    "days after the storm",
    "New houseplants picked up?": "my neighbor picked up new houseplants at the {store}|my "
    "sister picked up new houseplants and they already have bugs",
    "Hours volunteered at the food bank?": "my friend volunteered extra hours at the food "
    "bank|my manager volunteered hours at the food bank with the whole team",
    "Spent on tickets for the show?": "my brother spent a fortune on tickets for the {band} "
    "show|my roommate spent way too much on tickets for the comedy show",
    "Used books at the library sale?": "I skipped the used books at the library sale this "
    "time|my neighbor donated used books at the library sale table",
    "Miles on the lakeside trail?": "the lakeside trail is closed for a few miles near the "
    "bridge|my friend logged a hundred miles on the lakeside trail last year",
    "Loaves of sourdough for the neighbors?": "the neighbors asked for more loaves of "
    "sourdough|my starter died, so no loaves of sourdough for the neighbors this week",
}.items()}


class _Fact(NamedTuple):   # something the user says about themself (ssu, ku, noise)
    topic: str
    values: tuple[str, ...]
    says: str
    asks: tuple[str, ...]  # first: reuses the evidence words; the rest paraphrase
    update: str            # "" when the fact cannot be updated
    absent: str            # a question about something never said
    answer: str = "{v}"
    keyword: str = ""      # a short query whose every word is in ``says`` (and ``update``)


_FACTS = (
    _Fact("pets", _w("Biscuit|Pepper|Mochi|Juniper|Waffles|Ziggy|Clementine|Otis"),
          "we adopted a {breed} puppy from the shelter last weekend and named him {v}",
          ("What did I name my {breed} puppy from the shelter?",
           "What do we call the dog we brought home recently?"), "",
          "What did I name my hamster?", keyword="{breed} puppy name?"),
    _Fact("cars", _w("25|35|40|45|50|55|65"), "my commute on the {transit} is about {v} "
          "minutes each way", ("How long is my commute on the {transit}?", "How much time "
          "does it take me to get to the office?"), "we moved, so my commute on the "
          "{transit} is now about {v} minutes instead of {old}", "How long does my bike "
          "ride to the gym take?", "{v} minutes", keyword="{transit} commute minutes?"),
    _Fact("career", _w("Northwind Analytics|Bluefin Robotics|Helix Health|Orbital Logistics|"
          "Lumen Software|Riverbend Bank|Summit Outdoor Co."), "I just started a new job as "
          "a {job} at {v}", ("Where did I start my new job as a {job}?", "Which company "
          "employs me these days?"), "I left {old} and accepted a new job as a {job} at {v}",
          "Which company did my brother start working for?", keyword="New job as a {job}?"),
    _Fact("fitness", _w("5|6|8|10|12|15"), "I've been running {v} kilometers every Saturday "
          "morning", ("How many kilometers do I run every Saturday morning?", "How far do "
          "I usually jog at the end of the week?"), "I bumped my Saturday run up to {v} "
          "kilometers, up from {old}", "How many laps do I swim on Sundays?",
          "{v} kilometers", keyword="Saturday run kilometers?"),
    _Fact("travel", _w("Lisbon|Denver|Toronto|Melbourne|Austin|Edinburgh|Seattle|Kyoto"),
          "my sister just moved to {v} for her new job", ("Which city did my sister move "
          "to for her job?", "Where is my sibling living now?"), "my sister moved again, "
          "from {old} to {v}", "Which city did my cousin move to?",
          keyword="My sister moved to?"),
    _Fact("music", _w("Mrs. Alvarez|Daniel Okafor|Priya Raman|Mr. Lindqvist|Sofia Marchetti|"
          "Tom Whitaker"), "I've started {instrument} lessons with a teacher named {v}",
          ("What is the name of my {instrument} teacher?", "Who gives me music lessons?"),
          "I switched {instrument} teachers from {old} to a new teacher named {v}",
          "Who is my dance instructor?", keyword="{instrument} teacher name?"),
    _Fact("coffee", _w("flat white|cortado|cold brew|cappuccino|chai latte|Americano|mocha"),
          "my usual order at the cafe near work is an oat milk {v}", ("What is my usual oat "
          "milk order at the cafe near work?", "What drink do I normally grab before the "
          "office?"), "I changed my usual cafe order from an oat milk {old} to a {v}",
          "What do I usually order at the bakery?", keyword="Usual cafe order?"),
    _Fact("cars", _w("Honda Civic|Subaru Outback|Toyota RAV4|Mazda 3|Volkswagen Golf|"
          "Kia Niro"), "I finally bought a used {color} car, a {v}", ("What used car did I "
          "buy?", "Which vehicle did I end up purchasing?"), "I sold the {old} and bought a "
          "used {color} car, a {v}", "What motorcycle did I buy?",
          keyword="Used {color} car I bought?"),
    _Fact("books", _w("The Remains of the Day|Circe|Project Hail Mary|Pachinko|The Overstory|"
          "Klara and the Sun|Educated"), "our book club picked {v} for this month",
          ("Which book did my book club pick this month?", "What novel is my reading group "
          "discussing?"), "the book club dropped {old} and picked {v} for this month instead",
          "Which book did my neighbor lend me?", keyword="Book club pick this month?"),
    _Fact("gardening", _w("clematis|hibiscus|peace lily|orchid|jasmine|gardenia"),
          "the {v} on my balcony finally bloomed after two years", ("Which plant on my "
          "balcony finally bloomed?", "What flowered on my terrace recently?"), "",
          "Which vegetable did I harvest from my backyard?", keyword="Bloomed on my balcony?"),
    _Fact("finance", _w("1450|1600|1725|1850|2100|2300"), "my monthly rent is ${v}, which "
          "eats most of my paycheck", ("How much is my monthly rent?", "How much do I pay "
          "for housing every month?"), "my landlord raised my monthly rent from ${old} to "
          "${v}", "How much is my monthly car payment?", "${v}", keyword="My monthly rent?"),
    _Fact("language", _w("Portuguese|Korean|Italian|Dutch|Japanese|Greek|Turkish"),
          "I'm learning {v} with a language app and I'm on a {streak}-day streak", ("Which "
          "language am I learning with an app?", "What foreign tongue have I been studying "
          "lately?"), "I paused {old} and I'm learning {v} with a language app now",
          "Which programming language am I learning?",
          keyword="Learning with a language app?"),
)
_UPDATABLE = tuple(f for f in _FACTS if f.update)


class _Told(NamedTuple):   # something the assistant says (single-session-assistant)
    topic: str
    values: tuple[str, ...]
    request: str
    tell: str
    asks: tuple[str, ...]
    answer: str = "{v}"
    keyword: str = ""      # a short query whose every word is in ``request`` or ``tell``


_TOLD = (
    _Told("cooking", _w("350|375|400|425|450"), "Can you give me a simple recipe for {dish}?",
          "Preheat the oven to {v} degrees Fahrenheit, then bake the {dish} on the middle "
          "rack until golden.", ("What oven temperature did you tell me to use for the "
          "{dish}?", "How hot did you say the oven should be for that recipe I asked "
          "about?"), "{v} degrees Fahrenheit", keyword="Oven degrees for the {dish}?"),
    _Told("travel", _w("National Maritime Museum|Modern Art Pavilion|City History Museum|"
          "Botanical Conservatory|Old Town Gallery"), "I have two days in {city}. Can you "
          "plan an itinerary?", "On the second day, start early at the {v}, which gets "
          "crowded after lunch.", ("Which museum did you suggest for the second day of my "
          "{city} trip?", "Where did you tell me to go first thing on day two when I "
          "visit {city}?"), keyword="{city} itinerary second day?"),
    _Told("programming", _w("dateutil|pendulum|arrow|dateparser"), "What's a good way to "
          "parse messy date strings in Python?", "I'd reach for the {v} library; it handles "
          "most formats without you writing regexes.", ("Which Python library did you "
          "recommend for parsing date strings?", "What package did you point me to for "
          "dealing with timestamps in my script?"),
          keyword="Python library for date strings?"),
    _Told("books", _w("The Name of the Wind|Gone Girl|The Martian|Rebecca|Station Eleven"),
          "Can you recommend a {genre} novel for a long flight?", "I'd recommend {v}; it "
          "is hard to put down from the first chapter.", ("Which novel did you recommend "
          "for my long flight?", "What book did you suggest I bring on the plane?"),
          keyword="{genre} novel for a long flight?"),
    _Told("fitness", _w("2|3|4|5"), "Can you design a beginner leg workout for me?",
          "Begin with {v} sets of goblet squats, resting ninety seconds between sets.",
          ("How many sets of goblet squats did you suggest in my leg workout?", "How many "
          "rounds of the squat exercise did you recommend for my beginner routine?"),
          "{v} sets", keyword="Goblet squats sets?"),
    _Told("finance", _w("three|four|six|eight"), "How big should my emergency fund be?",
          "A good target is {v} months of essential expenses kept in a high-yield savings "
          "account.", ("How many months of expenses did you say my emergency fund should "
          "cover?", "What size of safety cushion did you advise me to save?"),
          "{v} months of expenses", keyword="Emergency fund months?"),
    _Told("gardening", _w("5|7|10|14"), "How often should I water my {plant}?", "Water the "
          "{plant} about every {v} days, and let the top inch of soil dry out in between.",
          ("How often did you tell me to water my {plant}?", "What watering schedule did "
          "you suggest for my houseplant?"), "every {v} days", keyword="{plant} water days?"),
)


class _Pref(NamedTuple):   # single-session-preference
    topic: str
    values: tuple[str, ...]
    says: str
    question: str
    answer: str


_PREFS = (
    _Pref("coffee", _w("light Ethiopian roasts|dark Sumatran roasts|fruity Kenyan beans"),
          "I only drink decaf after noon, and I'm really into {v} lately", "Can you suggest "
          "a coffee I could try this afternoon?", "The user would prefer a decaf option, "
          "ideally {v}, since they avoid caffeine after noon."),
    _Pref("travel", _w("small boutique hotels|family-run guesthouses|quiet apartment rentals"),
          "whenever I travel I book {v} close to the old town; big chain hotels feel "
          "soulless to me", "Any suggestions for where I should stay on my trip to {city}?",
          "The user would prefer {v} within walking distance of the historic center, not "
          "a chain hotel."),
    _Pref("cooking", _w("Thai|Mexican|Indian|Mediterranean"), "I'm vegetarian, I can't "
          "stand cilantro, and {v} food is my comfort food", "What should I cook for dinner "
          "tonight?", "The user would prefer a vegetarian {v} dish without cilantro."),
    _Pref("music", _w("70s jazz fusion|ambient electronic music|baroque harpsichord pieces"),
          "when I work I can only focus with {v} on; anything with lyrics distracts me",
          "Can you recommend something to listen to while I work this afternoon?",
          "The user would prefer instrumental {v}, nothing with lyrics."),
    _Pref("fitness", _w("swimming laps|cycling|rowing"), "I hate running because of my "
          "knees, but I love {v} first thing in the morning", "What workout routine would "
          "you suggest for me this month?", "The user would prefer a low-impact morning "
          "routine built around {v}, with no running."),
)


class _Event(NamedTuple):  # temporal-reasoning: (topic, said that day, noun phrase)
    topic: str
    today: str
    noun: str


_EVENTS = (
    _Event("fitness", "I ran my first 10K race this morning", "my first 10K race"),
    _Event("home", "we finally closed on the new house today", "closing on the new house"),
    _Event("health", "I got my wisdom teeth removed this morning",
           "my wisdom tooth extraction"),
    _Event("career", "today was my first day at the new office",
           "my first day at the new office"),
    _Event("music", "I saw {band} live tonight", "the {band} concert"),
    _Event("gardening", "I planted the tomato seedlings in the raised beds today",
           "planting the tomato seedlings"),
    _Event("pets", "we brought our new kitten home today", "bringing the kitten home"),
    _Event("cars", "I passed my driving test today", "my driving test"),
    _Event("books", "I finished reading {book} tonight", "finishing {book}"),
    _Event("travel", "I just got back from a weekend camping trip at {park}",
           "the camping trip at {park}"),
    _Event("coffee", "I bought my first espresso machine today", "buying the espresso "
           "machine"),
    _Event("parenting", "my daughter lost her first tooth today",
           "my daughter's first lost tooth"),
)


class _Agg(NamedTuple):    # multi-session: one piece per session, the answer aggregates
    topic: str
    piece: str             # {n}: this session's amount
    asks: tuple[str, ...]
    absent: str
    unit: str              # "" -> int answer
    low: int
    high: int
    keyword: str           # a short query whose every word is in ``piece``


_AGGS = (
    _Agg("gardening", "I picked up {n} new houseplants at the {store} today", ("How many "
         "houseplants did I buy in total?", "Across all my nursery trips, how many new "
         "plants have I brought home?"), "How many fruit trees did I buy in total?", "", 1, 6,
         "New houseplants picked up?"),
    _Agg("health", "I volunteered {n} hours at the food bank this week", ("How many hours "
         "have I volunteered at the food bank in total?", "What is the total time I've spent "
         "helping out at the food pantry?"), "How many hours did I volunteer at the animal "
         "shelter?", " hours", 2, 9, "Hours volunteered at the food bank?"),
    _Agg("music", "I spent ${n} on tickets for the {band} show", ("How much did I spend on "
         "concert tickets in total?", "What have live gigs cost me altogether?"), "How much "
         "did I spend on theater tickets in total?", "$", 35, 180,
         "Spent on tickets for the show?"),
    _Agg("books", "I grabbed {n} used books at the library sale", ("How many used books "
         "did I buy at the library sales altogether?", "How many secondhand titles have I "
         "picked up for my shelves in total?"), "How many vinyl records did I buy at the "
         "library sales?", "", 2, 8, "Used books at the library sale?"),
    _Agg("fitness", "I ran {n} miles on the lakeside trail today", ("How many miles did I "
         "run on the lakeside trail in total?", "What distance have I covered on my "
         "lakeshore jogs overall?"), "How many miles did I hike in the mountains?", " miles",
         3, 13, "Miles on the lakeside trail?"),
    _Agg("cooking", "I baked {n} loaves of sourdough for the neighbors", ("How many loaves "
         "of sourdough have I baked for the neighbors?", "How much bread have I made for "
         "the people next door, counting loaves?"), "How many pies did I bake for the "
         "neighbors?", "", 1, 4, "Loaves of sourdough for the neighbors?"),
)


# --------------------------------------------------------------------------- text engine
class _Slots(dict[str, str]):
    """``str.format_map`` mapping that draws unknown slots (``{breed}``) once, from the rng."""

    def __init__(self, rng: random.Random, **fixed: str) -> None:
        super().__init__(fixed)
        self.rng = rng

    def __missing__(self, key: str) -> str:
        self[key] = value = self.rng.choice(_EXTRA[key])
        return value


class _Exchange(NamedTuple):
    user: str
    assistant: str | None   # None: a generated answer
    evidence: str | None    # role of the turn that holds the evidence


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Text:
    """Session text from templates: a bank of assistant sentences per topic (drawn once per
    seed) plus freshly filled user questions, so sessions are cheap to make."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(f"{seed}:bank")
        self.bank = {t: [s.format(n=rng.choice(ns), m=rng.choice(ns), a=rng.choice(_ADJ))
                         for s in _SAY for _ in range(8)] for t, ns in _TOPICS.items()}

    def user(self, rng: random.Random, topic: str) -> str:
        n, m = rng.sample(_TOPICS[topic], 2)
        return f"{rng.choice(_LEAD)} {rng.choice(_ASK).format(n=n, m=m)}".lstrip()

    def assistant(self, rng: random.Random, topic: str, insert: str | None = None,
                  budget: int = 10_000) -> str:
        nouns, bank = _TOPICS[topic], self.bank[topic]
        n, m = rng.sample(nouns, 2)
        parts = [rng.choice(_INTRO).format(n=n, m=m)]
        items = min(rng.randint(2, 6), max(1, budget // 300))
        numbered = rng.random() < 0.5
        for i in range(items):
            body = " ".join(rng.choices(bank, k=rng.randint(2, 4)))
            parts.append(f"{i + 1}. {_cap(rng.choice(nouns))}: {body}" if numbered else body)
        if insert is not None:
            parts.insert(rng.randint(1, len(parts)), insert)
        parts.append(rng.choice(_CLOSE).format(n=n, m=m))
        return "\n\n".join(parts)

    def session(self, rng: random.Random, topic: str, target: int,
                inserts: Sequence[_Exchange] = (), labeled: bool = True,
                evidence: bool = False) -> list[dict[str, Any]]:
        """Alternating turns about ``topic`` until the rendered text reaches ``target`` bytes;
        ``inserts`` land early-biased at random exchanges.

        The turn holding an insert's evidence gets ``has_answer: true`` when ``labeled``. In
        an ``evidence`` session every user turn carries ``has_answer`` (``false`` where it
        holds none), as in the real files: LongMemEval's own retrieval reads the key on every
        user turn of an ``answer_`` session (``src/retrieval/run_retrieval.py``, ~line 209)."""
        pairs = max(1, target // 1_300)
        at = sorted(int(rng.random() ** 2 * pairs) for _ in inserts)
        pending = list(inserts)
        turns: list[dict[str, Any]] = []
        size, k = 0, 0
        while size < target or pending:
            if pending and at[len(inserts) - len(pending)] <= k:
                ex = pending.pop(0)
                user = ex.user
                reply = self.assistant(rng, topic) if ex.assistant is None else ex.assistant
            else:
                ex, user = None, self.user(rng, topic)
                reply = self.assistant(rng, topic, budget=target - size - len(user))
            for role, text in (("user", user), ("assistant", reply)):
                turn: dict[str, Any] = {"role": role, "content": text}
                if ex is not None and ex.evidence == role and labeled:
                    turn["has_answer"] = True
                elif evidence and role == "user":
                    turn["has_answer"] = False
                turns.append(turn)
                size += len(text) + len(role) + 3
            k += 1
        return turns


# --------------------------------------------------------------------------- ids, dates
def _b62(value: int, width: int) -> str:
    out = []
    for _ in range(width):
        value, r = divmod(value, 62)
        out.append(_B62[r])
    return "".join(out)


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
        if config.filler_pool_size + config.oversize_sessions >= 600_000:
            raise ValueError("filler_pool_size is too large (ids must stay unique)")
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
    a time into a temporary file that replaces ``path`` at the end. Returns the byte size."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write("[")
            for i, instance in enumerate(iter_instances(config)):
                fh.write(("\n" if i == 0 else ",\n") + json.dumps(instance))
                if progress is not None:
                    progress("instances", i + 1, config.n_instances)
            fh.write("\n]\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target.stat().st_size


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m pytest_retrieval_eval.generator --preset sample OUT.json``."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_retrieval_eval.generator",
        description="Write deterministic LongMemEval-shaped data.")
    parser.add_argument("out", type=Path, help="output JSON file")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="sample")
    parser.add_argument("--instances", type=_positive, help="scale to this many instances")
    parser.add_argument("--sessions", type=_positive, help="scale to this mean history length")
    parser.add_argument("--seed", type=int, help="override the preset's seed")
    args = parser.parse_args(argv)
    config = PRESETS[args.preset]
    if args.instances or args.sessions:
        config = config.scaled(instances=args.instances, sessions=args.sessions)
    if args.seed is not None:
        config = replace(config, seed=args.seed)
    began = time.monotonic()

    tty, step = sys.stderr.isatty(), max(10, config.n_instances // 20)

    def report(_label: str, done: int, total: int | None) -> None:
        if done % step == 0 or done == total:
            print(f"\r{done}/{total} instances, {time.monotonic() - began:.0f}s",
                  end="" if tty and done != total else "\n", file=sys.stderr, flush=True)

    size = write_dataset(config, args.out, report)
    seconds = time.monotonic() - began
    print(f"wrote {args.out}: {config.n_instances} instances, {size:,} bytes, {seconds:.1f}s "
          f"({size / 1e6 / max(seconds, 1e-9):.1f} MB/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
