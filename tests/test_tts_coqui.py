"""coqui-tts through the worker in the coqui venv (`make coqui-env`; run with `make test-coqui`).

No real coqui checkpoint is available here, so tiny VITS and XTTS models with random weights are built
from configs by coqui's own classes and loaded through coqui's own loaders (the output is noise): the
tests check the path, shapes, rates, streaming, cancelling and errors. Without the coqui venv every
test here but the missing-env one is skipped, with the reason naming `make coqui-env`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import numpy as np
import pytest

from headstart.config import ThreadPlan, TTSConfig
from headstart.tts.base import EngineNotAvailableError, Synthesizer, TTSError
from headstart.tts.chunker import ClauseChunker
from headstart.tts.coqui import CoquiSynthesizer, default_coqui_python
from headstart.tts.engines import load_synthesizer
from headstart.tts.stream import TTSStream


def _coqui_python():
    python = default_coqui_python()
    if not python.is_file():
        pytest.skip(f"the coqui venv is missing ({python}): build it with `make coqui-env`")
    return python


def _build(kind: str, out, **extra) -> dict:
    from headstart.tts import coqui

    builder = coqui.WORKER_PATH.with_name("coqui_tiny.py")
    cmd = [str(_coqui_python()), "-I", str(builder), kind, str(out)]
    for key, value in extra.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tiny_vits(tmp_path_factory):
    return _build("vits", tmp_path_factory.mktemp("vits"), sample_rate=16_000)


@pytest.fixture(scope="module")
def vits(tiny_vits):
    config = TTSConfig(engine="coqui", coqui_model=tiny_vits["model"], coqui_python=str(_coqui_python()))
    synth = load_synthesizer(config, ThreadPlan(tts_threads=1))
    yield synth
    synth.close()


def _check_audio(arrays, rate):
    assert arrays
    for audio in arrays:
        assert audio.dtype == np.float32 and audio.ndim == 1 and audio.shape[0] > 0
        assert np.isfinite(audio).all() and np.abs(audio).max() <= 1.0


# --- no env needed ---------------------------------------------------------------------------------


def test_missing_coqui_env_is_a_clear_error(tmp_path):
    with pytest.raises(EngineNotAvailableError, match="make coqui-env"):
        CoquiSynthesizer(tmp_path / "model.pth", python=tmp_path / "no-venv" / "bin" / "python")
    with pytest.raises(EngineNotAvailableError, match="make coqui-env"):
        load_synthesizer(
            TTSConfig(engine="coqui", coqui_model=str(tmp_path), coqui_python=str(tmp_path / "python")), ThreadPlan()
        )


def test_missing_checkpoint_or_config_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        CoquiSynthesizer(tmp_path / "model.pth", python=sys.executable)
    (tmp_path / "model.pth").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="config.json"):
        CoquiSynthesizer(tmp_path / "model.pth", python=sys.executable)
    with pytest.raises(ValueError, match="coqui_model"):
        load_synthesizer(TTSConfig(engine="coqui"), ThreadPlan())


# --- VITS (random weights) -------------------------------------------------------------------------


def test_vits_loads_through_coqui_and_yields_one_array_per_sentence(vits, tiny_vits):
    assert isinstance(vits, Synthesizer)
    assert vits.sample_rate == 16_000 and vits.kind == "vits" and vits.name == "coqui-vits:model.pth"
    arrays = list(vits.synthesize("Hello there. How are you today? Fine!"))
    assert len(arrays) == 3
    _check_audio(arrays, 16_000)
    assert all(0.1 < a.shape[0] / 16_000 < 10.0 for a in arrays)
    assert list(vits.synthesize("")) == [] and list(vits.synthesize(" ... ")) == []


@pytest.mark.parametrize("text", ["ｘｙｚ", "🙂🙂", "qwrtp zzkx", "#$%^&*", "1234567890123456789"])
def test_vits_odd_input_does_not_crash_the_worker(vits, text):
    try:
        arrays = list(vits.synthesize(text))
    except TTSError as exc:  # allowed: a clear error for this text ...
        assert "coqui failed" in str(exc)
    else:
        for audio in arrays:
            assert audio.dtype == np.float32 and np.isfinite(audio).all()
    assert list(vits.synthesize("Still here."))  # ... and the worker lives on


def test_vits_streams_through_tts_stream_resampled(vits, tts_executor):
    async def main():
        stream = TTSStream(vits, ClauseChunker(), tts_executor, output_rate_hz=24_000, frame_s=0.05)
        for piece in ["Good morning, my friend. ", "The sun is up. ", "Let us go."]:
            stream.push_text(piece)
        stream.end_input()
        frames = [f async for f in stream]
        return frames, stream

    frames, stream = asyncio.run(asyncio.wait_for(main(), 120))
    assert len(stream.timings) >= 2 and all(t.ttfa_s >= 0 for t in stream.timings)
    assert all(f.sample_rate == 24_000 and f.num_samples <= 1200 for f in frames)
    total = sum(f.num_samples for f in frames)
    assert abs(total / 24_000 - sum(t.audio_s for t in stream.timings)) < 1e-6


def test_vits_cancel_mid_utterance_then_next_call_is_clean(vits):
    gen = vits.synthesize("One sentence here. Another sentence there. And a third one. And a fourth.")
    first = next(gen)
    assert first.shape[0] > 0
    gen.close()  # sends cancel, drains to the end marker
    again = list(vits.synthesize("Short one."))
    assert len(again) == 1  # nothing left over from the cancelled utterance


def test_vits_worker_death_is_a_clear_error(tiny_vits):
    synth = CoquiSynthesizer(tiny_vits["model"], python=_coqui_python())
    synth._proc.kill()
    synth._proc.wait()
    with pytest.raises(TTSError, match="coqui worker"):
        list(synth.synthesize("Anyone there?"))
    synth.close()


def test_bad_checkpoint_reports_coquis_reason(tmp_path, tiny_vits):
    (tmp_path / "model.pth").write_bytes(b"not a checkpoint")
    (tmp_path / "config.json").write_text(open(tiny_vits["config"]).read())
    with pytest.raises(TTSError, match="did not load"):
        CoquiSynthesizer(tmp_path / "model.pth", python=_coqui_python())


# --- XTTS-v2 (random weights, streaming inference) ---------------------------------------------------


@pytest.mark.slow
def test_xtts_streams_pieces_at_24khz_and_cancels(tmp_path_factory):
    info = _build("xtts", tmp_path_factory.mktemp("xtts"))
    synth = CoquiSynthesizer(
        info["model"], python=_coqui_python(), speaker_wav=info["speaker_wav"], stream_chunk_size=4
    )
    try:
        assert synth.kind == "xtts" and synth.sample_rate == 24_000
        arrays = list(synth.synthesize("Hi there."))
        assert len(arrays) >= 2  # inference_stream: several pieces, not one array at the end
        _check_audio(arrays, 24_000)
        gen = synth.synthesize("Cancel me please.")
        assert next(gen).shape[0] > 0
        gen.close()
        assert len(list(synth.synthesize("Hi there."))) == len(arrays)
    finally:
        synth.close()
    with pytest.raises(TTSError, match="speaker-wav"):
        CoquiSynthesizer(info["model"], python=_coqui_python())
