"""The proposal head (headstart/llm/proposal.py) and its distillation (headstart/training/train_proposal.py):
training on a tiny model learns (loss falls, held-out agreement rises above the untrained exit), heads
round-trip through their file, and bad files/layers are clear errors."""

from __future__ import annotations

import random

import pytest
import torch

from headstart.llm.proposal import ProposalHead, load_head, model_key
from headstart.llm.sampling import Sampling
from headstart.training.train_proposal import default_conversations, evaluate, extract_features, train_head
from tests.test_selfspec import VOCAB, tiny

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def data():
    """A tiny 4-layer Llama, its greedy replies to 96 random prompts (every 4th held out), features at
    exit layers 1 and 2."""
    torch.set_num_threads(1)
    engine = tiny("llama", layers=4, seed=3)
    rng = random.Random(0)
    sequences, held = [], []
    for i in range(96):
        prompt = [rng.randrange(VOCAB - 1) for _ in range(10)]
        engine.reset()
        reply = list(engine.generate(prompt, 12, Sampling()))
        sequences.append((prompt, reply or [0]))
        held.append(i % 4 == 3)
    return engine, extract_features(engine.model, sequences, held, [1, 2])


def test_features_line_up_with_the_models_hidden_states(data):
    engine, features = data
    n = len(features.target)
    assert features.hidden[1].shape == (n, 32) and features.final.shape == (n, 32)
    assert features.held_out.any() and (~features.held_out).any() and features.reply.any()
    assert int(features.target.max()) < VOCAB


def test_training_learns_beyond_the_untrained_exit(data):
    engine, features = data
    result = train_head(engine.model, features, 2, "linear", epochs=30, batch_size=64, lr=1e-2)
    assert result.losses[-1] < 0.85 * result.losses[0], result.losses
    assert result.agreement > result.untrained + 0.04, (result.agreement, result.untrained)
    train = ~features.held_out
    assert evaluate(engine.model, result.head, features, train) > result.untrained + 0.15
    assert result.head.vocab_ids == sorted(set(features.target[~features.held_out].tolist()))


def test_mlp_head_trains_too_and_is_deterministic(data):
    engine, features = data
    a = train_head(engine.model, features, 1, "mlp", rank=16, epochs=5, batch_size=64, seed=7)
    b = train_head(engine.model, features, 1, "mlp", rank=16, epochs=5, batch_size=64, seed=7)
    assert a.losses == b.losses and a.losses[-1] < a.losses[0]


def test_head_round_trips_through_its_file(data, tmp_path):
    engine, features = data
    result = train_head(engine.model, features, 2, "linear", epochs=2, batch_size=64)
    result.head.meta = {"agreement": result.agreement}
    path = result.head.save(tmp_path / "h" / "exit-2.safetensors")
    loaded = load_head(path)
    assert (loaded.exit_layer, loaded.num_layers, loaded.kind, loaded.vocab_ids) == (2, 4, "linear", result.head.vocab_ids)
    assert loaded.meta == {"agreement": result.agreement}
    held = features.held_out
    assert evaluate(engine.model, loaded, features, held) == evaluate(engine.model, result.head, features, held)


def test_bad_heads_and_layers_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="train-proposal"):
        load_head(tmp_path / "missing.safetensors")
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(1)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="not a headstart proposal head"):
        load_head(tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match="kind"):
        ProposalHead.new("transformer", 32, 1, 4)
    with pytest.raises(ValueError, match="exit layer"):
        ProposalHead.new("linear", 32, 0, 4)
    with pytest.raises(FileNotFoundError):
        model_key(tmp_path)


def test_exit_layers_outside_the_model_are_rejected(data):
    engine, _ = data
    with pytest.raises(ValueError, match="exit layer"):
        extract_features(engine.model, [([1, 2, 3], [4, 5])], [False], [4])


def test_default_prompt_set_holds_out_the_bench_prompts():
    from headstart.corpus.texts import DECODE_PROMPTS, QUESTIONS

    convs = default_conversations()
    held = {c.messages[-1][1] for c in convs if c.held_out}
    train = {c.messages[-1][1] for c in convs if not c.held_out}
    assert {q for q, _ in QUESTIONS} <= held and set(DECODE_PROMPTS) <= held
    assert not held & train and len(train) >= 100
    assert len(default_conversations(multi_turn_training=False)) < len(convs)
