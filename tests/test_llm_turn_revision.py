"""TurnState.finish adopts a held reply whose KV cache was changed after its last held step (an EOU
estimate or another session used the shared engine in between): the reply goes on from the right
tokens instead of failing mid-reply (real SmolLM2-135M, float32)."""

from __future__ import annotations

import pytest

from headstart.config import LLMConfig, ThreadPlan
from headstart.llm.engine import LLMEngine
from headstart.llm.sampling import Sampling
from headstart.llm.speculative import Decoder
from headstart.llm.turn import PreemptionStats, TurnState

CONFIG = LLMConfig(model="smollm2-135m", dtype="float32", max_new_tokens=16, soft_max_tokens=None,
                   system_prompt="Answer in one short sentence.")
HISTORY = [{"role": "system", "content": CONFIG.system_prompt}]
FINAL = "What is the capital of France?"


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    from headstart.models import ModelNotPreparedError, resolve_model

    try:
        path = resolve_model(CONFIG.model)
    except ModelNotPreparedError as exc:
        pytest.skip(str(exc))
    return LLMEngine.load(path, CONFIG, ThreadPlan())


@pytest.mark.parametrize("intruder", ["other_prompt", "eou_style_prefix"])
def test_a_hit_after_the_cache_changed_continues_exactly(engine, intruder):
    engine.reset()
    fresh_prompt = engine.render_prompt([*HISTORY, {"role": "user", "content": FINAL}])
    expected = list(engine.generate(fresh_prompt, 16, Sampling()))
    engine.reset()
    stats = PreemptionStats()
    state = TurnState(Decoder(engine), HISTORY, 16, Sampling(), stats)
    state.preempt(FINAL)
    while state.preempt_step(max_held_tokens=4):
        pass
    assert state.preemptive.cache_intact
    if intruder == "other_prompt":  # another session's prompt
        engine.prefill(engine.render_prompt([{"role": "user", "content": "Tell me a joke."}]))
    elif intruder == "eou_style_prefix":  # the EOU estimate: the same prompt up to the user's text
        engine.prefill(engine.render_prompt([*HISTORY, {"role": "user", "content": FINAL}],
                                            add_generation_prompt=False)[:-2])
    assert not state.preemptive.cache_intact
    prompt, tokens, adopted = state.finish(FINAL)
    assert adopted == 4 and stats.hits == 1
    assert list(tokens) == expected  # no LLMError, and the same reply a fresh run gives
