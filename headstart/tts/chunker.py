"""Clause chunker: cuts streamed reply text into pieces a synthesiser can speak well and early.

A plain synchronous policy (no I/O, no event loop): `push` text deltas as the LLM emits them, get back
the chunks that are ready; `flush` at the end of the reply; `reset` to drop everything.

Policy:
- The first chunk of a reply is emitted as soon as it can be spoken well: at the first comma,
  semicolon, colon or dash followed by a space once the text has >= `first_chunk_min_words` words, or
  at the first sentence end, whichever comes first. Piper's time to first audio grows with the chunk's
  length (it synthesises a chunk in one call), so a short opening clause speaks sooner, at the cost of
  one extra prosody break. An opening with no such mark is cut after `first_chunk_max_words` whole words
  (0: never), as streaming TTS services cut their first piece by length, or at the last clause mark
  before them ("Well, in short, | the"). The word cut moves on, word by word, past a word that cannot
  end a spoken phrase: a function word ("the", "a", "to", "is", "can", "I'm"...) that would dangle, a
  token with a digit (its unit or "am"/"pm" may follow: "9:30 am"), a number word ("twenty | five"),
  an abbreviation or initial ("Dr." | "Lee"), a capitalised word before another (a name: "World | War",
  "San | Francisco"); it prefers, within 3 more words, a cut before a word
  that opens a phrase ("a black cat | is", not "a black | cat"). The word cut competes with the marks by position, so
  the first chunk is the same whether the text is pushed whole or token by token.
- After that, one chunk per sentence (`.`, `!`, `?`, `…` followed by whitespace) or line. A line break
  ends a chunk (paragraphs, list items, headings are separate spoken units). Until the reply's chunks
  hold `clause_chunks_until_words` words, a chunk also ends at a clause mark once it has
  `_LATER_CLAUSE_MIN_WORDS` words: after a short opener ("Sure!") the next chunk is then a clause, not
  a long sentence that the LLM must finish while the opener's half second of audio runs out (a gap in
  playback; docs/speaking.md).
- A period never ends a chunk inside a number ("3.14", "$49.95"), after a known abbreviation ("Dr.",
  "Mr.", "e.g.", "U.S.", "St."), after an initial ("J. R. R."), or after a list number at the start of
  a line ("1. First"). Commas and colons never split "1,000" or "8:00" (no space follows them).
- `TTSConfig.first_clause=False` (an ablation: the naive pipeline) turns the early first chunk off:
  every chunk is then a whole sentence or line, the first one included.
- No chunk is longer than `max_chunk_chars`: an over-long piece is cut at its last comma, else at
  its last word boundary (a single word longer than the limit is cut at the limit). Nothing is
  dropped except whitespace; pieces with no letter or digit ("", "   ", "...") produce no chunk.
"""

from __future__ import annotations

import re

from headstart.config import TTSConfig

_CLOSERS = "\"'”’)]}»"
_CLOSERS_CLASS = "[" + re.escape(_CLOSERS) + "]"
_SENTENCE_END = r"[.!?…]+"
_CLAUSE_END = r"[,;:—–]"
_BOUNDARY_RE = re.compile(
    rf"(?P<newline>\n)"
    rf"|(?P<sentence>{_SENTENCE_END}{_CLOSERS_CLASS}*)(?=\s)"
    rf"|(?P<clause>{_CLAUSE_END}{_CLOSERS_CLASS}*)(?=\s)"
)
_CLAUSE_CUT_RE = re.compile(rf"{_CLAUSE_END}{_CLOSERS_CLASS}*(?=\s)")
_SPEAKABLE_RE = re.compile(r"\w")
_WHOLE_WORD_RE = re.compile(r"\S+(?=\s)")

