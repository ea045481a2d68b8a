"""`headstart serve`: the voice assistant over websockets (protocol: headstart/server/protocol.py, README).

One process loads the models once (`Components`) and shares them; each websocket connection on `/ws`
gets its own `Session`. The same server answers `GET /healthz` and serves the files of headstart/server/web/.

Defences: binds 127.0.0.1 by default; browser origins must be allowed (default: localhost pages);
optional bearer token (`Authorization: Bearer T` or `?token=T`, as browsers cannot set headers on a
websocket); messages over `max_message_bytes` close the connection with 1009; audio beyond
`max_audio_speed` x real time (after a burst allowance) is dropped with an `error` event; at most
`max_sessions` sessions (503 at the handshake, close 1013 in a race); clients choose no files or models
(unknown fields are ignored); static paths cannot leave web/. Every bad frame gets an `error` event and
the session goes on. A client that goes away has all of its session's tasks cancelled at once; one that
reads too slowly (`max_send_lag_s`) gets `slow_consumer` and a close with 1008.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import http
import json
import logging
import mimetypes
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from headstart.audio import SAMPLE_RATE_HZ, AudioError, AudioFrame, float32_to_pcm16
from headstart.clock import Clock, MonotonicClock
from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded, SpeechStarted, TokenDelta
from headstart.server.protocol import (
    INPUT_FORMAT,
    PROTOCOL_VERSION,
    ProtocolError,
    error_event,
    ms,
    parse_audio,
    parse_client_text,
    server_event,
)

log = logging.getLogger("headstart.server.server")

WS_PATH = "/ws"
LOCAL_ORIGINS = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Settings of `headstart serve`.

    Attributes:
        host, port: where to listen (port 0: any free port).
        allowed_origins: browser `Origin`s allowed to connect; empty: pages served from localhost.
            Clients that send no Origin (not browsers) are always allowed: use a token to restrict them.
        token: if set, the bearer token every websocket client must present (ValueError if empty or
            blank: None means no token).
        max_message_bytes: the largest frame accepted; a larger one closes the connection with 1009.
        max_sessions: concurrent sessions; more are refused (HTTP 503 / close 1013).
        max_audio_speed: audio is accepted at most this many times faster than real time ...
        audio_burst_s: ... after a burst of this many seconds of audio.
        playback_lead_s: reply audio leaves at most this far ahead of the client's playback.
        audio_frame_s: reply audio frames of this length (seconds).
        max_send_lag_s: a slow consumer: while the server sends, a ping follows the data every
            `send_probe_s`; a client whose pong does not come back within this many seconds has that
            much unread data queued before it. Its session ends at once (the slot is free), it gets an
            `error` "slow_consumer" and a close with 1008 behind the data already queued, and the TCP
            connection stays open while the client reads its way to them (the data queued for it
            keeps shrinking at least every `max_send_lag_s`), up to `slow_close_s` in all. Before, the
            keepalive failed it with 1011 and dropped the connection 1 s later: 1006 behind the backlog.
        send_probe_s: how often that ping goes out while there is output (seconds).
        slow_close_s: the longest a slow consumer's closing handshake may take (seconds).
        send_buffer_bytes: the socket's send buffer (SO_SNDBUF; None: the OS's, which Linux grows to
            4 MiB): it bounds the backlog a slow consumer must read before its close frame.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    allowed_origins: tuple[str, ...] = ()
    token: str | None = None
    max_message_bytes: int = 64 * 1024
    max_sessions: int = 4
    max_audio_speed: float = 4.0
    # Frames that queue in the socket while this process is busy (a GIL-heavy moment, a slow first
    # use) arrive together: the allowance absorbs a stall of ~5 s of a real-time client.
    audio_burst_s: float = 5.0
    playback_lead_s: float = 1.0
    audio_frame_s: float = 0.1
    # well under the keepalive's 20 s + 20 s, well over a GIL-heavy stall of this process (~5 s)
    max_send_lag_s: float = 10.0
    send_probe_s: float = 1.0
    slow_close_s: float = 300.0
    # reply audio is ~44 kB/s and leaves ~1 s ahead of playback: 64 KiB (Linux doubles it) is plenty
    send_buffer_bytes: int | None = 64 * 1024

    def __post_init__(self) -> None:
        if self.token is not None and not self.token.strip():
            raise ValueError("ServerConfig.token is empty: an empty bearer token would let every client in; "
                             "use None for no token")


def web_dir() -> Path:
    """The folder of static files served at `/` (headstart/server/web)."""
    return Path(__file__).resolve().parent / "web"


class AudioRateLimit:
    """Token bucket over audio seconds: refills `speed` audio-seconds per clock second, holds at most
    `burst_s`. `allow(duration_s)` takes the frame's duration if it fits."""

    def __init__(self, clock: Clock, speed: float, burst_s: float) -> None:
        self._clock = clock
        self.speed = speed
        self.burst_s = burst_s
        self._tokens = burst_s
        self._at = clock.now()

    def allow(self, duration_s: float) -> bool:
        now = self._clock.now()
        self._tokens = min(self.burst_s, self._tokens + (now - self._at) * self.speed)
        self._at = now
        if duration_s <= self._tokens + 1e-9:
            self._tokens -= duration_s
            return True
        return False


