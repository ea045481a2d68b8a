"""The wire protocol: every bad client frame is a ProtocolError with a stable code and a clear message."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headstart.server.protocol import (
    CLIENT_TYPES,
    SERVER_TYPES,
    ProtocolError,
    error_event,
    parse_audio,
    parse_client_text,
    server_event,
)


def code_of(text) -> str:
    with pytest.raises(ProtocolError) as info:
        parse_client_text(text)
    assert info.value.message  # always a human explanation too
    return info.value.code


@pytest.mark.parametrize("text, code", [
    ("{not json", "malformed_json"),
    ("", "malformed_json"),
    ('{"type": "input.commit", "x": NaN}', "malformed_json"),
    ("[1, 2]", "not_an_object"),
    ('"session.start"', "not_an_object"),
    ("{}", "missing_type"),
    ('{"type": "reply.explode"}', "unknown_type"),
    ('{"type": 7}', "unknown_type"),
    ('{"type": "session.started"}', "unknown_type"),  # a server event sent by the client
    ('{"type": "session.start", "sample_rate": 44100}', "unsupported_rate"),
    ('{"type": "session.start", "sample_rate": "16000"}', "invalid_field"),
    ('{"type": "session.start", "sample_rate": true}', "invalid_field"),
    ('{"type": "session.start", "format": "f32le"}', "unsupported_format"),
    ('{"type": "playback.position", "position_ms": 10}', "invalid_field"),
    ('{"type": "playback.position", "reply_id": "r1", "position_ms": -1}', "invalid_field"),
    ('{"type": "playback.position", "reply_id": "r1", "position_ms": "10"}', "invalid_field"),
    ('{"type": "playback.position", "reply_id": "r1", "position_ms": 1e400}', "invalid_field"),
    ('{"type": "playback.position", "reply_id": "", "position_ms": 1}', "invalid_field"),
])
def test_bad_text_frames_have_codes(text, code):
    assert code_of(text) == code


def test_deeply_nested_json_is_malformed_not_a_crash():
    assert code_of("[" * 100_000 + "]" * 100_000) in ("malformed_json", "not_an_object")


def test_valid_messages_parse_and_drop_unknown_fields():
    msg = parse_client_text('{"type": "session.start", "sample_rate": 16000, "model": "/etc/passwd"}')
    assert msg.type == "session.start" and msg.fields == {"sample_rate": 16000}
    pos = parse_client_text(b'{"type": "playback.position", "reply_id": "r3", "position_ms": 1500.5}')
    assert pos.get("reply_id") == "r3" and pos.get("position_ms") == 1500.5
    for kind in CLIENT_TYPES - {"playback.position"}:
        assert parse_client_text(json.dumps({"type": kind})).type == kind


def test_pcm16_frames():
    samples = parse_audio(np.array([0, 16384, -32768, 32767], dtype="<i2").tobytes())
    assert samples.dtype == np.float32
    np.testing.assert_allclose(samples, [0.0, 0.5, -1.0, 32767 / 32768])
    assert parse_audio(b"").shape == (0,)
    with pytest.raises(ProtocolError) as info:
        parse_audio(b"\x00\x01\x02")
    assert info.value.code == "odd_byte_length" and "3 bytes" in info.value.message


def test_pcm16_stream_joins_a_sample_split_across_frames():
    """The server's reading of a connection's binary frames: one byte stream, an odd byte carried."""
    from headstart.server.protocol import PCM16Stream

    data = np.array([1, -2, 300, -32768, 32767, 12345], dtype="<i2").tobytes()
    stream = PCM16Stream()
    got = [stream.feed(data[:3]), stream.feed(data[3:4]), stream.feed(b""), stream.feed(data[4:11])]
    assert [g.shape[0] for g in got] == [1, 1, 0, 3] and stream.pending_bytes == 1
    got.append(stream.feed(memoryview(data)[11:]))
    assert stream.pending_bytes == 0
    np.testing.assert_array_equal(np.concatenate(got), parse_audio(data))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=20))
def test_pcm16_stream_is_the_byte_stream_however_it_is_cut(data, cuts):
    from headstart.server.protocol import PCM16Stream

    stream = PCM16Stream()
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    got = [stream.feed(data[a:b]) for a, b in zip(bounds, bounds[1:])]
    whole = len(data) - len(data) % 2
    assert stream.pending_bytes == len(data) % 2
    np.testing.assert_array_equal(np.concatenate([np.zeros(0, np.float32), *got]), parse_audio(data[:whole]))


def test_the_shutdown_and_unspeakable_events_round_trip():
    from headstart.server.protocol import (
        ReplyUnspeakable,
        SessionEnding,
        SessionLimits,
        SessionStarted,
        decode_server_event,
        encode_server_event,
    )

    ending = SessionEnding(reason="shutdown", drain_ms=10000.0)
    assert json.loads(encode_server_event(ending)) == {"type": "session.ending", "reason": "shutdown",
                                                       "drain_ms": 10000.0}
    unspeakable = ReplyUnspeakable(reply_id="r2", text="正午です。", spoken="Sorry, I can only speak English.")
    for event in (ending, unspeakable, SessionStarted(limits=SessionLimits(65536, 4.0, 60000.0))):
        assert decode_server_event(encode_server_event(event)) == event
    assert {"session.ending", "reply.unspeakable"} <= SERVER_TYPES


def test_server_events_are_json_with_a_known_type():
    assert json.loads(server_event("turn.end", audio_ms=12.0)) == {"type": "turn.end", "audio_ms": 12.0}
    assert json.loads(error_event("busy", "full"))["type"] == "error"
    assert "error" in SERVER_TYPES
    with pytest.raises(ValueError):
        server_event("made.up")
    with pytest.raises(ValueError):
        server_event("metrics.turn", x=float("nan"))  # never invalid JSON on the wire


# -- numbers of any size: JSON allows any number of digits --------------------------


_FIELD_NAMES = ("sample_rate", "format", "reply_id", "position_ms")
# integers of 1..4299 digits (Python's json refuses 4300 and more: malformed_json), either sign, and the
# number spellings that are not Python floats
_big_ints = st.builds(lambda digits, sign: sign + "9" * digits, st.integers(1, 4299), st.sampled_from(["", "-"]))
_numbers = _big_ints | st.sampled_from(["1e400", "-1e400", "1e-400", "0.0", "-0", "1.7976931348623157e308"]) | \
    st.floats(allow_nan=False, allow_infinity=False).map(repr)


@pytest.mark.parametrize("digits", [309, 400, 4299])
def test_an_integer_too_large_for_a_float_is_invalid_field(digits):
    text = '{"type": "playback.position", "reply_id": "r1", "position_ms": %s}' % ("9" * digits)
    assert code_of(text) == "invalid_field"
    with pytest.raises(ProtocolError, match=f"{digits} digits"):
        parse_client_text(text)


def test_a_large_integer_that_fits_a_float_is_a_float_position():
    msg = parse_client_text('{"type": "playback.position", "reply_id": "r1", "position_ms": %s}' % ("9" * 300))
    assert isinstance(msg.get("position_ms"), float) and msg.get("position_ms") == float("9" * 300)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(CLIENT_TYPES)), st.sampled_from(_FIELD_NAMES), _numbers)
def test_any_json_number_in_any_field_raises_only_protocol_error(kind, name, number):
    text = f'{{"type": "{kind}", "reply_id": "r1", "position_ms": 5, "{name}": {number}}}'
    try:
        message = parse_client_text(text)
    except ProtocolError as exc:
        assert exc.code in ("invalid_field", "unsupported_rate", "malformed_json"), exc.code
        assert len(exc.message) < 300  # never echoes thousands of digits
        return
    for value in message.fields.values():  # what the server then computes with is a plain finite number
        if isinstance(value, float):
            assert value == value and abs(value) < float("inf")


# -- tool.call / tool.result --------------------------------------------------------------------------


def test_tool_events_from_the_session_to_the_client():
    from headstart.server.protocol import ToolCalled, ToolResult, decode_server_event
    from headstart.server.session_frames import session_frames
    from headstart.session.reply import ToolCalled as SessionToolCalled
    from headstart.session.reply import ToolResult as SessionToolResult

    (call,) = session_frames(SessionToolCalled("r4", "c2", "timer_start", {"seconds": 60.0, "name": "pasta"}))
    assert json.loads(call) == {"type": "tool.call", "reply_id": "r4", "call_id": "c2", "name": "timer_start",
                                "arguments": {"seconds": 60.0, "name": "pasta"}}
    assert decode_server_event(call) == ToolCalled(reply_id="r4", call_id="c2", name="timer_start",
                                                   arguments={"seconds": 60.0, "name": "pasta"})
    (ok,) = session_frames(SessionToolResult("r4", "c2", "timer_start", True, "Pasta timer set for one minute.", "",
                                             0.01234))
    assert json.loads(ok) == {"type": "tool.result", "reply_id": "r4", "call_id": "c2", "name": "timer_start",
                              "ok": True, "result": "Pasta timer set for one minute.", "duration_ms": 12.3}
    (failed,) = session_frames(SessionToolResult("r4", "c3", "ring_bell", False, None,
                                                 "tool ring_bell timed out after 2 s", 2.0))
    event = decode_server_event(failed)
    assert isinstance(event, ToolResult) and not event.ok and event.result is None
    assert event.error == "tool ring_bell timed out after 2 s" and event.duration_ms == 2000.0
    # whatever a registered tool returns, the frame is valid JSON and short
    (small,) = session_frames(SessionToolResult("r5", "c4", "mine", True, {"x": float("nan"), "n": [1, 2]}, "", 0.0))
    assert json.loads(small)["result"] == {"x": "nan", "n": [1, 2]}
    (big,) = session_frames(SessionToolResult("r5", "c5", "mine", True, {"big": "y" * 500}, "", 0.0))
    assert json.loads(big)["result"] == ("{'big': '" + "y" * 500)[:199] + "…"


def test_short_json_keeps_small_values_and_cuts_the_rest():
    from headstart.server.protocol import MAX_VALUE_CHARS, short_json

    assert [short_json(v) for v in (None, True, 3, 2.5, "It's 3:42 PM.")] == [None, True, 3, 2.5, "It's 3:42 PM."]
    assert short_json(float("inf")) == "inf" and short_json((1, 2)) == [1, 2] and short_json({1: "a"}) == {"1": "a"}
    long = short_json("z" * 1000)
    assert len(long) == MAX_VALUE_CHARS and long.endswith("…")
    many = short_json(list(range(1000)))  # its JSON would be long: its str, cut
    assert isinstance(many, str) and len(many) == MAX_VALUE_CHARS

    class Odd:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert short_json(Odd()) == "<Odd>"
    json.dumps([short_json(v) for v in (object(), b"bytes", {"k": [float("-inf")]})], allow_nan=False)


def test_timer_fired_encodes_although_it_has_a_member_named_kind():
    from headstart.server.protocol import TimerFired, decode_server_event, encode_server_event
    from headstart.server.session_frames import session_frames
    from headstart.session.timers import TimerFired as SessionTimerFired

    (frame,) = session_frames(SessionTimerFired(3, "alarm", "7:30 AM", "", "It's 7:30 AM. This is your alarm."))
    assert json.loads(frame) == {"type": "timer.fired", "timer_id": 3, "kind": "alarm", "label": "7:30 AM", "name": "",
                                 "text": "It's 7:30 AM. This is your alarm."}
    assert decode_server_event(frame) == TimerFired(timer_id=3, kind="alarm", label="7:30 AM", name="",
                                                    text="It's 7:30 AM. This is your alarm.")
    assert json.loads(encode_server_event(TimerFired(kind="timer")))["kind"] == "timer"
