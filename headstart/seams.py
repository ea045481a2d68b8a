"""The typed seams between the session and its stages: what `Components.asr`, `.llm` and `.tts` must
offer. A shared module (no stage imports): voice/, llm/ and tts/ implement these protocols, session.py
and reply.py call them, and test fakes implement them whole.

    Transcriber    voice/asr.py WhisperASR, voice/moonshine.py MoonshineASR
    Synthesizer    tts/piper.py, hibari.py, espeak.py, coqui.py
    LLMBackend     llm/engine.py LLMEngine (local), llm/remote.py RemoteLLM (an OpenAI-compatible engine)

Blocking methods (`transcribe`, `synthesize`) run on the component's single-thread executor only;
`LLMBackend.reply_stream` and `live_turn` are called on the event loop and put their own work on the
executor they are given.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from headstart.clock import Clock
from headstart.config import LLMConfig
from headstart.events import ReplyDone, TokenDelta

Messages = Sequence[Mapping[str, str]]  # chat messages: {"role": ..., "content": ...}


@dataclass(frozen=True, slots=True)
class ListeningDefaults:
    """How the Listener streams an engine, for each `ASRConfig` setting left None (the engine's choice;
    the defaults are whisper's).

    Attributes:
        partial_interval_s: new audio (seconds) before the next partial pass (`ASRConfig.min_new_audio_s`).
        partial_long_s: past this much buffered audio (seconds) the interval grows in proportion to the
            buffer, for engines whose pass costs grow with the audio (`ASRConfig.partial_long_s`;
            inf: never). Passes at the VAD's pauses (the early final) start whatever the interval.
        final_slack_s: a pass that heard the utterance up to its padded end minus this is its final
            (`ASRConfig.final_slack_s`).
        final_redecode: the FinalTranscript is the final pass' own hypothesis, not the committed words
            plus its words beyond them (`ASRConfig.final_redecode`).
        agreement_n: how many consecutive passes must agree on a word before it is committed
            (LocalAgreement-n, `ASRConfig.agreement_n`).
    """

    partial_interval_s: float = 0.4
    partial_long_s: float = float("inf")
    final_slack_s: float = 0.15
    final_redecode: bool = False
    agreement_n: int = 2



@runtime_checkable
class Transcriber(Protocol):
    """A speech recogniser (the listener's ASR).

    Attributes:
        listening: how the Listener streams this engine (partial cadence, final pass, agreement).
    """

    listening: ListeningDefaults

    def transcribe(self, samples: np.ndarray, offset_s: float = 0.0, prompt: str | None = None) -> Any:
        """Recognise float32 mono 16 kHz `samples` (num_samples,); word times are stream seconds
        (`offset_s` added). Returns a `headstart.voice.asr.Transcription`. Blocking: call it on the
        "asr" executor. `prompt`: text that came before (an engine may ignore it)."""
        ...

    def warmup(self) -> None:
        """Run one short pass so the first real call does not pay one-off start-up costs."""
        ...


@runtime_checkable
class Synthesizer(Protocol):
    """A text-to-speech engine.

    Attributes:
        sample_rate: rate (Hz) of every array `synthesize` yields.
        name: a short label for logs and metrics ("piper:en_US-joe-medium", "espeak-ng").
    """

    sample_rate: int
    name: str

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        """Speak `text` (already normalised): yield float32 mono arrays (num_samples,) in [-1, 1] at
        `sample_rate`, in order, each as soon as it is ready. Blocking: call it on the "tts" executor.
        Text with nothing to say ("", "   ", "...") yields nothing and raises nothing."""
        ...

    def warm_up(self) -> None:
        """Run one short synthesis so the first real request does not pay one-off start-up costs."""
        ...


class LLMStats(Protocol):
    """What the session reads of a reply's `ReplyStats` (llm/stream.py): clock seconds."""

    token_times_s: list[float]  # one per generated token
    done_at_s: float | None  # None while generating


@runtime_checkable
class LLMReplyStream(Protocol):
    """One reply being generated: iterate it once for `TokenDelta`s then exactly one `ReplyDone`
    (or the error that stopped the model); `cancel()` stops it out of band (idempotent)."""

    stats: LLMStats

    def cancel(self) -> None: ...

    @property
    def cancelled(self) -> bool: ...

    def __aiter__(self) -> AsyncIterator[TokenDelta | ReplyDone]: ...


@runtime_checkable
class LLMTurn(Protocol):
    """One user turn being prefilled while the user speaks (llm/live.py LiveTurn, llm/remote.py
    RemoteTurn): `update` per partial (non-blocking), then `reply` once, or `close`."""

    def update(self, user_text: str) -> None: ...

    def reply(self, final_text: str) -> LLMReplyStream: ...

    def close(self) -> None: ...


@runtime_checkable
class LLMBackend(Protocol):
    """A chat LLM the session can ask: a reply to a chat, or a turn opened before the user's text is
    final (incremental prefill). Both start inside a running event loop.

    Attributes:
        max_positions: the context length in tokens, or None when unknown (a remote engine).
    """

    max_positions: int | None

    def reply_stream(self, messages: Messages, config: LLMConfig, executor: Executor,
                     clock: Clock | None = None, *, decoder: Any = None) -> LLMReplyStream:
        """Start the reply to `messages` (system prompt put first when missing) now. `decoder`: the
        process's speculative decoder (llm/speculative.py) or None; a backend may ignore it."""
        ...

    def live_turn(self, messages_before: Messages, config: LLMConfig, executor: Executor,
                  clock: Clock | None = None, *, decoder: Any = None) -> LLMTurn:
        """Open a user turn on the chat `messages_before`."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` (the tokenizer's count, or an estimate where there is none)."""
        ...

    def warm_up(self) -> None: ...
