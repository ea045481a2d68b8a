"""One conversation: the only place that knows all three stages.

    components = Components.load(PipelineConfig())          # once per process: models + executors
    session = Session(components)
    await session.push_audio(frame)                          # user audio, any rate/channels
    async for event in session: ...                          # transcripts, reply tokens, reply audio

Events out, in order: the listener's (SpeechStarted, PartialTranscript, SpeechEnded, FinalTranscript,
EndOfTurn), then for the reply TokenDelta..., ReplyAudio..., ReplyDone, and TurnCompleted with the
turn's timeline. The stages are joined by streams: tokens go to the TTS stream as they arrive and audio
leaves as soon as the first clause is synthesised.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from headstart.audio import AudioFrame
from headstart.clock import Clock, MonotonicClock
from headstart.config import PipelineConfig
from headstart.events import (
    EndOfTurn,
    FinalTranscript,
    PartialTranscript,
    ReplyDone,
    SpeechEnded,
    SpeechStarted,
    TokenDelta,
)
from headstart.timeline import AudioClockMap, TurnTimeline


@dataclass(frozen=True, slots=True)
class ReplyAudio:
    """A block of the assistant's speech, ready to send or play."""

    frame: AudioFrame


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """A user turn and its reply are over; `timeline` holds every timestamp of the turn."""

    timeline: TurnTimeline


@dataclass
class Components:
    """The models and executors one process loads once and shares between sessions.

    Each model runs on its own single-thread executor, so each is used by one thread at a time.
    """

    config: PipelineConfig
    asr: object
    llm: object
    tts: object
    asr_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="asr")
    )
    llm_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm")
    )
    tts_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="tts")
    )

    @classmethod
    def load(cls, config: PipelineConfig, log: Callable[[str], None] = lambda _: None) -> Components:
        """Load and warm up the ASR, LLM and TTS models named in `config`. Never downloads.

        Raises:
            headstart.models.ModelNotPreparedError: a model is not prepared (the message names the
                prepare command).
        """
        from headstart.llm.engine import LLMEngine
        from headstart.models import resolve_model
        from headstart.tts.engines import load_synthesizer
        from headstart.voice.asr import WhisperASR

        threads = config.threads
        asr_path = resolve_model(config.asr.model)
        llm_path = resolve_model(config.llm.model)
        log(f"loading ASR {config.asr.model}")
        asr = WhisperASR(asr_path, config.asr, cpu_threads=threads.asr_threads)
        asr.warmup()
        log(f"loading LLM {config.llm.model}")
        llm = LLMEngine.load(llm_path, config.llm, threads)
        llm.warm_up()
        log(f"loading TTS {config.tts.engine}")
        tts = load_synthesizer(config.tts, threads)
        return cls(config=config, asr=asr, llm=llm, tts=tts)

    def close(self) -> None:
        for executor in (self.asr_executor, self.llm_executor, self.tts_executor):
            executor.shutdown(wait=False, cancel_futures=True)


_END = object()


