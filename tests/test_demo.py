"""The main job end to end, as a user runs it: `headstart demo` on real recordings with the small models."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from headstart.audio import read_wav, write_wav
from headstart.corpus import recordings as data
from headstart.corpus.wer import normalize_text, word_error_rate

TEST_LLM = "smollm2-135m"


def run_demo(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "headstart", "demo", *args],
        capture_output=True, text=True, timeout=timeout, env=env or os.environ.copy(),
    )


def last_json(stdout: str) -> dict:
    lines = [line for line in stdout.strip().splitlines() if line.strip()]
    assert lines, "the demo printed nothing"
    return json.loads(lines[-1])


@pytest.mark.slow
def test_demo_answers_a_real_recording_by_voice(tmp_path):
    rec = data.default_recording()
    out = tmp_path / "reply.wav"
    result = run_demo(rec.name, "--fast", "--llm", TEST_LLM, "--max-new-tokens", "40", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = last_json(result.stdout)

    assert word_error_rate(rec.text, summary["transcript"]) <= 0.20, summary["transcript"]
    assert summary["reply"].strip()
    assert summary["models"]["llm"] == TEST_LLM
    # the default precision on every CPU with AVX2: float32 + int8, which passes the exactness self-test,
    # so the configured speculative decoder is on
    assert summary["llm"] == {"model": TEST_LLM, "precision": "float32+int8", "exact": True,
                              "speculative": "prompt_lookup"}, summary["llm"]
    for key in ("speech_end_to_final_s", "speech_end_to_first_token_s", "voice_to_voice_s",
                "ttft_s", "tts_ttfa_s"):
        assert isinstance(summary[key], float), key
    # a preemptive hit whose held reply already had tokens at the end of turn has a TTFT of 0
    held = summary.get("preemptive") == "hit" and summary.get("held_tokens")
    assert (summary["ttft_s"] >= 0 if held else summary["ttft_s"] > 0), summary
    assert summary["voice_to_voice_s"] > 0
    assert "user:" in result.stdout and "assistant:" in result.stdout

    import soundfile as sf

    info = sf.info(str(out))
    # the default voice (hibari) at its own rate: 24 kHz
    assert info.samplerate == 24_000 and info.frames / info.samplerate >= 0.5

    # The TTS really spoke the reply: whisper hears at least half of its words.
    from headstart.config import ASRConfig
    from headstart.models.store import resolve_model
    from headstart.voice.asr import WhisperASR

    asr = WhisperASR(resolve_model("whisper-tiny.en"), ASRConfig(), cpu_threads=1)
    heard = set(normalize_text(asr.transcribe(read_wav(out)).text).split())
    said = normalize_text(summary["reply"]).split()
    assert said
    recovered = sum(word in heard for word in said) / len(said)
    assert recovered >= 0.5, (summary["reply"], heard)


@pytest.mark.slow
def test_demo_two_files_are_two_turns_of_one_conversation(tmp_path):
    first, second = data.recordings()[0], data.default_recording()
    out = tmp_path / "reply.wav"
    result = run_demo(first.name, second.name, "--fast", "--llm", TEST_LLM,
                      "--max-new-tokens", "16", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = last_json(result.stdout)
    assert [turn["file"] for turn in summary["turns"]] == [first.name, second.name]
    assert summary["transcript"] == summary["turns"][0]["transcript"]
    for turn in summary["turns"]:
        assert turn["reply"].strip()
        assert turn["voice_to_voice_s"] is not None


@pytest.mark.slow
def test_demo_on_silence_gives_no_transcript_and_no_reply(tmp_path):
    wav = tmp_path / "silence.wav"
    write_wav(wav, np.zeros(16000 * 3, dtype=np.float32), 16000)
    out = tmp_path / "reply.wav"
    result = run_demo(str(wav), "--fast", "--llm", TEST_LLM, "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = last_json(result.stdout)
    assert summary["transcript"] == "" and summary["reply"] == ""
    assert summary["voice_to_voice_s"] is None
    assert not out.exists()


def test_demo_rejects_a_file_that_is_not_audio(tmp_path):
    bad = tmp_path / "notes.wav"
    bad.write_text("this is not audio at all")
    result = run_demo(str(bad), "--llm", TEST_LLM)
    assert result.returncode == 2
    assert "notes.wav" in result.stderr and "not a readable audio file" in result.stderr
    assert "Traceback" not in result.stderr


def test_demo_rejects_empty_audio(tmp_path):
    empty = tmp_path / "empty.wav"
    write_wav(empty, np.zeros(0, dtype=np.float32), 16000)
    result = run_demo(str(empty), "--llm", TEST_LLM)
    assert result.returncode == 2
    assert "no audio" in result.stderr and "Traceback" not in result.stderr


def test_demo_missing_file_is_a_clear_error(tmp_path):
    result = run_demo(str(tmp_path / "nope.wav"))
    assert result.returncode == 2
    assert "nope.wav" in result.stderr and "Traceback" not in result.stderr


def test_an_unknown_recording_name_lists_the_names():
    result = run_demo("librivox-9999", timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "librivox-9999" in result.stderr and data.default_recording().name in result.stderr


def test_a_bad_tts_choice_fails_before_any_model_loads(tmp_path):
    """With an empty model cache, the TTS error comes first (not the unprepared LLM's), at once."""
    env = {**os.environ, "HEADSTART_CACHE": str(tmp_path / "empty-cache")}
    typo = run_demo("--tts", "pipr-joe", env=env, timeout=120)
    assert typo.returncode == 1 and "unknown TTS engine 'pipr-joe'" in typo.stderr, typo.stderr
    coqui = run_demo("--tts", "coqui", env=env, timeout=120)
    assert coqui.returncode == 1 and "--coqui-model" in coqui.stderr, coqui.stderr
    assert "Traceback" not in typo.stderr + coqui.stderr


def test_demo_missing_model_names_the_prepare_command(tmp_path):
    env = {**os.environ, "HEADSTART_CACHE": str(tmp_path / "empty-cache")}
    result = run_demo("--llm", TEST_LLM, env=env, timeout=120)
    assert result.returncode == 1
    assert "headstart models prepare" in result.stderr
    assert "Traceback" not in result.stderr


def test_stereo_44k_input_is_accepted(tmp_path):
    rec = data.default_recording()
    mono = read_wav(rec.path, sample_rate=44100)
    stereo = np.stack([mono, mono], axis=1)
    path = tmp_path / "stereo.wav"
    write_wav(path, stereo, 44100)
    from headstart.cli.demo import load_turns

    (turn,) = load_turns([str(path)])
    assert turn.samples.ndim == 1
    assert abs(turn.samples.shape[0] / 16000 - rec.duration_s) < 0.01
    assert turn.speech_end_s is None  # not a bench file: the VAD's end of speech is used
