"""The local LLM backend (headstart/seams.py `LLMBackend`): one in-process `LLMEngine` and the
speculative decoder over it, as the session asks for replies and user turns.

    llm = LocalLLM(engine, decoder)                                   # Components.load
    stream = llm.reply_stream(messages, config, executor, clock)     # llm/stream.py ReplyStream
    turn = llm.live_turn(messages_before, config, executor, clock)   # llm/live.py LiveTurn

The engine knows nothing of streams and turns (they are built here, on top of it). Every reply and
turn decodes with the decoder unless the config passed in says `speculative="none"` (a session's
plain baseline): one decoder per engine, so its break-even policy learns across all sessions' replies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor

from headstart.clock import Clock
from headstart.config import LLMConfig
from headstart.llm.engine import LLMEngine
from headstart.llm.live import LiveTurn
from headstart.llm.speculative import Decoder
from headstart.llm.stream import ReplyStream

__all__ = ["LocalLLM"]


class LocalLLM:
    """An `LLMBackend` over one `LLMEngine` (its KV cache, its "llm" thread) and its speculative decoder.

    Args:
        engine: the loaded engine; use it from the "llm" executor only.
        decoder: the speculative `Decoder` over `engine` (llm/speculative.py `build_decoder`), or None:
            plain decoding.

    Attributes:
        engine: the engine, for what needs its KV cache itself (the EOU models, llm/eou.py).
        decoder: the decoder, or None.

    Raises:
        ValueError: `decoder` wraps another engine.
    """

    def __init__(self, engine: LLMEngine, decoder: Decoder | None = None) -> None:
        if decoder is not None and decoder.engine is not engine:
            raise ValueError("the decoder must wrap the same engine")
        self.engine = engine
        self.decoder = decoder

    @property
    def max_positions(self) -> int | None:
        """The engine's context length in tokens (None when the model does not say): the engine refuses
        a longer sequence."""
        return self.engine.max_positions

    def decoder_for(self, config: LLMConfig) -> Decoder | None:
        """The decoder a reply on `config` uses: None (plain) where `config.speculative` is "none"."""
        return None if config.speculative == "none" else self.decoder

    def reply_stream(self, messages: Sequence[Mapping[str, str]], config: LLMConfig, executor: Executor,
                     clock: Clock | None = None) -> ReplyStream:
        """Start generating the reply to `messages` on `executor` (the "llm" thread) now, inside a
        running event loop (RuntimeError otherwise): a `ReplyStream` (llm/stream.py)."""
        return ReplyStream(self.engine, messages, config, executor, clock, decoder=self.decoder_for(config))

    def live_turn(self, messages_before: Sequence[Mapping[str, str]], config: LLMConfig, executor: Executor,
                  clock: Clock | None = None) -> LiveTurn:
        """A user turn on the chat `messages_before` (incremental prefill), inside a running event
        loop: a `LiveTurn` (llm/live.py)."""
        return LiveTurn(self.engine, messages_before, config, executor, clock, decoder=self.decoder_for(config))

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in the engine's tokenizer (no special tokens)."""
        return self.engine.count_tokens(text)

    def warm_up(self) -> None:
        """One short prefill and decode on the engine (`LLMEngine.warm_up`); the cache is emptied after."""
        self.engine.warm_up()
