"""The Python client of `headstart serve`'s protocol (headstart/server/protocol.py, docs/protocol.md).

    client = await VoiceClient.open("ws://127.0.0.1:8765/ws", token=token)
    await client.start()
    await client.send_audio(samples)              # float32 mono 16 kHz, 20 ms a frame, at real-time pace
    async for item in client:                     # typed server events, and reply audio frames
        if isinstance(item, ReplyAudioFrame): ...
        elif isinstance(item, TranscriptFinal): ...
    await client.end(); await client.close()

Sending and receiving may run in different tasks. The mic app, the latency harness and the scripts all
talk to the server through this class, so no client spells a message by hand.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from headstart.audio import pcm16_to_float32
from headstart.server.protocol import (
    INPUT_FORMAT,
    INPUT_SAMPLE_RATE_HZ,
    ClientMessage,
    InputClear,
    InputCommit,
    PlaybackPosition,
    ProtocolError,
    ReplyAudioStart,
    ReplyInterrupt,
    ServerEvent,
    SessionEnd,
    SessionReset,
    SessionStart,
    decode_server_event,
    encode_audio,
    encode_client_message,
)


class WebSocket(Protocol):
    """The part of a websocket connection the client uses (`websockets`' ClientConnection, or the
    harness's in-memory one). `recv` and iteration raise / end with websockets' ConnectionClosed."""

    @property
    def close_code(self) -> int | None: ...  # once closed: the close frame's code

    @property
    def close_reason(self) -> str | None: ...

    async def send(self, message: str | bytes) -> None: ...

    async def recv(self) -> str | bytes: ...

    def __aiter__(self) -> AsyncIterator[str | bytes]: ...

    async def close(self, code: int = 1000, reason: str = "") -> None: ...


@dataclass(frozen=True, slots=True)
class ReplyAudioFrame:
    """One binary frame of reply audio: little-endian PCM16 mono at `sample_rate` Hz, of reply
    `reply_id` (both from the last `reply.audio.start`; None / 0 before any)."""

    reply_id: str | None
    sample_rate: int
    pcm16: bytes

    @property
    def duration_s(self) -> float:
        return len(self.pcm16) / 2 / self.sample_rate if self.sample_rate > 0 else 0.0

    def samples(self) -> np.ndarray:
        """float32 (num_samples,) scaled by 1/32768. AudioError for an odd number of bytes."""
        return pcm16_to_float32(self.pcm16)


Received = ServerEvent | ReplyAudioFrame


class ClientConnectError(ConnectionError):
    """The server cannot be reached, or refused the websocket (a bad token: 401, a browser origin not
    allowed: 403, every session taken: 503), or the handshake timed out."""


@contextlib.asynccontextmanager
async def open_connection(url: str, *, token: str | None = None, connect: Callable[..., Any] | None = None,
                          open_timeout_s: float = 10.0, **options: Any) -> AsyncIterator[WebSocket]:
    """The websocket to `url` (ws://HOST:PORT/ws), closed on exit. `token`: the server's bearer token
    (sent as `Authorization: Bearer`). `connect(url, **options)`: an async context manager that opens
    it (default `websockets.asyncio.client.connect`; any size of message is accepted); `options` go
    to it (compression, ping_interval, close_timeout, ...).

    Raises what `connect` raises: OSError, TimeoutError, websockets' InvalidHandshake / InvalidURI."""
    if connect is None:
        from websockets.asyncio.client import connect as websockets_connect

        connect = websockets_connect
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with connect(url, max_size=None, open_timeout=open_timeout_s, additional_headers=headers,
                       **options) as ws:
        yield ws


class VoiceClient:
    """One session's websocket, spoken in the protocol's terms.

    Iterating (or `receive`) gives `ServerEvent`s and `ReplyAudioFrame`s in arrival order; events of a
    type this client does not know (a newer server) are skipped; iteration ends when the connection
    closes (`close_code`, `close_reason` say how)."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.reply_id: str | None = None  # the reply whose audio is arriving (its reply.audio.start)
        self.reply_sample_rate = 0
        self._stack: contextlib.AsyncExitStack | None = None

    @classmethod
    async def open(cls, url: str, *, token: str | None = None, connect: Callable[..., Any] | None = None,
                   open_timeout_s: float = 10.0, **options: Any) -> VoiceClient:
        """Connect to `url` (`open_connection`'s arguments); `close()` closes the connection.

        Raises:
            ClientConnectError: "cannot connect to URL: why".
        """
        from websockets.exceptions import WebSocketException

        stack = contextlib.AsyncExitStack()
        try:
            ws = await stack.enter_async_context(open_connection(
                url, token=token, connect=connect, open_timeout_s=open_timeout_s, **options))
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise ClientConnectError(f"cannot connect to {url}: {exc}") from exc
        client = cls(ws)
        client._stack = stack
        return client

    async def __aenter__(self) -> VoiceClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection (the closing handshake; 1000)."""
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()
        else:
            await self.ws.close()

    @property
    def close_code(self) -> int | None:
        """The close frame's code once the connection is closed (None before)."""
        return self.ws.close_code

    @property
    def close_reason(self) -> str:
        return self.ws.close_reason or ""

    # -- client -> server --------------------------------------------------------------------------

    async def send(self, message: ClientMessage) -> None:
        await self.ws.send(encode_client_message(message))

    async def start(self) -> None:
        """`session.start`, declaring 16 kHz PCM16; the server answers `session.started`."""
        await self.send(SessionStart(sample_rate=INPUT_SAMPLE_RATE_HZ, format=INPUT_FORMAT))

    async def send_audio(self, samples: np.ndarray) -> None:
        """One frame of the user's audio: float32 (num_samples,) in [-1, 1] at 16 kHz (20 ms = 320
        samples recommended), sent as PCM16."""
        await self.ws.send(encode_audio(samples))

    async def send_pcm16(self, data: bytes) -> None:
        """One frame of the user's audio already as little-endian PCM16 mono 16 kHz bytes."""
        await self.ws.send(data)

    async def commit(self) -> None:
        """`input.commit`: the user ends the turn now (push-to-talk released)."""
        await self.send(InputCommit())

    async def clear(self) -> None:
        """`input.clear`: drop the user audio of the turn in progress."""
        await self.send(InputClear())

    async def report_playback(self, reply_id: str, position_ms: float) -> None:
        """`playback.position`: `position_ms` of reply `reply_id`'s audio has been played."""
        await self.send(PlaybackPosition(reply_id=reply_id, position_ms=position_ms))

    async def interrupt(self, reply_id: str | None = None) -> None:
        """`reply.interrupt`: stop reply `reply_id` (None: whatever reply is in progress)."""
        await self.send(ReplyInterrupt(reply_id=reply_id))

    async def reset(self) -> None:
        """`session.reset`: forget the conversation and any turn in progress."""
        await self.send(SessionReset())

    async def end(self) -> None:
        """`session.end`: the server closes the connection (1000)."""
        await self.send(SessionEnd())

    # -- server -> client --------------------------------------------------------------------------

    async def receive(self) -> Received:
        """The next event or reply audio frame. Raises websockets' ConnectionClosed once closed."""
        while True:
            received = self._decode(await self.ws.recv())
            if received is not None:
                return received

    def __aiter__(self) -> AsyncIterator[Received]:
        return self._received()

    async def _received(self) -> AsyncIterator[Received]:
        from websockets.exceptions import ConnectionClosed

        with contextlib.suppress(ConnectionClosed):
            async for message in self.ws:
                received = self._decode(message)
                if received is not None:
                    yield received

    def _decode(self, message: str | bytes) -> Received | None:
        if isinstance(message, bytes):
            return ReplyAudioFrame(self.reply_id, self.reply_sample_rate, message)
        try:
            event = decode_server_event(message)
        except ProtocolError:
            return None  # not an event this client knows
        if isinstance(event, ReplyAudioStart):
            self.reply_id, self.reply_sample_rate = event.reply_id, int(event.sample_rate)
        return event
