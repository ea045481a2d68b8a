"""HeadStart (headstart/session/head_start.py) on a FakeClock with a scripted LiveTurn and scripted held replies:
the incremental prefill, when a held reply starts, what drops it (and counts its waste), the release at
the end of turn with the lead gained, the priority across sessions, and one idempotent cancel."""

from __future__ import annotations

import pytest

from headstart.clock import FakeClock
from headstart.config import EndpointConfig, SessionConfig
from headstart.session.head_start import HeadStart, HeadStartStats
from headstart.session.llm_lane import LLMPriority
from headstart.timeline import HeadStartOutcome, HeldRelease, TurnTimeline


class ScriptedLiveTurn:
    def __init__(self, messages) -> None:
        self.messages = messages
        self.updates: list[str] = []
        self.replies: list[str] = []
        self.closed = 0

    def update(self, text: str) -> None:
        self.updates.append(text)

    def reply(self, text: str) -> str:
        self.replies.append(text)
        return f"stream:{text}"

    def close(self) -> None:
        self.closed += 1


class ScriptedReply:
    def __init__(self, stream, text, messages, turn) -> None:
        self.stream, self.hypothesis, self.messages, self.turn = stream, text, messages, turn
        self.started = False
        self.cancels: list[str] = []
        self.generating = True
        self.num_generated_tokens = 5
        self.held_tokens = 3
        self.synthesised_s = 0.41234

    def start(self) -> None:
        self.started = True

    def cancel(self, reason: str, played_s: float) -> str:
        self.cancels.append(reason)
        return ""


class Rig:
    def __init__(self, config: SessionConfig | None = None, priority: LLMPriority | None = None) -> None:
        self.clock = FakeClock()
        self.chat = [{"role": "system", "content": "be brief"}]
        self.turns: list[ScriptedLiveTurn] = []
        self.replies: list[ScriptedReply] = []
        self.allowed = True
        self.turn = TurnTimeline()
        self.head = HeadStart(self.clock, config or SessionConfig(), EndpointConfig(), open_turn=self.open_turn,
                              messages=lambda: list(self.chat), new_held=self.new_held,
                              possible=lambda: self.allowed, priority=priority, owner="me")

    def open_turn(self, messages):
        self.turns.append(ScriptedLiveTurn(messages))
        return self.turns[-1]

    def new_held(self, stream, text, messages):
        self.replies.append(ScriptedReply(stream, text, messages, self.turn))
        return self.replies[-1]

    def user_says(self, *partials: str) -> None:
        self.head.speech_started()
        for text in partials:
            self.clock.advance(0.4)
            self.head.partial(text)

    def end_of_turn(self, text: str):
        self.turn.transcript = text
        return self.head.end_of_turn(self.turn)


def test_a_hit_prefills_holds_and_releases_with_the_lead_gained():
    rig = Rig()
    rig.head.prewarm()
    rig.user_says("What is", "What is the capital of France?")
    (live,) = rig.turns
    assert live.updates == ["", "What is", "What is the capital of France?"]
    assert rig.head.held is None  # still speaking: nothing held
    rig.clock.advance(0.25)
    rig.head.speech_ended()
    (held,) = rig.replies
    assert held.started and held.hypothesis == "What is the capital of France?"
    assert held.stream == "stream:What is the capital of France?" and live.replies == [held.hypothesis]
    assert rig.head.held is held and rig.head.live is None  # the LiveTurn gave its one reply
    rig.clock.advance(0.3)
    rig.head.final("What is the capital of France?")  # the same text: keep holding
    rig.clock.advance(0.45)
    assert rig.end_of_turn("What is the capital of  France?") is held
    assert rig.head.held is None and held.cancels == []
    assert rig.turn.head_start == HeadStartOutcome(
        "hit", enabled=True, hits=1, misses=0, wasted_tokens=0,
        release=HeldRelease(lead_s=0.75, held_tokens=3, held_audio_s=0.4123))
    assert rig.turn.preemptive_drops == []
    assert rig.head.stats == HeadStartStats(hits=1) and rig.head.stats.hit_rate == 1.0


def test_resumed_speech_drops_the_held_reply_and_counts_its_tokens_as_wasted():
    rig = Rig()
    rig.user_says("Tell me about the weather.")
    rig.head.speech_ended()
    (held,) = rig.replies
    rig.head.speech_started()
    assert held.cancels == ["speech_resumed"] and rig.head.held is None
    assert rig.turn.preemptive_drops == ["speech_resumed"]
    rig.head.partial("Tell me about the weather. In Paris tomorrow.")
    assert len(rig.turns) == 2  # a new LiveTurn for the rest of the turn
    assert rig.end_of_turn("Tell me about the weather. In Paris tomorrow.") is None  # nothing held now
    assert rig.turn.head_start.preemptive == "miss"
    assert (rig.head.stats.misses, rig.head.stats.wasted_tokens) == (1, 5)
    live = rig.head.take_live()
    assert live is rig.turns[1] and rig.head.take_live() is None  # the confirmed reply's prompt, once


