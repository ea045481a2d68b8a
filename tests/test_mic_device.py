"""`headstart mic` on real audio devices: a PulseAudio server of its own (null sinks, no hardware), a
real recording played into the virtual microphone, the app against a real loopback `headstart serve`
with the small models (and `--local`: the models in the app's own process), and the speakers' monitor
recorded and transcribed.

PortAudio reaches PulseAudio through ALSA's pulse plugin (Debian: pulseaudio, pulseaudio-utils,
libasound2-plugins, libportaudio2; .ci/run installs them). The app opens ALSA's `default` device,
whose native rate (44.1 kHz) is not 16 kHz, so both resampling paths run."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from headstart.corpus import recordings as data
from headstart.corpus.wer import word_error_rate

pytestmark = pytest.mark.slow

PA_CONFIG = """\
load-module module-native-protocol-unix auth-anonymous=1 socket={socket}
load-module module-null-sink sink_name=speakers rate=48000 channels=2
load-module module-null-sink sink_name=micfeed rate=48000 channels=1
set-default-sink speakers
set-default-source micfeed.monitor
"""


def _missing() -> str | None:
    for tool in ("pulseaudio", "pactl", "paplay", "parec"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install pulseaudio pulseaudio-utils)"
    if not Path("/usr/lib/x86_64-linux-gnu/alsa-lib/libasound_module_pcm_pulse.so").exists() and not list(
            Path("/usr/lib").glob("*/alsa-lib/libasound_module_pcm_pulse.so")):
        return "ALSA's pulse plugin is missing (apt-get install libasound2-plugins)"
    try:
        import sounddevice  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"sounddevice/PortAudio unavailable: {exc}"
    return None


class Lines:
    """A process's stdout lines, read by a thread, waited for with a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_for(self, prefix: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        for line in self.lines:
            if line.startswith(prefix):
                return line
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._q.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting with {prefix!r} within {timeout_s} s; got {self.lines}")


