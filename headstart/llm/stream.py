"""The async adapter: one reply as an async iterator of `TokenDelta` events and one `ReplyDone`.

The token loop (prefill, decode, sampling, detokenization) runs on the single-thread "llm" executor;
each delta is handed to the event loop as soon as it is printable. `cancel()` is out of band: the
loop stops before its next forward, and text still queued for the consumer is dropped, so a barge-in
never hears more than it already had. Timing uses an injected clock (TTFT, TPOT in `ReplyStats`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from headstart.clock import Clock, MonotonicClock
from headstart.config import LLMConfig
from headstart.events import ReplyDone, TokenDelta
from headstart.llm.detok import IncrementalDetokenizer
from headstart.llm.engine import LLMEngine, LLMError
from headstart.llm.sampling import Sampling
from headstart.llm.shaping import SentenceBudget

if TYPE_CHECKING:
    from headstart.llm.speculative import Decoder

# Runs on the llm thread and returns (prompt ids, reply token iterator, tokens adopted from a held
# reply); see live.py.
TokenSource = Callable[[], tuple[Sequence[int], Iterator[int]]]  # () -> (prompt ids, reply tokens)

__all__ = ["ReplyStats", "ReplyStream", "generate_stream", "llm_executor", "with_system_prompt"]


def llm_executor() -> ThreadPoolExecutor:
    """The named single-thread executor every LLM forward runs on (one engine, one thread)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm")


def with_system_prompt(messages: Sequence[Mapping[str, str]], system_prompt: str) -> list[dict[str, str]]:
    """`messages` with `system_prompt` put first, unless it is empty or a system message is there."""
    out = [dict(m) for m in messages]
    if system_prompt and not (out and out[0].get("role") == "system"):
        out.insert(0, {"role": "system", "content": system_prompt})
    return out


