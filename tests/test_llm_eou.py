"""EOU probability from the chat LLM's end-of-turn token (SmolLM2-135M, the small real model)."""

from __future__ import annotations

import pytest

from headstart.config import LLMConfig

SYSTEM = [{"role": "system", "content": LLMConfig().system_prompt}]
COMPLETE_AND_CUT = [
    ("Could you tell me what the weather will be like in Paris tomorrow", "Could you tell me what the"),
    ("Please set a timer for ten minutes", "Please set a timer for"),
    ("Go forward ten meters", "Go forward ten"),
    ("What is the capital of France", "What is the capital of"),
    ("Turn off the lights in the kitchen", "Turn off the lights in the"),
]


@pytest.fixture(scope="module")
def estimator(smollm2_engine):
    from headstart.llm.eou import EOUEstimator

    return EOUEstimator(smollm2_engine)


@pytest.mark.slow
def test_complete_utterances_score_higher_than_the_same_cut_off(estimator):
    wins = 0
    for complete, cut in COMPLETE_AND_CUT:
        p_complete = estimator.probability(SYSTEM, complete)
        p_cut = estimator.probability(SYSTEM, cut)
        wins += p_complete > p_cut
    assert wins >= 4  # measured 48 bench transcripts: AUC 0.85 without punctuation


@pytest.mark.slow
def test_trailing_punctuation_is_ignored_by_default_and_empty_text_is_zero(estimator):
    assert estimator.probability(SYSTEM, "Go forward ten.") == pytest.approx(
        estimator.probability(SYSTEM, "Go forward ten"), rel=1e-4)
    assert estimator.probability(SYSTEM, "   ") == 0.0
    with pytest.raises(ValueError, match="str"):
        estimator.probability(SYSTEM, None)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_growing_transcript_reuses_the_cache(estimator):
    """The prompt up to the user's text is in the cache: one more word computes a few tokens only."""
    estimator.probability(SYSTEM, "Please set a timer for")
    result = estimator.estimate(SYSTEM, "Please set a timer for ten")
    assert 1 <= result.num_computed <= 3
    assert result.compute_s > 0
