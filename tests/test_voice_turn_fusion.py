"""The end-of-turn fusion (headstart/voice/turn_fusion.py) and the Endpointer with it switched on
(EndpointConfig.acoustic_model): plain synchronous policy tests, no event loop, no model."""

from __future__ import annotations

import math

import pytest

from headstart.config import EndpointConfig
from headstart.events import SpeechEnded, SpeechStarted
from headstart.voice.endpoint import Endpointer
from headstart.bench.turn_fusion_fit import evaluate, fit, fit_text_thresholds
from headstart.voice.turn_fusion import FITTED, FusionWeights, ending

FUSION = EndpointConfig(acoustic_model="smart-turn-v3.2", eou_low=0.805, eou_high=0.825)
TODAY = EndpointConfig(acoustic_model=None, eou_low=0.805, eou_high=0.825)  # the text head alone


@pytest.mark.parametrize(
    "text, kind",
    [
        ("After the tone say you're unavailable...", "trailing"),
        ("Press 6 to…", "trailing"),
        ("The password you entered and re-", "trailing"),
        ("Please leave your message after the tone,", "trailing"),
        ("Go forward 10 meters.", "terminal"),
        ("Change to which folder?", "terminal"),
        ('He said "stop."', "terminal"),
        ("This conference is", "none"),
        ("", "none"),
        ("   ", "none"),
    ],
)
def test_ending_reads_whispers_marks(text, kind):
    assert ending(text) == kind


def test_ending_rejects_non_text():
    with pytest.raises(ValueError, match="str"):
        ending(None)  # type: ignore[arg-type]


def test_trailing_marks_and_a_hesitant_sound_outweigh_a_text_that_reads_complete():
    """The listening issue's case: "After the tone say you're unavailable..." scored 0.95 by the text
    head (which strips the "...") and the reply started inside a 0.8 s pause."""
    text = "After the tone say you're unavailable..."
    fused = FITTED.probability(0.95, 0.05, text)
    assert fused < FITTED.eou_low
    # the same words ending in a full stop, and sounding finished, read complete
    assert FITTED.probability(0.95, 0.95, "After the tone say you're unavailable.") >= FITTED.eou_high


def test_a_finished_sound_lifts_a_complete_text_the_head_doubts():
    """The issue's other failure: "Press 1 to enter an extension, press 2 to use the directory"
    doubted by the head (below its 0.805 threshold) waited the 2 s ceiling."""
    text = "Press 1 to enter an extension, press 2 to use the directory."
    assert FITTED.probability(0.5, 0.97, text) >= FITTED.eou_high
    assert FITTED.probability(0.5, 0.05, text) < FITTED.eou_high


def test_fusion_weights_validate():
    with pytest.raises(ValueError, match="eou_low < eou_high"):
        FusionWeights(1, 1, 0, 0, 0, eou_low=0.9, eou_high=0.5)
    with pytest.raises(ValueError, match="finite"):
        FusionWeights(math.nan, 1, 0, 0, 0, eou_low=0.1, eou_high=0.5)
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="in \\[0, 1\\]"):
            FITTED.probability(bad, 0.5, "")
        with pytest.raises(ValueError, match="in \\[0, 1\\]"):
            FITTED.probability(0.5, bad, "")
    assert 0.0 <= FITTED.probability(0.0, 0.0, "") <= FITTED.probability(1.0, 1.0, "x.") <= 1.0


def _rows():
    """Synthetic scored rows: complete turns sound finished and end in '.', cuts trail off."""
    rows = []
    for i in range(20):
        rows.append({"text": "All done.", "p_text": 0.6 + 0.02 * i, "p_acoustic": {"0.2": 0.7 + 0.01 * i}, "label": 1})
        rows.append({"text": "Press 1 to..." if i % 2 else "Press 1 to", "p_text": 0.05 + 0.04 * i,
                     "p_acoustic": {"0.2": 0.02 + 0.02 * i}, "label": 0})
    return rows


def test_fit_separates_and_its_thresholds_keep_cut_offs_down():
    rows = _rows()
    weights = fit(rows, max_cutoff=0.02)
    assert weights.text > 0 and weights.acoustic > 0 and weights.trailing < 0
    report = evaluate(weights, rows)
    assert report["auc_fused"] == 1.0
    assert report["fused_expected_cutoff"] <= 0.02
    with pytest.raises(ValueError, match="complete and cut"):
        fit([r for r in rows if r["label"] == 1])


def test_text_thresholds_refit_on_rows_keep_their_cut_offs_down():
    # cut texts that read complete (0.86-0.90: "Press 1 to send this message."), complete turns up to 0.99
    rows = _rows() + [{"text": "Press 1.", "p_text": 0.86 + 0.01 * i, "p_acoustic": {"0.2": 0.5}, "label": 0} for i in range(5)]
    rows += [{"text": "Done.", "p_text": 0.95 + 0.01 * i, "p_acoustic": {"0.2": 0.9}, "label": 1} for i in range(5)]
    pair = fit_text_thresholds(rows, max_cutoff=0.02)
    assert pair["eou_high"] > 0.9
    assert 0 < pair["eou_low"] < pair["eou_high"] <= 1 and pair["expected_cutoff"] <= 0.02
    report = evaluate(FITTED, rows, text_thresholds=(pair["eou_low"], pair["eou_high"]))
    assert report["text_expected_cutoff"] <= 0.02
    assert evaluate(FITTED, rows)["text_expected_cutoff"] > 0.02  # the shipped 0.805 / 0.825 cut these rows' pauses
    with pytest.raises(ValueError, match="complete and cut"):
        fit_text_thresholds([r for r in rows if r["label"] == 0])


