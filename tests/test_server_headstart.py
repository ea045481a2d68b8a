"""The head start over a real loopback server with the real small models (whisper-tiny.en, smollm2-135m,
piper-joe) and real recordings: a preemptive hit (released at the end of turn), the cases.md turn row
(10 s of speech, a 1.5 s pause, 8 s more: the held reply is dropped, the answer covers all of it), and
an idle session that does not slow a busy one (a ratio within one run)."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import replace

import numpy as np
import pytest
from test_server_e2e import open_client, serve, silence

from headstart.audio import AudioFrame
from headstart.corpus import recordings as data
from headstart.corpus.wer import word_error_rate
from headstart.config import PipelineConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def components():
    from headstart.session.session import Components

    base = PipelineConfig()
    # The endpointer waits 1.8 s of silence: it stands in for the semantic endpointer waiting out a
    # pause that sounds unfinished, so the cases.md pause of 1.5 s does not end the turn.
    config = replace(base, llm=replace(base.llm, model="smollm2-135m", max_new_tokens=24),
                     endpoint=replace(base.endpoint, silence_s=1.8))
    components = Components.load(config)
    yield components
    components.close()


def speech(name: str, lead_s: float = 0.05, tail_s: float = 0.05) -> np.ndarray:
    """A recording cut to its speech (plus a little margin)."""
    rec = data.recording(name)
    samples = rec.read()
    return samples[max(0, int((rec.speech_start_s - lead_s) * 16000)) : int((rec.speech_end_s + tail_s) * 16000)]


async def wait_until(predicate, timeout_s: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.05)


def held_with_audio(session) -> bool:
    held = session.head_start.held
    return held is not None and held.tts is not None and bool(held.tts.timings)


def test_preemptive_hit_is_released_at_the_end_of_turn(components):
    rec = data.default_recording()
    # The turn must stay open (in audio time) until a reply is held with audio: without the EOU signal
    # the endpointer waits its fixed 1.8 s, and the punctuation rule starts the held reply. (With the
    # EOU head a confident score ends the turn as soon as the final comes, before the held reply has
    # audio: a hit too, but not the one this test pins.)
    no_eou = replace(components, config=replace(components.config,
                                                session=replace(components.config.session, eou="none")))

    async def main():
        server = await serve(no_eou)
        try:
            client = await open_client(server)
            (connection,) = server.connections
            session = connection.session
            # the speech and the VAD's end of speech, but not yet the endpointer's silence
            await client.send_audio(rec.read()[: int((rec.speech_end_s + 0.4) * 16000)])
            await wait_until(lambda: held_with_audio(session), 90, "a held reply with synthesised audio")
            await asyncio.sleep(0.2)
            before = list(client.log)
            await client.send_audio(silence(2.5))
            await client.wait_for(lambda: client.of("metrics.turn"), 90)
            await client.ws.close()
            return client, before
        finally:
            await server.close()

    from headstart.llm.local import LocalLLM

    assert isinstance(components.llm, LocalLLM)
    decoder = components.llm.decoder
    generated_before = decoder.stats.generated_tokens
    client, before = asyncio.run(main())
    # the replies go through the process's speculative decoder (LLMConfig.speculative: prompt lookup)
    from headstart.llm.speculative import PromptLookupDrafter

    assert isinstance(decoder.drafter, PromptLookupDrafter)
    assert decoder.stats.generated_tokens > generated_before
    held_kinds = [item for item in before if item[0] == "audio" or item[1].startswith("reply.")]
    assert held_kinds == [], f"a held reply leaked before the end of turn: {held_kinds}"
    kinds = [e["type"] for e in client.events]
    assert kinds.index("turn.end") < kinds.index("reply.started") < kinds.index("reply.audio.start")
    (metrics,) = client.of("metrics.turn")
    assert metrics["preemptive"] == "hit" and metrics["preemptive_hits"] == 1, metrics
    assert metrics["held_tokens"] > 0 and metrics["held_audio_ms"] > 0
    assert metrics["preemptive_lead_ms"] > 0
    # released at once: the first clause was synthesised ahead, nothing is computed after the end of turn
    assert metrics["turn_end_to_first_audio_ms"] < 250, metrics
    (done,) = client.of("reply.done")
    assert done["text"].strip() and client.audio[done["reply_id"]] > 0
    assert word_error_rate(rec.text, client.of("reply.started")[0]["transcript"]) <= 0.25


def test_a_pause_then_more_speech_drops_the_held_reply_and_answers_all_of_it(components):
    """cases.md (turn): 10 s of speech, a 1.5 s pause, 8 s more speech."""
    first = speech("confbridge-mute-extended")  # ~10.8 s
    second = np.concatenate([speech("librivox-0920"), speech("librivox-0930")])  # ~8.3 s, one passage
    reference = " ".join(data.recording(n).text for n in ("confbridge-mute-extended", "librivox-0920",
                                                          "librivox-0930"))

    # The first part is a complete sentence: with the EOU signal the endpointer would (rightly) end the
    # turn in the pause. This case is about a pause that sounds unfinished, which the fixed 1.8 s
    # silence stands in for, so the EOU is off here.
    no_eou = replace(components, config=replace(components.config,
                                                session=replace(components.config.session, eou="none")))

    async def main():
        server = await serve(no_eou)
        try:
            client = await open_client(server)
            (connection,) = server.connections
            session = connection.session
            await client.send_audio(np.concatenate([first, silence(0.5)]))
            # the pause goes on (in audio time) only once a reply for the first part is held
            await wait_until(lambda: held_with_audio(session), 120, "a held reply for the first part")
            first_held = session.head_start.held.id
            await client.send_audio(np.concatenate([silence(1.0), second, silence(2.5)]))
            await client.wait_for(lambda: client.of("metrics.turn"), 180)
            await client.ws.close()
            return client, first_held
        finally:
            await server.close()

    client, first_held = asyncio.run(main())
    assert len(client.of("turn.end")) == 1 and len(client.of("reply.started")) == 1
    (started,) = client.of("reply.started")
    assert started["reply_id"] != first_held
    assert first_held not in client.audio  # not one sample of the stale reply was sent
    assert not [e for e in client.events if e.get("reply_id") == first_held]
    # the answer is to all 18 s: its prompt is the transcript of both parts
    assert word_error_rate(reference, started["transcript"]) <= 0.35, started["transcript"]
    (metrics,) = client.of("metrics.turn")
    # the dropped reply had made audio, so its tokens (at least one) count as wasted
    assert metrics["preemptive_misses"] >= 1 and metrics["preemptive_wasted_tokens"] >= 1
    assert metrics["preemptive"] in ("hit", "miss")  # a second held reply, on all of it, may be released
    assert client.of("reply.done")[0]["reply_id"] == started["reply_id"]


def test_an_idle_session_does_not_slow_a_busy_one(components):
    """cases.md (server): two sessions, one idle. The same turn, timed alone and beside an idle
    session, alternately in one run; the ratio of the medians is bounded (the machine is shared)."""
    rec = data.default_recording()
    audio = np.concatenate([rec.read(), silence(2.5)])

    async def main():
        server = await serve(components)
        times: dict[bool, list[float]] = {False: [], True: []}
        try:
            for with_idle in (False, False, True, False, True):  # the first run warms up
                idle = await open_client(server) if with_idle else None
                client = await open_client(server)
                start = time.perf_counter()
                await client.send_audio(audio)
                await client.wait_for(lambda: client.of("metrics.turn"), 120)
                times[with_idle].append(time.perf_counter() - start)
                assert client.of("reply.done")
                for c in (client, idle):
                    if c is not None:
                        await c.ws.close()
                if idle is not None:
                    assert [e["type"] for e in idle.events] == ["session.started"]
                await wait_until(lambda: not server.connections, 10, "the sessions to close")
            return times
        finally:
            await server.close()

    times = asyncio.run(main())
    alone, beside_idle = statistics.median(times[False][1:]), statistics.median(times[True])
    assert beside_idle / alone < 1.6, times


def test_a_listening_session_prefills_the_chat_before_the_user_speaks(components):
    """Before the first word: the system prompt and the user's message header are in the KV cache (the
    turn's LiveTurn with no text yet), so partials and the reply prefill only the user's words. With
    the head start off nothing is computed ahead."""
    from headstart.session.session import Session

    engine = components.local_engine
    chat = [{"role": "system", "content": components.config.llm.system_prompt}]
    expected = engine.render_prompt([*chat, {"role": "user", "content": ""}], add_generation_prompt=False)
    header = engine.render_prompt([*chat, {"role": "user", "content": "Hi"}], add_generation_prompt=False)
    header = header[: next(i for i, (a, b) in enumerate(zip(expected, header)) if a != b)]

    async def listen(comps) -> tuple[int, ...]:
        engine.reset()
        session = Session(comps)
        try:
            for _ in range(10):
                await session.push_audio(AudioFrame(np.zeros(320, np.float32), 16000))
            if session.head_start.live is not None:
                await session.head_start.live.wait_idle()
            return tuple(engine.tokens)
        finally:
            await session.aclose()

    cached = asyncio.run(listen(components))
    assert len(header) > 20 and cached[: len(header)] == tuple(header), (len(cached), len(header))
    off = replace(components, config=replace(components.config,
                                             session=replace(components.config.session, head_start=False)))
    assert asyncio.run(listen(off)) == ()
