"""Training data for the proposal head at scale (headstart/training/train_proposal.py, proposal_prompts.py):
the batched, shared-prefix generation gives the same replies as a plain greedy loop and the same
features as the teacher-forced pass; shards cache and reload; the data-size cut keeps the held-out set
and whole conversations; the draft-acceptance arithmetic; the composed prompts are distinct,
reproducible, prefix-stable and keep clear of the held-out ones."""

from __future__ import annotations

import random

import pytest
import torch

from headstart.training.proposal_prompts import similarity, spoken_conversations
from headstart.training.train_proposal import (
    Features,
    _parse_sizes,
    cached_generate_features,
    concat_features,
    draft_acceptance,
    extract_features,
    generate_features,
    limit_training,
)
from tests.test_selfspec import VOCAB, tiny

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def greedy(model, prompt: list[int], ends: set[int], n: int) -> list[int]:
    """The reference: one full forward (no cache) per token."""
    ids, out = list(prompt), []
    with torch.inference_mode():
        for _ in range(n):
            token = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
            out.append(token)
            ids.append(token)
            if token in ends:
                break
    return out


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    model = tiny("llama", layers=4, seed=5).model
    rng = random.Random(1)
    system = [rng.randrange(VOCAB - 1) for _ in range(9)]
    # Different lengths (left padding), one prompt of just the shared prefix plus one token.
    prompts = [system + [rng.randrange(VOCAB - 1) for _ in range(rng.randrange(1, 9))] for _ in range(11)]
    # An end token the model actually emits, so rows finish at different steps and leave the batch.
    first = [greedy(model, p, set(), 10) for p in prompts]
    counts: dict[int, int] = {}
    for reply in first:
        for t in reply[2:]:
            counts[t] = counts.get(t, 0) + 1
    ends = {max(counts, key=counts.get)}
    return model, prompts, ends, len(system)


def test_batched_generation_equals_plain_greedy_and_teacher_forcing(setup):
    model, prompts, ends, shared = setup
    replies, feats = generate_features(model, prompts, [1, 3], ends, shared, max_new_tokens=10, batch_size=4)
    expected = [greedy(model, p, ends, 10) for p in prompts]
    assert replies == expected
    lengths = {len(r) for r in replies}
    assert len(lengths) > 1 and 10 in lengths  # some stopped early at the end token, some ran to the limit
    tf = extract_features(model, list(zip(prompts, replies)), [False] * len(prompts), [1, 3], shared=shared)
    assert torch.equal(feats.target, tf.target)
    assert torch.equal(feats.reply, tf.reply) and torch.equal(feats.conv, tf.conv)
    for layer in (1, 3):
        assert torch.allclose(feats.hidden[layer], tf.hidden[layer], atol=1e-4, rtol=1e-4)
    assert torch.allclose(feats.final, tf.final, atol=1e-4, rtol=1e-4)
    assert not feats.held_out.any()
    # Batches cut by a prompt-token budget (one row each here) give the same.
    again, by_budget = generate_features(model, prompts, [1], ends, shared, max_new_tokens=10, token_budget=4)
    assert again == replies and torch.equal(by_budget.target, feats.target)


def test_generation_errors_are_clear(setup):
    model, prompts, ends, shared = setup
    with pytest.raises(ValueError, match="exit layer"):
        generate_features(model, prompts, [4], ends, shared)
    with pytest.raises(ValueError, match="no prompts"):
        generate_features(model, [], [1], ends, shared)
    with pytest.raises(ValueError, match="share"):
        generate_features(model, [prompts[0], [1, 2] + prompts[1]], [1], ends, shared)


def test_shards_are_cached_and_remade_when_they_do_not_fit(setup, tmp_path):
    model, prompts, ends, shared = setup
    path = tmp_path / "shard.safetensors"
    r1, f1, cached1 = cached_generate_features(model, prompts[:5], [1, 2], ends, shared, path, 8, batch_size=2)
    r2, f2, cached2 = cached_generate_features(model, prompts[:5], [2], ends, shared, path, 8, batch_size=2)
    assert (cached1, cached2) == (False, True) and r1 == r2
    assert torch.equal(f1.target, f2.target) and set(f2.hidden) == {2}
    assert torch.allclose(f1.hidden[2], f2.hidden[2], rtol=1e-2, atol=1e-2)  # stored as float16
    _, _, cached3 = cached_generate_features(model, prompts[:5], [3], ends, shared, path, 8, batch_size=2)
    _, _, cached4 = cached_generate_features(model, prompts[1:6], [3], ends, shared, path, 8, batch_size=2)
    assert not cached3 and not cached4  # a missing layer, other prompts: made again
    path.write_bytes(b"garbage")
    assert not cached_generate_features(model, prompts[:2], [1], ends, shared, path, 4)[2]