# Abbreviations after which a period does not end a sentence (lower case, with their periods).
ABBREVIATIONS = frozenset(
    {
        "dr.", "mr.", "mrs.", "ms.", "mx.", "prof.", "st.", "sr.", "jr.", "mt.", "ft.", "no.", "nos.",
        "vs.", "v.", "e.g.", "i.e.", "cf.", "u.s.", "u.k.", "u.s.a.", "u.n.", "e.u.", "inc.", "ltd.",
        "co.", "corp.", "fig.", "figs.", "approx.", "dept.", "est.", "ave.", "rd.", "blvd.", "gen.",
        "gov.", "sen.", "rep.", "capt.", "lt.", "col.", "sgt.", "rev.", "vol.", "pp.", "ph.d.",
        "jan.", "feb.", "mar.", "apr.", "jun.", "jul.", "aug.", "sep.", "sept.", "oct.", "nov.",
        "dec.", "a.m.", "p.m.", "etc.", "al.",
    }
)
# These often end a sentence too: they do when the next word starts with a capital letter.
_MAY_END_SENTENCE = frozenset({"etc.", "a.m.", "p.m."})
_INITIALS_RE = re.compile(r"^(?:[a-z]\.)+$", re.IGNORECASE)
_LIST_NUMBER_RE = re.compile(r"^\d{1,3}\.$")
_LEADING_MARKS_RE = re.compile(r"^[^\w]+")
_EDGE_MARKS_RE = re.compile(r"^[^\w']+|[^\w']+$")

# Words a first chunk never ends on: they lean on the next word, so "Here is the | plan" would leave
# "the" dangling (articles, prepositions, conjunctions, determiners, auxiliaries and modals, adverbs
# that lead a verb, pronouns that may be a subject and their contractions, number words). Lower case,
# straight apostrophes.
DANGLING_WORDS = frozenset(
    """
    a an the
    to of in on at for with by from about into onto over after before under than as like per via
    between through during without within against among around toward towards upon off until up
    and or but nor so if that because while although though whether since unless whereas then
    my your his her its our their this these those some any no every each either neither both all
    another other such what which whose whom who where when how why
    is are was were be been being am do does did have has had will would shall should can could may
    might must not very too also just really quite only even more most less least much many few
    i you it we they he she there here it's that's there's here's what's let's
    never always often usually sometimes still already ever
    i'm you're we're they're he's she's i'll you'll we'll they'll i've you've we've they've i'd
    you'd we'd they'd don't doesn't didn't can't won't isn't aren't wasn't weren't couldn't
    shouldn't wouldn't haven't hasn't
    mr mrs ms mx dr prof st mt
    zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    thousand million billion trillion half
    """.split()
)
_DIGIT_RE = re.compile(r"\d")
# A word cut waits up to this many words past first_chunk_max_words for a phrase boundary (a word that
# can end a phrase followed by one that starts one) before it takes the first word that can end one.
_PHRASE_PATIENCE_WORDS = 3
# The fewest words a later chunk cut at a clause mark has: short clauses ("it is, in fact,") stay whole.
_LATER_CLAUSE_MIN_WORDS = 6


