"""Tools through the Session (FakeClock, scripted listener, LLM and voice: tests/fakes.py) with a spy
tool that records when it runs: a held reply may be a tool reply, but its tool runs only once the end
of turn releases it, exactly once, and a held reply that is dropped (the user goes on speaking, the
input is cleared, the session closes) or that belongs to another session leaves no side effect. Also:
the history keeps the spoken answers (so "how long is left?" and "cancel it" follow), a failing tool
is an apology and an error event, and a timer that fires speaks by itself. Every run is reported:
`ToolCalled` before it and its `ToolResult` after it (also for a tool that fails, times out, or whose
reply is cut off while it runs), and none for a held reply that is dropped."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import numpy as np
import pytest
from fakes import (
    AudioDriver,
    InlineExecutor,
    ScriptedListener,
    ScriptedLLM,
    ScriptedTTS,
    settle,
)

from headstart.audio import AudioFrame
from headstart.clock import FakeClock
from headstart.config import PipelineConfig, SessionConfig
from headstart.events import (
    EndOfTurn,
    FinalTranscript,
    PartialTranscript,
    SpeechEnded,
    SpeechStarted,
    TokenDelta,
)
from headstart.session.components import Components
from headstart.session.reply import ReplyStarted, StageError, ToolCalled, ToolResult, TurnCompleted
from headstart.session.session import Session, TimerFired
from headstart.timeline import ToolUse
from headstart.tools import APOLOGY, ToolRegistry
from headstart.tools.lists import ListStore

SPY_TEXT = "Ring the bell please."


class Spy:
    """A tool that records the clock time of every run."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.runs: list[float] = []
        self.registry = ToolRegistry()

        @self.registry.tool(sentences=["ring the bell"])
        def ring_bell() -> str:
            self.runs.append(self.clock.now())
            return "Ding."


def turn_script(final: str, start_s: float = 0.3, words: tuple[str, str] = ("Ring the", "bell please.")) -> list:
    """Speech start_s .. +1.2 s, the final at +1.3 s, the end of turn at +1.5 s."""
    s = start_s
    return [(s, SpeechStarted(s)), (s + 0.5, PartialTranscript("", words[0], s + 0.5)),
            (s + 0.9, PartialTranscript(words[0], words[1], s + 0.9)), (s + 1.2, SpeechEnded(s + 1.2)),
            (s + 1.3, FinalTranscript(final, s + 1.2)), (s + 1.5, EndOfTurn(s + 1.5, 0.9))]


class Rig:
    def __init__(self, tmp_path, script, *, clock: FakeClock | None = None, components: Components | None = None,
                 answers: dict[str, str] | None = None, head_start: bool = True) -> None:
        self.clock = clock or FakeClock()
        config = replace(PipelineConfig(), session=SessionConfig(eou="none", tools=True, head_start=head_start))
        self.llm = ScriptedLLM(self.clock, answers or {})
        self.llm.gate.set()
        self.components = components or Components(config=config, asr=None, llm=self.llm, tts=ScriptedTTS(),
                                                   tts_executor=InlineExecutor())
        self.spy = Spy(self.clock)
        scripts = [script]  # a listener made again (a cleared input) hears nothing more
        self.session = Session(self.components, self.clock, echo=None, tools=self.spy.registry,
                               lists=ListStore(tmp_path / "lists.sqlite3"),
                               listener=lambda eou, acoustic: ScriptedListener(scripts.pop() if scripts else [],
                                                                               eou, acoustic))
        assert self.session.timers is not None
        self.session.timers.poll_s = 0.005  # the watch looks at the FakeClock often (its sleeps are wall time)
        self.events: list = []
        self.errors: list = []
        self.driver = AudioDriver(self.session, self.clock)

    async def consume(self) -> None:
        while True:
            try:
                event = await self.session.__anext__()
            except StopAsyncIteration:
                return
            except StageError as exc:
                self.errors.append(exc)
                continue
            self.events.append(event)

    async def finish(self) -> None:
        for _ in range(50):  # the tool runs on a worker thread: let it land
            await asyncio.sleep(0.01)
            await settle()
        await self.session.end_input()

    def kinds(self) -> list[str]:
        return [type(e).__name__ for e in self.events]

    def spoken(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TokenDelta))

    def turns(self) -> list:
        return [e for e in self.events if isinstance(e, TurnCompleted)]

    def tool_events(self) -> list:
        return [e for e in self.events if isinstance(e, ToolCalled | ToolResult)]


