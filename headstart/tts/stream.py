"""The async TTS stage: text deltas in, audio frames out, as early as each clause is ready.

    stream = TTSStream(synthesizer, ClauseChunker(config), tts_executor)
    stream.push_text("Sure, the weather ")   # from the LLM, as tokens arrive
    ...
    stream.end_input()
    async for frame in stream:              # AudioFrame at synthesizer.sample_rate
        send(frame)

Each chunk the chunker emits is normalised (numbers, abbreviations, markdown -> words) and
synthesised on the single "tts" thread; frames are yielded as soon as the engine returns them, so the
first audio never waits for the whole text. The engine's generator is created and stepped only on
that thread (it is never iterated on the event loop), one array per step, so `cancel()` takes effect
between arrays. `cancel()` is out of band: it drops queued text and audio not yet yielded at once.

Timing: every chunk gets a `ChunkTiming` on the injected clock (`headstart.clock`); `first_audio_at_s`
is the clock time of the stream's first audio, for the session's turn timeline.

Unspeakable text: a chunk whose spoken form holds nothing the voice can say (another script: "こんにちは")
is not handed to the engine; when a whole reply had words but none speakable, the stream says its
`fallback_text` ("Sorry, I can only speak English."), so the listener never gets silence for an answer.
`unspeakable` lists the chunks passed over and `fallback_spoken` says whether the fallback was said.

Spans: `spans()` says where each chunk handed to the engine lies in the stream's audio (`ChunkSpan`:
its text and sample span, growing while it is synthesised), so a consumer that knows how much audio
was played knows which text was heard without matching chunks to timings by text.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from headstart.audio import AudioFrame, StreamResampler, to_mono_float32
from headstart.clock import Clock, MonotonicClock
from headstart.tts.base import UNSPEAKABLE_FALLBACK, Synthesizer, has_speech_content, is_speakable
from headstart.tts.chunker import ClauseChunker
from headstart.tts.normalize import normalize_text

_END = object()
log = logging.getLogger("headstart.tts.stream")


def make_tts_executor() -> ThreadPoolExecutor:
    """The single named thread all synthesis runs on."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="tts")


@dataclass(frozen=True, slots=True)
class ChunkTiming:
    """When one chunk went through the synthesiser, in clock seconds.

    Attributes:
        index: position of the chunk in the stream (0 = first).
        text: the chunk as the chunker emitted it.
        spoken_text: the normalised text sent to the engine.
        ready_at_s: when the chunker emitted it (the `push_text`/`end_input` call that completed it).
        synth_started_at_s: when synthesis started (later than ready if the engine was busy).
        first_audio_at_s: when its first audio array was ready.
        finished_at_s: when its last audio array was ready.
        audio_s: seconds of audio produced.
    """

    index: int
    text: str
    spoken_text: str
    ready_at_s: float
    synth_started_at_s: float
    first_audio_at_s: float
    finished_at_s: float
    audio_s: float

    @property
    def ttfa_s(self) -> float:
        """Time to first audio of this chunk: ready -> first audio (includes waiting for the engine)."""
        return self.first_audio_at_s - self.ready_at_s

    @property
    def synth_ttfa_s(self) -> float:
        """Engine time to first audio: synthesis start -> first audio."""
        return self.first_audio_at_s - self.synth_started_at_s


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """Where one chunk handed to the engine lies in the stream's output audio.

    Attributes:
        index: position among the chunks handed to the engine (0 = first; chunks whose spoken form is
            empty are never handed over and get none).
        text: the chunk as the chunker emitted it (not normalised).
        start_sample, end_sample: its samples [start, end) in the stream's output, at `sample_rate`;
            `end_sample` grows while the chunk is synthesised (a snapshot).
        sample_rate: the output rate (Hz).
        complete: the engine finished it (False while synthesising, or when cancelled part way).
    """

    index: int
    text: str
    start_sample: int
    end_sample: int
    sample_rate: int
    complete: bool

    @property
    def start_s(self) -> float:
        return self.start_sample / self.sample_rate

    @property
    def audio_s(self) -> float:
        """Seconds of audio it has so far."""
        return (self.end_sample - self.start_sample) / self.sample_rate


