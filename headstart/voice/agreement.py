"""LocalAgreement-n: which words of a streaming ASR hypothesis are stable enough to commit.

Source: D. Macháček, R. Dabre, O. Bojar, "Turning Whisper into Real-Time Transcription System",
IJCNLP-AACL 2023 (whisper_streaming's `HypothesisBuffer`). The utterance is re-transcribed as audio
grows; a word is *committed* once the last n hypotheses agree on it (their longest common prefix beyond
what is already committed). Committed words never change, repeat or disappear; the rest of the newest
hypothesis is *pending*. Words are compared without case or punctuation. One refinement: the last word
of the hypotheses is not committed until a word follows it (or the utterance ends), so it is committed
with its in-sentence spelling rather than the cut-off one ("selfish." -> "selfish,").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from headstart.voice.words import Word, join_words

# Whisper's word timestamps (cross-attention DTW, 20 ms steps) give a word it aligned inside the audio
# at least one step; a repetition loop decoded past the end of the audio gets words of zero length
# there (measured, dhd_2934z: "29340 0." then " 29340", " 0.", " 293" all at 1.716-1.716 s), and one
# decoded over audio it already transcribed gets times that go back
_ZERO_LENGTH_S = 1e-3
# how far apart (end times) one word may be in two passes and still be taken for the same word
_ANCHOR_S = 0.3
# how soon after the committed words a repeat of their tail must start to be taken for them
_REPEAT_WINDOW_S = 0.3
# the longest repeated phrase looked for, in words ("Press 1 to enter a number." is 6)
_MAX_LOOP_PERIOD_WORDS = 8


def loop_start(words: Sequence[Word]) -> int:
    """Where a repetition loop begins in one hypothesis: the index of the first word to drop
    (`len(words)` when there is no loop). Everything from there on is the loop.

    A loop is found where (whichever comes first)
      - a run of >= 2 zero-length words begins (words decoded past the end of the audio),
      - a word starts before the word before it (word times going back),
      - a zero-length word begins a copy of the phrase of at most `_MAX_LOOP_PERIOD_WORDS` words
        before it (a whole copy, of at least 2 words, or one that runs to the hypothesis' end): a
        copy with no audio of its own ("Press Press(0 s)").
    From there the cut moves back over the earlier copies of the repeated phrase, so that one copy
    is kept: "Press Press Press(0 s) Press(0 s)" -> "Press"; "10 of clubs. 10(0 s) of(0 s)" ->
    "10 of clubs.". A single zero-length word that repeats nothing (a word cut by the end of the
    audio, a short word DTW gave no step) is kept.

    Args:
        words: one hypothesis, in order, with stream times (seconds).
    """
    return find_loop(words)[0]


def find_loop(words: Sequence[Word]) -> tuple[int, int]:
    """`loop_start(words)` and the length in words of the phrase the loop repeats (0 when it
    repeats none: only words decoded past the audio's end, or times going back)."""
    n = len(words)
    keys = [w.key for w in words]
    zero = [w.end_s - w.start_s < _ZERO_LENGTH_S for w in words]

    def period(i: int) -> int | None:
        """The shortest p such that words from i on copy those p before: a whole copy of the phrase
        (at least 2 words) or up to the hypothesis' end."""
        if not keys[i]:
            return None
        for p in range(1, min(_MAX_LOOP_PERIOD_WORDS, i) + 1):
            length = min(max(p, 2), n - i)
            if all(keys[j] == keys[j - p] for j in range(i, i + length)):
                return p
        return None

    for i in range(n):
        run = zero[i] and i + 1 < n and zero[i + 1]
        back = i > 0 and words[i].start_s < words[i - 1].start_s - _ZERO_LENGTH_S
        p = period(i)
        if not (run or back or (zero[i] and p is not None)):
            continue
        if p is None:
            return i, 0
        # the loop's copies of the phrase began earlier: keep only its first copy
        start = i - p
        while start > 0 and keys[start - 1] and keys[start - 1] == keys[start - 1 + p]:
            start -= 1
        return start + p, p
    return n, 0


def drop_loop_tail(words: Sequence[Word]) -> tuple[Word, ...]:
    """`words` cut where a repetition loop begins (`loop_start`): the loop is no speech.

    Args:
        words: one hypothesis, in order.

    Returns:
        The kept words, in order (all of them when there is no loop).
    """
    return tuple(words[: loop_start(words)])


class LocalAgreement:
    """A synchronous policy: `push(hypothesis)` -> newly committed words; `flush()`; `reset()`.

    Each hypothesis is the recogniser's word list for the utterance so far, with stream times. It may
    cover the whole utterance (the usual case) or only audio after some offset (a trimmed buffer);
    the words already committed are found in it as follows:
      1. if the hypothesis starts with all committed words (compared without case or punctuation),
         the rest is new;
      2. otherwise (the recogniser rewrote earlier words, or the audio was trimmed), the last
         committed word found again (same word, ending within `_ANCHOR_S` of it) ends what is known;
         failing that, words that start before the last committed word ended (minus
         `overlap_tolerance_s`) are dropped, and then the longest run of at most `max_overlap_words`
         words that repeats the committed tail where it ended (whisper_streaming's n-gram
         de-duplication).

    Args:
        n: how many consecutive hypotheses must agree (n >= 1; n=2 in the paper).
        overlap_tolerance_s: slack for word-time jitter between passes, in seconds.
        max_overlap_words: the longest committed tail searched for at a hypothesis' start.
    """

    def __init__(self, n: int = 2, overlap_tolerance_s: float = 0.1, max_overlap_words: int = 5) -> None:
        if n < 1:
            raise ValueError(f"LocalAgreement needs n >= 1, got {n}")
        self.n = n
        self.overlap_tolerance_s = overlap_tolerance_s
        self.max_overlap_words = max_overlap_words
        self.reset()

    def reset(self) -> None:
        """Forget everything: a new utterance."""
        self._committed: list[Word] = []
        self._hypotheses: deque[list[Word]] = deque(maxlen=self.n)
        self._pending: list[Word] = []

    def push(self, hypothesis: Sequence[Word]) -> list[Word]:
        """Add the newest hypothesis; return the words it committed (possibly none), in order."""
        self._hypotheses.append(list(hypothesis))
        tails = [self._beyond_committed(h) for h in self._hypotheses]
        newest = tails[-1]
        if len(tails) < self.n:
            self._pending = newest
            return []
        agreed = 0
        while agreed < len(newest) and all(
            agreed < len(t) and t[agreed].key == newest[agreed].key for t in tails
        ):
            agreed += 1
        # spell the agreed words as the hypothesis that heard most after them: a hypothesis ending on
        # a word often marks it as cut off ("not." / "an...")
        source = max(reversed(tails), key=len)
        if agreed == len(source):
            # nothing was heard after the last agreed word yet: hold it back (Whisper ends every
            # hypothesis with "." or "..."); it is committed once a word follows it, or at flush
            agreed -= 1
        new = source[:agreed]
        self._committed.extend(new)
        self._pending = newest[agreed:]
        return new

    def flush(self) -> list[Word]:
        """End of utterance: commit the pending words of the newest hypothesis; return them.

        The committed words stay readable until `reset()`; the hypothesis history is cleared.
        """
        new = self._pending
        self._committed.extend(new)
        self._pending = []
        self._hypotheses.clear()
        return new

    @property
    def committed(self) -> tuple[Word, ...]:
        return tuple(self._committed)

    @property
    def pending(self) -> tuple[Word, ...]:
        return tuple(self._pending)

    @property
    def committed_text(self) -> str:
        return join_words(self._committed)

    @property
    def pending_text(self) -> str:
        return join_words(self._pending)

    @property
    def committed_end_s(self) -> float | None:
        """Where the last committed word ends in the stream (None if nothing is committed)."""
        return self._committed[-1].end_s if self._committed else None

    def _beyond_committed(self, hypothesis: list[Word]) -> list[Word]:
        committed = self._committed
        if not committed:
            return hypothesis
        k = len(committed)
        if len(hypothesis) >= k and all(h.key == c.key for h, c in zip(hypothesis, committed)):
            return hypothesis[k:]
        # the last committed word heard again (its key, ending within _ANCHOR_S of it): what
        # follows it is new; word times jitter between passes by more than the tolerance below
        last = committed[-1]
        anchors = [i for i, w in enumerate(hypothesis) if w.key == last.key and abs(w.end_s - last.end_s) <= _ANCHOR_S]
        if anchors and last.key:
            return hypothesis[min(anchors, key=lambda i: abs(hypothesis[i].end_s - last.end_s)) + 1 :]
        cutoff = committed[-1].end_s - self.overlap_tolerance_s
        rest = [w for w in hypothesis if w.start_s > cutoff]
        # a repeat of the committed tail is a re-transcription only where it starts as the committed
        # words end; later it is new speech that happens to repeat them ("... into the conference.
        # The conference will begin", 0.48 s after it)
        if not rest or rest[0].start_s > committed[-1].end_s + _REPEAT_WINDOW_S:
            return rest
        for size in range(min(self.max_overlap_words, len(committed), len(rest)), 0, -1):
            if [w.key for w in rest[:size]] == [w.key for w in committed[-size:]]:
                return rest[size:]
        return rest