def _stop(proc: subprocess.Popen | None, sig=signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def sound_server(tmp_path):
    reason = _missing()
    if reason:
        pytest.skip(reason)
    socket = tmp_path / "native"
    conf = tmp_path / "pa.conf"
    conf.write_text(PA_CONFIG.format(socket=socket))
    # Its own HOME/runtime dir for PulseAudio only (the clients keep theirs: the model cache lives there).
    env = {**os.environ, "PULSE_SERVER": f"unix:{socket}"}
    env.pop("DISPLAY", None)
    pulse_env = {**env, "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path)}
    # -n: no default.pa; as root PulseAudio only warns without --system; no shm, no pid file, no idle exit.
    proc = subprocess.Popen(
        ["pulseaudio", "--daemonize=no", "--exit-idle-time=-1", "-n", "-F", str(conf), "--use-pid-file=no",
         "--disable-shm=yes", "--log-target=file:" + str(tmp_path / "pulse.log")],
        env=pulse_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while subprocess.run(["pactl", "info"], env=env, capture_output=True, timeout=5).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("PulseAudio did not start: " + (tmp_path / "pulse.log").read_text()[-2000:])
            time.sleep(0.1)
        yield env
    finally:
        _stop(proc)


def test_the_app_on_real_devices_hears_the_recording_and_plays_the_reply(sound_server, tmp_path):
    env = sound_server
    rec = data.default_recording()
    py = [sys.executable, "-m", "headstart"]
    server = mic = parec = None
    try:
        server = subprocess.Popen(
            [*py, "serve", "--port", "0", "--llm", "smollm2-135m", "--max-new-tokens", "24"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        served = Lines(server).wait_for("headstart serving on", 240)
        url = served.split("websocket: ")[1].rstrip(")")
        monitor = tmp_path / "speakers.raw"
        with open(monitor, "wb") as out:
            parec = subprocess.Popen(["parec", "-d", "speakers.monitor", "--format=s16le", "--rate=16000",
                                      "--channels=1", "--raw"], env=env, stdout=out)
        mic = subprocess.Popen([*py, "mic", "--server", url, "--echo", "gate"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = Lines(mic)
        ready = lines.wait_for("listening:", 60)
        assert "44100 Hz" in ready or "48000 Hz" in ready, ready  # the devices' native rates, not 16 kHz
        subprocess.run(["paplay", "-d", "micfeed", str(rec.path)], env=env, check=True, timeout=30)
        heard = lines.wait_for("you:", 60).removeprefix("you:").strip()
        reply = lines.wait_for("assistant:", 120).removeprefix("assistant:").strip()
        lines.wait_for("latency:", 30)
        assert word_error_rate(rec.text, heard) <= 0.25, heard
        time.sleep(3.0)  # the last ~1 s of reply audio is still in the app's playback buffer
        mic.send_signal(signal.SIGINT)  # Ctrl-C
        assert mic.wait(15) == 0, lines.lines
        _stop(parec)
        played = np.frombuffer(monitor.read_bytes(), dtype="<i2").astype(np.float32) / 32768.0
        assert played.size > 16000 and np.sqrt(np.mean(played ** 2)) > 1e-3, "no reply audio reached the sink"
        from faster_whisper import WhisperModel

        from headstart.models.store import resolve_model

        model = WhisperModel(str(resolve_model("whisper-tiny.en")), device="cpu", compute_type="int8", cpu_threads=1)
        segments, _ = model.transcribe(played, language="en", beam_size=1)
        spoken = " ".join(s.text for s in segments).strip()
        assert reply and word_error_rate(reply, spoken) <= 0.5, (reply, spoken)
    finally:
        for proc in (mic, parec, server):
            _stop(proc)


def test_local_mode_on_real_devices_hears_the_recording_plays_a_reply_and_exits_on_ctrl_c(sound_server, tmp_path):
    """`headstart mic --local`: the models and the VoiceServer in the app's own process."""
    env = sound_server
    rec = data.default_recording()
    mic = parec = None
    try:
        monitor = tmp_path / "speakers.raw"
        with open(monitor, "wb") as out:
            parec = subprocess.Popen(["parec", "-d", "speakers.monitor", "--format=s16le", "--rate=16000",
                                      "--channels=1", "--raw"], env=env, stdout=out)
        mic = subprocess.Popen(
            [sys.executable, "-m", "headstart", "mic", "--local", "--llm", "smollm2-135m", "--tts", "espeak",
             "--max-new-tokens", "24", "--echo", "gate"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = Lines(mic)
        ready = lines.wait_for("listening:", 240)
        assert "44100 Hz" in ready or "48000 Hz" in ready, ready
        subprocess.run(["paplay", "-d", "micfeed", str(rec.path)], env=env, check=True, timeout=30)
        heard = lines.wait_for("you:", 60).removeprefix("you:").strip()
        reply = lines.wait_for("assistant:", 120).removeprefix("assistant:").strip()
        lines.wait_for("latency:", 30)
        assert word_error_rate(rec.text, heard) <= 0.25, heard
        assert reply, lines.lines
        time.sleep(3.0)  # the last ~1 s of reply audio is still in the app's playback buffer
        mic.send_signal(signal.SIGINT)  # Ctrl-C: the app, its server and its models all shut down
        assert mic.wait(20) == 0, lines.lines
        _stop(parec)
        played = np.frombuffer(monitor.read_bytes(), dtype="<i2").astype(np.float32) / 32768.0
        assert played.size > 16000 and np.sqrt(np.mean(played ** 2)) > 1e-3, "no reply audio reached the sink"
    finally:
        for proc in (mic, parec):
            _stop(proc)


def test_local_mode_ctrl_c_while_the_models_load_exits_0_promptly(sound_server):
    """Loading cannot be cancelled; the app must not wait for it, nor print a traceback. (The devices
    are checked before any model loads: without the sound server it would stop at once.)"""
    mic = subprocess.Popen(
        [sys.executable, "-m", "headstart", "mic", "--local", "--llm", "smollm2-135m", "--tts", "espeak"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=sound_server)
    try:
        lines = Lines(mic)
        lines.wait_for("loading LLM", 120)
        mic.send_signal(signal.SIGINT)
        assert mic.wait(15) == 0, lines.lines
        with pytest.raises(AssertionError):
            lines.wait_for("Traceback", 2)
        assert any("interrupted while loading" in line for line in lines.lines), lines.lines
    finally:
        _stop(mic)
