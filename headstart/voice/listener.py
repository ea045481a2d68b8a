"""The listening stage: audio frames in; speech, partial/final transcripts and end of turn out.

`Listener` composes the synchronous policies (VAD, LocalAgreement, the pass cadence, Endpointer) with the
blocking ASR, which runs on a single-thread executor. It follows the stream shape used at every stage:
`await push(frame)` any number of times, `await end_input()`, and `async for event in listener` (another
task) until the stream ends. Its parts, each in its own module:

    stream_audio.py   the recent 16 kHz stream by absolute sample index
    utterance.py      one utterance's state, and the trimming of long utterances
    pass_cadence.py   when a partial or early-final pass runs, and which pass is the final
    turn_scoring.py   the EOU (text) and acoustic (audio) scores fed into the endpointer

Events, in the order a consumer sees them for one utterance:

    SpeechStarted, PartialTranscript*, SpeechEnded, FinalTranscript, EndOfTurn

* Partials re-transcribe the whole utterance so far on the cadence of pass_cadence.py. At most one pass
  is ever in flight and nothing queues up, so `push()` never waits for the ASR. `committed` text
  (LocalAgreement-n) only grows.
* The final transcript comes from the first pass whose audio reaches the VAD's (padded) speech end: a
  pass started as soon as the VAD reports the end (not at the end-of-turn decision), an early-final
  pass started in the pause, or one already running or finished that heard it all (the VAD decides the
  end `min_silence_s` after the speech, so the latest partial often covers it and the final costs no
  extra pass). The FinalTranscript is the committed words plus that pass' words beyond them (committed
  text is never contradicted), or with `ASRConfig.final_redecode` that pass' own full hypothesis; it
  covers the utterance up to `audio_end_s`.
* If speech resumes before the end of turn, the utterance continues: a SpeechStarted follows, the audio
  of both parts is one utterance, and a later FinalTranscript covers all of it (a final pass still
  running when speech resumes is demoted to a partial and yields no FinalTranscript).
* EndOfTurn comes only after the FinalTranscript of its utterance. An utterance without words (noise
  the VAD let through) yields `FinalTranscript("")` and *no* EndOfTurn: the session must not reply to
  silence, and gets a clear signal to drop anything it held for that speech.
* If a turn reaches `EndpointConfig.max_turn_s` during speech, it is cut there (final, end of turn) and
  a new utterance starts at the cut (a SpeechStarted at that time). "Speech" in which the recogniser
  finds no word for `EndpointConfig.max_wordless_s` (claps, breathing) ends the turn the same way,
  without a new utterance.
* Semantic and acoustic endpointing (turn_scoring.py): the EOU probability of each partial and final
  text, and an acoustic score of each pause, go into the Endpointer, which adapts the silence it needs.
  The session may instead push probabilities itself with `set_eou_probability`. EndOfTurn carries the
  probability it was decided on.
* Ablations: `ASRConfig.streaming=False` runs no partial passes and emits no partials (one pass over
  the whole utterance from the VAD's end of speech, like a naive pipeline); with
  `EndpointConfig.semantic=False` the EOU scorer is never called and the silence is fixed.

Cadence and endpointing run on audio time (samples received), so frames pushed faster than real time
give the same final transcripts and end-of-turn times (fewer partials, as the ASR is busier per second of
audio). The VAD (~0.2 ms per 32 ms window) runs inline in `push()`.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, ThreadPoolExecutor

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ, AudioError, AudioFrame, StreamResampler, to_mono_float32
from headstart.config import ASRConfig
from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded, SpeechStarted
from headstart.seams import ListeningDefaults, Transcriber
from headstart.voice.agreement import LocalAgreement, drop_loop_tail
from headstart.voice.endpoint import Endpointer
from headstart.voice.pass_cadence import PassCadence
from headstart.voice.stream_audio import StreamAudio
from headstart.voice.turn_scoring import AcousticScorer, AcousticScoring, EOUScorer, EOUScoring, ListenerHooks
from headstart.voice.utterance import Utterance
from headstart.voice.vad import VAD
from headstart.voice.words import join_words, mean_probability

__all__ = ["AcousticScorer", "EOUScorer", "Listener", "ListenerEvent", "Transcriber", "make_asr_executor"]

ListenerEvent = SpeechStarted | SpeechEnded | PartialTranscript | FinalTranscript | EndOfTurn

_PREROLL_S = 2.0  # audio kept before speech: the VAD back-dates starts by its padding and min_speech_s


def make_asr_executor() -> ThreadPoolExecutor:
    """The named single-thread executor the ASR runs on."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="asr")


