"""One conversation: the only place that knows all three stages, and the manners of turn-taking.

    components = Components.load(PipelineConfig())          # once per process: models + executors
    session = Session(components)
    await session.push_audio(frame)                          # user audio, any rate/channels
    async for event in session: ...                          # transcripts, reply tokens, reply audio

Events out, in order: the listener's (SpeechStarted, PartialTranscript, SpeechEnded, FinalTranscript,
EndOfTurn), then for the reply ReplyStarted, TokenDelta..., ReplyAudioStart, ReplyAudio..., ReplyDone
(the LLM finished), and TurnCompleted with the turn's timeline once all its audio has left. A barge-in
adds ReplyPaused / ReplyResumed, or ReplyInterrupted (then TurnCompleted with `interrupted=True`).
Tokens and audio of an interrupted reply still queued are dropped, never delivered.

Turn-taking (`TurnTaking`, a plain synchronous state machine on an injected clock):
* user: listening / speaking (the VAD); agent: listening / thinking (a reply exists, no audio has left
  yet) / speaking (its audio is playing on the client, by the client's `playback_position` reports or,
  between them, by real-time estimate).
* Barge-in: a VAD speech start while the agent thinks or speaks pauses the reply at once (no more
  audio leaves; the client is told to pause). Words from the ASR (not fillers like "mm-hmm", not
  bracketed noises like "[cough]") interrupt it: the LLM stops, queued and in-flight audio is dropped,
  the client is told to flush, and the history keeps only the text the user heard (by playback
  position). No words (the listener's empty final transcript) resume it; that utterance is no turn.
* Echo (the reply's own audio coming back through a speaker): at a VAD speech start during reply audio
  the last 0.5 s of the microphone is compared with the reply audio around the playback position by
  normalised cross-correlation over delays up to 0.6 s (`EchoDetector`). A strong match is echo: no
  pause, no turn. If that utterance later yields words that are not the reply's own words (the user
  talked over the echo), it is a barge-in after all.
* The KV cache follows the history: the next prompt renders the heard text, and the engine's prefill
  keeps only the longest common prefix of its cache and that prompt (the unheard tail is cropped).

Preemptive replies (issue 3's API in headstart/llm/) have not landed: the seam is
`Session._on_partial`, which sees every partial transcript with the turn's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import math
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ, AudioFrame, resample, to_mono_float32
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

# -- session events beyond the stages' own ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplyStarted:
    """The LLM was asked for reply `reply_id` to `transcript`."""

    reply_id: str
    transcript: str


@dataclass(frozen=True, slots=True)
class ReplyAudioStart:
    """Reply audio follows, float32 mono at `sample_rate` Hz (PCM16 on the wire)."""

    reply_id: str
    sample_rate: int


@dataclass(frozen=True, slots=True)
class ReplyAudio:
    """A block of the assistant's speech, ready to send or play."""

    frame: AudioFrame
    reply_id: str = ""


@dataclass(frozen=True, slots=True)
class ReplyPaused:
    """Possible barge-in: the client should pause playback of `reply_id` (keep its buffer)."""

    reply_id: str


@dataclass(frozen=True, slots=True)
class ReplyResumed:
    """No words came: the client should resume playback of `reply_id`."""

    reply_id: str


@dataclass(frozen=True, slots=True)
class ReplyInterrupted:
    """Reply `reply_id` was stopped: the client should flush its playback buffer. `heard_text` is what
    the history keeps (the text played up to `played_s` seconds of its audio)."""

    reply_id: str
    heard_text: str
    played_s: float
    reason: str  # "barge_in", "client", "new_turn", "reset"


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """A user turn and its reply are over; `timeline` holds every timestamp of the turn."""

    timeline: TurnTimeline
    reply_id: str = ""
    interrupted: bool = False


# -- the turn-taking policy (synchronous, no I/O) --------------------------------------------------


class UserState(enum.Enum):
    LISTENING = "listening"
    SPEAKING = "speaking"


class AgentState(enum.Enum):
    LISTENING = "listening"
    THINKING = "thinking"
    SPEAKING = "speaking"


@dataclass(frozen=True, slots=True)
class Pause:
    reply_id: str


@dataclass(frozen=True, slots=True)
class Resume:
    reply_id: str


@dataclass(frozen=True, slots=True)
class Interrupt:
    reply_id: str
    played_s: float
    reason: str


@dataclass(frozen=True, slots=True)
class StartReply:
    transcript: str


