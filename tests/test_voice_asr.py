"""The faster-whisper adapter with the real whisper-tiny.en: speech in, no words from silence or noise."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from headstart.audio import AudioError, read_wav
from headstart.config import ASRConfig
from headstart.voice.asr import Transcription, WhisperASR, segment_drop_reason
from tests.prepared import speech, whisper

pytestmark = pytest.mark.models  # loads a real prepared model (make test-unit leaves it out)

REFERENCE = "he was not an ill disposed young man"


def normalize(text: str) -> list[str]:
    from num2words import num2words

    text = re.sub(r"\d+", lambda m: " " + num2words(int(m.group())) + " ", text.lower())
    return re.sub(r"[^a-z' ]+", " ", text.replace("-", " ")).split()


def wer(reference: str, hypothesis: str) -> float:
    import jiwer

    return jiwer.wer(" ".join(normalize(reference)), " ".join(normalize(hypothesis)) or "<empty>")


@pytest.fixture(scope="module")
def asr() -> WhisperASR:
    return whisper(ASRConfig())


@pytest.fixture(scope="module")
def asr8() -> WhisperASR:
    """tiny.en with an 8 s encoder window, where it loops on the clips of the loop tests (the default
    window loops less: the filters are tested where the loops are)."""
    return whisper(ASRConfig(encoder_window_s=8.0))


def test_sentence_is_transcribed_with_ordered_word_times(asr, sentence):
    result = asr.transcribe(sentence, offset_s=10.0)
    assert wer(REFERENCE, result.text) <= 0.4, result.text  # tiny.en: 'old-sposed' (0.25)
    assert result.text == "".join(w.text for w in result.words).strip()
    starts = [w.start_s for w in result.words]
    assert starts == sorted(starts)
    assert all(10.0 <= w.start_s <= w.end_s <= 10.0 + 3.0 + 0.05 for w in result.words)
    assert result.no_speech_prob < 0.5 and result.compute_s > 0 and result.audio_s == pytest.approx(2.99, abs=0.01)


def test_sentence_then_3s_of_silence_has_each_word_once(asr, sentence):
    """cases.md: one sentence, then 3 s of silence -> no repeated or invented words."""
    audio = np.concatenate([sentence, np.zeros(3 * 16000, np.float32)])
    result = asr.transcribe(audio)
    words = normalize(result.text)
    assert len(words) == len(normalize(asr.transcribe(sentence).text))
    assert wer(REFERENCE, result.text) <= 0.4, result.text  # tiny.en: 'old-sposed' (0.25)


def _noise(std: float, seconds: float, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(int(seconds * 16000)) * std).astype(np.float32)


@pytest.mark.parametrize(
    "name, audio",
    [
        ("white noise 0.05", _noise(0.05, 5.0)),
        ("white noise 0.3", np.clip(_noise(0.3, 8.0, seed=1), -1, 1)),
        ("near-silence: +-2 LSB of int16", np.round(_noise(1.0, 10.0, seed=2)).astype(np.float32) / 32768),
        ("near-silence: -70 dBFS", _noise(3e-4, 6.0, seed=3)),
        ("50 Hz hum", (0.05 * np.sin(2 * np.pi * 50 * np.arange(5 * 16000) / 16000)).astype(np.float32)),
    ],
)
def test_no_words_from_noise_or_near_silence(asr, name, audio):
    result = asr.transcribe(audio)
    assert result.words == () and result.text == "", f"{name}: {result.text!r} (dropped {result.dropped})"


@pytest.mark.parametrize("seconds", [0.0, 5.0, 10.0])
def test_empty_or_digital_silence_skips_the_model(asr, monkeypatch, seconds):
    def must_not_run(samples):
        raise AssertionError("the model was called on silence")

    monkeypatch.setattr(asr, "_run", must_not_run)
    result = asr.transcribe(np.zeros(int(seconds * 16000), np.float32))
    assert result == Transcription((), "", 1.0, 0.0, seconds)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.zeros(16000, np.float64), "float32"),
        (np.zeros(16000, np.int16), "float32"),
        (np.zeros((16000, 2), np.float32), "float32"),
        (np.array([0.1, np.nan] * 8000, np.float32), "NaN"),
    ],
)
def test_bad_audio_is_rejected(asr, bad, match):
    with pytest.raises(AudioError, match=match):
        asr.transcribe(bad)


def seg(text, no_speech=0.05, logprob=-0.3, ratio=1.0):
    return SimpleNamespace(text=text, no_speech_prob=no_speech, avg_logprob=logprob, compression_ratio=ratio)


@pytest.mark.parametrize(
    "segment, reason",
    [
        (seg(" Thanks for watching!"), "known hallucination"),
        (seg(" Thank you for watching."), "known hallucination"),
        (seg(" Subtitles by the Amara.org community"), "known hallucination"),
        (seg(" Please subscribe to my channel."), "known hallucination"),
        (seg(" [Music]"), "no words"),
        (seg(" (upbeat music)"), "no words"),
        (seg(" ♪ ♪"), "no words"),
        (seg(" "), "no words"),
        (seg(" you", no_speech=0.3), "doubtful short phrase"),
        (seg(" Thank you.", logprob=-0.9), "doubtful short phrase"),
        (seg(" He was not.", no_speech=0.7, logprob=-1.2), "no speech"),
        (seg(" the the the the the the the the the the the", ratio=3.1), "repetition"),
        (seg(" Press Press Press Press Press Press", ratio=1.9), "repetition"),  # a loop cut short
        (seg(" Five five."), None),
        (seg(" He was not an ill disposed young man."), None),
        (seg(" Thank you.", no_speech=0.02, logprob=-0.2), None),  # said clearly: keep it
        (seg(" You are right.", no_speech=0.3), None),
        (seg(" He was not.", no_speech=0.7, logprob=-0.5), None),  # confident words despite no_speech
    ],
)
def test_segment_filter(segment, reason):
    assert segment_drop_reason(segment, ASRConfig()) == reason


def test_missing_model_gives_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="models prepare whisper-tiny.en"):
        WhisperASR(tmp_path / "nowhere", ASRConfig(), cpu_threads=1)
    from headstart.models.store import ModelNotPreparedError

    monkeypatch.setenv("HEADSTART_CACHE", str(tmp_path))
    with pytest.raises(ModelNotPreparedError, match="prepare whisper-tiny.en"):
        WhisperASR.load(ASRConfig(model="whisper-tiny.en"), cpu_threads=1)


def test_decoding_budget_grows_with_the_audio_and_stays_under_whispers_limit():
    from headstart.voice.asr import max_new_tokens

    assert max_new_tokens(0) == 10
    assert max_new_tokens(16000) == 20
    assert max_new_tokens(16000 * 30) + 60 + 4 < 448


def test_a_short_clip_that_loops_costs_little_and_gives_no_words(asr8):
    """0.2 s of a real "Press ..." prompt: tiny.en with the 8 s window loops on it ("Press Press
    Press ..."); the budget stops the loop and the cut-short segment is dropped."""

    from headstart.corpus.recordings import recordings

    rec = next(r for r in recordings() if r.name == "vm-onefor-full")
    audio = speech("asterisk_allison_16k/vm-onefor-full.wav")
    clip = audio[int((rec.speech_start_s - 0.1) * 16000) : int((rec.speech_start_s + 0.2) * 16000)]
    result = asr8.transcribe(clip)
    assert "press press" not in result.text.lower()
    # on an AVX-512 CPU the decoder stops after "Press Press(0 s)" instead of running to
    # the budget; a phrase copied with no audio of its own, where the model doubts it heard speech,
    # is dropped whole on either path
    assert result.words == () and result.dropped, result
    # the loop was decoded only up to the budget (10 + 10 tokens/s: 13 tokens, not Whisper's 448)
    assert all(len(d.split()) <= 13 for d in result.dropped), result.dropped


def _asterisk(name: str) -> np.ndarray:
    return speech(f"asterisk_allison_16k/{name}.wav")


def test_a_pass_that_loops_inside_its_hypothesis_gives_each_word_once(asr8):
    """tiny.en with the 8 s window on the first 1.1 s of cards_001 ("ten of clubs")
    wrote "10 of clubs. 10 of clubs. 10", the copy with zero-length words; it is cut where it begins."""
    result = asr8.transcribe(speech("pocketsphinx_cards/cards_001.wav")[: int(1.1 * 16000)])
    words = normalize(result.text)
    assert words and len(words) == len(set(words)), result
    assert wer("ten of clubs", result.text) <= 0.34, result


def test_a_long_pass_that_loops_at_its_end_keeps_the_words_before_the_loop(asr8):
    """A long utterance's pass (trimmed buffer, committed text as the prompt) whose
    last segment loops was dropped whole as "repetition", real words with it; only the loop goes.
    Ten Asterisk prompts joined by 0.1 s of zeros; tiny.en (8 s window) loops on the pass that
    starts at "has left the conference" and stops at 19.6 s, after "placed into the conference"."""
    from headstart.corpus.recordings import recordings

    recs = [r for r in recordings() if r.relative_path.startswith("asterisk")][:10]
    parts = []
    for r in recs:
        audio = read_wav(r.path)
        parts += [audio[max(int(r.speech_start_s * 16000) - 800, 0) : int(r.speech_end_s * 16000) + 800],
                  np.zeros(1600, np.float32)]
    audio = np.concatenate(parts)
    prompt = ("That Agent is already logged on. Please enter your agent number followed by the pound key. "
              "All circuits are busy now. Call forward on busy. That conference is full.")
    result = asr8.transcribe(audio[int(10.82 * 16000) : int(19.6 * 16000)], 10.82, prompt=prompt)
    heard = ("has left the conference. this conference is locked. the conference is now being recorded. "
             "you will now be placed into the conference.")
    assert wer(heard, result.text) <= 0.15, result
    text = " ".join(normalize(result.text))
    assert text.count("now being recorded") == 1 and text.count("placed into") == 1, result


def test_a_pass_that_writes_nothing_after_its_prompt_is_redone_without_it(asr8):
    """Ten Asterisk prompts joined (the bench's 11th-20th), a pass from 6.5 s with the
    committed text as the prompt: tiny.en gave no segment at all for 6.8-8 s of speech, and the
    listener ended the turn as wordless, losing the last 20 s. The pass is redone without the prompt."""
    from headstart.corpus.recordings import recordings

    recs = [r for r in recordings() if r.relative_path.startswith("asterisk")][10:20]
    parts = []
    for r in recs:
        audio = read_wav(r.path)
        parts += [audio[max(int(r.speech_start_s * 16000) - 800, 0) : int(r.speech_end_s * 16000) + 800],
                  np.zeros(1600, np.float32)]
    audio = np.concatenate(parts)
    prompt = "to decrease your speaking volume to other participants. to increase your speaking volume to other participants."
    result = asr8.transcribe(audio[int(6.5 * 16000) : int(13.32 * 16000)], 6.5, prompt=prompt)
    assert wer("to lock or unlock the conference to mute or unmute yourself when you are muted you cannot",
               result.text) <= 0.4, result
