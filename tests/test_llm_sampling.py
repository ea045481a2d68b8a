"""Token choice from logits: greedy, temperature, top-p, seeds (no model needed)."""

from __future__ import annotations

import math

import pytest
import torch

from headstart.config import LLMConfig
from headstart.llm.sampling import Sampler, Sampling

PROBS = [0.5, 0.3, 0.15, 0.05]
LOGITS = torch.tensor([math.log(p) for p in PROBS])


def _draws(sampling: Sampling, n: int = 400) -> list[int]:
    sampler = Sampler(sampling)
    return [sampler(LOGITS) for _ in range(n)]


def test_greedy_is_argmax():
    assert _draws(Sampling(), n=5) == [0] * 5
    assert Sampler(Sampling())(torch.tensor([0.1, 3.0, -2.0])) == 1


@pytest.mark.parametrize("top_p, allowed", [(0.4, {0}), (0.7, {0, 1}), (0.9, {0, 1, 2}), (1.0, {0, 1, 2, 3})])
def test_top_p_keeps_the_smallest_set_reaching_p(top_p, allowed):
    draws = _draws(Sampling(temperature=1.0, top_p=top_p, seed=3), n=2000)
    assert set(draws) == allowed


def test_temperature_one_follows_the_distribution():
    draws = _draws(Sampling(temperature=1.0, seed=11), n=4000)
    for token, p in enumerate(PROBS):
        assert abs(draws.count(token) / len(draws) - p) < 0.03


def test_low_temperature_sharpens():
    cold = _draws(Sampling(temperature=0.2, seed=5), n=1000)
    assert cold.count(0) / len(cold) > 0.9


def test_same_seed_same_tokens_different_seed_different_tokens():
    a = _draws(Sampling(temperature=1.0, seed=42), n=50)
    assert a == _draws(Sampling(temperature=1.0, seed=42), n=50)
    assert a != _draws(Sampling(temperature=1.0, seed=43), n=50)


def test_from_config():
    s = Sampling.from_config(LLMConfig(temperature=0.7, top_p=0.9, seed=1))
    assert (s.temperature, s.top_p, s.seed, s.greedy) == (0.7, 0.9, 1, False)
    assert Sampling.from_config(LLMConfig()).greedy


def test_logits_of_the_wrong_shape_are_rejected():
    with pytest.raises(ValueError, match="vocab"):
        Sampler(Sampling())(torch.zeros(1, 4))
