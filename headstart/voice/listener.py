"""The listening stage: audio frames in; speech, partial/final transcripts and end of turn out.

`Listener` composes the three synchronous policies (VAD, LocalAgreement, Endpointer) with the blocking
ASR, which runs on a single-thread executor. It follows the stream shape used at every stage: `await
push(frame)` any number of times, `await end_input()`, and `async for event in listener` (another task)
until the stream ends.

Events, in the order a consumer sees them for one utterance:

    SpeechStarted, PartialTranscript*, SpeechEnded, FinalTranscript, EndOfTurn

* Partials re-transcribe the whole utterance so far, whenever the ASR worker is free and at least
  `ASRConfig.min_new_audio_s` of new audio has come (audio time), or, past `ASRConfig.partial_long_s`
  of buffered audio, that interval times buffer / partial_long_s (an engine whose pass cost grows with
  the audio keeps a bounded share of its core; the VAD's pauses start passes anyway). Settings left
  None are the engine's (`asr.listening`, `headstart.seams.ListeningDefaults`). At most one pass is
  ever in flight and nothing queues up, so `push()` never waits for the ASR. `committed` text
  (LocalAgreement-n) only grows.
* Early final: once the VAD has heard `ASRConfig.early_final_s` of silence after speech (before its
  `min_silence_s` confirms the end), a pass starts if the ASR is free; a pass that heard the utterance
  up to its padded end minus `ASRConfig.final_slack_s` (the VAD's padding is non-speech) is its final.
* The final transcript comes from the first pass whose audio reaches the VAD's (padded) speech end: a
  pass started as soon as the VAD reports the end (not at the end-of-turn decision), or one already
  running or finished that heard it all (the VAD decides the end `min_silence_s` after the speech, so
  the latest partial often covers it and the final costs no extra pass). The FinalTranscript is the
  committed words plus that pass' words beyond them (committed text is never contradicted), or with
  `ASRConfig.final_redecode` that pass' own full hypothesis; it covers the utterance up to `audio_end_s`.
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
* Semantic endpointing: with an `eou_scorer` (an async callable text -> probability that the user's
  turn is complete, e.g. the session's LLM via headstart/llm/eou.py), every partial and final text is
  scored (at most one call in flight; the newest text wins) and the probability is pushed into the
  Endpointer, which adapts the silence it needs. The session may instead push probabilities itself
  with `set_eou_probability`. EndOfTurn carries the probability it was decided on.
* Acoustic end of turn (with an `acoustic_scorer`, an async callable audio -> P(complete), e.g. Smart
  Turn v3.2, and `EndpointConfig.acoustic_model` set): once per pause, when the VAD has heard
  `EndpointConfig.acoustic_after_s` of silence after speech, the turn's audio so far (its last 8 s) is
  scored and pushed into the Endpointer, which fuses it with the text's EOU probability and trailing
  marks (headstart/voice/turn_fusion.py), or uses it as a veto (`EndpointConfig.acoustic_mode`).
  Speech that resumes makes it stale; the next pause is scored.
* Ablations: `ASRConfig.streaming=False` runs no partial passes and emits no partials (one pass over
  the whole utterance from the VAD's end of speech, like a naive pipeline); with
  `EndpointConfig.semantic=False` the EOU scorer is never called and the silence is fixed.
* Long utterances: once more than `ASRConfig.trim_after_s` of an utterance is buffered, passes start at
  the end of the last committed sentence (or, past twice that, of the last committed word) and get the
  committed text as Whisper's prompt, so a pass costs the same at minute two as at second two.

Cadence and endpointing run on audio time (samples received), so frames pushed faster than real time
give the same final transcripts and end-of-turn times (fewer partials, as the ASR is busier per second of
audio). The VAD (~0.2 ms per 32 ms window) runs inline in `push()`.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, ThreadPoolExecutor
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ, AudioError, AudioFrame, StreamResampler, to_mono_float32
from headstart.config import ASRConfig
from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded, SpeechStarted
from headstart.seams import ListeningDefaults, Transcriber
from headstart.voice.agreement import LocalAgreement, drop_loop_tail
from headstart.voice.endpoint import Endpointer
from headstart.voice.vad import VAD
from headstart.voice.words import join_words, mean_probability

ListenerEvent = SpeechStarted | SpeechEnded | PartialTranscript | FinalTranscript | EndOfTurn

_PREROLL_S = 2.0  # audio kept before speech: the VAD back-dates starts by its padding and min_speech_s
_SENTENCE_END = (".", "?", "!")
_EARLY_MIN_AUDIO_S = 0.4  # no early-final pass on less audio than this

EOUScorer = Callable[[str], Awaitable[float | None]]
AcousticScorer = Callable[[np.ndarray], Awaitable[float | None]]
_ACOUSTIC_WINDOW = 8 * SAMPLE_RATE_HZ  # what Smart Turn hears (headstart/voice/smart_turn.py)


def make_asr_executor() -> ThreadPoolExecutor:
    """The named single-thread executor the ASR runs on."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="asr")


