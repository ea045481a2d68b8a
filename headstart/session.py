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

The head start (headstart/preemption.py decides, this module executes): while the agent is silent,
every partial of the user's turn feeds `LiveTurn.update` (incremental prefill, headstart/llm/live.py).
When the policy says `Preempt(text)` the turn's reply to `text` starts as a *held* `Reply`: its
tokens and events go to its outbox and its audio pump stops before the first frame, so the first clause
is synthesised but nothing leaves. At the end of turn a `Release` (the final transcript is `text`)
sends the outbox and the audio at once; any other outcome cancels it (LLM, TTS, task) and the reply is
generated from the turn's LiveTurn as usual. Resumed speech, a changed text, no words, clear and
reset drop it too. `TurnCompleted.timeline.extra` carries `preemptive` ("hit"/"miss"/"none") and the
session's counters. Switches: `SessionConfig.head_start` (master), `.incremental_prefill`, `.preemptive`.

The EOU signal (`SessionConfig.eou`, default "auto": `resolve_eou`, `Components.eou_model`) is estimated on the llm
thread on the engine's KV cache (the prompt prefix the incremental prefill holds is reused), only while
the user is silent: at the VAD's end of speech for the latest partial, and when the listener asks (a
partial or final that lands in the silence). Each text is estimated once per utterance. The probability
goes to the listener's endpointer (less silence needed when the text reads complete) and to the head
start (a held reply starts on it). LLM priority on the one llm thread: a confirmed reply first; an EOU
job that finds one waiting, or whose utterance moved on (speech resumed, turn ended), computes nothing;
a confirmed reply drops the other sessions' held replies that are still generating.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass

from headstart.audio import SAMPLE_RATE_HZ, AudioFrame, resample, to_mono_float32
from headstart.clock import Clock, MonotonicClock
from headstart.components import Components
from headstart.echo import EchoDetector, normalized_xcorr_peak
from headstart.events import (
    EndOfTurn,
    FinalTranscript,
    PartialTranscript,
    ReplyDone,
    SpeechEnded,
    SpeechStarted,
    TokenDelta,
)
from headstart.preemption import CancelHeld, Decision, PreemptionPolicy, Preempt, Release, same_text
from headstart.reply import (
    Reply,
    ReplyAudio,
    ReplyAudioStart,
    ReplyInterrupted,
    ReplyPaused,
    ReplyResumed,
    ReplyStarted,
    TurnCompleted,
    heard_text,
)
from headstart.timeline import AudioClockMap, TurnTimeline
from headstart.voice.turn_fusion import ending
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
# Continuations (the listening issue): speech that starts within CONTINUATION_GAP_S of a turn's end and
# cuts that turn's reply off with at most CONTINUATION_MAX_HEARD_S of it played continues the same user
# message when that message did not end a sentence (the recogniser wrote a trailing-off mark or no
# sentence end: the turn had ended inside a pause): the texts are joined, the reply is generated on the
# whole and the history holds one user turn. After a finished sentence it is a new turn (a barge-in).
CONTINUATION_GAP_S = 2.0
CONTINUATION_MAX_HEARD_S = 1.0


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
            only while the user is silent, and giving way to confirmed replies (see `_llm_eou`).
            None: no EOU signal. The listener's endpointer adapts its silence to it and the head start
            preempts on it; without one the head start uses the punctuation rule
            (`PreemptionPolicy.reads_complete`).
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
    ) -> None:
        self._components = components
        self._config = components.config
        self._clock: Clock = clock or MonotonicClock()
        self._lead_s = playback_lead_s
        self._frame_s = audio_frame_s
        self._echo = EchoDetector() if echo is True else (echo or None)
        self.turns = TurnTaking(self._clock, realtime_playback=realtime_playback)
        self._eou_model, self._endpoint_config = None, self._config.endpoint
        if eou_scorer is _FROM_CONFIG:
            self._eou_model, self._endpoint_config = resolve_eou(components, self._config)
            eou_scorer = self._llm_eou if self._eou_model is not None else None
        self._eou_scorer = eou_scorer
        self._eou_cache: dict[str, asyncio.Future] = {}  # this utterance's EOU estimates by text
        self._eou_epoch = 0  # bumped at speech start and end of turn: queued estimates go stale
        self.eou_stats = {"computed": 0, "skipped": 0, "compute_s": 0.0}
        self._llm_failure_epoch = -1  # the EOU epoch an LLM failure was last reported in
        self.head_start = PreemptionPolicy(self._clock, self._config.session, self._endpoint_config)
        self._live = None  # LiveTurn: incremental prefill of the user turn in progress
        self._live_messages: list[dict[str, str]] | None = None  # the chat it was opened on
        self._held: Reply | None = None  # the preemptive reply, generated and held
        self._held_unsubscribe = lambda: None  # its subscription to Components.llm_priority
        self._listener = self._new_listener()
        self._out: asyncio.Queue[object] = asyncio.Queue()
        self.history: list[dict[str, str]] = []
        self.audio_clock = AudioClockMap()
        self._audio_s = 0.0
        self._turn: TurnTimeline | None = None
        self._reply: Reply | None = None
        self._dead: set[str] = set()  # interrupted replies: their queued tokens/audio are dropped
        self._listen_task: asyncio.Task[None] | None = None
        self._listen_tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.Task[None] | None = None
        self._closed = False
        self._speech_started_at: float | None = None  # the current utterance's first speech start
        self._continuation: int | None = None  # history index of the user message the next turn continues
        self._history_window: object = _FROM_CONFIG  # llm/history.TurnWindow, None (unbounded) once made

    def _new_listener(self):
        from headstart.voice.endpoint import Endpointer
        from headstart.voice.listener import Listener
        from headstart.voice.vad import create_vad

        c = self._components
        acoustic = getattr(c, "acoustic_eou", None)  # Components.load made it when the config names one
        return Listener(create_vad(self._config.vad), c.asr, Endpointer(self._endpoint_config),
                        self._config.asr, c.asr_executor,
                        eou_scorer=self._score_eou if self._eou_scorer is not None else None,
                        acoustic_scorer=self._score_acoustic if acoustic is not None else None)

    async def _score_acoustic(self, samples):
        """The acoustic end-of-turn model (`Components.acoustic_eou`) on its own thread."""
        c = self._components
        return await asyncio.get_running_loop().run_in_executor(
            c.acoustic_executor, c.acoustic_eou.completion_probability, samples
        )

    async def _score_eou(self, text: str) -> float | None:
        """The EOU seam: the scorer's probability goes to the endpointer (returned) and the head start.
        A failing scorer (the LLM) is reported as `llm_failed` and counts as no estimate: the listener
        goes on (it died with it, and every audio frame then got "the listener's ASR failed")."""
        try:
            probability = await self._eou_scorer(text)
        except Exception as exc:  # noqa: BLE001 - reported once per utterance; the endpointer waits its silence
            if self._llm_failure_epoch != self._eou_epoch:
                self._llm_failure_epoch = self._eou_epoch
                self._out.put_nowait(StageError("llm_failed", f"the end-of-turn estimate failed: "
                                                f"{type(exc).__name__}: {exc}"))
            return None
        if self.turns.utterance == "user":
            self._head(self.head_start.eou(text, probability))
        return probability

    async def _llm_eou(self, text: str) -> float | None:
        """The default scorer: `self._eou_model` on the llm thread. None (unknown, the endpointer then
        waits its plain `silence_s`) while the user is speaking (the listener asks on every partial;
        mid-speech estimates would cost LLM time that ASR needs, and the VAD's speech end asks again)
        unless the VAD already hears silence (a partial then is likely the whole turn: its estimate,
        and the reply prompt prefilled with it, are ready when the speech end is confirmed), while a
        reply is in progress (the llm thread is the reply's), and for a job that went stale or found a
        confirmed reply waiting when the llm thread got to it."""
        speaking = self.turns.user is UserState.SPEAKING and not self._listener_silence_pending()
        if speaking or self.reply_active or not text.strip():
            self.eou_stats["skipped"] += 1
            return None
        return await asyncio.shield(self._eou_future(text))

    def _listener_silence_pending(self) -> bool:
        return bool(getattr(self._listener, "silence_pending", False))

    def _eou_future(self, text: str) -> asyncio.Future:
        """The EOU estimate of `text` in this utterance: submitted to the llm thread now (so it runs
        before speculative work submitted after it), shared by everyone who asks for the same text."""
        key = " ".join(text.split())
        future = self._eou_cache.get(key)
        if future is not None:
            return future
        model, c = self._eou_model, self._components
        messages, epoch = self._messages(), self._eou_epoch
        # a reply to this text may follow at once: the estimate's forward prefills its prompt too
        fuse = self.head_start.enabled and _fuses_reply_prefill(model, c.llm)

        def job() -> float | None:
            if epoch != self._eou_epoch or c.llm_priority.confirmed_pending:
                self.eou_stats["skipped"] += 1
                return None  # stale, or confirmed work waits behind this job: give way
            started = time.perf_counter()
            if fuse:
                reply_ids = c.llm.render_prompt([*messages, {"role": "user", "content": text}])
                probability = float(model.probability(messages, text, reply_ids))
            else:
                probability = float(model.probability(messages, text))
            self.eou_stats["computed"] += 1
            self.eou_stats["compute_s"] += time.perf_counter() - started
            return probability

        future = asyncio.get_running_loop().run_in_executor(c.llm_executor, job)
        self._eou_cache[key] = future
        return future

    def _eou_at_speech_end(self) -> None:
        """The user went silent: estimate the latest partial now, for the head start (which may preempt
        on it; the endpointer waits for the final transcript's own score, which is this one when the
        texts agree: the estimates are shared by text)."""
        text = self.head_start.latest_text
        if self._eou_model is None or self._eou_scorer != self._llm_eou or not text.strip():
            return
        if not self._eou_applies():
            return
        future = self._eou_future(text)
        listener, epoch = self._listener, self._eou_epoch

        def done(f: asyncio.Future) -> None:
            if f.cancelled() or f.exception() is not None or epoch != self._eou_epoch:
                return
            probability = f.result()
            if listener is not self._listener or self.turns.utterance != "user":
                return
            if not same_text(text, self.head_start.latest_text):
                return  # a newer text (a later partial or the final) is being scored by the listener
            # for the head start only: this partial was heard before the speech ended, so the
            # endpointer waits for the final's own score (a stale score could end a turn mid-sentence)
            self._head(self.head_start.eou(text, probability))

        future.add_done_callback(done)

    def _eou_applies(self) -> bool:
        return self._config.endpoint.semantic or self.head_start.preemptive

    def _new_eou_epoch(self) -> None:
        self._eou_epoch += 1
        self._eou_cache.clear()

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
        if self._live is None and self._held is None:
            self._prewarm()
        self._listener.bargein_armed = self.turns.bargein_armed  # the VAD's quicker start over the reply
        await self._listener.push(frame)
        if self._echo is not None:
            mono = to_mono_float32(frame.samples)
            if frame.sample_rate != SAMPLE_RATE_HZ:
                mono = resample(mono, int(frame.sample_rate), SAMPLE_RATE_HZ)
            tt = self.turns  # the playback position this audio was heard at: echo after an underrun
            self._echo.push_mic(mono, tt.played_s() if tt.agent is AgentState.SPEAKING else None)
        self._audio_s += frame.duration_s
        self.audio_clock.record(self._audio_s, self._clock.now())

    async def commit(self) -> None:
        """The user ends the turn now (push-to-talk released): the speech so far gets its final
        transcript and end of turn at once, without waiting for the endpointer's silence
        (`Listener.commit`: the same listener goes on, so audio positions keep counting)."""
        if self._closed or self._listen_task is None:
            return
        commit = getattr(self._listener, "commit", None)
        if commit is not None:  # the listener ends the utterance and goes on (audio_s keeps counting)
            await commit()
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
        self._new_eou_epoch()
        self._head(self.head_start.cancel("cleared"))
        self._close_live()
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
        return reply is not None and reply.interrupted

    def playback_position(self, reply_id: str, position_s: float) -> None:
        """The client has played `position_s` seconds of reply `reply_id`'s audio."""
        self.turns.playback_position(reply_id, position_s)

    async def reset(self) -> None:
        """Forget the conversation: stop any reply, drop the input in progress, clear the history."""
        self._apply(self.turns.interrupt("reset"))
        await self.clear_input()
        self.history.clear()  # the engine's next prefill keeps only the system prompt's prefix
        self._continuation = None

    async def end_input(self) -> None:
        """No more user audio: finish the open turn (and its reply); then the event stream ends."""
        if self._closed:
            return
        self._closed = True
        self._ensure_listening()
        await self._listener.end_input()
        assert self._listen_task is not None
        await self._listen_task
        self._head(self.head_start.cancel("cleared"))  # a held reply the input never confirmed
        self._close_live()
        if self._reply is not None and self._reply.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reply.task
        self._out.put_nowait(_END)

    async def aclose(self) -> None:
        """Stop everything at once (the client went away): no more events are produced."""
        self._closed = True
        self._close_live()
        tasks = [t for t in (*self._listen_tasks, self._listen_task, self._timer) if t is not None]
        for reply in (self._reply, self._held):
            if reply is None:
                continue
            self._dead.add(reply.id)
            _cancel_streams(reply)
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
        """The reply being played, for telling its echo from the user: its text and its spoken form
        (the voice says "ten" for "10", tts/normalize.py, and the ASR writes what it hears)."""
        if self._reply is None:
            return ""
        from headstart.tts.normalize import normalize_text

        text = "".join(self._reply.text)
        spoken = normalize_text(text)
        return f"{text} {spoken}" if spoken and spoken != text else text

    def _sure_echo(self) -> bool:
        """Whether the mic still holds the playing reply's echo alone (for an utterance already
        judged echo or a barge-in: its words then do not count)."""
        tt = self.turns
        return self._echo is not None and tt.awaits_echo_verdict and self._echo.is_sure_echo(tt.played_s())

    def _on_listener_event(self, event: object) -> None:
        now = self._clock.now()
        tt = self.turns
        if isinstance(event, SpeechStarted):
            echo = False
            if self._echo is not None and tt.agent is AgentState.SPEAKING:
                echo = self._echo.is_echo(tt.played_s())
            elif self._echo is not None and tt.just_spoke:
                echo = self._echo.is_echo(None)  # the tail of the reply that just finished
            actions = tt.speech_started(echo=echo)
            if tt.utterance == "echo":
                return  # the session's own voice: no user turn
            if self._turn is None:
                self._turn = TurnTimeline()
                self._speech_started_at = now
            self._new_eou_epoch()  # estimates of the text so far are stale once speech resumes
            self._head(self.head_start.speech_started())  # resumed speech drops held work
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
                self._eou_at_speech_end()
                self._head(self.head_start.speech_ended())
        elif isinstance(event, FinalTranscript):
            was_echo = tt.utterance == "echo"
            self._apply(tt.final(event.text, self._reply_text(), echo=self._sure_echo()))
            if tt.utterance == "ignored":
                self._turn = None
                self._continuation = None  # the utterance that cut the reply off is no turn
                if was_echo:
                    return
                self._out.put_nowait(event)
                return
            turn = self._current_turn()
            turn.final_transcript_at_s = now
            turn.transcript = event.text
            if not event.text.strip():
                self._turn = None  # no words: the listener ends this utterance without a turn
                self._continuation = None
                self._head(self.head_start.cancel("no_words"))
                self._close_live()
            elif tt.utterance == "user":
                self._out.put_nowait(event)
                if self._eou_model is not None and self._eou_scorer == self._llm_eou and self._eou_applies():
                    self._eou_future(event.text)  # on the llm thread before a held reply on this final
                self._head(self.head_start.final(event.text))
                return
        elif isinstance(event, EndOfTurn):
            turn = self._current_turn()
            turn.end_of_turn_at_s = now
            turn.extra["eou_probability"] = event.eou_probability
            self._turn = None
            self._new_eou_epoch()
            actions = tt.end_of_turn(turn.transcript)
            if not any(isinstance(a, StartReply) for a in actions):
                self._head(self.head_start.cancel("no_words"))  # no reply: nothing held may stay
                self._close_live()
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
        if self.head_start.incremental_prefill:
            live = self._ensure_live()
            if live is not None:
                live.update(event.text)
        self._head(self.head_start.partial(event.text))

    # -- the head start --------------------------------------------------------------------------------

    def _head_start_possible(self) -> bool:
        """Speculative work only while the agent is silent and no reply is in progress: the chat the
        user's turn follows is then final (a barge-in still rewrites the last assistant message)."""
        reply = self._reply
        return (
            self.head_start.enabled and not self._closed
            and self.turns.agent is AgentState.LISTENING
            and (reply is None or reply.task is None or reply.task.done())
            and any(getattr(self._components.llm, name, None) is not None
                    for name in ("render_prompt", "live_turn"))  # live_turn: a remote engine (llm/remote.py)
        )

    def _ensure_live(self):
        """The LiveTurn of the user turn in progress (opened on the current chat), or None."""
        if self._live is None and self._head_start_possible():
            from headstart.llm.live import LiveTurn

            c = self._components
            messages = self._messages()
            # a remote engine (headstart/llm/remote.py) opens its own LiveTurn-shaped turns
            decoder = self._decoder()
            open_turn = getattr(c.llm, "live_turn", None) or (
                lambda *a, **k: LiveTurn(c.llm, *a, decoder=decoder, **k))
            self._live = open_turn(messages, self._config.llm, c.llm_executor, clock=self._clock)
            self._live_messages = messages
        return self._live

    def _decoder(self):
        """The process's speculative decoder (`Components.decoder`) when this session's config asks for
        speculative decoding, else None (plain)."""
        if self._config.llm.speculative == "none":
            return None
        return getattr(self._components, "decoder", None)

    def _prewarm(self) -> None:
        """While the agent is silent and before the user's words come: prefill the chat the next user
        turn follows (system prompt, history, the user's message header) on the llm thread, so the
        partials, the EOU estimate and the reply only prefill the user's words. It is the turn's own
        LiveTurn with no text yet (background work that confirmed replies overtake). Measured on the
        default Qwen 0.5B (fp32, 2 loaded cores): the first partial's prefill of a fresh session took
        3.2 s and held the llm thread past the end of the turn."""
        if self.head_start.incremental_prefill:
            live = self._ensure_live()
            if live is not None:
                live.update("")

    def _take_live(self):
        """The LiveTurn, if it was opened on the chat as it is now; the session's own reference is
        dropped (a LiveTurn gives one reply)."""
        live, messages = self._live, self._live_messages
        self._live, self._live_messages = None, None
        if live is not None and messages != self._messages():
            live.close()
            return None
        return live

    def _close_live(self) -> None:
        live, self._live, self._live_messages = self._live, None, None
        if live is not None:
            with contextlib.suppress(RuntimeError):  # the executors are already shut down
                live.close()

    def _head(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, CancelHeld):
                self._drop_held(decision.reason)
            elif isinstance(decision, Preempt):
                self._start_held(decision.text)

    def _start_held(self, text: str) -> None:
        """Start a reply to `text` that is generated and synthesised but held (nothing leaves)."""
        live = self._ensure_live() if self._head_start_possible() else None
        if live is None:
            self.head_start.withdraw()  # nothing was started: no hit, no miss
            return
        live = self._take_live()
        if live is None:
            self.head_start.withdraw()
            return
        messages = self._messages()
        stream = live.reply(text)
        reply = Reply(id=f"r{next(_reply_ids)}", turn=self._current_turn(), held=True, hypothesis=text,
                      messages=messages)
        reply.resume.set()
        reply.stream = stream
        self._held = reply
        self._held_unsubscribe = self._components.llm_priority.subscribe(self, self._on_confirmed_elsewhere)
        reply.task = asyncio.create_task(self._reply_guarded(reply), name=f"session-held-{reply.id}")

    def _on_confirmed_elsewhere(self) -> None:
        """Another session's confirmed reply waits for the llm thread: drop a held reply still generating."""
        held = self._held
        if held is not None and getattr(getattr(held.stream, "stats", None), "done_at_s", 0) is None:
            self._head(self.head_start.drop("confirmed_elsewhere"))

    def _drop_held(self, reason: str) -> None:
        """Cancel the held reply: its tokens and audio never leave (counted as wasted)."""
        reply, self._held = self._held, None
        self._held_unsubscribe()
        if reply is None:
            return
        reply.interrupted = True
        self._dead.add(reply.id)
        _cancel_streams(reply)
        if reply.task is not None and not reply.task.done():
            reply.task.cancel()
        self.head_start.stats.wasted_tokens += reply.num_generated_tokens
        reply.turn.extra.setdefault("preemptive_drops", []).append(reason)

    def _release(self, reply: Reply, turn: TurnTimeline, lead_s: float) -> None:
        """End of turn on the held reply's own text: what it holds leaves now, in order."""
        now = self._clock.now()
        reply.held = False
        reply.turn = turn
        reply.released_at_s = now
        turn.extra["preemptive_lead_s"] = round(lead_s, 4)
        turn.extra["held_tokens"] = sum(len(e.token_ids) for e in reply.outbox if isinstance(e, TokenDelta))
        turn.extra["held_audio_s"] = round(sum(t.audio_s for t in getattr(reply.tts, "timings", ())), 4)
        self._reply = reply
        if self._echo is not None:
            self._echo.reset_played()
        # the history keeps the text the reply (and the KV cache) was conditioned on
        self.history.append({"role": "user", "content": reply.hypothesis})
        self.turns.reply_started(reply.id)
        self._out.put_nowait(ReplyStarted(reply.id, turn.transcript))
        turn.reply_started_at_s = now
        for event in reply.outbox:
            self._mark(reply, event)
            self._out.put_nowait(_Tagged(reply.id, event))
        reply.outbox.clear()
        reply.released.set()

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

    def _interrupt_reply(self, reply: Reply, played_s: float, reason: str) -> None:
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
        self._continuation = self._continuable(reply, played_s, reason)
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

    def _continuable(self, reply: Reply, played_s: float, reason: str) -> int | None:
        """The history index of the user message an interrupted reply answered, when the speech that
        cut it off continues that message (see CONTINUATION_GAP_S); else None."""
        ended, started = reply.turn.end_of_turn_at_s, self._speech_started_at
        if reason not in ("barge_in", "new_turn") or played_s > CONTINUATION_MAX_HEARD_S:
            return None
        if ended is None or started is None or not -1e-9 <= started - ended <= CONTINUATION_GAP_S:
            return None
        for index in range(len(self.history) - 1, -1, -1):
            if self.history[index]["role"] == "user":
                return None if ending(self.history[index]["content"]) == "terminal" else index
            if self.history[index]["role"] != "assistant":
                return None
        return None

    def _continue_turn(self, turn: TurnTimeline) -> None:
        """A turn that continues the user message its speech cut the reply of: one user message, the
        joined text (a trailing-off mark at the seam dropped); the reply's heard words leave the history."""
        index, self._continuation = self._continuation, None
        if index is None or index >= len(self.history) or self.history[index]["role"] != "user":
            return
        if any(m["role"] != "assistant" for m in self.history[index + 1 :]):
            return
        before = self.history[index]["content"].rstrip()
        before = (before[:-3] if before.endswith("...") else before).rstrip("…-–—, ")
        del self.history[index:]
        turn.extra["continues"] = before
        turn.transcript = f"{before} {turn.transcript.lstrip()}".strip()

    # -- the reply -----------------------------------------------------------------------------------

    def _start_reply(self, turn: TurnTimeline) -> None:
        self._continue_turn(turn)
        old = self._reply
        if old is not None and not old.interrupted and old.task is not None and not old.task.done():
            self._interrupt_reply(old, self.turns.played_s(), "new_turn")
        held = self._held
        release = None
        for decision in self.head_start.end_of_turn(turn.transcript):
            if isinstance(decision, Release):
                release = decision
            else:
                self._head([decision])
        if release is not None and held is not None and held.messages == self._messages():
            self._held = None
            self._held_unsubscribe()
            turn.extra["preemptive"] = self.head_start.take_outcome()
            self._record_head_start(turn)
            self._release(held, turn, release.lead_s)
            return
        if release is not None:  # the chat changed under it (cannot happen while the agent is silent)
            self.head_start.stats.hits -= 1
            self.head_start.stats.misses += 1
            self.head_start.outcome = "miss"
            self._drop_held("history_changed")
        turn.extra["preemptive"] = self.head_start.take_outcome()
        self._record_head_start(turn)
        live = self._take_live()
        reply = Reply(id=f"r{next(_reply_ids)}", turn=turn)
        reply.resume.set()
        reply.released.set()
        self._reply = reply
        self._confirmed_llm_pending(reply)
        if self._echo is not None:
            self._echo.reset_played()
        if live is not None:
            reply.stream = live.reply(turn.transcript)  # the prompt is mostly prefilled already
        self.history.append({"role": "user", "content": turn.transcript})
        self.turns.reply_started(reply.id)
        self._out.put_nowait(ReplyStarted(reply.id, turn.transcript))
        turn.reply_started_at_s = self._clock.now()
        reply.task = asyncio.create_task(self._reply_guarded(reply), name=f"session-reply-{reply.id}")

    def _confirmed_llm_pending(self, reply: Reply) -> None:
        """Priority on the shared llm thread: a confirmed reply is waiting for it. EOU jobs queued
        before it give way (`_eou_future`), and other sessions drop a held reply still generating (it
        is regenerated at their end of turn if needed: a miss, never a stale reply)."""
        reply.llm_pending = True
        # a reply cancelled before it ever ran no longer counts
        self._components.llm_priority.confirm(self, reply, lambda: reply.task is None or not reply.task.done())

    def _llm_started(self, reply: Reply) -> None:
        if reply.llm_pending:
            reply.llm_pending = False
            self._components.llm_priority.started(reply)

    def _record_head_start(self, turn: TurnTimeline) -> None:
        stats = self.head_start.stats
        turn.extra.update(head_start=self.head_start.enabled, preemptive_hits=stats.hits,
                          preemptive_misses=stats.misses, preemptive_wasted_tokens=stats.wasted_tokens,
                          eou_computed=self.eou_stats["computed"], eou_skipped=self.eou_stats["skipped"],
                          eou_compute_s=round(self.eou_stats["compute_s"], 4))

    async def _reply_guarded(self, reply: Reply) -> None:
        try:
            await self._run_reply(reply)
        except asyncio.CancelledError:
            self._llm_started(reply)
            _cancel_streams(reply)
            raise
        except Exception as exc:  # noqa: BLE001 - the consumer sees the error at once; the session goes on
            self._llm_started(reply)
            _cancel_streams(reply)
            if reply.held:  # speculative work failed: drop it silently, the end of turn regenerates
                if self._held is reply:
                    self.head_start.drop("failed")
                    self._drop_held("failed")
                return
            if self._reply is reply:
                self._reply = None
                if self.turns.reply_id == reply.id:
                    self.turns.audio_done()
            self._out.put_nowait(exc)

    def _messages(self) -> list[dict[str, str]]:
        system = {"role": "system", "content": self._config.llm.system_prompt}
        # bounded history (llm/history.py): whole old turns dropped between turns
        if self._history_window is _FROM_CONFIG:  # made on first use: it counts with the LLM's tokenizer
            self._history_window = self._new_history_window()
        if self._history_window is not None:
            return self._history_window.select([system, *self.history])
        return [system, *self.history]

    def _new_history_window(self):
        """The `TurnWindow` that bounds the history by `LLMConfig.max_history_tokens` (default "auto":
        what fits the LLM's context besides the reply, `history_budget`), or None for "none"."""
        from headstart.llm.history import TurnWindow, approx_token_count, history_budget

        llm, config = self._components.llm, self._config.llm
        tok = getattr(llm, "tokenizer", None)
        count = (lambda t: len(tok(t, add_special_tokens=False)["input_ids"])) if tok else approx_token_count
        budget = history_budget(config.max_history_tokens, getattr(llm, "max_positions", None),
                                config.max_new_tokens, count(config.system_prompt))
        return None if budget is None else TurnWindow(budget, count)

    async def _run_reply(self, reply: Reply) -> None:
        from headstart.llm.stream import ReplyStream
        from headstart.tts.chunker import ClauseChunker
        from headstart.tts.normalize import normalize_text
        from headstart.tts.stream import TTSStream

        c = self._components

        def normalize(chunk: str) -> str:
            spoken = normalize_text(chunk)
            if spoken:
                reply.chunks.append(chunk)
            return spoken

        tts = TTSStream(c.tts, ClauseChunker(self._config.tts), c.tts_executor, clock=self._clock,
                        normalize=normalize, frame_s=self._frame_s, output_rate_hz=self._config.tts.output_rate_hz)
        reply.tts = tts
        audio_task = asyncio.create_task(self._pump_audio(reply, tts), name=f"session-audio-{reply.id}")
        if reply.stream is None:
            # a remote engine (headstart/llm/remote.py) streams its own ReplyStream-shaped replies
            decoder = self._decoder()
            open_reply = getattr(c.llm, "reply_stream", None) or (
                lambda *a, **k: ReplyStream(c.llm, *a, decoder=decoder, **k))
            reply.stream = open_reply(self._messages(), self._config.llm, c.llm_executor, clock=self._clock)
        stream = reply.stream
        llm_done = False
        try:
            async for event in stream:
                self._llm_started(reply)
                if isinstance(event, TokenDelta):
                    reply.text.append(event.text)
                    tts.push_text(event.text)
                self._deliver(reply, event)
            llm_done = True
            tts.end_input()
            await audio_task
            await reply.released.wait()  # a held reply whose audio is all made waits for its release
        except BaseException as exc:
            self._llm_started(reply)
            _cancel_streams(reply)
            await _cancel(audio_task)
            if not llm_done and isinstance(exc, Exception) and not isinstance(getattr(exc, "code", None), str):
                raise StageError("llm_failed", f"the reply's LLM failed: {type(exc).__name__}: {exc}") from exc
            raise
        turn = reply.turn
        reply.finished = True
        if self.turns.reply_id == reply.id:
            self.turns.audio_done()
        turn.reply = "".join(reply.text).strip()
        turn.reply_done_at_s = self._clock.now()
        if tts.timings:  # a held reply's text was ready before its release: count from the release
            turn.tts_first_text_at_s = max(tts.timings[0].ready_at_s, reply.released_at_s or float("-inf"))
        reply.history_index = len(self.history)
        self.history.append({"role": "assistant", "content": turn.reply})
        self._out.put_nowait(TurnCompleted(turn, reply.id))

    def _deliver(self, reply: Reply, event: object) -> None:
        """Send a reply's event now, or keep it in the outbox while the reply is held."""
        if reply.held:
            reply.outbox.append(event)
            return
        self._mark(reply, event)
        self._out.put_nowait(_Tagged(reply.id, event))

    def _mark(self, reply: Reply, event: object) -> None:
        """Timeline marks of an event leaving the session."""
        turn = reply.turn
        if isinstance(event, TokenDelta):
            now = self._clock.now()
            if turn.first_token_at_s is None:
                turn.first_token_at_s = now
            turn.last_token_at_s = now
            turn.num_tokens += max(1, len(event.token_ids))
        elif isinstance(event, ReplyDone):
            turn.num_tokens = event.num_tokens

    async def _pump_audio(self, reply: Reply, tts) -> None:
        from headstart.audio import StreamResampler

        started = False
        to_16k = None
        async for frame in tts:
            if not reply.released.is_set():  # held: the first clause is synthesised, and waits here
                await reply.released.wait()
            while not reply.resume.is_set():  # paused for a possible barge-in: hold the audio
                await reply.resume.wait()
            if reply.interrupted:
                return
            if self._lead_s is not None:
                await self._wait_for_playback(reply)
            turn = reply.turn
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

    async def _wait_for_playback(self, reply: Reply) -> None:
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


