"""Spoken-style training prompts for the proposal head, composed from templates and word lists.

The head learns to guess the full model's next token from the model's own greedy replies; the more
varied the prompts, the more of the model's behaviour the head sees. Hand-written prompts give a few
hundred; this module composes as many as wanted (tens of thousands distinct) from ~70 templates over
small word lists, in the voice of a person talking to an assistant: fillers ("um", "okay so"), some
without capitals or punctuation (as a streaming ASR transcript reads), and some second turns in a
short chat. Deterministic for a seed, and prefix-stable: the first n prompts of a longer run are the
n prompts of a shorter one, so cached data shards stay valid when more data is asked for.

`spoken_conversations(n, exclude=...)` drops any prompt too close to an excluded (held-out) one: the
same words, or a word-set Jaccard similarity of at least `max_similarity` (default 0.6), so held-out
agreement is not inflated by near-copies of the held-out questions.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator

__all__ = ["spoken_conversations", "spoken_prompts", "similarity"]

COUNTRIES = ["Germany", "Japan", "Kenya", "Peru", "Canada", "Norway", "Egypt", "India", "Mexico", "Italy", "Spain",
             "Chile", "Vietnam", "Morocco", "Sweden", "Greece", "Turkey", "Argentina", "Thailand", "Ireland",
             "Poland", "Portugal", "Ghana", "Nepal", "Iceland", "Australia", "New Zealand", "South Korea",
             "Colombia", "Finland", "Austria", "Switzerland", "Indonesia", "Cuba", "Ethiopia", "Scotland"]
CITIES = ["Paris", "Tokyo", "Berlin", "Madrid", "Rome", "Cairo", "Sydney", "Toronto", "Chicago", "Seattle", "Boston",
          "Dublin", "Oslo", "Prague", "Vienna", "Lima", "Nairobi", "Mumbai", "Bangkok", "Seoul", "Istanbul",
          "Edinburgh", "Amsterdam", "Barcelona", "Athens", "Mexico City", "Buenos Aires", "Cape Town", "Denver",
          "Montreal", "Copenhagen", "Helsinki", "Kyoto", "Marrakesh", "Reykjavik", "San Francisco", "Melbourne"]
ANIMALS = ["dogs", "cats", "elephants", "dolphins", "owls", "penguins", "horses", "bees", "ants", "whales", "foxes",
           "rabbits", "parrots", "sharks", "frogs", "wolves", "giraffes", "bats", "crows", "goats", "snails",
           "hedgehogs", "tigers", "koalas", "squirrels", "geese", "jellyfish", "camels", "otters", "spiders"]
BEHAVIOURS = ["sleep so much", "live in groups", "migrate", "make that noise", "hunt at night", "have whiskers",
              "change colour", "live so long", "eat grass", "build nests", "need so much water", "hibernate"]
FOODS = ["rice", "pasta", "lentils", "potatoes", "eggs", "chicken", "salmon", "tofu", "spinach", "mushrooms",
         "tomatoes", "carrots", "chickpeas", "broccoli", "cheese", "apples", "bananas", "oats", "beans", "onions",
         "garlic", "peppers", "courgettes", "quinoa", "yoghurt", "bread", "noodles", "prawns", "lemons", "pumpkin"]
DISHES = ["pancakes", "a risotto", "banana bread", "a curry", "lasagne", "a stir fry", "soup", "hummus", "a pizza",
          "porridge", "an omelette", "a salad dressing", "chili", "fried rice", "brownies", "a smoothie", "pesto"]
TASKS = ["fix a leaky tap", "write a cover letter", "change a flat tyre", "iron a shirt", "clean a cast iron pan",
         "unclog a drain", "back up my phone", "tie a tie", "hang a picture", "start a compost heap",
         "make a budget", "improve my handwriting", "get rid of fruit flies", "defrost a freezer",
         "take a screenshot", "sharpen a knife", "learn to juggle", "write a thank you note", "train a puppy",
         "plan a birthday party", "save for a holiday", "fall asleep faster", "stop procrastinating",
         "remove a splinter", "paint a room", "fold a fitted sheet", "grow tomatoes", "meditate",
         "change a light bulb", "jump start a car", "find a lost phone", "negotiate a raise", "make friends in a new city"]
CONCEPTS = ["gravity", "inflation", "the water cycle", "evolution", "democracy", "electricity", "a mortgage",
            "climate change", "the stock market", "DNA", "an eclipse", "a volcano", "an earthquake", "the internet",
            "a credit score", "photosynthesis in plants", "the greenhouse effect", "interest rates", "a tsunami",
            "the immune system", "a solar panel", "artificial intelligence", "a calorie", "the placebo effect",
            "jet lag", "a hurricane", "the tides", "magnetism", "a recession", "compound interest", "a blockchain",
            "the big bang", "a rainforest", "an allergy", "a fever", "the northern lights", "a glacier"]
PEOPLE = ["Marie Curie", "Isaac Newton", "Cleopatra", "Leonardo da Vinci", "Nelson Mandela", "Ada Lovelace",
          "Charles Darwin", "Frida Kahlo", "Mahatma Gandhi", "Amelia Earhart", "Wolfgang Amadeus Mozart",
          "Galileo Galilei", "Jane Austen", "Martin Luther King", "Nikola Tesla", "Florence Nightingale",
          "Pablo Picasso", "Rosa Parks", "Napoleon", "Confucius", "Vincent van Gogh", "Alan Turing", "Beethoven"]
OBJECTS = ["a microwave", "a bicycle", "a fridge", "a thermometer", "a smoke alarm", "a dishwasher", "a telescope",
           "a battery", "a light bulb", "a kettle", "a printer", "a hearing aid", "an umbrella", "a zip",
           "a lock", "a clock", "a camera", "a vacuum cleaner", "a toaster", "a wind turbine", "a submarine"]
LANGUAGES = ["French", "Spanish", "German", "Italian", "Japanese", "Portuguese", "Dutch", "Swedish", "Greek",
             "Turkish", "Polish", "Korean"]
PHRASES = ["good night", "where is the station", "how much is this", "nice to meet you", "I'm sorry",
           "happy birthday", "see you tomorrow", "I'm hungry", "excuse me", "what time is it", "good luck",
           "I love you", "the bill please", "I don't understand"]
JOBS = ["a nurse", "an architect", "a plumber", "a pilot", "an accountant", "a librarian", "a vet", "an electrician",
        "a chef", "a lawyer", "a teacher", "a software developer", "a dentist", "a firefighter", "a journalist",
        "a farmer", "a physiotherapist", "a translator", "a data scientist", "a carpenter"]
ACTIVITIES = ["running", "swimming", "cycling", "yoga", "hiking", "reading before bed", "learning the piano",
              "gardening", "painting", "chess", "rock climbing", "baking bread", "skiing", "dancing", "knitting",
              "photography", "surfing", "playing the guitar", "journaling", "birdwatching", "tennis", "camping"]
FEELINGS = ["tired", "stressed", "bored", "anxious", "nervous", "sad", "overwhelmed", "lonely", "unmotivated",
            "restless", "grumpy", "homesick"]
GENRES = ["mystery", "science fiction", "fantasy", "history", "comedy", "romance", "thriller", "biography",
          "horror", "adventure", "poetry", "travel"]
THINGS = ["the moon", "the sun", "coffee", "chocolate", "the ocean", "rainbows", "volcanoes", "snow", "honey",
          "salt", "trees", "clouds", "diamonds", "glass", "paper", "plastic", "the desert", "lightning", "ice",
          "mountains", "rivers", "stars", "sand", "wine", "cheese", "tea", "soap", "rubber", "gold", "silk"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "tomorrow", "tonight",
        "this weekend", "next week"]
NUMBER_WORDS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                "fifteen", "twenty", "twenty five", "thirty", "forty", "fifty", "sixty", "a hundred"]
PEOPLE_NEAR = ["my mum", "my dad", "my sister", "my brother", "my boss", "a friend", "my neighbour", "my partner",
               "my grandmother", "a colleague", "my son", "my daughter", "my flatmate"]
EVENTS = ["a wedding", "a job interview", "a first date", "a long flight", "an exam", "a marathon", "a hike",
          "a dinner party", "a camping trip", "a business meeting", "a concert", "a road trip", "a beach day"]
SPORTS = ["football", "basketball", "cricket", "rugby", "tennis", "golf", "baseball", "volleyball", "ice hockey",
          "badminton", "table tennis", "handball"]

TEMPLATES = [
    "What's the capital of {country}?", "What language do they speak in {country}?",
    "What's the weather like in {city} in {month}?", "How far is {city} from {city2}?",
    "What should I see in {city} if I only have one day?", "Is {month} a good time to visit {country}?",
    "What's the time difference between {city} and {city2}?", "What is {city} famous for?",
    "What food is {country} known for?", "How do people say {phrase} in {language}?",
    "Translate {phrase} into {language}.", "Why do {animal} {behaviour}?", "Tell me a fun fact about {animal}.",
    "What do {animal} eat?", "How long do {animal} live?", "Are {animal} dangerous?",
    "What can I cook with {food} and {food2}?", "How do I make {dish}?", "Is {food} good for you?",
    "How long does {food} keep in the fridge?", "Give me a quick recipe with {food}.",
    "How do I {task}?", "What's the easiest way to {task}?", "Can you help me {task}?",
    "How long does it take to {task}?", "Explain {concept} in simple words.", "What is {concept}?",
    "How does {concept} work?", "Why does {concept} matter?", "Who was {person}?", "What is {person} known for?",
    "When did {person} live?", "How does {object} work?", "Who invented {object}?", "Is {object} expensive to run?",
    "What does {job} do?", "How do I become {job}?", "How much does {job} earn, roughly?",
    "What are the benefits of {activity}?", "How do I get started with {activity}?",
    "Is {activity} good exercise?", "Give me a tip for {activity}.", "I feel {feeling}, any advice?",
    "What can I do when I'm {feeling}?", "Why do I feel {feeling} in the evening?",
    "Recommend a good {genre} book.", "Can you suggest a {genre} film for tonight?",
    "Why is {thing} the way it is?", "What is {thing} made of?", "Tell me something interesting about {thing}.",
    "What's {number} plus {number2}?", "What's {number} times {number2}?", "What's {number} minus {number2}?",
    "How many minutes are in {number} hours?", "Set a timer for {number} minutes.",
    "Remind me to call {person_near} on {day}.", "What should I wear to {event}?",
    "How should I prepare for {event}?", "What's a good gift for {person_near}?",
    "Help me write a short message to {person_near} about {event}.", "What are the rules of {sport}?",
    "How many players are on a {sport} team?", "Where does {sport} come from?",
    "What's the best way to learn {language}?", "Is {language} hard to learn?",
    "What should I pack for {event}?", "How do I stay calm before {event}?",
    "What's the difference between {food} and {food2}?", "Can {animal} see colours?",
    "Which is bigger, {country} or {country2}?", "What's the population of {city}, roughly?",
]
FILLERS = ["", "", "", "", "Hey, ", "Okay so ", "Um, ", "Quick question, ", "Hi, ", "So ", "Right, ", "Hmm, ",
           "Hey there, ", "Sorry, ", "Actually, ", "Okay, "]
FIRST_REPLIES = ["Sure, happy to help.", "Good question.", "Of course.", "Let me think about that.",
                 "That's a nice idea.", "Yes, I can help with that."]
FOLLOW_UPS = ["Can you say that more simply?", "Why is that?", "And what about {city}?", "Tell me more.",
              "How long would that take?", "Thanks. What else should I know?", "Is that expensive?",
              "What would you do?", "Can you give me an example?", "And for {person_near}?",
              "Okay, thanks. Anything I should avoid?", "Sorry, I missed that, can you repeat it?"]

_FIELDS = {"country": COUNTRIES, "city": CITIES, "animal": ANIMALS, "behaviour": BEHAVIOURS, "food": FOODS,
           "dish": DISHES, "task": TASKS, "concept": CONCEPTS, "person": PEOPLE, "object": OBJECTS,
           "language": LANGUAGES, "phrase": PHRASES, "job": JOBS, "activity": ACTIVITIES, "feeling": FEELINGS,
           "genre": GENRES, "thing": THINGS, "month": MONTHS, "day": DAYS, "number": NUMBER_WORDS,
           "person_near": PEOPLE_NEAR, "event": EVENTS, "sport": SPORTS}
_WORD = re.compile(r"[a-z0-9']+")


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the two texts' lower-cased word sets, in [0, 1]."""
    wa, wb = _words(a), _words(b)
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def _fill(template: str, rng: random.Random) -> str:
    values: dict[str, str] = {}
    for name in re.findall(r"\{(\w+)\}", template):
        base = name.rstrip("2")
        choices = _FIELDS[base]
        value = rng.choice(choices)
        while name.endswith("2") and value == values.get(base):
            value = rng.choice(choices)
        values[name] = value
    return template.format(**values)