class VoiceServer:
    """The websocket server over shared `components` (a `headstart.session.session.Components`).

    Use: `await server.start()` (returns the bound port), ..., `await server.close()`.
    `listener`: each session's listener factory (`Session`'s `listener`; None: the default `Listener`
    on the components' VAD and ASR), for harnesses and tests that script the listening stage.
    """

    def __init__(self, components, config: ServerConfig | None = None, clock: Clock | None = None,
                 static_dir: Path | None = None, listener=None) -> None:
        self.components = components
        self.listener = listener
        self.config = config or ServerConfig()
        self.clock = clock or MonotonicClock()
        self.static_dir = (static_dir or web_dir()).resolve()
        self.active_sessions = 0
        self.connections: set[_Connection] = set()
        self._server = None
        self.port: int | None = None

    async def start(self) -> int:
        from websockets.asyncio.server import serve

        c = self.config
        origins = [None, *c.allowed_origins] if c.allowed_origins else [None, LOCAL_ORIGINS]
        self._server = await serve(
            self._handle, c.host, c.port, origins=origins, process_request=self._process_request,
            max_size=c.max_message_bytes, compression=None, ping_interval=20, ping_timeout=20,
            close_timeout=1, logger=log,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        await self._server.serve_forever()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # -- HTTP: /healthz, static files, the /ws gate ------------------------------------------------

    def _process_request(self, connection, request):
        path, _, query = request.path.partition("?")
        if path == WS_PATH:
            if self.config.token is not None and not self._authorized(request, query):
                return _response(connection, http.HTTPStatus.UNAUTHORIZED, b"a valid bearer token is required\n")
            if self.active_sessions >= self.config.max_sessions:
                return _response(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, b"too many sessions\n")
            return None
        if path == "/healthz":
            body = json.dumps({"status": "ok", "sessions": self.active_sessions,
                               "max_sessions": self.config.max_sessions}).encode()
            return _response(connection, http.HTTPStatus.OK, body, "application/json")
        return self._static(connection, path)

    def _authorized(self, request, query: str) -> bool:
        expected = self.config.token.encode()
        header = request.headers.get("Authorization", "")
        given = header[7:].strip() if header[:7].lower() == "bearer " else ""
        if not given:
            given = urllib.parse.parse_qs(query).get("token", [""])[0]
        return hmac.compare_digest(given.encode(), expected)

    def _static(self, connection, path: str):
        not_found = _response(connection, http.HTTPStatus.NOT_FOUND, b"not found\n")
        name = urllib.parse.unquote(path).lstrip("/") or "index.html"
        parts = name.split("/")
        if "\x00" in name or "\\" in name or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
            return not_found
        target = (self.static_dir / name).resolve()
        if not target.is_relative_to(self.static_dir) or not target.is_file():
            return not_found
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return _response(connection, http.HTTPStatus.OK, target.read_bytes(), kind)

    # -- websocket sessions ------------------------------------------------------------------------

    async def _handle(self, ws) -> None:
        if ws.request.path.partition("?")[0] != WS_PATH:
            await ws.close(1008, "the websocket endpoint is /ws")
            return
        if self.active_sessions >= self.config.max_sessions:
            with contextlib.suppress(Exception):
                await ws.send(error_event("busy", "too many sessions; try again later"))
            await ws.close(1013, "too many sessions")
            return
        self.active_sessions += 1
        _bound_send_buffer(ws, self.config.send_buffer_bytes)
        connection = _Connection(self, ws)
        self.connections.add(connection)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)
            connection.release_slot()

    def _release(self) -> None:
        self.active_sessions -= 1


