"""`Replies` (headstart/session/replies.py), the agent's side of a session, on its own: on a FakeClock with the
scripted LLM and synthesiser (tests/fakes.py), a real `TurnTaking` and `Conversation`. A confirmed
reply runs to the history and TurnCompleted with its audio paced by turn-taking's playback; a held one
is released with its hypothesis; turn-taking's actions reach the current reply only; a cut-off reply
leaves its heard text and may be continued; a failing stage is reported (or, held, handed back)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from fakes import InlineExecutor, ScriptedLLM, ScriptedTTS, settle

from headstart.clock import FakeClock
from headstart.session.components import Components
from headstart.config import LLMConfig, PipelineConfig
from headstart.session.conversation import Conversation
from headstart.session.echo import EchoGuard
from headstart.llm.stream import ReplyStats
from headstart.session.replies import FromReply, Replies
from headstart.session.reply import (
    ReplyAudio,
    ReplyAudioStart,
    ReplyInterrupted,
    ReplyPaused,
    ReplyResumed,
    ReplyStarted,
    StageError,
    TurnCompleted,
)
from headstart.timeline import Continuation, TurnTimeline
from headstart.session.turntaking import AgentState, Interrupt, Pause, Resume, TurnTaking

ANSWERS = {"What time is it?": "It is noon.", "Tell me a story": "One two three four five six seven eight."}


class Rig:
    """A `Replies` over scripted stages; `out` holds what it put on the session's queue."""

    def __init__(self, clock: FakeClock, *, lead_s: float | None = None, frame_s: float | None = None,
                 realtime: bool = False, speculative: str = "none") -> None:
        config = replace(PipelineConfig(), llm=replace(LLMConfig(), speculative=speculative))
        self.clock = clock
        self.llm = ScriptedLLM(clock, ANSWERS, decoder="the decoder")
        self.llm.gate.set()
        self.components = Components(config=config, asr=None, llm=self.llm, tts=ScriptedTTS(0.25),
                                     tts_executor=InlineExecutor())
        self.turns = TurnTaking(clock, realtime_playback=realtime)
        self.conversation = Conversation("Be brief.")
        self.out: list[object] = []
        self.held_failed: list[object] = []
        self.speech_at: float | None = None
        self.replies = Replies(self.components, clock, self.turns, EchoGuard(None), self.conversation,
                               self.out.append, owner="session", speech_started_at=lambda: self.speech_at,
                               on_held_failed=self.held_failed.append, playback_lead_s=lead_s, audio_frame_s=frame_s)

    def delivered(self, since: int = 0) -> list[object]:
        """What a consumer reading `out[since:]` now gets: a reply's events while it delivers them (a
        cancel drops its content still queued), the rest as put."""
        return [i.event if isinstance(i, FromReply) else i for i in self.out[since:]
                if not isinstance(i, FromReply) or i.reply.delivers(i.event)]

    def kinds(self) -> list[str]:
        return [type(e).__name__ for e in self.delivered()]


def run(main, rig: Rig):
    try:
        return asyncio.run(main())
    finally:
        rig.components.close()


