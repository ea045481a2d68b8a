"""`headstart mic` without devices: the callback -> loop handoff, the playback buffer, capture
resampling, the echo gate and the WebRTC AEC on a real recording, the terminal view fed scripted
events, and the client against a fake server (playback positions, barge-in flush, a clean stop)."""

from __future__ import annotations

import asyncio
import json
import threading

import numpy as np
import pytest

from headstart.audio import SAMPLE_RATE_HZ, read_wav
from headstart.corpus import recordings as data
from headstart.mic.client import CaptureChain, FrameHandoff, MicClient, PlaybackBuffer
from headstart.mic.echo import EchoCanceller, NoEchoControl, PlaybackGate, aec_available
from headstart.mic.view import MicView


def test_import_does_not_load_portaudio():
    import subprocess
    import sys

    code = "import sys, headstart.mic.client, headstart.cli; assert 'sounddevice' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_callback_thread_only_hands_copies_to_the_loop():
    got: list[tuple[np.ndarray, str]] = []

    async def main():
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def deliver(block):
            got.append((block, threading.current_thread().name))
            if len(got) == 3:
                done.set()

        handoff = FrameHandoff(loop, deliver)
        buf = np.zeros((4, 1), dtype=np.float32)

        def audio_thread():
            for i in range(3):
                buf[:, 0] = i
                handoff(buf, 4, None, None)  # sounddevice reuses its buffer: the handoff must copy

        t = threading.Thread(target=audio_thread, name="portaudio")
        t.start()
        t.join()
        await asyncio.wait_for(done.wait(), 5)
        return threading.current_thread().name

    loop_thread = asyncio.run(main())
    assert [float(b[0]) for b, _ in got] == [0.0, 1.0, 2.0]
    assert {name for _, name in got} == {loop_thread}
    # After the loop is closed a late block is dropped, not raised in the audio thread.
    loop = asyncio.new_event_loop()
    loop.close()
    FrameHandoff(loop, got.append)(np.zeros((4, 1), np.float32), 4, None, None)


def test_capture_chain_resamples_44k1_to_16k_frames_of_20_ms():
    speech = data.default_recording().read()
    at_44k = read_wav(data.default_recording().path, 44_100)
    chain = CaptureChain(44_100, NoEchoControl())
    frames = []
    for lo in range(0, at_44k.size, 441):  # 10 ms device blocks
        frames += chain.push(at_44k[lo:lo + 441])
    assert all(len(f) == 640 for f in frames)
    out = np.concatenate([np.frombuffer(f, "<i2") for f in frames]).astype(np.float32) / 32768
    assert abs(out.size - speech.size) <= 640 + 100
    n = min(out.size, speech.size) - 200
    lag = int(np.argmax(np.correlate(out[:4000], speech[:3000], "valid")))  # the filter delay, a few samples
    a, b = out[lag:lag + n], speech[:n]
    assert np.corrcoef(a[: b.size], b[: a.size])[0, 1] > 0.99


def test_playback_buffer_positions_pause_flush():
    buf = PlaybackBuffer(None)
    buf.push("r1", np.full(300, 0.5, np.float32))
    out = np.ones(200, np.float32)
    buf.fill(out)
    assert np.all(out == 0.5) and buf.played_samples("r1") == 200
    buf.pause()
    buf.fill(out)
    assert np.all(out == 0) and buf.played_samples("r1") == 200 and buf.queued_samples == 100
    buf.resume()
    buf.push("r2", np.full(50, 0.25, np.float32))
    buf.fill(out)  # one reply per block: r1's tail, then silence
    assert np.all(out[:100] == 0.5) and np.all(out[100:] == 0) and buf.played_samples("r1") == 300
    buf.flush()
    buf.fill(out)
    assert np.all(out == 0) and buf.played_samples("r2") == 0


def test_gate_silences_echo_but_lets_a_barge_in_through():
    speech = data.default_recording().read()
    reply = speech[8000:8000 + 3200]
    gate = PlaybackGate()
    assert np.array_equal(gate.near_end(reply * 0.3), reply * 0.3)  # nothing playing: open
    gate.far_end(reply)
    echo = gate.near_end(reply * 0.3)
    assert not echo.any()  # quieter than the playback: its echo
    loud = reply * 4.0
    assert np.array_equal(gate.near_end(loud), loud)  # the user over the reply
    gate.near_end(np.zeros(int(0.35 * SAMPLE_RATE_HZ), np.float32))  # the echo tail passes
    assert np.array_equal(gate.near_end(reply * 0.3), reply * 0.3)


