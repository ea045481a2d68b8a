"""A conversation longer than the LLM's context: the history is bounded by default
(`LLMConfig.max_history_tokens` "auto": the context minus the reply and the turn in progress), so the
session keeps answering; with the bound switched off, the LLM's failure is reported as one
(`StageError` "llm_failed") and the listener goes on, instead of every audio frame failing with "the
listener's ASR failed". Real models (whisper-tiny.en, smollm2-135m, the default voice) and a real recording; the
context is shrunk to 600 positions (the engine's own check) so that the prompts stay cheap."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import pytest

from headstart.audio import AudioFrame
from headstart.corpus import recordings as data
from headstart.config import PipelineConfig

pytestmark = pytest.mark.slow

CONTEXT = 600  # positions: the engine refuses a longer sequence, as it does at its real 8192


@pytest.fixture(scope="module")
def components():
    from headstart.session.components import Components

    base = PipelineConfig()
    config = replace(base, llm=replace(base.llm, model="smollm2-135m", dtype="float32", max_new_tokens=16))
    components = Components.load(config)
    engine = components.local_engine  # the LocalLLM's context is its engine's
    real = engine.max_positions
    engine.max_positions = CONTEXT
    assert components.llm.max_positions == CONTEXT
    yield components
    engine.max_positions = real
    components.close()


def long_history(n_turns: int = 12) -> list[dict]:
    history = []
    for i in range(n_turns):
        history.append({"role": "user", "content": f"Tell me fact number {i} about the ocean and its tides, please."})
        history.append({"role": "assistant", "content": f"Fact {i}: the tides rise and fall twice a day because "
                        "the moon and the sun pull on the water of the oceans as the earth turns."})
    return history


async def spoken_turn(session) -> tuple[list, list, list]:
    """One spoken turn (the demo recording, then 1.5 s of silence), then the end of input: (events,
    errors the event stream raised, errors push_audio raised)."""
    events, errors, push_errors = [], [], []

    async def collect():
        while True:
            try:
                event = await session.__anext__()
            except StopAsyncIteration:
                return
            except Exception as exc:  # noqa: BLE001 - recorded: what a client would see as `error`
                errors.append(exc)
                continue
            events.append(event)

    reader = asyncio.create_task(collect())
    audio = np.concatenate([data.default_recording().read(), np.zeros(24_000, np.float32)])
    for lo in range(0, audio.shape[0], 320):
        try:
            await session.push_audio(AudioFrame(audio[lo : lo + 320], 16_000))
        except Exception as exc:  # noqa: BLE001
            push_errors.append(exc)
        await asyncio.sleep(0.002)
    await session.end_input()
    await asyncio.wait_for(reader, 120)
    return events, errors, push_errors


def test_a_history_longer_than_the_context_is_bounded_by_default_and_the_session_answers(components):
    from headstart.session.session import Session, TurnCompleted

    assert components.config.llm.max_history_tokens == "auto"  # the default

    async def main():
        session = Session(components)
        session.history = long_history()
        chat = [{"role": "system", "content": components.config.llm.system_prompt}, *session.history]
        assert len(components.local_engine.render_prompt(chat)) > CONTEXT  # the whole history would not fit
        result = await spoken_turn(session)
        prompt = components.local_engine.render_prompt(session.conversation.messages())  # the next turn's prompt
        return result, len(prompt), len(session.history)

    (events, errors, push_errors), prompt_len, history_len = asyncio.run(main())
    assert errors == [] and push_errors == []
    (done,) = [e for e in events if isinstance(e, TurnCompleted)]
    assert not done.interrupted and done.timeline.reply.strip()
    assert history_len == 2 * 12 + 2  # the session keeps every message; only the prompt is a window
    assert prompt_len + components.config.llm.max_new_tokens <= CONTEXT


def test_without_the_bound_an_llm_failure_is_reported_as_one_and_the_listener_goes_on(components):
    from headstart.session.components import Components
    from headstart.session.session import Session, StageError, TurnCompleted

    unbounded = Components.__new__(Components)
    unbounded.__dict__.update(components.__dict__)  # the same loaded models, another LLMConfig
    unbounded.config = replace(components.config, llm=replace(components.config.llm, max_history_tokens=None))

    async def main():
        session = Session(unbounded)
        session.history = long_history()
        return await spoken_turn(session)

    events, errors, push_errors = asyncio.run(main())
    assert push_errors == []  # before: RuntimeError("the listener's ASR failed") on every frame
    assert errors and all(isinstance(e, StageError) and e.code == "llm_failed" for e in errors), errors
    assert any("context" in str(e.__cause__ or e) for e in errors)
    assert not [e for e in events if isinstance(e, TurnCompleted) and not e.interrupted]
