"""The assistant's reply as the session sees it: the events it produces, the cancellable `Reply`
handle (LLM stream, TTS stream, audio leaving) and the text a listener heard of it."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from headstart.audio import AudioFrame
from headstart.timeline import TurnTimeline

# -- session events beyond the stages' own ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ReplyStarted:
    """The LLM was asked for reply `reply_id` to `transcript`."""

    reply_id: str
    transcript: str


@dataclass(frozen=True, slots=True)
class ReplyAudioStart:
    """Reply audio follows, float32 mono at `sample_rate` Hz (PCM16 on the wire)."""

    reply_id: str
    sample_rate: int


@dataclass(frozen=True, slots=True)
class ReplyAudio:
    """A block of the assistant's speech, ready to send or play."""

    frame: AudioFrame
    reply_id: str = ""


@dataclass(frozen=True, slots=True)
class ReplyPaused:
    """Possible barge-in: the client should pause playback of `reply_id` (keep its buffer)."""

    reply_id: str


@dataclass(frozen=True, slots=True)
class ReplyResumed:
    """No words came: the client should resume playback of `reply_id`."""

    reply_id: str


@dataclass(frozen=True, slots=True)
class ReplyInterrupted:
    """Reply `reply_id` was stopped: the client should flush its playback buffer. `heard_text` is what
    the history keeps (the text played up to `played_s` seconds of its audio)."""

    reply_id: str
    heard_text: str
    played_s: float
    reason: str  # "barge_in", "client", "new_turn", "reset"


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """A user turn and its reply are over; `timeline` holds every timestamp of the turn."""

    timeline: TurnTimeline
    reply_id: str = ""
    interrupted: bool = False


def heard_text(chunks: list[tuple[str, float]], played_s: float) -> str:
    """The text of a reply the listener heard: chunks (text, audio seconds) in order, played up to
    `played_s`. Whole chunks before the position, then the words of the chunk being played in
    proportion to its audio played (rounded down to whole words)."""
    out: list[str] = []
    start = 0.0
    for text, duration_s in chunks:
        # a chunk with no audio yet (still synthesising when the reply stopped) was heard only if the
        # playback went past where it starts; one that made no audio at all ("...") is passed over
        if played_s >= start + duration_s - 1e-6 and (duration_s > 0 or played_s > start):
            out.append(text.strip())
            start += duration_s
            continue
        words = text.split()
        fraction = (played_s - start) / duration_s if duration_s > 0 else 0.0
        out.append(" ".join(words[: int(math.floor(max(0.0, fraction) * len(words)))]))
        break
    return " ".join(part for part in out if part)



@dataclass(eq=False)
class Reply:
    """One cancellable assistant turn: the LLM stream, the TTS stream and the audio leaving. A held
    (preemptive) reply keeps its events in `outbox` and its audio unsent until `released` is set."""

    id: str
    turn: TurnTimeline
    task: asyncio.Task | None = None
    stream: object | None = None  # ReplyStream
    tts: object | None = None  # TTSStream
    text: list[str] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)  # chunk texts handed to the synthesiser, in order
    audio_s: float = 0.0
    resume: asyncio.Event = field(default_factory=asyncio.Event)
    history_index: int | None = None  # where its assistant message is, once written
    finished: bool = False  # all its audio has left
    interrupted: bool = False
    # a preemptive reply is *held*: generated and synthesised ahead, nothing leaves until released
    held: bool = False
    released: asyncio.Event = field(default_factory=asyncio.Event)
    outbox: list[object] = field(default_factory=list)  # its events while held, in order
    hypothesis: str = ""  # the user text a held reply is conditioned on
    messages: list[dict[str, str]] | None = None  # the chat before that user text, at its start
    released_at_s: float | None = None
    llm_pending: bool = False  # counted in Components.confirmed_pending until its LLM work starts

    @property
    def num_generated_tokens(self) -> int:
        """Tokens its LLM stream has generated so far (read from the stream's stats)."""
        stats = getattr(self.stream, "stats", None)
        return len(stats.token_times_s) if stats is not None else 0

    def spans(self) -> list[tuple[str, float]]:
        """(chunk text, audio seconds) for the heard-text computation; the chunk still being
        synthesised gets the audio sent beyond the finished ones."""
        timings = list(getattr(self.tts, "timings", []) or [])
        spans: list[tuple[str, float]] = []
        used = 0.0
        t = 0
        for text in self.chunks:
            if t < len(timings) and timings[t].text == text:
                spans.append((text, timings[t].audio_s))
                used += timings[t].audio_s
                t += 1
            else:
                spans.append((text, max(0.0, self.audio_s - used)))
                break
        return spans
