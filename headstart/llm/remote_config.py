"""Where a remote LLM is and how patiently to talk to it: the `--llm openai://...` address and the
retry policy of the remote backend (headstart/llm/remote.py). Plain synchronous code, no I/O.

Address forms (the model name may contain slashes, e.g. a hub id):

    openai://HOST:PORT/MODEL               http://HOST:PORT/v1/chat/completions
    openai+http://HOST:PORT/MODEL          the same
    openai+https://HOST[:PORT]/MODEL       https (hosted endpoints)

Query options: `base=/v1` (the API's path prefix), `warmup=0` (no prefix-cache warm-up requests
while the user speaks, e.g. where every request is billed), `cache_prompt=1` (send llama.cpp's
`cache_prompt: true`; llama.cpp's own server wants it, strict hosted APIs reject unknown fields).
The API key is never part of the address: it comes from $HEADSTART_OPENAI_API_KEY or $OPENAI_API_KEY.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = [
    "API_KEY_ENV_VARS", "RemoteEndpoint", "RetryPolicy", "api_key_from_environ", "is_remote_llm", "parse_llm_url",
]

_SCHEMES = {"openai": "http", "openai+http": "http", "openai+https": "https"}
API_KEY_ENV_VARS = ("HEADSTART_OPENAI_API_KEY", "OPENAI_API_KEY")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True, slots=True)
class RemoteEndpoint:
    """An OpenAI-compatible chat-completions endpoint.

    `base_url`: e.g. "http://127.0.0.1:8080/v1" (the client appends "/chat/completions");
    `model`: the engine's model name; `api_key`: sent as `Authorization: Bearer` (None: none is sent);
    `warmup`: send partial prompts while the user speaks; `cache_prompt`: add llama.cpp's field.
    """

    base_url: str
    model: str
    api_key: str | None = None
    warmup: bool = True
    cache_prompt: bool = False

    def __repr__(self) -> str:  # never print the key
        key = "***" if self.api_key else None
        return (f"RemoteEndpoint(base_url={self.base_url!r}, model={self.model!r}, api_key={key}, "
                f"warmup={self.warmup}, cache_prompt={self.cache_prompt})")


def is_remote_llm(name: str) -> bool:
    """True if `name` (an `--llm` value) addresses a remote engine rather than a local model."""
    return isinstance(name, str) and name.split("://", 1)[0].lower() in _SCHEMES and "://" in name


def parse_llm_url(url: str, api_key: str | None = None) -> RemoteEndpoint:
    """Parse an `openai://HOST:PORT/MODEL` address (forms in the module docstring).

    Raises:
        ValueError: not one of the forms, no host, no model, a bad port or an unknown option (the
            message shows the expected form).
    """
    form = "expected openai://HOST:PORT/MODEL (or openai+https://HOST/MODEL)"
    if not is_remote_llm(url):
        raise ValueError(f"not a remote LLM address: {url!r}; {form}")
    parts = urlsplit(url)
    scheme = _SCHEMES[parts.scheme.lower()]
    if not parts.hostname:
        raise ValueError(f"no host in {url!r}; {form}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad port in {url!r}: {exc}") from None
    if parts.username or parts.password:
        raise ValueError("put no credentials in the address; the API key comes from "
                         f"${API_KEY_ENV_VARS[0]} or ${API_KEY_ENV_VARS[1]}")
    model = unquote(parts.path.lstrip("/"))
    if not model:
        raise ValueError(f"no model name in {url!r}; {form}")
    options = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = set(options) - {"base", "warmup", "cache_prompt"}
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)} in {url!r}; known: base, warmup, cache_prompt")
    base_path = "/" + options.get("base", "/v1").strip("/")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host if port is None else f"{host}:{port}"
    return RemoteEndpoint(
        base_url=f"{scheme}://{netloc}{base_path.rstrip('/')}",
        model=model,
        api_key=api_key or None,
        warmup=_flag(options, "warmup", True),
        cache_prompt=_flag(options, "cache_prompt", False),
    )


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ValueError(f"option {name}={value!r}: expected 0 or 1")


def api_key_from_environ(environ: Mapping[str, str]) -> str | None:
    """The API key from $HEADSTART_OPENAI_API_KEY, else $OPENAI_API_KEY (None if neither is set).
    Called at the entry points only: components never read the environment themselves."""
    for name in API_KEY_ENV_VARS:
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Timeouts and retries of a remote reply, in seconds.

    A reply is retried only until its first token arrived: after that the user has heard text, so a
    failure ends the reply with an error instead of repeating it. Retries wait
    `backoff_base_s * 2**attempt` (capped at `backoff_max_s`; exponential backoff), at most
    `max_attempts` requests in all, and never past `first_token_deadline_s` from the request.

    - `connect_timeout_s`: TCP/TLS connect;
    - `first_token_timeout_s`: one attempt's wait for its first token (queueing + prefill);
    - `stall_timeout_s`: the longest gap between two chunks once tokens flow;
    - `warmup_timeout_s`: a prefix-cache warm-up request (never retried: it is only a hint).
    """

    connect_timeout_s: float = 3.0
    first_token_timeout_s: float = 10.0
    stall_timeout_s: float = 10.0
    warmup_timeout_s: float = 10.0
    max_attempts: int = 3
    backoff_base_s: float = 0.25
    backoff_max_s: float = 2.0
    first_token_deadline_s: float = 20.0

    def __post_init__(self) -> None:
        for name in ("connect_timeout_s", "first_token_timeout_s", "stall_timeout_s", "warmup_timeout_s",
                     "first_token_deadline_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts!r}")
        if self.backoff_base_s < 0 or self.backoff_max_s < self.backoff_base_s:
            raise ValueError("need 0 <= backoff_base_s <= backoff_max_s")

    def backoff_s(self, attempt: int) -> float:
        """The wait before retry number `attempt + 1` (attempt 0 failed: the first retry)."""
        return min(self.backoff_max_s, self.backoff_base_s * (2 ** attempt))

    def next_delay_s(self, attempt: int, elapsed_s: float, *, retryable: bool, got_token: bool) -> float | None:
        """After attempt number `attempt` (0-based) failed, `elapsed_s` after the request was made:
        the wait before trying again, or None to give up (a token was already delivered, the error
        is not one a retry can fix, no attempts left, or the deadline would pass)."""
        if got_token or not retryable or attempt + 1 >= self.max_attempts:
            return None
        delay = self.backoff_s(attempt)
        if elapsed_s + delay >= self.first_token_deadline_s:
            return None
        return delay

    def attempt_timeout_s(self, elapsed_s: float) -> float:
        """How long the next attempt may wait for its first token, `elapsed_s` after the request."""
        return max(0.0, min(self.first_token_timeout_s, self.first_token_deadline_s - elapsed_s))


# HTTP statuses a retry can fix: the engine is overloaded, restarting or behind a proxy that is.
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
