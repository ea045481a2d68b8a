"""One timeline of timestamps per turn; every latency figure is derived here and nowhere else.

All marks are readings of the session's injected clock (seconds). The true end of the user's speech
is a mark too: whoever knows it (the demo and the harness know it from the bench data) converts the
audio position to a clock reading with `AudioClockMap` and sets it.
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
    reply: str = ""
    reply_audio_s: float = 0.0
    extra: dict = field(default_factory=dict)

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
