"""The wire protocol of `headstart serve`, both halves: JSON text frames with a `type`, PCM16 binary frames.

docs/protocol.md describes it for a client author. Here each message is a frozen dataclass whose
fields are the JSON object's members, in order (`type` comes first, from the class):

    client -> server   `ClientMessage`s: SessionStart, InputCommit, InputClear, PlaybackPosition,
                       ReplyInterrupt, SessionReset, SessionEnd; binary frames of PCM16 mono 16 kHz audio
                       (one byte stream: `PCM16Stream` joins a sample split across frames)
    server -> client   `ServerEvent`s: SessionStarted, VADSpeechStarted, VADSpeechStopped,
                       TranscriptPartial, TranscriptFinal, TurnEnd, ReplyStarted, ReplyTextDelta,
                       ReplyAudioStart (then binary PCM16 frames at its `sample_rate`), ReplyPaused,
                       ReplyResumed, ReplyDone, ReplyUnspeakable, ReplyInterrupted, MetricsTurn,
                       TimerFired, ToolCalled, ToolResult, SessionEnding, ErrorEvent

One encoder each way: `encode_client_message` (clients), `encode_server_event` (the server); one
checked parser each way: `parse_client_text` (the server), `decode_server_event` (clients). Times on
the wire are milliseconds (`*_ms`, from seconds by `ms`); `audio_ms` is a position in the user's
audio stream. Parsing never raises anything but `ProtocolError`, whose `code` goes into the `error`
event.
"""

from __future__ import annotations

import json
import math
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from headstart.audio import float32_to_pcm16
from headstart.server.wire_json import FLATTEN, OMIT_IF_NONE, from_fields, to_fields

PROTOCOL_VERSION = 1
WS_PATH = "/ws"
INPUT_SAMPLE_RATE_HZ = 16_000
INPUT_FORMAT = "pcm16"
INPUT_FRAME_SAMPLES = 320  # 20 ms at 16 kHz (640 bytes): the recommended frame; any whole samples do
MAX_REPLY_ID_CHARS = 64

# Close codes the server uses (RFC 6455 numbers).
CLOSE_ENDED = 1000  # after `session.end`
CLOSE_GOING_AWAY = 1001  # the server is shutting down (after `session.ending`)
CLOSE_POLICY = 1008  # after `error` "slow_consumer" or "rate_limited"; a websocket on a path other than WS_PATH
CLOSE_TOO_BIG = 1009  # a frame over the server's `max_message_bytes`
CLOSE_FULL = 1013  # every session slot is taken (the handshake normally answers 503 first)


