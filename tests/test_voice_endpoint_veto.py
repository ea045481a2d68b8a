"""The Endpointer with Smart Turn as a veto (EndpointConfig.acoustic_mode = "veto"): the text head decides
as without the acoustic model, except that a pause that sounds unfinished (acoustic P(complete) below
acoustic_veto_below) is not ended at once. Plain synchronous policy tests, no event loop, no model; the
last test runs the real Listener (Silero VAD, a real recording) with fake scorers."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace

import pytest

from headstart.config import ASRConfig, EndpointConfig, VADConfig
from headstart.events import EndOfTurn, SpeechEnded, SpeechStarted
from headstart.voice.endpoint import Endpointer
from headstart.voice.listener import Listener
from headstart.voice.vad import SileroVAD

THRESHOLDS = {"eou_low": 0.805, "eou_high": 0.825}  # the trained qwen head's own pair
VETO = EndpointConfig(acoustic_model="smart-turn-v3.2", acoustic_mode="veto", acoustic_veto_below=0.05, **THRESHOLDS)
TODAY = EndpointConfig(acoustic_model=None, **THRESHOLDS)


def _pause(ep: Endpointer, end_s: float = 1.0) -> None:
    ep.push(SpeechStarted(0.0))
    ep.push(SpeechEnded(end_s))


def test_a_complete_text_whose_pause_sounds_unfinished_is_waited_out():
    """An Asterisk prompt cut mid-sentence that the head reads 0.99 complete and Smart Turn hears 0.02."""
    ep = Endpointer(VETO)
    assert ep.acoustic_on and ep.veto and ep.fusion is None
    _pause(ep)
    ep.await_acoustic()
    ep.push_eou(0.994, "your call is now first in line.")
    ep.push_acoustic(0.021)
    assert ep.vetoed and ep.required_silence_s == VETO.max_silence_s
    assert ep.poll(1.0) is None and ep.poll(2.5) is None  # a 1.5 s pause is outlasted
    ep.push(SpeechStarted(2.5))  # the user goes on: the same turn, the stale score forgotten
    assert ep.in_turn and ep.acoustic_probability is None and not ep.vetoed
    # today's endpointer ends the same pause at once
    today = Endpointer(TODAY)
    _pause(today)
    today.push_eou(0.994, "your call is now first in line.")
    today.push_acoustic(0.021)
    assert today.poll(1.0) is not None


def test_a_complete_text_that_sounds_finished_ends_at_once_on_the_texts_probability():
    ep = Endpointer(VETO)
    _pause(ep)
    ep.await_acoustic()
    ep.push_eou(0.97, "Press 1 to send this message.")
    ep.push_acoustic(0.98)
    assert not ep.vetoed and ep.required_silence_s == VETO.min_silence_s
    eot = ep.poll(1.0)
    assert eot is not None and eot.eou_probability == 0.97  # the text's, not a fused one
    assert ep.fused_probability is None


@pytest.mark.parametrize("p_text", [0.02, 0.5, 0.81])
def test_the_veto_never_shortens_a_wait(p_text):
    """A text the head doubts waits what it waits today, however finished the pause sounds."""
    today, veto = Endpointer(TODAY), Endpointer(VETO)
    for ep in (today, veto):
        _pause(ep)
        ep.push_eou(p_text, "Welcome to the directory.")
    veto.push_acoustic(0.99)
    assert veto.required_silence_s == pytest.approx(today.required_silence_s)
    assert veto.required_silence_s > VETO.min_silence_s


def test_between_the_heads_thresholds_the_veto_waits_the_ceiling():
    ep = Endpointer(VETO)
    _pause(ep)
    ep.push_eou(0.815, "Something is terribly wrong.")
    assert 0 < ep.required_silence_s < VETO.max_silence_s
    ep.push_acoustic(0.02)
    assert ep.required_silence_s == VETO.max_silence_s


def test_the_threshold_is_strict_and_zero_switches_the_veto_off():
    ep = Endpointer(VETO)
    _pause(ep)
    ep.push_eou(0.99, "Done.")
    ep.push_acoustic(VETO.acoustic_veto_below)  # at the threshold: not below it
    assert not ep.vetoed and ep.required_silence_s == 0.0
    never = Endpointer(replace(VETO, acoustic_veto_below=0.0))
    _pause(never)
    never.push_eou(0.99, "Done.")
    never.push_acoustic(0.0)
    assert not never.vetoed and never.poll(1.0) is not None


def test_awaiting_the_acoustic_score_holds_the_turn_and_without_one_the_text_decides():
    ep = Endpointer(VETO)
    _pause(ep)
    ep.await_acoustic()
    ep.push_eou(0.99, "Go forward 10 meters.")
    assert ep.awaiting_acoustic and ep.required_silence_s == VETO.max_silence_s
    assert ep.poll(1.5) is None
    ep.push_acoustic(None)  # none could be computed: the text alone, as today
    assert not ep.awaiting_acoustic and not ep.vetoed and ep.required_silence_s == VETO.min_silence_s
    assert ep.poll(1.5) is not None


def test_no_text_probability_no_veto_and_a_new_turn_starts_clean():
    ep = Endpointer(VETO)
    _pause(ep)
    ep.push_acoustic(0.01)
    assert not ep.vetoed and ep.required_silence_s == VETO.silence_s  # no text score: as today
    ep.push_eou(0.99, "Hello.")
    assert ep.vetoed
    assert ep.poll(3.1) is not None  # the 2 s wait is over
    _pause(ep, 4.0)
    assert ep.acoustic_probability is None and ep.eou_probability is None and not ep.vetoed


def test_the_veto_applies_to_the_token_scorer_and_not_to_the_fixed_silence_ablation():
    token = Endpointer(replace(VETO, eou_scorer="token"))
    _pause(token)
    token.push_eou(0.5, "Done.")  # far above token_eou_high
    token.push_acoustic(0.01)
    assert token.vetoed and token.required_silence_s == VETO.max_silence_s
    fixed = Endpointer(replace(VETO, semantic=False))
    _pause(fixed)
    fixed.push_eou(0.99, "Done.")
    fixed.push_acoustic(0.01)
    assert fixed.required_silence_s == VETO.silence_s


def test_without_an_acoustic_model_the_mode_changes_nothing():
    ep = Endpointer(replace(VETO, acoustic_model=None))
    assert not ep.acoustic_on
    _pause(ep)
    ep.await_acoustic()
    ep.push_eou(0.99, "Done.")
    ep.push_acoustic(0.01)
    assert not ep.awaiting_acoustic and ep.acoustic_probability is None and ep.poll(1.0) is not None


@pytest.mark.parametrize(
    "change, match",
    [({"acoustic_mode": "both"}, "acoustic_mode"), ({"acoustic_veto_below": 1.5}, "acoustic_veto_below"),
     ({"acoustic_veto_below": -0.1}, "acoustic_veto_below"), ({"acoustic_veto_below": math.nan}, "acoustic_veto_below")],
)
def test_bad_settings_raise(change, match):
    with pytest.raises(ValueError, match=match):
        Endpointer(replace(VETO, **change))


# -- the Listener with the veto: the model is asked, the pause is waited out ---------------------------

def test_the_listener_asks_the_model_in_veto_mode_and_waits_out_the_pause(sentence, asr_executor):
    from tests.test_voice_listener import EnergyASR, check_turn_shape, kinds, run_listener
    from tests.test_voice_listener_acoustic import FakeAcoustic, always_complete
    from tests.test_voice_listener_eou import split_at_middle

    audio, pause_end_s = split_at_middle(sentence, 1.2, "noise")
    ends = {}
    for name, endpoint in (("veto", VETO), ("today", TODAY)):
        vad = SileroVAD(VADConfig())
        acoustic = FakeAcoustic(sentence.shape[0] / 16000, vad)  # 0.02 in the pause, 0.97 at the end
        lis = Listener(vad, EnergyASR(), Endpointer(endpoint), ASRConfig(), asr_executor,
                       eou_scorer=always_complete, acoustic_scorer=acoustic)
        events = asyncio.run(run_listener(lis, audio))
        check_turn_shape(events)
        ends[name] = ([e for e in events if isinstance(e, EndOfTurn)], len(acoustic.calls), kinds(events))
    turns, calls, seen = ends["veto"]
    assert len(turns) == 1 and turns[0].audio_s > pause_end_s and calls == 2, seen
    assert turns[0].eou_probability == 0.95  # decided on the text's probability (the sentence sounds finished)
    turns, calls, seen = ends["today"]
    assert turns[0].audio_s < pause_end_s and calls == 0, seen  # the text alone cuts the pause


# -- choosing the threshold offline (headstart/bench/turn_fusion_fit.py) -------------------------------

def _row(label: int, p_text: float, p_acoustic: float, kind: str = "noise") -> dict:
    return {"name": "x", "split": "train", "kind": "complete" if label else kind, "label": label, "text": "x.",
            "p_text": p_text, "p_acoustic": {"0.2": p_acoustic}}


def test_fit_veto_takes_the_steepest_step_with_a_margin_to_both_sides():
    from headstart.bench.turn_fusion_fit import evaluate_veto, fit_veto

    rows = [_row(1, 0.99, 0.9), _row(1, 0.99, 0.8), _row(1, 0.99, 0.07), _row(1, 0.1, 0.001),  # the last waits anyway
            _row(0, 0.99, 0.03), _row(0, 0.99, 0.02), _row(0, 0.99, 0.6), _row(0, 0.2, 0.5)]
    v = fit_veto(rows)
    # vetoing the two cuts below 0.03 costs nothing; 0.07 would cost a complete turn for no cut
    assert v == pytest.approx((0.03 * 0.07) ** 0.5, abs=1e-4)
    none, veto = evaluate_veto(rows, 0.0), evaluate_veto(rows, v)
    assert none["at_once_cut"] == "3/4" and veto["at_once_cut"] == "1/4"
    assert veto["at_once_complete"] == none["at_once_complete"] == "3/4"
    assert veto["expected_cutoff"] < none["expected_cutoff"]
    assert veto["mean_silence_complete_s"] == none["mean_silence_complete_s"]
    # within a cut-off bound: the least threshold that holds the 0.6 cut too
    assert 0.6 < fit_veto(rows, max_cutoff=0.0) <= 0.8
    with pytest.raises(ValueError, match="complete and cut"):
        fit_veto([r for r in rows if r["label"] == 1])


def test_bench_asr_takes_the_mode_and_the_threshold():
    import argparse

    from headstart.cli.bench import asr as bench_asr

    parser = argparse.ArgumentParser()
    bench_asr.add_arguments(parser)
    args = parser.parse_args(["--acoustic-model", "smart-turn-v3.2", "--acoustic-mode", "veto", "--acoustic-veto-below", "0.1"])
    assert (args.acoustic_mode, args.acoustic_veto_below) == ("veto", 0.1)
    assert parser.parse_args([]).acoustic_mode is None  # the session's
    with pytest.raises(SystemExit):
        parser.parse_args(["--acoustic-mode", "both"])