Action = Pause | Resume | Interrupt | StartReply

FILLER_WORDS = frozenset({
    "mm", "mmm", "hmm", "hm", "mhm", "mmhmm", "mmhm", "uh", "uhhuh", "uhuh", "um", "umm", "uhm", "ah", "ahh",
    "oh", "er", "erm", "eh", "huh",
})
_BRACKETED = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*")
_WORD = re.compile(r"[a-z0-9']+")
_HUM = re.compile(r"[hm]+|(uh|um|ah|oh|er)+h*")  # "mmmm", "hmmm", "uhhh", "ahh"


def content_words(text: str) -> list[str]:
    """Lower-case words of `text` that carry content: bracketed noises ("[cough]", "(laughs)") and
    fillers/backchannels ("mm-hmm", "uh", "hmm") removed."""
    text = _BRACKETED.sub(" ", text.lower()).replace("-", "")
    words = (w.strip("'") for w in _WORD.findall(text))
    return [w for w in words if w and w not in FILLER_WORDS and not _HUM.fullmatch(w)]


def is_echo_text(heard: str, reply_text: str, min_overlap: float = 0.8) -> bool:
    """True if (almost) every content word heard is a word of the reply being played."""
    words = content_words(heard)
    if not words:
        return True
    reply = set(content_words(reply_text))
    return sum(w in reply for w in words) / len(words) >= min_overlap


