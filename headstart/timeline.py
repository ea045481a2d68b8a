"""One timeline of timestamps per turn; every latency figure is derived here and nowhere else.

All marks are readings of the session's injected clock (seconds). The true end of the user's speech
is a mark too: whoever knows it (the demo and the harness know it from the bench data) converts the
audio position to a clock reading with `AudioClockMap` and sets it.

Besides its marks a turn carries typed records, each set by the part of the session that owns it and
None where it did not happen: the head start's outcome (`HeadStartOutcome`, with a `HeldRelease` on a
hit), the EOU service's counters (`EOUCounters`), how its reply was cut off (`Interruption`) and the
user text the turn continues (`Continuation`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


class AudioClockMap:
    """Maps positions in the pushed audio stream (seconds) to the clock reading when they were pushed.

    The session records one point per pushed frame: (audio end of the frame, clock reading). A
    position inside a frame maps to the push time of that frame (the earliest the server could know).
    """

    def __init__(self) -> None:
        self._audio_s: list[float] = []
        self._clock_s: list[float] = []

    def record(self, audio_end_s: float, clock_s: float) -> None:
        self._audio_s.append(audio_end_s)
        self._clock_s.append(clock_s)

    def clock_at(self, audio_s: float) -> float | None:
        """The clock reading when the audio at `audio_s` had been pushed; None if not pushed yet."""
        i = bisect.bisect_left(self._audio_s, audio_s - 1e-9)
        if i >= len(self._audio_s):
            return None
        return self._clock_s[i]


@dataclass(frozen=True)
class HeldRelease:
    """What a held reply had ready when the end of turn released it (a head-start hit)."""

    lead_s: float  # how long before the end of turn the held reply started (rounded to 0.1 ms)
    held_tokens: int  # reply tokens generated before the release
    held_audio_s: float  # reply audio synthesised before the release (rounded to 0.1 ms)


@dataclass(frozen=True)
class HeadStartOutcome:
    """The head start's verdict on a turn at its end, with the session's running counters then.

    `preemptive`: "hit" (a held reply was released: `release` says what it had ready), "miss" (one
    was dropped) or "none" (nothing was held). `hits`, `misses`, `wasted_tokens` count the whole
    session so far (wasted: tokens of dropped held replies)."""

    preemptive: str
    enabled: bool  # the session's head start switch
    hits: int
    misses: int
    wasted_tokens: int
    release: HeldRelease | None = None


@dataclass(frozen=True)
class EOUCounters:
    """The session's running EOU estimate counts when the turn's reply started: estimates computed,
    skipped (user speaking, stale, confirmed work waiting) and the seconds spent computing them
    (rounded to 0.1 ms)."""

    computed: int
    skipped: int
    compute_s: float


@dataclass(frozen=True)
class Interruption:
    """The turn's reply was cut off: why ("barge_in", "new_turn", "client" ...), how much of its audio had played
    (seconds, rounded to 1 ms) and the text of what was heard (what the history keeps)."""

    reason: str
    played_s: float
    heard_text: str


@dataclass(frozen=True)
class Continuation:
    """The turn continues the user message whose reply its speech cut off: `text` is that earlier
    message (a trailing-off mark at the seam dropped), now the start of the turn's transcript."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """The turn's reply came from a tool (headstart/tools/): which one, the arguments it was called
    with, and whether it ran without an error (a failure is answered with a spoken apology)."""

    name: str
    arguments: dict[str, object]
    ok: bool


@dataclass
class TurnTimeline:
    """Clock readings (seconds) of one user turn and its reply; None where the event did not happen."""

    speech_end_at_s: float | None = None  # true end of user speech (known to the demo / harness)
    vad_speech_end_at_s: float | None = None  # the VAD reported the end of speech
    first_partial_at_s: float | None = None
    final_transcript_at_s: float | None = None
    end_of_turn_at_s: float | None = None
    reply_started_at_s: float | None = None  # the LLM was asked for the reply
    first_token_at_s: float | None = None
    last_token_at_s: float | None = None
    num_tokens: int = 0
    tts_first_text_at_s: float | None = None  # the first chunk of text was handed to the synthesiser
    first_audio_at_s: float | None = None  # the first reply audio left the session
    reply_done_at_s: float | None = None
    transcript: str = ""
    asr_confidence: float | None = None  # the final transcript's mean word probability (None: unknown)
    reply: str = ""
    reply_audio_s: float = 0.0
    eou_probability: float | None = None  # the EOU probability the end of turn was decided on
    head_start: HeadStartOutcome | None = None  # set at the end of turn when a reply follows
    preemptive_drops: list[str] = field(default_factory=list)  # why each held reply of the turn was dropped
    eou: EOUCounters | None = None  # set when the turn's reply starts
    interruption: Interruption | None = None
    continuation: Continuation | None = None
    tool: ToolUse | None = None  # set when a tool served the turn (after it ran)

    @staticmethod
    def _since(start: float | None, end: float | None) -> float | None:
        if start is None or end is None:
            return None
        return end - start

    def metrics(self) -> dict[str, float | None]:
        """The figures of the turn in seconds, by their standard names. `speech_end_to_*` and
        `voice_to_voice_s` need the true end of speech (`speech_end_at_s`); `vad_end_to_*` start at the
        VAD's end of speech instead (what a server can know without the client's help)."""
        tpot = None
        if self.num_tokens > 1 and self.first_token_at_s is not None and self.last_token_at_s is not None:
            tpot = (self.last_token_at_s - self.first_token_at_s) / (self.num_tokens - 1)
        return {
            "speech_end_to_final_s": self._since(self.speech_end_at_s, self.final_transcript_at_s),
            "speech_end_to_eot_s": self._since(self.speech_end_at_s, self.end_of_turn_at_s),
            "speech_end_to_first_token_s": self._since(self.speech_end_at_s, self.first_token_at_s),
            "voice_to_voice_s": self._since(self.speech_end_at_s, self.first_audio_at_s),
            "ttft_s": self._since(self.reply_started_at_s, self.first_token_at_s),
            "tpot_s": tpot,
            "tts_ttfa_s": self._since(self.tts_first_text_at_s, self.first_audio_at_s),
            "vad_end_to_final_s": self._since(self.vad_speech_end_at_s, self.final_transcript_at_s),
            "vad_end_to_turn_end_s": self._since(self.vad_speech_end_at_s, self.end_of_turn_at_s),
            "vad_end_to_first_token_s": self._since(self.vad_speech_end_at_s, self.first_token_at_s),
            "vad_end_to_first_audio_s": self._since(self.vad_speech_end_at_s, self.first_audio_at_s),
            "turn_end_to_first_audio_s": self._since(self.end_of_turn_at_s, self.first_audio_at_s),
        }