def test_a_confirmed_reply_runs_to_the_history_and_turn_completed():
    rig = Rig(FakeClock())
    turn = TurnTimeline(transcript="What time is it?")

    async def main():
        reply = rig.replies.start(turn)
        assert rig.components.llm_priority.confirmed_pending  # it waits for the llm thread
        assert rig.replies.current is reply and rig.replies.active and not rig.replies.agent_silent
        assert rig.turns.reply_id == reply.id
        await reply
        return reply

    reply = run(main, rig)
    assert rig.kinds() == ["ReplyStarted", "TokenDelta", "TokenDelta", "TokenDelta", "ReplyDone",
                           "ReplyAudioStart", "ReplyAudio", "TurnCompleted"]
    assert all(getattr(e, "reply_id", reply.id) == reply.id for e in rig.delivered())
    assert rig.llm.asked == [[{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": "What time is it?"}]]
    assert rig.conversation.history == [{"role": "user", "content": "What time is it?"},
                                        {"role": "assistant", "content": "It is noon."}]
    assert reply.history_index == 1 and rig.components.llm_priority.num_waiting == 0
    assert not rig.replies.active and rig.replies.agent_silent and rig.turns.agent is AgentState.LISTENING
    assert rig.llm.decoders == [None]  # speculative "none": plain decoding


def test_a_reply_on_the_turns_live_turn_and_the_decoder_the_config_asks_for():
    rig = Rig(FakeClock(), speculative="prompt_lookup")
    turn = TurnTimeline(transcript="What time is it?")

    async def main():
        live = rig.replies.open_live_turn(rig.conversation.messages())
        live.update("What time")
        await rig.replies.start(turn, live)

    run(main, rig)
    (live,) = rig.llm.turns
    assert live.updates == ["What time"] and rig.llm.decoders == ["the decoder"]  # no second stream opened
    assert rig.conversation.history[-1] == {"role": "assistant", "content": "It is noon."}


def test_the_audio_leaves_paced_by_turn_takings_playback():
    lead_s = 0.25
    rig = Rig(FakeClock(), lead_s=lead_s, frame_s=0.25, realtime=True)

    async def main():
        await rig.replies.start(TurnTimeline(transcript="Tell me a story"))

    run(main, rig)
    # 8 words, 2 s of audio in 0.25 s frames: each leaves once at most `lead_s` is unplayed (FakeClock.sleep
    # moves the clock), so the last one (1.75-2.0 s) leaves when 1.75 - lead_s has played
    assert sum(e.frame.duration_s for e in rig.delivered() if isinstance(e, ReplyAudio)) == pytest.approx(2.0)
    assert rig.clock.now() == pytest.approx(1.75 - lead_s)
    assert rig.turns.sent_s == pytest.approx(2.0) and rig.turns.played_s() == pytest.approx(1.75 - lead_s)


def test_a_held_reply_is_released_with_its_hypothesis():
    rig = Rig(FakeClock())
    turn = TurnTimeline(transcript="What time is it?")

    async def main():
        messages = rig.conversation.messages()
        stream = rig.llm.answer([*messages, {"role": "user", "content": "What time is it?"}])
        held = rig.replies.new(turn, stream=stream, held=True, hypothesis="What time is it?", messages=messages)
        held.start()
        await settle()
        assert rig.delivered() == [] and rig.replies.current is None  # nothing leaves while held
        rig.replies.release(held, turn)
        await held
        return held

    held = run(main, rig)
    assert rig.kinds()[0] == "ReplyStarted" and rig.kinds()[-1] == "TurnCompleted"
    assert rig.replies.current is held
    assert rig.conversation.history == [{"role": "user", "content": "What time is it?"},
                                        {"role": "assistant", "content": "It is noon."}]


def test_turn_takings_actions_reach_the_current_reply_only_and_an_interrupt_keeps_the_heard_text():
    rig = Rig(FakeClock(), realtime=True)
    turn = TurnTimeline(transcript="Tell me a story", end_of_turn_at_s=0.0)

    async def main():
        reply = rig.replies.start(turn)
        await reply  # all its audio has left; the client plays it in real time
        rig.clock.advance(1.0)
        before = len(rig.out)  # what the consumer has read
        rig.replies.apply([Pause("r-other"), Interrupt("r-other", 1.0, "barge_in")])  # stale ids
        assert len(rig.out) == before and not reply.cancelled
        rig.replies.apply([Pause(reply.id), Resume(reply.id)])
        rig.speech_at = 5.0  # long after the end of turn: no continuation
        rig.replies.apply([Interrupt(reply.id, 1.0, "barge_in")])
        rig.replies.apply([Interrupt(reply.id, 1.5, "barge_in")])  # idempotent
        return reply, rig.delivered(before)

    reply, after = run(main, rig)
    assert after == [ReplyPaused(reply.id), ReplyResumed(reply.id),
                     ReplyInterrupted(reply.id, "One two three four", 1.0, "barge_in")]
    assert reply.cancelled and rig.replies.current is None and turn.interruption.heard_text == "One two three four"
    # its TurnCompleted had left with its audio; the history keeps what was heard of it
    assert [d.interrupted for d in rig.out if isinstance(d, TurnCompleted)] == [False]
    assert rig.conversation.history == [{"role": "user", "content": "Tell me a story"},
                                        {"role": "assistant", "content": "One two three four"}]


def test_a_reply_cut_off_right_after_an_unfinished_turn_lets_the_next_turn_continue_it():
    rig = Rig(FakeClock(), realtime=True)
    rig.llm.gate.clear()  # its first token has not come yet
    turn = TurnTimeline(transcript="Tell me a", end_of_turn_at_s=0.0)

    async def main():
        reply = rig.replies.start(turn)
        await settle()
        rig.clock.advance(0.4)
        rig.speech_at = 0.4  # the user went on 0.4 s after the end of turn (Conversation.cut_off)
        rig.replies.interrupt_running("new_turn")
        return reply

    reply = run(main, rig)
    assert rig.kinds() == ["ReplyStarted", "ReplyInterrupted", "TurnCompleted"]
    assert rig.delivered()[-1] == TurnCompleted(turn, reply.id, interrupted=True) and turn.reply_done_at_s == 0.4
    nxt = TurnTimeline(transcript="story about a cat")
    rig.conversation.continue_turn(nxt)
    assert nxt.transcript == "Tell me a story about a cat" and nxt.continuation == Continuation("Tell me a")


def test_a_failing_stage_is_reported_and_a_held_one_handed_back():
    class FailingStream:
        def __init__(self) -> None:
            self.stats = ReplyStats(requested_at_s=0.0)

        def cancel(self) -> None:
            pass

        async def __aiter__(self):
            raise RuntimeError("context full")
            yield  # an async generator

    rig = Rig(FakeClock())

    async def main():
        reply = rig.replies.start(TurnTimeline(transcript="What time is it?"))
        reply.stream = FailingStream()
        with pytest.raises(StageError):
            await reply
        held = rig.replies.new(TurnTimeline(), stream=FailingStream(), held=True, hypothesis="Hi", messages=[])
        held.start()
        with pytest.raises(StageError):
            await held
        return reply, held

    reply, held = run(main, rig)
    errors = [e for e in rig.out if isinstance(e, StageError)]
    assert len(errors) == 1 and errors[0].code == "llm_failed" and "context full" in str(errors[0])
    assert rig.replies.current is None and rig.turns.agent is AgentState.LISTENING
    assert rig.held_failed == [held]  # dropped by the head start, never shown to the consumer
    assert isinstance(rig.delivered()[0], ReplyStarted) and not any(
        isinstance(e, (ReplyAudioStart, TurnCompleted)) for e in rig.delivered())