def _spoken(text: str, rng: random.Random) -> str:
    filler = rng.choice(FILLERS)
    if filler:
        text = filler + text[0].lower() + text[1:]
    if rng.random() < 0.3:  # as a streaming ASR transcript reads: no capitals, no final punctuation
        text = text.lower().rstrip("?.!")
    return text


def _stream(seed: int) -> Iterator[tuple[tuple[str, str], ...]]:
    rng = random.Random(seed)
    while True:
        question = _spoken(_fill(rng.choice(TEMPLATES), rng), rng)
        if rng.random() < 0.15:  # a second turn of a short chat: the model sees a history before the question
            yield (("user", question), ("assistant", rng.choice(FIRST_REPLIES)),
                   ("user", _spoken(_fill(rng.choice(FOLLOW_UPS), rng), rng)))
        else:
            yield (("user", question),)


def spoken_conversations(n: int, seed: int = 0, exclude: Iterable[str] = (),
                         max_similarity: float = 0.6) -> list[tuple[tuple[str, str], ...]]:
    """`n` distinct conversations (tuples of (role, text), ending with a user turn), none of whose user
    turns is within `max_similarity` (word-set Jaccard) of an `exclude` text. ValueError for n < 0 or
    when the templates cannot give n distinct ones (more than ~10^6)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    banned = [_words(t) for t in exclude]
    seen: set[tuple[tuple[str, str], ...]] = set()
    out = []
    tries = 0
    for conv in _stream(seed):
        if len(out) >= n:
            break
        tries += 1
        if tries > 20 * n + 1000:
            raise ValueError(f"could not compose {n} distinct prompts from the templates")
        key = tuple((r, t.lower().rstrip("?.!")) for r, t in conv)
        if key in seen:
            continue
        users = [_words(t) for r, t in conv if r == "user"]
        if any(w == b or (w | b and len(w & b) / len(w | b) >= max_similarity) for w in users for b in banned):
            continue
        seen.add(key)
        out.append(conv)
    return out


def spoken_prompts(n: int, seed: int = 0, exclude: Iterable[str] = ()) -> list[str]:
    """The last user turn of each of `spoken_conversations(n, seed, exclude)`."""
    return [conv[-1][1] for conv in spoken_conversations(n, seed, exclude)]
