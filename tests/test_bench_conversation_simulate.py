"""`headstart bench conversation --simulate`: the skip-idle virtual clock's accounting with fakes (a fake
real-time source that only compute jobs advance, no model), the in-memory websocket against the real
server handler, and one real small run with the small models."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from headstart.bench.conversation.simulate import (
    InProcessServer,
    SkipIdleClock,
    SkipIdleLoop,
    TrackedExecutor,
    memory_pair,
    run_simulated,
    tracked_components,
)


class FakeReal:
    """A real-time source that moves only when a fake compute job says so (thread-safe)."""

    def __init__(self) -> None:
        self.t = 100.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.t

    def compute(self, seconds: float, result: object = None):
        def job():
            with self._lock:
                self.t += seconds
            return result

        return job


def run_on(clock: SkipIdleClock, coro_factory):
    with asyncio.Runner(loop_factory=lambda: SkipIdleLoop(clock)) as runner:
        return runner.run(coro_factory())


def test_idle_waits_are_skipped_and_compute_costs_its_real_time():
    real = FakeReal()
    clock = SkipIdleClock(real)
    asr = TrackedExecutor(ThreadPoolExecutor(1), clock)
    llm = TrackedExecutor(ThreadPoolExecutor(1), clock)

    async def main():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.sleep(5.0)  # nothing computes: skipped, no real time passes
        idle = loop.time() - t0
        t1 = loop.time()
        assert await loop.run_in_executor(asr, real.compute(0.3, "text")) == "text"
        one_job = loop.time() - t1
        # a timer due during a job does not fire early: the clock cannot skip while the job is in flight
        t2, skipped = loop.time(), clock.skipped_s
        sleeper = asyncio.create_task(asyncio.sleep(0.1))
        await asyncio.sleep(0)  # its timer is set (due in 0.1 s) before the job starts
        await loop.run_in_executor(llm, real.compute(0.4))
        await sleeper  # it fell due during the job: no further wait
        during = (loop.time() - t2, clock.skipped_s - skipped)
        # two jobs queued on one executor run one after the other: their costs add up
        t3 = loop.time()
        await asyncio.gather(loop.run_in_executor(asr, real.compute(0.2)), loop.run_in_executor(asr, real.compute(0.25)))
        serial = loop.time() - t3
        # the clock reading is the loop's time (every Clock user and asyncio.sleep agree)
        assert clock.now() == loop.time()
        return idle, one_job, during, serial

    idle, one_job, during, serial = run_on(clock, main)
    # a job's count drops on its worker thread just after its result woke the loop: let them finish
    asr.shutdown(wait=True)
    llm.shutdown(wait=True)
    assert idle == pytest.approx(5.0, abs=1e-6)
    assert one_job == pytest.approx(0.3, abs=1e-6)
    assert during[0] == pytest.approx(0.4, abs=1e-6) and during[1] == 0.0
    assert serial == pytest.approx(0.45, abs=1e-6)
    assert real.t == pytest.approx(100.0 + 0.3 + 0.4 + 0.45)  # only compute used "real" time
    assert clock.in_flight == 0 and clock.jobs == 4 and clock.skipped_s >= 5.0


def test_a_paced_turn_costs_its_compute_from_the_end_of_speech():
    """A scripted pipeline over the in-memory websocket: 20 ms frames paced on the virtual clock; at the
    end of speech the 'server' runs an ASR pass (0.25 s) and an LLM job (0.4 s) on their executors and
    answers. The client sees the answer 0.65 s after the end of speech; all the pacing was skipped."""
    real = FakeReal()
    clock = SkipIdleClock(real)
    asr = TrackedExecutor(ThreadPoolExecutor(1), clock)
    llm = TrackedExecutor(ThreadPoolExecutor(1), clock)
    frames, speech_end_frame = 50, 25

    async def server(ws):
        loop = asyncio.get_running_loop()
        n = 0
        async for message in ws:
            n += 1
            if n == speech_end_frame:
                text = await loop.run_in_executor(asr, real.compute(0.25, "hello"))
                reply = await loop.run_in_executor(llm, real.compute(0.4, text.upper()))
                await ws.send(reply)

    async def client():
        loop = asyncio.get_running_loop()
        ws, server_end = memory_pair()
        serving = asyncio.create_task(server(server_end))
        received = []

        async def receive():
            async for message in ws:
                received.append((loop.time(), message, clock.skipped_s))

        receiving = asyncio.create_task(receive())
        start = loop.time()
        end_at = None
        for k in range(frames):
            due = start + k * 0.02
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            await ws.send(b"\0" * 640)
            if k + 1 == speech_end_frame:
                end_at = loop.time()
        while not received:
            await asyncio.sleep(0.02)
        await ws.close()
        await asyncio.gather(serving, receiving)
        return received, end_at, start

    received, end_at, start = run_on(clock, client)
    assert [m for _, m, _ in received] == ["HELLO"]
    assert received[0][0] - end_at == pytest.approx(0.65, abs=1e-6)
    assert real.t == pytest.approx(100.65)  # the frames' 1 s of pacing cost no real time
    assert received[0][2] == pytest.approx(end_at - start, abs=1e-6)  # the 24 frames' pacing up to the end


def test_a_cancelled_queued_job_never_runs_and_is_not_in_flight():
    real = FakeReal()
    clock = SkipIdleClock(real)
    inner = ThreadPoolExecutor(1)
    ex = TrackedExecutor(inner, clock)
    gate = threading.Event()
    ran = []

    first = ex.submit(gate.wait)
    second = ex.submit(lambda: ran.append(1))
    assert clock.in_flight == 2 and second.cancel()
    gate.set()
    first.result(5)
    inner.shutdown(wait=True)
    assert ran == [] and clock.in_flight == 0


def test_a_failing_job_raises_at_the_awaiting_side():
    clock = SkipIdleClock(FakeReal())
    ex = TrackedExecutor(ThreadPoolExecutor(1), clock)

    def boom():
        raise ValueError("bad pass")

    async def main():
        with pytest.raises(ValueError, match="bad pass"):
            await asyncio.get_running_loop().run_in_executor(ex, boom)

    run_on(clock, main)
    ex.shutdown(wait=True)  # the count drops on the worker thread just after the result woke the loop
    assert clock.in_flight == 0


def test_the_real_server_handler_speaks_over_the_memory_websocket():
    """The server's own connection handler and Session, no model used: start, started, end, closed."""
    from headstart.session.components import Components
    from headstart.config import PipelineConfig

    components = Components(config=PipelineConfig(), asr=None, llm=None, tts=None)

    async def main(server: InProcessServer, clock: SkipIdleClock):
        assert isinstance(server.server.components.llm_executor, TrackedExecutor)
        async with server.connect("memory:///ws") as ws:
            await ws.send(json.dumps({"type": "playback.position", "reply_id": "r1", "position_ms": 0}))
            first = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "session.start", "sample_rate": 16000, "format": "pcm16"}))
            started = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "session.end"}))
            rest = [m async for m in ws]
        await asyncio.sleep(30.0)  # idle: skipped
        return first, started, rest, server.server.active_sessions

    try:
        (first, started, rest, active), sim = run_simulated(main, components, components.config, max_sessions=2)
    finally:
        components.close()
    assert first["type"] == "error" and first["code"] == "not_started"
    assert started["type"] == "session.started" and rest == [] and active == 0
    assert sim["skipped_s"] > 29.0 and sim["virtual_s"] >= 30.0 and sim["wall_s"] < 29.0