def _bound_send_buffer(ws, num_bytes: int | None) -> None:
    """Cap the socket's send buffer (SO_SNDBUF), which Linux otherwise grows to 4 MiB on a fast path:
    a slow consumer's backlog, which it must read before it can see its close frame, stays small."""
    import socket

    transport = getattr(ws, "transport", None)  # None: an in-memory connection (bench conversation --simulate)
    sock = transport.get_extra_info("socket") if num_bytes and transport is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, num_bytes)


def _queued_bytes(ws) -> int:
    """Bytes this side still holds for the client: the transport's buffer plus, on Linux, the
    socket's send queue (SIOCOUTQ: not yet acknowledged by the client's TCP)."""
    queued = ws.transport.get_write_buffer_size()
    sock = ws.transport.get_extra_info("socket")
    if sock is not None:
        try:
            import fcntl
            import struct
            import termios

            queued += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        except (ImportError, OSError, AttributeError):
            pass
    return queued


async def _cancel_task(task: asyncio.Task) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


def _response(connection, status: http.HTTPStatus, body: bytes, content_type: str = "text/plain; charset=utf-8"):
    response = connection.respond(status, "")
    response.body = body
    del response.headers["Content-Length"]
    del response.headers["Content-Type"]
    response.headers["Content-Length"] = str(len(body))
    response.headers["Content-Type"] = content_type
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


