"""The harness's websocket client: it talks to `headstart serve` exactly as the page and the mic app do
(through headstart/server/client.py, as the mic app does).

One `run_session` call is one websocket connection (one server Session): it sends `session.start`, then
each user turn's recording as 20 ms PCM16 frames at real-time pace, then room-level noise (a microphone
in a room, never digital zero) until the turn is over; meanwhile it plays the reply audio on a model of
a real-time player (`Player`) and reports `playback.position` every 100 ms, pausing on `reply.paused`
and flushing on `reply.interrupted` as the clients do. Every received event, and every reply audio
frame, is stamped on one client clock (`time.perf_counter`; with `--simulate` the virtual clock of
headstart/bench/conversation/simulate.py) into the turn's `TurnRecord`; the true end
of the user's speech is the send time of the frame holding the recording's `speech_end_s` (the earliest
moment a server could know it). The metrics are computed from these records afterwards
(headstart/bench/conversation/metrics.py), never here.

Modes of one turn:
  "qa"      wait until the reply is complete (`metrics.turn`) and has been played, then the next turn
  "pause"   a recording with a mid-sentence pause: stop at the first `turn.end` (or when the tail is spent)
  "bargein" once `barge_after_s` of the reply has played, speak `barge` over it; stop once the reply
            is interrupted (or has finished regardless, or the wait is spent)
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from headstart.server.client import ReplyAudioFrame, VoiceClient, WebSocket, open_connection
from headstart.server.protocol import (
    MetricsTurn,
    ReplyAudioStart,
    ReplyInterrupted,
    ReplyPaused,
    ReplyResumed,
    ReplyStarted,
    ServerEvent,
    TranscriptFinal,
    TurnEnd,
    VADSpeechStarted,
    event_fields,
)

SR = 16_000
FRAME_S = 0.02
FRAME_SAMPLES = int(SR * FRAME_S)
POSITION_EVERY_S = 0.1


@dataclass
class UserTurn:
    """One user utterance: 16 kHz float32 mono audio and its true speech bounds (s from its start).

    `pause` is (start_s, end_s) of an inserted mid-sentence pause (the pause set), else None.
    `tool_request`: a request a local tool serves (the tools scenario), else a turn for the LLM."""

    name: str
    audio: np.ndarray
    speech_start_s: float
    speech_end_s: float
    text: str = ""
    pause: tuple[float, float] | None = None
    synthetic: bool = False
    tool_request: bool = False


@dataclass
class TurnRecord:
    """What the client saw of one user turn, all on the client clock (seconds, `time.perf_counter`).

    Attributes:
        name, reference: the recording and its reference transcript.
        mode: "qa", "pause" or "bargein".
        offset_s: stream position (s of audio sent on this connection) where the recording starts;
            the server's `audio_ms` fields are positions in the same stream.
        speech_start_at_s / speech_end_at_s: send times of the frames holding the true speech start/end.
        events: (time, type, payload) for every text event received after the turn's first frame, and
            (time, "audio", {"bytes": n, "reply_id": r}) for every binary reply audio frame.
        reply_audio: reply id -> the PCM16 bytes received for it, in order (at the rate of its
            `reply.audio.start`); kept for the intelligibility check of the replies, not in records.json.
        pause_end_s: stream position of the end of an inserted pause (pause set), else None.
        barge_*: the barge-in utterance (mode "bargein"): stream offset, send time of its first word.
        audio_end_at_s: when the last frame of the recording was sent.
        timed_out: the turn's wait ran out before it was over.
        synthetic, tool_request: as the UserTurn's.
    """

    name: str
    reference: str
    mode: str = "qa"
    offset_s: float = 0.0
    speech_start_at_s: float | None = None
    speech_end_at_s: float | None = None
    speech_end_stream_s: float | None = None
    events: list[tuple[float, str, dict]] = field(default_factory=list)
    pause_end_s: float | None = None
    barge_name: str | None = None
    barge_offset_s: float | None = None
    barge_speech_start_at_s: float | None = None
    audio_end_at_s: float | None = None
    timed_out: bool = False
    synthetic: bool = False
    tool_request: bool = False
    session: int = 0
    reply_audio: dict[str, bytearray] = field(default_factory=dict, repr=False)


class Player:
    """A real-time player of the reply audio, as the page's AudioWorklet and the mic app play it.

    Audio plays from the moment it arrives, at real time, while the buffer holds unplayed audio and
    the player is not paused; `flush` drops what is buffered. All times are client clock seconds.
    """

    def __init__(self) -> None:
        self.reply_id: str | None = None
        self.sample_rate = 16_000
        self.received_s = 0.0  # audio of the current reply received
        self.played_s = 0.0
        self.paused = False
        self._at: float | None = None  # last update

    def _advance(self, now: float) -> None:
        if self._at is not None and not self.paused:
            self.played_s = min(self.received_s, self.played_s + max(now - self._at, 0.0))
        self._at = now

    def start(self, reply_id: str, sample_rate: int, now: float) -> None:
        self._advance(now)
        self.reply_id, self.sample_rate = reply_id, max(int(sample_rate), 1)
        self.received_s = self.played_s = 0.0
        self.paused = False

    def audio(self, num_bytes: int, now: float) -> None:
        self._advance(now)
        self.received_s += num_bytes / 2 / self.sample_rate

    def pause(self, now: float) -> None:
        self._advance(now)
        self.paused = True

    def resume(self, now: float) -> None:
        self._advance(now)
        self.paused = False

    def flush(self, now: float) -> None:
        self._advance(now)
        self.received_s = self.played_s
        self.paused = False

    def position(self, now: float) -> float:
        """Seconds of the current reply played by `now`."""
        self._advance(now)
        return self.played_s

    def dry_at(self) -> float | None:
        """When the buffered audio runs out if nothing more arrives (None while paused)."""
        if self.paused or self._at is None:
            return None
        return self._at + (self.received_s - self.played_s)

    def playing(self, now: float) -> bool:
        return not self.paused and self.position(now) < self.received_s - 1e-6


def replay(player: Player, kind: str, payload: dict, t: float) -> None:
    """Apply one server event to `player` as a real-time client does on its arrival (live, and when
    the metrics replay a logged turn)."""
    rid = payload.get("reply_id")
    if kind == ReplyAudioStart.type:
        player.start(rid, payload.get("sample_rate", 16_000), t)
    elif kind == "audio":
        player.audio(payload["bytes"], t)
    elif kind == ReplyPaused.type and rid == player.reply_id:
        player.pause(t)
    elif kind == ReplyResumed.type and rid == player.reply_id:
        player.resume(t)
    elif kind == ReplyInterrupted.type and rid == player.reply_id:
        player.flush(t)


def noise_frame(rms: float, rng: np.random.Generator) -> np.ndarray:
    """20 ms of white noise at `rms` (room level; never digital zero)."""
    return (rng.standard_normal(FRAME_SAMPLES) * rms).astype(np.float32)


class _Conn:
    """One connection's state: the receiver task fills the current record and drives the player."""

    def __init__(self, ws: WebSocket, clock: Callable[[], float]) -> None:
        self.client = VoiceClient(ws)
        self.clock = clock
        self.player = Player()
        self.record: TurnRecord | None = None
        self.stream_s = 0.0  # audio sent on this connection
        self.changed = asyncio.Event()  # any event arrived
        self.closed = False
        self.error: str | None = None

    def note(self, kind: str, payload: dict) -> None:
        now = self.clock()
        if self.record is not None:
            self.record.events.append((now, kind, payload))
        replay(self.player, kind, payload, now)
        self.changed.set()

    async def receive(self) -> None:
        try:
            async for item in self.client:
                if isinstance(item, ReplyAudioFrame):
                    if self.record is not None and self.player.reply_id is not None:
                        self.record.reply_audio.setdefault(self.player.reply_id, bytearray()).extend(item.pcm16)
                    self.note("audio", {"bytes": len(item.pcm16), "reply_id": self.player.reply_id})
                else:
                    self.note(item.type, event_fields(item))
        finally:
            self.closed = True
            self.changed.set()


