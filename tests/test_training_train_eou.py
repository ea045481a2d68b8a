"""Training of the EOU head (headstart/training/train_eou.py): the training pieces and the threshold
calibration on synthetic data (fast), and training on SmolLM2-135M, the small real model (slow)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from headstart.config import LLMConfig
from headstart.llm import eou_head as H
from headstart.training import train_eou as T

SYSTEM = [{"role": "system", "content": LLMConfig().system_prompt}]


def test_the_packaged_training_text_is_there():
    sentences = T.packaged_sentences()
    assert len(sentences) >= 200 and not any(s.startswith("#") for s in sentences)


def test_cut_examples_strip_punctuation_and_label_only_the_whole_utterance():
    assert T.cut_examples("Go home, now.") == [("Go", 0), ("Go home", 0), ("Go home, now", 1)]
    assert T.cut_examples("Hi!") == [("Hi", 1)]
    assert T.cut_examples(" ... ") == []


def test_auc_matches_the_pairwise_definition_with_ties():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 40).astype(float)
    labels = rng.integers(0, 2, 40)
    pos = scores[labels == 1]
    neg = scores[labels == 0]
    pairs = [(p > n) + 0.5 * (p == n) for p, n in itertools.product(pos, neg)]
    assert T.auc(scores, labels) == pytest.approx(np.mean(pairs))
    assert np.isnan(T.auc([0.1, 0.2], [1, 1]))


def test_fit_logistic_separates_and_weights_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((300, 8)) * rng.uniform(0.1, 10, 8)
    y = (x[:, 2] / 10 - x[:, 5] > 0).astype(float)
    mean, scale, w, b = T.fit_logistic(x, y, l2=1e-3)
    weights = H.EOUHeadWeights("toy", mean, scale, w, b, {"note": "x"})
    p = weights.probability(x)
    assert p.shape == (300,) and T.auc(p, y) > 0.98
    assert 0.0 < weights.probability(x[0]) < 1.0
    path = weights.save(tmp_path / "toy.npz")
    back = H.EOUHeadWeights.load(path)
    assert back.model == "toy" and back.info == {"note": "x"} and back.hidden_size == 8
    np.testing.assert_allclose(back.probability(x), p, rtol=1e-5)


@pytest.mark.slow
def test_one_forward_gives_the_same_features_as_a_forward_per_cut(smollm2_engine):
    head = H.EOUHead.load(smollm2_engine, "smollm2-135m")
    text = "Please switch off the radio in the bathroom"
    shared = T._sentence_features(head, SYSTEM, text)
    assert [label for _, _, label in shared] == [0] * 7 + [1]
    for (hidden, _, _), (cut, _) in zip(shared, T.cut_examples(text)):
        smollm2_engine.reset()
        alone = head.features(SYSTEM, cut).hidden[-1]
        np.testing.assert_allclose(hidden, alone, atol=2e-3, rtol=1e-3)


@pytest.mark.slow
def test_train_on_a_few_sentences_and_a_mismatched_head_is_refused(smollm2_engine):
    sentences = T.packaged_sentences()[:12]
    weights = T.train(smollm2_engine, "smollm2-135m", sentences, LLMConfig().system_prompt, l2_values=(0.1,))
    assert weights.hidden_size == 576 and weights.info["sentences"] == 12
    assert weights.info["examples"] > 12 and weights.info["positives"] == 12
    low, high = weights.thresholds  # calibrated on out-of-fold scores
    assert 0 < low < high < 1 and 0 <= weights.info["expected_cutoff"] <= 0.03
    with pytest.raises(ValueError, match="hidden size"):
        H.EOUHead(smollm2_engine, H.EOUHeadWeights("other", np.zeros(8), np.ones(8), np.zeros(8), 0.0))
    with pytest.raises(ValueError, match="at least 10"):
        T.train(smollm2_engine, "smollm2-135m", ["Hello there."], "sys")


@pytest.mark.slow
def test_train_on_labelled_utterances_reads_only_their_labelled_prefixes(smollm2_engine):
    from headstart.training import eou_data as D

    utterances, _ = D.training_utterances(T.packaged_sentences()[:10], labels="pause-points", synthetic=10, seed=1)
    rows = T._sentence_features(H.EOUHead(smollm2_engine, T._placeholder(smollm2_engine, "smollm2-135m")), SYSTEM, utterances[-1])
    assert [label for _, _, label in rows] == [label for _, label in utterances[-1].cuts]
    weights = T.train(smollm2_engine, "smollm2-135m", utterances, LLMConfig().system_prompt, l2_values=(0.1,))
    assert weights.info["sentences"] == 20 and weights.info["positives"] == 20
    assert weights.info["examples"] == sum(len(u.cuts) for u in utterances)
    low, high = weights.thresholds
    assert 0 < low < high < 1


@pytest.mark.slow
def test_head_separates_the_bench_transcripts_better_than_chance_and_reports_both(smollm2_engine):
    from headstart.corpus.recordings import recordings

    head = H.EOUHead.load(smollm2_engine, "smollm2-135m")
    texts = [r.text for r in recordings()][:16]
    report = T.evaluate(head, texts, LLMConfig().system_prompt)
    assert report["utterances"] >= 8
    assert report["auc_head_middle_cut"] > 0.75, report
    assert report["auc_token_middle_cut"] > 0.6, report  # the raw token probability separates them too


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
    extra = build_parser().parse_args(["llm", "train-eou", "--extra-rows", str(tmp_path / "missing.json")])
    assert extra.extra_rows == str(tmp_path / "missing.json")
    assert extra.func(extra) == 2 and "missing.json" in capsys.readouterr().out  # a clear message, no model loaded


def test_silence_for_is_the_endpointers_mapping():
    from dataclasses import replace

    from headstart.config import EndpointConfig
    from headstart.voice.endpoint import required_silence_s

    config = replace(EndpointConfig(), eou_low=0.2, eou_high=0.9, min_silence_s=0.1, max_silence_s=1.8)
    for p in (0.0, 0.01, 0.2, 0.3, 0.5, 0.7, 0.9, 0.95, 1.0):
        assert T.silence_for(p, 0.2, 0.9, 0.1, 1.8) == pytest.approx(required_silence_s(config, p))


def test_expected_cutoff_of_a_uniform_pause():
    # pauses uniform in [0.6, 1.5] s; the VAD pads the end by 0.1 s
    assert T.expected_cutoff(0.0) == 1.0 and T.expected_cutoff(1.4) == 0.0
    assert T.expected_cutoff(0.95) == pytest.approx(0.5)
    np.testing.assert_allclose(T.expected_cutoff(np.array([0.5, 2.0])), [1.0, 0.0])


def test_calibrated_thresholds_meet_the_cutoff_bound_at_the_least_wait():
    rng = np.random.default_rng(0)
    complete = 1 / (1 + np.exp(-rng.normal(2.0, 1.5, 400)))
    cut = 1 / (1 + np.exp(-rng.normal(-2.5, 1.5, 400)))
    out = T.calibrate_thresholds(complete, cut, max_cutoff=0.03)
    low, high = out["eou_low"], out["eou_high"]
    assert 0 < low < high < 1
    rate = float(np.mean(T.expected_cutoff(T.silence_for(cut, low, high, 0.0, 2.0))))
    assert rate <= 0.03 + 1e-3 and out["expected_cutoff"] == pytest.approx(rate, abs=1e-3)
    wait = float(np.mean(T.silence_for(complete, low, high, 0.0, 2.0)))
    assert out["mean_silence_complete_s"] == pytest.approx(wait, abs=1e-3)
    # no pair on a coarse grid that meets the bound waits less on complete utterances
    for lo, hi in itertools.combinations(np.geomspace(0.01, 0.99, 15), 2):
        if np.mean(T.expected_cutoff(T.silence_for(cut, lo, hi, 0.0, 2.0))) <= 0.03:
            assert np.mean(T.silence_for(complete, lo, hi, 0.0, 2.0)) >= wait - 1e-6
    # a stricter bound never waits less; a looser one never more
    assert T.calibrate_thresholds(complete, cut, max_cutoff=0.01)["mean_silence_complete_s"] >= wait
    assert T.calibrate_thresholds(complete, cut, max_cutoff=0.10)["mean_silence_complete_s"] <= wait


def test_separable_scores_end_complete_turns_at_once_and_bad_input_is_refused():
    out = T.calibrate_thresholds([0.9, 0.95, 0.99], [0.01, 0.05, 0.1], max_cutoff=0.0)
    assert out["mean_silence_complete_s"] == 0.0 and out["expected_cutoff"] == 0.0
    with pytest.raises(ValueError, match="needs complete and cut"):
        T.calibrate_thresholds([], [0.1])
    with pytest.raises(ValueError, match="probabilities"):
        T.calibrate_thresholds([0.5, float("nan")], [0.1])
    with pytest.raises(ValueError, match="max_cutoff"):
        T.calibrate_thresholds([0.5], [0.1], max_cutoff=2.0)
    assert H.EOUHeadWeights("m", np.zeros(2), np.ones(2), np.zeros(2), 0.0).thresholds is None
