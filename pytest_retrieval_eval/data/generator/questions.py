"""The generator's evidence templates: what a question asks and where its answer is said.

One table per question type: facts the user states (``single-session-user``,
``knowledge-update``, persona noise), things the assistant tells (``single-session-assistant``),
preferences, dated events (``temporal-reasoning``) and multi-session aggregates. Used by
:mod:`.instances`; changing a row changes the bundled sample's bytes.
"""

from __future__ import annotations

from typing import NamedTuple

from .text import _w


# --------------------------------------------------------------------------- evidence templates
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
