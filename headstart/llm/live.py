"""The async form of one user turn (turn.py) for the session: partial transcripts prefill the KV
cache while the user speaks, and the reply streams like any `ReplyStream`.

How the session uses it: `update` on every partial (and `update("")` before the user's words, to
prefill the chat the turn follows), then `reply(text)` once: at the end of turn, or earlier for the
head start's *held* reply (headstart/session/session.py: its tokens are generated and its first clause is
synthesised ahead, none of it leaves until the end of turn confirms `text`, else it is cancelled and
the turn's reply is generated from a new LiveTurn).

All model work runs on the single "llm" executor. Partial updates coalesce: only the newest text is
prefilled when the thread gets to it, and updates still queued when the reply is asked for do nothing.
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
from headstart.llm.turn import TurnPrefill

__all__ = ["LiveTurn"]


class LiveTurn:
    """One user turn. Create it when the user starts speaking (inside the running event loop),
    then call, from the event loop:

    - `update(text)` on each partial transcript (non-blocking; coalesced);
    - `reply(text)` once: a `ReplyStream` that prefills only what the cache lacks, then generates; or
    - `close()` when the turn ends without a reply.

    `messages_before`: system message (optional; `config.system_prompt` is put first otherwise)
    and history.
    """

    def __init__(
        self,
        engine: LLMEngine,
        messages_before: Sequence[Mapping[str, str]],
        config: LLMConfig,
        executor: Executor,
        clock: Clock | None = None,
        decoder: Decoder | None = None,
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
        self._decoder = decoder
        self._prefill = TurnPrefill(engine, self._messages_before)
        self._lock = threading.Lock()
        self._latest_text: str | None = None
        self._update_queued = False
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

    def reply(self, final_text: str) -> ReplyStream:
        """The reply to `final_text`, as a stream (see `ReplyStream`): the prompt's tail (what the
        partials did not prefill) is prefilled on the llm thread, then the reply is generated."""
        if not isinstance(final_text, str):
            raise ValueError(f"final text must be a str, got {final_text!r}")
        self._check_open()
        self._confirmed.set()
        messages = [*self._messages_before, {"role": "user", "content": final_text}]
        return ReplyStream(
            self._engine, messages, self._config, self._executor, self._clock,
            source=lambda: self._tokens(final_text),
        )

    def close(self) -> None:
        """The turn ends without a reply (e.g. the user went on speaking: a new turn follows); updates
        still queued do nothing. Idempotent."""
        self._confirmed.set()

    async def wait_idle(self) -> None:
        """Wait until the background work submitted so far is done."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    def _check_open(self) -> None:
        if self._confirmed.is_set():
            raise RuntimeError("this turn already has its reply (or was closed); start a new LiveTurn")

    # -- llm-thread side ----------------------------------------------------------------------------

    def _run_update(self) -> None:
        with self._lock:
            text, self._latest_text = self._latest_text, None
            self._update_queued = False
        if text is not None:
            self._prefill.update(text)

    def _tokens(self, final_text: str):
        """(prompt ids, reply tokens) for `final_text`: the decoder's prefill keeps the longest common
        prefix of the cache and the prompt, so only the tail is computed."""
        prompt = self._prefill.prompt_ids(final_text)
        return prompt, self._decoder.generate(prompt, self._config.max_new_tokens, Sampling.from_config(self._config))