class TurnTaking:
    """Who has the floor, as a plain state machine on an injected clock (times from `clock.now()`).

    The session reports what happened (speech start/end, words, end of turn, reply audio sent,
    playback positions) and executes the `Action`s returned (Pause, Resume, Interrupt, StartReply).

    Args:
        clock: the time source (FakeClock in tests).
        max_pause_s: a paused reply resumes by itself this long after the user stopped speaking if no
            transcript decided it (a safety net: the listener always sends a final transcript).
        realtime_playback: the client plays the audio in real time from its arrival (a live client);
            False: audio counts as played once it has left (a file writer such as the demo).
    """

    def __init__(self, clock: Clock, max_pause_s: float = 4.0, realtime_playback: bool = True) -> None:
        self._clock = clock
        self.max_pause_s = max_pause_s
        self.realtime_playback = realtime_playback
        self.user = UserState.LISTENING
        self.reply_id: str | None = None
        self.paused = False
        # the current utterance: None, "user", "barge" (paused the reply, no verdict yet), "echo",
        # "ignored" (no words, or the session's own voice): no turn
        self.utterance: str | None = None
        self._speech_ended_at: float | None = None
        self._reset_playback()

    def _reset_playback(self) -> None:
        self.sent_s = 0.0  # reply audio that has left the session
        self.audio_finished = False  # no more audio will come for this reply
        self._anchor_pos_s = 0.0  # playback position at _anchor_at
        self._anchor_at: float | None = None  # None until the first audio left

    # -- agent side -------------------------------------------------------------------------------
    @property
    def agent(self) -> AgentState:
        if self.reply_id is None:
            return AgentState.LISTENING
        if self._anchor_at is None:
            return AgentState.THINKING
        if self.audio_finished and self.played_s() >= self.sent_s - 1e-6:
            self.reply_id = None  # the client has played it all
            self._reset_playback()
            return AgentState.LISTENING
        return AgentState.SPEAKING

    def reply_started(self, reply_id: str) -> None:
        self.reply_id = reply_id
        self.paused = False
        self._reset_playback()

    def audio_sent(self, duration_s: float) -> None:
        if self._anchor_at is None:
            self._anchor_at = self._clock.now()  # the client starts playing on arrival
        self.sent_s += duration_s

    def audio_done(self) -> None:
        """All of the reply's audio has left (or there was none)."""
        self.audio_finished = True
        if self._anchor_at is None:  # no audio at all: nothing will play
            self.reply_id = None
            self._reset_playback()

    def playback_position(self, reply_id: str, position_s: float) -> None:
        """The client reports having played `position_s` of reply `reply_id`'s audio."""
        if reply_id != self.reply_id or self._anchor_at is None:
            return
        self._anchor_pos_s = min(position_s, self.sent_s)
        self._anchor_at = self._clock.now()

    def played_s(self) -> float:
        """How much of the reply's audio the client has played now (reported, then real time, frozen
        while paused, never more than was sent)."""
        if self._anchor_at is None:
            return 0.0
        if not self.realtime_playback:
            return self.sent_s
        position = self._anchor_pos_s
        if not self.paused:
            position += self._clock.now() - self._anchor_at
        return min(position, self.sent_s)

    # -- user side --------------------------------------------------------------------------------
    def speech_started(self, echo: bool = False) -> list[Action]:
        """The VAD heard speech start; `echo`: the audio matches what is being played."""
        self.user = UserState.SPEAKING
        self._speech_ended_at = None
        agent = self.agent
        if agent is AgentState.LISTENING:
            self.utterance = "user"
            return []
        if echo and agent is AgentState.SPEAKING:
            self.utterance = "echo"
            return []
        self.utterance = "barge"
        if self.paused:
            return []
        self._pause()
        return [Pause(self.reply_id)]  # type: ignore[arg-type]

    def speech_ended(self) -> None:
        self.user = UserState.LISTENING
        self._speech_ended_at = self._clock.now()

    def words(self, text: str, reply_text: str = "") -> list[Action]:
        """A partial transcript of the current utterance; `reply_text`: the reply being played."""
        if self.utterance == "barge" and content_words(text):
            return self._interrupt("barge_in")
        if self.utterance == "echo" and not is_echo_text(text, reply_text):
            return self._interrupt("barge_in")  # the user talks over the echo
        return []

    def final(self, text: str, reply_text: str = "") -> list[Action]:
        """The final transcript of the current utterance."""
        if self.utterance == "barge":
            if content_words(text):
                return self._interrupt("barge_in")
            self.utterance = "ignored"  # a cough, "mm-hmm": no turn, the reply goes on
            return self._resume()
        if self.utterance == "echo":
            if not is_echo_text(text, reply_text):
                return self._interrupt("barge_in")
            self.utterance = "ignored"
        elif self.utterance is None:
            self.utterance = "user"
        return []

    def end_of_turn(self, transcript: str) -> list[Action]:
        """The endpointer (or the client's commit) ended the user's turn."""
        kind, self.utterance = self.utterance, None
        self.user = UserState.LISTENING
        if kind in ("ignored", "echo") or not transcript.strip():
            return []
        actions: list[Action] = []
        if self.agent is not AgentState.LISTENING:
            actions += self._interrupt("new_turn")
        return [*actions, StartReply(transcript)]

    def cleared(self) -> list[Action]:
        """The client dropped the input in progress."""
        kind, self.utterance = self.utterance, None
        self.user = UserState.LISTENING
        return self._resume() if kind == "barge" else []

    def interrupt(self, reason: str = "client") -> list[Action]:
        """Stop the current reply (the client asked, or the session resets)."""
        if self.agent is AgentState.LISTENING:
            return []
        return self._interrupt(reason)

    def poll(self) -> list[Action]:
        """Time-driven decisions: resume a reply paused for a barge-in whose verdict is late (a busy
        ASR). The utterance stays a possible barge-in: words that come later still interrupt."""
        if (
            self.paused and self.utterance == "barge" and self.user is UserState.LISTENING
            and self._speech_ended_at is not None
            and self._clock.now() - self._speech_ended_at >= self.max_pause_s
        ):
            return self._resume()
        return []

    # -- internals --------------------------------------------------------------------------------
    def _pause(self) -> None:
        if self._anchor_at is not None:
            self._anchor_pos_s = self.played_s()
            self._anchor_at = self._clock.now()
        self.paused = True

    def _resume(self) -> list[Action]:
        if not self.paused or self.reply_id is None:
            self.paused = False
            return []
        self.paused = False
        if self._anchor_at is not None:
            self._anchor_at = self._clock.now()
        return [Resume(self.reply_id)]

    def _interrupt(self, reason: str) -> list[Action]:
        if self.utterance in ("barge", "echo"):
            self.utterance = "user"  # the words make it a real turn
        if self.reply_id is None:
            self.paused = False
            return []
        action = Interrupt(self.reply_id, self.played_s(), reason)
        self.reply_id = None
        self.paused = False
        self._reset_playback()
        return [action]


# -- echo and heard text ------------------------------------------------------------------------------


