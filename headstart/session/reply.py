"""The assistant's reply: the events it produces, the `Reply` handle that owns its pipeline (LLM
stream -> TTS stream -> paced audio) and the text a listener heard of it.

    reply = Reply("r1", turn, send, clock, open_tts, open_stream=lambda: llm.reply_stream(...))
    reply.start()                     # ReplyStarted, then TokenDelta..., ReplyDone, ReplyAudioStart, ReplyAudio...
    reply.pause(); reply.resume()     # a possible barge-in: audio stops leaving, then goes on
    heard = reply.cancel("barge_in", played_s)   # nothing of the reply is sent after this returns
    text = await reply                # its whole text once all its audio has left

A *held* reply (`held=True`, the head start) is generated and synthesised ahead: its events wait in
its outbox and its audio before the first frame, until `release(turn)` sends them in order.

A *tool* reply (`tool=...`, a matched tool call) speaks the tool's answer instead of the LLM's. Its
tool runs only once the reply is released (at once for a confirmed one): a held tool reply that is
dropped, cut off or never released has run nothing. While held it voices the answer the tool will most
likely give (`tool_preview`, found without acting), so that its first audio is ready at the release as
an LLM reply's is; the tool's real answer replaces that audio when the two differ.

Every event leaves through `send(reply, event)` carrying the reply's id; `delivers(event)` says
whether an event sent earlier may still reach the consumer (a cancelled reply's tokens and audio still
queued are dropped). All methods run on the event loop; the blocking work runs on the executors the
streams were given ("llm", "tts"); every timestamp comes from the injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from headstart.audio import AudioFrame
from headstart.clock import Clock
from headstart.events import ReplyDone, TokenDelta
from headstart.session.spoken_stream import SpokenStream
from headstart.timeline import TurnTimeline

if TYPE_CHECKING:
    from headstart.seams import LLMReplyStream
    from headstart.tts.stream import TTSStream

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
class ReplyUnspeakable:
    """Reply `reply_id`'s text (`text`) held words but none the voice can speak (another script): the
    listener heard `spoken` instead of silence."""

    reply_id: str
    text: str
    spoken: str


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
class ToolCalled:
    """Reply `reply_id` is about to run tool `name` with `arguments` (validated, JSON-able: str, int,
    float, bool); `call_id` ("c1", ...) names the run in its `ToolResult`. Only a released reply runs
    a tool, so a held reply that is dropped sends none."""

    reply_id: str
    call_id: str
    name: str
    arguments: dict[str, object]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """Tool call `call_id` (of reply `reply_id`, tool `name`) is over after `duration_s` seconds on the
    session's clock: `ok` and the tool's return `value` (its spoken answer for the built-in tools), or
    not ok and why in `error` (it raised or outlasted its timeout: the reply speaks an apology). Every
    `ToolCalled` gets one, also when its reply was cut off while the tool ran."""

    reply_id: str
    call_id: str
    name: str
    ok: bool
    value: object
    error: str
    duration_s: float


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """A user turn and its reply are over; `timeline` holds every timestamp of the turn."""

    timeline: TurnTimeline
    reply_id: str = ""
    interrupted: bool = False


def heard_text(chunks: list[tuple[str, float]], played_s: float) -> str:
    """The text of a reply the listener heard: chunks (text, audio seconds) in order, played up to
    `played_s`. Whole chunks before the position, then the words of the chunk being played in
    proportion to its audio played (rounded down to whole words)."""
    out: list[str] = []
    start = 0.0
    for text, duration_s in chunks:
        # a chunk with no audio yet (still synthesising when the reply stopped) was heard only if the
        # playback went past where it starts; one that made no audio at all ("...") is passed over
        if played_s >= start + duration_s - 1e-6 and (duration_s > 0 or played_s > start):
            out.append(text.strip())
            start += duration_s
            continue
        words = text.split()
        fraction = (played_s - start) / duration_s if duration_s > 0 else 0.0
        out.append(" ".join(words[: int(math.floor(max(0.0, fraction) * len(words)))]))
        break
    return " ".join(part for part in out if part)



class StageError(RuntimeError):
    """A stage failed; the session goes on. `code` names the failure for the server's `error` event:
    "llm_failed" (the local LLM raised, e.g. a prompt beyond its context)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# the reply's own content: what a cancel overtakes when it is still queued for the consumer
