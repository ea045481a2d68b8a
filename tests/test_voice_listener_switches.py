"""The ablation switches the latency harness uses: `ASRConfig.streaming` (no partial passes: one pass
over the whole utterance at the VAD's end of speech) and `EndpointConfig.semantic` (fixed silence, the
EOU scorer ignored). Real Silero VAD on a real recording, a fake ASR (fast)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from headstart.config import ASRConfig, EndpointConfig
from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded
from headstart.voice.endpoint import Endpointer, required_silence_s
from headstart.events import SpeechStarted
from tests.test_voice_listener import EnergyASR, check_turn_shape, run_listener, silence
from tests.test_voice_listener_eou import WordCountScorer, listener


def test_streaming_off_runs_one_pass_over_the_whole_utterance_at_the_speech_end(sentence, asr_executor):
    asr = EnergyASR()
    audio = np.concatenate([sentence, silence(2.0)])
    events = asyncio.run(run_listener(listener(asr, asr_executor, asr_config=ASRConfig(streaming=False)), audio))
    check_turn_shape(events)
    assert not any(isinstance(e, PartialTranscript) for e in events)
    started = events[0]
    ended = next(e for e in events if isinstance(e, SpeechEnded))
    final = next(e for e in events if isinstance(e, FinalTranscript))
    assert len(asr.calls) == 1
    offset_s, length_s, _ = asr.calls[0]
    assert offset_s == pytest.approx(started.audio_s)
    assert offset_s + length_s == pytest.approx(ended.audio_s, abs=1e-3)  # the whole utterance, no more
    # the same words as the streaming run
    streaming = asyncio.run(run_listener(listener(EnergyASR(), asr_executor), audio))
    assert final.text == next(e for e in streaming if isinstance(e, FinalTranscript)).text != ""


def test_streaming_off_with_resumed_speech_still_ends_in_one_turn_without_partials(sentence, asr_executor):
    asr = EnergyASR()
    half = sentence.shape[0] // 2
    audio = np.concatenate([sentence[:half], silence(0.4), sentence[half:], silence(2.0)])
    events = asyncio.run(run_listener(
        listener(asr, asr_executor, endpoint=EndpointConfig(semantic=False, silence_s=1.0), asr_config=ASRConfig(streaming=False)),
        audio))
    check_turn_shape(events)
    assert not any(isinstance(e, PartialTranscript) for e in events)
    assert sum(isinstance(e, EndOfTurn) for e in events) == 1
    # a final per speech end (each pass over the utterance so far); the last covers both parts
    last_end = [e for e in events if isinstance(e, SpeechEnded)][-1]
    finals = [e for e in events if isinstance(e, FinalTranscript)]
    assert finals[-1].audio_end_s == pytest.approx(last_end.audio_s)
    assert len(asr.calls) == len(finals) and asr.calls[-1][1] > sentence.shape[0] / 16000 * 0.9


def test_semantic_off_ignores_the_probability_and_never_calls_the_scorer(sentence, asr_executor):
    audio = np.concatenate([sentence, silence(3.0)])
    scorer = WordCountScorer(1)  # everything reads complete: with semantic on the turn ends at once
    fixed = EndpointConfig(semantic=False, silence_s=1.2, min_silence_s=0.0)
    events = asyncio.run(run_listener(listener(EnergyASR(), asr_executor, scorer=scorer, endpoint=fixed), audio))
    check_turn_shape(events)
    assert scorer.texts == []
    ended = next(e for e in events if isinstance(e, SpeechEnded))
    eot = next(e for e in events if isinstance(e, EndOfTurn))
    assert ended.audio_s + 1.2 <= eot.audio_s < ended.audio_s + 1.2 + 0.02 + 1e-9
    assert eot.eou_probability == 1.0  # none known
    semantic = asyncio.run(run_listener(
        listener(EnergyASR(), asr_executor, scorer=WordCountScorer(1), endpoint=EndpointConfig(silence_s=1.2)), audio))
    eot_semantic = next(e for e in semantic if isinstance(e, EndOfTurn))
    assert eot_semantic.audio_s < eot.audio_s - 0.5


def test_endpointer_with_semantic_off_keeps_the_fixed_silence_for_any_probability():
    config = EndpointConfig(semantic=False, silence_s=0.7)
    for p in (None, 0.0, 1e-8, 1e-5, 0.9, 1.0):
        assert required_silence_s(config, p) == 0.7
    ep = Endpointer(config)
    ep.push(SpeechStarted(0.0))
    ep.push(SpeechEnded(1.0))
    ep.push_eou(0.99)
    assert ep.poll(1.5) is None
    eot = ep.poll(1.7)
    assert eot is not None and eot.eou_probability == 0.99  # still reported
    with pytest.raises(ValueError):
        Endpointer(config).push_eou(float("nan"))
