"""The agent's side of one session: each `Reply` made on the session's pipeline, and the one that has
the floor.

    replies = Replies(components, clock, turns, echo, conversation, put, owner=session, ...)
    replies.start(turn, live)            # a confirmed reply (ReplyStarted), on the turn's LiveTurn if any
    replies.release(held, turn)          # the head start's held reply, released at the end of turn
    replies.new(turn, held=True, ...)    # a reply on the pipeline, not started (the head start's held one)
    replies.apply(actions)               # turn-taking's Pause / Resume / Interrupt on the current reply
    replies.open_live_turn(messages)     # the user turn's LiveTurn, on the same LLM backend
    replies.announce(text, turn)         # an agent-initiated reply (a timer fired): no user turn before it

A final transcript a tool serves (`Toolbox.route`) gets a tool reply: the tool's spoken answer instead
of the LLM's, the tool run once the reply starts (a confirmed one) or is released (a held one), its call
and outcome in `turn.tool`. The queue gets `ToolCalled` before the run and its `ToolResult` after it
(also when the reply is cut off meanwhile); a tool that failed adds a `StageError("tool_failed")`.

Each reply's LLM stream is opened on the chat as it is when the reply starts running (or is given: a
LiveTurn's reply), its TTS stream on the components' synthesiser. Its audio leaves paced by the
client's playback (turn-taking's `sent_s - played_s()`), counts as sent for turn-taking and goes to the
echo detector; its events reach the session's queue as `FromReply` (a cancel drops those still queued:
`Reply.delivers`); once all its audio has left the history keeps it and `TurnCompleted` follows. A
reply cut off leaves its heard text in the history, `ReplyInterrupted`, and `TurnCompleted(interrupted)`
when its audio had not all left. A plain object: every method runs on the event loop and returns at
once (the reply's task does the waiting).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from headstart.audio import AudioFrame
from headstart.clock import Clock
from headstart.seams import LLMReplyStream, LLMTurn
from headstart.session.ask_back import ASK_BACK_TEXT, asks_back
from headstart.session.conversation import Conversation
from headstart.session.echo import EchoGuard, echo_text
from headstart.session.reply import (
    Reply,
    ReplyEvent,
    ReplyInterrupted,
    StageError,
    ToolCalled,
    ToolResult,
    TurnCompleted,
)
from headstart.session.spoken_stream import SpokenStream
from headstart.timeline import Interruption, ToolUse, TurnTimeline
from headstart.tools.registry import ToolCall
from headstart.tools.toolbox import Toolbox
from headstart.session.turntaking import Action, AgentState, Interrupt, Pause, Resume, TurnTaking

_reply_ids = itertools.count(1)
_call_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class FromReply:
    """An event a reply sent: `Reply.delivers` says at the queue's end whether it still leaves."""

    reply: Reply
    event: ReplyEvent


