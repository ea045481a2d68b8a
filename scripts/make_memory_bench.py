"""Write headstart/bench/data/memory.json: the conversations of `headstart bench memory`.

Each conversation is composed from the pools below (all written for this project): facts the user
plants early (with the assistant's fixed acknowledgement), everyday requests in between (with fixed
short replies), sometimes an update of a fact, then one probe with the phrases a right answer must and
must not say. The choices are seeded, so the file is reproducible: `python scripts/make_memory_bench.py`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "headstart" / "bench" / "data" / "memory.json"
SEED = 20261203
N = 40

NAMES = ["Priya", "Marcus", "Ingrid", "Tomasz", "Aiko", "Femi", "Rosalind", "Diego", "Harriet", "Kwame", "Lucia",
         "Bram", "Soraya", "Niall", "Yusuf", "Greta", "Imogen", "Rafael", "Astrid", "Desmond"]
SISTERS = ["Lena", "Maud", "Carys", "Odette", "Tamsin", "Noor", "Beatrix", "Elsa", "Fiona", "Ruth"]
DOGS = ["Biscuit", "Pepper", "Juniper", "Waffles", "Mochi", "Ziggy", "Clover", "Nutmeg"]
MANAGERS = ["Denise", "Gordon", "Mirela", "Oscar", "Thea", "Vikram", "Colette", "Anton"]
NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
ALLERGIES = [("peanuts", ["peanut", "peanuts"]), ("shellfish", ["shellfish"]), ("penicillin", ["penicillin"]),
             ("cats", ["cat", "cats"]), ("strawberries", ["strawberry", "strawberries"]), ("bee stings", ["bee", "bees"])]
CITIES = ["Porto", "Galway", "Tampere", "Bologna", "Hobart", "Dunedin", "Graz", "Leeds"]
LOCKERS = [214, 312, 157, 489, 263, 341, 128, 476]


def number_phrases(n: int) -> list[str]:
    """Ways a three-digit number may be said: "312", "three twelve", "three hundred twelve"."""
    words = {0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight",
             9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen",
             16: "sixteen", 17: "seventeen", 18: "eighteen", 19: "nineteen"}
    tens = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy", 8: "eighty", 9: "ninety"}

    def two(k: int) -> str:
        return words[k] if k < 20 else tens[k // 10] + ("" if k % 10 == 0 else " " + words[k % 10])

    h, rest = divmod(n, 100)
    return [str(n), f"{words[h]} {two(rest)}", f"{words[h]} hundred {two(rest)}", f"{words[h]} hundred and {two(rest)}"]


# -- facts: (key, plant, acknowledgement, probe question, must groups, the short form for multi probes) --

def facts(rng: random.Random) -> dict[str, dict]:
    name, sister, dog, manager = rng.choice(NAMES), rng.choice(SISTERS), rng.choice(DOGS), rng.choice(MANAGERS)
    level, row = rng.choice(list(NUMBER_WORDS)), rng.choice("ABCDEF")
    day = rng.choice(DAYS)
    allergy, allergy_words = rng.choice(ALLERGIES)
    city, locker = rng.choice(CITIES), rng.choice(LOCKERS)
    repeat = rng.random() < 0.5  # half the acknowledgements repeat the fact, half do not
    return {
        "name": dict(plant=f"Hi there, um, I'm {name}, by the way.",
                     ack=f"Nice to meet you, {name}!" if repeat else "Nice to meet you!",
                     probe="Do you remember my name?", must=[[name]], ask="my name"),
        "sister": dict(plant=f"So my sister {sister} is coming to stay with us next week.",
                       ack=f"That sounds lovely, I hope you have a great time with {sister}." if repeat
                       else "That sounds lovely, I hope you have a great time.",
                       probe="What's my sister called again?", must=[[sister]], ask="my sister's name"),
        "car": dict(plant=f"Okay, I just parked the car on level {level} of the garage, row {row}.",
                    ack=f"Got it, level {level}, row {row}." if repeat else "Okay, noted.",
                    probe="Where did I leave the car?", must=[[str(level), NUMBER_WORDS[level]]],
                    ask="which level the car is on", value=level),
        "allergy": dict(plant=f"Just so you know, I'm allergic to {allergy}.",
                        ack=f"Thanks for telling me, I'll keep the {allergy} allergy in mind." if repeat
                        else "Thanks for telling me, I'll keep that in mind.",
                        probe="What am I allergic to?", must=[allergy_words], ask="what I'm allergic to"),
        "dentist": dict(plant=f"Ugh, my dentist appointment is on {day}.",
                        ack=f"Good luck at the dentist on {day}." if repeat else "Good luck at the dentist.",
                        probe="What day is my dentist appointment?", must=[[day]], ask="the day of my dentist appointment",
                        value=day),
        "dog": dict(plant=f"Our dog is called {dog}, she's a little terrier.",
                    ack=f"{dog} sounds adorable!" if repeat else "Terriers are full of energy!",
                    probe="What's our dog's name?", must=[[dog]], ask="our dog's name"),
        "manager": dict(plant=f"My new manager is called {manager}, she started on Monday.",
                        ack=f"I hope it goes well with {manager}." if repeat else "I hope it goes well with her.",
                        probe="What's my manager's name?", must=[[manager]], ask="my manager's name"),
        "city": dict(plant=f"I grew up in {city}, actually.", ack=f"{city}, how nice!" if repeat else "How nice!",
                     probe="Where did I grow up?", must=[[city]], ask="where I grew up"),
        "locker": dict(plant=f"Remember that my gym locker is number {locker}.",
                       ack=f"Locker {locker}, got it." if repeat else "Got it.",
                       probe="What's my locker number at the gym?", must=[number_phrases(locker)],
                       ask="my locker number"),
    }


# facts that may be updated, with the update's text, its acknowledgement and the new value's phrases
def update(key: str, fact: dict, rng: random.Random) -> tuple[str, str, list[list[str]], list[str]]:
    if key == "car":
        old = fact["value"]
        new = rng.choice([n for n in NUMBER_WORDS if n != old])
        return (f"Oh, actually, I moved the car, it's on level {new} now.", f"Okay, level {new} now.",
                [[str(new), NUMBER_WORDS[new]]], [str(old), NUMBER_WORDS[old]])
    old = fact["value"]
    new = rng.choice([d for d in DAYS if d != old])
    return (f"They called, the dentist moved my appointment to {new}.", "Okay, noted.", [[new]], [old])


# -- everyday requests in between, each with a fixed short reply --------------------------------------

FILLERS = [
    ("How long should I boil an egg, like a hard boiled one?", "About ten minutes for a hard-boiled egg.", "egg"),
    ("What's a good name for a goldfish?", "How about Bubbles?", "goldfish"),
    ("Can you tell me a joke?", "Why did the scarecrow win an award? He was outstanding in his field.", "joke"),
    ("How do I get a wine stain out of a carpet?", "Blot it, then dab it with cold water and a little dish soap.", "stain"),
    ("Why is the sky blue?", "Air scatters blue light more than red, so the sky looks blue.", "sky"),
    ("What's a quick dinner I can make with pasta and tomatoes?", "Try a simple pasta with garlic, tomatoes and olive oil.", "pasta"),
    ("How many cups are in a litre, roughly?", "About four cups.", "litre"),
    ("Give me a word that rhymes with orange.", "Not much rhymes with orange, but door hinge comes close.", "orange"),
    ("What's the tallest mountain in the world?", "Mount Everest, at about 8,849 meters.", "mountain"),
    ("How do I keep basil alive on a windowsill?", "Give it lots of sun and water it when the soil feels dry.", "basil"),
    ("Um, what's a good stretch for a stiff neck?", "Slowly tilt your ear toward your shoulder and hold it for twenty seconds.", "neck"),
    ("Who wrote Pride and Prejudice?", "Jane Austen.", "pride"),
    ("How long do I microwave popcorn?", "About two to three minutes, until the popping slows down.", "popcorn"),
    ("What's the difference between a frog and a toad?", "Toads have drier, bumpier skin and shorter legs than frogs.", "frog"),
    ("Can you suggest a board game for four people?", "Ticket to Ride is a good one for four.", "board game"),
    ("How do you say thank you in Japanese?", "Arigato.", "japanese"),
    ("What should I put in a first aid kit?", "Plasters, gauze, tape, antiseptic wipes and some painkillers.", "first aid"),
    ("Is it okay to water plants at night?", "Morning is better; wet leaves overnight can grow mould.", "water plants"),
    ("How do I make my bread rise better?", "Let the dough rest somewhere warm and give it more time.", "bread"),
    ("What's a fun fact about octopuses?", "An octopus has three hearts.", "octopus"),
    ("So, how far away is the moon?", "About 384,000 kilometers.", "moon"),
    ("What's a good way to fall asleep faster?", "Keep the room cool and dark, and put the phone away an hour before bed.", "asleep"),
    ("How do I clean a cast iron pan?", "Rinse it with hot water, scrub, dry it well and rub in a little oil.", "cast iron"),
    ("What rhymes with cat?", "Hat, bat, mat and sat.", "rhymes with cat"),
    ("How many legs does a spider have?", "Eight.", "spider"),
    ("What's a nice houseplant that's hard to kill?", "A snake plant copes with almost anything.", "houseplant"),
    ("Can you help me think of a birthday message for a coworker?", "Happy birthday, and thanks for making work more fun!", "birthday message"),
    ("How long should I rest after a big meal before swimming?", "There's no strict rule; just wait until you feel comfortable.", "swimming"),
    ("What's the boiling point of water in Fahrenheit?", "212 degrees Fahrenheit.", "fahrenheit"),
    ("Hmm, what's a good podcast topic for beginners?", "Talk about a hobby you love; your enthusiasm carries it.", "podcast"),
    ("How do I stop my glasses from fogging up?", "Wash them with a drop of dish soap and let them air dry.", "glasses"),
    ("Give me an idea for a rainy Sunday.", "Bake something, then watch a film under a blanket.", "rainy"),
    ("What's the capital of Australia?", "Canberra.", "australia"),
    ("How do I soften butter quickly?", "Grate it, or cut it into small cubes and leave it out for ten minutes.", "butter"),
    ("Which planet is the biggest?", "Jupiter.", "planet"),
    ("What's a healthy snack for the afternoon?", "An apple with a spoon of peanut-free seed butter, or some yoghurt.", "snack"),
    ("How do you spell necessary?", "N, E, C, E, S, S, A, R, Y.", "spell"),
    ("Tell me something interesting about honey.", "Honey never spoils if it's sealed well.", "honey"),
    ("What's a good warm-up before a run?", "Five minutes of brisk walking, then some leg swings.", "run"),
    ("How do I tell if an avocado is ripe?", "It gives a little when you press it gently.", "avocado"),
    ("Okay, what's seven times eight?", "Fifty-six.", "seven times eight"),
    ("Why do cats purr?", "Mostly when they're content, but sometimes to calm themselves.", "purr"),
    ("Can you recommend a classic film?", "Casablanca is a great place to start.", "film"),
    ("How do I get rid of hiccups?", "Hold your breath for about ten seconds, or sip cold water slowly.", "hiccups"),
    ("What's a synonym for happy?", "Cheerful.", "synonym"),
    ("How do I remove a splinter?", "Clean the area, then ease it out with tweezers in the direction it went in.", "splinter"),
    ("What's a good gift for someone who likes gardening?", "A good pair of gloves or a nice trowel.", "gardening"),
    ("How much water should I drink in a day?", "Around two litres, more if it's hot or you exercise.", "water"),
    ("Um, what's the longest river in the world?", "The Nile, though the Amazon comes close.", "river"),
    ("What's a good way to remember names?", "Repeat the name back when you meet someone, and link it to a picture.", "remember names"),
]

CONTROLS = [
    ("What's the capital of Japan?", [["Tokyo"]]),
    ("How many days are there in a week?", [["seven", "7"]]),
    ("What colour do you get when you mix blue and yellow?", [["green"]]),
    ("What's the opposite of hot?", [["cold"]]),
]

ABSTAIN_KEYS = ["sister", "dog", "manager", "locker", "allergy", "city"]
DONT_KNOW = [
    r"re:\b(?:don't|do not|didn't|did not|haven't|have not) (?:\w+ )?(?:know|remember|recall|mention|tell|told|have|say|said|share|shared)\b",
    r"re:\bnot (?:sure|told|mentioned)\b", "no idea", "you haven't", "you didn't", "not something you", "i'm not aware",
]
ORDER_PROBES = ["What was the first thing I asked you today?", "Remind me, what did I ask you first?"]

# one kind per pair of ids (2k-1, 2k), so both halves hold the same mix: 10 recall, 8 multi, 6 update,
# 6 order, 6 abstain, 4 control
PAIR_KINDS = ["recall", "multi", "update", "order", "abstain", "recall", "control", "multi", "update", "recall",
              "order", "abstain", "multi", "recall", "update", "order", "abstain", "control", "recall", "multi"]


def main() -> None:
    rng = random.Random(SEED)
    items = []
    kinds = [PAIR_KINDS[i // 2] for i in range(N)]
    for i, kind in enumerate(kinds, 1):
        pool = facts(rng)
        n_users = 8 + (i * 13) % 33  # 8..40 user turns, probe included, spread over the set
        keys = list(pool)
        rng.shuffle(keys)
        absent = None
        if kind == "abstain":
            absent = rng.choice(ABSTAIN_KEYS)
            keys.remove(absent)
        planted = keys[: 2 + rng.randrange(2)]  # two or three facts
        if kind == "update":
            upd = rng.choice(["car", "dentist"])
            if upd not in planted:
                planted[0] = upd
        if kind == "multi" and len(planted) < 3:
            planted.append(keys[len(planted)])
        turns = [{"user": pool[k]["plant"], "assistant": pool[k]["ack"]} for k in planted]
        fillers = rng.sample(FILLERS, len(FILLERS))
        order_first = None
        if kind == "order":
            order_first = fillers.pop()
            turns.insert(0, {"user": order_first[0], "assistant": order_first[1]})
        slots = n_users - 1 - len(turns) - (kind == "update")  # the requests in between
        between = [{"user": u, "assistant": a} for u, a, _ in fillers[:slots]]
        must_not: list[str] = []
        if kind == "update":
            text, ack, must, must_not = update(upd, pool[upd], rng)
            between.insert(len(between) // 2, {"user": text, "assistant": ack})
            probe = pool[upd]["probe"]
        turns += between
        if kind == "recall":
            key = planted[0]
            probe, must = pool[key]["probe"], pool[key]["must"]
        elif kind == "multi":
            a, b = planted[0], planted[-1]
            probe = f"Quick check, do you remember {pool[a]['ask']} and {pool[b]['ask']}?"
            must = pool[a]["must"] + pool[b]["must"]
        elif kind == "order":
            assert order_first is not None
            probe = rng.choice(ORDER_PROBES)
            must = [[order_first[2]]]
        elif kind == "abstain":
            assert absent is not None
            probe = pool[absent]["probe"]
            must = [DONT_KNOW]
            must_not = [p for g in pool[absent]["must"] for p in g]  # the value would be a lucky guess anyway
        elif kind == "control":
            probe, must = CONTROLS[(i - 1) % len(CONTROLS)]
        items.append({"id": f"memory-{i:02d}", "kind": kind, "turns": turns, "probe": probe, "must": must,
                      "must_not": must_not})
    about = ("Conversations of `headstart bench memory` (headstart/bench/memory.py), written for this project by "
             "scripts/make_memory_bench.py (seeded). Each item: `turns` (the user's words and the assistant's fixed "
             "reply, oldest first), `probe` (the last user turn, whose reply is generated and scored), `must` (groups "
             "of phrases, each group needs one) and `must_not` (phrases), matched as in the answers bench. Kinds: "
             "recall, multi (several facts), update (a fact changed later), order (the first request), abstain (a fact "
             "never given: the reply must say it does not know), control (no memory needed). Ids ending in an odd "
             "number are the tuning half A, even ones the report half B.")
    OUT.write_text(json.dumps({"about": about, "items": items}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(items)} conversations to {OUT}")


if __name__ == "__main__":
    main()
