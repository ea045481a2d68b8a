"""The typed seams between the session and its stages: what `Components.asr`, `.llm`, `.tts` and the
end-of-turn models must offer, and the listener the session feeds. A shared module (no stage imports):
voice/, llm/ and tts/ implement these protocols, session/ calls them, and test fakes implement them whole.

    Transcriber       voice/asr.py WhisperASR, voice/moonshine.py MoonshineASR
    Synthesizer       tts/piper.py, hibari.py, espeak.py, coqui.py
    LLMBackend        llm/local.py LocalLLM (an in-process LLMEngine), llm/remote.py RemoteLLM (an
                      OpenAI-compatible engine)
    EOUModel          llm/eou.py EOUEstimator, llm/eou_head.py EOUHead (text: is the user's turn complete)
    AcousticEOUModel  voice/smart_turn.py SmartTurn (audio: is the user's turn complete)
    SpeechListener    voice/listener.py Listener (VAD, ASR and endpointer over the user's audio)

Blocking methods (`transcribe`, `synthesize`, `probability`, `completion_probability`) run on the
component's single-thread executor only; `LLMBackend.reply_stream` and `live_turn` are called on the
event loop and put their own work on the executor they are given.
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from headstart.audio import AudioFrame
from headstart.clock import Clock
from headstart.config import LLMConfig
from headstart.events import (
    EndOfTurn,
    FinalTranscript,
    PartialTranscript,
    ReplyDone,
    SpeechEnded,
    SpeechStarted,
    TokenDelta,
)

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

    @property
    def stats(self) -> LLMStats:
        """Its clock readings, written as it generates."""
        ...

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
    final (incremental prefill). Both start inside a running event loop. The backend decodes as the
    `config` passed in says: a speculative decoder it holds is used unless `config.speculative` is
    "none" (a session's plain baseline); a backend without one ignores the setting.
    """

    @property
    def max_positions(self) -> int | None:
        """The context length in tokens, or None when unknown (a remote engine)."""
        ...

    def reply_stream(self, messages: Messages, config: LLMConfig, executor: Executor,
                     clock: Clock | None = None) -> LLMReplyStream:
        """Start the reply to `messages` (system prompt put first when missing) now."""
        ...

    def live_turn(self, messages_before: Messages, config: LLMConfig, executor: Executor,
                  clock: Clock | None = None) -> LLMTurn:
        """Open a user turn on the chat `messages_before`."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` (the tokenizer's count, or an estimate where there is none)."""
        ...

    def warm_up(self) -> None: ...


class PromptRenderer(Protocol):
    """What renders a chat into the local LLM's prompt token ids (llm/engine.py `LLMEngine`)."""

    def render_prompt(self, messages: Messages) -> list[int]:
        """Token ids of `messages` in the chat template, the assistant header last."""
        ...


class EOUModel(Protocol):
    """A text end-of-utterance (EOU) model: how likely the user's turn is complete after a text
    (llm/eou.py `EOUEstimator`: the chat model's end-of-turn token; llm/eou_head.py `EOUHead`: a
    trained head). Runs on the local LLM's KV cache: call it on the "llm" executor only."""

    def probability(self, messages_before: Messages, text: str) -> float:
        """P(the turn is complete) in [0, 1] of `text` as the user's message after `messages_before`
        (system message and history). Empty text gives 0.0."""
        ...


class ReplyPrefillEOUModel(EOUModel, Protocol):
    """An EOU model whose forward can run on through the reply prompt (llm/eou_head.py `EOUHead`), so
    a reply to the text starts without a prefill of its own."""

    def probability(self, messages_before: Messages, text: str,
                    reply_ids: Sequence[int] | None = None) -> float:
        """As `EOUModel.probability`; `reply_ids`: the whole reply prompt for `text`, prefilled in the
        same forward where it extends the model's own prompt."""
        ...


class AcousticEOUModel(Protocol):
    """An acoustic end-of-turn model (voice/smart_turn.py `SmartTurn`): scores the turn's audio, not
    its words. Blocking: call it on its own executor (`Components.acoustic_executor`)."""

    def completion_probability(self, samples: np.ndarray) -> float:
        """P(the turn is complete) in [0, 1] of float32 mono 16 kHz `samples` (num_samples,), the end
        of the user's audio so far."""
        ...


# What the listener emits, in order per utterance (voice/listener.py `Listener`).
ListenerEvent = SpeechStarted | SpeechEnded | PartialTranscript | FinalTranscript | EndOfTurn
# `async (text) -> P(turn complete) or None (unknown)`: the listener's endpointer asks it (session/eou.py).
EOUScorer = Callable[[str], Awaitable[float | None]]
# `async (float32 16 kHz samples (num_samples,)) -> P(turn complete) or None`: the acoustic one.
AcousticScorer = Callable[[np.ndarray], Awaitable[float | None]]


class SpeechListener(Protocol):
    """The session's listener (voice/listener.py `Listener`): VAD, streaming ASR and the endpointer over
    the user's audio. Iterate it once for its events (`ListenerEvent`); it ends after `end_input`.

    Attributes:
        bargein_armed: the VAD's quicker barge-in start rule applies (the session sets it while a
            reply plays, before each push).
    """

    bargein_armed: bool

    @property
    def silence_pending(self) -> bool:
        """The VAD hears silence after speech that it has not confirmed as the speech's end yet."""
        ...

    @property
    def pause_s(self) -> float | None:
        """Seconds of that unconfirmed pause so far, None without one."""
        ...

    @property
    def pause_heard(self) -> bool:
        """During such a pause, the newest ASR pass heard the speech up to it (the latest partial would
        be the final)."""
        ...

    @property
    def in_speech(self) -> bool:
        """The VAD is inside a speech segment (an unconfirmed pause included)."""
        ...

    @property
    def expected_final_text(self) -> str:
        """The text the final transcript would carry if the speech ended now ("": none)."""
        ...

    async def push(self, frame: AudioFrame) -> None:
        """User audio (any rate or channel count)."""
        ...

    async def commit(self) -> None:
        """End the utterance now (push-to-talk released): its final transcript and end of turn follow."""
        ...

    async def end_input(self) -> None:
        """No more audio: the last events follow, then the iteration ends."""
        ...

    def __aiter__(self) -> AsyncIterator[ListenerEvent]: ...


# `(eou_scorer, acoustic_scorer) -> listener`: how a session makes its listener (again after a clear).
ListenerFactory = Callable[[EOUScorer | None, AcousticScorer | None], SpeechListener]