def test_tracked_components_share_the_models_and_threads():
    from headstart.session.components import Components
    from headstart.config import PipelineConfig

    components = Components(config=PipelineConfig(), asr=None, llm=None, tts=None)
    clock = SkipIdleClock()
    try:
        t = tracked_components(components, components.config, clock)
        assert t.asr_executor.inner is components.asr_executor and t.llm_priority is components.llm_priority
        assert t.tts_executor.submit(lambda: 7).result(5) == 7 and clock.jobs == 1
    finally:
        components.close()


def test_simulate_refuses_a_server(capsys):
    import argparse

    from headstart.cli.bench.conversation import add_arguments, run_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--simulate", "--server", "ws://127.0.0.1:1/ws", "--scenarios", "qa",
                              "--synthetic", "none", "--no-plots"])
    assert run_from_args(args) == 2
    assert "--simulate" in capsys.readouterr().err


@pytest.mark.slow
def test_simulated_run_small_models(tmp_path):
    """qa, history, one pause item and one barge-in with the small models on the virtual clock: the
    figures of a real-time run, marked simulated, and idle time skipped."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "headstart", "bench", "conversation", "--simulate", "--llm", "smollm2-135m",
         "--tts", "espeak", "--configs", "headstart", "--scenarios", "qa,history,pauses,bargein", "--turns", "1",
         "--pause-items", "1", "--bargein-items", "1", "--synthetic", "none", "--max-new-tokens", "8", "--out", str(out)],
        capture_output=True, text=True, timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert any(line.startswith("SIMULATED") for line in lines[:-1])  # said above the table
    assert result["simulated"] is True and result["effective"]["pace"] == "simulated"
    assert any("SIMULATED" in n for n in result["notes"])
    c = result["configs"]["headstart"]
    assert c["turns"] == 2 and c["replies"] == 2  # the qa turn and the history turn
    assert 0.3 < c["v2v_p50_s"] < 60.0 and c["ttft_p50_s"] >= 0.0 and c["wer"] <= 0.25
    assert c["pause_items"] == 1 and c["false_cutoff_rate"] in (0.0, 1.0)
    # the client's player runs on the virtual clock: the reply falls silent soon after the first word
    assert c["bargeins"] == 1 and 0.0 <= c["bargein_stop_p50_s"] < 2.0
    sim = result["simulation"]["configs"]["headstart"]
    # the recordings, trailing silence and reply playback are idle time: seconds of it were skipped
    assert sim["skipped_s"] > 2.0 and sim["virtual_s"] == pytest.approx(sim["wall_s"] + sim["skipped_s"], abs=0.5)
    assert sim["jobs"] > 5
    records = json.loads((out / "records.json").read_text())
    events = records["headstart"]["qa"][0]["events"]
    assert [e[1] for e in events].count("turn.end") == 1 and any(e[1] == "audio" for e in events)


@pytest.mark.slow
def test_simulated_tools_scenario_small_models(tmp_path):
    """The tools scenario on the virtual clock: a timer request and a plain question in the default
    voice, one session each; the timer's reply comes from its tool, the question's from the LLM, and
    both turns' voice-to-voice is reported side by side."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "headstart", "bench", "conversation", "--simulate", "--llm", "smollm2-135m",
         "--configs", "headstart", "--scenarios", "tools", "--tool-items", "1", "--synthetic", "none",
         "--max-new-tokens", "8", "--reply-asr", "none", "--no-plots", "--out", str(out)],
        capture_output=True, text=True, timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert any("tools scenario" in line for line in lines[:-1])
    t = result["configs"]["headstart"]["tools"]
    assert t["tool_turns"] == 1 and t["plain_turns"] == 1 and t["false_actions"] == 0
    assert 0.0 < t["tool_v2v_p50_s"] < 60.0 and 0.0 < t["plain_v2v_p50_s"] < 60.0
    assert t["v2v_p50_gap_s"] == pytest.approx(t["tool_v2v_p50_s"] - t["plain_v2v_p50_s"], abs=1e-3)
    assert result["targets"]["tools_v2v_p50_gap_s"] == 0.1
    records = json.loads((out / "records.json").read_text())["headstart"]["tools"]
    assert [r["name"] for r in records] == ["tool-1", "plain-1"]
    assert any(e[1] == "tool.call" and e[2]["name"] == "timer_start" for e in records[0]["events"])


def test_a_session_that_cannot_start_is_an_error_and_a_close_not_a_hang(monkeypatch):
    """Session() raising (a broken component) reaches the client as `error` internal, then the connection
    ends; before, the in-memory connection stayed open and the run waited forever."""
    from headstart.session import session as session_module
    from headstart.session.components import Components
    from headstart.config import PipelineConfig

    def broken(self, *args, **kwargs):
        raise RuntimeError("no listener today")

    monkeypatch.setattr(session_module.Session, "__init__", broken)
    components = Components(config=PipelineConfig(), asr=None, llm=None, tts=None)

    async def main(server: InProcessServer, clock: SkipIdleClock):
        async with server.connect("memory:///ws") as ws:
            await ws.send(json.dumps({"type": "session.start", "sample_rate": 16000, "format": "pcm16"}))
            return [json.loads(m) async for m in ws], ws.close_code

    try:
        (messages, close_code), _ = run_simulated(main, components, components.config, max_sessions=2)
    finally:
        components.close()
    assert [m["type"] for m in messages] == ["error"] and messages[0]["code"] == "internal"
    assert "no listener today" in messages[0]["message"] and close_code == 1011
