"""One websocket client of the server: its frames go into its `Session`, the Session's events come out.

Every bad frame gets an `error` event and the session goes on; a client that goes away has all of its
session's tasks cancelled at once; one that reads too slowly is closed (headstart/server/send_lag.py);
one that sends audio beyond its allowance (headstart/server/rate_limit.py) gets one `error`
"rate_limited" and a close with 1008. The binary frames are one byte stream (`PCM16Stream`): a sample
split across two frames is joined. On shutdown the server drains each connection (`drain`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from headstart.audio import SAMPLE_RATE_HZ, AudioError, AudioFrame
from headstart.clock import Clock
from headstart.server import protocol as wire
from headstart.server.config import ServerConfig
from headstart.server.protocol import PCM16Stream, ProtocolError, encode_server_event, error_event, parse_client_text
from headstart.server.rate_limit import AudioRateLimit
from headstart.server.send_lag import SendLag
from headstart.server.session_frames import session_frames
from headstart.session.components import Components

log = logging.getLogger("headstart.server.connection")


class Connection:
    """One websocket client: reads frames into its Session, writes the Session's events out.

    `release` gives the connection's place in the server's `max_sessions` back (called once, by
    `release_slot`). `listener`: the Session's listener factory (None: the default)."""

    def __init__(self, ws: Any, components: Components, config: ServerConfig, clock: Clock,
                 release: Callable[[], None], listener: Any = None) -> None:
        self.ws = ws
        self.components = components
        self.config = config
        self.clock = clock
        self.listener = listener
        self.session: Any = None  # a headstart.session.session.Session once started
        self.writer: asyncio.Task | None = None
        self.limit = AudioRateLimit(clock, config.max_audio_speed, config.audio_burst_s)
        self.audio = PCM16Stream()  # the client's audio bytes, joined across frames
        self.ended = asyncio.Event()  # all tasks of this connection are over
        self.output = SendLag(ws, config)
        self.watchdog: asyncio.Task | None = None  # the send-lag probe (`_watch_send_lag`)
        self.slow_consumer = False
        self.refused = False  # closed for audio beyond its allowance: what it still sends is dropped
        self.draining = False  # the server is shutting down (`drain`): audio is no longer taken
        self._closing: asyncio.Task | None = None  # the close after "rate_limited"
        self._release = release
        self._slot_held = True

    def release_slot(self) -> None:
        """Give the connection's place in `max_sessions` back (once)."""
        if self._slot_held:
            self._slot_held = False
            self._release()

    async def run(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for message in self.ws:
                if self.slow_consumer or self.refused:
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
        if self._closing is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._closing
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
        if wire.looks_like_json(data):
            await self._error("unexpected_binary", "JSON events must be sent as text frames, not binary")
            return
        if self.session is None:
            await self._error("not_started", 'send {"type": "session.start"} before audio')
            return
        if self.draining:
            return  # the server is shutting down: no new turn (the client was told: session.ending)
        samples = self.audio.feed(data)  # an odd trailing byte waits for the next frame
        if samples.shape[0] == 0:
            return
        if not self.limit.allow(samples.shape[0] / SAMPLE_RATE_HZ):
            await self._refuse_fast_audio()
            return
        try:
            await self.session.push_audio(AudioFrame(samples, SAMPLE_RATE_HZ))
        except (AudioError, RuntimeError) as exc:
            await self._error("bad_audio", str(exc))

    async def _refuse_fast_audio(self) -> None:
        """Audio beyond the allowance: end the session (its slot is free), send one `error`
        "rate_limited" behind what is queued, then close with 1008. Dropping frames instead would cut
        words out of the user's speech and answer every frame with an error."""
        self.refused = True
        log.warning("closing a client that sent audio faster than allowed (%g s at once, then %gx real time)",
                    self.limit.burst_s, self.limit.speed)
        await self._stop_output()
        await self._error("rate_limited", f"audio came faster than the server takes it: at most "
                          f"{self.limit.burst_s:g} s of audio at once, then {self.limit.speed:g}x real time; "
                          "the session is over (close 1008)")
        self._closing = asyncio.create_task(self.ws.close(wire.CLOSE_POLICY, "audio faster than allowed"),
                                            name="server-close-refused")

    async def _stop_output(self) -> None:
        """Stop the writer and the session (no more model work for it) and free the slot."""
        if self.writer is not None:
            self.writer.cancel()  # its frame is in the socket's buffer already: nothing half-sent
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.writer
        if self.session is not None:
            await self.session.aclose()
        self.release_slot()

    async def drain(self, notice: str) -> None:
        """The server is shutting down: send `notice` (the `session.ending` frame) to a started session,
        take no more audio, let the reply in progress finish (`Session.drain`) and its last events
        leave, then close with 1001. Returns once the close is done; the caller bounds it (cancelling
        it stops waiting; the caller then closes the socket)."""
        from websockets.exceptions import ConnectionClosed

        self.draining = True
        if self.slow_consumer or self.refused:
            return  # already closing
        with contextlib.suppress(ConnectionClosed):
            if self.session is not None:
                await self.output.send(notice)
                await self.session.drain()
                if self.writer is not None:
                    await asyncio.wait({self.writer})  # it ends with the session's events
            await self.ws.close(wire.CLOSE_GOING_AWAY, "the server is shutting down")

    async def _on_text(self, text: str) -> bool:
        """Handle one text frame; True when the client ended the session."""
        try:
            message = parse_client_text(text)
        except ProtocolError as exc:
            await self._error(exc.code, exc.message)
            return False
        if isinstance(message, wire.SessionStart):
            if self.session is not None:
                await self._error("already_started", "this connection already has a session")
                return False
            if not self.draining:  # shutting down: no new session, the close (1001) follows
                await self._start()
            return False
        if isinstance(message, wire.SessionEnd):
            await self.ws.close(wire.CLOSE_ENDED, "session ended")
            return True
        if self.session is None:
            await self._error("not_started", f'send {{"type": "session.start"}} before {message.type}')
            return False
        session = self.session
        if isinstance(message, wire.InputCommit):
            await session.commit()
        elif isinstance(message, wire.InputClear):
            await session.clear_input()
        elif isinstance(message, wire.PlaybackPosition):
            session.playback_position(message.reply_id, message.position_ms / 1000.0)
        elif isinstance(message, wire.ReplyInterrupt):
            reply_id = message.reply_id
            if not await session.interrupt("client", reply_id) and reply_id is not None:
                await self._error("stale_reply", f"reply {reply_id!r} is not in progress; nothing was interrupted")
        elif isinstance(message, wire.SessionReset):
            await session.reset()
        return False

    async def _start(self) -> None:
        from headstart.session.session import Session

        c = self.config
        try:
            self.session = Session(
                self.components, clock=self.clock, playback_lead_s=c.playback_lead_s,
                audio_frame_s=c.audio_frame_s, realtime_playback=True, listener=self.listener,
            )
        except Exception as exc:  # a session that cannot start: the client hears why, then the close (1011)
            await self._error("internal", f"the session could not start: {type(exc).__name__}: {exc}")
            raise
        tts = self.components.tts  # a Synthesizer (headstart/seams.py), or None: components without speech
        tts_rate = int(tts.sample_rate) if tts is not None else 0
        await self.ws.send(encode_server_event(wire.SessionStarted(
            protocol=wire.PROTOCOL_VERSION, session_id=f"s{id(self.session):x}",
            input=wire.AudioFormat(SAMPLE_RATE_HZ, wire.INPUT_FORMAT),
            output=wire.AudioFormat(tts_rate, wire.INPUT_FORMAT),
            limits=wire.SessionLimits(c.max_message_bytes, c.max_audio_speed, wire.ms(c.audio_burst_s) or 0.0),
            llm=wire.LLMInfo(**self.components.llm_info()),
        )))
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
                    code = getattr(exc, "code", None)
                    code = code if isinstance(code, str) else "internal"
                    await self.ws.send(error_event(code, f"{type(exc).__name__}: {exc}"))
                    continue
                try:
                    frames = session_frames(event)
                except Exception as exc:  # noqa: BLE001 - one event the wire cannot carry must not end the output
                    log.exception("a %s event could not be encoded", type(event).__name__)
                    frames = [error_event("internal", f"an event could not be sent: {type(exc).__name__}: {exc}")]
                for frame in frames:
                    await self.output.send(frame)
        except ConnectionClosed:
            return

    async def _watch_send_lag(self) -> None:
        if await self.output.watch():
            await self._close_slow_consumer()

    async def _close_slow_consumer(self) -> None:
        """Stop the output and the session, free the slot, then close behind the queued data."""
        self.slow_consumer = True
        log.warning("closing a slow consumer: sent data unread for %.1f s", self.config.max_send_lag_s)
        await self._stop_output()
        await self.output.close_behind_backlog()
