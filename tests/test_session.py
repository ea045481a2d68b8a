"""The Session driven only through its public API (`push_audio`, the event iterator, `end_input`) on a
FakeClock, with a scripted listener, LLM and synthesiser (tests/fakes.py): the events in order and the
turn's derived latencies, exactly. The head start holds the reply at the VAD's speech end and the end
of turn releases it; a turn whose final differs regenerates the reply on the final text."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import pytest
from fakes import InlineExecutor, ScriptedLLM, ScriptedListener, ScriptedTTS

from headstart.audio import AudioFrame
from headstart.clock import FakeClock
from headstart.session.components import Components
from headstart.config import PipelineConfig, SessionConfig
from headstart.events import (
    EndOfTurn,
    FinalTranscript,
    PartialTranscript,
    ReplyDone,
    SpeechEnded,
    SpeechStarted,
    TokenDelta,
)
from headstart.session.reply import ReplyAudio, ReplyAudioStart, ReplyStarted, ReplyUnspeakable, TurnCompleted
from headstart.tts.base import UNSPEAKABLE_FALLBACK
from headstart.session.session import Session

FRAME_S = 0.1


def user_turn(final: str) -> list:
    """One user turn by audio time: speech 0.3-1.5 s, the final at 1.6 s, the end of turn at 1.8 s."""
    return [
        (0.3, SpeechStarted(0.3)),
        (0.8, PartialTranscript("", "How are", 0.8)),
        (1.2, PartialTranscript("How are", "you?", 1.2)),
        (1.5, SpeechEnded(1.5)),
        (1.6, FinalTranscript(final, 1.5)),
        (1.8, EndOfTurn(1.8, 0.9)),
    ]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def run_turn(final: str, session_config: SessionConfig | None = None, answers: dict[str, str] | None = None,
             script: list | None = None):
    """Push 1.8 s of audio (the clock moves with it), let the first token come 0.2 s after the end of
    turn, and collect every event until the stream ends. Returns (events, llm, tts, history).
    `answers`: the scripted LLM's reply to each user text; `script`: the listener's events (default
    `user_turn(final)`)."""
    clock = FakeClock()
    config = replace(PipelineConfig(), session=session_config or SessionConfig(eou="none"))
    llm = ScriptedLLM(clock, answers or {"How are you?": "I am fine.", "How are you today?": "Still fine."})
    tts = ScriptedTTS(seconds_per_word=0.25)
    components = Components(config=config, asr=None, llm=llm, tts=tts, tts_executor=InlineExecutor())

    async def main():
        session = Session(components, clock, echo=None,
                          listener=lambda eou, acoustic: ScriptedListener(script or user_turn(final), eou, acoustic))
        events: list = []

        async def consume():
            async for event in session:
                events.append((round(clock.now(), 6), event))

        consumer = asyncio.create_task(consume())
        for _ in range(18):
            clock.advance(FRAME_S)
            await session.push_audio(AudioFrame(np.zeros(int(16000 * FRAME_S), np.float32), 16000))
            await settle()
        clock.advance(0.2)  # the LLM's first token comes 0.2 s after the end of turn
        llm.gate.set()
        await settle()
        await session.end_input()
        await asyncio.wait_for(consumer, 10)
        return events, session.history

    try:
        events, history = asyncio.run(main())
    finally:
        components.close()
    return events, llm, tts, history


def kinds(events) -> list[str]:
    return [type(e).__name__ for _, e in events]


def test_a_held_reply_released_at_the_end_of_turn():
    events, llm, tts, history = run_turn("How are you?")
    assert kinds(events) == [
        "SpeechStarted", "PartialTranscript", "PartialTranscript", "SpeechEnded", "FinalTranscript",
        "EndOfTurn", "ReplyStarted", "TokenDelta", "TokenDelta", "TokenDelta", "ReplyDone",
        "ReplyAudioStart", "ReplyAudio", "TurnCompleted"]
    at = {type(e).__name__: t for t, e in reversed(events)}  # the first of each kind
    assert (at["SpeechStarted"], at["SpeechEnded"], at["FinalTranscript"], at["EndOfTurn"]) == (0.3, 1.5, 1.6, 1.8)
    assert (at["ReplyStarted"], at["TokenDelta"], at["ReplyAudio"]) == (1.8, 2.0, 2.0)
    started = next(e for _, e in events if isinstance(e, ReplyStarted))
    assert started.transcript == "How are you?"
    assert "".join(e.text for _, e in events if isinstance(e, TokenDelta)) == "I am fine."
    assert all(e.reply_id == started.reply_id for _, e in events
               if isinstance(e, (TokenDelta, ReplyDone, ReplyAudioStart, ReplyAudio, TurnCompleted)))
    (audio,) = [e for _, e in events if isinstance(e, ReplyAudio)]
    assert audio.frame.duration_s == pytest.approx(0.75)  # three words of the scripted voice
    # one prefill turn: opened before the user spoke (prewarm), fed every partial, gave the reply
    (turn,) = llm.turns
    assert turn.updates == ["", "How are", "How are you?"]
    assert llm.asked == [[{"role": "system", "content": PipelineConfig().llm.system_prompt},
                          {"role": "user", "content": "How are you?"}]]
    assert tts.spoken == ["I am fine."]
    assert history == [{"role": "user", "content": "How are you?"}, {"role": "assistant", "content": "I am fine."}]

    timeline = events[-1][1].timeline
    assert timeline.transcript == "How are you?" and timeline.reply == "I am fine."
    metrics = timeline.metrics()
    expected = {"vad_end_to_final_s": 0.1, "vad_end_to_turn_end_s": 0.3, "vad_end_to_first_token_s": 0.5,
                "vad_end_to_first_audio_s": 0.5, "turn_end_to_first_audio_s": 0.2, "ttft_s": 0.2,
                "tts_ttfa_s": 0.0}
    assert {k: metrics[k] for k in expected} == pytest.approx(expected, abs=1e-9)
    head = timeline.head_start
    assert (head.preemptive, head.release.lead_s, head.hits) == ("hit", 0.3, 1)
    assert head.release.held_tokens == 0  # the first token came after the release
    assert timeline.eou_probability == 0.9 and timeline.eou.computed == 0


def test_a_reply_the_voice_cannot_speak_is_heard_as_a_short_fallback_and_an_event_says_so():
    """A reply only in Japanese used to reach the voice as it was (the default voice made 0 s of it)."""
    events, llm, tts, history = run_turn("How are you?", answers={"How are you?": "正午です。"})
    assert tts.spoken == [UNSPEAKABLE_FALLBACK]
    (audio,) = [e for _, e in events if isinstance(e, ReplyAudio)]
    assert audio.frame.duration_s > 1.0
    (unspeakable,) = [e for _, e in events if isinstance(e, ReplyUnspeakable)]
    started = next(e for _, e in events if isinstance(e, ReplyStarted))
    assert unspeakable == ReplyUnspeakable(started.reply_id, "正午です。", UNSPEAKABLE_FALLBACK)
    assert kinds(events).index("ReplyUnspeakable") < kinds(events).index("TurnCompleted")
    assert history[-1] == {"role": "assistant", "content": "正午です。"}  # the chat keeps what the LLM said


@pytest.mark.parametrize("filler", ["Uh?", "Um, uh.", "Mm-hmm."])
def test_a_lone_filler_gets_no_reply_like_speech_without_words(filler):
    """"Uh?" alone (0.3 s) used to end a turn and get a reply; now it is handled as an empty final:
    the final goes out, no end of turn, no reply, nothing asked of the LLM."""
    script = [(0.3, SpeechStarted(0.3)), (0.5, PartialTranscript("", filler, 0.5)), (0.6, SpeechEnded(0.6)),
              (0.7, FinalTranscript(filler, 0.6)), (0.9, EndOfTurn(0.9, 0.9))]
    events, llm, tts, history = run_turn(filler, script=script)
    assert kinds(events) == ["SpeechStarted", "PartialTranscript", "SpeechEnded", "FinalTranscript"]
    assert llm.asked == [] and tts.spoken == [] and history == []
    empty = [(0.3, SpeechStarted(0.3)), (0.6, SpeechEnded(0.6)), (0.7, FinalTranscript("", 0.6))]
    assert kinds(run_turn("", script=empty)[0]) == ["SpeechStarted", "SpeechEnded", "FinalTranscript"]


def test_a_final_that_differs_drops_the_held_reply_and_answers_the_final():
    events, llm, tts, history = run_turn("How are you today?")
    assert kinds(events) == [
        "SpeechStarted", "PartialTranscript", "PartialTranscript", "SpeechEnded", "FinalTranscript",
        "EndOfTurn", "ReplyStarted", "TokenDelta", "TokenDelta", "ReplyDone",
        "ReplyAudioStart", "ReplyAudio", "TurnCompleted"]
    # held on the partial at the speech end, dropped by the final, held again on it, released
    assert [m[-1]["content"] for m in llm.asked] == ["How are you?", "How are you today?"]
    assert "".join(e.text for _, e in events if isinstance(e, TokenDelta)) == "Still fine."
    assert tts.spoken == ["Still fine."]  # not one sound of the stale reply
    timeline = events[-1][1].timeline
    assert timeline.head_start.preemptive == "hit" and timeline.head_start.misses == 1
    assert timeline.preemptive_drops == ["text_changed"]
    assert timeline.head_start.release.lead_s == pytest.approx(0.2)  # held since the final at 1.6 s
    assert timeline.metrics()["turn_end_to_first_audio_s"] == pytest.approx(0.2, abs=1e-9)
    assert history[-1] == {"role": "assistant", "content": "Still fine."}


def test_without_the_head_start_the_reply_starts_at_the_end_of_turn():
    events, llm, tts, _ = run_turn("How are you?", SessionConfig(eou="none", head_start=False))
    assert llm.turns == []  # no prefill turn, no held reply
    assert len(llm.asked) == 1
    at = {type(e).__name__: t for t, e in reversed(events)}
    assert (at["ReplyStarted"], at["TokenDelta"], at["ReplyAudio"]) == (1.8, 2.0, 2.0)
    head = events[-1][1].timeline.head_start
    assert head.preemptive == "none" and head.enabled is False


def test_a_confirmed_reply_in_one_session_drops_another_sessions_held_reply():
    """Sessions share the llm thread through Components.llm_priority only: B's confirmed reply drops
    A's held reply while it still generates; A's end of turn then generates its reply afresh (a miss)."""
    clock = FakeClock()
    config = replace(PipelineConfig(), session=SessionConfig(eou="none"))
    llm = ScriptedLLM(clock, {"How are you?": "I am fine.", "Hello there.": "Hi."})
    components = Components(config=config, asr=None, llm=llm, tts=ScriptedTTS(), tts_executor=InlineExecutor())
    plain = replace(components, config=replace(config, session=SessionConfig(eou="none", head_start=False)))
    script_a = [(0.3, SpeechStarted(0.3)), (1.2, PartialTranscript("", "How are you?", 1.2)),
                (1.5, SpeechEnded(1.5)), (1.6, FinalTranscript("How are you?", 1.5)), (2.4, EndOfTurn(2.4, 0.9))]
    script_b = [(0.3, SpeechStarted(0.3)), (1.0, PartialTranscript("", "Hello there.", 1.0)),
                (1.2, SpeechEnded(1.2)), (1.3, FinalTranscript("Hello there.", 1.2)), (1.8, EndOfTurn(1.8, 0.9))]

    async def main():
        a = Session(components, clock, echo=None, listener=lambda *s: ScriptedListener(script_a, *s))
        b = Session(plain, clock, echo=None, listener=lambda *s: ScriptedListener(script_b, *s))
        events: dict[str, list] = {"a": [], "b": []}

        async def consume(name, session):
            async for event in session:
                events[name].append(event)

        consumers = [asyncio.create_task(consume("a", a)), asyncio.create_task(consume("b", b))]
        for _ in range(25):
            clock.advance(FRAME_S)
            for session in (a, b):
                await session.push_audio(AudioFrame(np.zeros(int(16000 * FRAME_S), np.float32), 16000))
            await settle()
        llm.gate.set()
        await settle()
        await a.end_input()
        await b.end_input()
        await asyncio.wait_for(asyncio.gather(*consumers), 10)
        return events

    try:
        events = asyncio.run(main())
    finally:
        components.close()
    # A held "How are you?" at its speech end (1.5 s); B's confirmed reply (1.8 s) dropped it unheard
    assert [m[-1]["content"] for m in llm.asked] == ["How are you?", "Hello there.", "How are you?"]
    (turn_a,) = [e.timeline for e in events["a"] if isinstance(e, TurnCompleted)]
    assert turn_a.head_start.preemptive == "miss" and turn_a.preemptive_drops == ["confirmed_elsewhere"]
    assert turn_a.reply == "I am fine." and turn_a.reply_started_at_s == pytest.approx(2.4)
    (turn_b,) = [e.timeline for e in events["b"] if isinstance(e, TurnCompleted)]
    assert turn_b.reply == "Hi." and turn_b.head_start.preemptive == "none"


def test_a_session_runs_no_task_before_its_first_audio_and_none_once_closed():
    clock = FakeClock()
    config = replace(PipelineConfig(), session=SessionConfig(eou="none"))
    llm = ScriptedLLM(clock, {"How are you?": "I am fine."})  # its gate stays shut: the reply waits
    components = Components(config=config, asr=None, llm=llm, tts=ScriptedTTS(), tts_executor=InlineExecutor())

    async def main():
        session = Session(components, clock, echo=None,
                          listener=lambda eou, acoustic: ScriptedListener(user_turn("How are you?"), eou, acoustic))
        assert session.tasks == []
        for _ in range(18):  # to the end of turn: the released reply waits for its first token
            clock.advance(FRAME_S)
            await session.push_audio(AudioFrame(np.zeros(int(16000 * FRAME_S), np.float32), 16000))
            await settle()
        names = sorted(t.get_name() for t in session.tasks)  # the listener's, the released reply's ("-r7")
        assert session.reply_active and names[0].startswith("session-held-r") and names[1:] == ["session-listen"]
        running = session.tasks
        await session.aclose()
        return running, session.tasks

    try:
        running, after = asyncio.run(main())
    finally:
        components.close()
    assert after == [] and all(t.done() for t in running)


def test_drain_resumes_a_paused_reply_and_ends_the_stream():
    """The server's shutdown (`Session.drain`) while the user has started to speak over the reply, which
    the client plays (paused for a possible barge-in): no words can confirm that barge-in now, so the
    reply resumes; the event stream ends, and audio is refused. (A reply whose audio is still leaving
    is waited for: tests/test_server_shutdown.py.)"""
    from headstart.session.reply import ReplyPaused, ReplyResumed

    clock = FakeClock()
    config = replace(PipelineConfig(), session=SessionConfig(eou="none"))
    llm = ScriptedLLM(clock, default="One two three four five six seven eight nine ten eleven twelve.")
    llm.gate.set()
    tts = ScriptedTTS(seconds_per_word=0.25)  # 3 s of reply audio, played in real time from 1.8 s
    components = Components(config=config, asr=None, llm=llm, tts=tts, tts_executor=InlineExecutor())
    script = [*user_turn("What time is it?"), (2.4, SpeechStarted(2.4)), (3.5, SpeechEnded(3.5)),
              (3.6, FinalTranscript("Wait a moment.", 3.5)), (3.8, EndOfTurn(3.8, 0.9))]

    async def main():
        session = Session(components, clock, echo=None, realtime_playback=True, playback_lead_s=1.0,
                          listener=lambda eou, acoustic: ScriptedListener(script, eou, acoustic))
        events: list = []

        async def consume():
            async for event in session:
                events.append(event)

        consumer = asyncio.create_task(consume())
        for _ in range(25):  # 2.5 s: the user speaks over the reply from 2.4 s
            clock.advance(FRAME_S)
            await session.push_audio(AudioFrame(np.zeros(int(16000 * FRAME_S), np.float32), 16000))
            await settle()
        before = list(events)
        await asyncio.wait_for(session.drain(), 10)
        await asyncio.wait_for(consumer, 10)
        with pytest.raises(RuntimeError):
            await session.push_audio(AudioFrame(np.zeros(1600, np.float32), 16000))
        await session.commit()  # nothing: the listener is gone
        return before, events[len(before):]

    try:
        before, after = asyncio.run(main())
    finally:
        components.close()
    assert isinstance(before[-1], ReplyPaused) and [type(e) for e in after] == [ReplyResumed]
    assert after[0].reply_id == before[-1].reply_id
    assert [e.text for e in before if isinstance(e, FinalTranscript)] == ["What time is it?"]