async def let_tools_run() -> None:
    """A tool runs on a worker thread: give it wall time to land (the FakeClock stands still)."""
    for _ in range(30):
        await asyncio.sleep(0.01)
        await settle()


def run(rig: Rig, until_s: float, between=None, pauses: tuple[float, ...] = ()) -> None:
    async def main():
        consumer = asyncio.create_task(rig.consume())
        for pause_s in pauses:
            await rig.driver.until(pause_s, between)
            await let_tools_run()
        await rig.driver.until(until_s, between)
        await rig.finish()
        await asyncio.wait_for(consumer, 10)

    asyncio.run(main())


def test_a_held_tool_reply_runs_its_tool_once_after_the_release(tmp_path):
    rig = Rig(tmp_path, turn_script(SPY_TEXT))
    held: list = []
    run(rig, 2.0, {1.6: lambda: held.append((rig.session.head_start.held, list(rig.spy.runs)))})
    (reply, runs_while_held), = held
    assert reply is not None and reply.tool is not None and runs_while_held == []  # held, not run
    (ran_at_s,) = rig.spy.runs  # exactly once, not before the end of turn (1.8 s)
    assert ran_at_s >= 1.8 - 1e-9
    assert rig.spoken() == "Ding."
    (turn,) = rig.turns()
    assert turn.timeline.head_start is not None and turn.timeline.head_start.preemptive == "hit"
    assert turn.timeline.tool == ToolUse(name="ring_bell", arguments={}, ok=True)
    assert rig.llm.asked == []  # a matched turn needs no LLM pass
    assert rig.session.history[-2:] == [{"role": "user", "content": SPY_TEXT}, {"role": "assistant", "content": "Ding."}]


def test_a_released_tool_reply_reports_its_call_and_result_between_its_start_and_its_words(tmp_path):
    rig = Rig(tmp_path, turn_script(SPY_TEXT))
    run(rig, 2.0)
    called, result = rig.tool_events()
    (started,) = [e for e in rig.events if isinstance(e, ReplyStarted)]
    assert called == ToolCalled(started.reply_id, called.call_id, "ring_bell", {})
    assert (result.reply_id, result.call_id, result.name) == (started.reply_id, called.call_id, "ring_bell")
    assert result.ok and result.value == "Ding." and result.error == "" and result.duration_s >= 0
    kinds = rig.kinds()
    assert kinds.index("ReplyStarted") < kinds.index("ToolCalled") < kinds.index("ToolResult") < kinds.index("TokenDelta")


def test_a_timer_request_reports_its_arguments(tmp_path):
    rig = Rig(tmp_path, turn_script("Set a timer for one minute.", 0.3, ("Set a timer", "for one minute.")))
    run(rig, 2.0)
    called, result = rig.tool_events()
    assert (called.name, called.arguments) == ("timer_start", {"seconds": 60.0})
    assert result.ok and result.value == "Timer set for one minute."


def test_a_held_timer_reply_voices_its_likely_answer_before_the_release_and_starts_the_timer_after(tmp_path):
    rig = Rig(tmp_path, turn_script("Set a timer for one minute.", 0.3, ("Set a timer", "for one minute.")))
    tts = rig.components.tts
    held: list = []
    timers = rig.session.toolbox.timers
    run(rig, 2.0, {1.7: lambda: held.append((list(tts.spoken), list(timers.find()))),
                   1.95: lambda: held.append((list(tts.spoken), list(timers.find())))})
    (voiced_while_held, timers_while_held), (_, timers_after) = held
    assert voiced_while_held == ["Timer set for one minute."] and timers_while_held == []  # voiced, not run
    assert [t.duration_s for t in timers_after] == [60.0]  # released at 1.8 s: the timer runs
    assert tts.spoken == ["Timer set for one minute."]  # voiced once: the release used that audio
    assert rig.spoken() == "Timer set for one minute."
    (turn,) = rig.turns()
    assert turn.timeline.tool == ToolUse(name="timer_start", arguments={"seconds": 60.0}, ok=True)


