"""The reply prompt prefilled by the EOU estimate's own forward (eou_head.EOUHead.features with
reply_ids) and the engine's memo of the logits after its last forward, on the real SmolLM2-135M."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headstart.config import LLMConfig
from headstart.llm import eou_head as H
from tests.prepared import llm_engine

SYSTEM = [{"role": "system", "content": LLMConfig().system_prompt}]


@pytest.fixture(scope="module")
def engine():
    return llm_engine(LLMConfig(model="smollm2-135m", quantize="int8"))


@pytest.fixture
def forwards(engine, monkeypatch):
    """The number of model forwards the engine runs (a list, appended to per call)."""
    calls: list[int] = []
    inner = engine._forward

    def counted(new_ids, logits_to_keep):
        calls.append(len(new_ids))
        return inner(new_ids, logits_to_keep)

    monkeypatch.setattr(engine, "_forward", counted)
    engine.reset()
    return calls


def _reply_ids(engine, text):
    return engine.render_prompt([*SYSTEM, {"role": "user", "content": text}])


@pytest.mark.slow
def test_a_prefill_of_exactly_the_cached_sequence_reuses_its_logits(engine, forwards):
    ids = _reply_ids(engine, "What is the capital of France?")
    first = engine.prefill(ids)
    with torch.inference_mode():
        first[:] = 0.0  # a caller editing its logits in place does not reach the memo
    again = engine.prefill(ids)
    assert forwards == [len(ids)]
    engine.reset()
    reference = engine.prefill(ids)
    assert torch.equal(again, reference)
    # any change to the cache retires the memo: a crop and the same tokens again recompute the last one
    engine.crop(len(ids) - 2)
    engine.prefill(ids)
    assert forwards[-1] == 2
    engine.decode(int(reference.argmax()))
    assert engine.prefill(ids + [int(reference.argmax())]).shape == reference.shape
    assert forwards[-1] == 1  # the decode's logits were the memo
    # a prefix of the cache is not the cached sequence: its last position is recomputed
    engine.prefill(ids)
    assert forwards[-1] == 1 and engine.tokens == tuple(ids)


@pytest.mark.slow
def test_the_estimate_prefills_the_reply_prompt_in_the_same_forward(engine, forwards):
    head = H.EOUHead.load(engine, "smollm2-135m")
    text = "Please switch off the radio in the bathroom."
    alone = head.estimate(SYSTEM, text)
    assert head.last_token_probability is not None
    engine.reset()
    forwards.clear()
    reply = _reply_ids(engine, text)
    fused = head.estimate(SYSTEM, text, reply)
    # the same hidden state (int8 layers are per token, so bit-identical), one forward, the reply ready
    assert fused.probability == alone.probability
    assert forwards == [len(reply)] and engine.tokens == tuple(reply)
    assert head.last_token_probability is None  # the logits are the reply's now
    logits = engine.prefill(reply)
    assert len(forwards) == 1
    engine.reset()
    assert torch.equal(logits, engine.prefill(reply))


@pytest.mark.slow
def test_a_second_estimate_of_a_text_whose_reply_prompt_is_cached_recomputes_from_its_last_token(engine, forwards):
    head = H.EOUHead.load(engine, "smollm2-135m")
    text = "How many legs does a spider have?"
    reply = _reply_ids(engine, text)
    p = head.probability(SYSTEM, text, reply)
    ids, _ = head._token.prompt_ids(SYSTEM, text)
    assert head.probability(SYSTEM, text, reply) == p
    assert forwards == [len(reply), len(reply) - len(ids) + 1]
    # without reply ids, the estimate of a cached text still computes its last position
    assert head.probability(SYSTEM, text) == p
    assert forwards[-1] == 1 and engine.tokens == tuple(ids)


@pytest.mark.slow
def test_reply_ids_that_do_not_extend_the_heads_prompt_are_ignored(engine, forwards):
    head = H.EOUHead.load(engine, "smollm2-135m")
    text = "Turn on the lights"
    other = _reply_ids(engine, "Turn off the lights")
    p = head.probability(SYSTEM, text, other)
    ids, _ = head._token.prompt_ids(SYSTEM, text)
    assert engine.tokens == tuple(ids) and head.last_token_probability is not None
    engine.reset()
    assert head.probability(SYSTEM, text) == p
    assert np.isfinite(p)
