"""Engines beyond the basics: hibari, odd input on every in-process engine, resampled output streams,
and the normaliser on whole everyday sentences."""

from __future__ import annotations

import asyncio
import shutil

import numpy as np
import pytest

from headstart.config import ThreadPlan, TTSConfig
from headstart.tts.base import Synthesizer, TTSError
from headstart.tts.chunker import ClauseChunker
from headstart.tts.engines import check_engine, load_synthesizer
from headstart.tts.normalize import normalize_text
from headstart.tts.stream import TTSStream
from tests.prepared import prepared

ODD_INPUTS = ["ｘｙｚ", "🙂🙂", "qwrtp zzkx", "1234567890123456789012345678901234567890", "3.14159265358979323846"]


def _hibari_available() -> bool:
    try:
        import hibari  # noqa: F401
    except ImportError:
        return False
    return True


needs_hibari = pytest.mark.skipif(not _hibari_available(), reason="hibari-tts is not installed")
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")


@pytest.fixture(scope="module")
def hibari():
    if not _hibari_available():
        pytest.skip("hibari-tts is not installed")
    return load_synthesizer(TTSConfig(engine="hibari"), ThreadPlan(tts_threads=1))


@pytest.fixture(scope="module")
def espeak():
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed")
    return load_synthesizer(TTSConfig(engine="espeak"), ThreadPlan())


# --- hibari ------------------------------------------------------------------------------------------


@needs_hibari
def test_hibari_speaks_24khz_float32_one_array_per_sentence(hibari):
    assert isinstance(hibari, Synthesizer) and hibari.sample_rate == 24_000 and hibari.name == "hibari:heart"
    arrays = list(hibari.synthesize("Sure, the weather is fine. See you soon!"))
    assert len(arrays) == 2
    for audio in arrays:
        assert audio.dtype == np.float32 and audio.ndim == 1 and np.isfinite(audio).all()
        assert 0.3 < audio.shape[0] / 24_000 < 5.0 and np.abs(audio).max() <= 1.0
        assert np.abs(audio[:8]).max() < 0.02 and np.abs(audio[-8:]).max() < 0.02  # faded edges
    assert list(hibari.synthesize("")) == [] and list(hibari.synthesize("  ... ")) == []


@needs_hibari
def test_hibari_never_downloads_a_voice(tmp_path, monkeypatch):
    monkeypatch.setenv("HIBARI_HOME", str(tmp_path))  # an empty cache: "emma" is not on disk

    def no_network(*args, **kwargs):
        raise AssertionError("hibari tried to download")

    monkeypatch.setattr("urllib.request.urlopen", no_network)
    with pytest.raises(TTSError, match="does not download"):
        load_synthesizer(TTSConfig(engine="hibari", hibari_voice="emma"), ThreadPlan())
    with pytest.raises(TTSError, match="unknown hibari voice"):
        load_synthesizer(TTSConfig(engine="hibari", hibari_voice="nobody"), ThreadPlan())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@needs_hibari
def test_hibari_whisper_hears_it():
    from faster_whisper import WhisperModel

    from headstart.audio import resample
    from headstart.models.store import resolve_model

    whisper_path = prepared(lambda: resolve_model("whisper-tiny.en"))
    synth = load_synthesizer(TTSConfig(engine="hibari"), ThreadPlan())
    text = "The quick brown fox jumps over the lazy dog near the river bank."
    audio = np.concatenate(list(synth.synthesize(text)))
    model = WhisperModel(str(whisper_path), device="cpu", compute_type="int8", cpu_threads=1)
    segments, _ = model.transcribe(resample(audio, 24_000, 16_000), beam_size=1, language="en")
    import jiwer

    heard = " ".join(s.text for s in segments)
    # character errors with the spaces taken out: "riverbank" and "river bank" are the same words heard
    # (whisper writes one or the other depending on the CPU's kernels); a garbled word still counts
    cer = jiwer.cer(_plain(text).replace(" ", ""), _plain(heard).replace(" ", ""))
    assert cer <= 0.05, heard


def _plain(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum() or ch in " '").strip()


# --- odd input: no crash, and the next call still works ----------------------------------------------


