"""One conversation: the only place that knows all three stages, and the manners of turn-taking.

    components = Components.load(PipelineConfig())          # once per process: models + executors
    session = Session(components)
    await session.push_audio(frame)                          # user audio, any rate/channels
    async for event in session: ...                          # transcripts, reply tokens, reply audio

Events out, in order: the listener's (SpeechStarted, PartialTranscript, SpeechEnded, FinalTranscript,
EndOfTurn), then for the reply ReplyStarted, (for a tool reply ToolCalled and ToolResult,) TokenDelta...,
ReplyAudioStart, ReplyAudio..., ReplyDone (the LLM finished), and TurnCompleted with the turn's timeline
once all its audio has left. A barge-in
adds ReplyPaused / ReplyResumed, or ReplyInterrupted (then TurnCompleted with `interrupted=True`).
Tokens and audio of an interrupted reply still queued are dropped, never delivered.

Turn-taking (headstart/session/turntaking.py, a plain synchronous state machine on an injected clock): user
listening / speaking, agent listening / thinking / speaking; barge-in pauses the reply at VAD speed,
words interrupt it (the LLM stops, queued and in-flight audio is dropped, the client flushes, the
history keeps only the heard text, by playback position), no words resume it. Echo (headstart/session/echo.py):
the session's own voice coming back through a speaker starts no turn and no barge-in. The KV cache
follows the history: the next prompt renders the heard text and the engine's prefill keeps only the
longest common prefix of its cache and that prompt.

The session routes; three handles per session do the work (docs/server.md "Who does what"): each
`Reply` (headstart/session/reply.py) owns its LLM → TTS → paced-audio pipeline, and the session's `Replies`
(headstart/session/replies.py) make them and hold the one that has the floor; the `HeadStart`
(headstart/session/head_start.py) prefills the user's turn while they speak and may start a *held* reply that
the end of turn releases (a hit) or drops (`TurnCompleted.timeline.head_start.preemptive`); the
`EOUService` (headstart/session/eou.py) estimates whether the user's text reads complete, for the
listener's endpointer and the head start. `Listening` (headstart/session/listening.py) runs the listener.
Sessions share the llm thread through `Components.llm_priority` (confirmed replies first); the chat is
the session's `Conversation` (headstart/session/conversation.py: history, continuations).

Memory (`LLMConfig.memory` "summary", headstart/llm/memory.py): once a reply has all left and the
assistant is idle, a history past its budget is compacted: the oldest turns become a short note the
LLM writes (greedy, on the "llm" thread), frozen once written. The user's speech, or another
session's confirmed reply (`Components.llm_priority`), cancels it (the
summariser stops at its next token and the note is dropped: the turn then goes on the chat as it was,
so its LiveTurn and any held reply stay exact); a note is applied only while no user turn, held reply
or reply is open, and the chat the next turn follows is prefilled again at once (`HeadStart.prewarm`).

Tools (headstart/tools/, docs/tools.md): a final transcript a tool serves gets the tool's spoken answer
instead of the LLM's (`Replies.route`); a held reply may be a tool reply, but its tool runs only once
the end of turn releases it (`Reply`), between a `ToolCalled` and its `ToolResult`. A timer, alarm or
reminder that fires sends `TimerFired` and an agent-initiated reply (headstart/session/timers.py); the
session's end cancels them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable

from headstart.audio import AudioFrame
from headstart.clock import Clock, MonotonicClock
from headstart.session.components import Components
from headstart.session.conversation import Conversation, history_window
from headstart.session.echo import EchoDetector, EchoGuard, normalized_xcorr_peak
from headstart.session.eou import EOUService, fuses_reply_prefill
from headstart.events import (
    EndOfTurn,
    FinalTranscript,
    PartialTranscript,
    SpeechEnded,
    SpeechStarted,
)
from headstart.session.head_start import HeadStart
from headstart.session.listening import Listening, default_listener
from headstart.session.preemption import same_text
from headstart.seams import ListenerEvent, ListenerFactory
from headstart.session.replies import FromReply, Replies
from headstart.session.reply import (
    Reply,
    ReplyAudio,
    ReplyEvent,
    ReplyAudioStart,
    ReplyInterrupted,
    ReplyPaused,
    ReplyResumed,
    ReplyStarted,
    StageError,
    ToolCalled,
    ToolResult,
    TurnCompleted,
    heard_text,
)
from headstart.timeline import AudioClockMap, TurnTimeline
from headstart.session.timers import TimerAnnouncer, TimerFired
from headstart.tools.lists import ListStore
from headstart.tools.registry import ToolRegistry
from headstart.tools.toolbox import Toolbox
from headstart.session.turntaking import (
    FILLER_WORDS,
    Action,
    AgentState,
    Interrupt,
    Pause,
    Resume,
    StartReply,
    TurnTaking,
    UserState,
    content_words,
    has_words,
    is_echo_text,
)

__all__ = [
    "FILLER_WORDS", "Action", "AgentState", "Components", "EchoDetector", "Interrupt", "Pause", "Reply",
    "ReplyAudio", "ReplyAudioStart", "ReplyInterrupted", "ReplyPaused", "ReplyResumed", "ReplyStarted",
    "Resume", "Session", "SessionEvent", "StartReply", "TimerFired", "ToolCalled", "ToolResult", "TurnCompleted",
    "TurnTaking", "UserState", "content_words", "heard_text", "is_echo_text", "normalized_xcorr_peak",
]


# -- the session --------------------------------------------------------------------------------------

# What a session's iteration yields: the listener's events, each reply's, and the turn's end.
SessionEvent = ListenerEvent | ReplyEvent | ReplyInterrupted | TurnCompleted | TimerFired | ToolCalled | ToolResult

class _End:
    """The end of the session's event stream (queued when its input ended or it closed)."""