class Replies:
    """One session's replies (see the module docstring).

    Args:
        components: `Components`: the LLM backend (`reply_stream`, `live_turn`: it decodes as the
            session's `LLMConfig` says, speculatively unless `speculative` is "none"), the synthesiser,
            their executors and the process's `llm_priority`.
        clock: the time source of every reply (FakeClock in tests).
        turns: the session's `TurnTaking`: a reply's audio counts as sent there, its playback paces the
            audio, its end gives the floor back.
        echo: the session's `EchoGuard`: each reply's audio as it leaves; reset when a reply starts or is
            cut off.
        conversation: the session's chat: the reply's prompt, the user's turn, the reply or its heard text.
        put: `(item) -> None`, the session's event queue: events (a reply's as `FromReply`) and a failed
            stage's exception.
        owner: whose confirmed replies these are for `llm_priority` (the session; its head start
            subscribes as the same owner).
        speech_started_at: `() -> the clock time the current utterance's speech started, or None`: a
            reply it cut off may be continued (`Conversation.cut_off`).
        on_held_failed: `(reply) -> None`: a held reply's stage failed (the head start drops it silently).
        playback_lead_s: audio leaves at most this far ahead of the client's playback (None: at once).
        audio_frame_s: reply audio in frames of this many seconds (None: as the engine gives it).
        tools: the session's `Toolbox` (None: no tools, every reply is the LLM's).
        on_tool_ran: `() -> None` after each tool run (the session re-arms its timer watch).
        on_reply_done: `() -> None` once a reply's audio has all left and the history keeps it (the
            session may compact the history while the assistant is idle).

    Attributes:
        current: the reply that has (or last had) the floor; None before the first and after a cut-off.
    """

    def __init__(
        self,
        components,
        clock: Clock,
        turns: TurnTaking,
        echo: EchoGuard,
        conversation: Conversation,
        put: Callable[[FromReply | ReplyInterrupted | TurnCompleted | ToolCalled | ToolResult | Exception], None],
        *,
        owner: object,
        speech_started_at: Callable[[], float | None] = lambda: None,
        on_held_failed: Callable[[Reply], None] = lambda reply: None,
        playback_lead_s: float | None = None,
        audio_frame_s: float | None = None,
        tools: Toolbox | None = None,
        on_tool_ran: Callable[[], None] = lambda: None,
        on_reply_done: Callable[[], None] = lambda: None,
    ) -> None:
        self._components = components
        self.tools = tools
        self._on_tool_ran = on_tool_ran
        self._on_reply_done = on_reply_done
        self._config = components.config
        self._clock = clock
        self._turns = turns
        self._echo = echo
        self._conversation = conversation
        self._put = put
        self._owner = owner
        self._speech_started_at = speech_started_at
        self._on_held_failed = on_held_failed
        self._lead_s = playback_lead_s
        self._frame_s = audio_frame_s
        self.current: Reply | None = None
        self._tool_tasks: set[asyncio.Task[str]] = set()

    @property
    def active(self) -> bool:
        """A reply is being generated or its audio is still leaving."""
        return self.current is not None and self.current.running

    @property
    def agent_silent(self) -> bool:
        """The agent listens and no reply is in progress: the chat the user's turn follows is final (a
        barge-in still rewrites the last assistant message), so speculative work may run."""
        return self._turns.agent is AgentState.LISTENING and not self.active

    def echo_text(self) -> str:
        """The current reply as its echo may be written (`echo_text`), for telling it from the user."""
        return "" if self.current is None else echo_text(self.current.text)

    # -- the LLM -----------------------------------------------------------------------------------------

    def open_live_turn(self, messages: list[dict[str, str]]) -> LLMTurn:
        """The user turn's LiveTurn (incremental prefill) on the session's LLM, opened on `messages`."""
        c = self._components
        return c.llm.live_turn(messages, self._config.llm, c.llm_executor, clock=self._clock)

    def _open_stream(self) -> LLMReplyStream:
        c = self._components
        return c.llm.reply_stream(self._conversation.messages(), self._config.llm, c.llm_executor, clock=self._clock)

    # -- starting and stopping ---------------------------------------------------------------------------

    def route(self, text: str) -> ToolCall | None:
        """The tool call a user's text asks for (None: no tools, or the LLM answers). Runs nothing."""
        return None if self.tools is None or not text.strip() else self.tools.route(text)

    def ask_back_stream(self, turn: TurnTimeline) -> SpokenStream | None:
        """The ask-back reply's stream when the recogniser was unsure of `turn`'s final transcript
        (headstart/session/ask_back.py), else None (the LLM or a tool answers)."""
        if not asks_back(turn.asr_confidence, turn.transcript, self._config.session.ask_back_below):
            return None
        return SpokenStream(ASK_BACK_TEXT, self._clock, reason="ask_back")

    def _tool_run(self, call: ToolCall, reply_id: str, reply_turn: Callable[[], TurnTimeline]):
        """The `ToolRun` of a tool reply: runs `call` once (the reply calls it when released), between a
        `ToolCalled` and its `ToolResult`."""
        tools = self.tools
        assert tools is not None
        name = call.tool.name

        async def run_and_report(call_id: str) -> str:
            started_s = self._clock.now()
            outcome = await tools.run(call)
            reply_turn().tool = ToolUse(name=name, arguments=dict(call.arguments), ok=outcome.ok)
            self._put(ToolResult(reply_id, call_id, name, outcome.ok, outcome.value, outcome.error,
                                 max(0.0, self._clock.now() - started_s)))
            if not outcome.ok:
                self._put(StageError("tool_failed", outcome.error))
            self._on_tool_ran()
            return outcome.spoken

        async def run() -> str:
            call_id = f"c{next(_call_ids)}"
            self._put(ToolCalled(reply_id, call_id, name, dict(call.arguments)))
            # shielded: a reply cut off while its tool runs still reports the result (the tool acts on
            # its worker thread either way, so the client must hear what it did)
            task = asyncio.create_task(run_and_report(call_id), name=f"session-tool-{call_id}")
            self._tool_tasks.add(task)
            task.add_done_callback(self._tool_tasks.discard)
            return await asyncio.shield(task)
        return run

    def _tool_preview(self, call: ToolCall) -> Callable[[], str | None]:
        """A held tool reply's likely answer (`Toolbox.preview`), voiced while it is held."""
        tools = self.tools
        assert tools is not None
        return lambda: tools.preview(call)

    @property
    def tool_tasks(self) -> list[asyncio.Task[str]]:
        """Tool runs still in progress (one may outlive its reply: it reports its result first)."""
        return [t for t in self._tool_tasks if not t.done()]

    def new(self, turn: TurnTimeline, *, stream=None, held: bool = False, hypothesis: str = "",
            messages: list[dict[str, str]] | None = None, tool_call: ToolCall | None = None) -> Reply:
        """A reply on the session's pipeline, not started. `stream`: its LLM stream when already open (a
        LiveTurn's reply), else one is opened on the chat as it is when the reply starts running.
        `held`, `hypothesis`, `messages`: a held reply's (`Reply`). `tool_call`: a tool reply's call
        (run when the reply is released)."""
        from headstart.tts.chunker import ClauseChunker
        from headstart.tts.engines import speakable_check
        from headstart.tts.stream import TTSStream

        c, tt, config = self._components, self._turns, self._config
        priority = c.llm_priority  # the reply stops waiting for the llm thread once its LLM starts
        reply_id = f"r{next(_reply_ids)}"
        echo = self._echo.reply_sink()

        def open_tts() -> TTSStream:
            return TTSStream(c.tts, ClauseChunker(config.tts), c.tts_executor, clock=self._clock,
                             frame_s=self._frame_s, output_rate_hz=config.tts.output_rate_hz,
                             speakable=speakable_check(config.tts))

        def ahead_s() -> float | None:  # pacing only while it is the reply turn-taking plays
            return tt.sent_s - tt.played_s() if tt.reply_id == reply_id else None

        def on_audio(frame: AudioFrame) -> None:
            if tt.reply_id == reply_id:
                tt.audio_sent(frame.duration_s)
            echo(frame)

        reply = Reply(reply_id, turn, self._send, self._clock, open_tts, stream=stream,
                      open_stream=self._open_stream, held=held, playback_lead_s=self._lead_s,
                      ahead_s=ahead_s, on_audio=on_audio, on_llm_started=lambda: priority.started(reply),
                      on_finished=self._finished, on_failed=self._failed, hypothesis=hypothesis, messages=messages,
                      tool=None if tool_call is None else self._tool_run(tool_call, reply_id, lambda: reply.turn),
                      tool_preview=(self._tool_preview(tool_call) if tool_call is not None and held
                                    and config.session.tool_prevoice else None))
        return reply

    def start(self, turn: TurnTimeline, live=None) -> Reply:
        """A confirmed reply to `turn.transcript` starts now (ReplyStarted): on `live`'s reply when given
        (a LiveTurn opened on the chat as it is: the prompt mostly prefilled), else on a stream opened
        when it runs; a text a tool serves gets a tool reply (the LiveTurn is closed). The history gets the
        user's turn; turn-taking, the reply."""
        ask_back = self.ask_back_stream(turn)
        call = None if ask_back is not None else self.route(turn.transcript)
        if (call is not None or ask_back is not None) and live is not None:
            live.close()
            live = None
        reply = self.new(turn, tool_call=call, stream=ask_back)
        self.current = reply
        # confirmed: EOU jobs queued before it give way, held replies of other sessions still generating
        # drop (Components.llm_priority); a reply cancelled before it ever ran no longer counts
        self._components.llm_priority.confirm(self._owner, reply, lambda: reply.task is None or not reply.task.done())
        self._echo.reset_played()
        if live is not None:
            reply.stream = live.reply(turn.transcript)
        self._conversation.add_user(turn.transcript)
        self._turns.reply_started(reply.id)
        reply.start()
        return reply

    def announce(self, text: str, turn: TurnTimeline) -> Reply:
        """An agent-initiated reply speaking `text` now (a timer fired): no user message before it in the
        history, which keeps `text` once its audio has left; it yields to the user like any reply."""
        reply = self.new(turn, stream=SpokenStream(text, self._clock, reason="announcement"))
        self.current = reply
        self._echo.reset_played()
        self._turns.reply_started(reply.id)
        reply.start()
        return reply

    def release(self, reply: Reply, turn: TurnTimeline) -> None:
        """End of turn on the held reply's own text: what it holds leaves now, in order."""
        self.current = reply
        self._echo.reset_played()
        # the history keeps the text the reply (and the KV cache) was conditioned on
        self._conversation.add_user(reply.hypothesis)
        self._turns.reply_started(reply.id)
        reply.release(turn)  # ReplyStarted, then what it holds

    def apply(self, actions: list[Action]) -> None:
        """Turn-taking's actions on the current reply (those for another reply id are stale: ignored)."""
        reply = self.current
        for action in actions:
            if reply is None or action.reply_id != reply.id:  # type: ignore[union-attr]
                continue
            if isinstance(action, Pause):
                reply.pause()
            elif isinstance(action, Resume):
                reply.resume()
            elif isinstance(action, Interrupt):
                self.interrupt(reply, action.played_s, action.reason)

    def interrupt_running(self, reason: str) -> None:
        """Cut off the current reply if it is still running (a new turn's reply replaces it)."""
        old = self.current
        if old is not None and old.running and not old.cancelled:
            self.interrupt(old, self._turns.played_s(), reason)

    def interrupt(self, reply: Reply, played_s: float, reason: str) -> None:
        """Cut `reply` off with `played_s` of its audio heard: the history keeps the heard text,
        ReplyInterrupted (and TurnCompleted(interrupted) if its audio had not all left) follow.
        Idempotent."""
        if reply.cancelled:
            return
        heard = reply.cancel(reason, played_s)
        self._conversation.interrupted(reply.history_index, heard)
        turn = reply.turn
        self._conversation.cut_off(turn.end_of_turn_at_s, self._speech_started_at(), played_s, reason)
        turn.interruption = Interruption(reason=reason, played_s=round(played_s, 3), heard_text=heard)
        if not reply.finished:
            turn.reply = heard
            turn.reply_done_at_s = self._clock.now()
        self._put(ReplyInterrupted(reply.id, heard, played_s, reason))
        if not reply.finished:
            self._put(TurnCompleted(turn, reply.id, interrupted=True))
        if self.current is reply:
            self.current = None
        self._echo.reset_played()

    # -- the reply's hooks --------------------------------------------------------------------------------

    def _send(self, reply: Reply, event: ReplyEvent) -> None:
        self._put(FromReply(reply, event))

    def _finished(self, reply: Reply) -> None:
        """All of a reply's audio has left: the history keeps it, the turn is complete."""
        if self._turns.reply_id == reply.id:
            self._turns.audio_done()
        reply.history_index = self._conversation.add_assistant(reply.turn.reply)
        self._put(TurnCompleted(reply.turn, reply.id))
        self._on_reply_done()

    def _failed(self, reply: Reply, exc: Exception) -> None:
        """A stage failed: a held reply is dropped silently (the end of turn regenerates); else the
        consumer sees the error at once and the session goes on."""
        if reply.held:
            self._on_held_failed(reply)
            return
        if self.current is reply:
            self.current = None
            if self._turns.reply_id == reply.id:
                self._turns.audio_done()
        self._put(exc)
