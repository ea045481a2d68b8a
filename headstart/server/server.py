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

Shutdown (SIGTERM or SIGINT to `headstart serve`, `VoiceServer.drain`): new websockets are refused
(503), every session gets `session.ending`, replies in progress finish within `drain_s`, then every
connection closes with 1001 and the process exits 0. A second signal cuts the drain short.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import logging
import re
import signal
from pathlib import Path
from typing import Any

from headstart.clock import Clock, MonotonicClock
from headstart.server.config import ServerConfig
from headstart.server.connection import Connection
from headstart.server.http_routes import authorized, respond, static_file
from headstart.server.protocol import (
    CLOSE_FULL,
    CLOSE_GOING_AWAY,
    CLOSE_POLICY,
    WS_PATH,
    SessionEnding,
    encode_server_event,
    error_event,
    ms,
)
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

    Use: `await server.start()` (returns the bound port), ..., `await server.close()`; or
    `await server.serve_forever()`, which returns once `request_shutdown()` has been called and the
    drain is over (`drain`).
    `listener`: each session's listener factory (`Session`'s `listener`; None: the default `Listener`
    on the components' VAD and ASR), for harnesses and tests that script the listening stage.
    """

    # after the drain, how long the closing handshakes may take before the sockets are dropped (s)
    CLOSE_GRACE_S = 2.0

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
        self.draining = False  # shutting down: new websockets are refused
        self._shutdown = asyncio.Event()  # `request_shutdown` was called
        self._hurry = asyncio.Event()  # ... twice: the drain stops waiting

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
        """Serve until `request_shutdown()`, then drain (`drain`); or until `close()`."""
        if self._server is None:
            await self.start()
        shutdown = asyncio.create_task(self._shutdown.wait(), name="server-shutdown-requested")
        closed = asyncio.create_task(self._server.wait_closed(), name="server-closed")
        try:
            await asyncio.wait({shutdown, closed}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # cancelled: close at once, as websockets' serve_forever does
            await self.close()
            raise
        finally:
            shutdown.cancel()
            closed.cancel()
        if self._shutdown.is_set():
            await self.drain()

    @property
    def shutdown_requested(self) -> bool:
        return self._shutdown.is_set()

    def request_shutdown(self) -> None:
        """Ask `serve_forever` to drain and return (a signal handler's call, on the event loop): new
        websockets are refused from now on. A second call cuts the drain short."""
        if self._shutdown.is_set():
            self._hurry.set()
        self.draining = True
        self._shutdown.set()

    async def drain(self, limit_s: float | None = None) -> None:
        """Shut down gracefully: refuse new websockets (HTTP 503), send every started session
        `session.ending`, let replies in progress finish for at most `limit_s` seconds (default
        `config.drain_s`; a second `request_shutdown` stops waiting), then close every connection
        with 1001 and stop listening (`close`)."""
        limit_s = self.config.drain_s if limit_s is None else limit_s
        self.draining = True
        notice = encode_server_event(SessionEnding(reason="shutdown", drain_ms=ms(limit_s)))
        draining = [asyncio.create_task(c.drain(notice), name="server-drain") for c in self.connections]
        log.info("shutting down: %d session(s), at most %g s for the replies in progress", len(draining), limit_s)
        if draining:
            hurry = asyncio.create_task(self._hurry.wait(), name="server-drain-hurry")
            waiting: set[asyncio.Future[Any]] = {asyncio.gather(*draining, return_exceptions=True), hurry}
            await asyncio.wait(waiting, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED)
            hurry.cancel()
            for task in draining:
                task.cancel()  # the limit: what is still in progress is cut off by the close
            await asyncio.wait(draining)
        await self.close()

    async def close(self) -> None:
        """Stop listening and close every connection with 1001 (a closing handshake that takes more than
        `CLOSE_GRACE_S` has its socket dropped); returns once every connection's handler is over."""
        if self._server is None:
            return
        self.draining = True
        self._server.close()  # and every open connection with 1001 (going away)
        try:
            await asyncio.wait_for(self._server.wait_closed(), self.CLOSE_GRACE_S)
        except TimeoutError:  # a client that does not answer the close (a slow consumer's backlog)
            for connection in list(self.connections):
                transport = getattr(connection.ws, "transport", None)
                if transport is not None:
                    transport.abort()
            await self._server.wait_closed()

    # -- HTTP: /healthz, static files, the /ws gate ------------------------------------------------

    def _process_request(self, connection, request):
        path, _, query = request.path.partition("?")
        if path == WS_PATH:
            if self.draining:
                return respond(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, b"the server is shutting down\n")
            if self.config.token is not None and not authorized(request, query, self.config.token):
                return respond(connection, http.HTTPStatus.UNAUTHORIZED, b"a valid bearer token is required\n")
            if self.active_sessions >= self.config.max_sessions:
                return respond(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, b"too many sessions\n")
            return None
        if path == "/healthz":
            body = json.dumps({"status": "draining" if self.draining else "ok", "sessions": self.active_sessions,
                               "max_sessions": self.config.max_sessions}).encode()
            status = http.HTTPStatus.SERVICE_UNAVAILABLE if self.draining else http.HTTPStatus.OK
            return respond(connection, status, body, "application/json")
        return static_file(connection, self.static_dir, path)

    # -- websocket sessions ------------------------------------------------------------------------

    async def _handle(self, ws) -> None:
        if ws.request.path.partition("?")[0] != WS_PATH:
            await ws.close(CLOSE_POLICY, "the websocket endpoint is /ws")
            return
        if self.draining:  # its handshake passed just before the drain began
            await ws.close(CLOSE_GOING_AWAY, "the server is shutting down")
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
    """Serve `components` with `config` until SIGTERM or SIGINT (Ctrl-C) (`headstart serve`), then
    drain (`VoiceServer.drain`: replies in progress get `config.drain_s` to finish, every connection
    closes with 1001) and return; a second signal cuts the drain short. Prints the page's and the
    websocket's address once listening, and a line when shutting down and when stopped. The caller owns
    `components` (and closes them). Raises OSError when the address cannot be bound."""
    server = VoiceServer(components, config)

    def on_signal(sig: signal.Signals) -> None:
        if server.shutdown_requested:
            print(f"headstart: {sig.name} again: closing every connection now", flush=True)
        else:
            print(f"headstart: {sig.name}: shutting down: {server.active_sessions} session(s), at most "
                  f"{config.drain_s:g} s for the replies in progress", flush=True)
        server.request_shutdown()

    async def main() -> None:
        port = await server.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):  # an event loop without signal handlers
                loop.add_signal_handler(sig, on_signal, sig)
        print(f"headstart serving on http://{config.host}:{port}/ (websocket: ws://{config.host}:{port}{WS_PATH})",
              flush=True)
        await server.serve_forever()
        print("headstart: stopped", flush=True)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # where no signal handler could be set
        pass