@pytest.mark.skipif(not aec_available(), reason="livekit (WebRTC AEC) not installed")
def test_webrtc_aec_removes_the_echo_of_a_real_recording():
    far = np.concatenate([r.read() for r in data.recordings()[:4]])[: 10 * SAMPLE_RATE_HZ]
    delay = 800  # 50 ms
    near = np.zeros_like(far)
    near[delay:] = 0.5 * far[:-delay]
    aec = EchoCanceller(delay_ms=50)
    out = []
    for lo in range(0, far.size, 320):
        aec.far_end(far[lo:lo + 320])
        out.append(aec.near_end(near[lo:lo + 320]))
    out = np.concatenate(out)
    tail = slice(5 * SAMPLE_RATE_HZ, out.size)  # after convergence
    erle_db = 10 * np.log10(np.mean(near[tail] ** 2) / max(np.mean(out[tail] ** 2), 1e-12))
    assert erle_db > 15, erle_db


def test_view_renders_scripted_events():
    from rich.console import Console

    view = MicView()
    script = [
        {"type": "session.started"},
        {"type": "vad.speech_started", "audio_ms": 100},
        {"type": "transcript.partial", "text": "go forward", "committed": "go", "pending": "forward"},
    ]
    for e in script:
        view.apply(e)
    console = Console(record=True, width=100, color_system="256")
    console.print(view.render())
    text = console.export_text(clear=False)
    assert "hearing you" in text and "go forward" in text
    assert "\x1b[38;5;244m forward" in console.export_text(styles=True)  # the pending word is greyed
    for e in [
        {"type": "transcript.final", "text": "Go forward 10 meters."},
        {"type": "turn.end"}, {"type": "reply.started", "reply_id": "r1"},
        {"type": "reply.text.delta", "reply_id": "r1", "text": "Sure,"},
        {"type": "reply.audio.start", "reply_id": "r1", "sample_rate": 22050},
    ]:
        view.apply(e)
    assert view.state == "speaking" and view.reply == "Sure,"
    view.apply({"type": "reply.done", "reply_id": "r1", "text": "Sure, moving."})
    view.apply({"type": "metrics.turn", "vad_end_to_first_audio_ms": 812.4, "ttft_ms": 95.0, "tts_ttfa_ms": 60.0,
                "preemptive": "hit", "num_tokens": 5})
    console = Console(record=True, width=100)
    console.print(view.render())
    text = console.export_text()
    assert "Go forward 10 meters." in text and "Sure, moving." in text and "812" in text and "hit" in text
    assert view.state == "listening"
    assert MicView.lines({"type": "transcript.final", "text": "hi"}) == ["you: hi"]


def test_view_shows_tool_calls_and_timers():
    from rich.console import Console

    view = MicView()
    call = {"type": "tool.call", "reply_id": "r1", "call_id": "c1", "name": "timer_start", "arguments": {"seconds": 60.0}}
    result = {"type": "tool.result", "reply_id": "r1", "call_id": "c1", "name": "timer_start", "ok": True,
              "result": "Timer set for one minute.", "duration_ms": 0.3}
    failed = {"type": "tool.result", "reply_id": "r2", "call_id": "c2", "name": "ring_bell", "ok": False,
              "result": None, "error": "tool ring_bell timed out after 2 s"}
    fired = {"type": "timer.fired", "timer_id": 1, "kind": "timer", "label": "one minute", "name": "",
             "text": "Your one minute timer is done."}
    reminded = {"type": "timer.fired", "timer_id": 2, "kind": "reminder", "label": "check the oven", "name": "",
                "text": "Reminder: check the oven."}
    for e in [{"type": "transcript.final", "text": "Set a timer for one minute."}, call, result, failed, fired, reminded,
              {"type": "reply.started", "reply_id": "r3", "transcript": ""},
              {"type": "metrics.turn", "reply_id": "r3", "transcript": "", "vad_end_to_first_audio_ms": None}]:
        view.apply(e)
    assert view.history[1:] == [("tool", "timer_start {seconds: 60} -> Timer set for one minute."),
                                ("tool", "ring_bell failed: tool ring_bell timed out after 2 s"),
                                ("timer", "one minute timer went off"), ("timer", "reminder: check the oven")]
    assert view.latency == []  # the timer's announcement is no user turn
    console = Console(record=True, width=100)
    console.print(view.render())
    assert "timer_start {seconds: 60} -> Timer set for one minute." in console.export_text()
    assert MicView.lines(call) == ["tool: timer_start {seconds: 60}"]
    assert MicView.lines(failed) == ["tool: ring_bell failed: tool ring_bell timed out after 2 s"]
    assert MicView.lines(fired) == ["timer: Your one minute timer is done."]


