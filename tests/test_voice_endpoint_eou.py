"""Semantic endpointing: the EOU probability adapts the silence; the wordless-speech guard."""

from __future__ import annotations

import pytest

from headstart.config import EndpointConfig
from headstart.events import EndOfTurn, SpeechEnded, SpeechStarted
from headstart.voice.endpoint import Endpointer, required_silence_s

CFG = EndpointConfig(silence_s=0.5, min_silence_s=0.05, max_silence_s=1.6, eou_low=1e-7, eou_high=1e-4)


def test_required_silence_is_short_when_complete_long_when_cut_and_log_linear_between():
    assert required_silence_s(CFG, None) == 0.5
    assert required_silence_s(CFG, 0.9) == 0.05
    assert required_silence_s(CFG, 1e-4) == 0.05
    assert required_silence_s(CFG, 1e-9) == 1.6
    mid = required_silence_s(CFG, 10 ** -5.5)  # halfway on the log scale
    assert mid == pytest.approx((0.05 + 1.6) / 2)
    values = [required_silence_s(CFG, 10 ** -e) for e in (8, 7, 6, 5, 4, 3)]
    assert values == sorted(values, reverse=True)


def test_complete_text_ends_the_turn_soon_after_the_speech_end():
    ep = Endpointer(CFG)
    ep.push(SpeechStarted(0.0))
    ep.push_eou(0.01)
    ep.push(SpeechEnded(2.0))
    assert ep.poll(2.04) is None
    assert ep.poll(2.05) == EndOfTurn(2.05, eou_probability=0.01)


def test_mid_sentence_pause_is_waited_out_and_speech_resumes_the_turn():
    """A 1.5 s pause after text that reads cut off does not end the turn (max_silence_s 1.6)."""
    ep = Endpointer(CFG)
    ep.push(SpeechStarted(0.0))
    ep.push_eou(1e-9)
    ep.push(SpeechEnded(1.0))
    for t in (1.1, 1.5, 2.0, 2.4):
        assert ep.poll(t) is None
    ep.push(SpeechStarted(2.5))
    ep.push_eou(0.5)  # the rest of the sentence
    ep.push(SpeechEnded(4.0))
    assert ep.poll(4.049) is None
    assert ep.poll(4.05) == EndOfTurn(4.05, eou_probability=0.5)


def test_a_late_complete_probability_ends_a_turn_already_past_its_silence():
    ep = Endpointer(CFG)
    ep.push(SpeechStarted(0.0))
    ep.push_eou(1e-9)
    ep.push(SpeechEnded(1.0))
    assert ep.poll(1.4) is None
    ep.push_eou(0.2)  # the final transcript reads complete
    assert ep.poll(1.4) == EndOfTurn(1.4, eou_probability=0.2)


def test_without_probability_the_fixed_silence_applies_and_eot_reports_1():
    ep = Endpointer(CFG)
    ep.push(SpeechStarted(0.0))
    ep.push(SpeechEnded(1.0))
    assert ep.poll(1.49) is None
    assert ep.poll(1.5) == EndOfTurn(1.5, eou_probability=1.0)


def test_probability_of_a_previous_turn_does_not_leak_into_the_next():
    ep = Endpointer(CFG)
    ep.push(SpeechStarted(0.0))
    ep.push_eou(0.5)
    ep.push(SpeechEnded(1.0))
    assert ep.poll(1.05) is not None
    ep.push_eou(0.9)  # late result for the ended turn: ignored
    ep.push(SpeechStarted(3.0))
    assert ep.eou_probability is None
    ep.push(SpeechEnded(4.0))
    assert ep.poll(4.3) is None and ep.poll(4.5) is not None


def test_wordless_speech_after_words_ends_the_turn_claps_do_not_hold_it_open():
    """cases.md: speech, then claps/breathing the VAD calls speech: once the recogniser has heard
    max_wordless_s past the last word, the turn ends (not forced: no new turn is opened)."""
    ep = Endpointer(EndpointConfig(max_wordless_s=2.0))
    ep.push(SpeechStarted(0.0))
    ep.push_words(2.5, heard_until_s=3.0)
    assert ep.poll(4.0) is None
    ep.push_words(None, heard_until_s=4.4)  # passes find no new word
    assert ep.poll(4.45) is None
    ep.push_words(None, heard_until_s=4.5)
    eot = ep.poll(4.5)
    assert eot is not None and not ep.forced and not ep.in_turn


def test_wordless_guard_counts_heard_audio_not_stream_time():
    """A recogniser lagging behind the stream (frames faster than real time) must not end a turn."""
    ep = Endpointer(EndpointConfig(max_wordless_s=2.0))
    ep.push(SpeechStarted(0.0))
    ep.push_words(1.0, heard_until_s=1.2)
    assert ep.poll(10.0) is None  # 10 s of stream, but only 1.2 s heard


def test_max_turn_backstop_still_applies_with_a_low_probability():
    ep = Endpointer(EndpointConfig(max_turn_s=5.0))
    ep.push(SpeechStarted(0.0))
    ep.push_eou(1e-12)
    assert ep.poll(4.9) is None
    assert ep.poll(5.0) is not None and ep.forced


@pytest.mark.parametrize("kwargs, match", [
    ({"min_silence_s": 2.0, "max_silence_s": 1.0}, "exceeds"),
    ({"eou_low": 0.5, "eou_high": 0.1}, "eou_low"),
    ({"eou_low": 0.0}, "eou_low"),
    ({"max_wordless_s": 0.0}, "max_wordless_s"),
    ({"min_silence_s": -1.0}, "min_silence_s"),
])
def test_bad_configs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Endpointer(EndpointConfig(**kwargs))


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_bad_probability(bad):
    ep = Endpointer(CFG)
    ep.push(SpeechStarted(0.0))
    with pytest.raises(ValueError, match="eou_probability"):
        ep.push_eou(bad)
