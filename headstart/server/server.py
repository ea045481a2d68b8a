"""`headstart serve`: the voice assistant over websockets (the wire: headstart/server/protocol.py,
docs/protocol.md).

One process loads the models once (`Components`) and shares them; each websocket connection on `/ws`
gets its own `Session` (headstart/server/connection.py). The same server answers `GET /healthz` and
serves the files of headstart/server/web/.

Defences: binds 127.0.0.1 by default; browser origins must be allowed (default: localhost pages);
optional bearer token (`Authorization: Bearer T` or `?token=T`, as browsers cannot set headers on a
websocket); messages over `max_message_bytes` close the connection with 1009; audio beyond its
allowance (`audio_burst_s` at once, refilled at `max_audio_speed` x real time) gets one `error`
"rate_limited" and a close with 1008; at most `max_sessions` sessions (503 at the handshake, close 1013
in a race); clients choose no files or models (unknown fields are ignored); static paths cannot leave
web/. Every bad frame gets an `error` event and the session goes on. A client that goes away has all of
its session's tasks cancelled at once; one that reads too slowly (`max_send_lag_s`) gets `slow_consumer`
and a close with 1008.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import logging
import re
from pathlib import Path
from typing import Any

from headstart.clock import Clock, MonotonicClock
from headstart.server.config import ServerConfig
from headstart.server.connection import Connection
from headstart.server.http_routes import authorized, respond, static_file
from headstart.server.protocol import CLOSE_FULL, CLOSE_POLICY, WS_PATH, error_event
from headstart.server.sockets import bound_send_buffer
from headstart.session.components import Components

__all__ = ["LOCAL_ORIGINS", "WS_PATH", "ServerConfig", "VoiceServer", "web_dir"]

log = logging.getLogger("headstart.server.server")

LOCAL_ORIGINS = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?")


def web_dir() -> Path:
    """The folder of static files served at `/` (headstart/server/web)."""
    return Path(__file__).resolve().parent / "web"


class VoiceServer:
    """The websocket server over shared `components`.

    Use: `await server.start()` (returns the bound port), ..., `await server.close()`.
    `listener`: each session's listener factory (`Session`'s `listener`; None: the default `Listener`
    on the components' VAD and ASR), for harnesses and tests that script the listening stage.
    """

    def __init__(self, components: Components, config: ServerConfig | None = None, clock: Clock | None = None,
                 static_dir: Path | None = None, listener: Any = None) -> None:
        self.components = components
        self.listener = listener
        self.config = config or ServerConfig()
        self.clock = clock or MonotonicClock()
        self.static_dir = (static_dir or web_dir()).resolve()
        self.active_sessions = 0
        self.connections: set[Connection] = set()
        self._server: Any = None
        self.port: int | None = None

    async def start(self) -> int:
        from websockets.asyncio.server import serve

        c = self.config
        origins: list[Any] = [None, *c.allowed_origins] if c.allowed_origins else [None, LOCAL_ORIGINS]
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
            if self.config.token is not None and not authorized(request, query, self.config.token):
                return respond(connection, http.HTTPStatus.UNAUTHORIZED, b"a valid bearer token is required\n")
            if self.active_sessions >= self.config.max_sessions:
                return respond(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, b"too many sessions\n")
            return None
        if path == "/healthz":
            body = json.dumps({"status": "ok", "sessions": self.active_sessions,
                               "max_sessions": self.config.max_sessions}).encode()
            return respond(connection, http.HTTPStatus.OK, body, "application/json")
        return static_file(connection, self.static_dir, path)

    # -- websocket sessions ------------------------------------------------------------------------

    async def _handle(self, ws) -> None:
        if ws.request.path.partition("?")[0] != WS_PATH:
            await ws.close(CLOSE_POLICY, "the websocket endpoint is /ws")
            return
        if self.active_sessions >= self.config.max_sessions:
            with contextlib.suppress(Exception):
                await ws.send(error_event("busy", "too many sessions; try again later"))
            await ws.close(CLOSE_FULL, "too many sessions")
            return
        self.active_sessions += 1
        bound_send_buffer(ws, self.config.send_buffer_bytes)
        connection = Connection(ws, self.components, self.config, self.clock, self._release, self.listener)
        self.connections.add(connection)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)
            connection.release_slot()

    def _release(self) -> None:
        self.active_sessions -= 1


# -- serving until interrupted -----------------------------------------------------------------------


def serve(components: Components, config: ServerConfig) -> None:
    """Serve `components` with `config` until Ctrl-C (`headstart serve`): prints the page's and the
    websocket's address once listening. The caller owns `components` (and closes them). Raises OSError
    when the address cannot be bound."""
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
