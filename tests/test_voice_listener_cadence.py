"""The listener streams each ASR engine by its own settings (`ListeningDefaults`, the engine's `listening`)
where ASRConfig leaves them None: the partial interval and its growth past `partial_long_s` (Moonshine's
pass costs grow with the audio), the final slack and the final redecode. Fake ASR for the rules, the
real Moonshine base on real recordings for what they are for."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from headstart.config import ASRConfig, EndpointConfig, VADConfig
from headstart.events import FinalTranscript, PartialTranscript
from headstart.voice.asr import ListeningDefaults, Transcription
from headstart.voice.endpoint import Endpointer
from headstart.voice.listener import Listener
from headstart.voice.vad import SileroVAD
from headstart.voice.words import Word, join_words
from listener_driver import run_listener
from test_voice_listener import EarlyMistakeASR, EnergyASR, silence

SR = 16000


def _listener(asr, executor, config: ASRConfig | None = None) -> Listener:
    return Listener(SileroVAD(VADConfig()), asr, Endpointer(EndpointConfig(silence_s=0.5)), config or ASRConfig(), executor)


class _Flat(EnergyASR):
    listening = ListeningDefaults(partial_interval_s=0.2, partial_long_s=float("inf"))


class _Growing(EnergyASR):
    listening = ListeningDefaults(partial_interval_s=0.2, partial_long_s=1.0)


def test_past_partial_long_s_the_partial_passes_space_out_with_the_buffer(sentence, asr_executor):
    # three sentences back to back: ~9 s of one utterance (the word gaps are shorter than the VAD's end)
    audio = np.concatenate([sentence, sentence, sentence, silence(1.0)])
    flat, growing = _Flat(), _Growing()
    asyncio.run(run_listener(_listener(flat, asr_executor), audio))
    asyncio.run(run_listener(_listener(growing, asr_executor), audio))

    def long_passes(asr):  # passes over more than 4 s of buffer
        return [length for _, length, _ in asr.calls if length > 4.0]

    # flat: a pass per 0.2 s of audio; growing: per 0.2 s x buffer / 1 s (0.8 s at 4 s, 1.6 s at 8 s),
    # plus the passes the VAD's pauses start either way
    assert len(long_passes(growing)) <= len(long_passes(flat)) // 2, (len(long_passes(growing)), len(long_passes(flat)))
    assert len(growing.calls) < len(flat.calls)


def test_the_engines_settings_apply_where_the_config_leaves_them_none(sentence, asr_executor):
    class Redecoding(EarlyMistakeASR):
        listening = ListeningDefaults(final_redecode=True)

    audio = np.concatenate([sentence, silence(1.0)])
    events = asyncio.run(run_listener(_listener(Redecoding(), asr_executor), audio))
    final = next(e for e in events if isinstance(e, FinalTranscript))
    assert [e for e in events if isinstance(e, PartialTranscript)][-1].committed.startswith("how")
    assert final.text.split()[0] == "had"  # the final pass' own hypothesis: the engine's choice
    # a value in the config wins over the engine's
    events = asyncio.run(run_listener(_listener(Redecoding(), asr_executor, ASRConfig(final_redecode=False)), audio))
    assert next(e for e in events if isinstance(e, FinalTranscript)).text.split()[0] == "how"


class _GuessesOnShortAudio(EnergyASR):
    """Mishears the first word while it has under 1.2 s of audio (as Moonshine guesses "M." for "And Mr.")."""

    def transcribe(self, samples, offset_s=0.0):
        result = super().transcribe(samples, offset_s)
        if not result.words or samples.shape[0] >= 1.2 * SR:
            return result
        first = result.words[0]
        words = (Word(" how", first.start_s, first.end_s),) + result.words[1:]
        return Transcription(words, join_words(words), 0.0, -0.1, result.audio_s)


@pytest.mark.parametrize("agreement_n", [2, 3])
def test_the_engines_agreement_n_decides_what_short_audio_commits(sentence, asr_executor, agreement_n):
    class Engine(_GuessesOnShortAudio):
        listening = ListeningDefaults(partial_interval_s=0.3, agreement_n=agreement_n)

    asr = Engine()
    events = asyncio.run(run_listener(_listener(asr, asr_executor), np.concatenate([sentence, silence(1.0)])))
    short = [length for _, length, _ in asr.calls if length < 1.2]
    assert len(short) >= 2, short  # the guess comes twice or more: LocalAgreement-2 commits it, -3 does not
    committed = [e.committed for e in events if isinstance(e, PartialTranscript) and e.committed]
    assert committed and committed[0].startswith("how") == (agreement_n == 2), committed


def test_an_engine_without_settings_streams_as_whisper_does(sentence, asr_executor):
    asr = EnergyASR()  # no `listening`: ListeningDefaults(), whisper's (a pass per 0.4 s of audio)
    asyncio.run(run_listener(_listener(asr, asr_executor), np.concatenate([sentence, silence(1.0)])))
    lengths = sorted(length for _, length, _ in asr.calls)
    steps = np.diff(lengths)
    assert steps.size and np.median(steps) >= 0.38, lengths


@pytest.mark.parametrize("config", [ASRConfig(min_new_audio_s=-0.1), ASRConfig(partial_long_s=0.0), ASRConfig(final_slack_s=-1.0),
                                    ASRConfig(agreement_n=0)])
def test_bad_cadence_settings_are_clear_errors(asr_executor, config):
    with pytest.raises(ValueError, match="ASRConfig"):
        _listener(EnergyASR(), asr_executor, config)


# --- the real Moonshine base -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def moonshine_asr():
    from headstart.voice.moonshine import MoonshineASR
    from tests.prepared import model_path

    return MoonshineASR(model_path("moonshine-base"), ASRConfig(), cpu_threads=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["librivox-0920", "confbridge-inc-talk-vol-in"])
def test_moonshine_finals_hear_the_whole_utterance_through_the_listener(moonshine_asr, asr_executor, name):
    """With the settings the listener used for every engine before (a pass per 0.4 s, a final that may
    stop 0.05 s before the last voiced window, committed words + the rest) these finals read "How do
    you marry ..." (librivox-0920: words committed from short audio) and "To increase your" (the last
    words lost: the final pass heard too little past the speech)."""
    from headstart.corpus.recordings import recording
    from headstart.corpus.wer import word_error_rate

    rec = recording(name)
    audio = np.concatenate([rec.read(), silence(2.0)])
    events = asyncio.run(run_listener(_listener(moonshine_asr, asr_executor), audio, timeout_s=30))
    finals = [e.text for e in events if isinstance(e, FinalTranscript)]
    assert finals and word_error_rate(rec.text, finals[-1]) <= 0.06, finals  # 0920: the reference's "a more a amiable"