class FakeServer:
    """A websocket server speaking the protocol's server side from a script (real loopback socket)."""

    def __init__(self) -> None:
        self.received: list = []
        self.ended = asyncio.Event()
        self.got_position = asyncio.Event()

    async def handler(self, ws):
        async for message in ws:
            self.received.append(message)
            if isinstance(message, str):
                event = json.loads(message)
                if event["type"] == "session.start":
                    await ws.send(json.dumps({"type": "session.started", "output": {"sample_rate": 22050}}))
                    await ws.send(json.dumps({"type": "reply.audio.start", "reply_id": "r1", "sample_rate": 22050}))
                    await ws.send(np.full(2205, 8000, "<i2").tobytes())  # 100 ms
                    await ws.send(json.dumps({"type": "reply.done", "reply_id": "r1", "text": "hi", "audio_ms": 100}))
                elif event["type"] == "playback.position":
                    self.got_position.set()
                elif event["type"] == "session.end":
                    self.ended.set()
                    await ws.close()


def test_client_streams_plays_reports_position_and_stops_cleanly():
    async def main():
        from websockets.asyncio.server import serve

        fake = FakeServer()
        server = await serve(fake.handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        closed = threading.Event()
        devices = {}

        def streams(capture, playback):
            devices["capture"], devices["playback"] = capture, playback
            return 48_000, 48_000, 0.02, closed.set

        client = MicClient(f"ws://127.0.0.1:{port}/ws", echo_mode="gate", streams=streams)
        run = asyncio.create_task(client.run())
        async def until(predicate):
            while not predicate():
                await asyncio.sleep(0.01)

        # The streams open, then the whole reply (100 ms, flushed at reply.done) is queued.
        await asyncio.wait_for(until(lambda: "playback" in devices), 10)
        await asyncio.wait_for(until(lambda: client.player.queued_samples >= 4700), 10)

        def audio_threads():  # what PortAudio would do: 20 ms blocks each way
            out = np.zeros((960, 1), np.float32)
            for _ in range(10):
                devices["capture"](np.full((960, 1), 0.1, np.float32), 960, None, None)
                devices["playback"](out, 960, None, None)

        await asyncio.to_thread(audio_threads)
        await asyncio.wait_for(fake.got_position.wait(), 5)
        client.stop.set()  # what Ctrl-C does
        code = await asyncio.wait_for(run, 10)
        await asyncio.wait_for(fake.ended.wait(), 5)
        server.close()
        await server.wait_closed()
        return fake, client, code, closed.is_set()

    fake, client, code, streams_closed = asyncio.run(main())
    assert code == 0 and streams_closed
    audio = [m for m in fake.received if isinstance(m, bytes)]
    assert audio and all(len(m) == 640 for m in audio)  # 20 ms PCM16 at 16 kHz
    positions = [json.loads(m) for m in fake.received if isinstance(m, str) and "playback.position" in m]
    assert positions[-1]["reply_id"] == "r1"
    assert 90 <= positions[-1]["position_ms"] <= 110  # all 100 ms of the reply played at 48 kHz
    assert json.loads(fake.received[-1])["type"] == "session.end"


def test_no_audio_devices_is_a_clear_error_before_any_model_loads():
    """Here (no sound card) `--list-devices` says so and `--local` stops before loading models."""
    import subprocess
    import sys

    from headstart.mic.client import import_sounddevice

    try:
        if len(import_sounddevice().query_devices()) > 0:
            pytest.skip("this machine has audio devices")
    except Exception as exc:  # noqa: BLE001 - no PortAudio: the error path is another test's
        pytest.skip(f"no sounddevice here: {exc}")
    listed = subprocess.run([sys.executable, "-m", "headstart", "mic", "--list-devices"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 1 and "no audio devices" in listed.stderr
    local = subprocess.run([sys.executable, "-m", "headstart", "mic", "--local", "--llm", "not-prepared-anywhere"],
                           capture_output=True, text=True, timeout=60)
    # the device check comes first: the unprepared LLM is never reached
    assert local.returncode == 1 and "no default input device" in local.stderr, local.stderr
    assert "Traceback" not in listed.stderr + local.stderr