def test_a_registered_tool_has_no_preview_and_is_voiced_after_it_ran(tmp_path):
    rig = Rig(tmp_path, turn_script(SPY_TEXT))
    tts = rig.components.tts
    held: list = []
    run(rig, 2.0, {1.7: lambda: held.append(list(tts.spoken))})
    assert held == [[]] and tts.spoken == ["Ding."]


def test_a_confirmed_tool_reply_runs_once_without_the_head_start(tmp_path):
    rig = Rig(tmp_path, turn_script(SPY_TEXT), head_start=False)
    run(rig, 2.0)
    assert len(rig.spy.runs) == 1 and rig.spy.runs[0] >= 1.8 - 1e-9 and rig.spoken() == "Ding."


def test_a_dropped_held_reply_never_runs_its_tool_when_the_user_goes_on(tmp_path):
    # the speech ends at 1.5 s (a reply is held on "Ring the bell please"), then the user goes on
    script = [e for e in turn_script(SPY_TEXT) if not isinstance(e[1], (FinalTranscript, EndOfTurn))]
    script += [(1.7, SpeechStarted(1.7)), (2.0, PartialTranscript("Ring the bell please.", " No, wait.", 2.0)),
               (2.4, SpeechEnded(2.4)), (2.5, FinalTranscript("Ring the bell please. No, wait.", 2.4)),
               (2.7, EndOfTurn(2.7, 0.9))]
    rig = Rig(tmp_path, script)
    held: list = []
    run(rig, 3.0, {1.6: lambda: held.append(rig.session.head_start.held)})
    assert held[0] is not None and held[0].cancelled  # it was held, then dropped
    assert rig.spy.runs == []  # no side effect
    assert rig.tool_events() == []  # and no call reported
    assert rig.spoken() == "I do not know."  # the LLM answered the longer turn


def test_a_held_reply_dropped_by_a_cleared_input_or_a_closed_session_never_runs(tmp_path):
    rig = Rig(tmp_path, turn_script(SPY_TEXT))

    async def main():
        consumer = asyncio.create_task(rig.consume())
        await rig.driver.until(1.6)
        assert rig.session.head_start.held is not None
        await rig.session.clear_input()
        await rig.finish()
        await asyncio.wait_for(consumer, 10)

    asyncio.run(main())
    assert rig.spy.runs == [] and "ReplyStarted" not in rig.kinds() and rig.tool_events() == []

    closing = Rig(tmp_path, turn_script(SPY_TEXT))

    async def close_early():
        consumer = asyncio.create_task(closing.consume())
        await closing.driver.until(1.6)
        assert closing.session.head_start.held is not None
        await closing.session.aclose()
        await asyncio.wait_for(consumer, 10)
        for _ in range(20):
            await asyncio.sleep(0.01)

    asyncio.run(close_early())
    assert closing.spy.runs == []


def test_a_barge_in_with_a_tool_request_runs_it_once_at_its_end_of_turn(tmp_path):
    # a first (LLM) reply is speaking when the user barges in and asks for the tool
    first = [(0.3, SpeechStarted(0.3)), (0.6, PartialTranscript("", "Tell me a story.", 0.6)),
             (0.8, SpeechEnded(0.8)), (0.9, FinalTranscript("Tell me a story.", 0.8)), (1.0, EndOfTurn(1.0, 0.9))]
    rig = Rig(tmp_path, first + turn_script(SPY_TEXT, start_s=1.3),
              answers={"Tell me a story.": " ".join(["once upon a time"] * 20)})
    rig.session.turns.realtime_playback = True  # the story is still playing when the user speaks
    seen: list = []
    run(rig, 3.2, {2.7: lambda: seen.append(list(rig.spy.runs))})
    assert seen == [[]]  # nothing ran before the barge-in's end of turn
    assert len(rig.spy.runs) == 1 and rig.spy.runs[0] >= 2.8 - 1e-9
    assert "ReplyInterrupted" in rig.kinds() and rig.spoken().endswith("Ding.")