class EchoDetector:
    """Is the microphone hearing the reply the session is playing?

    Keeps the last `mic_window_s` of microphone audio and the current reply's audio (both 16 kHz float32
    mono) and compares them by normalised cross-correlation (the peak over all delays up to
    `max_delay_s` of the mic behind playback, around the playback position). Speaker-to-mic echo is a
    filtered, delayed copy of the reply and correlates strongly; a person's own voice does not.

    Args:
        mic_window_s: microphone audio compared (the part the VAD just called speech).
        max_delay_s: acoustic + buffering delay searched.
        threshold: correlation peak at or above which the audio is echo.
    """

    def __init__(self, mic_window_s: float = 0.5, max_delay_s: float = 0.6, threshold: float = 0.3) -> None:
        self.mic_window = int(mic_window_s * SAMPLE_RATE_HZ)
        self.max_delay = int(max_delay_s * SAMPLE_RATE_HZ)
        self.threshold = threshold
        self._mic = np.zeros(0, dtype=np.float32)
        self._played: list[np.ndarray] = []
        self._played_len = 0

    def push_mic(self, samples: np.ndarray) -> None:
        """float32 (n,) 16 kHz microphone audio."""
        self._mic = np.concatenate([self._mic, samples])[-self.mic_window :]

    def push_played(self, samples: np.ndarray) -> None:
        """float32 (n,) 16 kHz reply audio, in playback order."""
        if samples.size:
            self._played.append(samples.astype(np.float32, copy=False))
            self._played_len += samples.shape[0]

    def reset_played(self) -> None:
        self._played, self._played_len = [], 0

    def similarity(self, played_s: float | None = None) -> float:
        """Peak normalised cross-correlation in [0, 1] of the mic window against the reply audio that
        ends at playback position `played_s` (None: all reply audio so far)."""
        mic = self._mic
        if mic.shape[0] < self.mic_window // 2 or not self._played_len:
            return 0.0
        played = np.concatenate(self._played) if len(self._played) > 1 else self._played[0]
        self._played = [played]
        end = played.shape[0] if played_s is None else min(played.shape[0], int(played_s * SAMPLE_RATE_HZ) + SAMPLE_RATE_HZ // 4)
        start = max(0, end - mic.shape[0] - self.max_delay)
        return normalized_xcorr_peak(mic, played[start:end])

    def is_echo(self, played_s: float | None = None) -> bool:
        return self.similarity(played_s) >= self.threshold


def normalized_xcorr_peak(x: np.ndarray, ref: np.ndarray) -> float:
    """max over lags k of |<x, ref[k:k+n]>| / (|x| |ref[k:k+n]|), for ref at least as long as x
    (a shorter ref is zero-padded). 0.0 for silent input. Computed with one real FFT."""
    n = x.shape[0]
    if n == 0 or ref.shape[0] == 0:
        return 0.0
    if ref.shape[0] < n:
        ref = np.concatenate([ref, np.zeros(n - ref.shape[0], dtype=np.float32)])
    x = x.astype(np.float64) - x.mean()
    r = ref.astype(np.float64)
    x_norm = np.sqrt(np.dot(x, x))
    if x_norm < 1e-6:
        return 0.0
    size = 1 << int(math.ceil(math.log2(n + r.shape[0])))
    corr = np.fft.irfft(np.fft.rfft(r, size) * np.conj(np.fft.rfft(x, size)), size)[: r.shape[0] - n + 1]
    csum = np.concatenate([[0.0], np.cumsum(r)])
    csum2 = np.concatenate([[0.0], np.cumsum(r * r)])
    window_sum = csum[n:] - csum[:-n]
    window_energy = np.maximum(csum2[n:] - csum2[:-n] - window_sum**2 / n, 0.0)
    denominator = x_norm * np.sqrt(window_energy)
    valid = denominator > 1e-6 * max(1.0, x_norm)
    if not valid.any():
        return 0.0
    return float(np.max(np.abs(corr[valid]) / denominator[valid]))


def heard_text(chunks: list[tuple[str, float]], played_s: float) -> str:
    """The text of a reply the listener heard: chunks (text, audio seconds) in order, played up to
    `played_s`. Whole chunks before the position, then the words of the chunk being played in
    proportion to its audio played (rounded down to whole words)."""
    out: list[str] = []
    start = 0.0
    for text, duration_s in chunks:
        if played_s >= start + duration_s - 1e-6:
            out.append(text.strip())
            start += duration_s
            continue
        words = text.split()
        fraction = (played_s - start) / duration_s if duration_s > 0 else 0.0
        out.append(" ".join(words[: int(math.floor(max(0.0, fraction) * len(words)))]))
        break
    return " ".join(part for part in out if part)


# -- components ---------------------------------------------------------------------------------------


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


# -- the session --------------------------------------------------------------------------------------

_END = object()
_reply_ids = itertools.count(1)


@dataclass(eq=False)
class _Reply:
    """One cancellable assistant turn: the LLM stream, the TTS stream and the audio leaving."""

    id: str
    turn: TurnTimeline
    task: asyncio.Task | None = None
    stream: object | None = None  # ReplyStream
    tts: object | None = None  # TTSStream
    text: list[str] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)  # chunk texts handed to the synthesiser, in order
    audio_s: float = 0.0
    resume: asyncio.Event = field(default_factory=asyncio.Event)
    history_index: int | None = None  # where its assistant message is, once written
    finished: bool = False  # all its audio has left
    interrupted: bool = False

    def spans(self) -> list[tuple[str, float]]:
        """(chunk text, audio seconds) for the heard-text computation; the chunk still being
        synthesised gets the audio sent beyond the finished ones."""
        timings = list(getattr(self.tts, "timings", []) or [])
        spans: list[tuple[str, float]] = []
        used = 0.0
        t = 0
        for text in self.chunks:
            if t < len(timings) and timings[t].text == text:
                spans.append((text, timings[t].audio_s))
                used += timings[t].audio_s
                t += 1
            else:
                spans.append((text, max(0.0, self.audio_s - used)))
                break
        return spans