class Listener:
    """Streaming speech recognition with endpointing, as an async event stream.

    Args:
        vad: a fresh `VAD` (its stream position becomes the listener's audio time).
        asr: the recogniser (`seams.Transcriber`; None: a listener that never gets speech to transcribe)
            called only on `executor`.
        endpointer: a fresh `Endpointer`.
        config: the ASR settings (`PassCadence.resolve`: cadence, early final, agreement_n, trim_after_s);
            settings left None are the engine's (`asr.listening`, `headstart.seams.ListeningDefaults`).
        executor: a single-thread executor (`make_asr_executor()`); the caller owns and shuts it down.
        eou_scorer: optional `async (text) -> probability in [0, 1] or None` that the user's turn is
            complete after `text`; it runs on the event loop (put blocking work on its own executor).
        acoustic_scorer: optional `async (samples float32 16 kHz (n,)) -> probability in [0, 1] or None`
            that the turn is complete from its audio (Smart Turn); called only when the endpointer's
            fusion is on (`EndpointConfig.acoustic_model`). Blocking work belongs on its own executor.

    Raises (from push / end_input / iteration):
        ValueError: (at construction) an inconsistent `config` (`PassCadence.resolve`).
        AudioError: a frame that is not numeric audio of shape (n,) or (n, channels), or holds NaN/inf.
        RuntimeError: push after end_input; or, when iterating, the ASR failed (the cause is chained).
    """

    def __init__(
        self,
        vad: VAD,
        asr: Transcriber | None,
        endpointer: Endpointer,
        config: ASRConfig,
        executor: Executor,
        eou_scorer: EOUScorer | None = None,
        acoustic_scorer: AcousticScorer | None = None,
    ) -> None:
        # settings left None are the engine's; no ASR (a session that never transcribes): whisper's
        self._cadence = PassCadence.resolve(config, ListeningDefaults() if asr is None else asr.listening)
        self._vad = vad
        self._asr = asr
        self._endpointer = endpointer
        self._config = config
        self._executor = executor
        self._audio = StreamAudio()
        self._resampler: StreamResampler | None = None
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._current: Utterance | None = None  # the utterance speech goes to, until its end of turn
        # unfinished utterances, oldest first: those whose end of turn is decided but whose final pass
        # is pending, then the current one. Only the oldest emits; the others hold their events, so
        # utterances never interleave (it matters when frames come faster than the ASR).
        self._utterances: list[Utterance] = []
        self._task: asyncio.Task | None = None  # the pass in flight
        self._ended = False
        self._failed: BaseException | None = None
        self.num_passes = 0  # ASR calls made (partial and final)
        hooks = ListenerHooks(current=lambda: self._current, ended=lambda: self._ended,
                              poll=self._poll_endpointer, schedule=self._schedule, fail=self._fail)
        self._eou = EOUScoring(eou_scorer, endpointer, hooks)
        self._acoustic = AcousticScoring(acoustic_scorer, endpointer, vad, self._audio, hooks)

    # -- input ----------------------------------------------------------------------------------
    async def push(self, frame: AudioFrame) -> None:
        """Add one frame of audio. Any sample rate, integer or float dtype, mono or (n, channels):
        converted to float32 mono 16 kHz here (int16 by the fixed 1/32768 scale). Never waits for ASR."""
        if self._ended:
            raise RuntimeError("Listener.push after end_input")
        if self._failed is not None:
            raise RuntimeError("the listener's ASR failed") from self._failed
        if not isinstance(frame, AudioFrame):
            raise AudioError(f"Listener.push takes an AudioFrame, got {type(frame).__name__}")
        samples = to_mono_float32(frame.samples)
        samples = self._to_16k(samples, int(frame.sample_rate))
        self._feed(samples)

    async def end_input(self) -> None:
        """No more audio: close open speech, finish its final transcript and end of turn, then end the
        event stream. Waits for the ASR passes this needs."""
        if self._ended:
            return
        self._ended = True
        if self._resampler is not None:
            self._feed(self._resampler.flush())
        self._close_turn()
        while self._task is not None:
            await self._task  # it never raises: failures go to the queue
        await self._eou.drain()
        await self._acoustic.drain()
        self._queue.put_nowait(_END)

    async def commit(self) -> None:
        """End the utterance in progress now (push-to-talk released): close open speech at the current
        position, decide its end of turn here (no silence to wait for) and wait for its final pass.
        Unlike `end_input` the stream goes on: later audio continues the same timeline (`audio_s`
        keeps counting) and starts a new utterance. A no-op when nothing is open."""
        if self._ended or self._failed is not None:
            return
        self._close_turn()
        while self._task is not None and any(u.final_text is None for u in self._utterances):
            await self._task  # it never raises: failures go to the queue

    def set_eou_probability(self, probability: float | None) -> None:
        """Push an end-of-utterance probability for the current turn's latest text into the
        endpointer (for a session that scores partials itself); may end the turn at once."""
        self._endpointer.push_eou(probability)
        self._poll_endpointer()

    async def settle(self) -> None:
        """Wait until the ASR pass in flight now (if any) has been processed. For harnesses that
        drive time themselves (the benchmark); the stream works without it."""
        if self._task is not None:
            await self._task

    @property
    def bargein_armed(self) -> bool:
        """Whether the VAD's barge-in start rule applies (`VAD.bargein_armed`: speech starts after
        `VADConfig.bargein_min_speech_s`). The session sets it while its reply plays, before each push."""
        return bool(getattr(self._vad, "bargein_armed", False))

    @bargein_armed.setter
    def bargein_armed(self, armed: bool) -> None:
        self._vad.bargein_armed = bool(armed)

    @property
    def asr_busy(self) -> bool:
        """Whether an ASR pass is in flight."""
        return self._task is not None

    @property
    def silence_pending(self) -> bool:
        """Whether the VAD hears silence after speech that it has not confirmed as the speech's end
        yet (a SpeechEnded follows `VADConfig.min_silence_s` in, unless the speech resumes)."""
        return self._vad.silence_since_s is not None

    @property
    def pause_s(self) -> float | None:
        """How long the VAD has heard silence after speech that it has not confirmed as the speech's
        end (seconds of audio received), or None when it hears no such pause (speech, or no speech)."""
        since = self._vad.silence_since_s
        return None if since is None else max(self._position_s - since, 0.0)

    @property
    def pause_heard(self) -> bool:
        """Whether, during such a pause, the newest ASR pass of the utterance heard its speech up to the
        pause as the final's rule reads it (the padded end the VAD would report, but `final_slack_s`): if
        the speech ends here, the latest partial is the final and no other pass runs. False without a
        pause."""
        since, utterance = self._vad.silence_since_s, self._current
        if since is None or utterance is None:
            return False
        return self._cadence.heard_to(utterance, int(round((since + self._vad.config.speech_pad_s) * SAMPLE_RATE_HZ)))

    @property
    def expected_final_text(self) -> str:
        """The text the current utterance's FinalTranscript would carry if its newest ASR pass were its
        final: that pass' own hypothesis with `final_redecode` (Moonshine's default: it can differ from
        the latest partial, whose committed words are older passes'), else the committed and pending
        words (the latest partial). "" without an utterance or a pass."""
        utterance = self._current
        if utterance is None:
            return ""
        if self._cadence.final_redecode and utterance.newest_words:
            return join_words(utterance.newest_words)
        return join_words(utterance.heard_words)

    @property
    def in_speech(self) -> bool:
        """Whether the VAD is inside a speech segment (from its SpeechStarted to its SpeechEnded, a pause
        not yet confirmed included): a pause that ends with this still True was a gap in the speech."""
        return bool(self._vad.speaking)

    # -- output ---------------------------------------------------------------------------------
    def __aiter__(self) -> Listener:
        return self

    async def __anext__(self) -> ListenerEvent:
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # stay ended for later calls
            raise StopAsyncIteration
        if isinstance(item, _Failure):
            self._queue.put_nowait(_END)
            raise RuntimeError("the listener's ASR failed") from item.error
        return item  # type: ignore[return-value]

    # -- internals ------------------------------------------------------------------------------
    @property
    def _position_s(self) -> float:
        return self._audio.end / SAMPLE_RATE_HZ

    def _to_16k(self, samples: np.ndarray, rate: int) -> np.ndarray:
        if rate <= 0:
            raise AudioError(f"sample rate must be positive, got {rate}")
        if self._resampler is not None and self._resampler.from_hz != rate:
            tail = self._resampler.flush()  # the rate changed mid-stream: finish the old filter
            self._resampler = None
            self._feed(tail)
        if rate == SAMPLE_RATE_HZ:
            return samples
        if self._resampler is None:
            self._resampler = StreamResampler(rate, SAMPLE_RATE_HZ)
        return self._resampler.push(samples)

    def _feed(self, samples: np.ndarray) -> None:
        if samples.size == 0:
            return
        self._audio.append(samples)
        for event in self._vad.push(samples):
            self._on_vad(event)
        self._acoustic.score()
        self._poll_endpointer()
        self._schedule()
        self._forget_old_audio()

    def _close_turn(self) -> None:
        """Close open speech and decide the end of turn at the current position (end of input, commit)."""
        for event in self._vad.flush():
            self._on_vad(event)
        end_of_turn = self._endpointer.flush(self._position_s)
        if end_of_turn is not None:
            self._on_end_of_turn(end_of_turn)
        self._schedule()

    def _poll_endpointer(self) -> None:
        end_of_turn = self._endpointer.poll(self._position_s)
        if end_of_turn is not None:
            self._on_end_of_turn(end_of_turn)

    def _on_vad(self, event: SpeechStarted | SpeechEnded) -> None:
        self._endpointer.push(event)
        sample = int(round(event.audio_s * SAMPLE_RATE_HZ))
        if isinstance(event, SpeechStarted):
            utterance = self._current
            if utterance is None:
                utterance = self._open(sample)
            else:  # speech resumed before the end of turn: one utterance
                utterance.end = None
                utterance.final_text = None
                utterance.resumes += 1
            self._emit(utterance, event)
        elif self._current is not None:
            self._current.end = sample
            self._emit(self._current, event)
            self._eou.speech_ended()

    def _open(self, start: int) -> Utterance:
        utterance = Utterance(
            start=start, agreement=LocalAgreement(self._cadence.agreement_n), audio_start=start, last_pass_end=start
        )
        self._current = utterance
        self._utterances.append(utterance)
        return utterance

    def _emit(self, utterance: Utterance, event: object) -> None:
        if self._utterances and self._utterances[0] is utterance:
            self._queue.put_nowait(event)
        else:
            utterance.outbox.append(event)

    def _on_end_of_turn(self, event: EndOfTurn) -> None:
        utterance = self._current
        if utterance is None:
            return
        if self._endpointer.forced and self._vad.speaking:
            # max_turn_s reached during speech: cut here, continue in a new utterance
            cut = self._audio.end
            utterance.end = cut
            self._emit(utterance, SpeechEnded(cut / SAMPLE_RATE_HZ))
            self._emit(self._open(cut), SpeechStarted(cut / SAMPLE_RATE_HZ))
        else:
            self._current = None
            if utterance.end is None:  # wordless "speech" (claps, breathing): close at the decision
                utterance.end = self._audio.end
                self._emit(utterance, SpeechEnded(utterance.end / SAMPLE_RATE_HZ))
        utterance.end_of_turn = event
        self._finish_if_done(utterance)

    def _finish_if_done(self, utterance: Utterance) -> None:
        """An utterance is done when its end of turn is decided and its final transcript is out."""
        if utterance.end_of_turn is None or utterance.final_text is None or utterance not in self._utterances:
            return
        if utterance.final_text:
            self._emit(utterance, utterance.end_of_turn)
        self._utterances.remove(utterance)
        if self._utterances:  # the next one may now speak: release what it held
            following = self._utterances[0]
            for held in following.outbox:
                self._queue.put_nowait(held)
            following.outbox.clear()
            self._finish_if_done(following)

    def _schedule(self) -> None:
        """Start the most urgent ASR pass if the worker is free: a final pass, else a partial."""
        if self._task is not None or self._failed is not None:
            return
        for utterance in list(self._utterances):
            if utterance.end is not None and utterance.final_text is None:
                if self._cadence.covers(utterance):  # a pass already heard it all
                    self._finalize(utterance)
                    continue
                self._start(utterance, utterance.end)
                return
        current = self._current
        if (
            self._config.streaming
            and current is not None
            and current.end is None
            and not self._ended
            and self._cadence.partial_due(current, self._audio.end, self._vad.silence_since_s)
        ):
            self._start(current, self._audio.end)

    def _start(self, utterance: Utterance, stop: int) -> None:
        utterance.last_pass_end = stop
        utterance.trim(stop, self._cadence.trim_after_samples)
        samples = self._audio.slice(utterance.audio_start, stop)
        self.num_passes += 1
        self._task = asyncio.get_running_loop().create_task(
            self._run_pass(utterance, samples, stop, utterance.audio_start, utterance.prompt)
        )

    async def _run_pass(self, utterance: Utterance, samples: np.ndarray, stop: int, start: int, prompt: str) -> None:
        asr, offset_s = self._asr, start / SAMPLE_RATE_HZ

        def call():
            if asr is None:  # handed to the consumer like any ASR failure
                raise RuntimeError("speech reached a listener without an ASR")
            return asr.transcribe(samples, offset_s, prompt=prompt) if prompt else asr.transcribe(samples, offset_s)

        try:
            result = await asyncio.get_running_loop().run_in_executor(self._executor, call)
        except Exception as exc:  # noqa: BLE001 - handed to the consumer
            self._task = None
            self._fail(exc)
            return
        self._task = None
        agreement = utterance.agreement
        words = drop_loop_tail(result.words)  # a repetition loop past the audio's end is no speech
        agreement.push(words)
        if stop >= utterance.covered:
            utterance.covered = stop
            utterance.newest_words = tuple(agreement.committed[: utterance.trimmed_words]) + words
        if utterance is self._current:
            heard = utterance.heard_words
            self._endpointer.push_words(heard[-1].end_s if heard else None, stop / SAMPLE_RATE_HZ)
        if utterance.end is not None and utterance.final_text is None and self._cadence.covers(utterance):
            self._finalize(utterance)
        else:  # a partial (a final pass overtaken by resumed speech lands here too: its end moved on)
            partial = (agreement.committed_text, agreement.pending_text)
            if partial != utterance.last_partial and self._config.streaming:
                utterance.last_partial = partial
                confidence = mean_probability(agreement.committed + agreement.pending)
                self._emit(utterance, PartialTranscript(partial[0], partial[1], stop / SAMPLE_RATE_HZ, confidence))
                self._eou.score(utterance, join_words(utterance.heard_words))
        self._poll_endpointer()
        self._schedule()
        self._forget_old_audio()

    def _fail(self, exc: Exception) -> None:
        """A stage call failed: hand the error to the consumer and end the event stream."""
        self._failed = exc
        self._queue.put_nowait(_Failure(exc))
        self._queue.put_nowait(_END)

    def _finalize(self, utterance: Utterance) -> None:
        """The newest hypothesis covers the whole utterance: commit it and emit the FinalTranscript."""
        utterance.agreement.flush()
        if self._cadence.final_redecode and utterance.newest_words:
            words = utterance.newest_words
        else:
            words = utterance.agreement.committed
        utterance.final_text = join_words(words)
        assert utterance.end is not None
        self._emit(utterance, FinalTranscript(utterance.final_text, utterance.end / SAMPLE_RATE_HZ,
                                              mean_probability(words)))
        self._eou.score(utterance, utterance.final_text)
        self._finish_if_done(utterance)

    def _forget_old_audio(self) -> None:
        keep = self._audio.end - int(_PREROLL_S * SAMPLE_RATE_HZ)
        for utterance in self._utterances:
            keep = min(keep, utterance.audio_start)
        self._audio.forget_before(keep)


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()