class ClauseChunker:
    """Turns streamed text deltas into speakable chunks (see the module docstring for the policy).

    Args:
        config: uses `first_clause`, `first_chunk_min_words`, `first_chunk_max_words`,
            `clause_chunks_until_words` and `max_chunk_chars` (must be >= 1).

    Raises:
        ValueError: if `max_chunk_chars` < 1, or a word count is < 0.
    """

    def __init__(self, config: TTSConfig | None = None) -> None:
        config = config or TTSConfig()
        if config.max_chunk_chars < 1:
            raise ValueError(f"max_chunk_chars must be >= 1, got {config.max_chunk_chars}")
        if config.first_chunk_min_words < 0:
            raise ValueError(f"first_chunk_min_words must be >= 0, got {config.first_chunk_min_words}")
        if config.first_chunk_max_words < 0:
            raise ValueError(f"first_chunk_max_words must be >= 0, got {config.first_chunk_max_words}")
        if config.clause_chunks_until_words < 0:
            raise ValueError(f"clause_chunks_until_words must be >= 0, got {config.clause_chunks_until_words}")
        self.clause_chunks_until_words = config.clause_chunks_until_words
        self.max_chunk_chars = config.max_chunk_chars
        self.first_chunk_min_words = config.first_chunk_min_words
        self.first_chunk_max_words = config.first_chunk_max_words
        self.first_clause = config.first_clause
        self._buf = ""
        self._first_done = False
        self._words_out = 0  # words in the chunks emitted so far in this reply

    def push(self, delta: str) -> list[str]:
        """Add a text delta; return the chunks now ready to speak (possibly none), in order.

        Raises:
            TypeError: if `delta` is not a str.
        """
        if not isinstance(delta, str):
            raise TypeError(f"push() takes str text deltas, got {type(delta).__name__}")
        self._buf += delta
        return self._drain(final=False)

    def flush(self) -> list[str]:
        """End of the reply: return whatever is left as chunks and re-arm the early first chunk."""
        out = self._drain(final=True)
        self._buf = ""
        self._first_done = False
        self._words_out = 0
        return out

    def reset(self) -> None:
        """Drop buffered text (e.g. on barge-in) and re-arm the early first chunk."""
        self._buf = ""
        self._first_done = False
        self._words_out = 0

    @property
    def pending_text(self) -> str:
        """Text pushed but not yet emitted as a chunk."""
        return self._buf

    # --- internals ---

    def _drain(self, final: bool) -> list[str]:
        out: list[str] = []
        limit = self.max_chunk_chars
        while True:
            self._buf = self._buf.lstrip()
            if not self._buf:
                break
            end = self._find_boundary(self._buf)
            if end is not None and len(self._buf[:end].rstrip()) <= limit:
                cut = end
            elif len(self._buf) > limit:
                cut = _cut_point(self._buf, limit)
            elif final:
                cut = len(self._buf)
            else:
                break
            piece, self._buf = self._buf[:cut].strip(), self._buf[cut:]
            if _SPEAKABLE_RE.search(piece):
                out.append(piece)
                self._first_done = True
                self._words_out += len(piece.split())
        return out

    def _find_boundary(self, text: str) -> int | None:
        """End index (exclusive) of the first chunk in `text`, or None if no chunk is complete yet."""
        early = self.first_clause and not self._first_done  # the early first clause is still possible
        # a later chunk may end at a clause mark while little audio is queued ahead of it
        clause_min = self.first_chunk_min_words if early else _LATER_CLAUSE_MIN_WORDS
        clauses = early or (self.first_clause and self._words_out < self.clause_chunks_until_words)
        # The word cut competes with the marks by position, so the first chunk does not depend on how
        # the text was split into deltas (pushed whole or token by token, the same cut).
        word_cut = self._first_words_cut(text) if early and self.first_chunk_max_words else None
        for m in _BOUNDARY_RE.finditer(text):
            if word_cut is not None and m.start() >= word_cut:
                return word_cut
            if m.group("newline") is not None:
                return m.end()
            if m.group("clause") is not None:
                if not clauses:
                    continue
                if len(text[: m.start()].split()) >= clause_min:
                    return m.end()
                continue
            verdict = _sentence_end_verdict(text, m.start(), m.end())
            if verdict is True:
                return m.end()
            if verdict is None:  # cannot tell until more text arrives
                return None
        return word_cut

    def _first_words_cut(self, text: str) -> int | None:
        """Where to cut an opening with no clause mark yet, or None if that is not known yet.

        From the `first_chunk_max_words`-th whole word (one followed by whitespace) on, the first
        word that can end a phrase (`_can_end_first_chunk`) and is followed by a word that starts one
        (a function word or a number: "the best way | to learn", "a black cat | is"), looking
        `_PHRASE_PATIENCE_WORDS` words ahead; failing that, the first word that can end a phrase. A
        clause mark before the cut wins ("Well, in short, | the").
        """
        words = list(_WHOLE_WORD_RE.finditer(text))
        first = self.first_chunk_max_words - 1

        def can_end(i: int) -> bool:  # (words[i + 1] is whole)
            return _can_end_first_chunk(words[i].group(), words[i - 1].group() if i else "") and not _in_name(
                words[i].group(), words[i + 1].group()
            )

        cut: int | None = None
        for i in range(first, first + _PHRASE_PATIENCE_WORDS):
            if i + 1 >= len(words):
                return None  # the next word is not whole yet: cannot tell
            if can_end(i) and _starts_phrase(words[i + 1].group()):
                cut = i
                break
        else:
            cut = next((i for i in range(first, len(words) - 1) if can_end(i)), None)
            if cut is None:
                return None
        end = words[cut].end()
        clause_ends = [c.end() for c in _CLAUSE_CUT_RE.finditer(text, 0, end + 1)]
        return clause_ends[-1] if clause_ends else end


