"""The async form of one user turn (turn.py) for the session: partial transcripts prefill the KV
cache while the user speaks, a reply can be started and held on a hypothesis, and the confirmed
reply at end of turn streams like any `ReplyStream`.

Which path the session uses: `update` on every partial, and for the preemptive reply `reply(hypothesis)`
inside a *held* session Reply (headstart/session.py): its tokens are generated and its first clause is
synthesised ahead, none of it leaves until the end of turn confirms the hypothesis (else it is
cancelled and the turn's reply is generated from a new LiveTurn). `preempt` (tokens held here, adopted by
`reply` on equal prompt tokens) is the LLM-only form, for callers without a TTS stage (the LLM benchmark's
turn simulation uses its synchronous twin, `TurnState.preempt`); the session does not use it because
held tokens alone cannot be synthesised ahead.

All model work runs on the single "llm" executor. Confirmed work has priority over preemptive work:
a held reply is generated one token per executor job, and each job first checks whether the turn
was confirmed (or closed), so a confirmed reply waits for at most one token step. Partial updates
coalesce: only the newest text is prefilled when the thread gets to it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor

from headstart.clock import Clock
from headstart.config import LLMConfig
from headstart.llm.engine import LLMEngine
from headstart.llm.sampling import Sampling
from headstart.llm.speculative import Decoder
from headstart.llm.stream import ReplyStream, with_system_prompt
from headstart.llm.turn import PreemptionStats, TurnState

__all__ = ["LiveTurn"]


class LiveTurn:
    """One user turn. Create it when the user starts speaking (inside the running event loop),
    then call, from the event loop:

    - `update(text)` on each partial transcript (non-blocking; coalesced);
    - `preempt(text)` to generate and hold a reply on a hypothesised final transcript (non-blocking;
      at most `config.preemptive_max_tokens` tokens are held; a newer call replaces the hypothesis);
    - `reply(final_text)` at end of turn: a `ReplyStream` that adopts the held reply at once when
      the final prompt tokens equal the hypothesis', else rolls back and generates; or
    - `close()` when the turn ends without a reply (drops a held reply).

    `messages_before`: system message (optional; `config.system_prompt` is put first otherwise)
    and history. `stats` is shared across turns to count hits, misses and wasted tokens.
    """

    def __init__(
        self,
        engine: LLMEngine,
        messages_before: Sequence[Mapping[str, str]],
        config: LLMConfig,
        executor: Executor,
        clock: Clock | None = None,
        decoder: Decoder | None = None,
        stats: PreemptionStats | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._engine = engine
        self._config = config
        self._executor = executor
        self._clock = clock
        self._messages_before = with_system_prompt(messages_before, config.system_prompt)
        decoder = decoder if decoder is not None else Decoder(engine)
        if decoder.engine is not engine:
            raise ValueError("the decoder must wrap the same engine")
        self.stats = stats if stats is not None else PreemptionStats()
        self._state = TurnState(decoder, self._messages_before, config.max_new_tokens,
                                Sampling.from_config(config), self.stats)
        self._lock = threading.Lock()
        self._latest_text: str | None = None
        self._update_queued = False
        self._preempt_generation = 0
        self._confirmed = threading.Event()  # set by reply()/close(): background work stops
        self._pending: set[asyncio.Future] = set()
        self.errors: list[BaseException] = []  # failures of background work (the reply recomputes)

    # -- event-loop side ----------------------------------------------------------------------------

    def _submit(self, job: Callable[[], None]) -> None:
        future = self._loop.run_in_executor(self._executor, self._guarded, job)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    def _guarded(self, job: Callable[[], None]) -> None:
        if self._confirmed.is_set():
            return  # confirmed work overtakes: background jobs still queued do nothing
        try:
            job()
        except Exception as exc:  # noqa: BLE001 - recorded; the confirmed reply starts clean
            self.errors.append(exc)

    def update(self, user_text: str) -> None:
        """A partial transcript: prefill the prompt up to its stable word boundary, in the background."""
        if not isinstance(user_text, str):
            raise ValueError(f"user text must be a str, got {user_text!r}")
        self._check_open()
        with self._lock:
            self._latest_text = user_text
            if self._update_queued:
                return
            self._update_queued = True
        self._submit(self._run_update)

    def preempt(self, hypothesis_text: str) -> None:
        """Start generating and holding a reply to `hypothesis_text`, in the background."""
        if not isinstance(hypothesis_text, str):
            raise ValueError(f"hypothesis text must be a str, got {hypothesis_text!r}")
        self._check_open()
        self._preempt_generation += 1
        generation = self._preempt_generation
        self._submit(lambda: self._run_preempt(hypothesis_text, generation))

    def reply(self, final_text: str) -> ReplyStream:
        """End of turn: the confirmed reply to `final_text`, as a stream (see `ReplyStream`);
        `stream.stats.num_adopted_tokens` > 0 when a held reply was adopted."""
        if not isinstance(final_text, str):
            raise ValueError(f"final text must be a str, got {final_text!r}")
        self._check_open()
        self._confirmed.set()
        messages = [*self._messages_before, {"role": "user", "content": final_text}]
        return ReplyStream(
            self._engine, messages, self._config, self._executor, self._clock,
            source=lambda: self._state.finish(final_text),
        )

    def close(self) -> None:
        """The turn ends without a reply (e.g. the user went on speaking: a new turn follows).
        Drops a held reply, counted as a miss. Idempotent."""
        if self._confirmed.is_set():
            return
        self._confirmed.set()
        future = self._loop.run_in_executor(self._executor, self._state.close)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    async def wait_idle(self) -> None:
        """Wait until the background work submitted so far (and the held tokens it chains) is done."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    @property
    def held_tokens(self) -> int:
        """Tokens of the held reply so far (read from the llm thread's state; approximate)."""
        reply = self._state.preemptive
        return len(reply.held) if reply is not None else 0

    def _check_open(self) -> None:
        if self._confirmed.is_set():
            raise RuntimeError("this turn already has its reply (or was closed); start a new LiveTurn")

    # -- llm-thread side ----------------------------------------------------------------------------

    def _run_update(self) -> None:
        with self._lock:
            text, self._latest_text = self._latest_text, None
            self._update_queued = False
        if text is not None:
            self._state.update(text)

    def _run_preempt(self, text: str, generation: int) -> None:
        if generation != self._preempt_generation:
            return  # a newer hypothesis replaced this one
        self._state.preempt(text)
        self._run_preempt_step(generation)

    def _run_preempt_step(self, generation: int) -> None:
        if generation != self._preempt_generation:
            return
        if self._state.preempt_step(self._config.preemptive_max_tokens):
            # One token per job: anything the event loop queued meanwhile runs before the next one.
            self._loop.call_soon_threadsafe(self._submit, lambda: self._run_preempt_step(generation))
