"""A session's events as the frames the server sends: JSON text through `encode_server_event`, reply
audio as binary PCM16."""

from __future__ import annotations

from headstart.audio import float32_to_pcm16
from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded, SpeechStarted, TokenDelta
from headstart.server import protocol as wire
from headstart.server.turn_metrics import turn_metrics
from headstart.session.timers import TimerFired
from headstart.session.reply import (
    ReplyAudio,
    ReplyAudioStart,
    ReplyInterrupted,
    ReplyPaused,
    ReplyResumed,
    ReplyStarted,
    ReplyUnspeakable,
    ToolCalled,
    ToolResult,
    TurnCompleted,
)


def session_frames(event: object) -> list[str | bytes]:
    """The frames of one event a `Session` yields, in order: none for the events the wire does not
    carry (the LLM's own ReplyDone: `reply.done` comes once the reply's audio has left)."""
    if isinstance(event, ReplyAudio):
        return [float32_to_pcm16(event.frame.samples)]
    typed = _wire_events(event)
    return [wire.encode_server_event(e) for e in typed]


def _wire_events(event: object) -> list[wire.ServerEvent]:
    ms = wire.ms
    if isinstance(event, TokenDelta):
        return [wire.ReplyTextDelta(reply_id=event.reply_id, text=event.text)]
    if isinstance(event, SpeechStarted):
        return [wire.VADSpeechStarted(audio_ms=ms(event.audio_s))]
    if isinstance(event, SpeechEnded):
        return [wire.VADSpeechStopped(audio_ms=ms(event.audio_s))]
    if isinstance(event, PartialTranscript):
        return [wire.TranscriptPartial(text=event.text, committed=event.committed, pending=event.pending,
                                       audio_ms=ms(event.audio_end_s))]
    if isinstance(event, FinalTranscript):
        return [wire.TranscriptFinal(text=event.text, audio_ms=ms(event.audio_end_s))]
    if isinstance(event, EndOfTurn):
        return [wire.TurnEnd(audio_ms=ms(event.audio_s), eou_probability=event.eou_probability)]
    if isinstance(event, ReplyStarted):
        return [wire.ReplyStarted(reply_id=event.reply_id, transcript=event.transcript)]
    if isinstance(event, ReplyAudioStart):
        return [wire.ReplyAudioStart(reply_id=event.reply_id, sample_rate=event.sample_rate,
                                     format=wire.INPUT_FORMAT)]
    if isinstance(event, ReplyPaused):
        return [wire.ReplyPaused(reply_id=event.reply_id)]
    if isinstance(event, ReplyResumed):
        return [wire.ReplyResumed(reply_id=event.reply_id)]
    if isinstance(event, ReplyUnspeakable):
        return [wire.ReplyUnspeakable(reply_id=event.reply_id, text=event.text, spoken=event.spoken)]
    if isinstance(event, ReplyInterrupted):
        return [wire.ReplyInterrupted(reply_id=event.reply_id, heard_text=event.heard_text,
                                      played_ms=ms(event.played_s), reason=event.reason, flush=True)]
    if isinstance(event, TurnCompleted):
        t = event.timeline
        out: list[wire.ServerEvent] = []
        if not event.interrupted:
            out.append(wire.ReplyDone(reply_id=event.reply_id, text=t.reply, audio_ms=ms(t.reply_audio_s)))
        out.append(turn_metrics(t, event.reply_id, event.interrupted))
        return out
    if isinstance(event, ToolCalled):
        return [wire.ToolCalled(reply_id=event.reply_id, call_id=event.call_id, name=event.name,
                                arguments={k: wire.short_json(v) for k, v in event.arguments.items()})]
    if isinstance(event, ToolResult):
        return [wire.ToolResult(reply_id=event.reply_id, call_id=event.call_id, name=event.name, ok=event.ok,
                                result=wire.short_json(event.value) if event.ok else None,
                                error=None if event.ok else (event.error or "the tool failed"),
                                duration_ms=ms(event.duration_s))]
    if isinstance(event, TimerFired):
        return [wire.TimerFired(timer_id=event.timer_id, kind=event.kind, label=event.label, name=event.name,
                                text=event.text)]
    return []