_END = _End()
_FROM_CONFIG = object()  # Session(eou_scorer=..., summariser=...) default: from the components
# After a reply's audio has left, how long the compaction waits for the assistant to be idle (the
# reply to play out), polling every COMPACTION_POLL_S; a reply longer than that is compacted after the
# next turn.
COMPACTION_IDLE_WAIT_S = 60.0
COMPACTION_POLL_S = 0.1
# `async (messages, max_tokens, cancelled) -> notes or None`: the history's summariser (llm/memory.py)
Summariser = Callable[[list[dict[str, str]], int, Callable[[], bool]], Awaitable[str | None]]


def default_summariser(components: Components) -> Summariser | None:
    """`summarise` (llm/memory.py) on the components' local engine, run on its "llm" executor; None for
    a remote LLM backend (it has no KV cache here to continue)."""
    engine = components.local_engine
    if engine is None:
        return None

    async def run(messages: list[dict[str, str]], max_tokens: int, cancelled: Callable[[], bool]) -> str | None:
        from headstart.llm.memory import summarise

        return await asyncio.get_running_loop().run_in_executor(
            components.llm_executor, lambda: summarise(engine, messages, max_tokens, cancelled))

    return run



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
        eou_scorer: `async (text) -> probability in [0, 1] or None` that the user's turn is complete
            after `text`. Default: the model `SessionConfig.eou` names (`Components.eou_model`: the
            chat LLM's end-of-turn token, headstart/llm/eou.py, or a trained head), run on the "llm"
            executor on the engine's KV cache (it reuses the prefix the incremental prefill holds),
            only while the user is silent, and giving way to confirmed replies (`EOUService`).
            None: no EOU signal. The listener's endpointer adapts its silence to it and the head start
            preempts on it; without one the head start uses the punctuation rule
            (`PreemptionPolicy.reads_complete`).
        listener: `(eou_scorer, acoustic_scorer) -> SpeechListener` (headstart/seams.py
            `ListenerFactory`) makes the session's listener (called again for a fresh one after
            `clear_input`). Default: a voice/listener.py `Listener` on the components' VAD, ASR and an
            endpointer on the EOU plan.
        tools: tools registered beside the built-in ones (docs/tools.md); `SessionConfig.tools` False:
            no tools at all.
        user: whose lists the tools keep ("default" when the server knows no user).
        lists: where lists are kept (default: `ListStore()`, in `$HEADSTART_DATA_DIR` or the user's
            data folder).
        summariser: `async (messages, max_tokens, cancelled) -> notes or None` for the history's
            compaction (`LLMConfig.memory` "summary"): the LLM's notes on the chat `messages`
            (llm/memory.py `summary_messages`), at most `max_tokens` tokens, None once `cancelled()`
            is true. Default: `summarise` on the local engine's "llm" thread; None (and with a remote
            LLM): no compaction ("summary" then keeps the turn window).

    Attributes:
        compactions: compactions applied; `compactions_dropped`: those the user's speech (or a turn
            already open) cancelled or that failed.
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
        eou_scorer=_FROM_CONFIG,
        listener: ListenerFactory | None = None,
        tools: ToolRegistry | None = None,
        user: str = "default",
        lists: ListStore | None = None,
        summariser: Summariser | None | object = _FROM_CONFIG,
    ) -> None:
        self._config = components.config
        self._clock: Clock = clock or MonotonicClock()
        self.toolbox = Toolbox(self._clock, lists=lists, user=user, tools=tools) if self._config.session.tools else None
        self._echo = EchoGuard(EchoDetector() if echo is True else (echo or None))
        self.turns = TurnTaking(self._clock, realtime_playback=realtime_playback)
        self._out: asyncio.Queue[SessionEvent | FromReply | Exception | _End] = asyncio.Queue()
        self._summariser: Summariser | None = (default_summariser(components) if summariser is _FROM_CONFIG
                                               else summariser)  # type: ignore[assignment]
        self.conversation = Conversation(self._config.llm.system_prompt, history_window(
            components.llm, self._config.llm, can_summarise=self._summariser is not None))
        self.replies = Replies(
            components, self._clock, self.turns, self._echo, self.conversation, self._out.put_nowait, owner=self,
            speech_started_at=lambda: self._speech_started_at,
            on_held_failed=lambda reply: self.head_start.held_failed(reply),
            playback_lead_s=playback_lead_s, audio_frame_s=audio_frame_s, tools=self.toolbox,
            on_tool_ran=self._on_tool_ran, on_reply_done=self._reply_done)
        plan = components.eou_plan() if eou_scorer is _FROM_CONFIG else None
        self._endpoint_config = plan.endpoint if plan is not None else self._config.endpoint
        self.head_start = HeadStart(
            self._clock, self._config.session, self._endpoint_config, open_turn=self.replies.open_live_turn,
            messages=self.conversation.messages, new_held=self._new_held_reply, possible=self._head_start_possible,
            priority=components.llm_priority, owner=self, tool_reply=self._new_held_tool_reply)
        engine = components.local_engine  # None for a remote backend: no fused reply prefill
        self.eou = EOUService(
            plan, engine, components.llm_executor, components.llm_priority, messages=self.conversation.messages,
            can_compute=self._eou_can_compute, scorer=None if eou_scorer is _FROM_CONFIG else eou_scorer,
            on_failure=self._eou_failed, applies=self._config.endpoint.semantic or self.head_start.policy.preemptive,
            fuse_reply_prefill=bool(self.head_start.enabled and plan is not None and plan.model is not None
                                    and fuses_reply_prefill(plan.model, engine)),
            acoustic=components.acoustic_eou, acoustic_executor=components.acoustic_executor)
        self.eou.subscribe(self._on_eou)
        make = listener or (lambda eou, acoustic: default_listener(components, self._endpoint_config, eou, acoustic))
        self._listening = Listening(lambda: make(*self.eou.listener_scorers), self._on_listener_event,
                                    self._out.put_nowait)
        self.audio_clock = AudioClockMap()
        self._audio_s = 0.0
        self._turn: TurnTimeline | None = None
        self._timer: asyncio.Task[None] | None = None
        self._closed = False
        self._speech_started_at: float | None = None  # the current utterance's first speech start
        self._paused = False  # the listener's VAD hears a pause of preempt_pause_s, not yet its end
        self._compaction: asyncio.Task[None] | None = None
        self._compaction_wait: asyncio.Task[None] | None = None  # waits for the reply to play out
        self._priority = components.llm_priority
        self._compaction_cancel: threading.Event | None = None
        self.compactions = 0
        self.compactions_dropped = 0
        self.timers = None if self.toolbox is None else TimerAnnouncer(
            self._clock, self.toolbox, self._out.put_nowait, can_speak=self._can_announce, speak=self._announce)

    def _eou_can_compute(self) -> bool:
        """EOU estimates run only while the user is silent (the listener asks on every partial; mid-speech
        estimates would cost LLM time that ASR needs, and the VAD's speech end asks again) unless the
        VAD already hears silence (a partial then is likely the whole turn: its estimate, and the reply
        prompt prefilled with it, are ready when the speech end is confirmed), and while no reply is in
        progress (the llm thread is the reply's)."""
        silence = self._listening.listener.silence_pending
        return not (self.turns.user is UserState.SPEAKING and not silence) and not self.reply_active

    def _eou_failed(self, exc: Exception) -> None:
        """A failing EOU estimate (the LLM) is reported as `llm_failed` and counts as no estimate: the
        listener goes on (it died with it, and every audio frame then got "the listener's ASR failed")."""
        self._out.put_nowait(StageError("llm_failed", f"the end-of-turn estimate failed: {type(exc).__name__}: {exc}"))

    def _on_eou(self, text: str, probability: float | None) -> None:
        """An EOU estimate landed: for the head start (a held reply may start on it), while the user's
        turn is the latest text (a newer text is being scored by the listener)."""
        if self.turns.utterance == "user":
            self.head_start.eou(text, probability)

    # -- input ---------------------------------------------------------------------------------------

    async def push_audio(self, frame: AudioFrame) -> None:
        """Add user audio (any rate or channel count; converted at the edge).

        Raises:
            headstart.audio.AudioError: for unusable audio (NaN samples, bad shape); the session goes on.
            RuntimeError: after `end_input()`.
        """
        if self._closed:
            raise RuntimeError("the session's input has ended")
        self._listening.start()
        if self.head_start.idle:
            self.head_start.prewarm()
        await self._listening.push(frame, self.turns.bargein_armed)  # the VAD's quicker start over the reply
        self._follow_pause()
        tt = self.turns  # the playback position this audio was heard at: echo after an underrun
        self._echo.heard(frame, tt.played_s() if tt.agent is AgentState.SPEAKING else None)
        self._audio_s += frame.duration_s
        self.audio_clock.record(self._audio_s, self._clock.now())

    def _follow_pause(self) -> None:
        """The VAD's pause in progress, read after each frame: once it lasts `preempt_pause_s` and the
        latest partial heard the speech up to it (so the final needs no other pass and will most likely be
        that text), the text is estimated and may start the held reply (`SessionConfig.preempt_on_pause`);
        speech that goes on before the VAD confirms its end drops that reply. A pause that ends in the
        VAD's speech end changes nothing here (its SpeechEnded follows)."""
        listener = self._listening.listener
        pause_s = listener.pause_s
        paused = (pause_s is not None and pause_s >= self._config.session.preempt_pause_s - 1e-9
                  and listener.pause_heard)
        if paused == self._paused:
            return
        self._paused = paused
        if self.turns.utterance != "user" or not self._config.session.preempt_on_pause:
            return
        if paused:
            self._expect_final()
            self.eou.speech_ended(self.head_start.latest_text)  # estimated now, before a held reply on it
            self.head_start.pause_started()
        elif listener.in_speech:
            self.head_start.pause_ended()

    def _expect_final(self) -> None:
        """Before a held reply may start (a pause, the speech end): the head start takes the text the
        final transcript will carry if the speech ends here. With a re-decoding ASR (Moonshine) that is
        the newest pass' own hypothesis, which can differ from the latest partial ("How do i say" /
        "How do I say"); a held reply and an EOU estimate of the partial's text would then miss."""
        text = self._listening.listener.expected_final_text
        if text.strip() and not same_text(text, self.head_start.latest_text):
            self.head_start.partial(text)

    async def commit(self) -> None:
        """The user ends the turn now (push-to-talk released): the speech so far gets its final
        transcript and end of turn at once, without waiting for the endpointer's silence
        (`Listener.commit`: the same listener goes on, so audio positions keep counting)."""
        if not self._closed:
            await self._listening.commit()  # the listener ends the utterance and goes on (audio_s keeps counting)

    async def clear_input(self) -> None:
        """Drop the user audio of the turn in progress (no transcript, no turn)."""
        if self._closed:
            return
        await self._listening.restart()
        self._turn = None
        self.eou.new_utterance()
        self.head_start.cancel("cleared")
        self.replies.apply(self.turns.cleared())

    async def interrupt(self, reason: str = "client", reply_id: str | None = None) -> bool:
        """Stop the current reply now (as a barge-in does). With `reply_id`, only if that is the reply
        in progress: an older (stale) or unknown id interrupts nothing, so a late stop press never
        cuts the next answer. Returns whether a reply was interrupted (False also when the agent is
        listening)."""
        current = self.turns.reply_id
        if current is None or (reply_id is not None and reply_id != current):
            return False
        reply = self.replies.current
        self.replies.apply(self.turns.interrupt(reason))
        return reply is not None and reply.cancelled

    def playback_position(self, reply_id: str, position_s: float) -> None:
        """The client has played `position_s` seconds of reply `reply_id`'s audio."""
        self.turns.playback_position(reply_id, position_s)

    async def reset(self) -> None:
        """Forget the conversation: stop any reply, drop the input in progress, clear the history."""
        self._cancel_compaction()
        self.replies.apply(self.turns.interrupt("reset"))
        await self.clear_input()
        self.conversation.clear()

    async def end_input(self) -> None:
        """No more user audio: finish the open turn (and its reply); then the event stream ends."""
        if self._closed:
            return
        self._closed = True
        self._cancel_compaction()  # no turn follows: no memory is needed
        await self._listening.end_input()
        self.head_start.cancel("cleared")  # a held reply the input never confirmed
        self._close_timers()
        reply = self.replies.current
        if reply is not None and reply.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await reply.task
        self._out.put_nowait(_END)

    async def drain(self) -> None:
        """Take no more input and start no new turn, but let the reply in progress finish (the server's
        shutdown): the user's speech in progress is dropped (no final transcript, no end of turn), a
        held reply and the timers are cancelled, a reply paused for a possible barge-in resumes (no
        words can confirm it now). Returns once the current reply has finished (its TurnCompleted is
        queued; at once when there is none); then the event stream ends. Cancel it to stop waiting
        (`aclose` then stops the reply). Afterwards `push_audio` raises RuntimeError and `commit` and
        `clear_input` do nothing."""
        if self._closed:
            return
        self._closed = True
        await self._listening.stop()
        if self._timer is not None:
            self._timer.cancel()
        self.head_start.cancel("closed")
        self._close_timers()
        self.replies.apply(self.turns.cleared())
        reply = self.replies.current
        if reply is not None and reply.task is not None:
            await asyncio.wait({reply.task})  # its own cancellation or failure is its events' business
        self._out.put_nowait(_END)

    async def aclose(self) -> None:
        """Stop everything at once (the client went away): no more events are produced."""
        self._closed = True
        self._cancel_compaction()
        tasks = self.tasks  # the held reply's too, before the head start lets go of it
        self._close_timers()
        self.head_start.cancel("closed")
        if self.replies.current is not None:
            self.replies.current.cancel("closed", 0.0)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._out.put_nowait(_END)

    @property
    def tasks(self) -> list[asyncio.Task]:
        """The session's asyncio tasks not done yet (its listener's, the barge-in timer, its replies', a
        tool run's): none before its first audio, none once `aclose` returns."""
        replies = [r.task for r in (self.replies.current, self.head_start.held) if r is not None]
        watch = self.timers.task if self.timers is not None else None
        return [t for t in (*self._listening.tasks, self._timer, watch, self._compaction, self._compaction_wait,
                            *replies,
                            *self.replies.tool_tasks)
                if t is not None and not t.done()]

    @property
    def reply_active(self) -> bool:
        """A reply is being generated or its audio is still leaving."""
        return self.replies.active

    @property
    def user_state(self) -> UserState:
        return self.turns.user

    @property
    def agent_state(self) -> AgentState:
        return self.turns.agent

    # -- output --------------------------------------------------------------------------------------

    def __aiter__(self) -> Session:
        return self

    async def __anext__(self) -> SessionEvent:
        while True:
            item = await self._out.get()
            if isinstance(item, _End):
                self._out.put_nowait(_END)
                raise StopAsyncIteration
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, FromReply):
                if not item.reply.delivers(item.event):
                    continue  # cancel overtakes tokens and audio still queued
                return item.event
            return item

    # -- the listener's events -----------------------------------------------------------------------

    def _sure_echo(self) -> bool:
        return self._echo.sure_echo(self.turns.awaits_echo_verdict, self.turns.played_s)

    def _on_listener_event(self, event: ListenerEvent) -> None:
        now = self._clock.now()
        tt = self.turns
        if isinstance(event, SpeechStarted):
            speaking = tt.agent is AgentState.SPEAKING  # else the tail of a reply that just finished
            echo = self._echo.speech_is_echo(tt.played_s() if speaking else None, tt.just_spoke)
            actions = tt.speech_started(echo=echo, audio_s=event.audio_s)
            if tt.utterance == "echo":
                return  # the session's own voice: no user turn
            if self._turn is None:
                self._turn = TurnTimeline()
                self._speech_started_at = now
            self._cancel_compaction()  # the user's turn comes first: the summariser stops at its next token
            self.eou.new_utterance()  # estimates of the text so far are stale once speech resumes
            self.head_start.speech_started()  # resumed speech drops held work
            self._out.put_nowait(event)
            self.replies.apply(actions)
            return
        elif isinstance(event, PartialTranscript):
            was_echo = tt.utterance == "echo"
            self.replies.apply(tt.words(event.text, self.replies.echo_text(), echo=self._sure_echo(),
                                        confidence=event.confidence, audio_end_s=event.audio_end_s))
            if was_echo and tt.utterance == "echo":
                return
            turn = self._current_turn()
            if turn.first_partial_at_s is None:
                turn.first_partial_at_s = now
            self._on_partial(event)
        elif isinstance(event, SpeechEnded):
            tt.speech_ended(audio_s=event.audio_s)
            self._schedule_poll()
            if tt.utterance in ("echo", "ignored"):
                return
            self._current_turn().vad_speech_end_at_s = now
            if tt.utterance == "user":
                # the EOU estimate goes to the llm thread first: a held reply started now generates in
                # one job, and the endpointer waits for the estimate
                self._expect_final()
                self.eou.speech_ended(self.head_start.latest_text)
                self.head_start.speech_ended()
        elif isinstance(event, FinalTranscript):
            was_echo = tt.utterance == "echo"
            self.replies.apply(tt.final(event.text, self.replies.echo_text(), echo=self._sure_echo(),
                                        confidence=event.confidence))
            if tt.utterance == "ignored":
                self._turn = None
                self.conversation.no_continuation()  # the utterance that cut the reply off is no turn
                if was_echo:
                    return
                self._out.put_nowait(event)
                return
            turn = self._current_turn()
            turn.final_transcript_at_s = now
            turn.transcript = event.text
            turn.asr_confidence = event.confidence
            if not has_words(event.text):
                self._turn = None  # no words (or fillers only): the listener ends this utterance without a turn
                self.conversation.no_continuation()
                self.head_start.cancel("no_words")
            elif tt.utterance == "user":
                self._out.put_nowait(event)
                self.eou.final(event.text)  # on the llm thread before a held reply on this final
                if self.replies.ask_back_stream(turn) is not None and self.head_start.held is not None:
                    self.head_start.drop("low_confidence")  # the final may hold the ask-back instead
                self.head_start.final(event.text)
                return
        elif isinstance(event, EndOfTurn):
            turn = self._current_turn()
            turn.end_of_turn_at_s = now
            turn.eou_probability = event.eou_probability
            self._turn = None
            self.eou.new_utterance()
            actions = tt.end_of_turn(turn.transcript)
            if not any(isinstance(a, StartReply) for a in actions):
                self.head_start.cancel("no_words")  # no reply: nothing held may stay
                if not turn.transcript.strip():
                    return
            self._out.put_nowait(event)
            for action in actions:
                if isinstance(action, StartReply):
                    self._start_reply(turn)
                else:
                    self.replies.apply([action])
            return
        self._out.put_nowait(event)

    def _on_partial(self, event: PartialTranscript) -> None:
        """A partial of the user's turn: incremental prefill of its prompt (LiveTurn.update), and the
        head start's verdict on any held reply (a different text drops it)."""
        if self.turns.utterance != "user":
            return  # a possible barge-in or echo: not (yet) a turn of its own
        self.head_start.partial(event.text)

    # -- the head start and the reply -----------------------------------------------------------------

    def _head_start_possible(self) -> bool:
        """Speculative work only while the head start is on, the session open and the agent silent
        (`Replies.agent_silent`: the chat the user's turn follows is final)."""
        return self.head_start.enabled and not self._closed and self.replies.agent_silent

    def _new_held_tool_reply(self, text: str, messages: list[dict[str, str]]) -> Reply | None:
        """A held reply the LLM does not write: the ask-back when the recogniser was unsure of the final
        `text` (headstart/session/ask_back.py), or a tool reply when a tool serves `text` (matched and
        validated now; the tool runs only if the end of turn releases the reply); else None."""
        turn = self._current_turn()
        if turn.transcript == text:
            ask_back = self.replies.ask_back_stream(turn)
            if ask_back is not None:
                return self.replies.new(turn, stream=ask_back, held=True, hypothesis=text, messages=messages)
        call = self.replies.route(text)
        if call is None:
            return None
        return self.replies.new(self._current_turn(), held=True, hypothesis=text, messages=messages, tool_call=call)

    # -- memory: compaction while the assistant is idle ---------------------------------------------------

    def _idle(self) -> bool:
        """No user turn open, the user not speaking, no reply and nothing held: the chat is at rest."""
        return (not self._closed and self._turn is None and self.turns.user is UserState.LISTENING
                and self.replies.agent_silent and self.head_start.held is None)

    def _reply_done(self) -> None:
        """A reply's audio has all left: once the client has played it out and the assistant is idle,
        compact the history if it is due (`LLMConfig.memory`)."""
        if self._summariser is not None and (self._compaction_wait is None or self._compaction_wait.done()):
            self._compaction_wait = asyncio.create_task(self._compact_when_idle(), name="session-compaction-wait")

    async def _compact_when_idle(self) -> None:
        """Start the compaction once the assistant is idle. The audio leaves ahead of its playback, so the
        reply is still playing when it has all left (the client's last playback report, or the real-time
        estimate, ends it): wait for that on the session's clock, polling, for at most
        COMPACTION_IDLE_WAIT_S; give up once the user speaks (their turn's reply tries again), a
        compaction runs, none is due, or the session closes."""
        waited_s = 0.0
        while not self._closed and self._compaction is None and waited_s <= COMPACTION_IDLE_WAIT_S:
            if self._turn is not None or self.turns.user is not UserState.LISTENING:
                return
            if self._idle():
                self._start_compaction()
                return
            await self._clock.sleep(COMPACTION_POLL_S)
            waited_s += COMPACTION_POLL_S

    def _start_compaction(self) -> None:
        if self._summariser is None or self._compaction is not None or not self._idle():
            return
        due = self.conversation.compaction()
        if due is not None:
            self._compaction_cancel = cancel = threading.Event()
            self._compaction = asyncio.create_task(self._compact(*due, cancel), name="session-compaction")

    async def _compact(self, plan, messages: list[dict[str, str]] | None, cancel: threading.Event) -> None:
        """Run the summariser (not for turns with nothing to note: `messages` None); its notes are
        frozen only if nothing started meanwhile (else dropped: the turn in progress was opened on the
        chat as it is, and stays exact on it)."""
        assert self._summariser is not None
        # another session's confirmed reply needs the llm thread: background work gives way
        unsubscribe = self._priority.subscribe(self, cancel.set)
        try:
            notes = "" if messages is None else await self._summariser(messages, plan.max_tokens, cancel.is_set)
        except Exception as exc:  # noqa: BLE001 - reported; the session goes on with the history as it is
            notes = None
            self._out.put_nowait(StageError("llm_failed", f"the history's compaction failed: {type(exc).__name__}: {exc}"))
        finally:
            unsubscribe()
            self._compaction = None
        if notes is None or cancel.is_set() or not self._idle() or not self.conversation.compact(plan, notes):
            self.compactions_dropped += 1
            return
        self.compactions += 1
        # idle: an open LiveTurn is only the prewarm, opened on the chat before the notes
        self.head_start.close_live()
        if self._head_start_possible():
            self.head_start.prewarm()  # the one re-prefill, while the assistant is idle

    def _cancel_compaction(self) -> None:
        if self._compaction_cancel is not None:
            self._compaction_cancel.set()

    # -- tools and timers -------------------------------------------------------------------------------

    def _on_tool_ran(self) -> None:
        """A tool ran: it may have started or cancelled a timer."""
        if self.timers is not None and not self._closed:
            self.timers.schedule()

    def _can_announce(self) -> bool:
        return not self._closed and self.replies.agent_silent and self.turns.user is UserState.LISTENING

    def _announce(self, text: str) -> None:
        self.replies.announce(text, TurnTimeline())

    def _close_timers(self) -> None:
        if self.timers is not None:
            self.timers.close()

    def _new_held_reply(self, stream, text: str, messages: list[dict[str, str]]) -> Reply:
        return self.replies.new(self._current_turn(), stream=stream, held=True, hypothesis=text, messages=messages)

    def _start_reply(self, turn: TurnTimeline) -> None:
        """The end of turn confirmed a reply: the held one if the head start releases it (a hit), else a
        new one, on the turn's LiveTurn when it was opened on the chat as it is now."""
        self.conversation.continue_turn(turn)
        self.replies.interrupt_running("new_turn")
        held = self.head_start.end_of_turn(turn)  # the released reply (a hit), or None
        self.eou.record(turn)
        if held is not None:
            self.replies.release(held, turn)
        else:
            self.replies.start(turn, self.head_start.take_live())

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
        self.replies.apply(self.turns.poll())

    @property
    def compacting(self) -> bool:
        """A compaction of the history is running (it runs only while the assistant is idle)."""
        return self._compaction is not None

    @property
    def history(self) -> list[dict[str, str]]:
        """The conversation so far (user and assistant messages; `Conversation.history`)."""
        return self.conversation.history

    @history.setter
    def history(self, messages: list[dict[str, str]]) -> None:
        self.conversation.history = messages
