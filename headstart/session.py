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

Turn-taking (headstart/turntaking.py, a plain synchronous state machine on an injected clock): user
listening / speaking, agent listening / thinking / speaking; barge-in pauses the reply at VAD speed,
words interrupt it (the LLM stops, queued and in-flight audio is dropped, the client flushes, the
history keeps only the heard text, by playback position), no words resume it. Echo (headstart/echo.py):
the session's own voice coming back through a speaker starts no turn and no barge-in. The KV cache
follows the history: the next prompt renders the heard text and the engine's prefill keeps only the
longest common prefix of its cache and that prompt.

The session routes; three handles per session do the work (docs/server.md "Who does what"): each
`Reply` (headstart/reply.py) owns its LLM → TTS → paced-audio pipeline; the `HeadStart`
(headstart/head_start.py) prefills the user's turn while they speak and may start a *held* reply that
the end of turn releases (a hit) or drops (`TurnCompleted.timeline.extra["preemptive"]`); the
`EOUService` (headstart/eou_service.py) estimates whether the user's text reads complete, for the
listener's endpointer and the head start. Sessions share the llm thread through
`Components.llm_priority` (confirmed replies first); the chat is the session's `Conversation`
(headstart/conversation.py: history, continuations).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass

from headstart.audio import AudioFrame
from headstart.clock import Clock, MonotonicClock
from headstart.components import Components
from headstart.conversation import Conversation
from headstart.echo import EchoDetector, EchoGuard, echo_text, normalized_xcorr_peak
from headstart.eou_service import EOUService, fuses_reply_prefill
from headstart.events import (
    EndOfTurn,
    FinalTranscript,
    PartialTranscript,
    SpeechEnded,
    SpeechStarted,
)
from headstart.head_start import HeadStart
from headstart.reply import (
    Reply,
    ReplyAudio,
    ReplyAudioStart,
    ReplyInterrupted,
    ReplyPaused,
    ReplyResumed,
    ReplyStarted,
    StageError,
    TurnCompleted,
    heard_text,
)
from headstart.timeline import AudioClockMap, TurnTimeline
from headstart.turntaking import (
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
    is_echo_text,
)

__all__ = [
    "FILLER_WORDS", "Action", "AgentState", "Components", "EchoDetector", "Interrupt", "Pause", "Reply",
    "ReplyAudio", "ReplyAudioStart", "ReplyInterrupted", "ReplyPaused", "ReplyResumed", "ReplyStarted",
    "Resume", "Session", "StartReply", "TurnCompleted", "TurnTaking", "UserState", "content_words",
    "heard_text", "is_echo_text", "normalized_xcorr_peak",
]


# -- the session --------------------------------------------------------------------------------------