class _Connection:
    """One websocket client: reads frames into its Session, writes the Session's events out."""

    def __init__(self, server: VoiceServer, ws) -> None:
        self.server = server
        self.ws = ws
        self.session = None
        self.writer: asyncio.Task | None = None
        self.limit = AudioRateLimit(server.clock, server.config.max_audio_speed, server.config.audio_burst_s)
        self.ended = asyncio.Event()  # all tasks of this connection are over
        self.watchdog: asyncio.Task | None = None  # the send-lag probe (`_watch_send_lag`)
        self.sent_frames = 0  # frames handed to the socket so far
        self.sending = False  # a send is waiting for the socket (the client reads too slowly)
        self.slow_consumer = False
        self._slot_held = True

    def release_slot(self) -> None:
        """Give the connection's place in `max_sessions` back (once)."""
        if self._slot_held:
            self._slot_held = False
            self.server._release()

    async def run(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for message in self.ws:
                if self.slow_consumer:
                    continue  # its session is over; only the closing handshake is left
                if isinstance(message, bytes):
                    await self._on_binary(message)
                else:
                    if await self._on_text(message):
                        break
        except ConnectionClosed:
            pass
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        if self.watchdog is not None and not self.slow_consumer:
            self.watchdog.cancel()
        if self.watchdog is not None:  # a slow consumer's close is bounded by `slow_close_s`
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.watchdog
        if self.session is not None:
            await self.session.aclose()
        if self.writer is not None:
            self.writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.writer
        self.ended.set()

    async def _error(self, code: str, message: str) -> None:
        from websockets.exceptions import ConnectionClosed

        with contextlib.suppress(ConnectionClosed):
            await self.ws.send(error_event(code, message))

    async def _on_binary(self, data: bytes) -> None:
        if _looks_like_json(data):
            await self._error("unexpected_binary", "JSON events must be sent as text frames, not binary")
            return
        try:
            samples = parse_audio(data)
        except ProtocolError as exc:
            await self._error(exc.code, exc.message)
            return
        if self.session is None:
            await self._error("not_started", 'send {"type": "session.start"} before audio')
            return
        if not self.limit.allow(samples.shape[0] / SAMPLE_RATE_HZ):
            await self._error("rate_limited", f"audio is accepted at most {self.limit.speed:g}x faster than "
                              "real time; this frame was dropped")
            return
        try:
            await self.session.push_audio(AudioFrame(samples, SAMPLE_RATE_HZ))
        except (AudioError, RuntimeError) as exc:
            await self._error("bad_audio", str(exc))

    async def _on_text(self, text: str) -> bool:
        """Handle one text frame; True when the client ended the session."""
        try:
            message = parse_client_text(text)
        except ProtocolError as exc:
            await self._error(exc.code, exc.message)
            return False
        kind = message.type
        if kind == "session.start":
            if self.session is not None:
                await self._error("already_started", "this connection already has a session")
                return False
            await self._start()
            return False
        if kind == "session.end":
            await self.ws.close(1000, "session ended")
            return True
        if self.session is None:
            await self._error("not_started", f'send {{"type": "session.start"}} before {kind}')
            return False
        session = self.session
        if kind == "input.commit":
            await session.commit()
        elif kind == "input.clear":
            await session.clear_input()
        elif kind == "playback.position":
            session.playback_position(message.get("reply_id"), message.get("position_ms") / 1000.0)
        elif kind == "reply.interrupt":
            reply_id = message.get("reply_id")
            if not await session.interrupt("client", reply_id) and reply_id is not None:
                await self._error("stale_reply", f"reply {reply_id!r} is not in progress; nothing was interrupted")
        elif kind == "session.reset":
            await session.reset()
        return False

    async def _start(self) -> None:
        from headstart.session.session import Session

        c = self.server.config
        try:
            self.session = Session(
                self.server.components, clock=self.server.clock, playback_lead_s=c.playback_lead_s,
                audio_frame_s=c.audio_frame_s, realtime_playback=True, listener=self.server.listener,
            )
        except Exception as exc:  # a session that cannot start: the client hears why, then the close (1011)
            await self._error("internal", f"the session could not start: {type(exc).__name__}: {exc}")
            raise
        tts = self.server.components.tts  # a Synthesizer (headstart/seams.py), or None: components without speech
        tts_rate = int(tts.sample_rate) if tts is not None else 0
        await self.ws.send(server_event(
            "session.started", protocol=PROTOCOL_VERSION, session_id=f"s{id(self.session):x}",
            input={"sample_rate": SAMPLE_RATE_HZ, "format": INPUT_FORMAT},
            output={"sample_rate": tts_rate, "format": INPUT_FORMAT},
            limits={"max_message_bytes": c.max_message_bytes, "max_audio_speed": c.max_audio_speed},
            llm=self.server.components.llm_info(),
        ))
        self.writer = asyncio.create_task(self._write(), name="server-writer")
        if callable(getattr(self.ws, "ping", None)):  # a network connection (not an in-memory one)
            self.watchdog = asyncio.create_task(self._watch_send_lag(), name="server-send-lag")

    async def _write(self) -> None:
        from websockets.exceptions import ConnectionClosed

        session = self.session
        try:
            while True:
                try:
                    event = await session.__anext__()
                except StopAsyncIteration:
                    return
                except Exception as exc:  # noqa: BLE001 - a failed stage: tell the client, go on
                    # a stage may name its failure (the remote LLM: "llm_unavailable", ...); else "internal"
                    code = exc.code if isinstance(getattr(exc, "code", None), str) else "internal"
                    await self.ws.send(error_event(code, f"{type(exc).__name__}: {exc}"))
                    continue
                for frame in self._encode(event):
                    self.sending = True
                    await self.ws.send(frame)
                    self.sending = False
                    self.sent_frames += 1
        except ConnectionClosed:
            return

    async def _watch_send_lag(self) -> None:
        """The slow-consumer policy (`ServerConfig.max_send_lag_s`): while output flows, a ping goes
        out behind it every `send_probe_s`; its pong comes back only once the client has read all that
        was sent before it. No pong within `max_send_lag_s`: `_close_slow_consumer`."""
        from websockets.exceptions import ConnectionClosed

        c = self.server.config
        seen = 0
        try:
            while True:
                await asyncio.sleep(c.send_probe_s)
                if not self.sending and self.sent_frames == seen:
                    continue  # nothing sent since the last probe: nothing can lag behind
                seen = self.sent_frames
                pong = None
                try:
                    async with asyncio.timeout(c.max_send_lag_s):
                        pong = await self.ws.ping()  # waits while the socket's buffer is full
                        await asyncio.shield(pong)
                except TimeoutError:
                    # after a stall of this process the timer may run before the pong is read: look again
                    await asyncio.sleep(c.send_probe_s)
                    if pong is not None and pong.done():
                        continue
                    await self._close_slow_consumer()
                    return
        except ConnectionClosed:
            return

    async def _close_slow_consumer(self) -> None:
        """Stop the output, then send the `error` and the close (1008) behind what is queued, and give
        the client `slow_close_s` to read its way to them before the TCP connection is dropped."""
        from websockets.exceptions import ConnectionClosed

        c = self.server.config
        self.slow_consumer = True
        log.warning("closing a slow consumer: sent data unread for %.1f s", c.max_send_lag_s)
        if self.writer is not None:
            self.writer.cancel()  # its frame is in the socket's buffer already: nothing half-sent
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.writer
        if self.session is not None:
            await self.session.aclose()  # no more model work for it
        self.release_slot()
        self.ws.close_timeout = c.slow_close_s  # the close frame waits behind the backlog

        async def close() -> None:
            with contextlib.suppress(ConnectionClosed):
                await self.ws.send(error_event(
                    "slow_consumer", f"the client read what was sent more than {c.max_send_lag_s:g} s late; "
                    "read every message as it arrives (play audio from a buffer of your own)"))
                await self.ws.close(1008, "slow consumer")

        closing = asyncio.create_task(close(), name="server-slow-close")
        loop = asyncio.get_running_loop()
        started = progress_at = loop.time()
        queued = _queued_bytes(self.ws)
        try:
            while not closing.done():
                await asyncio.wait({closing}, timeout=c.send_probe_s)
                now, before, queued = loop.time(), queued, _queued_bytes(self.ws)
                if queued < before or queued == 0:
                    progress_at = now  # the client is still reading its way to the close frame
                if now - progress_at > c.max_send_lag_s or now - started > c.slow_close_s:
                    self.ws.transport.abort()  # it stopped reading: drop the TCP connection
                    break
        finally:
            await _cancel_task(closing)

    def _encode(self, event) -> list[str | bytes]:
        from headstart.session.session import (
            ReplyAudio,
            ReplyAudioStart,
            ReplyInterrupted,
            ReplyPaused,
            ReplyResumed,
            ReplyStarted,
            TimerFired,
            TurnCompleted,
        )

        if isinstance(event, ReplyAudio):
            return [float32_to_pcm16(event.frame.samples)]
        if isinstance(event, TokenDelta):
            return [server_event("reply.text.delta", reply_id=event.reply_id, text=event.text)]
        if isinstance(event, SpeechStarted):
            return [server_event("vad.speech_started", audio_ms=ms(event.audio_s))]
        if isinstance(event, SpeechEnded):
            return [server_event("vad.speech_stopped", audio_ms=ms(event.audio_s))]
        if isinstance(event, PartialTranscript):
            return [server_event("transcript.partial", text=event.text, committed=event.committed,
                                 pending=event.pending, audio_ms=ms(event.audio_end_s))]
        if isinstance(event, FinalTranscript):
            return [server_event("transcript.final", text=event.text, audio_ms=ms(event.audio_end_s))]
        if isinstance(event, EndOfTurn):
            return [server_event("turn.end", audio_ms=ms(event.audio_s), eou_probability=event.eou_probability)]
        if isinstance(event, ReplyStarted):
            return [server_event("reply.started", reply_id=event.reply_id, transcript=event.transcript)]
        if isinstance(event, ReplyAudioStart):
            return [server_event("reply.audio.start", reply_id=event.reply_id, sample_rate=event.sample_rate,
                                 format=INPUT_FORMAT)]
        if isinstance(event, ReplyPaused):
            return [server_event("reply.paused", reply_id=event.reply_id)]
        if isinstance(event, ReplyResumed):
            return [server_event("reply.resumed", reply_id=event.reply_id)]
        if isinstance(event, ReplyInterrupted):
            return [server_event("reply.interrupted", reply_id=event.reply_id, heard_text=event.heard_text,
                                 played_ms=ms(event.played_s), reason=event.reason, flush=True)]
        if isinstance(event, TurnCompleted):
            t = event.timeline
            out: list[str | bytes] = []
            if not event.interrupted:
                out.append(server_event("reply.done", reply_id=event.reply_id, text=t.reply,
                                        audio_ms=ms(t.reply_audio_s)))
            out.append(server_event("metrics.turn", **turn_metrics(t, event.reply_id, event.interrupted)))
            return out
        if isinstance(event, TimerFired):
            return [server_event("timer.fired", timer_id=event.timer_id, kind=event.kind, label=event.label,
                                 name=event.name, text=event.text)]
        return []  # the LLM's own ReplyDone: `reply.done` comes once the audio has left


def turn_metrics(t, reply_id: str, interrupted: bool) -> dict:
    """Every latency figure of a turn in ms (None where it did not happen), from its timeline.

    The figures are `TurnTimeline.metrics` in ms: `vad_end_to_*` from the VAD's end of speech (the
    server cannot know the true end of speech; the harness measures that from the client), and those
    that need the true end when the timeline has it."""
    figures = {k.removesuffix("_s") + "_ms": ms(v) for k, v in t.metrics().items()}
    return {
        "reply_id": reply_id,
        "interrupted": interrupted,
        "transcript": t.transcript,
        "reply": t.reply,
        "num_tokens": t.num_tokens,
        "reply_audio_ms": ms(t.reply_audio_s),
        **figures,
        **head_start_metrics(t),
    }


def head_start_metrics(t) -> dict:
    """The head start's figures of a turn: `preemptive` ("hit": a held reply was released, "miss": one
    was dropped, "none"), the session's running `preemptive_hits` / `_misses` / `_wasted_tokens`, and
    on a hit `preemptive_lead_ms` (how long before the end of turn it started), `held_tokens`,
    `held_audio_ms` (ready when the turn ended)."""
    extra = t.extra
    out = {
        "preemptive": extra.get("preemptive", "none"),
        "preemptive_hits": extra.get("preemptive_hits", 0),
        "preemptive_misses": extra.get("preemptive_misses", 0),
        "preemptive_wasted_tokens": extra.get("preemptive_wasted_tokens", 0),
        # the EOU signal: the probability the end of turn was decided on (1.0: none known), and the
        # session's running count of estimates computed / skipped (user speaking, stale, priority)
        "eou_probability": extra.get("eou_probability"),
        "eou_computed": extra.get("eou_computed", 0),
        "eou_skipped": extra.get("eou_skipped", 0),
        "eou_compute_ms": ms(extra.get("eou_compute_s", 0.0)),
    }
    if "preemptive_lead_s" in extra:
        out.update(preemptive_lead_ms=ms(extra["preemptive_lead_s"]), held_tokens=extra.get("held_tokens", 0),
                   held_audio_ms=ms(extra.get("held_audio_s", 0.0)))
    return out


def _looks_like_json(data: bytes) -> bool:
    head, tail = data[:1], data[-1:]
    if head != b"{" or tail != b"}":
        return False
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


# -- the command --------------------------------------------------------------------------------------


def add_arguments(parser) -> None:
    from headstart.config import ASRConfig, LLMConfig, ThreadPlan

    d = ServerConfig()
    parser.add_argument("--host", default=d.host, help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=d.port)
    parser.add_argument("--origin", action="append", default=[], dest="origins",
                        help="a browser Origin allowed to connect (repeatable; default: localhost pages)")
    parser.add_argument("--token", default=None, help="require this bearer token (default: $HEADSTART_TOKEN if set)")
    parser.add_argument("--max-sessions", type=int, default=d.max_sessions)
    parser.add_argument("--max-message-bytes", type=int, default=d.max_message_bytes)
    parser.add_argument("--asr", default=ASRConfig().model, help="ASR preset, folder or hub id (server-side only)")
    parser.add_argument("--llm", default=LLMConfig().model, help="LLM preset, folder or hub id, or a serving engine: openai://HOST:PORT/MODEL (server-side only)")
    parser.add_argument("--max-new-tokens", type=int, default=LLMConfig().max_new_tokens)
    from headstart.cli.options import add_history_argument

    add_history_argument(parser)
    parser.add_argument("--torch-threads", type=int, default=ThreadPlan().torch_threads)
    from headstart.cli.options import add_head_start_argument, add_llm_precision_arguments, add_tts_argument

    add_tts_argument(parser, "server-side: ")
    add_llm_precision_arguments(parser)
    add_head_start_argument(parser)


def run_from_args(args) -> int:
    import os
    import sys

    from headstart.cli.options import build_config
    from headstart.models.store import ModelError
    from headstart.session.session import Components
    from headstart.tts.base import TTSError

    token = args.token if args.token is not None else os.environ.get("HEADSTART_TOKEN")
    if token is not None and not token.strip():
        # `--token "$T"` with T unset would otherwise let every client in
        source = "--token" if args.token is not None else "$HEADSTART_TOKEN"
        print(f"error: {source} is empty: give a non-empty bearer token, or leave it out (and "
              "HEADSTART_TOKEN unset) to serve without one", file=sys.stderr)
        return 2
    if args.max_sessions < 1 or args.max_message_bytes < 1024:
        print("error: --max-sessions must be >= 1 and --max-message-bytes >= 1024", file=sys.stderr)
        return 2
    config = ServerConfig(host=args.host, port=args.port, allowed_origins=tuple(args.origins), token=token,
                          max_sessions=args.max_sessions, max_message_bytes=args.max_message_bytes)
    try:
        components = Components.load(build_config(args), log=lambda msg: print(msg, flush=True))
    except (ModelError, TTSError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    server = VoiceServer(components, config)

    async def main() -> None:
        port = await server.start()
        print(f"headstart serving on http://{config.host}:{port}/ (websocket: ws://{config.host}:{port}{WS_PATH})",
              flush=True)
        await server.serve_forever()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finally:
        components.close()
    return 0
