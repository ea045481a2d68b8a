"""`Listening` (headstart/session/listening.py), the session's listener and its reading task, on its own with the
scripted listener (tests/fakes.py): nothing runs before the first audio, events go out in order,
commit before any audio does nothing, a restart drops the listener and its task, end_input delivers
the rest, and a listener that raises is reported once."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from fakes import ScriptedListener, settle

from headstart.audio import AudioFrame
from headstart.events import EndOfTurn, FinalTranscript, SpeechStarted
from headstart.session.listening import Listening

SCRIPT = [(0.2, SpeechStarted(0.2)), (0.6, FinalTranscript("hello", 0.5)), (0.8, EndOfTurn(0.8, None))]


def frame(seconds: float = 0.1) -> AudioFrame:
    return AudioFrame(np.zeros(int(16000 * seconds), np.float32), 16000)


class Rig:
    def __init__(self, script=SCRIPT) -> None:
        self.made: list[ScriptedListener] = []
        self.events: list[object] = []
        self.errors: list[Exception] = []
        self.script = script
        self.listening = Listening(self.make, self.events.append, self.errors.append)

    def make(self) -> ScriptedListener:
        self.made.append(ScriptedListener(self.script))
        return self.made[-1]


def test_nothing_runs_before_the_first_audio_then_events_go_out_in_order():
    async def main():
        rig = Rig()
        await rig.listening.commit()  # before any audio: nothing to end
        assert rig.listening.tasks == [] and not rig.listening.started and rig.events == []
        for _ in range(7):
            await rig.listening.push(frame(), bargein_armed=True)
            await settle()
        assert rig.listening.started and [t.get_name() for t in rig.listening.tasks] == ["session-listen"]
        assert rig.made[0].bargein_armed is True
        await rig.listening.end_input()
        return rig

    rig = asyncio.run(main())
    assert rig.events == [e for _, e in SCRIPT] and rig.errors == []
    assert rig.listening.tasks == [] and len(rig.made) == 1


def test_a_restart_drops_the_audio_in_progress_and_the_next_audio_starts_a_fresh_listener():
    async def main():
        rig = Rig()
        for _ in range(3):
            await rig.listening.push(frame(), bargein_armed=False)
            await settle()
        (old_task,) = rig.listening.tasks
        await rig.listening.restart()
        assert old_task.cancelled() and rig.listening.tasks == [] and not rig.listening.started
        assert rig.listening.listener is rig.made[1]
        await rig.listening.push(frame(), bargein_armed=False)
        await rig.listening.end_input()
        return rig

    rig = asyncio.run(main())
    # the first listener's speech start was read before the restart; the fresh one's script from its start
    assert rig.events == [SCRIPT[0][1], *(e for _, e in SCRIPT)]
    assert len(rig.made) == 2 and (rig.made[0].audio_s, rig.made[1].audio_s) == pytest.approx((0.3, 0.1))


def test_a_listener_that_raises_is_reported_once_and_its_task_ends():
    class Broken(ScriptedListener):
        async def __anext__(self):
            raise RuntimeError("the listener's ASR failed")

    async def main():
        errors: list[Exception] = []
        listening = Listening(lambda: Broken([]), lambda event: None, errors.append)
        await listening.push(frame(), bargein_armed=False)
        await settle()
        return listening, errors

    listening, errors = asyncio.run(main())
    assert [str(e) for e in errors] == ["the listener's ASR failed"] and listening.tasks == []