class _StreamAudio:
    """The recent 16 kHz stream, addressable by absolute sample index."""

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._first = 0  # absolute index of _chunks[0][0]
        self.end = 0  # absolute index one past the last sample

    def append(self, samples: np.ndarray) -> None:
        if samples.size:
            self._chunks.append(samples)
            self.end += samples.shape[0]

    def slice(self, start: int, stop: int) -> np.ndarray:
        start = max(start, self._first)
        stop = min(stop, self.end)
        if stop <= start:
            return np.zeros(0, dtype=np.float32)
        data = np.concatenate(self._chunks) if len(self._chunks) > 1 else self._chunks[0]
        self._chunks = [data]  # keep the joined copy: the next slice is cheap
        return data[start - self._first : stop - self._first]

    def forget_before(self, sample: int) -> None:
        while self._chunks and self._first + self._chunks[0].shape[0] <= sample:
            self._first += self._chunks.pop(0).shape[0]


@dataclass(eq=False)
class _Utterance:
    start: int  # sample index (the VAD's padded speech start)
    agreement: LocalAgreement
    audio_start: int = -1  # first sample passes transcribe (moves on when a long utterance is trimmed)
    prompt: str = ""  # committed text before audio_start (Whisper's prompt)
    trimmed_words: int = 0  # committed words before audio_start
    end: int | None = None  # sample index of the padded speech end; None while speaking
    resumes: int = 0  # how often speech resumed after an end
    final_text: str | None = None  # set once the final pass for the current end is done
    end_of_turn: EndOfTurn | None = None  # set once the endpointer decided
    last_pass_end: int = 0  # audio end of the last pass started
    covered: int = -1  # audio end of the last pass finished: the agreement's newest hypothesis
    newest_words: tuple = ()  # that pass' words
    last_partial: tuple[str, str] = field(default=("", ""))
    eou_cache: dict[str, float] = field(default_factory=dict)  # text -> EOU probability already scored
    eou_text: str = ""  # the newest text sent for scoring
    outbox: list[object] = field(default_factory=list)  # events held while an older utterance finishes
    # the acoustic score belongs to one silence run (the VAD's, confirmed as a speech end or not)
    acoustic_run: int = 0  # counts the silence runs after which speech went on
    acoustic_asked: bool = False  # the current run's score was asked for