def test_two_sessions_hold_tool_replies_at_once_and_only_the_released_one_runs(tmp_path):
    clock = FakeClock()
    a = Rig(tmp_path, turn_script(SPY_TEXT), clock=clock)
    script_b = [e for e in turn_script(SPY_TEXT) if not isinstance(e[1], (FinalTranscript, EndOfTurn))]
    b = Rig(tmp_path, script_b, clock=clock, components=a.components)
    b.spy = a.spy  # one spy for both sessions: its runs are the sum of theirs
    b.session = Session(a.components, clock, echo=None, tools=a.spy.registry,
                        lists=ListStore(tmp_path / "lists.sqlite3"),
                        listener=lambda eou, acoustic: ScriptedListener(script_b, eou, acoustic))
    b.driver = AudioDriver(b.session, clock)
    held: list = []

    async def main():
        consumers = [asyncio.create_task(r.consume()) for r in (a, b)]
        for step in range(20):  # the two sessions' audio interleaved, the clock moving with both
            audio_s = round((step + 1) * 0.1, 6)
            a.driver.clock = b.driver.clock = clock
            await a.driver.until(audio_s)
            b.driver.audio_s = audio_s - 0.1
            await b.session.push_audio(AudioFrame(np.zeros(1600, np.float32), 16000))
            await settle()
            if abs(audio_s - 1.6) < 1e-6:
                held.append((a.session.head_start.held, b.session.head_start.held, list(a.spy.runs)))
        await b.session.aclose()  # b never reaches its end of turn
        await a.finish()
        await asyncio.wait_for(asyncio.gather(*consumers), 10)

    asyncio.run(main())
    (held_a, held_b, runs), = held
    assert held_a is not None and held_b is not None and runs == []  # both held, nothing ran
    assert len(a.spy.runs) == 1  # a's release ran it once; b's held reply left no side effect
    assert a.spoken() == "Ding." and b.spoken() == ""


def test_the_history_keeps_the_answers_so_follow_ups_work(tmp_path):
    script = (turn_script("Set a timer for ten minutes.", 0.3, ("Set a timer", "for ten minutes."))
              + turn_script("How long is left?", 2.3, ("How long", "is left?"))
              + turn_script("Cancel it.", 4.3, ("Cancel", "it.")))
    rig = Rig(tmp_path, script)
    run(rig, 6.2, pauses=(2.0, 4.0))
    answers = [m["content"] for m in rig.session.history if m["role"] == "assistant"]
    assert answers == ["Timer set for ten minutes.", "Your ten minute timer has nine minutes and fifty-eight seconds left.",
                       "Cancelled your ten minute timer."]
    assert rig.llm.asked == [] and rig.session.toolbox.timers.find() == []


def test_a_failing_tool_is_an_apology_and_an_error_event(tmp_path):
    rig = Rig(tmp_path, turn_script(SPY_TEXT))

    @rig.spy.registry.tool(name="ring_bell", sentences=["ring the bell"])
    def broken() -> str:
        raise RuntimeError("the bell is broken")

    rig.session.toolbox.registry.add(rig.spy.registry.get("ring_bell"))
    run(rig, 2.0)
    assert rig.spoken() == APOLOGY
    (error,) = rig.errors
    assert error.code == "tool_failed" and "the bell is broken" in str(error)
    assert rig.session.history[-1] == {"role": "assistant", "content": APOLOGY}
    called, result = rig.tool_events()
    assert result.call_id == called.call_id and not result.ok and result.value is None
    assert "RuntimeError: the bell is broken" in result.error


def test_a_tool_that_outlasts_its_timeout_is_a_failed_result_and_the_session_goes_on(tmp_path):
    script = turn_script(SPY_TEXT) + turn_script("What's up?", 2.3, ("What's", "up?"))
    rig = Rig(tmp_path, script, answers={"What's up?": "Not much."})
    release = threading.Event()

    @rig.spy.registry.tool(name="ring_bell", sentences=["ring the bell"], timeout_s=0.05)
    def stuck() -> str:
        release.wait(5)
        return "Ding."

    rig.session.toolbox.registry.add(rig.spy.registry.get("ring_bell"))
    try:
        run(rig, 4.2, pauses=(2.0,))
    finally:
        release.set()
    called, result = rig.tool_events()
    assert not result.ok and "timed out after 0.05 s" in result.error
    assert rig.spoken() == APOLOGY + "Not much."  # the apology, then the next turn as usual
    assert [e.code for e in rig.errors] == ["tool_failed"]