def _in_name(word: str, following: str) -> bool:
    """Do `word` and the `following` token belong to one name ("World War", "War II", "San
    Francisco"): both capitalised, nothing between them? A cut there would split the name (and leave
    a Roman numeral without the word that makes it one)."""
    if word[-1:] in ",;:.!?)\"'”’":
        return False
    first = _LEADING_MARKS_RE.sub("", word)[:1]
    second = _LEADING_MARKS_RE.sub("", following)[:1]
    return first.isupper() and second.isupper()


def _starts_phrase(word: str) -> bool:
    """Does `word` usually open a phrase (a function word, a number): a good place to cut before it?"""
    token = _LEADING_MARKS_RE.sub("", word).lower()
    bare = _EDGE_MARKS_RE.sub("", token.replace("\u2019", "'"))
    return bare in DANGLING_WORDS or bool(_DIGIT_RE.search(bare))


def _can_end_first_chunk(word: str, previous: str = "") -> bool:
    """Can a chunk cut by word count end on `word` (a whitespace-free token, punctuation included),
    which follows the token `previous`?

    No for an abbreviation or initial ("Dr.", "J."), a token with a digit ("9:30", "$12.50", "3rd":
    a unit or "am" may follow), a function word that leans on the next one ("the", "to", "I'm") and a
    number word ("twenty"); "am"/"pm" after a number ("9:30 am") may end one.
    """
    token = _LEADING_MARKS_RE.sub("", word).lower()
    if token in ABBREVIATIONS or _INITIALS_RE.match(token):
        return False
    if _DIGIT_RE.search(token):
        return False
    bare = _EDGE_MARKS_RE.sub("", token.replace("\u2019", "'"))
    if bare in ("am", "pm") and _DIGIT_RE.search(previous):
        return True
    return bool(bare) and bare not in DANGLING_WORDS


def _sentence_end_verdict(text: str, start: int, end: int) -> bool | None:
    """Does the sentence punctuation at text[start:end] end a sentence? None: wait for more text."""
    punct = text[start:end].rstrip(_CLOSERS)
    if punct != ".":
        return True  # "!", "?", "..." and "?!" always end one
    token_start = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start), text.rfind("\t", 0, start)) + 1
    token = _LEADING_MARKS_RE.sub("", text[token_start : start + 1]).lower()  # '"Dr.', '**Dr.', '(e.g.'

    if token in ABBREVIATIONS or _INITIALS_RE.match(token):
        if token not in _MAY_END_SENTENCE:
            return False
        rest = text[end:].lstrip()
        if not rest:
            return None
        return rest[0].isupper()
    line_prefix = text[text.rfind("\n", 0, token_start) + 1 : token_start]
    if _LIST_NUMBER_RE.match(token) and not line_prefix.strip():
        return False  # "1. First item" at the start of a line
    return True


def _cut_point(text: str, limit: int) -> int:
    """Where to cut an over-long `text` (no leading whitespace) so the first piece has <= limit chars.

    Prefers the last clause mark (comma etc.) in the window if it leaves a piece of at least a third
    of the limit, else the last whitespace, else a hard cut at `limit`.
    """
    window = text[: limit + 1]
    clause_ends = [m.end() for m in _CLAUSE_CUT_RE.finditer(window) if m.end() <= limit]
    if clause_ends and clause_ends[-1] >= limit // 3:
        return clause_ends[-1]
    space = max(window.rfind(" "), window.rfind("\t"), window.rfind("\n"))
    if space > 0:
        return space
    return limit
