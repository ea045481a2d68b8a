"""The LLM on an existing serving engine: the OpenAI-compatible streaming chat API (vLLM, SGLang,
llama.cpp's server, llama-cpp-python's server, hosted endpoints), through the `openai` client.

It plugs in where the local engine does (headstart/seams.py `LLMBackend`, as llm/local.py `LocalLLM`):
`RemoteLLM.reply_stream(...)` gives a `RemoteReplyStream` shaped like `headstart.llm.stream.ReplyStream`
(async-iterate `TokenDelta`s then one `ReplyDone`, `LLMError` on failure, `cancel()` out of band,
`stats`), and `RemoteLLM.live_turn(...)` a `RemoteTurn` shaped like `headstart.llm.live.LiveTurn`
(`update` / `reply` / `close`). The head start maps onto the engine like this:

- partial transcripts -> warm-up requests (`max_tokens=1`, not streamed) with the prompt so far, cut
  at its last stable word boundary (`turn.stable_text`), at most one in flight per turn, coalesced to
  the newest text. The engine's prefix cache (vLLM's automatic prefix caching, SGLang's radix cache,
  llama.cpp's cached prompt / slot) then holds the prompt, and the end-of-turn request prefills only
  the tail. `?warmup=0` in the address turns them off.
- the held reply (the session's head start: `reply(text)` before the end of turn) -> a streaming
  request started early; on a miss the session cancels it (the HTTP connection is closed, which stops
  generation on the engines above), on a hit it simply goes on.
- barge-in -> `cancel()`: the request is closed at once and undelivered text is dropped.

Failure policy (`RetryPolicy`): connect / first-token / stall timeouts; retries with exponential
backoff only until the first token (a connection refused, a 429 or 5xx, a first-token timeout); any
failure after it ends the reply with `RemoteLLMError` (an `LLMError`: the session reports an `error`
event and goes on listening). Nothing waits without a timeout, so a dead engine never stalls a session.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from typing import Any

from headstart.clock import Clock, MonotonicClock
from headstart.config import LLMConfig
from headstart.events import ReplyDone, TokenDelta
from headstart.llm.engine import LLMError
from headstart.llm.remote_config import RETRYABLE_STATUS, RemoteEndpoint, RetryPolicy, parse_llm_url
from headstart.llm.shaping import SentenceBudget
from headstart.llm.stream import ReplyStats, with_system_prompt
from headstart.llm.turn import stable_text

__all__ = ["RemoteLLM", "RemoteLLMError", "RemoteReplyStream", "RemoteTurn"]

_FINISH_REASONS = {"length": "max_tokens", "stop": "eos", "eos": "eos", "content_filter": "stop"}


class RemoteLLMError(LLMError):
    """The remote engine failed: unreachable, refused the request, timed out or broke off.
    `code` is "llm_unavailable" (could not get a reply), "llm_rejected" (the engine refused the
    request: bad model name, bad key) or "llm_broken" (the reply broke off after its first token)."""

    def __init__(self, message: str, code: str = "llm_unavailable") -> None:
        super().__init__(message)
        self.code = code


class _AttemptFailed(Exception):
    def __init__(self, message: str, retryable: bool, code: str = "llm_unavailable") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.code = code


def _describe(exc: BaseException) -> tuple[str, bool, str]:
    """(message, retryable, code) for an exception raised while talking to the engine."""
    import openai

    if isinstance(exc, TimeoutError):
        return str(exc) or "timed out", True, "llm_unavailable"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = _error_detail(exc)
        retryable = status in RETRYABLE_STATUS
        return f"HTTP {status}: {detail}", retryable, "llm_unavailable" if retryable else "llm_rejected"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return f"cannot reach the engine ({type(cause).__name__}: {cause})", True, "llm_unavailable"
    # transport errors raised while reading the stream (the connection dropped), OSError
    return f"{type(exc).__name__}: {exc}", True, "llm_unavailable"


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            return str(error.get("message") or error)[:300]
        return str(error)[:300]
    return str(getattr(exc, "message", exc))[:300]


class RemoteLLM:
    """An OpenAI-compatible chat endpoint, shared by all sessions of a process (one HTTP client per
    event loop, with a connection pool).

    Args:
        endpoint: where and what (`RemoteEndpoint`, e.g. from `parse_llm_url`).
        policy: timeouts and retries (`RetryPolicy`).
        http_client_factory: `() -> AsyncClient` of the HTTP library the installed `openai` uses
            (tests pass one with a fake transport); None: the openai client's own.
    """

    def __init__(self, endpoint: RemoteEndpoint, policy: RetryPolicy | None = None, *,
                 http_client_factory=None) -> None:
        self.endpoint = endpoint
        self.policy = policy if policy is not None else RetryPolicy()
        self._http_client_factory = http_client_factory
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    @classmethod
    def from_url(cls, url: str, api_key: str | None = None, policy: RetryPolicy | None = None) -> RemoteLLM:
        """From an `--llm openai://HOST:PORT/MODEL` address (ValueError if malformed)."""
        return cls(parse_llm_url(url, api_key=api_key), policy)

    def __repr__(self) -> str:
        return f"RemoteLLM({self.endpoint!r})"

    # -- the client --------------------------------------------------------------------------------

    def client(self):
        """The `openai.AsyncOpenAI` client of the running event loop (made on first use)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            import openai

            p = self.policy
            # a backstop only: the first-token and stall deadlines below are the real limits
            timeout = max(p.first_token_timeout_s, p.stall_timeout_s, p.connect_timeout_s) + 1.0
            http_client = self._http_client_factory() if self._http_client_factory is not None else None
            client = openai.AsyncOpenAI(
                api_key=self.endpoint.api_key or "none",  # the client insists on one; local engines ignore it
                base_url=self.endpoint.base_url, timeout=timeout, max_retries=0,  # our own policy retries
                http_client=http_client,
            )
            self._clients[loop] = client
        return client

    def request_args(self, messages: Sequence[Mapping[str, str]], config: LLMConfig, *,
                     max_tokens: int | None = None) -> dict[str, Any]:
        """The chat-completions arguments for `messages` with `config`'s decoding settings."""
        args: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "max_tokens": int(max_tokens if max_tokens is not None else config.max_new_tokens),
            "temperature": config.temperature,
            "top_p": config.top_p,
        }
        if config.seed is not None:
            args["seed"] = config.seed
        if config.stop:
            args["stop"] = list(config.stop)[:4]  # the API takes at most 4
        if self.endpoint.cache_prompt:
            args["extra_body"] = {"cache_prompt": True}
        return args

    # -- the session's interface ---------------------------------------------------------------------

    max_positions: int | None = None  # the engine's context length is not known here

    def reply_stream(self, messages: Sequence[Mapping[str, str]], config: LLMConfig,
                     executor: Executor | None = None, clock: Clock | None = None) -> RemoteReplyStream:
        """Start a streaming reply to `messages` now (inside a running event loop); `executor` is
        accepted for the seam's signature (headstart/seams.py `LLMBackend`) and unused (nothing here
        blocks), and `config.speculative` too (the engine decodes as it does)."""
        return RemoteReplyStream(self, messages, config, clock)

    def live_turn(self, messages_before: Sequence[Mapping[str, str]], config: LLMConfig,
                  executor: Executor | None = None, clock: Clock | None = None) -> RemoteTurn:
        """A user turn (see `RemoteTurn`) on the chat `messages_before`."""
        return RemoteTurn(self, messages_before, config, clock)

    def count_tokens(self, text: str) -> int:
        """An estimate of `text`'s tokens (the engine's tokenizer is not at hand): `approx_token_count`."""
        from headstart.llm.history import approx_token_count

        return approx_token_count(text)

    async def warm_up_prompt(self, messages: Sequence[Mapping[str, str]], config: LLMConfig) -> None:
        """Ask the engine to compute (and cache) the prompt of `messages`: a one-token request, not
        streamed, never retried (a warm-up is only a hint). Raises RemoteLLMError on failure."""
        args = self.request_args(messages, replace(config, stop=()), max_tokens=1)
        args["temperature"] = 0.0
        try:
            async with asyncio.timeout(self.policy.warmup_timeout_s):
                await self.client().chat.completions.create(**args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - described and re-raised as ours
            message, _, code = _describe(exc)
            raise RemoteLLMError(f"warm-up request to {self.endpoint.base_url} failed: {message}", code) from exc

    def check(self, timeout_s: float = 3.0) -> str | None:
        """Whether the engine answers `GET {base_url}/models` (blocking; for start-up messages).
        Returns None when it does, else what went wrong."""
        import urllib.error
        import urllib.request

        request = urllib.request.Request(f"{self.endpoint.base_url}/models")
        if self.endpoint.api_key:
            request.add_header("Authorization", f"Bearer {self.endpoint.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s):  # noqa: S310 - http(s) only, by parse_llm_url
                return None
        except urllib.error.HTTPError as exc:
            return f"{self.endpoint.base_url}/models answered HTTP {exc.code}"
        except (OSError, ValueError) as exc:
            return f"cannot reach {self.endpoint.base_url} ({type(exc).__name__}: {exc})"

    def warm_up(self) -> None:
        """Pay the client's first-use costs at start-up, not on the event loop of the first session:
        importing `openai` and building a client with its chat resource take ~1.2 s of CPU here, a
        stall long enough for audio queued meanwhile to arrive as a burst (and be rate-limited).
        No request is sent."""
        import openai

        client = openai.AsyncOpenAI(api_key="none", base_url=self.endpoint.base_url, max_retries=0)
        _ = client.chat.completions  # its resource classes load on first access

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def close(self) -> None:
        self._clients.clear()


class RemoteReplyStream:
    """One reply streamed from the engine; the same shape as `headstart.llm.stream.ReplyStream`.
    Iterate it once: `TokenDelta`s (one per chunk; `token_ids` is empty, the API gives text), then
    exactly one `ReplyDone`, or `RemoteLLMError` raised when the engine fails. The request starts at
    construction (inside a running event loop)."""

    def __init__(self, llm: RemoteLLM, messages: Sequence[Mapping[str, str]], config: LLMConfig,
                 clock: Clock | None = None) -> None:
        self._llm = llm
        self._messages = with_system_prompt(messages, config.system_prompt)
        self._config = config
        self._clock = clock if clock is not None else MonotonicClock()
        self._queue: asyncio.Queue[TokenDelta | ReplyDone | BaseException] = asyncio.Queue()
        self._cancelled = False
        self._started = False
        self._iterated = False
        self._delivered_text: list[str] = []
        self._delivered_tokens = 0
        self.num_attempts = 0
        self.stats = ReplyStats(requested_at_s=self._clock.now())
        self._task = asyncio.get_running_loop().create_task(self._produce(), name="remote-llm-reply")

    def cancel(self) -> None:
        """Stop now: the request is closed and text not yet delivered is dropped. Idempotent; the
        stream still ends with `ReplyDone(reason="cancelled")` (unless it had already ended)."""
        if self._cancelled:
            return
        self._cancelled = True
        if self._started and not self._task.done():
            self._task.cancel()  # a task not started yet sees the flag instead (and still ends cleanly)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    async def wait_finished(self) -> None:
        """Wait until the request is over (its connection closed)."""
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._task)

    def __aiter__(self) -> AsyncIterator[TokenDelta | ReplyDone]:
        if self._iterated:
            raise RuntimeError("a reply stream can be iterated only once")
        self._iterated = True
        return self._events()

    async def _events(self) -> AsyncIterator[TokenDelta | ReplyDone]:
        try:
            while True:
                item = await self._queue.get()
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, ReplyDone):
                    if item.reason == "cancelled" or self._cancelled:
                        item = ReplyDone(text="".join(self._delivered_text), num_tokens=self._delivered_tokens,
                                         reason="cancelled")
                    yield item
                    return
                if self._cancelled:
                    continue  # cancel overtakes text still queued
                self._delivered_text.append(item.text)
                self._delivered_tokens += 1
                yield item
        finally:
            self.cancel()  # a consumer that stops iterating stops the request too

    # -- producer --------------------------------------------------------------------------------

    async def _produce(self) -> None:
        text: list[str] = []
        self._started = True
        try:
            if self._cancelled:
                raise asyncio.CancelledError
            reason = await self._run(text)
        except asyncio.CancelledError:
            reason = "cancelled"
        except RemoteLLMError as exc:
            self.stats.done_at_s = self._clock.now()
            self._queue.put_nowait(exc)
            return
        self.stats.done_at_s = self._clock.now()
        self._queue.put_nowait(ReplyDone(text="".join(text), num_tokens=len(self.stats.token_times_s),
                                         reason=reason))

    async def _run(self, text: list[str]) -> str:
        llm, policy, clock = self._llm, self._llm.policy, self._clock
        self.stats.started_at_s = clock.now()
        start = clock.now()
        attempt = 0
        while True:
            self.num_attempts = attempt + 1
            try:
                return await self._attempt(text, policy.attempt_timeout_s(clock.now() - start))
            except _AttemptFailed as failure:
                got_token = bool(self.stats.token_times_s)
                delay = policy.next_delay_s(attempt, clock.now() - start, retryable=failure.retryable,
                                            got_token=got_token)
                if delay is None:
                    where = llm.endpoint.base_url
                    if got_token:
                        raise RemoteLLMError(f"the LLM engine at {where} broke off the reply after "
                                             f"{len(self.stats.token_times_s)} tokens: {failure}", "llm_broken") from None
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise RemoteLLMError(f"no reply from the LLM engine at {where}{tries}: {failure}",
                                         failure.code) from None
                attempt += 1
                await clock.sleep(delay)

    async def _attempt(self, text: list[str], first_token_timeout_s: float) -> str:
        """One request. Returns the end reason; raises _AttemptFailed (retryable or not)."""
        import openai

        llm, config, clock = self._llm, self._config, self._clock
        loop = asyncio.get_running_loop()
        budget = SentenceBudget(config.soft_max_tokens)
        deadline = loop.time() + first_token_timeout_s
        stream = None
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    stream = await llm.client().chat.completions.create(
                        **llm.request_args(self._messages, config), stream=True)
                chunks = stream.__aiter__()
                while True:
                    if self.stats.token_times_s:
                        deadline = loop.time() + llm.policy.stall_timeout_s
                    try:
                        async with asyncio.timeout_at(deadline):
                            chunk = await chunks.__anext__()
                    except StopAsyncIteration:
                        return "eos"
                    choices = getattr(chunk, "choices", None) or []
                    if not choices:
                        continue  # e.g. a usage-only chunk
                    choice = choices[0]
                    delta = getattr(choice.delta, "content", None) if choice.delta is not None else None
                    if delta:
                        self.stats.token_times_s.append(clock.now())
                        text.append(delta)
                        self._queue.put_nowait(TokenDelta(text=delta))
                        if budget.push(len(self.stats.token_times_s), "".join(text)):
                            return "max_tokens"  # the soft budget, at a sentence end
                    if choice.finish_reason:
                        return _FINISH_REASONS.get(choice.finish_reason, "eos")
            except TimeoutError:
                phase = "its next token" if self.stats.token_times_s else "its first token"
                raise _AttemptFailed(f"timed out waiting for {phase}", retryable=True) from None
            except (asyncio.CancelledError, _AttemptFailed):
                raise
            except openai.APIError as exc:
                message, retryable, code = _describe(exc)
                raise _AttemptFailed(message, retryable, code) from exc
            except Exception as exc:  # noqa: BLE001 - transport errors while reading (connection dropped)
                message, retryable, code = _describe(exc)
                raise _AttemptFailed(message, retryable, code) from exc
        finally:
            if stream is not None:
                # closes the connection: the engine sees the client leave and stops generating
                with contextlib.suppress(Exception):
                    await asyncio.shield(stream.close())


