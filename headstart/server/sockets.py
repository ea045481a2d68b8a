"""What the server reads and sets on a connection's TCP socket: its send buffer and its backlog."""

from __future__ import annotations

import contextlib
from typing import Any


def bound_send_buffer(ws: Any, num_bytes: int | None) -> None:
    """Cap the socket's send buffer (SO_SNDBUF), which Linux otherwise grows to 4 MiB on a fast path:
    a slow consumer's backlog, which it must read before it can see its close frame, stays small."""
    import socket

    transport = getattr(ws, "transport", None)  # None: an in-memory connection (bench conversation --simulate)
    sock = transport.get_extra_info("socket") if num_bytes and transport is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, num_bytes)


def queued_bytes(ws: Any) -> int:
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