class Session:
    """One user's conversation over shared `Components`.

    Args:
        components: the loaded models and executors.
        clock: the time source for every timestamp (default: MonotonicClock).
    """

    def __init__(self, components: Components, clock: Clock | None = None) -> None:
        from headstart.voice.endpoint import Endpointer
        from headstart.voice.listener import Listener
        from headstart.voice.vad import create_vad

        self._components = components
        self._config = components.config
        self._clock: Clock = clock or MonotonicClock()
        self._listener = Listener(
            create_vad(self._config.vad),
            components.asr,
            Endpointer(self._config.endpoint),
            self._config.asr,
            components.asr_executor,
        )
        self._out: asyncio.Queue[object] = asyncio.Queue()
        self.history: list[dict[str, str]] = []
        self.audio_clock = AudioClockMap()
        self._audio_s = 0.0
        self._turn: TurnTimeline | None = None
        self._reply_task: asyncio.Task[None] | None = None
        self._listen_task: asyncio.Task[None] | None = None
        self._closed = False

    # -- input ---------------------------------------------------------------------------------------

    async def push_audio(self, frame: AudioFrame) -> None:
        """Add user audio (any rate or channel count; converted at the edge).

        Raises:
            headstart.audio.AudioError: for unusable audio (NaN samples, bad shape); the session goes on.
            RuntimeError: after `end_input()`.
        """
        if self._closed:
            raise RuntimeError("the session's input has ended")
        self._ensure_listening()
        await self._listener.push(frame)
        self._audio_s += frame.duration_s
        self.audio_clock.record(self._audio_s, self._clock.now())

    async def end_input(self) -> None:
        """No more user audio: finish the open turn (and its reply); then the event stream ends."""
        if self._closed:
            return
        self._closed = True
        self._ensure_listening()
        await self._listener.end_input()
        assert self._listen_task is not None
        await self._listen_task
        if self._reply_task is not None:
            await self._reply_task
        self._out.put_nowait(_END)

    async def aclose(self) -> None:
        """Stop everything at once (the client went away)."""
        self._closed = True
        for task in (self._reply_task, self._listen_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._out.put_nowait(_END)

    @property
    def reply_active(self) -> bool:
        return self._reply_task is not None and not self._reply_task.done()

    # -- output --------------------------------------------------------------------------------------

    def __aiter__(self) -> Session:
        return self

    async def __anext__(self) -> object:
        event = await self._out.get()
        if event is _END:
            self._out.put_nowait(_END)
            raise StopAsyncIteration
        if isinstance(event, BaseException):
            raise event
        return event

    # -- the turn ------------------------------------------------------------------------------------

    def _ensure_listening(self) -> None:
        if self._listen_task is None:
            self._listen_task = asyncio.create_task(self._listen(), name="session-listen")

    async def _listen(self) -> None:
        try:
            async for event in self._listener:
                now = self._clock.now()
                self._out.put_nowait(event)
                if isinstance(event, SpeechStarted):
                    if self._turn is None:
                        self._turn = TurnTimeline()
                elif isinstance(event, PartialTranscript):
                    turn = self._current_turn()
                    if turn.first_partial_at_s is None:
                        turn.first_partial_at_s = now
                elif isinstance(event, SpeechEnded):
                    self._current_turn().vad_speech_end_at_s = now
                elif isinstance(event, FinalTranscript):
                    turn = self._current_turn()
                    turn.final_transcript_at_s = now
                    turn.transcript = event.text
                    if not event.text.strip():
                        self._turn = None  # no words: the listener ends this utterance without a turn
                elif isinstance(event, EndOfTurn):
                    turn = self._current_turn()
                    turn.end_of_turn_at_s = now
                    self._turn = None
                    if turn.transcript.strip():
                        await self._start_reply(turn)
        except Exception as exc:  # noqa: BLE001 - surface to the consumer, never lose it
            self._out.put_nowait(exc)

    def _current_turn(self) -> TurnTimeline:
        if self._turn is None:
            self._turn = TurnTimeline()
        return self._turn

    async def _start_reply(self, turn: TurnTimeline) -> None:
        # One reply at a time: a newer turn replaces a reply still running.
        if self._reply_task is not None and not self._reply_task.done():
            self._reply_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reply_task
        self._reply_task = asyncio.create_task(self._reply_guarded(turn), name="session-reply")

    async def _reply_guarded(self, turn: TurnTimeline) -> None:
        try:
            await self._reply(turn)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the consumer sees the error at once; the session goes on
            self._out.put_nowait(exc)

    def _messages(self, user_text: str) -> list[dict[str, str]]:
        system = {"role": "system", "content": self._config.llm.system_prompt}
        return [system, *self.history, {"role": "user", "content": user_text}]

    async def _reply(self, turn: TurnTimeline) -> None:
        from headstart.llm.stream import ReplyStream
        from headstart.tts.chunker import ClauseChunker
        from headstart.tts.stream import TTSStream

        c = self._components
        tts = TTSStream(c.tts, ClauseChunker(self._config.tts), c.tts_executor, clock=self._clock)
        audio_task = asyncio.create_task(self._pump_audio(tts, turn), name="session-reply-audio")
        messages = self._messages(turn.transcript)
        turn.reply_started_at_s = self._clock.now()
        stream = ReplyStream(c.llm, messages, self._config.llm, c.llm_executor, clock=self._clock)
        text: list[str] = []
        try:
            async for event in stream:
                if isinstance(event, TokenDelta):
                    now = self._clock.now()
                    if turn.first_token_at_s is None:
                        turn.first_token_at_s = now
                    turn.last_token_at_s = now
                    turn.num_tokens += max(1, len(event.token_ids))
                    text.append(event.text)
                    tts.push_text(event.text)
                    self._out.put_nowait(event)
                elif isinstance(event, ReplyDone):
                    turn.num_tokens = event.num_tokens
                    self._out.put_nowait(event)
            tts.end_input()
            await audio_task
        except BaseException:
            stream.cancel()
            tts.cancel()
            audio_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await audio_task
            raise
        turn.reply = "".join(text).strip()
        turn.reply_done_at_s = self._clock.now()
        if tts.timings:
            turn.tts_first_text_at_s = tts.timings[0].ready_at_s
        self.history += [
            {"role": "user", "content": turn.transcript},
            {"role": "assistant", "content": turn.reply},
        ]
        self._out.put_nowait(TurnCompleted(turn))

    async def _pump_audio(self, tts, turn: TurnTimeline) -> None:
        async for frame in tts:
            if turn.first_audio_at_s is None:
                turn.first_audio_at_s = self._clock.now()
            turn.reply_audio_s += frame.duration_s
            self._out.put_nowait(ReplyAudio(frame))