def test_a_chat_that_changed_under_the_held_reply_is_a_miss():
    rig = Rig()
    rig.user_says("Play some music.")
    rig.head.speech_ended()
    (held,) = rig.replies
    rig.chat.append({"role": "assistant", "content": "a barge-in rewrote me"})
    assert rig.end_of_turn("Play some music.") is None
    assert held.cancels == ["history_changed"]
    assert rig.turn.head_start.preemptive == "miss"
    assert (rig.head.stats.hits, rig.head.stats.misses) == (0, 1)


def test_no_held_reply_while_speculative_work_is_not_possible():
    rig = Rig()
    rig.allowed = False  # e.g. the agent is still speaking
    rig.user_says("Good morning there.")
    rig.head.speech_ended()
    assert rig.replies == [] and rig.turns == []
    assert rig.end_of_turn("Good morning there.") is None
    assert rig.turn.head_start.preemptive == "none" and rig.head.stats == HeadStartStats()


def test_cancel_is_idempotent_and_closes_the_live_turn():
    rig = Rig()
    rig.head.prewarm()
    rig.user_says("Is it raining?")
    rig.head.speech_ended()
    (held,) = rig.replies
    rig.head.partial("Is it raining? Or")  # a changed text drops it; the live turn reopens
    rig.head.cancel("cleared")
    rig.head.cancel("cleared")
    assert held.cancels == ["text_changed"]
    assert [t.closed for t in rig.turns] == [0, 1]  # the first gave its reply; the second is closed once
    assert rig.head.idle and rig.head.stats.misses == 1


def test_only_the_latest_texts_eou_counts():
    rig = Rig(SessionConfig(preempt_eou_threshold=0.1))
    rig.user_says("turn on the lights")
    rig.head.eou("turn on the lights", 0.3)  # known while the user still speaks: nothing yet
    rig.head.eou("turn on the", 0.001)  # an older text's estimate landing late changes nothing
    assert rig.replies == []
    rig.head.speech_ended()  # no punctuation, but the latest text's estimate reads complete
    assert [r.hypothesis for r in rig.replies] == ["turn on the lights"]


def test_a_confirmed_reply_elsewhere_drops_held_work_still_generating():
    priority = LLMPriority()
    rig = Rig(priority=priority)
    rig.user_says("What time is it?")
    rig.head.speech_ended()
    (held,) = rig.replies
    priority.confirm("me", "my own reply")  # this session's own confirmed reply: not a reason
    assert held.cancels == []
    held.generating = False  # done generating: it costs the llm thread nothing more
    priority.confirm("another session", "r9")
    assert held.cancels == []
    held.generating = True
    priority.confirm("another session", "r10")
    assert held.cancels == ["confirmed_elsewhere"] and rig.head.held is None
    rig.head.final("What time is it?")  # the final starts a new held reply, subscribed anew
    second = rig.replies[-1]
    assert second is not held and second.started
    assert rig.end_of_turn("What time is it?") is second
    priority.confirm("another session", "r11")  # released: no longer held work
    assert second.cancels == []


def test_a_failed_held_reply_is_dropped_silently():
    rig = Rig()
    rig.user_says("Set a timer for ten minutes.")
    rig.head.speech_ended()
    (held,) = rig.replies
    rig.head.held_failed(object())  # not the held one: nothing happens
    assert rig.head.held is held
    rig.head.held_failed(held)
    assert rig.head.held is None and held.cancels == ["failed"]
    assert rig.end_of_turn("Set a timer for ten minutes.") is None


def test_switches():
    off = Rig(SessionConfig(head_start=False))
    off.head.prewarm()
    off.user_says("Is it raining?")
    off.head.speech_ended()
    assert off.turns == [] and off.replies == []
    no_prefill = Rig(SessionConfig(incremental_prefill=False))
    no_prefill.user_says("Is it raining?")
    assert no_prefill.turns == []
    no_prefill.head.speech_ended()  # the held reply opens its own LiveTurn
    assert len(no_prefill.turns) == 1 and no_prefill.turns[0].updates == [] and len(no_prefill.replies) == 1
    no_preempt = Rig(SessionConfig(preemptive=False))
    no_preempt.user_says("Is it raining?")
    no_preempt.head.speech_ended()
    assert no_preempt.turns[0].updates == ["Is it raining?"] and no_preempt.replies == []
    assert no_preempt.head.eou_threshold == pytest.approx(0.1)