_END = object()
_FROM_CONFIG = object()  # Session(eou_scorer=...) default: the model SessionConfig.eou names
_reply_ids = itertools.count(1)


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
        listener: `(eou_scorer, acoustic_scorer) -> listener` makes the session's listener (called again
            for a fresh one after `clear_input`); it has voice/listener.py `Listener`'s `push`,
            `end_input`, `commit`, async iteration of its events, `bargein_armed` and `silence_pending`.
            Default: a `Listener` on the components' VAD, ASR and an endpointer on the EOU plan.
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
        listener=None,
    ) -> None:
        self._components = components
        self._config = components.config
        self._clock: Clock = clock or MonotonicClock()
        self._lead_s = playback_lead_s
        self._frame_s = audio_frame_s
        self._echo = EchoGuard(EchoDetector() if echo is True else (echo or None))
        self.turns = TurnTaking(self._clock, realtime_playback=realtime_playback)
        plan = components.eou_plan() if eou_scorer is _FROM_CONFIG else None
        self._endpoint_config = plan.endpoint if plan is not None else self._config.endpoint
        self.head_start = HeadStart(
            self._clock, self._config.session, self._endpoint_config, open_turn=self._open_live_turn,
            messages=self._messages, new_held=self._new_held_reply, possible=self._head_start_possible,
            priority=components.llm_priority, owner=self)
        self.eou = EOUService(
            plan, components.llm, components.llm_executor, components.llm_priority, messages=self._messages,
            can_compute=self._eou_can_compute, scorer=None if eou_scorer is _FROM_CONFIG else eou_scorer,
            on_failure=self._eou_failed, applies=self._config.endpoint.semantic or self.head_start.policy.preemptive,
            fuse_reply_prefill=bool(self.head_start.enabled and plan is not None and plan.model is not None
                                    and fuses_reply_prefill(plan.model, components.llm)),
            acoustic=components.acoustic_eou, acoustic_executor=components.acoustic_executor)
        self.eou.subscribe(self._on_eou)
        self._make_listener = listener
        self._listener = self._new_listener()
        self._out: asyncio.Queue[object] = asyncio.Queue()
        self.conversation = Conversation(self._config.llm.system_prompt, self._new_history_window)
        self.audio_clock = AudioClockMap()
        self._audio_s = 0.0
        self._turn: TurnTimeline | None = None
        self._reply: Reply | None = None
        self._listen_task: asyncio.Task[None] | None = None
        self._listen_tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.Task[None] | None = None
        self._closed = False
        self._speech_started_at: float | None = None  # the current utterance's first speech start

    def _new_listener(self):
        eou = self.eou
        scorers = (eou.score if eou.enabled else None, eou.score_acoustic if eou.acoustic_enabled else None)
        if self._make_listener is not None:
            return self._make_listener(*scorers)
        from headstart.voice.endpoint import Endpointer
        from headstart.voice.listener import Listener
        from headstart.voice.vad import create_vad

        c = self._components
        return Listener(create_vad(self._config.vad), c.asr, Endpointer(self._endpoint_config),
                        self._config.asr, c.asr_executor, eou_scorer=scorers[0], acoustic_scorer=scorers[1])

    def _eou_can_compute(self) -> bool:
        """EOU estimates run only while the user is silent (the listener asks on every partial; mid-speech
        estimates would cost LLM time that ASR needs, and the VAD's speech end asks again) unless the
        VAD already hears silence (a partial then is likely the whole turn: its estimate, and the reply
        prompt prefilled with it, are ready when the speech end is confirmed), and while no reply is in
        progress (the llm thread is the reply's)."""
        silence = self._listener.silence_pending
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
        self._ensure_listening()
        if self.head_start.idle:
            self.head_start.prewarm()
        self._listener.bargein_armed = self.turns.bargein_armed  # the VAD's quicker start over the reply
        await self._listener.push(frame)
        tt = self.turns  # the playback position this audio was heard at: echo after an underrun
        self._echo.heard(frame, tt.played_s() if tt.agent is AgentState.SPEAKING else None)
        self._audio_s += frame.duration_s
        self.audio_clock.record(self._audio_s, self._clock.now())

    async def commit(self) -> None:
        """The user ends the turn now (push-to-talk released): the speech so far gets its final
        transcript and end of turn at once, without waiting for the endpointer's silence
        (`Listener.commit`: the same listener goes on, so audio positions keep counting)."""
        if self._closed or self._listen_task is None:
            return
        await self._listener.commit()  # the listener ends the utterance and goes on (audio_s keeps counting)

    async def clear_input(self) -> None:
        """Drop the user audio of the turn in progress (no transcript, no turn)."""
        if self._closed:
            return
        task = self._listen_task
        self._listener, self._listen_task = self._new_listener(), None
        if task is not None:
            await _cancel(task)
        self._turn = None
        self.eou.new_utterance()
        self.head_start.cancel("cleared")
        self._apply(self.turns.cleared())

    async def interrupt(self, reason: str = "client", reply_id: str | None = None) -> bool:
        """Stop the current reply now (as a barge-in does). With `reply_id`, only if that is the reply
        in progress: an older (stale) or unknown id interrupts nothing, so a late stop press never
        cuts the next answer. Returns whether a reply was interrupted (False also when the agent is
        listening)."""
        current = self.turns.reply_id
        if current is None or (reply_id is not None and reply_id != current):
            return False
        reply = self._reply
        self._apply(self.turns.interrupt(reason))
        return reply is not None and reply.cancelled

    def playback_position(self, reply_id: str, position_s: float) -> None:
        """The client has played `position_s` seconds of reply `reply_id`'s audio."""
        self.turns.playback_position(reply_id, position_s)

    async def reset(self) -> None:
        """Forget the conversation: stop any reply, drop the input in progress, clear the history."""
        self._apply(self.turns.interrupt("reset"))
        await self.clear_input()
        self.conversation.clear()

    async def end_input(self) -> None:
        """No more user audio: finish the open turn (and its reply); then the event stream ends."""
        if self._closed:
            return
        self._closed = True
        self._ensure_listening()
        await self._listener.end_input()
        assert self._listen_task is not None
        await self._listen_task
        self.head_start.cancel("cleared")  # a held reply the input never confirmed
        if self._reply is not None and self._reply.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reply.task
        self._out.put_nowait(_END)

    async def aclose(self) -> None:
        """Stop everything at once (the client went away): no more events are produced."""
        self._closed = True
        held = self.head_start.held
        self.head_start.cancel("closed")
        tasks = [t for t in (*self._listen_tasks, self._listen_task, self._timer) if t is not None]
        for reply in (self._reply, held):
            if reply is None:
                continue
            reply.cancel("closed", 0.0)
            if reply.task is not None:
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
        return self._reply is not None and self._reply.running

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
            if isinstance(item, _FromReply):
                if not item.reply.delivers(item.event):
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
        """The reply being played, as its echo may be written (`echo_text`), for telling it from the user."""
        return "" if self._reply is None else echo_text(self._reply.text)

    def _sure_echo(self) -> bool:
        return self._echo.sure_echo(self.turns.awaits_echo_verdict, self.turns.played_s)

    def _on_listener_event(self, event: object) -> None:
        now = self._clock.now()
        tt = self.turns
        if isinstance(event, SpeechStarted):
            speaking = tt.agent is AgentState.SPEAKING  # else the tail of a reply that just finished
            echo = self._echo.speech_is_echo(tt.played_s() if speaking else None, tt.just_spoke)
            actions = tt.speech_started(echo=echo)
            if tt.utterance == "echo":
                return  # the session's own voice: no user turn
            if self._turn is None:
                self._turn = TurnTimeline()
                self._speech_started_at = now
            self.eou.new_utterance()  # estimates of the text so far are stale once speech resumes
            self.head_start.speech_started()  # resumed speech drops held work
            self._out.put_nowait(event)
            self._apply(actions)
            return
        elif isinstance(event, PartialTranscript):
            was_echo = tt.utterance == "echo"
            self._apply(tt.words(event.text, self._reply_text(), echo=self._sure_echo()))
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
            if tt.utterance == "user":
                # the EOU estimate goes to the llm thread first: a held reply started now generates in
                # one job, and the endpointer waits for the estimate
                self.eou.speech_ended(self.head_start.latest_text)
                self.head_start.speech_ended()
        elif isinstance(event, FinalTranscript):
            was_echo = tt.utterance == "echo"
            self._apply(tt.final(event.text, self._reply_text(), echo=self._sure_echo()))
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
            if not event.text.strip():
                self._turn = None  # no words: the listener ends this utterance without a turn
                self.conversation.no_continuation()
                self.head_start.cancel("no_words")
            elif tt.utterance == "user":
                self._out.put_nowait(event)
                self.eou.final(event.text)  # on the llm thread before a held reply on this final
                self.head_start.final(event.text)
                return
        elif isinstance(event, EndOfTurn):
            turn = self._current_turn()
            turn.end_of_turn_at_s = now
            turn.extra["eou_probability"] = event.eou_probability
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
                    self._apply([action])
            return
        self._out.put_nowait(event)

    def _on_partial(self, event: PartialTranscript) -> None:
        """A partial of the user's turn: incremental prefill of its prompt (LiveTurn.update), and the
        head start's verdict on any held reply (a different text drops it)."""
        if self.turns.utterance != "user":
            return  # a possible barge-in or echo: not (yet) a turn of its own
        self.head_start.partial(event.text)

    # -- the head start --------------------------------------------------------------------------------

    def _head_start_possible(self) -> bool:
        """Speculative work only while the agent is silent and no reply is in progress: the chat the
        user's turn follows is then final (a barge-in still rewrites the last assistant message)."""
        reply = self._reply
        return (
            self.head_start.enabled and not self._closed
            and self.turns.agent is AgentState.LISTENING
            and (reply is None or not reply.running)
        )

    def _open_live_turn(self, messages: list[dict[str, str]]):
        """The user turn's LiveTurn (incremental prefill) on this session's LLM, opened on `messages`."""
        c = self._components
        return c.llm.live_turn(messages, self._config.llm, c.llm_executor, clock=self._clock,
                               decoder=self._decoder())

    def _decoder(self):
        """The process's speculative decoder (`Components.decoder`) when this session's config asks for
        speculative decoding, else None (plain)."""
        if self._config.llm.speculative == "none":
            return None
        return self._components.decoder

    def _new_held_reply(self, stream, text: str, messages: list[dict[str, str]]) -> Reply:
        return self._new_reply(self._current_turn(), stream=stream, held=True, hypothesis=text, messages=messages)

    def _release(self, reply: Reply, turn: TurnTimeline) -> None:
        """End of turn on the held reply's own text: what it holds leaves now, in order."""
        self._reply = reply
        self._echo.reset_played()
        # the history keeps the text the reply (and the KV cache) was conditioned on
        self.conversation.add_user(reply.hypothesis)
        self.turns.reply_started(reply.id)
        reply.release(turn)  # ReplyStarted, then what it holds

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
                reply.pause()
            elif isinstance(action, Resume):
                reply.resume()
            elif isinstance(action, Interrupt):
                self._interrupt_reply(reply, action.played_s, action.reason)

    def _interrupt_reply(self, reply: Reply, played_s: float, reason: str) -> None:
        if reply.cancelled:
            return
        heard = reply.cancel(reason, played_s)
        self.conversation.interrupted(reply.history_index, heard)
        turn = reply.turn
        self.conversation.cut_off(turn.end_of_turn_at_s, self._speech_started_at, played_s, reason)
        turn.extra.update(interrupted=True, interrupt_reason=reason, played_s=round(played_s, 3), heard_text=heard)
        if not reply.finished:
            turn.reply = heard
            turn.reply_done_at_s = self._clock.now()
        self._out.put_nowait(ReplyInterrupted(reply.id, heard, played_s, reason))
        if not reply.finished:
            self._out.put_nowait(TurnCompleted(turn, reply.id, interrupted=True))
        if self._reply is reply:
            self._reply = None
        self._echo.reset_played()

    # -- the reply -----------------------------------------------------------------------------------

    def _start_reply(self, turn: TurnTimeline) -> None:
        self.conversation.continue_turn(turn)
        old = self._reply
        if old is not None and old.running and not old.cancelled:
            self._interrupt_reply(old, self.turns.played_s(), "new_turn")
        held = self.head_start.end_of_turn(turn)  # the released reply (a hit), or None
        self.eou.record(turn)
        if held is not None:
            self._release(held, turn)
            return
        live = self.head_start.take_live()
        reply = self._new_reply(turn)
        self._reply = reply
        # confirmed: EOU jobs queued before it give way, held replies of other sessions still generating
        # drop (Components.llm_priority); a reply cancelled before it ever ran no longer counts
        self._components.llm_priority.confirm(self, reply, lambda: reply.task is None or not reply.task.done())
        self._echo.reset_played()
        if live is not None:
            reply.stream = live.reply(turn.transcript)  # the prompt is mostly prefilled already
        self.conversation.add_user(turn.transcript)
        self.turns.reply_started(reply.id)
        reply.start()  # ReplyStarted

    def _new_reply(self, turn: TurnTimeline, *, stream=None, held: bool = False, hypothesis: str = "",
                   messages: list[dict[str, str]] | None = None) -> Reply:
        """A reply on this session's pipeline, not started: its events go to the consumer, its audio
        is paced by the client's playback and feeds the turn-taking and the echo detector, and its end
        goes to the history. `stream`: its LLM stream when already open (a LiveTurn's reply), else it
        opens one on the chat as it is when it starts running."""
        from headstart.tts.chunker import ClauseChunker
        from headstart.tts.stream import TTSStream

        c, tt, config = self._components, self.turns, self._config
        priority = c.llm_priority  # the reply stops waiting for the llm thread once its LLM starts
        reply_id = f"r{next(_reply_ids)}"
        echo = self._echo.reply_sink()

        def open_tts() -> TTSStream:
            return TTSStream(c.tts, ClauseChunker(config.tts), c.tts_executor, clock=self._clock,
                             frame_s=self._frame_s, output_rate_hz=config.tts.output_rate_hz)

        def ahead_s() -> float | None:
            return tt.sent_s - tt.played_s() if tt.reply_id == reply_id else None

        def on_audio(frame: AudioFrame) -> None:
            if tt.reply_id == reply_id:
                tt.audio_sent(frame.duration_s)
            echo(frame)

        reply = Reply(reply_id, turn, self._send_reply_event, self._clock, open_tts, stream=stream,
                      open_stream=self._open_reply_stream, held=held, playback_lead_s=self._lead_s,
                      ahead_s=ahead_s, on_audio=on_audio, on_llm_started=lambda: priority.started(reply),
                      on_finished=self._reply_finished, on_failed=self._reply_failed,
                      hypothesis=hypothesis, messages=messages)
        return reply

    def _open_reply_stream(self):
        c = self._components
        return c.llm.reply_stream(self._messages(), self._config.llm, c.llm_executor, clock=self._clock,
                                  decoder=self._decoder())

    def _send_reply_event(self, reply: Reply, event: object) -> None:
        self._out.put_nowait(_FromReply(reply, event))

    def _reply_finished(self, reply: Reply) -> None:
        """All of a reply's audio has left: the history keeps it, the turn is complete."""
        if self.turns.reply_id == reply.id:
            self.turns.audio_done()
        reply.history_index = self.conversation.add_assistant(reply.turn.reply)
        self._out.put_nowait(TurnCompleted(reply.turn, reply.id))

    def _reply_failed(self, reply: Reply, exc: Exception) -> None:
        """A stage failed: a held reply is dropped silently (the end of turn regenerates); else the
        consumer sees the error at once and the session goes on."""
        if reply.held:
            self.head_start.held_failed(reply)
            return
        if self._reply is reply:
            self._reply = None
            if self.turns.reply_id == reply.id:
                self.turns.audio_done()
        self._out.put_nowait(exc)

    @property
    def history(self) -> list[dict[str, str]]:
        """The conversation so far (user and assistant messages; `Conversation.history`)."""
        return self.conversation.history

    @history.setter
    def history(self, messages: list[dict[str, str]]) -> None:
        self.conversation.history = messages

    def _messages(self) -> list[dict[str, str]]:
        return self.conversation.messages()  # bounded (llm/history.py): whole old turns dropped

    def _new_history_window(self):
        """The `TurnWindow` that bounds the history by `LLMConfig.max_history_tokens` (default "auto":
        what fits the LLM's context besides the reply, `history_budget`), or None for "none"."""
        from headstart.llm.history import TurnWindow, history_budget

        llm, config = self._components.llm, self._config.llm
        budget = history_budget(config.max_history_tokens, llm.max_positions, config.max_new_tokens,
                                llm.count_tokens(config.system_prompt))
        return None if budget is None else TurnWindow(budget, llm.count_tokens)


@dataclass(frozen=True, slots=True)
class _FromReply:
    """An event a reply sent: `Reply.delivers` says at the queue's end whether it still leaves."""

    reply: Reply
    event: object


async def _cancel(task: asyncio.Task) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
