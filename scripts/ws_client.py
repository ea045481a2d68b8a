"""A headless client for `headstart serve`: stream a WAV file to the server as a microphone would, print
the server's events, and write the reply audio to a WAV file.

    .venv/bin/python scripts/ws_client.py question.wav --out reply.wav
    .venv/bin/python scripts/ws_client.py question.wav --url ws://HOST:8765/ws --token T --out reply.wav

The WAV (any rate and channel count soundfile reads: mixed to mono, resampled to 16 kHz) leaves as
20 ms PCM16 frames at real-time pace, then silence keeps coming at the same pace (a live microphone
does not stop) until the turn's reply has been received and played out (the client plays nothing; it
never reports playback, so the server assumes real-time playback: docs/protocol.md), or `--timeout-s`
runs out. `--commit` ends the turn as soon as the file has been sent (`input.commit`, push-to-talk)
instead of waiting for the server's end of turn. Each event is printed as one line: the client's
seconds since the first audio frame, the type, its fields (reply text deltas are gathered into one
line per reply). The reply audio (PCM16 at `reply.audio.start`'s `sample_rate`, every reply of the
session in order) is written to `--out` as PCM16 WAV.

Exit status: 0 a reply was received (`metrics.turn` or `reply.interrupted`), 1 none before the
timeout, an `error` event that ended the session, or a closed connection, 2 a file or address
that cannot be used. It speaks the protocol through headstart/server/client.py: run it with the
project's environment (where `headstart` is installed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

from headstart.server.client import ClientConnectError, ReplyAudioFrame, VoiceClient
from headstart.server.protocol import (
    INPUT_FRAME_SAMPLES,
    INPUT_SAMPLE_RATE_HZ,
    ErrorEvent,
    MetricsTurn,
    ReplyAudioStart,
    ReplyDone,
    ReplyInterrupted,
    ReplyTextDelta,
    ServerEvent,
    SessionStarted,
    event_fields,
)

SAMPLE_RATE_HZ = INPUT_SAMPLE_RATE_HZ
FRAME_S = INPUT_FRAME_SAMPLES / INPUT_SAMPLE_RATE_HZ


def read_wav(path: Path) -> np.ndarray:
    """The file as float32 mono 16 kHz samples (num_samples,). Raises OSError / RuntimeError
    (soundfile) for a file it cannot read, ValueError for an empty one."""
    import soundfile as sf

    samples, rate = sf.read(str(path), dtype="float32", always_2d=True)
    samples = samples.mean(axis=1)
    if samples.size == 0:
        raise ValueError(f"{path}: no audio")
    if rate != SAMPLE_RATE_HZ:
        import soxr

        samples = soxr.resample(samples, rate, SAMPLE_RATE_HZ).astype(np.float32)
    return samples


def describe(event: ServerEvent) -> str:
    """One printed line's text for a server event (its fields, without the type)."""
    fields = {k: v for k, v in event_fields(event).items()
              if k != "type" and not (k == "text" and isinstance(event, ReplyDone))}
    if isinstance(event, MetricsTurn):  # the latencies people look for first, then the rest
        keys = ("reply_id", "transcript", "reply", "vad_end_to_first_audio_ms", "ttft_ms", "tts_ttfa_ms",
                "preemptive", "reply_audio_ms")
        fields = {k: fields[k] for k in keys if k in fields}
    return json.dumps(fields, ensure_ascii=False)


class Conversation:
    """What one run saw: the events, the reply audio per reply id, and when the turn's reply ended."""

    def __init__(self) -> None:
        self.started: SessionStarted | None = None
        self.events: list[ServerEvent] = []
        self.audio: dict[str, bytearray] = {}
        self.rate_hz: dict[str, int] = {}
        self.current: str | None = None
        self.audio_start_s: dict[str, float] = {}  # reply id -> client time its audio began
        self.deltas: dict[str, str] = {}
        self.finished_at: float | None = None  # client time the reply has played out (or was cut off)
        self.failed: str | None = None

    def played_out_at(self, reply_id: str, now: float) -> float:
        """When real-time playback of the reply's audio received so far ends (client time)."""
        if reply_id not in self.audio_start_s:
            return now
        seconds = len(self.audio.get(reply_id, b"")) / 2 / self.rate_hz[reply_id]
        return max(now, self.audio_start_s[reply_id] + seconds)