# -- the Endpointer with the fusion ---------------------------------------------------------------

def _pause(ep: Endpointer, end_s: float = 1.0) -> None:
    ep.push(SpeechStarted(0.0))
    ep.push(SpeechEnded(end_s))


def test_off_without_an_acoustic_model_and_acoustic_scores_are_ignored():
    ep = Endpointer(TODAY)
    assert ep.fusion is None
    _pause(ep)
    ep.await_acoustic()
    assert not ep.awaiting_acoustic
    ep.push_eou(0.95, "After the tone say you're unavailable...")
    ep.push_acoustic(0.01)
    assert ep.acoustic_probability is None and ep.fused_probability is None
    assert ep.required_silence_s == TODAY.min_silence_s  # today's endpointer: the text alone
    eot = ep.poll(1.0)
    assert eot is not None and eot.eou_probability == 0.95


def test_trailing_off_pause_is_waited_out_with_the_fusion():
    """The same pause as above, the fusion on: no end of turn inside a 1.5 s pause."""
    ep = Endpointer(FUSION)
    assert ep.fusion is FITTED
    _pause(ep)
    ep.push_eou(0.95, "After the tone say you're unavailable...")
    ep.push_acoustic(0.05)
    assert ep.required_silence_s == pytest.approx(FUSION.max_silence_s)
    assert ep.poll(2.4) is None
    ep.push(SpeechStarted(2.4))  # the user goes on: one turn
    assert ep.in_turn and ep.acoustic_probability is None


def test_complete_text_the_head_doubts_ends_at_once_when_it_sounds_finished():
    text = "Press 1 to enter an extension, press 2 to use the directory."
    today, fused = Endpointer(TODAY), Endpointer(FUSION)
    for ep in (today, fused):
        _pause(ep)
        ep.push_eou(0.5, text)
    fused.push_acoustic(0.97)
    assert today.required_silence_s > 1.0
    assert fused.required_silence_s == FUSION.min_silence_s
    eot = fused.poll(1.0)
    assert eot is not None and eot.eou_probability == pytest.approx(FITTED.probability(0.5, 0.97, text))


def test_awaiting_the_acoustic_score_holds_the_turn_and_without_one_the_text_decides():
    ep = Endpointer(FUSION)
    _pause(ep)
    ep.await_acoustic()
    ep.push_eou(0.99, "Go forward 10 meters.")
    assert ep.awaiting_acoustic and ep.required_silence_s == FUSION.max_silence_s
    assert ep.poll(1.5) is None
    ep.push_acoustic(None)  # none could be computed: the text alone, as today
    assert not ep.awaiting_acoustic and ep.fused_probability is None
    assert ep.required_silence_s == FUSION.min_silence_s
    assert ep.poll(1.5) is not None


def test_resumed_speech_makes_the_acoustic_score_stale_and_a_new_turn_starts_clean():
    ep = Endpointer(FUSION)
    _pause(ep)
    ep.await_acoustic()
    ep.push(SpeechStarted(1.1))
    assert not ep.awaiting_acoustic and ep.acoustic_probability is None
    ep.push(SpeechEnded(2.0))
    ep.push_acoustic(0.9)
    ep.push_eou(0.9, "Done.")
    assert ep.poll(2.0) is not None
    _pause(ep, 3.0)  # the next turn: nothing carried over
    assert ep.acoustic_probability is None and ep.eou_probability is None and ep.fused_probability is None


def test_fusion_uses_its_own_thresholds_and_a_custom_weight_set():
    weights = FusionWeights(text=0.0, acoustic=1.0, trailing=0.0, unpunctuated=0.0, bias=0.0, eou_low=0.2, eou_high=0.6)
    ep = Endpointer(FUSION, fusion=weights)
    _pause(ep)
    ep.push_eou(0.01, "cut")  # the text is ignored by these weights
    ep.push_acoustic(0.7)
    assert ep.fused_probability == pytest.approx(0.7) and ep.required_silence_s == 0.0
    with pytest.raises(TypeError, match="FusionWeights"):
        Endpointer(FUSION, fusion={"text": 1.0})  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-0.1, 1.1, math.nan])
def test_bad_acoustic_probability_and_settings_raise(bad):
    ep = Endpointer(FUSION)
    _pause(ep)
    with pytest.raises(ValueError, match="acoustic probability"):
        ep.push_acoustic(bad)
    with pytest.raises(ValueError, match="acoustic_after_s"):
        Endpointer(EndpointConfig(acoustic_model="smart-turn-v3.2", acoustic_after_s=0.0))
    with pytest.raises(ValueError, match="str"):
        ep.push_eou(0.5, None)  # type: ignore[arg-type]


def test_semantic_off_ignores_the_fusion():
    ep = Endpointer(EndpointConfig(acoustic_model="smart-turn-v3.2", semantic=False))
    _pause(ep)
    ep.await_acoustic()
    ep.push_eou(0.99, "Done.")
    ep.push_acoustic(0.99)
    assert ep.required_silence_s == ep.config.silence_s


def test_the_raw_token_probability_keeps_todays_endpointer():
    """The fusion was fitted on the trained head's probabilities; the token scorer's are ~1e-4."""
    ep = Endpointer(EndpointConfig(acoustic_model="smart-turn-v3.2", eou_scorer="token"))
    assert ep.fusion is None


def test_off_by_default_and_on_with_the_trained_head():
    """Off by default (it cut more pauses than the text head alone in the latest bench run,
    docs/listening.md); on with a model named and the trained head."""
    assert EndpointConfig().acoustic_model is None and Endpointer(EndpointConfig()).fusion is None
    assert Endpointer(EndpointConfig(acoustic_model="smart-turn-v3.2")).fusion is FITTED