class RemoteTurn:
    """One user turn on a remote engine, shaped like `headstart.llm.live.LiveTurn`. Create it inside
    the running event loop when the user starts speaking, then from the event loop:

    - `update(text)` on each partial transcript: a warm-up request for the prompt up to the text's
      stable word boundary (at most one in flight; coalesced to the newest text);
    - `reply(text)` once: a streaming request (the engine's prefix cache holds what the warm-ups
      sent); or
    - `close()` when the turn ends without a reply.

    `errors` collects failed warm-ups (they only cost the head start, never the reply); `num_warmups`
    counts warm-ups sent.
    """

    def __init__(self, llm: RemoteLLM, messages_before: Sequence[Mapping[str, str]], config: LLMConfig,
                 clock: Clock | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._llm = llm
        self._config = config
        self._clock = clock
        self._messages_before = with_system_prompt(messages_before, config.system_prompt)
        self._confirmed = False
        self._latest: str | None = None
        self._sent: str | None = None
        self._warm_task: asyncio.Task[None] | None = None
        self.num_warmups = 0
        self.errors: list[BaseException] = []

    def _messages(self, user_text: str) -> list[dict[str, str]]:
        return [*self._messages_before, {"role": "user", "content": user_text}]

    def _check_open(self) -> None:
        if self._confirmed:
            raise RuntimeError("this turn already has its reply (or was closed); start a new turn")

    def update(self, user_text: str) -> None:
        """A partial transcript: warm the engine's prefix cache with the prompt so far (non-blocking)."""
        if not isinstance(user_text, str):
            raise ValueError(f"user text must be a str, got {user_text!r}")
        self._check_open()
        if not self._llm.endpoint.warmup:
            return
        text = stable_text(user_text)
        if text == self._sent and self._sent is not None:
            return
        self._latest = text
        if self._warm_task is None or self._warm_task.done():
            self._warm_task = self._loop.create_task(self._warm_loop(), name="remote-llm-warmup")

    async def _warm_loop(self) -> None:
        while self._latest is not None and not self._confirmed:
            text, self._latest = self._latest, None
            if text == self._sent:
                continue
            self._sent = text
            self.num_warmups += 1
            try:
                await self._llm.warm_up_prompt(self._messages(text), self._config)
            except RemoteLLMError as exc:
                self.errors.append(exc)
                return  # the engine is struggling: no more hints this turn

    def reply(self, final_text: str) -> RemoteReplyStream:
        """The reply to `final_text` as a stream (a new streaming request)."""
        if not isinstance(final_text, str):
            raise ValueError(f"final text must be a str, got {final_text!r}")
        self._check_open()
        self._confirmed = True
        return self._llm.reply_stream(self._messages(final_text), self._config, clock=self._clock)

    def close(self) -> None:
        """The turn ends without a reply: warm-ups stop. Idempotent."""
        if self._confirmed:
            return
        self._confirmed = True
        if self._warm_task is not None and not self._warm_task.done():
            self._warm_task.cancel()

    async def wait_idle(self) -> None:
        """Wait for the warm-up requests sent so far."""
        task = self._warm_task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
