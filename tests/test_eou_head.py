"""The EOU head (headstart/llm/eou_head.py): training pieces on synthetic data (fast), and the packaged
head on SmolLM2-135M, the small real model (slow)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from headstart.config import LLMConfig, ThreadPlan
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


def test_cut_examples_strip_punctuation_and_label_only_the_whole_utterance():
    assert H.cut_examples("Go home, now.") == [("Go", 0), ("Go home", 0), ("Go home, now", 1)]
    assert H.cut_examples("Hi!") == [("Hi", 1)]
    assert H.cut_examples(" ... ") == []


def test_auc_matches_the_pairwise_definition_with_ties():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 40).astype(float)
    labels = rng.integers(0, 2, 40)
    pos = scores[labels == 1]
    neg = scores[labels == 0]
    pairs = [(p > n) + 0.5 * (p == n) for p, n in itertools.product(pos, neg)]
    assert H.auc(scores, labels) == pytest.approx(np.mean(pairs))
    assert np.isnan(H.auc([0.1, 0.2], [1, 1]))


def test_fit_logistic_separates_and_weights_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((300, 8)) * rng.uniform(0.1, 10, 8)
    y = (x[:, 2] / 10 - x[:, 5] > 0).astype(float)
    mean, scale, w, b = H.fit_logistic(x, y, l2=1e-3)
    weights = H.EOUHeadWeights("toy", mean, scale, w, b, {"note": "x"})
    p = weights.probability(x)
    assert p.shape == (300,) and H.auc(p, y) > 0.98
    assert 0.0 < weights.probability(x[0]) < 1.0
    path = weights.save(tmp_path / "toy.npz")
    back = H.EOUHeadWeights.load(path)
    assert back.model == "toy" and back.info == {"note": "x"} and back.hidden_size == 8
    np.testing.assert_allclose(back.probability(x), p, rtol=1e-5)


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
    assert len(H.packaged_sentences()) >= 200
    qwen = H.load_weights("qwen2.5-coder-0.5b")  # the session's default LLM
    assert qwen.hidden_size == 896 and qwen.info["heldout_auc"] > 0.9
    # both shipped heads carry thresholds calibrated on out-of-fold scores (train-eou)
    for weights in (packaged, qwen):
        low, high = weights.thresholds
        assert 0 < low < high < 1 and weights.info["expected_cutoff"] <= weights.info["max_cutoff"]


# -- the real model -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine():
    from headstart.llm.engine import LLMEngine
    from headstart.models import ModelNotPreparedError

    try:
        return LLMEngine.from_config(LLMConfig(model="smollm2-135m"), ThreadPlan())
    except ModelNotPreparedError as exc:
        pytest.skip(str(exc))


@pytest.mark.slow
def test_packaged_head_tells_complete_from_cut_and_reuses_the_cache(engine):
    head = H.EOUHead.load(engine, "smollm2-135m")
    wins = 0
    for complete, cut in COMPLETE_AND_CUT:
        p_complete = head.probability(SYSTEM, complete + ".")  # Whisper's period is ignored
        p_cut = head.probability(SYSTEM, cut + ".")
        assert 0.0 <= p_cut <= 1.0 and 0.0 <= p_complete <= 1.0
        wins += p_complete > p_cut
    assert wins >= 4, wins
    assert head.estimate(SYSTEM, "  . ").probability == 0.0
    head.probability(SYSTEM, "How many legs does a")
    grown = head.estimate(SYSTEM, "How many legs does a spider")
    assert grown.num_computed <= 3  # only the new tokens (and the one recomputed for logits)
    assert head.last_token_probability is not None and 0.0 <= head.last_token_probability <= 1.0


@pytest.mark.slow
def test_one_forward_gives_the_same_features_as_a_forward_per_cut(engine):
    head = H.EOUHead.load(engine, "smollm2-135m")
    text = "Please switch off the radio in the bathroom"
    shared = H._sentence_features(head, SYSTEM, text)
    assert [label for _, _, label in shared] == [0] * 7 + [1]
    for (hidden, _, _), (cut, _) in zip(shared, H.cut_examples(text)):
        engine.reset()
        alone = head.features(SYSTEM, cut).hidden[-1]
        np.testing.assert_allclose(hidden, alone, atol=2e-3, rtol=1e-3)


@pytest.mark.slow
def test_train_on_a_few_sentences_and_a_mismatched_head_is_refused(engine):
    sentences = H.packaged_sentences()[:12]
    weights = H.train(engine, "smollm2-135m", sentences, LLMConfig().system_prompt, l2_values=(0.1,))
    assert weights.hidden_size == 576 and weights.info["sentences"] == 12
    assert weights.info["examples"] > 12 and weights.info["positives"] == 12
    low, high = weights.thresholds  # calibrated on out-of-fold scores
    assert 0 < low < high < 1 and 0 <= weights.info["expected_cutoff"] <= 0.03
    with pytest.raises(ValueError, match="hidden size"):
        H.EOUHead(engine, H.EOUHeadWeights("other", np.zeros(8), np.ones(8), np.zeros(8), 0.0))
    with pytest.raises(ValueError, match="at least 10"):
        H.train(engine, "smollm2-135m", ["Hello there."], "sys")


@pytest.mark.slow
def test_train_on_labelled_utterances_reads_only_their_labelled_prefixes(engine):
    from headstart.llm import eou_data as D

    utterances, _ = D.training_utterances(H.packaged_sentences()[:10], labels="pause-points", synthetic=10, seed=1)
    rows = H._sentence_features(H.EOUHead(engine, H._placeholder(engine, "smollm2-135m")), SYSTEM, utterances[-1])
    assert [label for _, _, label in rows] == [label for _, label in utterances[-1].cuts]
    weights = H.train(engine, "smollm2-135m", utterances, LLMConfig().system_prompt, l2_values=(0.1,))
    assert weights.info["sentences"] == 20 and weights.info["positives"] == 20
    assert weights.info["examples"] == sum(len(u.cuts) for u in utterances)
    low, high = weights.thresholds
    assert 0 < low < high < 1


@pytest.mark.slow
def test_head_separates_the_bench_transcripts_better_than_chance_and_reports_both(engine):
    from headstart.bench.data import recordings

    head = H.EOUHead.load(engine, "smollm2-135m")
    texts = [r.text for r in recordings()][:16]
    report = H.evaluate(head, texts, LLMConfig().system_prompt)
    assert report["utterances"] >= 8
    assert report["auc_head_middle_cut"] > 0.75, report
    assert 0.0 <= report["auc_token_middle_cut"] <= 1.0


def test_train_eou_command_line(tmp_path, capsys):
    from headstart.cli import build_parser

    args = build_parser().parse_args(["llm", "train-eou", "--model", "smollm2-135m", "--out", str(tmp_path / "h.npz")])
    assert args.model == "smollm2-135m" and callable(args.func) and not args.evaluate_bench
    few = tmp_path / "few.txt"
    few.write_text("Hello there.\n")
    bad = build_parser().parse_args(["llm", "train-eou", "--model", "smollm2-135m", "--sentences", str(few)])
    try:
        status = bad.func(bad)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"a clear message was expected, got {exc!r}")
    assert status == 2 and "at least 10" in capsys.readouterr().out  # before any model is loaded


# -- thresholds from data --------------------------------------------------------------------------
def test_silence_for_is_the_endpointers_mapping():
    from dataclasses import replace

    from headstart.config import EndpointConfig
    from headstart.voice.endpoint import required_silence_s

    config = replace(EndpointConfig(), eou_low=0.2, eou_high=0.9, min_silence_s=0.1, max_silence_s=1.8)
    for p in (0.0, 0.01, 0.2, 0.3, 0.5, 0.7, 0.9, 0.95, 1.0):
        assert H.silence_for(p, 0.2, 0.9, 0.1, 1.8) == pytest.approx(required_silence_s(config, p))


def test_expected_cutoff_of_a_uniform_pause():
    # pauses uniform in [0.6, 1.5] s; the VAD pads the end by 0.1 s
    assert H.expected_cutoff(0.0) == 1.0 and H.expected_cutoff(1.4) == 0.0
    assert H.expected_cutoff(0.95) == pytest.approx(0.5)
    np.testing.assert_allclose(H.expected_cutoff(np.array([0.5, 2.0])), [1.0, 0.0])


def test_calibrated_thresholds_meet_the_cutoff_bound_at_the_least_wait():
    rng = np.random.default_rng(0)
    complete = 1 / (1 + np.exp(-rng.normal(2.0, 1.5, 400)))
    cut = 1 / (1 + np.exp(-rng.normal(-2.5, 1.5, 400)))
    out = H.calibrate_thresholds(complete, cut, max_cutoff=0.03)
    low, high = out["eou_low"], out["eou_high"]
    assert 0 < low < high < 1
    rate = float(np.mean(H.expected_cutoff(H.silence_for(cut, low, high, 0.0, 2.0))))
    assert rate <= 0.03 + 1e-3 and out["expected_cutoff"] == pytest.approx(rate, abs=1e-3)
    wait = float(np.mean(H.silence_for(complete, low, high, 0.0, 2.0)))
    assert out["mean_silence_complete_s"] == pytest.approx(wait, abs=1e-3)
    # no pair on a coarse grid that meets the bound waits less on complete utterances
    for lo, hi in itertools.combinations(np.geomspace(0.01, 0.99, 15), 2):
        if np.mean(H.expected_cutoff(H.silence_for(cut, lo, hi, 0.0, 2.0))) <= 0.03:
            assert np.mean(H.silence_for(complete, lo, hi, 0.0, 2.0)) >= wait - 1e-6
    # a stricter bound never waits less; a looser one never more
    assert H.calibrate_thresholds(complete, cut, max_cutoff=0.01)["mean_silence_complete_s"] >= wait
    assert H.calibrate_thresholds(complete, cut, max_cutoff=0.10)["mean_silence_complete_s"] <= wait


def test_separable_scores_end_complete_turns_at_once_and_bad_input_is_refused():
    out = H.calibrate_thresholds([0.9, 0.95, 0.99], [0.01, 0.05, 0.1], max_cutoff=0.0)
    assert out["mean_silence_complete_s"] == 0.0 and out["expected_cutoff"] == 0.0
    with pytest.raises(ValueError, match="needs complete and cut"):
        H.calibrate_thresholds([], [0.1])
    with pytest.raises(ValueError, match="probabilities"):
        H.calibrate_thresholds([0.5, float("nan")], [0.1])
    with pytest.raises(ValueError, match="max_cutoff"):
        H.calibrate_thresholds([0.5], [0.1], max_cutoff=2.0)
    assert H.EOUHeadWeights("m", np.zeros(2), np.ones(2), np.zeros(2), 0.0).thresholds is None
