"""The wire protocol of `headstart serve`: JSON text events with a `type`, and PCM16 binary frames.

Client -> server
    binary frames: little-endian PCM16 mono at 16 kHz, any whole number of samples (20 ms = 640 bytes
    recommended).
    text frames, one JSON object each:
        {"type": "session.start", "sample_rate": 16000, "format": "pcm16"}   (both fields optional)
        {"type": "input.commit"}          the user ends the turn now (push-to-talk released)
        {"type": "input.clear"}           drop the user audio of the turn in progress
        {"type": "playback.position", "reply_id": "r1", "position_ms": 1234.5}
                                          how much of reply r1's audio the client has played
        {"type": "reply.interrupt"}       stop the current reply (a stop button); with "reply_id" only
                                          that reply: a stale or unknown id interrupts nothing and gets
                                          an `error` event with code "stale_reply"
        {"type": "session.reset"}         forget the conversation (history) and any turn in progress
        {"type": "session.end"}           the server closes the connection (1000)

Server -> client: `session.started`, `vad.speech_started`, `vad.speech_stopped`, `transcript.partial`,
`transcript.final`, `turn.end`, `reply.started`, `reply.text.delta`, `reply.audio.start` (then binary
PCM16 frames at its `sample_rate`), `reply.paused`, `reply.resumed`, `reply.done`,
`reply.interrupted`, `metrics.turn`, `timer.fired` (a timer or alarm went off; the agent's announcement
follows as a reply), `error`. Builders for each are below (`server_event`); README.md
("Protocol") documents every field.

Parsing never raises anything but `ProtocolError`, whose `code` goes into the `error` event.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

PROTOCOL_VERSION = 1
INPUT_SAMPLE_RATE_HZ = 16_000
INPUT_FORMAT = "pcm16"
MAX_REPLY_ID_CHARS = 64

CLIENT_TYPES = frozenset({
    "session.start", "input.commit", "input.clear", "playback.position", "reply.interrupt",
    "session.reset", "session.end",
})
SERVER_TYPES = frozenset({
    "session.started", "vad.speech_started", "vad.speech_stopped", "transcript.partial",
    "transcript.final", "turn.end", "reply.started", "reply.text.delta", "reply.audio.start",
    "reply.paused", "reply.resumed", "reply.done", "reply.interrupted", "metrics.turn", "timer.fired", "error",
})

# Fields each client message may carry: name -> (accepted python types, required).
_FIELDS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "session.start": {"sample_rate": ((int,), False), "format": ((str,), False)},
    "input.commit": {},
    "input.clear": {},
    "playback.position": {"reply_id": ((str,), True), "position_ms": ((int, float), True)},
    "reply.interrupt": {"reply_id": ((str,), False)},
    "session.reset": {},
    "session.end": {},
}


class ProtocolError(ValueError):
    """A client frame the protocol does not accept.

    Attributes:
        code: a stable machine-readable reason: "malformed_json", "not_an_object", "missing_type",
            "unknown_type", "invalid_field", "unsupported_rate", "unsupported_format",
            "odd_byte_length", "unexpected_binary", "not_started", "already_started",
            "rate_limited", "busy".
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ClientMessage:
    """One parsed client text frame: its `type` and its checked fields (unknown fields dropped)."""

    type: str
    fields: dict[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)


def parse_client_text(text: str | bytes) -> ClientMessage:
    """Parse and check one client text frame.

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
    fields: dict[str, Any] = {}
    for name, (types, required) in _FIELDS[kind].items():
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
        fields[name] = value
    _check_values(kind, fields)
    return ClientMessage(kind, fields)


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


def server_event(kind: str, **fields: Any) -> str:
    """One server -> client JSON text frame. ValueError for a type not in `SERVER_TYPES`."""
    if kind not in SERVER_TYPES:
        raise ValueError(f"not a server event type: {kind!r}")
    return json.dumps({"type": kind, **fields}, ensure_ascii=False, allow_nan=False)


def error_event(code: str, message: str) -> str:
    return server_event("error", code=code, message=message)


def ms(seconds: float | None) -> float | None:
    """Seconds -> milliseconds for the wire (rounded to 0.1 ms); None stays None."""
    return None if seconds is None else round(seconds * 1000.0, 1)
