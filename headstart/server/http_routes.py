"""The plain HTTP side of the server: responses, the bearer-token check and the static files of web/."""

from __future__ import annotations

import hmac
import http
import mimetypes
import urllib.parse
from pathlib import Path
from typing import Any


def respond(connection: Any, status: http.HTTPStatus, body: bytes,
            content_type: str = "text/plain; charset=utf-8") -> Any:
    """A `websockets` HTTP response on `connection` with exactly this body and type (nosniff)."""
    response = connection.respond(status, "")
    response.body = body
    del response.headers["Content-Length"]
    del response.headers["Content-Type"]
    response.headers["Content-Length"] = str(len(body))
    response.headers["Content-Type"] = content_type
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def authorized(request: Any, query: str, token: str) -> bool:
    """Whether the handshake `request` presents `token`: `Authorization: Bearer T`, else `?token=T` in
    the query (browsers cannot set headers on a websocket). Compared in constant time."""
    expected = token.encode()
    header = request.headers.get("Authorization", "")
    given = header[7:].strip() if header[:7].lower() == "bearer " else ""
    if not given:
        given = urllib.parse.parse_qs(query).get("token", [""])[0]
    return hmac.compare_digest(given.encode(), expected)


def static_file(connection: Any, static_dir: Path, path: str) -> Any:
    """The file at URL `path` under `static_dir` (a resolved folder; "/" is index.html), or 404: no
    hidden files, no path that leaves the folder (`..`, NUL, backslashes, symlinks out)."""
    not_found = respond(connection, http.HTTPStatus.NOT_FOUND, b"not found\n")
    name = urllib.parse.unquote(path).lstrip("/") or "index.html"
    parts = name.split("/")
    if "\x00" in name or "\\" in name or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        return not_found
    target = (static_dir / name).resolve()
    if not target.is_relative_to(static_dir) or not target.is_file():
        return not_found
    kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    return respond(connection, http.HTTPStatus.OK, target.read_bytes(), kind)
