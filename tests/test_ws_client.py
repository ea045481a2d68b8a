"""scripts/ws_client.py, the headless client of `headstart serve`, run as a user runs it (a subprocess)
against a real server on loopback with the real small models (whisper-tiny.en, smollm2-135m,
piper-joe) and a real recording: the events it prints, the reply WAV it writes (the reply text, heard
back by the ASR), and its exit status on bad input."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from test_server_e2e import serve

from headstart.audio import resample
from headstart.corpus import recordings as data
from headstart.corpus.wer import word_error_rate

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ws_client.py"


@pytest.mark.slow
def test_the_client_streams_a_wav_prints_the_events_and_writes_the_reply(components, tmp_path):
    rec = data.default_recording()
    # a 44.1 kHz stereo file, as a user's recorder writes it: the client mixes and resamples it
    stereo = np.stack([resample(rec.read(), 16_000, 44_100)] * 2, axis=1)
    wav, out = tmp_path / "question.wav", tmp_path / "reply.wav"
    sf.write(wav, stereo, 44_100, subtype="PCM_16")

    async def main():
        server = await serve(components)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, str(SCRIPT), str(wav), "--url", f"ws://127.0.0.1:{server.port}/ws",
                "--out", str(out), "--timeout-s", "60",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
            return proc.returncode, stdout.decode(), stderr.decode(), server.active_sessions
        finally:
            await server.close()

    code, stdout, stderr, active = asyncio.run(main())
    assert code == 0, stdout + stderr
    assert "Traceback" not in stderr and active == 0  # it ended its session
    # one line per event: "  2.45s  turn.end  {...fields}"
    parts = [line.split(None, 2) for line in stdout.splitlines()]
    events = {p[1]: json.loads(p[2]) for p in parts if len(p) == 3 and p[2].startswith("{")}
    assert events["session.started"]["output"]["sample_rate"] == components.tts.sample_rate
    assert word_error_rate(rec.text, events["transcript.final"]["text"]) <= 0.25
    metrics, done = events["metrics.turn"], events["reply.done"]
    assert metrics["reply"] and metrics["vad_end_to_first_audio_ms"] is not None
    # the WAV holds the reply's audio, all of it, at the voice's rate, and says the reply's words
    info = sf.info(out)
    assert info.samplerate == components.tts.sample_rate and info.subtype == "PCM_16"
    assert info.duration == pytest.approx(done["audio_ms"] / 1000, abs=0.05)
    reply, rate = sf.read(out, dtype="float32")
    heard = components.asr.transcribe(resample(reply, rate, 16_000)).text
    assert word_error_rate(metrics["reply"], heard) <= 0.35, (metrics["reply"], heard)
    assert f"wrote {info.duration:.2f} s of reply audio to {out}" in stdout


def test_bad_input_is_a_clear_error_not_a_traceback(tmp_path):
    def client(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SCRIPT), *args, "--out", str(tmp_path / "r.wav")],
                              capture_output=True, text=True, timeout=60)

    missing = client(str(tmp_path / "missing.wav"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    (tmp_path / "empty.wav").write_bytes(b"")
    empty = client(str(tmp_path / "empty.wav"))
    assert empty.returncode == 2 and "cannot read" in empty.stderr
    no_server = client(str(data.default_recording().path), "--url", "ws://127.0.0.1:9/ws")
    assert no_server.returncode == 2 and "cannot connect to ws://127.0.0.1:9/ws" in no_server.stderr
    for result in (missing, empty, no_server):
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "r.wav").exists()