def _features(convs: list[int], held: list[bool]) -> Features:
    n = len(convs)
    return Features({1: torch.arange(n, dtype=torch.float32).unsqueeze(1)}, torch.zeros(n, 1),
                    torch.arange(n), torch.tensor(held), torch.ones(n, dtype=torch.bool), torch.tensor(convs))


def test_data_size_cut_keeps_held_out_and_whole_conversations():
    f = _features([0, 0, 1, 1, 1, 2, 2, 3, 3, 3], [True, True, False, False, False, False, False, True, True, True])
    cut = limit_training(f, 4)  # the 4th training position is in conversation 2: all of it is kept
    assert cut.conv.tolist() == [0, 0, 1, 1, 1, 2, 2, 3, 3, 3]
    cut = limit_training(f, 2)
    assert cut.conv.tolist() == [0, 0, 1, 1, 1, 3, 3, 3]
    assert int(cut.held_out.sum()) == 5 and limit_training(f, None) is f
    both = concat_features([f, f])
    assert both.conv.tolist()[10:] == [4, 4, 5, 5, 5, 6, 6, 7, 7, 7] and len(both.target) == 20


def test_draft_acceptance_arithmetic():
    conv = torch.zeros(6, dtype=torch.long)
    perfect = draft_acceptance(torch.ones(6, dtype=torch.bool), conv, 3)
    # The prefill gives the first token; 5 to go: one step accepts 3 (+1 from the verify), the next 1.
    assert perfect == {"mean_accepted": 2.0, "tokens_per_step": 2.5, "acceptance_rate": 1.0}
    none = draft_acceptance(torch.zeros(6, dtype=torch.bool), conv, 3)
    assert none["mean_accepted"] == 0 and none["tokens_per_step"] == 1.0 and none["acceptance_rate"] == 0
    mixed = draft_acceptance(torch.tensor([False, False, True, True, True, True]), conv, 4)
    # from position 1: nothing accepted (the verify gives it); from position 2: 4 accepted (2-5).
    assert mixed == {"mean_accepted": 2.0, "tokens_per_step": 2.5, "acceptance_rate": 4 / 8}
    # A run never crosses into the next reply, and each reply's first token is the prefill's.
    split = draft_acceptance(torch.ones(4, dtype=torch.bool), torch.tensor([0, 0, 1, 1]), 3)
    assert split == {"mean_accepted": 1.0, "tokens_per_step": 1.0, "acceptance_rate": 1.0}
    with pytest.raises(ValueError):
        draft_acceptance(torch.ones(2, dtype=torch.bool), torch.zeros(2, dtype=torch.long), 0)


def test_composed_prompts_are_distinct_reproducible_and_clear_of_held_out():
    held = ["What is the capital of France?", "How many legs does a spider have?"]
    convs = spoken_conversations(3000, exclude=held)
    assert len(convs) == len(set(convs)) == 3000
    assert spoken_conversations(500, exclude=held) == convs[:500]  # prefix-stable: cached shards stay valid
    assert spoken_conversations(50, seed=1) != convs[:50]
    users = [t for c in convs for r, t in c if r == "user"]
    assert all(similarity(u, h) < 0.6 for u in users for h in held)
    assert any(len(c) == 3 for c in convs) and all(c[-1][0] == "user" for c in convs)
    assert len({u.split()[0] for u in users}) > 30  # openings vary
    with pytest.raises(ValueError):
        spoken_conversations(-1)


def test_train_position_sizes_parse():
    assert _parse_sizes("6000, 25k,all") == [6000, 25000, None]
    for bad in ("", "0", "x"):
        with pytest.raises(ValueError):
            _parse_sizes(bad)