@pytest.mark.parametrize("engine_fixture", ["hibari", "espeak"])
@pytest.mark.parametrize("text", ODD_INPUTS)
def test_odd_input_does_not_crash_the_engine(request, engine_fixture, text):
    synth = request.getfixturevalue(engine_fixture)
    for spoken in (text, normalize_text(text)):
        arrays = list(synth.synthesize(spoken))
        for audio in arrays:
            assert audio.dtype == np.float32 and np.isfinite(audio).all() and np.abs(audio).max() <= 1.0
    assert sum(a.shape[0] for a in synth.synthesize("Still here.")) > 0.2 * synth.sample_rate


# --- resampled output --------------------------------------------------------------------------------


async def _collect(stream):
    return [frame async for frame in stream]


def _run_stream(synth, tts_executor, pieces, **kwargs):
    async def main():
        stream = TTSStream(synth, ClauseChunker(), tts_executor, **kwargs)
        for piece in pieces:
            stream.push_text(piece)
        stream.end_input()
        return await asyncio.wait_for(_collect(stream), 60.0), stream

    return asyncio.run(main())


@needs_espeak
@pytest.mark.parametrize("rate", [16_000, 48_000])
def test_output_is_resampled_with_clean_joins(espeak, tts_executor, rate):
    pieces = ["One, two and three. ", "Four is next. ", "Then five."]
    native, _ = _run_stream(espeak, tts_executor, pieces)
    frames, stream = _run_stream(espeak, tts_executor, pieces, output_rate_hz=rate, frame_s=0.02)
    assert stream.sample_rate == rate and stream.engine_rate_hz == 22_050
    assert all(f.sample_rate == rate for f in frames)
    # Frames hold at most 20 ms; the total duration matches the native stream's (filter tail flushed).
    assert max(f.num_samples for f in frames) <= round(0.02 * rate)
    native_s = sum(f.num_samples for f in native) / 22_050
    out_s = sum(f.num_samples for f in frames) / rate
    assert abs(out_s - native_s) < 0.005 * len(stream.timings) + 0.002
    joined = np.concatenate([f.samples for f in frames])
    assert joined.dtype == np.float32 and np.isfinite(joined).all() and np.abs(joined).max() <= 1.0
    # Every chunk ends quietly: the sample-to-sample step at each chunk join stays small (no click).
    cuts = np.cumsum([round(t.audio_s * rate) for t in stream.timings])[:-1]
    for cut in cuts:
        around = joined[max(0, cut - 8) : cut + 8]
        assert np.abs(np.diff(around)).max() < 0.05, around
    # The timings report audio seconds at the output rate.
    assert abs(sum(t.audio_s for t in stream.timings) - out_s) < 1e-6


def test_output_rate_must_be_positive(tts_executor):
    class Silent:
        sample_rate = 8_000
        name = "silent"

        def synthesize(self, text):
            yield np.zeros(80, np.float32)

        def warm_up(self):
            pass

    for bad in (0, -16_000, 16_000.5):
        with pytest.raises(ValueError, match="output_rate_hz"):
            TTSStream(Silent(), ClauseChunker(), tts_executor, output_rate_hz=bad)


def test_resampling_keeps_a_chunk_continuous_across_engine_arrays(tts_executor):
    """A 440 Hz tone that an engine hands over in ragged pieces (as XTTS streams) comes out as one
    smooth tone at the new rate: the filter state carries across arrays inside a chunk."""
    rate_in, rate_out = 24_000, 16_000
    t = np.arange(rate_in) / rate_in
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)

    class Pieces:
        sample_rate = rate_in
        name = "pieces"

        def synthesize(self, text):
            for a, b in [(0, 1000), (1000, 1001), (1001, 7777), (7777, rate_in)]:
                yield tone[a:b]

        def warm_up(self):
            pass

    frames, stream = _run_stream(Pieces(), tts_executor, ["Tone please."], output_rate_hz=rate_out)
    out = np.concatenate([f.samples for f in frames])
    assert abs(out.shape[0] - rate_out) <= 2
    expected = 0.5 * np.sin(2 * np.pi * 440 * np.arange(out.shape[0]) / rate_out)
    middle = slice(200, out.shape[0] - 200)  # away from the filter's start/end transients
    assert np.abs(out[middle] - expected[middle]).max() < 0.01


