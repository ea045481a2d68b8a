"""The packaged bench recordings: files, format, licences and the stored speech bounds (checked on the audio)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import soundfile as sf

from headstart.corpus import recordings as data
from headstart.corpus.recordings import Recording, default_recording, recording, recordings, speech_dir

WINDOW_S = 0.020


def _levels_db(samples: np.ndarray, sample_rate: int, pre_emphasis: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """20 ms RMS levels (dBFS, each window's mean removed so DC offset does not count) and window start
    times. With `pre_emphasis` a (y[n] = x[n] - a x[n-1], the usual speech pre-emphasis at a = 0.97),
    low rumble and thumps (goforward has a loud one after its last word) do not count as speech."""
    w = int(WINDOW_S * sample_rate)
    n = len(samples) // w
    y = np.asarray(samples, dtype=np.float64)
    if pre_emphasis:
        y = np.concatenate([y[:1], y[1:] - pre_emphasis * y[:-1]])
    x = y[: n * w].reshape(n, w)
    x = x - x.mean(axis=1, keepdims=True)
    return 20 * np.log10(np.sqrt((x * x).mean(axis=1)) + 1e-10), np.arange(n) * WINDOW_S


ALL = recordings()


def test_the_set_is_complete_and_names_are_unique():
    assert len(ALL) == 52
    assert len({r.name for r in ALL}) == len(ALL)
    on_disk = {p.relative_to(speech_dir()).as_posix() for p in speech_dir().rglob("*.wav")}
    assert on_disk == {r.relative_path for r in ALL}, "every WAV is listed and every listed WAV exists"
    folders = {r.path.parent.name for r in ALL}
    assert folders == {"pocketsphinx_librivox", "pocketsphinx_cards", "pocketsphinx_misc", "asterisk_allison_16k"}


@pytest.mark.parametrize("rec", ALL, ids=lambda r: r.name)
def test_file_is_16k_mono_and_bounds_are_consistent(rec: Recording):
    assert rec.path.is_file()
    info = sf.info(rec.path)
    assert (info.samplerate, info.channels) == (16_000, 1)
    assert rec.sample_rate == 16_000
    assert rec.duration_s == pytest.approx(info.frames / info.samplerate, abs=0.001)
    assert 0.0 < rec.speech_start_s < rec.speech_end_s <= rec.duration_s
    assert rec.speech_end_s - rec.speech_start_s >= 0.3
    assert rec.text.strip() and rec.source.strip() and rec.license.strip()


@pytest.mark.parametrize("rec", ALL, ids=lambda r: r.name)
def test_audio_outside_the_stored_speech_bounds_is_quiet(rec: Recording):
    """Read the audio itself: past speech_end_s (+50 ms) and before speech_start_s (-50 ms) every 20 ms
    window is >= 15 dB below the speech level (95th percentile inside the bounds), and the last 100 ms
    before speech_end_s still holds speech (not a stored end placed far into the silence)."""
    samples, rate = sf.read(rec.path, dtype="float32")
    level, t = _levels_db(samples, rate)
    inside = level[(t >= rec.speech_start_s) & (t + WINDOW_S <= rec.speech_end_s)]
    speech_db = float(np.percentile(inside, 95))
    emphasised, _ = _levels_db(samples, rate, pre_emphasis=0.97)
    speech_emph_db = float(np.percentile(emphasised[(t >= rec.speech_start_s) & (t + WINDOW_S <= rec.speech_end_s)], 95))
    tail = emphasised[t >= rec.speech_end_s + 0.05]
    head = level[t + WINDOW_S <= rec.speech_start_s - 0.05]
    last = level[(t >= rec.speech_end_s - 0.1) & (t + WINDOW_S <= rec.speech_end_s)]
    if len(tail):
        assert tail.max() <= speech_emph_db - 15.0, f"loud audio after speech_end_s={rec.speech_end_s}"
        last_emph = emphasised[(t >= rec.speech_end_s - 0.1) & (t + WINDOW_S <= rec.speech_end_s)]
        assert last_emph.max() >= tail.max() + 3.0, "the 100 ms before speech_end_s is no louder than the tail"
    else:
        assert rec.duration_s - rec.speech_end_s < 0.07
    if len(head):
        assert head.max() <= speech_db - 15.0, f"loud audio before speech_start_s={rec.speech_start_s}"
    assert last.max() >= speech_db - 35.0, "no speech in the 100 ms before speech_end_s"


def test_stored_end_is_checked_for_real():
    """The quiet-tail check above would catch a stored end placed inside the speech."""
    rec = recording("librivox-0880")
    samples, rate = sf.read(rec.path, dtype="float32")
    level, t = _levels_db(samples, rate)
    speech_db = float(np.percentile(level[(t >= rec.speech_start_s) & (t < rec.speech_end_s)], 95))
    early_end = rec.speech_end_s - 0.5
    assert level[t >= early_end + 0.05].max() > speech_db - 15.0


def test_lookup_by_stem_file_name_and_relative_path():
    rec = recording("librivox-0880")
    assert rec.text == "he was not an ill disposed young man"
    assert recording("librivox-0880.wav") is rec
    assert recording("pocketsphinx_librivox/librivox-0880.wav") is rec
    assert rec.relative_path == "pocketsphinx_librivox/librivox-0880.wav"


def test_unknown_name_raises_key_error_listing_the_names():
    with pytest.raises(KeyError) as excinfo:
        recording("no-such-recording")
    message = str(excinfo.value)
    assert "no-such-recording" in message and "librivox-0880" in message and "goforward" in message


def test_recording_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        recording("goforward").text = "changed"  # type: ignore[misc]


def test_default_recording_is_a_short_request():
    rec = default_recording()
    assert rec.name == data.DEFAULT_RECORDING_NAME == "goforward"
    assert rec.text == "go forward ten meters"
    assert rec.duration_s < 4.0


def test_licences_and_attribution():
    for rec in ALL:
        folder = rec.path.parent.name
        if folder == "asterisk_allison_16k":
            assert rec.license.startswith("CC-BY-SA-3.0")
            assert rec.attribution == "Recorded by Allison Smith (Asterisk core sounds)"
        else:
            assert rec.license.startswith("BSD-2-Clause")
            assert rec.attribution == ""
        if folder == "pocketsphinx_librivox":
            assert "public-domain" in rec.license
    readme = (speech_dir().parent / "README.md").read_text(encoding="utf-8")
    assert "Recorded by Allison Smith (Asterisk core sounds)" in readme
    assert "CC-BY-SA-3.0" in readme and "BSD-2-Clause" in readme and "speech_end_s" in readme


def test_read_gives_float32_mono_in_range():
    samples = recording("cards_001").read()
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert len(samples) == pytest.approx(recording("cards_001").duration_s * 16_000, abs=16)  # duration_s is stored to 1 ms
    assert 0.05 < np.abs(samples).max() <= 1.0


def test_the_demo_question_is_labelled_synthetic_and_kept_out_of_the_real_set():
    rec = data.demo_recording()
    assert rec.text == "What is the capital of France?" and "synthetic" in rec.source
    assert rec.name not in {r.name for r in recordings()}  # the benches' set is real speech only
    samples = rec.read()
    assert abs(samples.size / 16000 - rec.duration_s) < 0.01
    # the speech lies between the stated start and end: the demo measures voice-to-voice from the end
    frame = 160
    rms = np.sqrt(np.mean(samples[: samples.size // frame * frame].reshape(-1, frame) ** 2, axis=1))
    loud = np.flatnonzero(rms > rms.max() * 10 ** (-40 / 20))
    assert abs(loud[0] * frame / 16000 - rec.speech_start_s) <= 0.03
    assert abs((loud[-1] + 1) * frame / 16000 - rec.speech_end_s) <= 0.03


def test_the_demo_answers_the_synthetic_question_when_given_no_recording():
    from headstart.cli.demo import load_turns

    (turn,) = load_turns([])
    assert turn.name == "capital-of-france" and turn.reference == "What is the capital of France?"
    (named,) = load_turns(["capital-of-france"])
    assert named.reference == turn.reference and named.speech_end_s == 2.10