def _fuses_reply_prefill(model, llm) -> bool:
    """Whether `model` (an EOU scorer) can prefill the reply prompt in its own forward on `llm`'s
    cache: the trained head on the local engine (llm/eou_head.py `EOUHead.features`)."""
    from headstart.llm.eou_head import EOUHead

    return isinstance(model, EOUHead) and model.engine is llm and hasattr(llm, "render_prompt")


def resolve_eou(components, config) -> tuple[object | None, object]:
    """(the EOU model `config.session.eou` asks for or None, the EndpointConfig whose `eou_scorer` says
    which thresholds its probabilities need). "auto" takes `config.endpoint.eou_scorer` and falls back
    from "head" to "token" when this LLM has no trained head (the endpointer then uses the token
    thresholds, so a probability is never read on the wrong scale)."""
    from dataclasses import replace

    endpoint, kind = config.endpoint, config.session.eou
    get = getattr(components, "eou_model", None)
    if get is None or kind == "none":
        return None, endpoint
    kinds = {"auto": [endpoint.eou_scorer] + (["token"] if endpoint.eou_scorer == "head" else []),
             "llm": ["token"]}.get(kind, [kind])
    for candidate in kinds:
        model = get(candidate)
        if model is not None:
            endpoint = replace(endpoint, eou_scorer=candidate)
            trained = getattr(getattr(model, "weights", None), "thresholds", None)
            if candidate == "head" and endpoint.head_thresholds == "trained" and trained is not None:
                # the head's own calibration (docs/listening.md: 3.2 % false cut-offs on bench asr's
                # pause set against 13.8 % with the generic 0.15/0.75, once the final's score comes fast)
                endpoint = replace(endpoint, eou_low=float(trained[0]), eou_high=float(trained[1]))
            return model, endpoint
    return None, endpoint


class StageError(RuntimeError):
    """A stage failed; the session goes on. `code` names the failure for the server's `error` event:
    "llm_failed" (the local LLM raised, e.g. a prompt beyond its context)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class _Tagged:
    reply_id: str
    event: object


def _cancel_streams(reply: Reply) -> None:
    for stream in (reply.stream, reply.tts):
        if stream is not None:
            stream.cancel()


async def _cancel(task: asyncio.Task) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