_CONTENT = (TokenDelta, ReplyDone, ReplyAudioStart, ReplyAudio)
# what one reply sends (`send(reply, event)`), in order: its LLM's events and its audio, with its id
ReplyEvent = (ReplyStarted | TokenDelta | ReplyDone | ReplyUnspeakable | ReplyAudioStart | ReplyAudio | ReplyPaused
              | ReplyResumed)


# a tool reply's action: run the matched tool (its only side effect), give the spoken answer
ToolRun = Callable[[], Awaitable[str]]


def _nothing(*_args) -> None:
    return None


class Reply:
    """One assistant reply and its pipeline: the LLM stream's tokens go to the TTS stream, whose
    audio leaves paced (at most `playback_lead_s` ahead of the client's playback) until all of it
    has left, the reply is cancelled, or a stage fails.

    Args:
        reply_id: the id every event of this reply carries ("r1", ...).
        turn: the user turn's timeline; the reply marks its reply_started_at_s, first/last token,
            num_tokens, tts_first_text_at_s, first_audio_at_s, reply_audio_s, reply, reply_done_at_s.
        send: `(reply, event) -> None`, called on the event loop for every event that leaves.
        clock: the time source of every mark and of the pacing sleeps.
        open_tts: `() -> TTSStream`, called when the reply starts running.
        stream: the LLM reply stream (headstart/seams.py `LLMReplyStream`), already open (the
            attribute may also be set before the reply runs); else
        open_stream: `() -> LLMReplyStream`, called when the reply starts running (after `open_tts`).
        held: generate and synthesise, but send nothing until `release`.
        playback_lead_s: pace the audio: `ahead_s()` seconds of it unplayed at most this; None sends
            audio as soon as it is synthesised.
        ahead_s: `() -> seconds sent but not yet played`, or None when the reply is no longer the one
            playing (pacing stops).
        on_audio: `(frame) -> None` for each frame just before it leaves (turn-taking, echo).
        on_llm_started: `() -> None` once, when the LLM's first event arrives or the reply ends
            without one (the LLM priority across sessions).
        on_finished: `(reply) -> None` once all its audio has left (history, TurnCompleted); called
            from the reply's task, in the same step as its last marks.
        on_failed: `(reply, exception) -> None` when a stage failed (not on cancel); an LLM failure
            before its last token comes as `StageError("llm_failed")` unless the error names its own
            `code` (the remote engine's).
        hypothesis, messages: for a held reply, the user text it answers and the chat before it.
        tool: a tool reply's `ToolRun`: awaited once the reply is released, its spoken answer is the
            reply's text (no LLM stream is opened).
        tool_preview: `() -> str | None`, a held tool reply's likely answer (None: unknown), voiced
            while it is held; called once, on the event loop, when the reply starts running.
    """

    def __init__(
        self,
        reply_id: str,
        turn: TurnTimeline,
        send: Callable[[Reply, ReplyEvent], None],
        clock: Clock,
        open_tts: Callable[[], TTSStream],
        *,
        stream: LLMReplyStream | None = None,
        open_stream: Callable[[], LLMReplyStream] | None = None,
        held: bool = False,
        playback_lead_s: float | None = None,
        ahead_s: Callable[[], float | None] = _nothing,
        on_audio: Callable[[AudioFrame], None] = _nothing,
        on_llm_started: Callable[[], None] = _nothing,
        on_finished: Callable[[Reply], None] = _nothing,
        on_failed: Callable[[Reply, Exception], None] = _nothing,
        hypothesis: str = "",
        messages: list[dict[str, str]] | None = None,
        tool: ToolRun | None = None,
        tool_preview: Callable[[], str | None] | None = None,
    ) -> None:
        if stream is None and open_stream is None and tool is None:
            raise ValueError("a Reply needs stream=, open_stream= or tool=")
        self.id = reply_id
        self.turn = turn
        self.stream: LLMReplyStream | None = stream
        self.tts: TTSStream | None = None
        self.held = held
        self.hypothesis = hypothesis
        self.messages = messages
        self.tool = tool
        self._tool_preview = tool_preview
        self.task: asyncio.Task[None] | None = None
        self.error: Exception | None = None
        self.finished = False  # all its audio has left
        self.audio_s = 0.0  # seconds of its audio sent
        self.released_at_s: float | None = None
        self.history_index: int | None = None  # the session's: where its assistant message is
        self._send = send
        self._clock = clock
        self._open_tts = open_tts
        self._open_stream = open_stream
        self._lead_s = playback_lead_s
        self._ahead_s = ahead_s
        self._on_audio = on_audio
        self._on_llm_started = on_llm_started
        self._on_finished = on_finished
        self._on_failed = on_failed
        self._text: list[str] = []
        self._outbox: list[TokenDelta | ReplyDone | ReplyUnspeakable] = []  # its LLM's events while held, in order
        self._playing = asyncio.Event()  # cleared while paused
        self._playing.set()
        self._released = asyncio.Event()
        if not held:
            self._released.set()
        # cleared while a tool reply's audio is its preview's, not yet checked against the tool's answer
        self._answer_checked = asyncio.Event()
        self._answer_checked.set()
        self._llm_started_called = False
        self._cancelled = False
        self.cancel_reason: str | None = None
        self._heard: str = ""

    # -- control ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the pipeline (inside the running event loop). A confirmed reply sends `ReplyStarted`
        first; a held one sends nothing yet.

        Raises:
            RuntimeError: started twice.
        """
        if self.task is not None:
            raise RuntimeError(f"reply {self.id} was already started")
        if not self.held:
            self._started()
        kind = "held" if self.held else "reply"
        self.task = asyncio.create_task(self._run_guarded(), name=f"session-{kind}-{self.id}")

    def release(self, turn: TurnTimeline) -> None:
        """A held reply becomes the turn's reply: `ReplyStarted`, then what it holds, in order, and its
        audio from then on. A no-op for a reply that is not held or was cancelled."""
        if not self.held or self._cancelled:
            return
        self.held = False
        self.turn = turn
        self.released_at_s = self._clock.now()
        self._started()
        outbox, self._outbox = self._outbox, []
        for event in outbox:
            self._mark(event)
            self._send(self, event)
        self._released.set()

    def pause(self) -> None:
        """A possible barge-in: no more audio leaves until `resume` (`ReplyPaused` is sent)."""
        if self._cancelled:
            return
        self._playing.clear()
        self._send(self, ReplyPaused(self.id))

    def resume(self) -> None:
        """No words came: the audio goes on (`ReplyResumed` is sent)."""
        if self._cancelled:
            return
        self._playing.set()
        self._send(self, ReplyResumed(self.id))

    def cancel(self, reason: str, played_s: float) -> str:
        """Stop the reply now: the LLM and TTS streams stop, its task is cancelled, and none of its
        events is sent from now on (its tokens and audio still queued are dropped: `delivers`).
        Idempotent: a second call changes nothing and returns the same text.

        Args:
            reason: why ("barge_in", "client", "new_turn", "reset", or a head-start drop's reason).
            played_s: seconds of its audio the listener has played.

        Returns:
            The text the listener heard (`heard_text` of its chunks up to `played_s`).
        """
        if self._cancelled:
            return self._heard
        self._cancelled = True
        self.cancel_reason = reason
        self._cancel_streams()
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self._playing.set()  # nothing waits on a pause of a stopped reply
        self._heard = self.heard_text(played_s)
        return self._heard

    def __await__(self) -> Generator[object, None, str]:
        """The reply's whole text once all its audio has left. Raises the stage's error when one
        failed, asyncio.CancelledError when it was cancelled, RuntimeError when it was never started.
        Awaiting never cancels the reply."""
        return self._wait().__await__()

    async def _wait(self) -> str:
        if self.task is None:
            raise RuntimeError(f"reply {self.id} was never started")
        await asyncio.shield(self.task)
        if self.error is not None:
            raise self.error
        return self.text

    # -- state -----------------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def running(self) -> bool:
        """Started and not over (generating, or its audio still leaving)."""
        return self.task is not None and not self.task.done()

    @property
    def text(self) -> str:
        """The text the LLM has given so far."""
        return "".join(self._text)

    @property
    def generating(self) -> bool:
        """The LLM is still generating it."""
        return self.stream is not None and self.stream.stats.done_at_s is None

    @property
    def num_generated_tokens(self) -> int:
        """Tokens its LLM stream has generated so far."""
        return len(self.stream.stats.token_times_s) if self.stream is not None else 0

    @property
    def held_tokens(self) -> int:
        """Tokens waiting in a held reply's outbox."""
        return sum(len(e.token_ids) for e in self._outbox if isinstance(e, TokenDelta))

    @property
    def synthesised_s(self) -> float:
        """Seconds of audio of the chunks the synthesiser has finished."""
        return sum(s.audio_s for s in self.tts.spans() if s.complete) if self.tts is not None else 0.0

    def spans(self) -> list[tuple[str, float]]:
        """(chunk text, audio seconds so far) of every chunk handed to the synthesiser, in order (the
        TTS stream's own `ChunkSpan`s), for `heard_text`."""
        return [(s.text, s.audio_s) for s in self.tts.spans()] if self.tts is not None else []

    def heard_text(self, played_s: float) -> str:
        """The text a listener who played `played_s` seconds of its audio heard."""
        return heard_text(self.spans(), played_s)

    def delivers(self, event: ReplyEvent) -> bool:
        """Whether `event`, sent by this reply earlier, may still reach the consumer: not its tokens or
        audio once it is cancelled (its control events, ReplyStarted, ReplyPaused..., still do)."""
        return not (self._cancelled and isinstance(event, _CONTENT))

    # -- the pipeline ----------------------------------------------------------------------------

    def _started(self) -> None:
        self._send(self, ReplyStarted(self.id, self.turn.transcript))
        self.turn.reply_started_at_s = self._clock.now()

    def _llm_started(self) -> None:
        if not self._llm_started_called:
            self._llm_started_called = True
            self._on_llm_started()

    def _cancel_streams(self) -> None:
        for stream in (self.stream, self.tts):
            if stream is not None:
                stream.cancel()

    async def _run_guarded(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            self._llm_started()
            self._cancel_streams()
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the owner; the session goes on
            self._llm_started()
            self._cancel_streams()
            self.error = exc
            if not self._cancelled:
                self._on_failed(self, exc)

    async def _run(self) -> None:
        tts = self.tts = self._open_tts()
        audio_task = asyncio.create_task(self._pump_audio(tts), name=f"session-audio-{self.id}")
        llm_done = False
        voiced = ""  # text already given to the TTS stream (a held tool reply's preview)
        try:
            if self.stream is None and self.tool is not None:
                preview = self._tool_preview() if self.held and self._tool_preview is not None else None
                if preview:  # voiced while held: its audio waits until the tool's answer is known
                    self._answer_checked.clear()
                    tts.push_text(preview)
                    tts.end_input()
                # the gate: a tool runs only for a released reply; a dropped held one is cancelled here
                await self._released.wait()
                answer = await self.tool()
                if preview and answer != preview:  # nothing of it has left yet: voice the real answer
                    tts.cancel()
                    await _cancel(audio_task)
                    tts = self.tts = self._open_tts()
                    audio_task = asyncio.create_task(self._pump_audio(tts), name=f"session-audio-{self.id}")
                elif preview:
                    voiced = preview
                self._answer_checked.set()
                self.stream = SpokenStream(answer, self._clock)
            if self.stream is None:
                assert self._open_stream is not None
                self.stream = self._open_stream()
            async for event in self.stream:
                self._llm_started()
                if isinstance(event, TokenDelta):
                    self._text.append(event.text)
                    if voiced and event.text == voiced:
                        voiced = ""  # the spoken stream's one delta: in the TTS stream already
                    else:
                        tts.push_text(event.text)
                self._deliver(dataclasses.replace(event, reply_id=self.id))
            llm_done = True
            tts.end_input()
            await audio_task
            if tts.fallback_spoken:
                self._deliver(ReplyUnspeakable(self.id, self.text.strip(), tts.fallback_text or ""))
            await self._released.wait()  # a held reply whose audio is all made waits for its release
        except BaseException as exc:
            self._llm_started()
            self._cancel_streams()
            await _cancel(audio_task)
            if not llm_done and isinstance(exc, Exception) and not isinstance(getattr(exc, "code", None), str):
                raise StageError("llm_failed", f"the reply's LLM failed: {type(exc).__name__}: {exc}") from exc
            raise
        turn = self.turn
        self.finished = True
        turn.reply = self.text.strip()
        turn.reply_done_at_s = self._clock.now()
        if tts.timings:  # a held reply's text was ready before its release: count from the release
            turn.tts_first_text_at_s = max(tts.timings[0].ready_at_s, self.released_at_s or float("-inf"))
        self._on_finished(self)

    def _deliver(self, event: TokenDelta | ReplyDone | ReplyUnspeakable) -> None:
        """Send an LLM event now, or keep it in the outbox while the reply is held."""
        if self.held:
            self._outbox.append(event)
            return
        self._mark(event)
        self._send(self, event)

    def _mark(self, event: ReplyEvent) -> None:
        """Timeline marks of an LLM event leaving."""
        turn = self.turn
        if isinstance(event, TokenDelta):
            now = self._clock.now()
            if turn.first_token_at_s is None:
                turn.first_token_at_s = now
            turn.last_token_at_s = now
            turn.num_tokens += max(1, len(event.token_ids))
        elif isinstance(event, ReplyDone):
            turn.num_tokens = event.num_tokens

    async def _pump_audio(self, tts: TTSStream) -> None:
        started = False
        async for frame in tts:
            if not self._released.is_set():  # held: the first clause is synthesised, and waits here
                await self._released.wait()
            if not self._answer_checked.is_set():  # a tool's preview: only once it is the answer
                await self._answer_checked.wait()
            while not self._playing.is_set():  # paused for a possible barge-in: hold the audio
                await self._playing.wait()
            if self._cancelled:
                return
            if self._lead_s is not None:
                await self._wait_for_playback()
            turn = self.turn
            if not started:
                started = True
                self._send(self, ReplyAudioStart(self.id, frame.sample_rate))
            if turn.first_audio_at_s is None:
                turn.first_audio_at_s = self._clock.now()
            turn.reply_audio_s += frame.duration_s
            self.audio_s += frame.duration_s
            self._on_audio(frame)
            self._send(self, ReplyAudio(frame, self.id))

    async def _wait_for_playback(self) -> None:
        """Pace the audio: at most `playback_lead_s` ahead of the client's playback."""
        lead_s = self._lead_s
        assert lead_s is not None  # called only while pacing is on
        while not self._cancelled:
            ahead_s = self._ahead_s()
            if ahead_s is None or ahead_s <= lead_s:
                return
            if not self._playing.is_set():
                await self._playing.wait()
                continue
            await self._clock.sleep(min(ahead_s - lead_s, 0.1))


async def _cancel(task: asyncio.Task) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
