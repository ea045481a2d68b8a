"""The small set of frozen events that flow between the stages.

Times named `audio_*_s` are positions in the user's audio stream (seconds since the session's first
sample); times named `*_at_s` are readings of the session's injected clock.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """The VAD heard speech begin at `audio_s` in the stream."""

    audio_s: float


@dataclass(frozen=True, slots=True)
class SpeechEnded:
    """The VAD heard speech stop at `audio_s` (the end of the last voiced window, not the decision time)."""

    audio_s: float


@dataclass(frozen=True, slots=True)
class PartialTranscript:
    """A streaming ASR hypothesis: `committed` text is stable (LocalAgreement), `pending` may still change.
    `confidence`: the recogniser's mean word probability in [0, 1] (None: unknown or no words)."""

    committed: str
    pending: str
    audio_end_s: float
    confidence: float | None = None

    @property
    def text(self) -> str:
        return " ".join(part for part in (self.committed, self.pending) if part)


@dataclass(frozen=True, slots=True)
class FinalTranscript:
    """The transcript of a whole user utterance (possibly empty: noise or silence). `confidence`: the
    recogniser's mean word probability in [0, 1] (None: unknown or no words)."""

    text: str
    audio_end_s: float
    confidence: float | None = None


@dataclass(frozen=True, slots=True)
class EndOfTurn:
    """The endpointer decided the user's turn is over; `audio_s` is where in the stream it decided."""

    audio_s: float
    eou_probability: float = 1.0


@dataclass(frozen=True, slots=True)
class TokenDelta:
    """New reply text from the LLM: `text` is printable (never a partial UTF-8 character).
    `reply_id`: the session's reply it belongs to ("" as the LLM stream makes it; headstart/session/reply.py
    sets it)."""

    text: str
    token_ids: tuple[int, ...] = ()
    reply_id: str = ""


@dataclass(frozen=True, slots=True)
class ReplyDone:
    """The LLM finished a reply. `reason` is one of "eos", "max_tokens", "stop", "cancelled".
    `reply_id` as for `TokenDelta`."""

    text: str
    num_tokens: int
    reason: str
    reply_id: str = ""
