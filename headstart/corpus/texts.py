"""The shared text sets that the benchmarks measure on and the trainers hold out: one multi-turn chat
(a weekend in Lisbon) with its final user turn, everyday spoken questions with the fact each answer
must contain, long-reply prompts for decode speed, and everyday prompts for training data. Written for
this project. The benchmarks and the trainers both read them from here, so neither imports the other."""

from __future__ import annotations

CONVERSATION = [
    {"role": "user", "content": "Hi there. I'm planning a weekend trip to Lisbon with my sister and I could use "
                                "some help getting organised before we leave on Friday morning."},
    {"role": "assistant", "content": "Happy to help. Lisbon is lovely in spring. Tell me what you would like "
                                     "to plan first: travel, where to stay, or what to see."},
    {"role": "user", "content": "We already booked a small hotel in the Alfama district, near the cathedral. "
                                "Our flight lands at ten in the morning on Friday and we fly home on Sunday "
                                "evening at eight. My sister loves old trams and seafood, and I like museums "
                                "and quiet viewpoints where we can watch the sunset."},
    {"role": "assistant", "content": "Great choice, Alfama is close to many viewpoints. On Friday you could take "
                                     "tram 28 past the cathedral, have grilled sardines for dinner, and watch the "
                                     "sunset from the Miradouro da Senhora do Monte."},
    {"role": "user", "content": "That sounds perfect. On Saturday we want to visit Belem and the tile museum, "
                                "and maybe eat at a market hall in the evening if it is not too crowded."},
    {"role": "assistant", "content": "Then start early in Belem to see the monastery before the crowds, visit "
                                     "the tile museum after lunch, and go to the Time Out Market in the early "
                                     "evening, before eight, when it is calmer."},
]
FINAL_USER_TEXT = ("Thanks. One last thing: what time should we leave the hotel on Sunday to get to the "
                   "airport for our eight o'clock flight?")

# Everyday spoken questions, each with the key fact the answer must contain (a regex).
QUESTIONS = [
    ("What is the capital of France?", r"paris"),
    ("What is seven plus five?", r"\b12\b|twelve"),
    ("How many days are there in a week?", r"\b7\b|seven"),
    ("Which planet do we live on?", r"earth"),
    ("What colour is the sky on a clear day?", r"blue"),
    ("How many legs does a spider have?", r"\b8\b|eight"),
    ("Who wrote Romeo and Juliet?", r"shakespeare"),
    ("What is the largest ocean on Earth?", r"pacific"),
    ("At what temperature in Celsius does water freeze?", r"\b0\b|zero"),
    ("What language do people speak in Brazil?", r"portuguese"),
]
DECODE_PROMPTS = [
    "Please repeat our plan for Saturday back to me in two sentences.",
    FINAL_USER_TEXT,
    "Tell me a short story about a robot who learns to paint.",
]

# Everyday prompts for training the proposal heads; every 8th is held out.
EVERYDAY = [
    "What's the weather usually like in London in April?", "How long should I boil an egg for a soft yolk?",
    "Can you remind me what the capital of Australia is?", "What's a good way to fall asleep faster?",
    "How many minutes are there in three hours?", "Why is the sky blue?", "What does a barista do?",
    "How do I convert Celsius to Fahrenheit?", "What time zone is New York in?", "Tell me a fun fact about octopuses.",
    "What should I pack for a weekend camping trip?", "How far is the Moon from the Earth?",
    "What's the difference between a virus and bacteria?", "Can you suggest a quick vegetarian dinner?",
    "How do I say thank you in Spanish?", "What is photosynthesis?", "Who painted the Mona Lisa?",
    "How many bones are in the human body?", "What's the tallest mountain in the world?",
    "Is it better to stretch before or after running?", "How do I get a red wine stain out of a shirt?",
    "What is twelve times eight?", "What's the boiling point of water at sea level?",
    "Recommend a classic novel I could read this summer.", "How do airplanes stay in the air?",
    "What's a healthy breakfast idea?", "How often should I water a cactus?", "What does GDP stand for?",
    "Explain what a black hole is in simple words.", "What's the best way to learn a new language?",
    "Set a reminder for my dentist appointment tomorrow at nine.", "What's the square root of sixty four?",
    "How many players are on a football team?", "Why do cats purr?", "What year did the first man land on the Moon?",
    "How do I make a cup of green tea properly?", "What is the speed of light?", "Give me a tip for a job interview.",
    "What's the longest river in Africa?", "How do vaccines work?", "Can you tell me a short joke?",
    "What is the chemical symbol for gold?", "How much water should I drink every day?",
    "What's a good name for a golden retriever puppy?", "What causes thunder?", "How do I reset my router?",
    "What's the population of Canada, roughly?", "Which is bigger, a kilometre or a mile?",
    "What do pandas eat?", "How do I keep basil alive indoors?", "What's the plural of cactus?",
    "Summarise the plot of Cinderella in one sentence.", "How many continents are there?",
    "What is the main ingredient of guacamole?", "How long does it take to walk five kilometres?",
    "What's the difference between weather and climate?", "Who invented the telephone?",
    "What is a haiku?", "How can I save money on groceries?", "Why do leaves change colour in autumn?",
    "What's the freezing point of water in Fahrenheit?", "What's the opposite of generous?",
    "How do bees make honey?", "What's a leap year?", "Where is the Eiffel Tower?",
    "What are the three primary colours?", "How should I warm up before lifting weights?",
    "What is fifteen percent of two hundred?", "What instrument has eighty eight keys?",
    "How do I politely decline an invitation?", "What's the largest animal on Earth?",
    "Why does bread go stale?", "What's the quickest way to cool down a hot drink?",
    "How many hours of sleep does an adult need?", "Translate good morning into French.",
    "What's the capital of Japan?", "How does a rainbow form?", "What is an electric car's main advantage?",
    "Can you suggest a name for a book club?", "How do I calm down before a presentation?",
    "What does a pharmacist do?", "Why is the ocean salty?", "How many sides does a hexagon have?",
    "What is the smallest country in the world?", "What's a good stretching routine for my back?",
    "How do I tell if an avocado is ripe?", "Who was Albert Einstein?", "What is the currency of Japan?",
    "How does a compass work?", "What should I do if I feel dizzy?", "What's nine plus thirteen?",
    "How do I start running as a beginner?", "What is recycling and why does it matter?",
    "What's the best time to visit Iceland?", "Why do we have seasons?", "What is a synonym for happy?",
    "How long is a marathon?", "How do I make my phone battery last longer?", "What's the capital of Canada?",
]
