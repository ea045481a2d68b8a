"""The head start of one session: the incremental-prefill turn, the held reply and their counters.

`PreemptionPolicy` (headstart/session/preemption.py) decides; `HeadStart` executes: it owns the policy, the
user turn's `LiveTurn` (incremental prefill, headstart/llm/live.py), the held `Reply` and one
`HeadStartStats`. The session routes the listener's events here and asks, at the end of turn, for the
released reply or the LiveTurn to generate the confirmed one from.

    head = HeadStart(clock, config, endpoint, open_turn=..., messages=..., new_held=..., possible=...,
                     priority=components.llm_priority)
    head.prewarm()                       # before the user's words: prefill the chat so far
    head.partial(text)                   # LiveTurn.update, and a changed text drops the held reply
    head.speech_started() / pause_started() / pause_ended() / speech_ended() / final(text) / eou(text, p)
    reply = head.end_of_turn(turn)       # the held reply to release (a hit), or None
    live = head.take_live()              # else the turn's LiveTurn (the prompt mostly prefilled)
    head.cancel(reason)                  # the turn is dropped: nothing held stays (idempotent)

While the agent is silent every partial prefills the KV cache (`LiveTurn.update`). When the policy says
`Preempt(text)` a reply to `text` starts *held* (`new_held` makes it: its events wait in its outbox and
its audio before the first frame). At the end of turn a `Release` hands it back to the session to
release; any other outcome cancels it and counts its tokens as wasted. While it generates it is
subscribed to `LLMPriority`: a confirmed reply of another session drops it ("confirmed_elsewhere").
All methods run on the event loop; nothing here blocks (the LiveTurn and the reply run on the llm
executor they were given).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from headstart.clock import Clock
from headstart.config import EndpointConfig, SessionConfig
from headstart.seams import LLMReplyStream, LLMTurn
from headstart.session.llm_lane import LLMPriority
from headstart.session.preemption import (
    CancelHeld,
    Decision,
    HeadStartStats,
    PreemptionPolicy,
    Preempt,
    Release,
    same_text,
)
from headstart.timeline import HeadStartOutcome, HeldRelease, TurnTimeline

if TYPE_CHECKING:
    from headstart.session.reply import Reply


class HeadStart:
    """One session's head start (see the module docstring).

    Args:
        clock: the time source (FakeClock in tests).
        config: `SessionConfig` (its switches: `head_start`, `incremental_prefill`, `preemptive`).
        endpoint: the resolved EndpointConfig (`EOUPlan.endpoint`: its EOU scale sets the threshold).
        open_turn: `(messages) -> LiveTurn` on the session's LLM backend (`open_turn(messages)` of the
            llm seam: `update(text)`, `reply(text) -> LLMReplyStream`, `close()`).
        messages: `() -> the chat so far` (the user's turn follows it).
        new_held: `(stream, text, messages) -> Reply`, a held reply not started yet (the session's
            pipeline: where its events go once released).
        possible: `() -> bool`, whether speculative work may run now (the agent is silent, no reply in
            progress, the session is open, the backend can prefill).
        priority: the process's `LLMPriority` (None: no other session to give way to).
        owner: who this head start's held work belongs to for `priority` (the session).
        tool_reply: `(text, messages) -> Reply | None`: a held tool reply when a tool serves `text`
            (not started; its tool runs only once released), else None (the LLM's reply is held).
    """

    def __init__(
        self,
        clock: Clock,
        config: SessionConfig,
        endpoint: EndpointConfig,
        *,
        open_turn: Callable[[list[dict[str, str]]], LLMTurn],
        messages: Callable[[], list[dict[str, str]]],
        new_held: Callable[[LLMReplyStream, str, list[dict[str, str]]], Reply],
        possible: Callable[[], bool] = lambda: True,
        priority: LLMPriority | None = None,
        owner: object = None,
        tool_reply: Callable[[str, list[dict[str, str]]], object | None] = lambda text, messages: None,
    ) -> None:
        self._tool_reply = tool_reply
        self.policy = PreemptionPolicy(clock, config, endpoint)
        self.stats: HeadStartStats = self.policy.stats  # one record: the policy's hits and misses, our waste
        self._open_turn = open_turn
        self._messages = messages
        self._new_held = new_held
        self._possible = possible
        self._priority = priority
        self._owner = owner if owner is not None else self
        self._live: LLMTurn | None = None  # the user turn's LiveTurn
        self._live_messages: list[dict[str, str]] | None = None  # the chat it was opened on
        self._held: Reply | None = None  # the held Reply
        self._unsubscribe: Callable[[], None] = lambda: None

    # -- state ----------------------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self.policy.enabled

    @property
    def eou_threshold(self) -> float:
        return self.policy.eou_threshold

    @property
    def latest_text(self) -> str:
        return self.policy.latest_text

    @property
    def held(self) -> Reply | None:
        """The held Reply (None: nothing held)."""
        return self._held

    @property
    def live(self) -> LLMTurn | None:
        """The user turn's LiveTurn, if one is open."""
        return self._live

    @property
    def idle(self) -> bool:
        """Nothing open: no LiveTurn, no held reply (the next user turn may prewarm)."""
        return self._live is None and self._held is None

    # -- events ---------------------------------------------------------------------------------------
    def prewarm(self) -> None:
        """Before the user's words come, while the agent is silent: prefill the chat the next user turn
        follows (system prompt, history, the user's message header) on the llm thread, so the partials,
        the EOU estimate and the reply only prefill the user's words (docs/server.md: a fresh session's
        first partial otherwise prefilled the whole system prompt and held the llm thread past the end
        of the turn). Background work that confirmed replies overtake."""
        if self.policy.incremental_prefill:
            live = self._ensure_live()
            if live is not None:
                live.update("")

    def partial(self, text: str) -> None:
        """A partial of the user's turn: incremental prefill, and a different text drops a held reply."""
        if self.policy.incremental_prefill:
            live = self._ensure_live()
            if live is not None:
                live.update(text)
        self._apply(self.policy.partial(text))

    def speech_started(self) -> None:
        self._apply(self.policy.speech_started())  # resumed speech drops held work

    def speech_ended(self) -> None:
        self._apply(self.policy.speech_ended())

    def pause_started(self) -> None:
        """The VAD hears a pause it has not confirmed as the speech's end: a held reply may start on the
        latest text (`SessionConfig.preempt_on_pause`)."""
        self._apply(self.policy.pause_started())

    def pause_ended(self) -> None:
        """The speech went on after that pause: a reply held on it is dropped."""
        self._apply(self.policy.pause_ended())

    def final(self, text: str) -> None:
        """The utterance's final transcript (with words; "" or fillers only go to `cancel("no_words")`)."""
        self._apply(self.policy.final(text))

    def eou(self, text: str, probability: float | None) -> None:
        """An EOU estimate landed (the EOU service's subscriber). Only the latest text counts: the
        policy reads a probability only for the text it checks, which is always the latest."""
        if same_text(text, self.policy.latest_text):
            self._apply(self.policy.eou(text, probability))

    def end_of_turn(self, turn: TurnTimeline) -> Reply | None:
        """The turn is over with `turn.transcript`: the held reply to release (a hit: the caller calls
        its `release(turn)`), or None (a miss or nothing held: the caller generates the reply, from
        `take_live()` when it gives one). Sets `turn.head_start`: the outcome, the session's counters and,
        on a hit, what the released reply had ready."""
        held, release = self._held, None
        for decision in self.policy.end_of_turn(turn.transcript):
            if isinstance(decision, Release):
                release = decision
            else:
                self._apply([decision])
        released = None
        if release is not None and held is not None and held.messages == self._messages():
            self._held = None
            self._unsubscribe()
            released = held
        elif release is not None:  # the chat changed under it (cannot happen while the agent is silent)
            self.stats.hits -= 1
            self.stats.misses += 1
            self.policy.outcome = "miss"
            self._drop("history_changed")
        ready = None
        if released is not None and release is not None:
            ready = HeldRelease(lead_s=round(release.lead_s, 4), held_tokens=released.held_tokens,
                                held_audio_s=round(released.synthesised_s, 4))
        turn.head_start = HeadStartOutcome(
            preemptive=self.policy.take_outcome(), enabled=self.enabled, hits=self.stats.hits,
            misses=self.stats.misses, wasted_tokens=self.stats.wasted_tokens, release=ready)
        return released

    def take_live(self) -> LLMTurn | None:
        """The LiveTurn, if it was opened on the chat as it is now (else it is closed and None); the
        head start lets go of it (a LiveTurn gives one reply)."""
        live, messages = self._live, self._live_messages
        self._live, self._live_messages = None, None
        if live is not None and messages != self._messages():
            live.close()
            return None
        return live

    def drop(self, reason: str) -> None:
        """Drop the held reply but keep the turn going (it failed, or confirmed work elsewhere)."""
        self._apply(self.policy.drop(reason))

    def held_failed(self, reply: Reply) -> None:
        """The held reply's pipeline failed: speculative work is dropped silently (the end of turn
        regenerates)."""
        if self._held is reply:
            self.policy.drop("failed")
            self._drop("failed")

    def cancel(self, reason: str = "cleared") -> None:
        """The turn ends without a reply (no words, cleared, reset, input ended): the held reply is
        cancelled and the LiveTurn closed. Idempotent."""
        self._apply(self.policy.cancel(reason))
        self._drop(reason)  # one the policy no longer counted (it withdrew or never held it)
        self.close_live()

    def close_live(self) -> None:
        live, self._live, self._live_messages = self._live, None, None
        if live is not None:
            with contextlib.suppress(RuntimeError):  # the executors are already shut down
                live.close()

    # -- internals ------------------------------------------------------------------------------------
    def _ensure_live(self) -> LLMTurn | None:
        if self._live is None and self._possible():
            messages = self._messages()
            self._live = self._open_turn(messages)
            self._live_messages = messages
        return self._live

    def _apply(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, CancelHeld):
                self._drop(decision.reason)
            elif isinstance(decision, Preempt):
                self._start_held(decision.text)

    def _start_held(self, text: str) -> None:
        """Start a reply to `text` that is generated and synthesised but held (nothing leaves); a text a
        tool serves holds a tool reply (nothing runs before its release; the LiveTurn is not needed)."""
        if self._possible():
            messages = self._messages()
            tool_reply = self._tool_reply(text, messages)
            if tool_reply is not None:
                self.close_live()
                self._hold(tool_reply)
                return
        live = self._ensure_live() if self._possible() else None
        if live is None:
            self.policy.withdraw()  # nothing was started: no hit, no miss
            return
        live = self.take_live()
        if live is None:
            self.policy.withdraw()
            return
        messages = self._messages()
        self._hold(self._new_held(live.reply(text), text, messages))

    def _hold(self, reply) -> None:
        self._held = reply
        if self._priority is not None:
            self._unsubscribe = self._priority.subscribe(self._owner, self._on_confirmed_elsewhere)
        reply.start()

    def _on_confirmed_elsewhere(self) -> None:
        """Another session's confirmed reply waits for the llm thread: drop a held reply still generating."""
        held = self._held
        if held is not None and held.generating:
            self.drop("confirmed_elsewhere")

    def _drop(self, reason: str) -> None:
        """Cancel the held reply: its tokens and audio never leave (counted as wasted)."""
        reply, self._held = self._held, None
        self._unsubscribe()
        self._unsubscribe = lambda: None
        if reply is None:
            return
        reply.cancel(reason, 0.0)
        self.stats.wasted_tokens += reply.num_generated_tokens
        reply.turn.preemptive_drops.append(reason)