class ProtocolError(ValueError):
    """A frame the protocol does not accept.

    Attributes:
        code: a stable machine-readable reason: "malformed_json", "not_an_object", "missing_type",
            "unknown_type", "invalid_field", "unsupported_rate", "unsupported_format",
            "odd_byte_length" (`parse_audio` only: the server joins split samples, `PCM16Stream`),
            "unexpected_binary", "not_started", "already_started", "rate_limited", "busy".
        message: the human explanation (it names the field and what was expected).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def ms(seconds: float | None) -> float | None:
    """Seconds -> milliseconds for the wire (rounded to 0.1 ms); None stays None."""
    return None if seconds is None else round(seconds * 1000.0, 1)


# -- client -> server ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientMessage:
    """A client text frame. `fields` are its members besides `type` (the ones given)."""

    type: ClassVar[str]

    @property
    def fields(self) -> dict[str, Any]:
        return to_fields(self)

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)


@dataclass(frozen=True, slots=True)
class SessionStart(ClientMessage):
    """Start the session; audio before it is refused. Both fields optional; any other than 16000 Hz /
    "pcm16" is refused ("unsupported_rate", "unsupported_format")."""

    type: ClassVar[str] = "session.start"
    sample_rate: int | None = field(default=None, metadata=OMIT_IF_NONE)  # Hz
    format: str | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, slots=True)
class InputCommit(ClientMessage):
    """The user ends the turn now (push-to-talk released); the audio stream goes on."""

    type: ClassVar[str] = "input.commit"


@dataclass(frozen=True, slots=True)
class InputClear(ClientMessage):
    """Drop the user audio of the turn in progress."""

    type: ClassVar[str] = "input.clear"


@dataclass(frozen=True, slots=True)
class PlaybackPosition(ClientMessage):
    """How much of reply `reply_id`'s audio the client has played (ms from the reply's first sample)."""

    type: ClassVar[str] = "playback.position"
    reply_id: str
    position_ms: float


@dataclass(frozen=True, slots=True)
class ReplyInterrupt(ClientMessage):
    """Stop the reply in progress (a stop button); with `reply_id` only that reply: a stale or unknown
    id interrupts nothing and is answered with `error` "stale_reply"."""

    type: ClassVar[str] = "reply.interrupt"
    reply_id: str | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, slots=True)
class SessionReset(ClientMessage):
    """Forget the conversation (history) and any turn in progress."""

    type: ClassVar[str] = "session.reset"


@dataclass(frozen=True, slots=True)
class SessionEnd(ClientMessage):
    """End the session: the server closes the connection (1000)."""

    type: ClassVar[str] = "session.end"


CLIENT_MESSAGES: dict[str, type[ClientMessage]] = {cls.type: cls for cls in (
    SessionStart, InputCommit, InputClear, PlaybackPosition, ReplyInterrupt, SessionReset, SessionEnd)}
CLIENT_TYPES = frozenset(CLIENT_MESSAGES)


def encode_client_message(message: ClientMessage) -> str:
    """One client -> server JSON text frame. ValueError for a number that is not finite."""
    return json.dumps({"type": message.type, **to_fields(message)}, ensure_ascii=False, allow_nan=False)


def encode_audio(samples: np.ndarray) -> bytes:
    """float32 samples (num_samples,) in [-1, 1] at 16 kHz -> one binary frame of little-endian PCM16
    (values outside are clipped)."""
    return float32_to_pcm16(samples)


def parse_client_text(text: str | bytes) -> ClientMessage:
    """Parse and check one client text frame; members the message does not have are dropped.

    Raises:
        ProtocolError: malformed JSON, not an object, no/unknown `type`, a field of the wrong type or
            value (the message names the field and what was expected), a declared sample rate other
            than 16000 or a format other than "pcm16".
    """
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise ProtocolError("malformed_json", f"text frames must be one JSON object: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError("not_an_object", f"a text frame must be a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    if kind is None:
        raise ProtocolError("missing_type", 'a JSON event needs a "type" field')
    if not isinstance(kind, str) or kind not in CLIENT_TYPES:
        shown = kind if isinstance(kind, str) and len(kind) <= 64 else type(kind).__name__
        raise ProtocolError(
            "unknown_type", f"unknown event type {shown!r}; expected one of {', '.join(sorted(CLIENT_TYPES))}"
        )
    cls = CLIENT_MESSAGES[kind]
    checked: dict[str, Any] = {}
    for name, (types, required) in _client_fields(cls).items():
        if name not in data:
            if required:
                raise ProtocolError("invalid_field", f"{kind} needs the field {name!r}")
            continue
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, types):
            wanted = " or ".join(t.__name__ for t in types)
            raise ProtocolError(
                "invalid_field", f"{kind}.{name} must be {wanted}, got {type(value).__name__}"
            )
        checked[name] = value
    _check_values(kind, checked)
    return cls(**checked)


def _client_fields(cls: type[ClientMessage]) -> dict[str, tuple[tuple[type, ...], bool]]:
    """name -> (the JSON types accepted, required) of a client message's fields: a `float` field takes
    any JSON number, an `X | None` field is optional."""
    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[tuple[type, ...], bool]] = {}
    for f in fields(cls):
        accepted = tuple(t for t in typing.get_args(hints[f.name]) or (hints[f.name],) if t is not type(None))
        if float in accepted:
            accepted = (int, float)
        out[f.name] = (accepted, f.default is MISSING and f.default_factory is MISSING)
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_values(kind: str, fields: dict[str, Any]) -> None:
    if kind == "session.start":
        rate = fields.get("sample_rate", INPUT_SAMPLE_RATE_HZ)
        if rate != INPUT_SAMPLE_RATE_HZ:
            raise ProtocolError(
                "unsupported_rate",
                f"audio must be sent at {INPUT_SAMPLE_RATE_HZ} Hz, the session was declared at {str(rate)[:32]} Hz; "
                "resample on the client",
            )
        fmt = fields.get("format", INPUT_FORMAT)
        if fmt != INPUT_FORMAT:
            raise ProtocolError("unsupported_format", f"audio format must be {INPUT_FORMAT!r}, got {fmt[:32]!r}")
    elif kind == "playback.position":
        position = _as_float(kind, "position_ms", fields["position_ms"])
        if not math.isfinite(position) or position < 0:
            raise ProtocolError("invalid_field", f"playback.position.position_ms must be a finite number >= 0, got {position}")
        fields["position_ms"] = position
    for name in ("reply_id",):
        value = fields.get(name)
        if value is not None and (not value or len(value) > MAX_REPLY_ID_CHARS):
            raise ProtocolError("invalid_field", f"{kind}.reply_id must be 1..{MAX_REPLY_ID_CHARS} characters")


def _as_float(kind: str, name: str, value: int | float) -> float:
    """A JSON number as a float; an integer too large for one (|n| >= ~1.8e308: JSON allows any number
    of digits, Python's parser up to 4300) is an `invalid_field`, not the OverflowError of float()."""
    try:
        return float(value)
    except OverflowError:
        digits = len(str(abs(value)))
        raise ProtocolError("invalid_field", f"{kind}.{name} must be a finite number, got an integer of {digits} digits") from None


def parse_audio(data: bytes | bytearray | memoryview) -> np.ndarray:
    """One binary frame of PCM16 -> float32 samples (num_samples,), scaled by 1/32768.

    Raises:
        ProtocolError: "odd_byte_length" for a frame that is not whole 2-byte samples.
    """
    if len(data) % 2:
        raise ProtocolError(
            "odd_byte_length",
            f"binary frames must be PCM16 (whole 2-byte samples), got {len(data)} bytes",
        )
    return np.frombuffer(data, dtype="<i2").astype(np.float32) * np.float32(1.0 / 32768.0)


class PCM16Stream:
    """One connection's audio as the byte stream it is, however the client cuts it into frames: a frame
    of an odd number of bytes leaves its last byte here, and that byte becomes the low byte of the next
    frame's first sample (a client that cuts a buffer at arbitrary byte counts loses nothing).

    `pending_bytes` is 0 or 1: the half sample held back. A byte still held when the connection ends is
    half a sample (31 us): dropped without an error."""

    def __init__(self) -> None:
        self._carry = b""

    @property
    def pending_bytes(self) -> int:
        return len(self._carry)

    def feed(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """The whole samples the stream holds after `data`: float32 (num_samples,) scaled by 1/32768
        (num_samples may be 0: a 1-byte frame). Never raises."""
        if self._carry:
            data = self._carry + bytes(data)
        cut = len(data) - len(data) % 2
        self._carry = bytes(data[cut:])
        return parse_audio(memoryview(data)[:cut])


def looks_like_json(data: bytes) -> bool:
    """Whether a binary frame holds a JSON object (a client that sent an event as binary: the server
    answers "unexpected_binary" instead of playing it as audio)."""
    if data[:1] != b"{" or data[-1:] != b"}":
        return False
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


# -- server -> client ---------------------------------------------------------------------------------
# Every field has a default: what a client reads when a server leaves the member out.


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """A server text frame."""

    type: ClassVar[str]


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """An audio stream's format: `sample_rate` in Hz (0: the server has no voice), `format` "pcm16"."""

    sample_rate: int = 0
    format: str = INPUT_FORMAT


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """The largest frame accepted (bytes) and how fast audio may come: `audio_burst_ms` of audio at
    once, refilled at `max_audio_speed` x real time (a client beyond that gets `error` "rate_limited"
    and a close with 1008)."""

    max_message_bytes: int = 0
    max_audio_speed: float = 0.0
    audio_burst_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class LLMInfo:
    """The session's LLM: `model`; `precision` ("float32+int8", "bfloat16", ..., "remote", "unchecked");
    for a local model checked at load, `exact` (the exactness self-test passed), `speculative` (the
    drafter in use, "none" when off) and `speculative_off` (why it is off, when the self-test turned it off)."""

    model: str = ""
    precision: str = ""
    exact: bool | None = field(default=None, metadata=OMIT_IF_NONE)
    speculative: str | None = field(default=None, metadata=OMIT_IF_NONE)
    speculative_off: str | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, slots=True)
class SessionStarted(ServerEvent):
    """The session is ready. `input`: the audio the server takes; `output`: the reply audio it sends."""

    type: ClassVar[str] = "session.started"
    protocol: int = PROTOCOL_VERSION
    session_id: str = ""
    input: AudioFormat = AudioFormat(INPUT_SAMPLE_RATE_HZ)
    output: AudioFormat = AudioFormat()
    limits: SessionLimits = SessionLimits()
    llm: LLMInfo = LLMInfo()


@dataclass(frozen=True, slots=True)
class VADSpeechStarted(ServerEvent):
    """The VAD heard the user's speech start at `audio_ms` in the user's audio stream."""

    type: ClassVar[str] = "vad.speech_started"
    audio_ms: float | None = None


@dataclass(frozen=True, slots=True)
class VADSpeechStopped(ServerEvent):
    """The VAD heard the user's speech stop at `audio_ms` (the end of the last voiced window)."""

    type: ClassVar[str] = "vad.speech_stopped"
    audio_ms: float | None = None


@dataclass(frozen=True, slots=True)
class TranscriptPartial(ServerEvent):
    """A streaming ASR hypothesis up to `audio_ms`: `text` = `committed` (stable, only grows) + `pending`."""

    type: ClassVar[str] = "transcript.partial"
    text: str = ""
    committed: str = ""
    pending: str = ""
    audio_ms: float | None = None


@dataclass(frozen=True, slots=True)
class TranscriptFinal(ServerEvent):
    """The utterance's transcript up to `audio_ms` ("" = no words: no turn); a later final before
    `turn.end` replaces it (the user paused and went on)."""

    type: ClassVar[str] = "transcript.final"
    text: str = ""
    audio_ms: float | None = None


@dataclass(frozen=True, slots=True)
class TurnEnd(ServerEvent):
    """The user's turn is over at `audio_ms`, decided on end-of-utterance probability
    `eou_probability` (1.0: none known); a reply follows."""

    type: ClassVar[str] = "turn.end"
    audio_ms: float | None = None
    eou_probability: float | None = None


@dataclass(frozen=True, slots=True)
class ReplyStarted(ServerEvent):
    """The LLM is answering `transcript` with reply `reply_id`."""

    type: ClassVar[str] = "reply.started"
    reply_id: str = ""
    transcript: str = ""


@dataclass(frozen=True, slots=True)
class ReplyTextDelta(ServerEvent):
    """Reply text as it is generated (whole characters)."""

    type: ClassVar[str] = "reply.text.delta"
    reply_id: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class ReplyAudioStart(ServerEvent):
    """Binary frames of this reply follow: PCM16 mono at `sample_rate` Hz."""

    type: ClassVar[str] = "reply.audio.start"
    reply_id: str = ""
    sample_rate: int = 0
    format: str = INPUT_FORMAT


@dataclass(frozen=True, slots=True)
class ReplyPaused(ServerEvent):
    """The user may be barging in: pause playback, keep the buffer."""

    type: ClassVar[str] = "reply.paused"
    reply_id: str = ""


@dataclass(frozen=True, slots=True)
class ReplyResumed(ServerEvent):
    """It was not a barge-in: resume playback."""

    type: ClassVar[str] = "reply.resumed"
    reply_id: str = ""


@dataclass(frozen=True, slots=True)
class ReplyDone(ServerEvent):
    """All of the reply's audio has been sent: `text` the whole reply, `audio_ms` its audio's length."""

    type: ClassVar[str] = "reply.done"
    reply_id: str = ""
    text: str = ""
    audio_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ReplyUnspeakable(ServerEvent):
    """Reply `reply_id`'s text (`text`, as the LLM wrote it) held words but none the voice can speak
    (another script): its audio says `spoken` instead (a short fallback sentence). Comes before its
    `reply.done`; the history keeps `text`."""

    type: ClassVar[str] = "reply.unspeakable"
    reply_id: str = ""
    text: str = ""
    spoken: str = ""


@dataclass(frozen=True, slots=True)
class ReplyInterrupted(ServerEvent):
    """The reply stopped after `played_ms` of its audio: flush the playback buffer (`flush` is always
    true). The history keeps `heard_text`. `reason`: "barge_in", "client", "new_turn", "reset"."""

    type: ClassVar[str] = "reply.interrupted"
    reply_id: str = ""
    heard_text: str = ""
    played_ms: float | None = None
    reason: str = ""
    flush: bool = True


@dataclass(frozen=True, slots=True)
class TurnLatencies:
    """A turn's latency figures in ms (None where it did not happen). `speech_end_to_*` and
    `voice_to_voice_ms` need the true end of speech, which a server learns only from a harness;
    `vad_end_to_*` start at the VAD's end of speech."""

    speech_end_to_final_ms: float | None = None
    speech_end_to_eot_ms: float | None = None
    speech_end_to_first_token_ms: float | None = None
    voice_to_voice_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    tts_ttfa_ms: float | None = None
    vad_end_to_final_ms: float | None = None
    vad_end_to_turn_end_ms: float | None = None
    vad_end_to_first_token_ms: float | None = None
    vad_end_to_first_audio_ms: float | None = None
    turn_end_to_first_audio_ms: float | None = None


@dataclass(frozen=True, slots=True)
class HeldReply:
    """A head-start hit: the held reply started `preemptive_lead_ms` before the end of turn, with
    `held_tokens` tokens and `held_audio_ms` of audio ready when the turn ended."""

    preemptive_lead_ms: float | None = None
    held_tokens: int = 0
    held_audio_ms: float | None = None


@dataclass(frozen=True, slots=True)
class HeadStartFigures:
    """The head start's outcome for a turn: `preemptive` "hit" (a held reply was released), "miss" (one
    was dropped) or "none"; the session's running `preemptive_hits` / `_misses` / `_wasted_tokens`; the
    EOU probability the end of turn was decided on (1.0: none known) and the session's running count of
    EOU estimates computed / skipped and their compute time (ms); `held` on a hit."""

    preemptive: str = "none"
    preemptive_hits: int = 0
    preemptive_misses: int = 0
    preemptive_wasted_tokens: int = 0
    eou_probability: float | None = None
    eou_computed: int = 0
    eou_skipped: int = 0
    eou_compute_ms: float | None = 0.0
    held: HeldReply | None = field(default=None, metadata=FLATTEN)


@dataclass(frozen=True, slots=True)
class MetricsTurn(ServerEvent):
    """Every latency figure of a finished turn and the head start's outcome. On the wire the members of
    `latencies` and `head_start` sit in the event itself."""

    type: ClassVar[str] = "metrics.turn"
    reply_id: str = ""
    interrupted: bool = False
    transcript: str = ""
    reply: str = ""
    num_tokens: int = 0
    reply_audio_ms: float | None = None
    latencies: TurnLatencies = field(default=TurnLatencies(), metadata=FLATTEN)
    head_start: HeadStartFigures = field(default=HeadStartFigures(), metadata=FLATTEN)


@dataclass(frozen=True, slots=True)
class TimerFired(ServerEvent):
    """A timer, alarm or reminder went off (headstart/tools/): `kind` "timer", "alarm" or "reminder",
    `label` ("ten minute", "7:30 AM", a reminder's task as said back: "call your mom", "" for a reminder
    without one), `name` ("pasta", or "" for an unnamed timer, an alarm or a reminder), `text` the
    announcement the agent speaks ("Reminder: call your mom."), which follows as a reply of its own
    (reply.started ... reply.done) with no user turn before it."""

    type: ClassVar[str] = "timer.fired"
    timer_id: int = 0
    kind: str = ""
    label: str = ""
    name: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class SessionEnding(ServerEvent):
    """The server is going away (`reason` "shutdown": it was told to stop). From now on it takes no
    audio and starts no turn; a reply in progress goes on to its `reply.done` if it can within
    `drain_ms`, then the connection closes with 1001 (at once when no reply is in progress)."""

    type: ClassVar[str] = "session.ending"
    reason: str = ""
    drain_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ToolCalled(ServerEvent):
    """Reply `reply_id` runs tool `name` now with `arguments` (a JSON object); `call_id` ("c1", ...) names
    the run in its `tool.result`. Sent only once the end of turn has released the reply: never for a
    reply prepared ahead and dropped."""

    type: ClassVar[str] = "tool.call"
    reply_id: str = ""
    call_id: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResult(ServerEvent):
    """Tool call `call_id` is over after `duration_ms`: `ok` and its `result` (a short JSON value, for the
    built-in tools the spoken answer), or not `ok` (it raised or timed out; the reply speaks an apology)
    with the reason in `error` (left out when ok). Every `tool.call` gets one, even when its reply
    was cut off meanwhile."""

    type: ClassVar[str] = "tool.result"
    reply_id: str = ""
    call_id: str = ""
    name: str = ""
    ok: bool = False
    result: Any = None
    error: str | None = field(default=None, metadata=OMIT_IF_NONE)
    duration_ms: float | None = None


MAX_VALUE_CHARS = 200  # a tool's result on the wire is a short summary, not a payload


def short_json(value: Any, max_chars: int = MAX_VALUE_CHARS) -> Any:
    """`value` as a short JSON value: None, bool, int and finite floats as they are, strings up to
    `max_chars` characters (longer ones cut, ending in "…"), lists and dicts (keys as strings) of those
    while their JSON stays within `max_chars` characters, anything else (or larger) as its `str`, cut
    the same way. Never raises and never gives NaN or infinity (the wire refuses them)."""

    def cut(text: str) -> str:
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"

    def plain(v: Any, depth: int) -> Any:
        if v is None or isinstance(v, bool | int):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else str(v)
        if isinstance(v, str):
            return cut(v)
        if depth < 3 and isinstance(v, list | tuple):
            return [plain(x, depth + 1) for x in v]
        if depth < 3 and isinstance(v, dict):
            return {str(k): plain(x, depth + 1) for k, x in v.items()}
        raise TypeError

    try:
        out = plain(value, 0)
        if not isinstance(out, list | dict) or len(json.dumps(out, ensure_ascii=False)) <= max_chars:
            return out
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return cut(str(value))
    except Exception:  # noqa: BLE001 - a value whose str() fails is still reported
        return cut(f"<{type(value).__name__}>")


@dataclass(frozen=True, slots=True)
class ErrorEvent(ServerEvent):
    """A bad frame or a failed stage; the session goes on (except after "slow_consumer",
    "rate_limited" and a failed session start: then the connection closes). `code`: ProtocolError's
    codes, "bad_audio", "stale_reply", "internal", "slow_consumer", "llm_unavailable", "llm_rejected",
    "llm_broken", "llm_failed", "tool_failed"."""

    type: ClassVar[str] = "error"
    code: str = ""
    message: str = ""


SERVER_EVENTS: dict[str, type[ServerEvent]] = {cls.type: cls for cls in (
    SessionStarted, VADSpeechStarted, VADSpeechStopped, TranscriptPartial, TranscriptFinal, TurnEnd,
    ReplyStarted, ReplyTextDelta, ReplyAudioStart, ReplyPaused, ReplyResumed, ReplyDone, ReplyUnspeakable,
    ReplyInterrupted, MetricsTurn, TimerFired, ToolCalled, ToolResult, SessionEnding, ErrorEvent)}
SERVER_TYPES = frozenset(SERVER_EVENTS)


def encode_server_event(event: ServerEvent) -> str:
    """One server -> client JSON text frame. ValueError for a number that is not finite."""
    return server_event(event.type, **to_fields(event))


def server_event(kind: str, /, **fields: Any) -> str:
    """One server -> client JSON text frame from its type and members, unchecked against the event's
    fields (`encode_server_event` is the typed form). ValueError for a type not in `SERVER_TYPES` or a
    number that is not finite. (`kind` is positional-only: `timer.fired` has a member named "kind".)"""
    if kind not in SERVER_TYPES:
        raise ValueError(f"not a server event type: {kind!r}")
    return json.dumps({"type": kind, **fields}, ensure_ascii=False, allow_nan=False)


def error_event(code: str, message: str) -> str:
    """The `error` event's frame."""
    return encode_server_event(ErrorEvent(code=code, message=message))


def event_fields(event: ServerEvent) -> dict[str, Any]:
    """An event as its JSON object (`type` first), as the server sends it."""
    return {"type": event.type, **to_fields(event)}


def decode_server_event(text: str | bytes) -> ServerEvent:
    """A server text frame as its typed event: members it does not know are ignored, members it lacks
    take their defaults, values are taken as sent.

    Raises:
        ProtocolError: malformed JSON, not an object, or a `type` that is not a server event
            ("unknown_type": a newer server's event, which a client may skip).
    """
    try:
        data = json.loads(text)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise ProtocolError("malformed_json", f"a server frame is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError("not_an_object", f"a server frame must be a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    cls = SERVER_EVENTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError("unknown_type", f"not a server event type: {str(kind)[:64]!r}")
    try:
        return from_fields(cls, data)
    except TypeError as exc:  # a nested member that is not an object
        raise ProtocolError("invalid_field", f"{kind}: {exc}") from None