async def run(args: argparse.Namespace) -> int:
    from websockets.exceptions import ConnectionClosed

    try:
        samples = read_wav(Path(args.wav))
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"error: cannot read {args.wav}: {exc}", file=sys.stderr)
        return 2
    try:
        client = await VoiceClient.open(args.url, token=args.token, open_timeout_s=10)
    except ClientConnectError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    conv = Conversation()
    t0 = time.monotonic()

    def stamp() -> str:
        return f"{time.monotonic() - t0:7.2f}s"

    async def receive() -> None:
        async for event in client:
            if isinstance(event, ReplyAudioFrame):
                if conv.current is not None:
                    conv.audio.setdefault(conv.current, bytearray()).extend(event.pcm16)
                continue
            conv.events.append(event)
            if isinstance(event, SessionStarted):
                conv.started = event
            elif isinstance(event, ReplyTextDelta):  # gathered: printed whole at reply.done
                conv.deltas[event.reply_id] = conv.deltas.get(event.reply_id, "") + event.text
                continue
            elif isinstance(event, ReplyAudioStart):
                conv.current = event.reply_id
                conv.rate_hz[conv.current] = int(event.sample_rate)
                conv.audio_start_s[conv.current] = time.monotonic()
            elif isinstance(event, ReplyDone) and event.reply_id in conv.deltas:
                print(f"{stamp()}  {'reply.text':<18} {conv.deltas.pop(event.reply_id)!r}", flush=True)
            elif isinstance(event, ReplyInterrupted) and conv.finished_at is None:
                conv.finished_at = time.monotonic()
            elif isinstance(event, MetricsTurn) and conv.finished_at is None:  # all its audio has been sent
                conv.finished_at = conv.played_out_at(event.reply_id, time.monotonic())
            elif isinstance(event, ErrorEvent) and event.code in ("slow_consumer", "internal"):
                conv.failed = f"{event.code}: {event.message}"
            print(f"{stamp()}  {event.type:<18} {describe(event)}", flush=True)

    reader = asyncio.create_task(receive())
    status = 1
    try:
        await client.start()
        waited = time.monotonic() + 10
        while conv.started is None:
            if reader.done() or time.monotonic() > waited:
                print("error: no session.started from the server", file=sys.stderr)
                return 1
            await asyncio.sleep(0.01)
        frame = INPUT_FRAME_SAMPLES
        sent_s, t0 = 0.0, time.monotonic()
        for i in range(0, samples.size, frame):
            await client.send_audio(samples[i:i + frame])
            sent_s += FRAME_S
            await asyncio.sleep(max(0.0, t0 + sent_s - time.monotonic()))
        print(f"{stamp()}  (sent {samples.size / SAMPLE_RATE_HZ:.2f} s of {args.wav}; silence follows)", flush=True)
        if args.commit:
            await client.commit()
        silent = np.zeros(frame, np.float32)
        deadline = time.monotonic() + args.timeout_s
        while time.monotonic() < deadline and conv.failed is None and not reader.done():
            if conv.finished_at is not None and time.monotonic() >= conv.finished_at + args.linger_s:
                break
            await client.send_audio(silent)
            sent_s += FRAME_S
            await asyncio.sleep(max(0.0, t0 + sent_s - time.monotonic()))
        if conv.failed is not None:
            print(f"error: the session ended: {conv.failed}", file=sys.stderr)
        elif conv.finished_at is None:
            print(f"error: no reply within {args.timeout_s:.0f} s of the file's end", file=sys.stderr)
        else:
            status = 0
        if not reader.done():
            await client.end()
            await asyncio.wait_for(reader, 5)
    except (ConnectionClosed, TimeoutError) as exc:
        print(f"error: the connection closed: {exc}", file=sys.stderr)
        status = 1
    finally:
        reader.cancel()
        await client.close()
    write_reply(conv, args.out)
    return status


def write_reply(conv: Conversation, out: str | None) -> None:
    """Write every reply's audio, in order, to `out` (PCM16 WAV at the replies' rate)."""
    if not out:
        return
    import soundfile as sf

    rates = set(conv.rate_hz.values()) or {int(conv.started.output.sample_rate if conv.started else 0) or 22050}
    if len(rates) > 1:  # one voice per server: cannot happen today
        print(f"warning: replies at several rates {sorted(rates)}; writing them at {max(rates)} Hz", file=sys.stderr)
    pcm = b"".join(bytes(conv.audio[r]) for r in conv.audio)
    samples = np.frombuffer(pcm, dtype="<i2")
    sf.write(out, samples, max(rates), subtype="PCM_16")
    print(f"wrote {samples.size / max(rates):.2f} s of reply audio to {out}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wav", help="the user's utterance (a WAV file; any rate, mixed to mono)")
    parser.add_argument("--url", default="ws://127.0.0.1:8765/ws", help="the server's websocket (default %(default)s)")
    parser.add_argument("--token", default=None, help="the server's bearer token (serve --token)")
    parser.add_argument("--out", default="reply.wav", help="where the reply audio goes (default %(default)s; '' for none)")
    parser.add_argument("--commit", action="store_true", help="end the turn when the file ends (push-to-talk)")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="wait this long for the reply after the file")
    parser.add_argument("--linger-s", type=float, default=0.5,
                        help="after the reply, keep the session this long (late events) before ending it")
    args = parser.parse_args(argv)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