@dataclass(slots=True)
class ReplyStats:
    """Clock readings (seconds, on the stream's injected clock) of one reply, written by the
    producer; complete once `ReplyDone` has been delivered."""

    requested_at_s: float
    started_at_s: float | None = None  # the llm thread picked the request up
    token_times_s: list[float] = field(default_factory=list)  # one per generated token
    done_at_s: float | None = None
    num_prompt_tokens: int = 0

    @property
    def first_token_at_s(self) -> float | None:
        return self.token_times_s[0] if self.token_times_s else None

    @property
    def ttft_s(self) -> float | None:
        """Time to first token: request to the first generated token (includes queueing and prefill)."""
        first = self.first_token_at_s
        return None if first is None else first - self.requested_at_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (mean decode step), None with fewer than 2 tokens."""
        times = self.token_times_s
        if len(times) < 2:
            return None
        return (times[-1] - times[0]) / (len(times) - 1)


class _LoopClosed(Exception):
    pass


class ReplyStream:
    """One reply being generated. Iterate it once: `TokenDelta`s, then exactly one `ReplyDone` (or
    the `LLMError` that stopped the model, raised as soon as it happens). Create it with
    `generate_stream` inside a running event loop; generation starts at once."""

    def __init__(
        self,
        engine: LLMEngine,
        messages: Sequence[Mapping[str, str]],
        config: LLMConfig,
        executor: Executor,
        clock: Clock | None = None,
        *,
        decoder: Decoder | None = None,
        source: TokenSource | None = None,
    ) -> None:
        """`decoder`: generate with it (speculative decoding) instead of `engine.generate`;
        `source`: where the tokens come from instead (then `messages` only serve the record)."""
        self._loop = asyncio.get_running_loop()
        self._engine = engine
        self._decoder = decoder
        self._source = source
        self._messages = with_system_prompt(messages, config.system_prompt)
        self._config = config
        self._clock = clock if clock is not None else MonotonicClock()
        self._queue: asyncio.Queue[TokenDelta | ReplyDone | BaseException] = asyncio.Queue()
        self._cancel = threading.Event()
        self._iterated = False
        self._delivered_text: list[str] = []
        self._delivered_tokens = 0
        self.stats = ReplyStats(requested_at_s=self._clock.now())
        self._future = self._loop.run_in_executor(executor, self._produce)

    def cancel(self) -> None:
        """Stop generating before the next token and drop text not yet delivered. Idempotent; the
        stream still ends with `ReplyDone(reason="cancelled")` (unless it had already ended)."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    async def wait_finished(self) -> None:
        """Wait until the llm thread is done with this reply (it no longer touches the engine)."""
        await asyncio.shield(self._future)

    def __aiter__(self) -> AsyncIterator[TokenDelta | ReplyDone]:
        if self._iterated:
            raise RuntimeError("a ReplyStream can be iterated only once")
        self._iterated = True
        return self._events()

    async def _events(self) -> AsyncIterator[TokenDelta | ReplyDone]:
        try:
            while True:
                item = await self._queue.get()
                if isinstance(item, BaseException):
                    raise LLMError(f"the LLM failed during generation: {item!r}") from item
                if isinstance(item, ReplyDone):
                    if item.reason == "cancelled" or self._cancel.is_set():
                        # Report what the consumer actually received.
                        item = replace(
                            item, text="".join(self._delivered_text),
                            num_tokens=self._delivered_tokens, reason="cancelled",
                        )
                    yield item
                    return
                if self._cancel.is_set():
                    continue  # cancel overtakes text still queued
                self._delivered_text.append(item.text)
                self._delivered_tokens += len(item.token_ids)
                yield item
        finally:
            # A consumer that stops iterating (break, task cancelled) stops the generation too.
            self._cancel.set()

    # -- producer side, on the llm thread -----------------------------------------------------------

    def _put(self, item: TokenDelta | ReplyDone | BaseException) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError as exc:  # the event loop is closed: nobody is listening any more
            raise _LoopClosed from exc

    def _produce(self) -> None:
        try:
            self._generate()
        except _LoopClosed:
            pass
        except BaseException as exc:  # delivered to the consumer, raised there at once
            try:
                self._put(exc)
            except _LoopClosed:
                pass

    def _generate(self) -> None:
        clock, config, stats = self._clock, self._config, self.stats
        stats.started_at_s = clock.now()
        num_tokens = 0
        reason = None
        detok = IncrementalDetokenizer(self._engine.tokenizer, stop=config.stop)
        budget = SentenceBudget(config.soft_max_tokens)
        if self._cancel.is_set():
            reason = "cancelled"
        else:
            if self._source is not None:
                prompt, tokens = self._source()
            else:
                prompt = self._engine.render_prompt(self._messages)
                generator = self._decoder if self._decoder is not None else self._engine
                tokens = generator.generate(prompt, config.max_new_tokens, Sampling.from_config(config))
            stats.num_prompt_tokens = len(prompt)
            pending: list[int] = []
            try:
                while True:
                    try:
                        token = next(tokens)  # the forward for this token runs here
                    except StopIteration:
                        break
                    stats.token_times_s.append(clock.now())
                    num_tokens += 1
                    pending.append(token)
                    text = detok.push(token)
                    if text:
                        self._put(TokenDelta(text=text, token_ids=tuple(pending)))
                        pending = []
                    if detok.stopped:
                        reason = "stop"
                        break
                    if self._cancel.is_set():
                        reason = "cancelled"
                        break
                    if budget.push(num_tokens, detok.text):
                        reason = "max_tokens"  # the soft budget, at a sentence end
                        break
            finally:
                close = getattr(tokens, "close", None)
                if close is not None:
                    close()
            if reason in (None, "max_tokens"):
                reason = reason or ("max_tokens" if num_tokens >= config.max_new_tokens else "eos")
                tail = detok.flush()
                if tail:
                    self._put(TokenDelta(text=tail, token_ids=tuple(pending)))
        stats.done_at_s = clock.now()
        self._put(ReplyDone(text=detok.text, num_tokens=num_tokens, reason=reason))


def generate_stream(
    engine: LLMEngine,
    messages: Sequence[Mapping[str, str]],
    config: LLMConfig,
    executor: Executor,
    clock: Clock | None = None,
    decoder: Decoder | None = None,
) -> ReplyStream:
    """Start a reply to `messages` (chat messages; `config.system_prompt` is put first unless a
    system message is there) on `executor` (use `llm_executor()`: one thread per engine) and return
    its stream. Must be called inside a running event loop (RuntimeError otherwise). Settings come
    from `config`: max_new_tokens, soft_max_tokens (end at the next sentence end after that many
    tokens), temperature, top_p, seed, stop. `decoder`: a speculative `Decoder` over `engine`."""
    return ReplyStream(engine, messages, config, executor, clock, decoder=decoder)