class TTSStream:
    """One reply's speech: push text, end input, async-iterate `AudioFrame`s; `cancel()` any time.

    Args:
        synthesizer: the engine (see `headstart.tts.base.Synthesizer`).
        chunker: the chunking policy; it is reset when the stream starts and on cancel.
        executor: the single-thread "tts" executor (`make_tts_executor()`), shared by all streams so
            synthesis never runs twice at once.
        clock: time source for the timings (default: MonotonicClock).
        normalize: text -> spoken text (default: `normalize_text`).
        frame_s: if set, split engine output into frames of this many seconds (the last may be
            shorter); if None, one frame per engine array (about one sentence for Piper).
        output_rate_hz: if set, frames are resampled to this rate (soxr, high quality) with one
            filter state per chunk, fed array by array, so joins inside a chunk stay continuous; the
            chunk's tail is flushed when the engine finishes it, so no audio waits for the next chunk.
            Chunk edges are faded to zero by the engines (`base.fade_edges`). None: the engine's rate.
        speakable: `spoken text -> bool`, whether the voice can say something of it
            (`headstart.tts.engines.speakable_check`; default `base.is_speakable`, the English voices);
            a chunk it rejects is not handed to the engine.
        fallback_text: said (as written, not normalised) when the reply had words but none the voice
            can speak; None: such a reply stays silent.

    Iteration ends after `end_input()` once all audio is yielded, or at once after `cancel()`. An
    engine error is raised from the iteration as soon as it happens.
    """

    def __init__(
        self,
        synthesizer: Synthesizer,
        chunker: ClauseChunker,
        executor: Executor,
        *,
        clock: Clock | None = None,
        normalize: Callable[[str], str] = normalize_text,
        frame_s: float | None = None,
        output_rate_hz: int | None = None,
        speakable: Callable[[str], bool] = is_speakable,
        fallback_text: str | None = UNSPEAKABLE_FALLBACK,
    ) -> None:
        if frame_s is not None and frame_s <= 0:
            raise ValueError(f"frame_s must be > 0 or None, got {frame_s}")
        if output_rate_hz is not None and (not isinstance(output_rate_hz, int) or output_rate_hz <= 0):
            raise ValueError(f"output_rate_hz must be a positive int (Hz) or None, got {output_rate_hz!r}")
        self._synth = synthesizer
        self._chunker = chunker
        self._chunker.reset()
        self._executor = executor
        self._clock: Clock = clock or MonotonicClock()
        self._normalize = normalize
        self._speakable = speakable
        self.fallback_text = fallback_text
        self.unspeakable: list[str] = []  # chunks with words the voice cannot say, passed over
        self.fallback_spoken = False
        self.engine_rate_hz: int = synthesizer.sample_rate
        self.sample_rate: int = output_rate_hz or synthesizer.sample_rate
        self._frame_samples = None if frame_s is None else max(1, int(round(frame_s * self.sample_rate)))
        self._text_q: asyncio.Queue[object] = asyncio.Queue()
        self._audio_q: asyncio.Queue[object] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._stop = threading.Event()
        self._current: Iterator[np.ndarray] | None = None  # touched only on the executor thread
        self._resampler: StreamResampler | None = None  # executor thread only
        self._input_ended = False
        self._cancelled = False
        self._exhausted = False
        self.timings: list[ChunkTiming] = []
        self._spans: list[list] = []  # [text, start_sample, end_sample, complete], event loop only
        self._num_samples = 0  # output samples produced so far (event loop only)
        self.input_started_at_s: float | None = None
        self.first_audio_at_s: float | None = None

    # --- input side (call from the event loop thread) ---

    def push_text(self, delta: str) -> None:
        """Add a text delta. Ignored after `cancel()` (late tokens of a stopped reply).

        Raises:
            RuntimeError: after `end_input()`.
            TypeError: if `delta` is not a str.
        """
        if self._cancelled:
            return
        if self._input_ended:
            raise RuntimeError("push_text() after end_input(): start a new TTSStream for a new reply")
        now = self._clock.now()
        if self.input_started_at_s is None:
            self.input_started_at_s = now
        for chunk in self._chunker.push(delta):
            self._text_q.put_nowait((chunk, now))
        self._ensure_worker()

    def end_input(self) -> None:
        """No more text: speak what is left. Idempotent; a no-op after `cancel()`."""
        if self._cancelled or self._input_ended:
            return
        self._input_ended = True
        now = self._clock.now()
        for chunk in self._chunker.flush():
            self._text_q.put_nowait((chunk, now))
        self._text_q.put_nowait(_END)
        self._ensure_worker()

    def cancel(self) -> None:
        """Stop now: drop queued text and all audio not yet yielded; iteration ends. Idempotent.

        A synthesis call already running on the executor finishes there (one engine array at most)
        and its output is discarded; the engine's generator is then closed on its own thread.
        """
        if self._cancelled:
            return
        self._cancelled = True
        self._stop.set()
        self._chunker.reset()
        _drain(self._text_q)
        _drain(self._audio_q)
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        try:
            self._executor.submit(self._close_current)
        except RuntimeError:  # executor already shut down: nothing left running to close
            pass
        self._audio_q.put_nowait(_END)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def done(self) -> bool:
        """True once iteration has ended (all audio yielded, cancelled, or failed)."""
        return self._exhausted

    def spans(self) -> list[ChunkSpan]:
        """The chunks handed to the engine so far, in order, with their sample spans (a snapshot)."""
        return [ChunkSpan(i, text, start, end, self.sample_rate, complete)
                for i, (text, start, end, complete) in enumerate(self._spans)]

    @property
    def ttfa_s(self) -> float | None:
        """Time from the first chunk being ready to the first audio (None until there is audio)."""
        return self.timings[0].ttfa_s if self.timings else None

    # --- output side ---

    def __aiter__(self) -> TTSStream:
        return self

    async def __anext__(self) -> AudioFrame:
        if self._exhausted:
            raise StopAsyncIteration
        self._ensure_worker()
        item = await self._audio_q.get()
        if item is _END:
            self._exhausted = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._exhausted = True
            raise item
        assert isinstance(item, AudioFrame)
        return item

    # --- internals ---

    def _ensure_worker(self) -> None:
        if self._worker is not None or self._cancelled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # started by the first push/iteration that runs inside the loop
        self._worker = loop.create_task(self._run(), name="tts-stream")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._cancelled:
                item = await self._text_q.get()
                if item is _END:
                    break
                chunk, ready_at_s = item  # type: ignore[misc]
                await self._speak(loop, chunk, ready_at_s)
            if not self._cancelled and self.unspeakable and not self._spans and self.fallback_text:
                log.warning("reply has nothing the voice can speak (%r): saying %r instead",
                            " ".join(self.unspeakable)[:80], self.fallback_text)
                self.fallback_spoken = True
                await self._speak(loop, self.fallback_text, self._clock.now(), spoken=self.fallback_text)
        except asyncio.CancelledError:
            return
        except Exception as exc:  # the consumer sees engine errors at once
            if not self._cancelled:
                self._audio_q.put_nowait(exc)
        if not self._cancelled:
            self._audio_q.put_nowait(_END)

    async def _speak(self, loop: asyncio.AbstractEventLoop, chunk: str, ready_at_s: float,
                     spoken: str | None = None) -> None:
        spoken = self._normalize(chunk) if spoken is None else spoken
        if not self._speakable(spoken):
            if has_speech_content(spoken):
                self.unspeakable.append(chunk)
            return
        span = [chunk, self._num_samples, self._num_samples, False]
        self._spans.append(span)
        started = self._clock.now()
        await loop.run_in_executor(self._executor, self._open, spoken)
        first: float | None = None
        num_samples = 0
        while True:
            audio = await loop.run_in_executor(self._executor, self._next_audio)
            if audio is None or self._cancelled:
                break
            now = self._clock.now()
            if first is None:
                first = now
                if self.first_audio_at_s is None:
                    self.first_audio_at_s = now
            num_samples += audio.shape[0]
            self._num_samples += audio.shape[0]
            span[2] = self._num_samples
            for frame in self._frames(audio):
                self._audio_q.put_nowait(frame)
        if not self._cancelled:
            span[3] = True
        if first is not None and not self._cancelled:
            self.timings.append(
                ChunkTiming(
                    index=len(self.timings),
                    text=chunk,
                    spoken_text=spoken,
                    ready_at_s=ready_at_s,
                    synth_started_at_s=started,
                    first_audio_at_s=first,
                    finished_at_s=self._clock.now(),
                    audio_s=num_samples / self.sample_rate,
                )
            )

    def _frames(self, audio: np.ndarray) -> Iterator[AudioFrame]:
        if self._frame_samples is None:
            yield AudioFrame(audio, self.sample_rate)
            return
        for start in range(0, audio.shape[0], self._frame_samples):
            yield AudioFrame(audio[start : start + self._frame_samples], self.sample_rate)

    # Executor-thread side: the engine's generator lives and dies on the "tts" thread.

    def _open(self, text: str) -> None:
        self._current = iter(self._synth.synthesize(text))
        if self.sample_rate != self.engine_rate_hz:
            self._resampler = StreamResampler(self.engine_rate_hz, self.sample_rate)

    def _next_audio(self) -> np.ndarray | None:
        gen = self._current
        if gen is None or self._stop.is_set():
            self._close_current()
            return None
        for audio in gen:
            samples = to_mono_float32(audio)  # validates dtype/shape, rejects NaN
            if self._resampler is not None and samples.shape[0]:
                samples = np.clip(self._resampler.push(samples), -1.0, 1.0)
            if samples.shape[0]:
                return samples
        self._current = None
        resampler, self._resampler = self._resampler, None
        if resampler is not None:  # the chunk's tail still inside the filter
            tail = resampler.flush()
            if tail.shape[0]:
                return np.clip(tail, -1.0, 1.0)
        return None

    def _close_current(self) -> None:
        gen, self._current = self._current, None
        self._resampler = None
        close = getattr(gen, "close", None)
        if close is not None:
            close()


def _drain(queue: asyncio.Queue[object]) -> None:
    while True:
        try:
            queue.get_nowait()
        except asyncio.QueueEmpty:
            return