class Listener:
    """Streaming speech recognition with endpointing, as an async event stream.

    Args:
        vad: a fresh `VAD` (its stream position becomes the listener's audio time).
        asr: the recogniser (`seams.Transcriber`; None: a listener that never gets speech to transcribe)
            called only on `executor`.
        endpointer: a fresh `Endpointer`.
        config: the ASR settings (min_new_audio_s, agreement_n, trim_after_s).
        executor: a single-thread executor (`make_asr_executor()`); the caller owns and shuts it down.
        eou_scorer: optional `async (text) -> probability in [0, 1] or None` that the user's turn is
            complete after `text`; it runs on the event loop (put blocking work on its own executor).
        acoustic_scorer: optional `async (samples float32 16 kHz (n,)) -> probability in [0, 1] or None`
            that the turn is complete from its audio (Smart Turn); called only when the endpointer's
            fusion is on (`EndpointConfig.acoustic_model`). Blocking work belongs on its own executor.

    Raises (from push / end_input / iteration):
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
        engine = ListeningDefaults() if asr is None else asr.listening
        interval_s = engine.partial_interval_s if config.min_new_audio_s is None else config.min_new_audio_s
        long_s = engine.partial_long_s if config.partial_long_s is None else config.partial_long_s
        slack_s = engine.final_slack_s if config.final_slack_s is None else config.final_slack_s
        self._redecode = engine.final_redecode if config.final_redecode is None else bool(config.final_redecode)
        self._agreement_n = engine.agreement_n if config.agreement_n is None else config.agreement_n
        if not interval_s >= 0:
            raise ValueError(f"ASRConfig.min_new_audio_s must be >= 0, got {interval_s}")
        if not long_s > 0:
            raise ValueError(f"ASRConfig.partial_long_s must be > 0 (inf: never), got {long_s}")
        if not (isinstance(self._agreement_n, int) and self._agreement_n >= 1):
            raise ValueError(f"ASRConfig.agreement_n must be an int >= 1, got {self._agreement_n!r}")
        if config.early_final_s is not None and not config.early_final_s > 0:
            raise ValueError(f"ASRConfig.early_final_s must be > 0 or None, got {config.early_final_s}")
        if not slack_s >= 0:
            raise ValueError(f"ASRConfig.final_slack_s must be >= 0, got {slack_s}")
        self._vad = vad
        self._asr = asr
        self._endpointer = endpointer
        self._config = config
        self._executor = executor
        self._min_new = int(round(interval_s * SAMPLE_RATE_HZ))
        self._long_s = float(long_s)
        self._early = None if config.early_final_s is None else int(round(config.early_final_s * SAMPLE_RATE_HZ))
        self._slack = int(round(slack_s * SAMPLE_RATE_HZ))
        self._trim_after = int(round(config.trim_after_s * SAMPLE_RATE_HZ))
        self._eou_scorer = eou_scorer
        self._eou_task: asyncio.Task | None = None
        self._eou_next: tuple[_Utterance, str] | None = None  # newest text waiting to be scored
        self._eou_text: str | None = None  # the text being scored now
        self._acoustic_scorer = acoustic_scorer
        self._acoustic_task: asyncio.Task | None = None
        self._acoustic_after = int(round(endpointer.config.acoustic_after_s * SAMPLE_RATE_HZ))
        self._audio = _StreamAudio()
        self._resampler: StreamResampler | None = None
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._current: _Utterance | None = None  # the utterance speech goes to, until its end of turn
        # unfinished utterances, oldest first: those whose end of turn is decided but whose final pass
        # is pending, then the current one. Only the oldest emits; the others hold their events, so
        # utterances never interleave (it matters when frames come faster than the ASR).
        self._utterances: list[_Utterance] = []
        self._task: asyncio.Task | None = None  # the pass in flight
        self._ended = False
        self._failed: BaseException | None = None
        self.num_passes = 0  # ASR calls made (partial and final)

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
        for event in self._vad.flush():
            self._on_vad(event)
        end_of_turn = self._endpointer.flush(self._position_s)
        if end_of_turn is not None:
            self._on_end_of_turn(end_of_turn)
        self._schedule()
        while self._task is not None:
            await self._task  # it never raises: failures go to the queue
        self._eou_next = None
        if self._eou_task is not None:
            await self._eou_task
        if self._acoustic_task is not None:
            await self._acoustic_task
        self._queue.put_nowait(_END)

    async def commit(self) -> None:
        """End the utterance in progress now (push-to-talk released): close open speech at the current
        position, decide its end of turn here (no silence to wait for) and wait for its final pass.
        Unlike `end_input` the stream goes on: later audio continues the same timeline (`audio_s`
        keeps counting) and starts a new utterance. A no-op when nothing is open."""
        if self._ended or self._failed is not None:
            return
        for event in self._vad.flush():
            self._on_vad(event)
        end_of_turn = self._endpointer.flush(self._position_s)
        if end_of_turn is not None:
            self._on_end_of_turn(end_of_turn)
        self._schedule()
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
        return self._heard_to(utterance, int(round((since + self._vad.config.speech_pad_s) * SAMPLE_RATE_HZ)))

    @property
    def expected_final_text(self) -> str:
        """The text the current utterance's FinalTranscript would carry if its newest ASR pass were its
        final: that pass' own hypothesis with `final_redecode` (Moonshine's default: it can differ from
        the latest partial, whose committed words are older passes'), else the committed and pending
        words (the latest partial). "" without an utterance or a pass."""
        utterance = self._current
        if utterance is None:
            return ""
        if self._redecode and utterance.newest_words:
            return join_words(utterance.newest_words)
        return join_words(utterance.agreement.committed + utterance.agreement.pending)

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
        self._score_acoustic()
        self._poll_endpointer()
        self._schedule()
        self._forget_old_audio()

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
            if self._eou_scorer is not None and self._endpointer.config.semantic:
                # scores of partials that did not hear the speech end are stale: wait for the final's
                self._endpointer.await_eou()

    def _open(self, start: int) -> _Utterance:
        utterance = _Utterance(
            start=start, agreement=LocalAgreement(self._agreement_n), audio_start=start, last_pass_end=start
        )
        self._current = utterance
        self._utterances.append(utterance)
        return utterance

    def _emit(self, utterance: _Utterance, event: object) -> None:
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

    def _finish_if_done(self, utterance: _Utterance) -> None:
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
                if self._covers(utterance):  # a pass already heard it all
                    self._finalize(utterance)
                    continue
                self._start(utterance, utterance.end)
                return
        utterance = self._current
        if (
            self._config.streaming
            and utterance is not None
            and utterance.end is None
            and not self._ended
            and (
                self._speech_may_end(utterance)
                or (self._audio.end - utterance.last_pass_end >= self._partial_interval(utterance) and not self._silence_pending())
            )
        ):
            self._start(utterance, self._audio.end)

    def _partial_interval(self, utterance: _Utterance) -> int:
        """New audio (samples) the next cadence pass waits for: `min_new_audio_s`, growing in proportion to
        the buffer past `partial_long_s` (a pass then costs more; the pauses' passes come anyway)."""
        buffered_s = (self._audio.end - utterance.audio_start) / SAMPLE_RATE_HZ
        return max(int(self._min_new * max(1.0, buffered_s / self._long_s)), 1)

    def _silence_pending(self) -> bool:
        """The VAD hears silence after speech, less than `early_final_s` of it: hold the cadence pass
        back (at most early_final_s), so that, if the speech ends here, the ASR is free for the pass
        that hears the whole utterance instead of busy with one that stops just short of its end."""
        since = self._vad.silence_since_s
        if self._early is None or since is None:
            return False
        return self._audio.end - int(round(since * SAMPLE_RATE_HZ)) < self._early

    def _covers(self, utterance: _Utterance) -> bool:
        """Whether the newest finished pass heard the utterance up to its end (but the VAD's padding)."""
        return utterance.end is not None and self._heard_to(utterance, utterance.end)

    def _heard_to(self, utterance: _Utterance, end: int) -> bool:
        """Whether the newest finished pass heard the utterance up to sample `end` (a padded speech end)
        but the final's slack."""
        return utterance.covered >= end - self._slack

    def _speech_may_end(self, utterance: _Utterance) -> bool:
        """The VAD has heard `early_final_s` of silence after speech that no pass has heard past yet:
        a pass now hears the whole utterance if the speech does end here."""
        since = self._vad.silence_since_s
        if self._early is None or since is None:
            return False
        since_sample = int(round(since * SAMPLE_RATE_HZ))
        return (
            self._audio.end - since_sample >= self._early
            and utterance.last_pass_end < since_sample + self._early
            # Whisper on a clip this short tends to loop ("Press Press Press ...")
            and self._audio.end - utterance.audio_start >= _EARLY_MIN_AUDIO_S * SAMPLE_RATE_HZ
        )

    def _start(self, utterance: _Utterance, stop: int) -> None:
        utterance.last_pass_end = stop
        self._trim(utterance, stop)
        samples = self._audio.slice(utterance.audio_start, stop)
        self.num_passes += 1
        self._task = asyncio.get_running_loop().create_task(
            self._run_pass(utterance, samples, stop, utterance.audio_start, utterance.prompt)
        )

    def _trim(self, utterance: _Utterance, stop: int) -> None:
        """A long buffer starts over after the last committed sentence (or word, when very long)."""
        if stop - utterance.audio_start <= self._trim_after:
            return
        committed = utterance.agreement.committed
        cut = None
        for i in range(len(committed) - 1, utterance.trimmed_words - 1, -1):
            if committed[i].text.rstrip().endswith(_SENTENCE_END):
                cut = i + 1
                break
        if cut is None and stop - utterance.audio_start > 2 * self._trim_after and len(committed) > utterance.trimmed_words:
            cut = len(committed)
        if cut is None:
            return
        end = int(round(committed[cut - 1].end_s * SAMPLE_RATE_HZ))
        if end <= utterance.audio_start:
            return
        utterance.audio_start = min(end, stop)
        utterance.trimmed_words = cut
        # Whisper's prompt: the last ~200 characters of committed text are plenty of context
        utterance.prompt = join_words(committed[:cut])[-200:]

    async def _run_pass(self, utterance: _Utterance, samples: np.ndarray, stop: int, start: int, prompt: str) -> None:
        loop = asyncio.get_running_loop()
        offset_s = start / SAMPLE_RATE_HZ
        call = (
            (lambda: self._asr.transcribe(samples, offset_s, prompt=prompt))
            if prompt
            else (lambda: self._asr.transcribe(samples, offset_s))
        )
        try:
            result = await loop.run_in_executor(self._executor, call)
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
            words = agreement.committed + agreement.pending
            self._endpointer.push_words(words[-1].end_s if words else None, stop / SAMPLE_RATE_HZ)
        if utterance.end is not None and utterance.final_text is None and self._covers(utterance):
            self._finalize(utterance)
        else:  # a partial (a final pass overtaken by resumed speech lands here too: its end moved on)
            partial = (agreement.committed_text, agreement.pending_text)
            if partial != utterance.last_partial and self._config.streaming:
                utterance.last_partial = partial
                confidence = mean_probability(agreement.committed + agreement.pending)
                self._emit(utterance, PartialTranscript(partial[0], partial[1], stop / SAMPLE_RATE_HZ, confidence))
                self._score(utterance, join_words(agreement.committed + agreement.pending))
        self._poll_endpointer()
        self._schedule()
        self._forget_old_audio()

    # -- acoustic end of turn -------------------------------------------------------------------
    def _score_acoustic(self) -> None:
        """Score the current turn's audio once per silence run, at `acoustic_after_s` of silence."""
        utterance = self._current
        if (
            self._acoustic_scorer is None
            or not self._endpointer.acoustic_on
            or not self._endpointer.config.semantic
            or utterance is None
            or self._ended
        ):
            return
        since = self._vad.silence_since_s
        if self._vad.speaking and since is None:
            # speech goes on (a short silence the VAD never called an end, or resumed speech): a score
            # of that silence is stale, the next one is scored anew
            if utterance.acoustic_asked:
                utterance.acoustic_asked = False
                utterance.acoustic_run += 1
                self._endpointer.push_acoustic(None)
            return
        if utterance.acoustic_asked or self._acoustic_task is not None:
            return
        if since is not None:
            silence_start = int(round(since * SAMPLE_RATE_HZ))
        elif utterance.end is not None:  # the VAD confirmed the end already: its padded end
            silence_start = utterance.end
        else:
            return
        if self._audio.end - silence_start < self._acoustic_after:
            return
        samples = self._audio.slice(max(utterance.start, self._audio.end - _ACOUSTIC_WINDOW), self._audio.end)
        if samples.size == 0:
            return
        utterance.acoustic_asked = True
        self._endpointer.await_acoustic()
        self._acoustic_task = asyncio.get_running_loop().create_task(
            self._run_acoustic(utterance, utterance.acoustic_run, samples)
        )

    def _fail(self, exc: Exception) -> None:
        """A stage call failed: hand the error to the consumer and end the event stream."""
        self._failed = exc
        self._queue.put_nowait(_Failure(exc))
        self._queue.put_nowait(_END)

    async def _run_acoustic(self, utterance: _Utterance, run: int, samples: np.ndarray) -> None:
        try:
            probability = await self._acoustic_scorer(samples)  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - handed to the consumer
            self._acoustic_task = None
            self._fail(exc)
            return
        self._acoustic_task = None
        if utterance is self._current and utterance.acoustic_run == run and not self._ended:
            self._endpointer.push_acoustic(probability)
            self._poll_endpointer()
            self._schedule()
        elif utterance is self._current and not self._ended:
            self._score_acoustic()  # a newer silence waited for this call

    # -- semantic endpointing -------------------------------------------------------------------
    def _score(self, utterance: _Utterance, text: str) -> None:
        """Score `text` with the EOU scorer: now if it is free, else once it is (newest text wins)."""
        if self._eou_scorer is None or utterance is not self._current or not text:
            return
        if not self._endpointer.config.semantic:  # ablation: the scorer is ignored, not even called
            return
        utterance.eou_text = text
        known = utterance.eou_cache.get(text)
        if known is not None:  # scored before (the final often repeats the last partial): no second call
            self._eou_next = None
            # after the speech end only the final text's score counts (a partial's is stale)
            if utterance.end is None or text == utterance.final_text:
                self._endpointer.push_eou(known, text)
                self._poll_endpointer()
            return
        if self._eou_task is not None:
            self._eou_next = None if text == self._eou_text else (utterance, text)
            return
        self._eou_text = text
        self._eou_task = asyncio.get_running_loop().create_task(self._run_score(utterance, text))

    async def _run_score(self, utterance: _Utterance, text: str) -> None:
        try:
            probability = await self._eou_scorer(text)  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - handed to the consumer
            self._eou_task = None
            self._fail(exc)
            return
        self._eou_task = self._eou_text = None
        if probability is not None:
            utterance.eou_cache[text] = probability
        if utterance is self._current and not self._ended and (utterance.end is None or text == utterance.final_text):
            # (after the speech end only the final text's score counts; a newer cached score wins)
            newest = utterance.eou_text if utterance.eou_text in utterance.eou_cache else text
            self._endpointer.push_eou(utterance.eou_cache.get(newest, probability), newest)
            self._poll_endpointer()
            self._schedule()
        elif utterance is self._current and utterance.final_text is not None and utterance.final_text in utterance.eou_cache:
            self._endpointer.push_eou(utterance.eou_cache[utterance.final_text], utterance.final_text)
            self._poll_endpointer()
            self._schedule()
        following, self._eou_next = self._eou_next, None
        if following is not None:
            self._score(*following)

    def _finalize(self, utterance: _Utterance) -> None:
        """The newest hypothesis covers the whole utterance: commit it and emit the FinalTranscript."""
        utterance.agreement.flush()
        words = utterance.newest_words if self._redecode and utterance.newest_words else utterance.agreement.committed
        utterance.final_text = join_words(words)
        self._emit(utterance, FinalTranscript(utterance.final_text, utterance.end / SAMPLE_RATE_HZ,
                                              mean_probability(words)))
        self._score(utterance, utterance.final_text)
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
