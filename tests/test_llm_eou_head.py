"""The EOU head at run time (headstart/llm/eou_head.py): head files, the packaged heads, and the
packaged head on SmolLM2-135M, the small real model (slow). Its training: tests/test_training_train_eou.py."""

from __future__ import annotations

import numpy as np
import pytest

from headstart.config import LLMConfig
from headstart.llm import eou_head as H

SYSTEM = [{"role": "system", "content": LLMConfig().system_prompt}]
# not in the training sentences (headstart/llm/eou_heads/sentences.txt)
COMPLETE_AND_CUT = [
    ("Could you find me a good Italian restaurant nearby", "Could you find me a good Italian"),
    ("Please switch off the radio in the bathroom", "Please switch off the radio in"),
    ("How many legs does a spider have", "How many legs does a"),
    ("The students went home after the lesson", "The students went home after the"),
    ("My brother bought a new bicycle last week", "My brother bought a new"),
]


def test_bad_head_files_give_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError):
        H.EOUHeadWeights.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not an EOU head"):
        H.EOUHeadWeights.load(tmp_path / "junk.npz")
    monkeypatch.setenv("HEADSTART_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="headstart llm train-eou --model no-such-model"):
        H.load_weights("no-such-model")


def test_packaged_head_for_smollm2_and_the_cache_copy_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADSTART_CACHE", str(tmp_path))
    packaged = H.load_weights("smollm2-135m")
    assert packaged.model == "smollm2-135m" and packaged.hidden_size == 576
    assert packaged.info["heldout_auc"] > 0.9
    d = packaged.hidden_size
    H.EOUHeadWeights("smollm2-135m", np.zeros(d), np.ones(d), np.zeros(d), 0.0, {"mine": 1}).save(
        H.weights_path("smollm2-135m"))
    assert H.load_weights("smollm2-135m").info == {"mine": 1}
    qwen = H.load_weights("qwen2.5-coder-0.5b")  # the session's default LLM
    assert qwen.hidden_size == 896 and qwen.info["heldout_auc"] > 0.9
    # both shipped heads carry thresholds calibrated on out-of-fold scores (train-eou)
    for weights in (packaged, qwen):
        low, high = weights.thresholds
        assert 0 < low < high < 1 and weights.info["expected_cutoff"] <= weights.info["max_cutoff"]


@pytest.mark.slow
def test_packaged_head_tells_complete_from_cut_and_reuses_the_cache(smollm2_engine):
    head = H.EOUHead.load(smollm2_engine, "smollm2-135m")
    wins = 0
    for complete, cut in COMPLETE_AND_CUT:
        p_complete = head.probability(SYSTEM, complete + ".")  # Whisper's period is ignored
        p_cut = head.probability(SYSTEM, cut + ".")
        wins += p_complete > p_cut
    assert wins >= 4, wins
    assert head.estimate(SYSTEM, "  . ").probability == 0.0
    head.probability(SYSTEM, "How many legs does a")
    grown = head.estimate(SYSTEM, "How many legs does a spider")
    assert grown.num_computed <= 3  # only the new tokens (and the one recomputed for logits)
    # the raw end-of-turn token probability of the same forward: what the token scorer alone gives
    from headstart.llm.eou import EOUEstimator

    token = EOUEstimator(smollm2_engine).probability(SYSTEM, "How many legs does a spider")
    assert head.last_token_probability == pytest.approx(token, rel=1e-3, abs=1e-9)