# --- the normaliser on everyday sentences ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        (
            "Dr. Patel paid $1,299.99 at 7:45 pm in 2019 for 2.5 kg of saffron.",
            "Doctor Patel paid one thousand two hundred ninety-nine dollars and ninety-nine cents at seven "
            "forty-five PM in twenty nineteen for two point five kilograms of saffron.",
        ),
        (
            "Mrs. Chen booked a table for 6:30 PM on March 3rd, 2024; the bill was €87.50, 0.75 of last year's.",
            "Missus Chen booked a table for six thirty PM on March third, twenty twenty-four; the bill was "
            "eighty-seven euros and fifty cents, zero point seven five of last year's.",
        ),
        (
            "**Note:** Mr. Lee's 2nd flight leaves at 8:05 a.m., costs $49 and covers 1,200 km.",
            "Note: Mister Lee's second flight leaves at eight oh five AM, costs forty-nine dollars and covers "
            "one thousand two hundred kilometers.",
        ),
        (
            "- Prof. Adams: 20% off until 2030, i.e. 3.5 years 🙂",
            "Professor Adams: twenty percent off until twenty thirty, that is three point five years",
        ),
        ("It weighs 1 kg and runs at 60 mph.", "It weighs one kilogram and runs at sixty miles per hour."),
    ],
)
def test_everyday_sentences_are_spoken_in_words(text, spoken):
    assert normalize_text(text) == spoken


# --- Piper round trip through whisper ----------------------------------------------------------------

ROUND_TRIP_TEXTS = [
    "Sure, I can help you with that.",
    "The weather today is sunny with a light breeze from the west.",
    "Please remember to buy milk, bread and fresh apples on your way home.",
    "My favourite book is about a sailor who travels around the world.",
]


@pytest.mark.slow
def test_piper_round_trip_through_whisper_has_low_wer():
    import jiwer
    from faster_whisper import WhisperModel

    from headstart.audio import resample
    from headstart.models.store import resolve_model

    synth = prepared(lambda: load_synthesizer(TTSConfig(engine="piper-joe"), ThreadPlan(tts_threads=1)))
    whisper_path = prepared(lambda: resolve_model("whisper-tiny.en"))
    model = WhisperModel(str(whisper_path), device="cpu", compute_type="int8", cpu_threads=1)
    said, heard = [], []
    for text in ROUND_TRIP_TEXTS:
        audio = np.concatenate(list(synth.synthesize(normalize_text(text))))
        segments, _ = model.transcribe(resample(audio, synth.sample_rate, 16_000), beam_size=1, language="en")
        said.append(_plain(text))
        heard.append(_plain(" ".join(s.text for s in segments)))
    wer = jiwer.wer(said, heard)
    assert wer <= 0.15, list(zip(said, heard))


def test_check_engine_fails_fast_on_what_cannot_load(tmp_path):
    for good in ("piper-joe", "espeak", "espeak-ng", "hibari"):
        check_engine(TTSConfig(engine=good))
    check_engine(TTSConfig(engine="coqui", coqui_model=str(tmp_path)))
    with pytest.raises(ValueError, match="unknown TTS engine 'pipr'"):
        check_engine(TTSConfig(engine="pipr"))
    with pytest.raises(ValueError, match="--coqui-model"):
        check_engine(TTSConfig(engine="coqui"))
    with pytest.raises(FileNotFoundError, match="no such Piper voice"):
        check_engine(TTSConfig(engine=str(tmp_path / "missing.onnx")))


def test_a_mistyped_piper_voice_fails_before_any_model_loads(monkeypatch):
    """`--tts piper-jo` passed the engine check (any "piper*" name did) and failed only in the TTS
    loader, after the ASR and LLM had loaded, with a message listing the ASR and LLM presets too."""
    from dataclasses import replace

    from headstart.session.components import Components
    from headstart.config import PipelineConfig
    from headstart.llm.engine import LLMEngine
    from headstart.voice import asr_engines

    def loaded(*args, **kwargs):
        raise AssertionError("a model was loaded before the TTS choice was checked")

    monkeypatch.setattr(asr_engines, "load_asr", loaded)
    monkeypatch.setattr(LLMEngine, "load", loaded)
    for typo in ("piper-jo", "piper"):
        with pytest.raises(ValueError, match=f"unknown TTS engine '{typo}': use one of piper-joe, espeak, hibari") as caught:
            check_engine(TTSConfig(engine=typo))
        assert "whisper" not in str(caught.value) and "qwen" not in str(caught.value)
        with pytest.raises(ValueError, match=f"unknown TTS engine '{typo}'"):
            Components.load(replace(PipelineConfig(), tts=TTSConfig(engine=typo)))
