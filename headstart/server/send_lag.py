"""The slow-consumer policy (`ServerConfig.max_send_lag_s`): how the server notices a client that reads
too slowly, and how it closes that connection behind the data already queued for it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from headstart.server.config import ServerConfig
from headstart.server.protocol import CLOSE_POLICY, error_event
from headstart.server.sockets import queued_bytes


class SendLag:
    """Sends a connection's output frames and measures how far the client's reading lags behind them.

    `send(frame)` is the only way output leaves; `watch()` probes while output flows; once it says the
    client lags, `close_behind_backlog()` ends the connection."""

    def __init__(self, ws: Any, config: ServerConfig) -> None:
        self.ws = ws
        self.config = config
        self.sent_frames = 0  # frames handed to the socket so far
        self.sending = False  # a send is waiting for the socket (the client reads too slowly)

    async def send(self, frame: str | bytes) -> None:
        self.sending = True
        await self.ws.send(frame)
        self.sending = False
        self.sent_frames += 1

    async def watch(self) -> bool:
        """While output flows, a ping goes out behind it every `send_probe_s`; its pong comes back only
        once the client has read all that was sent before it. Returns True when no pong came within
        `max_send_lag_s` (the client lags), False when the connection closed first."""
        from websockets.exceptions import ConnectionClosed

        c = self.config
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
                    return True
        except ConnectionClosed:
            return False

    async def close_behind_backlog(self) -> None:
        """Send the `error` "slow_consumer" and the close (1008) behind what is queued, and give the
        client `slow_close_s` to read its way to them; one that stops reading (the queue does not
        shrink for `max_send_lag_s`) has its TCP connection dropped. Call it once the output stopped."""
        from websockets.exceptions import ConnectionClosed

        c = self.config
        self.ws.close_timeout = c.slow_close_s  # the close frame waits behind the backlog

        async def close() -> None:
            with contextlib.suppress(ConnectionClosed):
                await self.ws.send(error_event(
                    "slow_consumer", f"the client read what was sent more than {c.max_send_lag_s:g} s late; "
                    "read every message as it arrives (play audio from a buffer of your own)"))
                await self.ws.close(CLOSE_POLICY, "slow consumer")

        closing = asyncio.create_task(close(), name="server-slow-close")
        loop = asyncio.get_running_loop()
        started = progress_at = loop.time()
        queued = queued_bytes(self.ws)
        try:
            while not closing.done():
                await asyncio.wait({closing}, timeout=c.send_probe_s)
                now, before, queued = loop.time(), queued, queued_bytes(self.ws)
                if queued < before or queued == 0:
                    progress_at = now  # the client is still reading its way to the close frame
                if now - progress_at > c.max_send_lag_s or now - started > c.slow_close_s:
                    self.ws.transport.abort()  # it stopped reading: drop the TCP connection
                    break
        finally:
            await cancel_task(closing)


async def cancel_task(task: asyncio.Task) -> None:
    """Cancel `task` if it runs and wait for it, whatever it raises."""
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
