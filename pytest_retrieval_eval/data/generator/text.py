"""The generator's words: topic vocabularies, sentence templates and the text engine.

Pure data plus :class:`_Text`, which turns a topic into alternating user/assistant turns of a
target size. :mod:`.instances` draws from these with seeded
``random.Random`` instances, so nothing here may change without regenerating the bundled
sample (``tests/data/test_generator.py`` checks the shipped file byte for byte).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, NamedTuple


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