def _seen(record: TurnRecord, event: type[ServerEvent], after: float = float("-inf")) -> list[dict]:
    return [payload for t, k, payload in record.events if k == event.type and t >= after]


async def run_session(
    url: str,
    turns: list[tuple[UserTurn, str, UserTurn | None]],
    *,
    noise_rms: float = 10 ** (-60 / 20),
    seed: int = 0,
    max_wait_s: float = 60.0,
    settle_s: float = 2.5,
    barge_after_s: float = 0.6,
    session: int = 0,
    clock: Callable[[], float] = time.perf_counter,
    connect=None,
) -> list[TurnRecord]:
    """Run `turns` ((user turn, mode, barge-in utterance or None), ...) on one websocket connection.

    `clock` stamps every event and paces the frames (with `asyncio.sleep`, on the loop's time: the
    two must agree; `--simulate` passes its virtual clock and runs on a loop whose time it is).
    `connect(url, **options)` opens the connection (default `websockets.asyncio.client.connect`;
    `--simulate` passes an in-memory one, headstart/bench/conversation/simulate.py).

    Returns one TurnRecord per turn, in order. Raises OSError / websockets errors when the server cannot
    be reached or refuses the connection (e.g. 503: too many sessions)."""
    rng = np.random.default_rng(seed)
    records: list[TurnRecord] = []
    async with open_connection(url, connect=connect, open_timeout_s=30, compression=None, close_timeout=1,
                               ping_interval=None) as ws:
        conn = _Conn(ws, clock)
        client = conn.client
        receiver = asyncio.create_task(conn.receive(), name="bench-client-receive")
        await client.start()
        pace = _Pacer(clock)
        last_position = [0.0]

        async def send_frame(samples: np.ndarray) -> None:
            await pace.wait()
            await client.send_audio(samples)
            conn.stream_s += samples.shape[0] / SR
            now = clock()
            if conn.player.reply_id is not None and now - last_position[0] >= POSITION_EVERY_S:
                last_position[0] = now
                await client.report_playback(conn.player.reply_id, round(conn.player.position(now) * 1000.0, 1))

        async def send_utterance(turn: UserTurn, on_start=None, on_end=None) -> float:
            offset = conn.stream_s
            start_i = int(turn.speech_start_s * SR)
            end_i = int(np.ceil(turn.speech_end_s * SR))
            for lo in range(0, turn.audio.shape[0], FRAME_SAMPLES):
                block = turn.audio[lo : lo + FRAME_SAMPLES]
                if block.shape[0] < FRAME_SAMPLES:  # whole frames: pad with room noise
                    block = np.concatenate([block, noise_frame(noise_rms, rng)[: FRAME_SAMPLES - block.shape[0]]])
                await send_frame(block)
                hi = lo + FRAME_SAMPLES
                if on_start is not None and lo <= start_i < hi:
                    on_start(clock())
                if on_end is not None and lo < end_i <= hi:
                    on_end(clock())
            return offset

        async def idle_until(done: Callable[[], bool], limit_s: float) -> bool:
            """Send room noise until `done()` or `limit_s` passed; True if done."""
            until = clock() + limit_s
            while not done():
                if conn.closed or clock() >= until:
                    return done()
                await send_frame(noise_frame(noise_rms, rng))
            return True

        try:
            for n, (turn, mode, barge) in enumerate(turns):
                record = TurnRecord(turn.name, turn.text, mode=mode, offset_s=conn.stream_s,
                                    synthetic=turn.synthetic, tool_request=turn.tool_request, session=session)
                records.append(record)
                conn.record = record
                if turn.pause is not None:
                    record.pause_end_s = record.offset_s + turn.pause[1]

                def at_start(t: float, r: TurnRecord = record) -> None:
                    r.speech_start_at_s = t

                def at_end(t: float, r: TurnRecord = record) -> None:
                    r.speech_end_at_s = t

                await send_utterance(turn, at_start, at_end)
                record.speech_end_stream_s = record.offset_s + turn.speech_end_s
                record.audio_end_at_s = clock()
                if mode == "pause":
                    ok = await idle_until(lambda r=record: bool(_seen(r, TurnEnd)), settle_s + 2.5)
                    record.timed_out = not ok and not _seen(record, TranscriptFinal)
                    break  # the rest of the session is no use: close it (cancels its reply)
                if mode == "bargein":
                    # `metrics.turn` only says all the reply's audio was *sent* (the server sends ahead of
                    # playback): the barge-in goes in while the reply is still audible at the client
                    def playing_long_enough(r=record) -> bool:
                        if conn.player.position(clock()) >= barge_after_s:
                            return True
                        return bool(_seen(r, MetricsTurn)) and not conn.player.playing(clock())

                    ok = await idle_until(playing_long_enough, max_wait_s)
                    if not ok or not conn.player.playing(clock()) or barge is None:
                        record.timed_out = not ok
                        break
                    record.barge_name = barge.name

                    def at_barge(t: float, r: TurnRecord = record) -> None:
                        r.barge_speech_start_at_s = t

                    record.barge_offset_s = await send_utterance(barge, at_barge)
                    # over once the reply is interrupted (or, failing that, has finished anyway)
                    ok = await idle_until(lambda r=record: bool(_seen(r, ReplyInterrupted) or _seen(r, MetricsTurn)),
                                          max_wait_s)
                    record.timed_out = not ok
                    break

                def turn_over(r=record) -> bool:
                    if _seen(r, MetricsTurn):
                        return not conn.player.playing(clock())
                    return False

                def nothing_heard(r=record) -> bool:
                    """No reply will come: the VAD heard no speech at all, or the utterance had no
                    words (an empty final) and no turn followed it."""
                    if _seen(r, ReplyStarted) or _seen(r, TurnEnd):
                        return False
                    if not _seen(r, VADSpeechStarted):
                        return clock() - r.audio_end_at_s >= settle_s
                    finals = [t for t, k, p in r.events if k == TranscriptFinal.type]
                    if finals and not any((p.get("text") or "").strip() for _, k, p in r.events
                                          if k == TranscriptFinal.type):
                        return clock() - finals[-1] >= settle_s
                    return False

                ok = await idle_until(lambda: turn_over() or nothing_heard(), max_wait_s)
                record.timed_out = not ok
                if n + 1 < len(turns):
                    await idle_until(lambda: not conn.player.playing(clock()), 10.0)
        finally:
            conn.record = None
            with contextlib.suppress(Exception):
                await client.end()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2.0)
            receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await receiver
    return records


class _Pacer:
    """Real-time pace: the k-th frame leaves at start + k * 20 ms (catching up after a stall, as a
    microphone's buffered frames would)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.start: float | None = None
        self.sent = 0

    async def wait(self) -> None:
        now = self.clock()
        if self.start is None:
            self.start = now
        due = self.start + self.sent * FRAME_S
        self.sent += 1
        if due > now:
            await asyncio.sleep(due - now)
