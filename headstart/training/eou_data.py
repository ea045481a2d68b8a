"""Training text for the EOU head (headstart/llm/eou_head.py, trained by training/train_eou.py):
complete user turns, and the cut-off texts that a pause in the middle of them leaves.

Two sources, both self-supervised from text (no recordings, nothing from the bench):

* `label_cuts(text)`: a complete utterance (a line of `eou_heads/sentences.txt`) is a positive; its cuts
  at word boundaries are negatives only where the prefix plainly reads cut off. A cut that leaves a
  complete phrase ("Set a timer | for twenty minutes", "Jack of hearts | and two of spades", "Nine seven
  | five one", "Yes, | please") is left out, not called a negative: the head trained on such cuts as
  negatives learnt that short commands, card names and number strings read unfinished.
* `synthetic_turns(seed, n)`: short complete turns from templates (commands, noun phrases, numbers,
  yes/no and terse answers, short questions with or without a question mark, short statements), with
  ASR-style variation (lower case, digits or number words, a final period or none), each also followed
  by a dangling function word ("..., and", "... for the") as a negative: the pause points people leave.

A third, `load_extra_rows(path)` (`train-eou --extra-rows`), reads labelled texts as they stand, e.g. what the
recogniser wrote for real prompts and their cuts.

An `Utterance` is one forward of the LLM at training time: the whole text plus the word counts of the
prefixes to read, each with its label. Deterministic for a seed (`random.Random`).

Both are options of `headstart llm train-eou` (`--labels pause-points`, `--synthetic N`), not its
defaults: a head trained so ends most short complete turns at once but also reads the pause set's
fragments as complete, and no threshold pair gave a net gain over the shipped head (docs/listening.md). `all_cuts` (every cut a negative) is the shipped heads' labelling and the default.
`drop_overlap` keeps the bench transcripts (the held-out measure) out of any training set.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LABELLINGS", "Utterance", "all_cuts", "drop_overlap", "label_cuts", "load_extra_rows", "overlap_with", "prefix_text", "synthetic_turns", "training_utterances"]

_TRAILING = ".!?,;:…"

# a prefix ending in one of these reads cut off (articles, prepositions, conjunctions, determiners,
# auxiliaries, subject pronouns, complementisers, intensifiers)
INCOMPLETE_END = frozenset("""
a an the my your his her our their its this these those some any every each no another
of to for from with at in on by about into onto over under after before between through during without
than like as via per
and or but nor so because although though unless until while whereas if whether that which who whom whose
when where how what why
i we they he she
is are was were be been being am do does did have has had will would shall should can could may might must
very really quite too more most less least just also
let's i'm you're we're they're he's she's it's that's there's what's i'll you'll we'll i'd you'd i've you've
""".split())
# a subordinate clause that has not reached its main clause reads cut off, whatever its last word
SUBORDINATORS = frozenset("if when because although though unless until while whereas since whether before after as once".split())
# next words that usually start an optional continuation: the prefix before them may be complete
CONTINUATION_START = frozenset("""
in at on for to from with by about into near after before during until since while when where if because
and or but so then please now today tonight tomorrow yesterday again too as than of instead later soon here there
what that who how why which whether
""".split())
_NUMBER_WORDS = frozenset("""
zero oh one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million first second third
""".split())


@dataclass(frozen=True)
class Utterance:
    """`text`: the whole utterance as a user might say it; `cuts`: (number of words of the prefix read,
    label) pairs, label 1 = a complete turn, 0 = cut off; `source`: where it came from."""

    text: str
    cuts: tuple[tuple[int, int], ...]
    source: str = "sentences"


def _strip(text: str) -> str:
    return text.strip().rstrip(_TRAILING).strip()


def _word(w: str) -> str:
    return w.strip(_TRAILING + "\"'()").lower()


def prefix_text(text: str, num_words: int) -> str:
    """The first `num_words` words of `text`, trailing punctuation stripped (as the head reads it)."""
    return _strip(" ".join(_strip(text).split()[:num_words]))


def _is_number(w: str) -> bool:
    return w in _NUMBER_WORDS or bool(re.fullmatch(r"\d+(?:[.:]\d+)?", w))


def label_cuts(text: str, source: str = "sentences") -> Utterance:
    """A complete utterance and the labels of its cuts (see the module docstring): the whole text is 1;
    a cut after word k is 0 when the prefix ends in a function word (`INCOMPLETE_END`), is a subordinate
    clause that has not reached its main clause, or ends mid-phrase before a word that does not start
    an optional continuation; cuts that may leave a complete phrase (before a preposition, conjunction,
    time adverb, "please", after a comma, inside a list of numbers) are left out.

    Raises:
        ValueError: `text` has no words.
    """
    words = _strip(text).split()
    if not words:
        raise ValueError(f"no words in {text!r}")
    low = [_word(w) for w in words]
    cuts: list[tuple[int, int]] = []
    for k in range(1, len(words)):
        last, nxt = low[k - 1], low[k]
        if not last:
            continue
        comma = words[k - 1].rstrip().endswith((",", ";", ":"))
        if last in INCOMPLETE_END:
            cuts.append((k, 0))
        elif low[0] in SUBORDINATORS and not any(w.endswith(",") for w in words[: k - 1]):
            cuts.append((k, 0))
        elif comma or nxt in CONTINUATION_START or (_is_number(last) and _is_number(nxt)):
            continue  # maybe complete: left out
        else:
            cuts.append((k, 0))
    cuts.append((len(words), 1))
    return Utterance(" ".join(words), tuple(cuts), source)


# -- synthetic short turns -------------------------------------------------------------------------
_DIGITS = "zero one two three four five six seven eight nine".split()
_TEENS = ("ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()

_DEVICES = [
    "the lights", "the light", "the music", "the radio", "the TV", "the fan", "the heater", "the alarm", "the timer",
    "the oven", "the volume", "the sound", "the video", "the song", "the podcast", "this song", "it", "everything",
    "the bedroom lights", "the kitchen light", "the printer", "the camera", "the microphone", "the subtitles",
    "my alarm", "the dishwasher", "the air conditioning", "the wifi", "the recording", "the game",
]
_ITEMS = [
    "the front door", "the garage door", "the window", "the blinds", "that one", "it", "all of them", "my email",
    "my messages", "my calendar", "my inbox", "the inbox", "the settings", "the menu", "the map", "the file",
    "the document", "the photo", "the last message", "the first item", "the list", "the shopping list",
    "the order", "the meeting", "the reminder", "the app", "the browser", "the report", "the next page",
]
_VERBS_DEVICE = ["turn on", "turn off", "switch on", "switch off", "stop", "pause", "play", "start", "mute", "unmute",
                 "restart", "reset", "dim", "check", "skip", "repeat", "record", "turn up", "turn down"]
_VERBS_ITEM = ["open", "close", "cancel", "delete", "save", "send", "read", "show me", "check", "lock", "unlock", "find",
               "clear", "archive", "print", "share", "forward", "undo", "move", "copy", "rename", "update", "refresh"]
_OBJECTS = _DEVICES + _ITEMS


def _verb_object(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return f"{rng.choice(_VERBS_DEVICE)} {rng.choice(_DEVICES)}"
    return f"{rng.choice(_VERBS_ITEM)} {rng.choice(_ITEMS)}"


_BARE_COMMANDS = [
    "stop", "go", "go back", "go ahead", "next", "previous", "continue", "cancel", "pause", "resume", "wait",
    "hold on", "start over", "try again", "skip", "skip it", "repeat", "repeat that", "say that again", "louder",
    "quieter", "faster", "slower", "help", "undo", "never mind", "forget it", "keep going", "carry on", "go on",
    "hang up", "come back", "sit down", "move left", "move right", "turn left", "turn right", "go straight",
    "scroll down", "scroll up", "zoom in", "zoom out", "speak up", "slow down", "hurry up", "shut down", "log out",
    "sign in", "back up", "calm down", "look out", "stand by", "listen", "read it", "read it again", "send it",
    "delete it", "save it", "open it", "close it", "turn it off", "turn it on", "turn it up", "turn it down",
    "do it", "try it", "show me", "tell me", "let me see", "check again", "call me back", "wake me up",
]
_PLACES = ["the kitchen", "the bedroom", "the living room", "the office", "the garage", "the bathroom", "the hall",
           "home", "work", "downstairs", "upstairs", "outside"]
_NOUNS = [
    "the red one", "the blue one", "the big one", "the first one", "the second one", "the last one", "the other one",
    "this one", "both", "neither", "all of them", "none of them", "the second option", "option three", "the first option",
    "the kitchen", "my office", "the main menu", "the inbox", "voicemail", "billing", "customer service",
    "technical support", "sales", "the front desk", "reception", "an operator", "a taxi", "a coffee", "two coffees",
    "a glass of water", "a cup of tea", "chicken soup", "pasta", "the salad", "the early train", "the window seat",
    "tomorrow", "tomorrow morning", "tonight", "this afternoon", "next week", "next Friday", "on Monday",
    "at noon", "in the morning", "after lunch", "later", "right now", "the usual", "my mom", "my brother",
    "Sarah", "John Smith", "Doctor Patel", "the dentist", "the airport", "the train station", "London", "Paris",
    "the blue folder", "the old files", "my documents", "the draft", "the new version", "the receipt",
]
_ANSWERS = [
    "yes", "no", "yeah", "yep", "nope", "sure", "okay", "ok", "alright", "right", "correct", "exactly", "of course",
    "absolutely", "definitely", "not really", "not yet", "not now", "maybe", "probably", "I think so",
    "I don't think so", "I don't know", "no idea", "that's right", "that's it", "that's all", "that's fine",
    "that's wrong", "that works", "fine", "good", "great", "perfect", "thanks", "thank you", "no thanks",
    "yes please", "no thank you", "yes it is", "no it isn't", "yes I do", "no I don't", "I did", "I can't",
    "me too", "same here", "good idea", "sounds good", "sounds great", "got it", "I see", "I agree",
    "all done", "I'm done", "I'm ready", "I'm fine", "I'm here", "not bad", "hello", "hi", "hi there", "bye",
    "goodbye", "good morning", "good night", "see you", "hey", "wow", "really", "why not", "go for it",
    "both of them", "just one", "only two", "a few", "a lot", "enough", "more", "less", "either one", "whatever",
]
_QUESTIONS = [
    "what time is it", "what's the time", "what day is it", "what's the date", "what's the weather",
    "is it raining", "is it cold outside", "will it rain", "how are you", "who are you", "what's your name",
    "where are you", "what can you do", "can you hear me", "are you there", "did it work", "is it done",
    "what happened", "what was that", "what did you say", "what do you mean", "how much is it", "how much",
    "how many", "how long", "how far", "how old is he", "where is it", "where's my phone", "where are my keys",
    "when is it", "when does it start", "when does it close", "why not", "why", "who called", "who's there",
    "which one", "which folder", "which floor", "what about tomorrow", "what about you", "and you",
    "really", "seriously", "are you sure", "is that right", "is that all", "anything else", "what's next",
    "what's new", "what's up", "can I", "can you", "could you", "do you", "should I", "is it open",
    "is it far", "is it safe", "is there more", "any news", "any messages", "what's on", "who won",
    "what's playing", "what's the score", "how do I", "what now", "now what", "how come", "since when",
    "what's the password", "what's my balance", "how's the traffic", "is the store open", "are we there yet",
    "did you get that", "can you repeat that", "can you help me", "could you help", "what should I do",
]
_STATEMENTS = [
    "the door is locked", "the light is on", "the line is busy", "the room is full", "the phone is dead",
    "my battery is low", "the printer is jammed", "the meeting is over", "the game has started", "it's late",
    "it's broken", "it's too loud", "it's too cold", "it's working", "it works", "it doesn't work", "I'm lost",
    "I'm hungry", "I'm tired", "I'm back", "I'm home", "I'm leaving", "I forgot", "I changed my mind",
    "I need help", "I need a break", "I have a question", "I want pizza", "I like it", "I love it", "I hate this",
    "we're out of milk", "we're late", "they left", "she's here", "he's busy", "nobody answered", "nothing happened",
    "the order arrived", "the train is late", "the store is closed", "the shop is open", "the water is hot",
    "the screen is black", "the sound is off", "the password is wrong", "the number is wrong", "you're right",
    "you're welcome", "no problem", "my pleasure", "good job", "well done", "that was fast", "that's enough",
]
_SUITS = ["hearts", "spades", "diamonds", "clubs"]
_RANKS = ["ace", "king", "queen", "jack"] + _DIGITS[2:] + ["ten"]
# dangling continuations: where a pause leaves a turn cut off
_STUBS = [
    "and", "or", "but", "and then", "and the", "and also", "so", "because", "if", "when", "with the", "with",
    "for", "for the", "to", "to the", "in the", "in", "on the", "at", "at the", "from", "from the", "of",
    "of the", "about", "about the", "which", "than", "after", "before the", "until", "into the",
    "by", "a", "the", "my", "your", "some", "and my", "or the", "but I", "so that", "because the", "and I",
]


def _number(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.35:  # a digit string, as spoken or as Whisper writes it
        digits = [rng.randrange(10) for _ in range(rng.randint(2, 7))]
        if rng.random() < 0.5:
            return " ".join(_DIGITS[d] if d or rng.random() < 0.7 else "oh" for d in digits)
        return " ".join(str(d) for d in digits) if rng.random() < 0.6 else "".join(str(d) for d in digits)
    if kind < 0.6:  # a number
        n = rng.choice([rng.randint(1, 20), rng.randint(21, 99), rng.randint(100, 2000)])
        if rng.random() < 0.5:
            return str(n)
        return _spell(n)
    if kind < 0.8:  # a number with a unit or a time
        return rng.choice([
            f"{rng.randint(1, 12)} o'clock", f"{rng.randint(1, 12)}:{rng.choice(['00', '15', '30', '45'])}",
            f"{_spell(rng.randint(2, 60))} minutes", f"{rng.randint(2, 60)} seconds", f"{_spell(rng.randint(1, 9))} hours",
            f"{rng.randint(1, 100)} percent", f"{_spell(rng.randint(2, 30))} dollars", f"{rng.randint(1, 50)} meters",
            f"page {rng.randint(1, 300)}", f"room {rng.randint(100, 999)}", f"extension {rng.randint(100, 9999)}",
            f"channel {rng.randint(1, 99)}", f"number {_spell(rng.randint(1, 12))}", f"level {rng.randint(1, 10)}",
        ])
    # card names and pairs (a card game's moves)
    card = lambda: f"{rng.choice(_RANKS)} of {rng.choice(_SUITS)}"  # noqa: E731
    return rng.choice([card(), card(), f"{card()} and {card()}", f"{rng.choice(_DIGITS[1:])} {rng.choice(_DIGITS[1:])}"])


def _spell(n: int) -> str:
    if n < 10:
        return _DIGITS[n]
    if n < 20:
        return _TEENS[n - 10]
    if n < 100:
        return _TENS[n // 10 - 2] + ("" if n % 10 == 0 else " " + _DIGITS[n % 10])
    if n < 1000:
        rest = n % 100
        return _DIGITS[n // 100] + " hundred" + ("" if rest == 0 else " " + _spell(rest))
    rest = n % 1000
    return _spell(n // 1000) + " thousand" + ("" if rest == 0 else " " + _spell(rest))


def _turn(rng: random.Random) -> tuple[str, str]:
    """(kind, text) of one short complete turn, before surface variation."""
    kind = rng.choices(["command", "bare", "noun", "number", "answer", "question", "statement"],
                       weights=[4, 3, 3, 3, 3, 4, 2])[0]
    if kind == "command":
        text = _verb_object(rng)
        r = rng.random()
        if r < 0.2:
            text += f" in {rng.choice(_PLACES)}"
        elif r < 0.3:
            text = "please " + text
        elif r < 0.4:
            text += " please"
        elif r < 0.5:
            text += " " + rng.choice(["now", "again", "for me", "tomorrow", "tonight", "at 7", "in ten minutes"])
        elif r < 0.6:
            text = rng.choice(["can you ", "could you ", "would you ", "please ", "okay ", "now "]) + text
        elif r < 0.65:
            text = f"change to {rng.choice(_NOUNS)}"
        return kind, text
    if kind == "bare":
        text = rng.choice(_BARE_COMMANDS)
        if rng.random() < 0.2:
            text += rng.choice([" please", " now", " again", " a bit"])
        return kind, text
    if kind == "noun":
        text = rng.choice(_NOUNS)
        if rng.random() < 0.15:
            text = rng.choice(["just ", "only ", "maybe ", "probably ", "the one in ", "go to ", "to "]) + text
        return kind, text
    if kind == "number":
        text = _number(rng)
        if rng.random() < 0.2:
            text = rng.choice(["it's ", "my number is ", "press ", "extension ", "about ", "at ", "call "]) + text
        return kind, text
    if kind == "answer":
        text = rng.choice(_ANSWERS)
        if rng.random() < 0.15:
            text = rng.choice(["yes, ", "no, ", "okay, ", "well, ", "oh, ", "um, "]) + rng.choice(_ANSWERS + _NOUNS)
        return kind, text
    if kind == "question":
        text = rng.choice(_QUESTIONS)
        if rng.random() < 0.25:
            text = rng.choice([f"which {w}" for w in ("one", "folder", "room", "day", "option", "file", "button")]
                              + [f"where is {rng.choice(_NOUNS)}", f"is {rng.choice(_OBJECTS)} on",
                                 f"did you {_verb_object(rng)}",
                                 f"can you {_verb_object(rng)}",
                                 f"what about {rng.choice(_NOUNS)}", f"how about {rng.choice(_NOUNS)}",
                                 f"go to which {rng.choice(['page', 'floor', 'folder', 'menu'])}"])
        return kind, text
    return kind, rng.choice(_STATEMENTS)


def _surface(rng: random.Random, text: str, kind: str) -> str:
    """ASR-style variation: casing, final punctuation (or none), a comma after a leading "yes"/"okay"."""
    r = rng.random()
    if r < 0.5:
        text = text[0].upper() + text[1:]
    elif r < 0.55:
        text = text.title()
    else:
        text = text.lower() if not text.startswith("I ") else text
    end = rng.random()
    if kind == "question":
        text += "?" if end < 0.45 else ("." if end < 0.75 else "")
    else:
        text += "." if end < 0.5 else ("!" if end < 0.55 else ("?" if end < 0.6 else ""))
    return text


def synthetic_turns(seed: int = 0, n: int = 600, stub_rate: float = 0.5) -> list[Utterance]:
    """`n` short complete turns from the templates above (distinct texts), with surface variation;
    with probability `stub_rate` a turn is followed by a dangling continuation (`_STUBS`) and the
    utterance then also holds that cut-off text (label 0). Deterministic for `seed`.

    Raises:
        ValueError: n < 0 or stub_rate outside [0, 1].
    """
    if n < 0 or not 0.0 <= stub_rate <= 1.0:
        raise ValueError(f"need n >= 0 and stub_rate in [0, 1], got {n}, {stub_rate}")
    rng = random.Random(seed)
    out: list[Utterance] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n and tries < 50 * n + 100:
        tries += 1
        kind, core = _turn(rng)
        key = core.lower()
        if key in seen:
            continue
        seen.add(key)
        text = _surface(rng, core, kind)
        num_words = len(_strip(text).split())
        cuts: list[tuple[int, int]] = [(k, label) for k, label in label_cuts(text).cuts if label == 0]
        cuts.append((num_words, 1))
        if rng.random() < stub_rate:
            stub = rng.choice(_STUBS)
            body = _strip(text)
            joiner = ", " if rng.random() < 0.2 else " "
            text = body + joiner + stub + rng.choice(["", "", "...", ","])
            cuts.append((len(_strip(text).split()), 0))
        out.append(Utterance(text, tuple(sorted(set(cuts))), f"synthetic:{kind}"))
    return out


def _norm(text: str) -> str:
    """Lower case, punctuation dropped, digit runs spelled out ("5 5" and "five five" are one text)."""
    words = re.sub(r"[^\w' ]+", " ", text.lower()).split()
    return " ".join(_spell(int(w)) if w.isdigit() and len(w) < 7 else w for w in words)


def _held_out_spans(held_out: Sequence[str], min_words: int) -> set[str]:
    spans: set[str] = set()
    for text in held_out:
        words = _norm(text).split()
        spans.update(" ".join(words[:j]) for j in range(2, len(words) + 1))  # the pause set's cuts
        for i in range(len(words)):
            spans.update(" ".join(words[i:j]) for j in range(i + min_words, len(words) + 1))
        spans.add(" ".join(words))
    return spans


def overlap_with(utterances: Iterable[Utterance], held_out: Sequence[str], min_words: int = 3,
                 _spans: set[str] | None = None) -> list[str]:
    """The training texts (every labelled prefix) that equal a held-out text, one of its prefixes of
    >= 2 words (the texts a pause leaves) or any run of >= `min_words` of its words (case, punctuation
    and digits vs number words ignored): what must not be trained on."""
    spans = _held_out_spans(held_out, min_words) if _spans is None else _spans
    return [t for u in utterances for k, _label in u.cuts if (t := _norm(prefix_text(u.text, k))) in spans]


def drop_overlap(utterances: Iterable[Utterance], held_out: Sequence[str], min_words: int = 3) -> tuple[list[Utterance], int]:
    """`utterances` without any labelled text that `overlap_with` finds in `held_out` (an utterance
    whose complete text collides is dropped whole; a colliding cut is dropped from its utterance; an
    utterance with negatives only, an extra row, keeps what does not collide).
    Returns (kept utterances, number of labelled texts dropped)."""
    spans = _held_out_spans(held_out, min_words)
    kept: list[Utterance] = []
    dropped = 0
    for u in utterances:
        cuts = tuple((k, label) for k, label in u.cuts if _norm(prefix_text(u.text, k)) not in spans)
        dropped += len(u.cuts) - len(cuts)
        # a text labelled only as cut off (an extra row) stays while it has a label; one that lost its
        # complete text goes whole
        if any(label == 1 for _, label in cuts) or (cuts and not any(label == 1 for _, label in u.cuts)):
            kept.append(Utterance(u.text, cuts, u.source))
        else:
            dropped += len(cuts)
    return kept, dropped


def all_cuts(text: str, source: str = "sentences") -> Utterance:
    """A complete utterance (1) and its cut after every word but the last (0): the labelling the shipped
    heads were trained with (`train_eou.cut_examples`).

    Raises:
        ValueError: `text` has no words.
    """
    words = _strip(text).split()
    if not words:
        raise ValueError(f"no words in {text!r}")
    return Utterance(" ".join(words), tuple((k, 0) for k in range(1, len(words))) + ((len(words), 1),), source)


LABELLINGS = {"all-cuts": all_cuts, "pause-points": label_cuts}


def load_extra_rows(path: str | Path) -> list[Utterance]:
    """Extra labelled texts for `train-eou --extra-rows`: each a text read as it stands (no cuts made
    from it), label 1 = a complete turn, 0 = cut off; e.g. what the recogniser wrote for real prompts
    and for the same prompts cut at a pause (scripts/fit_turn_fusion.py's rows).

    `path`: a JSON list of objects with "text" and "label" (0/1; a row with a "split" other than
    "train" is skipped, so a test split stays out), or a TSV file of `text<TAB>label` lines (blank and
    `#` lines skipped). Repeated (text, label) pairs are read once; texts without words are skipped.
    Returns `Utterance`s of one labelled prefix each (the whole text), source "extra".

    Raises:
        FileNotFoundError: no such file.
        ValueError: a malformed row or a label other than 0/1 (names the row).
    """
    path = Path(path)
    raw = path.read_text(encoding="utf-8")
    pairs: list[tuple[str, object]] = []
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON: {exc}") from exc
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of {{'text', 'label'}} objects")
        for i, row in enumerate(data):
            if not isinstance(row, dict) or not isinstance(row.get("text"), str) or "label" not in row:
                raise ValueError(f"{path}: row {i} is not an object with a text and a label")
            if row.get("split", "train") != "train":
                continue
            pairs.append((row["text"], row["label"]))
    else:
        for i, line in enumerate(raw.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            text, sep, label = line.rpartition("\t")
            if not sep:
                raise ValueError(f"{path}:{i}: expected text<TAB>label")
            pairs.append((text, label.strip()))
    out: list[Utterance] = []
    seen: set[tuple[str, int]] = set()
    for text, label in pairs:
        if isinstance(label, bool) or label not in (0, 1, "0", "1"):
            raise ValueError(f"{path}: label must be 0 or 1, got {label!r} for {text!r}")
        words = _strip(text).split()
        key = (" ".join(words), int(label))
        if not words or key in seen:
            continue
        seen.add(key)
        out.append(Utterance(key[0], ((len(words), key[1]),), "extra"))
    return out


def training_utterances(sentences: Iterable[str], *, labels: str = "all-cuts", seed: int = 0, synthetic: int = 0,
                        exclude: Sequence[str] = (), extra: Sequence[Utterance] = ()) -> tuple[list[Utterance], int]:
    """The whole training set: each of `sentences` labelled by `labels` ("all-cuts": `all_cuts`, every cut
    a negative, as the shipped heads; "pause-points": `label_cuts`), plus `synthetic_turns(seed,
    synthetic)`, plus `extra` (`load_extra_rows`), without any text that overlaps `exclude`
    (`drop_overlap`: the bench transcripts, the held-out measure). Returns (utterances, number of
    labelled texts dropped for overlap).

    Raises:
        ValueError: an unknown `labels`, synthetic < 0.
    """
    if labels not in LABELLINGS:
        raise ValueError(f"labels must be one of {sorted(LABELLINGS)}, got {labels!r}")
    base = [LABELLINGS[labels](s) for s in sentences if _strip(s)]
    return drop_overlap(base + (synthetic_turns(seed, synthetic) if synthetic else []) + list(extra), exclude)
