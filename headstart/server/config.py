"""The settings of `headstart serve` (`ServerConfig`)."""

from __future__ import annotations

import math
from dataclasses import dataclass


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
        audio_burst_s: a client may send this many seconds of audio at once (a reconnecting client
            flushing its buffer, a file sent unpaced): it is taken and processed as fast as the
            pipeline goes ...
        max_audio_speed: ... and the allowance refills at this many seconds of audio per second (x
            real time). A frame beyond it gets one `error` "rate_limited" and a close with 1008.
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
        drain_s: on shutdown (SIGTERM, SIGINT), how long replies in progress may take to finish
            (seconds) before every connection is closed with 1001 (`VoiceServer.drain`).
    """

    host: str = "127.0.0.1"
    port: int = 8765
    allowed_origins: tuple[str, ...] = ()
    token: str | None = None
    max_message_bytes: int = 64 * 1024
    max_sessions: int = 4
    max_audio_speed: float = 4.0
    # A reconnecting client flushes what it recorded meanwhile, and frames that queue in the socket while
    # this process is busy arrive together: a minute of audio (1.9 MB of PCM16) is taken at once.
    audio_burst_s: float = 60.0
    playback_lead_s: float = 1.0
    audio_frame_s: float = 0.1
    # well under the keepalive's 20 s + 20 s, well over a GIL-heavy stall of this process (~5 s)
    max_send_lag_s: float = 10.0
    send_probe_s: float = 1.0
    slow_close_s: float = 300.0
    # reply audio is ~44 kB/s and leaves ~1 s ahead of playback: 64 KiB (Linux doubles it) is plenty
    send_buffer_bytes: int | None = 64 * 1024
    # a reply of a few sentences is sent well within it; a supervisor's kill timeout is longer (systemd: 90 s)
    drain_s: float = 10.0

    def __post_init__(self) -> None:
        if not (0 <= self.drain_s < math.inf and self.audio_burst_s > 0 and self.max_audio_speed > 0):
            raise ValueError("ServerConfig: drain_s must be finite and >= 0, audio_burst_s and max_audio_speed > 0")
        if self.token is not None and not self.token.strip():
            raise ValueError("ServerConfig.token is empty: an empty bearer token would let every client in; "
                             "use None for no token")