class Session:
    """One user's conversation over shared `Components`.

    Args:
        components: the loaded models and executors.
        clock: the time source for every timestamp (default: MonotonicClock).
        playback_lead_s: if set, reply audio leaves no more than this far ahead of the client's
            playback (so a barge-in has little to flush and the client's buffer stays small); None
            sends audio as soon as it is synthesised.
        audio_frame_s: split reply audio into frames of this many seconds (None: as the engine gives it).
        echo: the echo detector (default `EchoDetector()`); None disables echo detection.
        realtime_playback: the consumer plays reply audio in real time as it arrives (the server's
            clients): the agent speaks until then. False (the demo writes a file): audio counts as
            played once it has left.
    """

    def __init__(
        self,
        components: Components,
        clock: Clock | None = None,
        *,
        playback_lead_s: float | None = None,
        audio_frame_s: float | None = None,
        echo: EchoDetector | None | bool = True,
        realtime_playback: bool = False,
    ) -> None:
        self._components = components
        self._config = components.config
        self._clock: Clock = clock or MonotonicClock()
        self._lead_s = playback_lead_s
        self._frame_s = audio_frame_s
        self._echo = EchoDetector() if echo is True else (echo or None)
        self.turns = TurnTaking(self._clock, realtime_playback=realtime_playback)
        self._listener = self._new_listener()
        self._out: asyncio.Queue[object] = asyncio.Queue()
        self.history: list[dict[str, str]] = []
        self.audio_clock = AudioClockMap()
        self._audio_s = 0.0
        self._turn: TurnTimeline | None = None
        self._reply: _Reply | None = None
        self._dead: set[str] = set()  # interrupted replies: their queued tokens/audio are dropped
        self._listen_task: asyncio.Task[None] | None = None
        self._listen_tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.Task[None] | None = None
        self._closed = False

    def _new_listener(self):
        from headstart.voice.endpoint import Endpointer
        from headstart.voice.listener import Listener
        from headstart.voice.vad import create_vad

        c = self._components
        return Listener(create_vad(self._config.vad), c.asr, Endpointer(self._config.endpoint),
                        self._config.asr, c.asr_executor)

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
        if self._echo is not None:
            mono = to_mono_float32(frame.samples)
            if frame.sample_rate != SAMPLE_RATE_HZ:
                mono = resample(mono, int(frame.sample_rate), SAMPLE_RATE_HZ)
            self._echo.push_mic(mono)
        self._audio_s += frame.duration_s
        self.audio_clock.record(self._audio_s, self._clock.now())

    async def commit(self) -> None:
        """The user ends the turn now (push-to-talk released): the speech so far gets its final
        transcript and end of turn at once, without waiting for the endpointer's silence."""
        if self._closed or self._listen_task is None:
            return
        listener, task = self._listener, self._listen_task
        self._listener, self._listen_task = self._new_listener(), None
        await listener.end_input()
        await task

    async def clear_input(self) -> None:
        """Drop the user audio of the turn in progress (no transcript, no turn)."""
        if self._closed:
            return
        task = self._listen_task
        self._listener, self._listen_task = self._new_listener(), None
        if task is not None:
            await _cancel(task)
        self._turn = None
        self._apply(self.turns.cleared())

    async def interrupt(self, reason: str = "client") -> None:
        """Stop the current reply now (as a barge-in does); a no-op when the agent is listening."""
        self._apply(self.turns.interrupt(reason))

    def playback_position(self, reply_id: str, position_s: float) -> None:
        """The client has played `position_s` seconds of reply `reply_id`'s audio."""
        self.turns.playback_position(reply_id, position_s)

    async def reset(self) -> None:
        """Forget the conversation: stop any reply, drop the input in progress, clear the history."""
        self._apply(self.turns.interrupt("reset"))
        await self.clear_input()
        self.history.clear()  # the engine's next prefill keeps only the system prompt's prefix

    async def end_input(self) -> None:
        """No more user audio: finish the open turn (and its reply); then the event stream ends."""
        if self._closed:
            return
        self._closed = True
        self._ensure_listening()
        await self._listener.end_input()
        assert self._listen_task is not None
        await self._listen_task
        if self._reply is not None and self._reply.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reply.task
        self._out.put_nowait(_END)

    async def aclose(self) -> None:
        """Stop everything at once (the client went away): no more events are produced."""
        self._closed = True
        reply = self._reply
        if reply is not None:
            self._dead.add(reply.id)
            _cancel_streams(reply)
        tasks = [t for t in (*self._listen_tasks, self._listen_task, self._timer) if t is not None]
        if reply is not None and reply.task is not None:
            tasks.append(reply.task)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._out.put_nowait(_END)

    @property
    def reply_active(self) -> bool:
        """A reply is being generated or its audio is still leaving."""
        reply = self._reply
        return reply is not None and reply.task is not None and not reply.task.done()

    @property
    def user_state(self) -> UserState:
        return self.turns.user

    @property
    def agent_state(self) -> AgentState:
        return self.turns.agent

    # -- output --------------------------------------------------------------------------------------

    def __aiter__(self) -> Session:
        return self

    async def __anext__(self) -> object:
        while True:
            item = await self._out.get()
            if item is _END:
                self._out.put_nowait(_END)
                raise StopAsyncIteration
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, _Tagged):
                if item.reply_id in self._dead:
                    continue  # cancel overtakes tokens and audio still queued
                return item.event
            return item

    # -- listening -----------------------------------------------------------------------------------

    def _ensure_listening(self) -> None:
        if self._listen_task is None:
            task = asyncio.create_task(self._listen(self._listener), name="session-listen")
            self._listen_task = task
            self._listen_tasks.add(task)
            task.add_done_callback(self._listen_tasks.discard)

    async def _listen(self, listener) -> None:
        try:
            async for event in listener:
                self._on_listener_event(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - surface to the consumer, never lose it
            self._out.put_nowait(exc)

    def _reply_text(self) -> str:
        return "".join(self._reply.text) if self._reply is not None else ""

    def _on_listener_event(self, event: object) -> None:
        now = self._clock.now()
        tt = self.turns
        if isinstance(event, SpeechStarted):
            echo = False
            if self._echo is not None and tt.agent is AgentState.SPEAKING:
                echo = self._echo.is_echo(tt.played_s())
            actions = tt.speech_started(echo=echo)
            if tt.utterance == "echo":
                return  # the session's own voice: no user turn
            if self._turn is None:
                self._turn = TurnTimeline()
            self._out.put_nowait(event)
            self._apply(actions)
            return
        elif isinstance(event, PartialTranscript):
            was_echo = tt.utterance == "echo"
            self._apply(tt.words(event.text, self._reply_text()))
            if was_echo and tt.utterance == "echo":
                return
            turn = self._current_turn()
            if turn.first_partial_at_s is None:
                turn.first_partial_at_s = now
            self._on_partial(event)
        elif isinstance(event, SpeechEnded):
            tt.speech_ended()
            self._schedule_poll()
            if tt.utterance in ("echo", "ignored"):
                return
            self._current_turn().vad_speech_end_at_s = now
        elif isinstance(event, FinalTranscript):
            was_echo = tt.utterance == "echo"
            self._apply(tt.final(event.text, self._reply_text()))
            if tt.utterance == "ignored":
                self._turn = None
                if was_echo:
                    return
                self._out.put_nowait(event)
                return
            turn = self._current_turn()
            turn.final_transcript_at_s = now
            turn.transcript = event.text
            if not event.text.strip():
                self._turn = None  # no words: the listener ends this utterance without a turn
        elif isinstance(event, EndOfTurn):
            turn = self._current_turn()
            turn.end_of_turn_at_s = now
            self._turn = None
            actions = tt.end_of_turn(turn.transcript)
            if not any(isinstance(a, StartReply) for a in actions) and not turn.transcript.strip():
                return
            self._out.put_nowait(event)
            for action in actions:
                if isinstance(action, StartReply):
                    self._start_reply(turn)
                else:
                    self._apply([action])
            return
        self._out.put_nowait(event)

    def _on_partial(self, event: PartialTranscript) -> None:
        """Seam for preemptive replies (issue 3): incremental prefill from `event.committed` and a held
        reply when the committed text is stable and the end-of-utterance probability is high."""

    def _current_turn(self) -> TurnTimeline:
        if self._turn is None:
            self._turn = TurnTimeline()
        return self._turn

    def _schedule_poll(self) -> None:
        if self._timer is not None and not self._timer.done():
            self._timer.cancel()
        if self.turns.paused:
            self._timer = asyncio.create_task(self._poll_later(self.turns.max_pause_s), name="session-timer")

    async def _poll_later(self, delay_s: float) -> None:
        await self._clock.sleep(delay_s)
        self._apply(self.turns.poll())

    # -- actions -------------------------------------------------------------------------------------

    def _apply(self, actions: list[Action]) -> None:
        reply = self._reply
        for action in actions:
            if reply is None or action.reply_id != reply.id:  # type: ignore[union-attr]
                continue
            if isinstance(action, Pause):
                reply.resume.clear()
                self._out.put_nowait(ReplyPaused(reply.id))
            elif isinstance(action, Resume):
                reply.resume.set()
                self._out.put_nowait(ReplyResumed(reply.id))
            elif isinstance(action, Interrupt):
                self._interrupt_reply(reply, action.played_s, action.reason)

    def _interrupt_reply(self, reply: _Reply, played_s: float, reason: str) -> None:
        if reply.interrupted:
            return
        reply.interrupted = True
        self._dead.add(reply.id)
        _cancel_streams(reply)
        if reply.task is not None and not reply.task.done():
            reply.task.cancel()
        heard = heard_text(reply.spans(), played_s)
        message = {"role": "assistant", "content": heard}
        if reply.history_index is not None:
            if heard:
                self.history[reply.history_index] = message
            else:
                del self.history[reply.history_index]
        elif heard:
            self.history.append(message)
        reply.resume.set()
        turn = reply.turn
        turn.extra.update(interrupted=True, interrupt_reason=reason, played_s=round(played_s, 3), heard_text=heard)
        if not reply.finished:
            turn.reply = heard
            turn.reply_done_at_s = self._clock.now()
        self._out.put_nowait(ReplyInterrupted(reply.id, heard, played_s, reason))
        if not reply.finished:
            self._out.put_nowait(TurnCompleted(turn, reply.id, interrupted=True))
        if self._reply is reply:
            self._reply = None
        if self._echo is not None:
            self._echo.reset_played()

    # -- the reply -----------------------------------------------------------------------------------

    def _start_reply(self, turn: TurnTimeline) -> None:
        old = self._reply
        if old is not None and not old.interrupted and old.task is not None and not old.task.done():
            self._interrupt_reply(old, self.turns.played_s(), "new_turn")
        reply = _Reply(id=f"r{next(_reply_ids)}", turn=turn)
        reply.resume.set()
        self._reply = reply
        if self._echo is not None:
            self._echo.reset_played()
        self.history.append({"role": "user", "content": turn.transcript})
        self.turns.reply_started(reply.id)
        self._out.put_nowait(ReplyStarted(reply.id, turn.transcript))
        reply.task = asyncio.create_task(self._reply_guarded(reply), name=f"session-reply-{reply.id}")

    async def _reply_guarded(self, reply: _Reply) -> None:
        try:
            await self._run_reply(reply)
        except asyncio.CancelledError:
            _cancel_streams(reply)
            raise
        except Exception as exc:  # noqa: BLE001 - the consumer sees the error at once; the session goes on
            _cancel_streams(reply)
            if self._reply is reply:
                self._reply = None
                if self.turns.reply_id == reply.id:
                    self.turns.audio_done()
            self._out.put_nowait(exc)

    def _messages(self) -> list[dict[str, str]]:
        system = {"role": "system", "content": self._config.llm.system_prompt}
        return [system, *self.history]

    async def _run_reply(self, reply: _Reply) -> None:
        from headstart.llm.stream import ReplyStream
        from headstart.tts.chunker import ClauseChunker
        from headstart.tts.normalize import normalize_text
        from headstart.tts.stream import TTSStream

        c, turn = self._components, reply.turn

        def normalize(chunk: str) -> str:
            spoken = normalize_text(chunk)
            if spoken:
                reply.chunks.append(chunk)
            return spoken

        tts = TTSStream(c.tts, ClauseChunker(self._config.tts), c.tts_executor, clock=self._clock,
                        normalize=normalize, frame_s=self._frame_s)
        reply.tts = tts
        audio_task = asyncio.create_task(self._pump_audio(reply, tts), name=f"session-audio-{reply.id}")
        turn.reply_started_at_s = self._clock.now()
        stream = ReplyStream(c.llm, self._messages(), self._config.llm, c.llm_executor, clock=self._clock)
        reply.stream = stream
        try:
            async for event in stream:
                if isinstance(event, TokenDelta):
                    now = self._clock.now()
                    if turn.first_token_at_s is None:
                        turn.first_token_at_s = now
                    turn.last_token_at_s = now
                    turn.num_tokens += max(1, len(event.token_ids))
                    reply.text.append(event.text)
                    tts.push_text(event.text)
                    self._out.put_nowait(_Tagged(reply.id, event))
                elif isinstance(event, ReplyDone):
                    turn.num_tokens = event.num_tokens
                    self._out.put_nowait(_Tagged(reply.id, event))
            tts.end_input()
            await audio_task
        except BaseException:
            _cancel_streams(reply)
            await _cancel(audio_task)
            raise
        reply.finished = True
        if self.turns.reply_id == reply.id:
            self.turns.audio_done()
        turn.reply = "".join(reply.text).strip()
        turn.reply_done_at_s = self._clock.now()
        if tts.timings:
            turn.tts_first_text_at_s = tts.timings[0].ready_at_s
        reply.history_index = len(self.history)
        self.history.append({"role": "assistant", "content": turn.reply})
        self._out.put_nowait(TurnCompleted(turn, reply.id))

    async def _pump_audio(self, reply: _Reply, tts) -> None:
        from headstart.audio import StreamResampler

        turn = reply.turn
        started = False
        to_16k = None
        async for frame in tts:
            while not reply.resume.is_set():  # paused for a possible barge-in: hold the audio
                await reply.resume.wait()
            if reply.interrupted:
                return
            if self._lead_s is not None:
                await self._wait_for_playback(reply)
            if not started:
                started = True
                self._out.put_nowait(_Tagged(reply.id, ReplyAudioStart(reply.id, frame.sample_rate)))
            if turn.first_audio_at_s is None:
                turn.first_audio_at_s = self._clock.now()
            turn.reply_audio_s += frame.duration_s
            reply.audio_s += frame.duration_s
            if self.turns.reply_id == reply.id:
                self.turns.audio_sent(frame.duration_s)
            if self._echo is not None:
                if frame.sample_rate != SAMPLE_RATE_HZ and to_16k is None:
                    to_16k = StreamResampler(frame.sample_rate, SAMPLE_RATE_HZ)
                self._echo.push_played(to_16k.push(frame.samples) if to_16k is not None else frame.samples)
            self._out.put_nowait(_Tagged(reply.id, ReplyAudio(frame, reply.id)))

    async def _wait_for_playback(self, reply: _Reply) -> None:
        """Pace the audio: at most `playback_lead_s` ahead of the client's playback."""
        tt = self.turns
        while tt.reply_id == reply.id and not reply.interrupted:
            ahead_s = tt.sent_s - tt.played_s()
            if ahead_s <= self._lead_s:
                return
            if not reply.resume.is_set():
                await reply.resume.wait()
                continue
            await self._clock.sleep(min(ahead_s - self._lead_s, 0.1))


@dataclass(frozen=True, slots=True)
class _Tagged:
    reply_id: str
    event: object


def _cancel_streams(reply: _Reply) -> None:
    for stream in (reply.stream, reply.tts):
        if stream is not None:
            stream.cancel()


async def _cancel(task: asyncio.Task) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
