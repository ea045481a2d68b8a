"""Smart Turn v3.2 (headstart/voice/smart_turn.py) on real recordings: complete sentences against the same
sentence cut at its middle word gap (whisper word times, as `headstart bench asr`'s pause set cuts it),
each followed by 0.2 s of the recording's own room noise; and the input checks."""

from __future__ import annotations

import numpy as np
import pytest

from headstart.audio import AudioError
from headstart.bench.asr import room_noise
from headstart.corpus.recordings import recording
from headstart.config import ASRConfig
from headstart.models.store import ModelError
from headstart.voice.smart_turn import NUM_FRAMES, NUM_MEL_BINS, WINDOW_SAMPLES, SmartTurn
from tests.prepared import cpu_has_vnni

pytestmark = pytest.mark.models  # loads a real prepared model (make test-unit leaves it out)

SR = 16000
# recordings of four words or more whose middle cut the model hears as unfinished (the listening
# issue measured 32/48 cuts and 37/45 complete sentences right at 0.2 s; these are clear cases)
NAMES = ["librivox-0870", "librivox-0890", "all-circuits-busy-now", "conf-locked", "vm-changeto",
         "pbx-invalid", "dir-welcome", "queue-quantity1"]


@pytest.fixture(scope="module")
def model() -> SmartTurn:
    try:
        return SmartTurn.load(threads=1)
    except ModelError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, complete turn + 0.2 s, cut turn + 0.2 s) per recording."""
    from headstart.voice.asr import WhisperASR

    try:
        asr = WhisperASR.load(ASRConfig(model="whisper-tiny.en"), cpu_threads=1)
    except ModelError as exc:
        pytest.skip(str(exc))
    rng = np.random.default_rng(0)
    out = []
    for name in NAMES:
        rec = recording(name)
        audio = rec.read()
        pause = room_noise(audio, rec.speech_start_s, 0.2, rng)
        end = int(round(rec.speech_end_s * SR))
        words = asr.transcribe(audio).words
        k = len(words) // 2
        cut = int(round((words[k - 1].end_s + words[k].start_s) / 2 * SR))
        out.append((name, np.concatenate([audio[:end], pause]), np.concatenate([audio[:cut], pause])))
    return out


@pytest.mark.xfail(not cpu_has_vnni(), strict=False, reason="int8 kernels without VNNI saturate (tests/prepared.py "
                   "cpu_has_vnni): two cuts score 0.51 and 0.59 on an AVX2-only EPYC")
def test_complete_sentences_score_above_the_same_cut_mid_sentence(model, pairs):
    complete = {name: model.completion_probability(a) for name, a, _ in pairs}
    cut = {name: model.completion_probability(c) for name, _, c in pairs}
    assert all(p > 0.5 for p in complete.values()), complete
    assert all(p < 0.5 for p in cut.values()), cut


def test_only_the_last_8_s_count_and_short_audio_is_left_padded(model, pairs):
    _, complete, _ = pairs[0]  # librivox-0870, ~7 s
    long = np.concatenate([np.random.default_rng(1).standard_normal(3 * SR).astype(np.float32) * 0.3, complete])
    assert long.shape[0] > WINDOW_SAMPLES
    assert np.array_equal(model.features(long), model.features(long[-WINDOW_SAMPLES:]))
    features = model.features(complete[-SR:])
    assert features.shape == (1, NUM_MEL_BINS, NUM_FRAMES) and features.dtype == np.float32
    # the left (7 s) is zero padding: the same in every frame; the right second holds the sound
    assert np.ptp(features[0, :, :690], axis=1).max() < 1e-5 < np.ptp(features[0, :, -100:], axis=1).min()
    # float64 input gives the same probability as float32
    assert model.completion_probability(complete.astype(np.float64)) == pytest.approx(
        model.completion_probability(complete), abs=1e-5)


def test_digital_silence_gives_a_probability(model):
    p = model.completion_probability(np.zeros(SR, np.float32))
    assert 0.0 <= p <= 1.0


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.zeros((SR, 2), np.float32), "shape"),
        (np.zeros(SR, np.int16), "float"),
        (np.zeros(0, np.float32), "at least one sample"),
        (np.array([0.0, np.nan] * 100, np.float32), "NaN"),
        (np.array([0.0, np.inf] * 100, np.float32), "NaN or infinite"),
        ([0.0] * 100, "float"),
    ],
)
def test_bad_input_is_a_clear_error(model, bad, match):
    with pytest.raises(AudioError, match=match):
        model.completion_probability(bad)


def test_missing_file_and_bad_threads(tmp_path):
    with pytest.raises(FileNotFoundError, match="models prepare smart-turn-v3.2"):
        SmartTurn(tmp_path / "none.onnx")
    try:
        from headstart.models.store import resolve_model

        path = resolve_model("smart-turn-v3.2")
    except ModelError as exc:
        pytest.skip(str(exc))
    with pytest.raises(ValueError, match="threads"):
        SmartTurn(path, threads=0)


def test_unprepared_preset_names_the_prepare_command(tmp_path, monkeypatch):
    from headstart.models.store import ModelNotPreparedError

    monkeypatch.setenv("HEADSTART_CACHE", str(tmp_path))
    with pytest.raises(ModelNotPreparedError, match="headstart models prepare smart-turn-v3.2"):
        SmartTurn.load()