def test_a_reply_cut_off_while_its_tool_runs_still_reports_the_result(tmp_path):
    rig = Rig(tmp_path, turn_script(SPY_TEXT), head_start=False)
    release = threading.Event()
    ran: list[float] = []

    @rig.spy.registry.tool(name="ring_bell", sentences=["ring the bell"])
    def slow() -> str:
        release.wait(5)
        ran.append(rig.clock.now())
        return "Ding."

    rig.session.toolbox.registry.add(rig.spy.registry.get("ring_bell"))

    async def main():
        consumer = asyncio.create_task(rig.consume())
        await rig.driver.until(2.0)
        await let_tools_run()
        assert [type(e).__name__ for e in rig.tool_events()] == ["ToolCalled"]  # the tool is running
        assert await rig.session.interrupt("client")
        release.set()
        await rig.finish()
        await asyncio.wait_for(consumer, 10)

    try:
        asyncio.run(main())
    finally:
        release.set()
    called, result = rig.tool_events()
    assert len(ran) == 1 and result.call_id == called.call_id and result.ok and result.value == "Ding."
    assert "ReplyInterrupted" in rig.kinds() and rig.spoken() == ""
    assert rig.session.tasks == []


def test_a_timer_speaks_when_it_fires_and_a_closed_session_cancels_its_timers(tmp_path, caplog):
    script = turn_script("Set a timer for 2 seconds.", 0.3, ("Set a timer", "for 2 seconds."))
    rig = Rig(tmp_path, script)
    run(rig, 5.0)
    (fired,) = [e for e in rig.events if isinstance(e, TimerFired)]
    assert (fired.kind, fired.label, fired.text) == ("timer", "two second", "Your two second timer is done.")
    started = [e for e in rig.events if isinstance(e, ReplyStarted)]
    assert len(started) == 2 and started[1].transcript == ""  # agent-initiated: no user turn
    assert rig.spoken() == "Timer set for two seconds.Your two second timer is done."
    assert rig.session.history[-1] == {"role": "assistant", "content": "Your two second timer is done."}

    ended = Rig(tmp_path, turn_script("Set a timer for ten minutes.", 0.3, ("Set a timer", "for ten minutes.")))
    with caplog.at_level("INFO", logger="headstart.tools.timers"):
        run(ended, 2.0)
    assert "its timer 'ten minute'" in caplog.text and "is cancelled" in caplog.text
    assert ended.session.toolbox.timers.find() == [] and ended.session.tasks == []


@pytest.mark.slow
def test_with_the_real_llm_a_tool_answers_what_it_serves_and_the_llm_the_rest(tmp_path):
    """smollm2-135m behind the session: the sum comes from the calculator (no LLM pass for it), the
    weather (no tool serves it) from the LLM, and the history holds both."""
    from prepared import llm_engine

    from headstart.config import LLMConfig
    from headstart.llm.local import LocalLLM

    llm_config = LLMConfig(model="smollm2-135m", dtype="float32", max_new_tokens=12)
    engine = llm_engine(llm_config)
    config = replace(PipelineConfig(), llm=llm_config, session=SessionConfig(eou="none", tools=True))
    components = Components(config=config, asr=None, llm=LocalLLM(engine), tts=ScriptedTTS(),
                            tts_executor=InlineExecutor())
    script = (turn_script("What is 17 times 23?", 0.3, ("What is", "17 times 23?"))
              + turn_script("What's the weather like today?", 2.3, ("What's the", "weather like today?")))
    rig = Rig(tmp_path, script, components=components)

    async def main():
        consumer = asyncio.create_task(rig.consume())
        await rig.driver.until(2.0)
        await let_tools_run()
        await rig.driver.until(4.2)
        await rig.session.end_input()  # waits for the LLM's reply
        await asyncio.wait_for(consumer, 120)

    try:
        asyncio.run(main())
    finally:
        components.close()
    first, second = rig.turns()
    assert first.timeline.reply == "17 times 23 is 391." and first.timeline.tool.name == "calculate"
    assert second.timeline.tool is None and second.timeline.reply.strip()
    assert rig.session.history[1] == {"role": "assistant", "content": "17 times 23 is 391."}
    assert [m["role"] for m in rig.session.history] == ["user", "assistant", "user", "assistant"]


