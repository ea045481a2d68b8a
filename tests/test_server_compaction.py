"""The history is compacted through the server (real loopback websocket, the default ASR and voice,
smollm2-135m as the LLM and its summariser): the reply's audio leaves up to the playback lead ahead of
the client's playback, so when it has all left the assistant is still speaking; the compaction starts
once the client has played it (here a client that plays in real time and reports nothing)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import pytest

from headstart.corpus import recordings as data

pytestmark = [pytest.mark.models, pytest.mark.slow]

FACTS = ["My name is Ada.", "My car is on level four.", "I am allergic to cats.", "My sister is called Lu.",
         "I grew up in Leeds.", "My dog is called Rex."]


@pytest.fixture(scope="module")
def components():
    from headstart.config import PipelineConfig
    from headstart.session.components import Components

    base = PipelineConfig()
    llm = replace(base.llm, model="smollm2-135m", max_new_tokens=24, max_history_tokens=120, memory="summary")
    components = Components.load(replace(base, llm=llm))
    yield components
    components.close()


def test_the_history_is_compacted_once_the_client_has_played_the_reply(components):
    from headstart.server.client import VoiceClient
    from headstart.server.protocol import InputCommit, MetricsTurn, SessionStart, SessionStarted
    from headstart.server.server import ServerConfig, VoiceServer

    recording = data.default_recording()
    pcm = (np.clip(recording.read(), -1, 1) * 32767).astype("<i2")

    async def main():
        server = VoiceServer(components, ServerConfig(port=0, playback_lead_s=1.0))
        await server.start()
        try:
            async with await VoiceClient.open(f"ws://127.0.0.1:{server.port}/ws") as client:
                await client.send(SessionStart())
                assert isinstance(await asyncio.wait_for(client.receive(), 30), SessionStarted)
                session = next(iter(server.connections)).session
                session.history = [m for i, fact in enumerate(FACTS)
                                   for m in ({"role": "user", "content": fact},
                                             {"role": "assistant", "content": f"Noted, fact {i + 1}."})]
                events = []

                async def read() -> None:
                    async for item in client:  # audio frames too: played in real time, never reported
                        events.append(item)

                reader = asyncio.create_task(read())
                for lo in range(0, pcm.shape[0], 320):
                    await client.send_pcm16(pcm[lo : lo + 320].tobytes())
                    await asyncio.sleep(0.02)
                await client.send(InputCommit())
                for _ in range(2400):  # the turn's reply, its audio all sent
                    if any(isinstance(e, MetricsTurn) for e in events):
                        break
                    await asyncio.sleep(0.05)
                done_at = asyncio.get_running_loop().time()
                assert any(isinstance(e, MetricsTurn) for e in events), events
                for _ in range(2400):  # the summariser runs once the reply has played
                    if session.compactions or session.compactions_dropped:
                        break
                    await asyncio.sleep(0.05)
                waited_s = asyncio.get_running_loop().time() - done_at
                reader.cancel()
                return session.compactions, session.compactions_dropped, waited_s, session.conversation.messages()
        finally:
            await server.close()

    compactions, dropped, waited_s, messages = asyncio.run(main())
    from headstart.llm.memory import MEMORY_HEADER

    assert (compactions, dropped) == (1, 0), waited_s
    assert MEMORY_HEADER in messages[0]["content"]
