"""One utterance as the listener follows it: where it starts and ends, what its ASR passes heard, its
committed words (LocalAgreement), the scores asked for it, and the events it holds back.

Long utterances: once more than `ASRConfig.trim_after_s` of an utterance is buffered, passes start at
the end of the last committed sentence (or, past twice that, of the last committed word) and get the
committed text as Whisper's prompt, so a pass costs the same at minute two as at second two (`trim`).

All positions are absolute sample indices of the listener's 16 kHz stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headstart.audio import SAMPLE_RATE_HZ
from headstart.events import EndOfTurn
from headstart.voice.agreement import LocalAgreement
from headstart.voice.words import Word, join_words

_SENTENCE_END = (".", "?", "!")
_PROMPT_CHARS = 200  # Whisper's prompt: the last ~200 characters of committed text are plenty of context


@dataclass(eq=False)
class Utterance:
    start: int  # sample index (the VAD's padded speech start)
    agreement: LocalAgreement
    audio_start: int = -1  # first sample passes transcribe (moves on when a long utterance is trimmed)
    prompt: str = ""  # committed text before audio_start (Whisper's prompt)
    trimmed_words: int = 0  # committed words before audio_start
    end: int | None = None  # sample index of the padded speech end; None while speaking
    resumes: int = 0  # how often speech resumed after an end
    final_text: str | None = None  # set once the final pass for the current end is done
    end_of_turn: EndOfTurn | None = None  # set once the endpointer decided
    last_pass_end: int = 0  # audio end of the last pass started
    covered: int = -1  # audio end of the last pass finished: the agreement's newest hypothesis
    newest_words: tuple[Word, ...] = ()  # that pass' words
    last_partial: tuple[str, str] = field(default=("", ""))
    eou_cache: dict[str, float] = field(default_factory=dict)  # text -> EOU probability already scored
    eou_text: str = ""  # the newest text sent for scoring
    outbox: list[object] = field(default_factory=list)  # events held while an older utterance finishes
    # the acoustic score belongs to one silence run (the VAD's, confirmed as a speech end or not)
    acoustic_run: int = 0  # counts the silence runs after which speech went on
    acoustic_asked: bool = False  # the current run's score was asked for

    @property
    def heard_words(self) -> tuple[Word, ...]:
        """The committed and pending words (the latest partial's)."""
        return self.agreement.committed + self.agreement.pending

    def trim(self, stop: int, trim_after: int) -> None:
        """Before a pass over [audio_start, stop): a buffer longer than `trim_after` samples starts over
        after the last committed sentence (or word, past twice that); the words cut off become the
        prompt. Nothing changes when no committed word ends past `audio_start`."""
        if stop - self.audio_start <= trim_after:
            return
        committed = self.agreement.committed
        cut = None
        for i in range(len(committed) - 1, self.trimmed_words - 1, -1):
            if committed[i].text.rstrip().endswith(_SENTENCE_END):
                cut = i + 1
                break
        if cut is None and stop - self.audio_start > 2 * trim_after and len(committed) > self.trimmed_words:
            cut = len(committed)
        if cut is None:
            return
        end = int(round(committed[cut - 1].end_s * SAMPLE_RATE_HZ))
        if end <= self.audio_start:
            return
        self.audio_start = min(end, stop)
        self.trimmed_words = cut
        self.prompt = join_words(committed[:cut])[-_PROMPT_CHARS:]