def test_a_timer_announcement_yields_to_the_user_like_any_reply(tmp_path):
    # the timer (2 s) fires at 3.8 s, once the answer has played, and its announcement plays in real
    # time; the user speaks over it
    script = turn_script("Set a timer for 2 seconds.", 0.3, ("Set a timer", "for 2 seconds."))
    script += [(4.2, SpeechStarted(4.2)), (4.5, PartialTranscript("", "Okay thanks", 4.5))]
    rig = Rig(tmp_path, script)
    rig.session.turns.realtime_playback = True
    run(rig, 4.8, pauses=(2.0, 3.9))
    fired = [e for e in rig.events if isinstance(e, TimerFired)]
    assert [f.text for f in fired] == ["Your two second timer is done."]
    started = [e for e in rig.events if isinstance(e, ReplyStarted)]
    interrupted = [e for e in rig.events if type(e).__name__ == "ReplyInterrupted"]
    assert len(started) == 2 and [e.reply_id for e in interrupted] == [started[1].reply_id]


def spy_on_reminders(rig: Rig) -> list[float]:
    """Wrap the session's real `reminder_set` so that each run is recorded (the clock time) and then set."""
    runs: list[float] = []
    tool = rig.session.toolbox.registry.get("reminder_set")

    def reminder_set(task: str = "", when: str = "") -> str:
        runs.append(rig.clock.now())
        return tool.function(task=task, when=when)

    rig.session.toolbox.registry.add(replace(tool, function=reminder_set))
    return runs


REMINDER = "Remind me in 2 seconds to check the oven."


def test_a_reminder_speaks_its_task_when_it_fires_like_a_timer(tmp_path):
    rig = Rig(tmp_path, turn_script(REMINDER, 0.3, ("Remind me in 2 seconds", "to check the oven.")))
    runs = spy_on_reminders(rig)
    run(rig, 5.0)
    assert len(runs) == 1 and runs[0] >= 1.8 - 1e-9  # once, at the end of turn
    called, result = rig.tool_events()
    assert (called.name, called.arguments) == ("reminder_set", {"task": "check the oven", "when": "in 2 seconds"})
    (fired,) = [e for e in rig.events if isinstance(e, TimerFired)]
    assert (fired.kind, fired.label, fired.name, fired.text) == ("reminder", "check the oven", "",
                                                                "Reminder: check the oven.")
    started = [e for e in rig.events if isinstance(e, ReplyStarted)]
    assert len(started) == 2 and started[1].transcript == ""  # agent-initiated: no user turn
    assert rig.spoken() == "I'll remind you to check the oven in two seconds.Reminder: check the oven."
    assert rig.session.history[-1] == {"role": "assistant", "content": "Reminder: check the oven."}
    assert rig.llm.asked == []


def test_a_held_reminder_that_is_dropped_sets_nothing(tmp_path):
    script = [e for e in turn_script(REMINDER, 0.3, ("Remind me in 2 seconds", "to check the oven."))
              if not isinstance(e[1], (FinalTranscript, EndOfTurn))]
    script += [(1.7, SpeechStarted(1.7)), (2.0, PartialTranscript(REMINDER, " Actually, never mind.", 2.0)),
               (2.4, SpeechEnded(2.4)), (2.5, FinalTranscript(REMINDER + " Actually, never mind.", 2.4)),
               (2.7, EndOfTurn(2.7, 0.9))]
    rig = Rig(tmp_path, script)
    runs = spy_on_reminders(rig)
    held: list = []
    run(rig, 6.0, {1.6: lambda: held.append(rig.session.head_start.held)})
    assert held[0] is not None and held[0].tool is not None and held[0].cancelled  # held, then dropped
    assert runs == [] and rig.tool_events() == []  # nothing ran, nothing reported
    assert rig.session.toolbox.timers.find() == [] and not [e for e in rig.events if isinstance(e, TimerFired)]


def test_a_session_that_ends_cancels_its_reminders_with_a_log_line(tmp_path, caplog):
    rig = Rig(tmp_path, turn_script("Remind me to buy milk tomorrow morning.", 0.3,
                                    ("Remind me to buy milk", "tomorrow morning.")))
    with caplog.at_level("INFO", logger="headstart.tools.timers"):
        run(rig, 2.0)
    assert rig.spoken().startswith("I'll remind you to buy milk tomorrow at ")
    assert "its reminder 'buy milk'" in caplog.text and "is cancelled" in caplog.text
    assert rig.session.toolbox.timers.find() == [] and rig.session.tasks == []
