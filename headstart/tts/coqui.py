"""coqui-tts (VITS, XTTS-v2) for user checkpoints, run in its own environment through a worker process.

coqui-tts imports torchaudio, and PyPI has no CPU torchaudio that loads beside the main venv's CPU
torch, so coqui lives in a second venv (`make coqui-env` -> `.venv-coqui`, its
requirements in `coqui-requirements.txt` next to this file). `CoquiSynthesizer` starts
`coqui_worker.py` there by file path (`<venv>/bin/python -I .../coqui_worker.py`: headstart is not
installed in that venv and the worker imports only the stdlib, numpy and TTS) and streams audio back
over a length-prefixed pipe protocol (see coqui_worker.py), so XTTS's `inference_stream` pieces reach
the caller as they are made.
"""

from __future__ import annotations

import collections
import json
import os
import select
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from headstart.tts.base import EngineNotAvailableError, TTSError, has_speech_content

COQUI_PYTHON_ENV = "HEADSTART_COQUI_PYTHON"
WORKER_PATH = Path(__file__).with_name("coqui_worker.py")
_HEADER = struct.Struct("<cI")
_MAX_PAYLOAD = 1 << 30


def default_coqui_python() -> Path:
    """The coqui venv's interpreter: `$HEADSTART_COQUI_PYTHON` if set, else `.venv-coqui/bin/python`
    at the root of the headstart checkout (where `make coqui-env` builds it)."""
    env = os.environ.get(COQUI_PYTHON_ENV)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / ".venv-coqui" / "bin" / "python"


class CoquiSynthesizer:
    """A coqui-tts model (VITS or XTTS-v2 checkpoint given as paths) behind the Synthesizer interface.

    Args:
        model_path: the checkpoint (`model.pth`, or for XTTS the checkpoint file or its folder).
        config_path: the model's `config.json`; default: `config.json` next to the checkpoint.
        python: interpreter of the coqui venv; default `default_coqui_python()`.
        threads: torch threads in the worker (ThreadPlan.tts_threads).
        speaker: speaker name for a multi-speaker VITS model.
        language_name: language for a multi-lingual VITS model.
        speaker_wav: XTTS only: a recording of the voice to clone (required for XTTS).
        language: XTTS only: language code ("en").
        vocab_path: XTTS only: tokenizer `vocab.json`; default: next to the checkpoint.
        stream_chunk_size: XTTS only: GPT tokens per streamed audio piece (smaller: earlier audio).
        load_timeout_s: the most loading may take before it is an error.
        timeout_s: the most the worker may stay silent during synthesis before it is an error.

    Not thread-safe: one synthesis at a time (the "tts" executor guarantees it). Call `close()` (or use
    it as a context manager) to end the worker; it also ends with this process.

    Raises:
        EngineNotAvailableError: the coqui venv is missing (the message names `make coqui-env`).
        FileNotFoundError: the checkpoint or config does not exist.
        TTSError: the worker could not load the model (the message holds coqui's reason).
        ValueError: threads < 1.
    """

    def __init__(
        self,
        model_path: str | Path,
        config_path: str | Path | None = None,
        *,
        python: str | Path | None = None,
        threads: int = 1,
        speaker: str | None = None,
        language_name: str | None = None,
        speaker_wav: str | Path | None = None,
        language: str = "en",
        vocab_path: str | Path | None = None,
        stream_chunk_size: int = 20,
        load_timeout_s: float = 300.0,
        timeout_s: float = 120.0,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        interpreter = Path(python).expanduser() if python is not None else default_coqui_python()
        if not interpreter.is_file():
            raise EngineNotAvailableError(
                f"the coqui-tts environment is missing (no interpreter at {interpreter}): build it with "
                f"`make coqui-env`, or point ${COQUI_PYTHON_ENV} at a Python that has coqui-tts installed"
            )
        model_path = Path(model_path).expanduser().resolve()
        if not model_path.exists():
            raise FileNotFoundError(f"coqui checkpoint not found: {model_path}")
        base_dir = model_path if model_path.is_dir() else model_path.parent
        config_path = Path(config_path).expanduser().resolve() if config_path else base_dir / "config.json"
        if not config_path.is_file():
            raise FileNotFoundError(f"coqui model config not found: {config_path} (pass config_path)")
        cmd = [str(interpreter), "-I", str(WORKER_PATH), "--model", str(model_path), "--config", str(config_path)]
        cmd += ["--threads", str(threads), "--language", language, "--stream-chunk-size", str(stream_chunk_size)]
        if speaker:
            cmd += ["--speaker", speaker]
        if language_name:
            cmd += ["--language-name", language_name]
        if speaker_wav is not None:
            wav = Path(speaker_wav).expanduser().resolve()
            if not wav.is_file():
                raise FileNotFoundError(f"XTTS speaker recording not found: {wav}")
            cmd += ["--speaker-wav", str(wav)]
        if vocab_path is not None:
            cmd += ["--vocab", str(Path(vocab_path).expanduser().resolve())]

        self._timeout_s = timeout_s
        self._buf = bytearray()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), COQUI_TOS_AGREED="1")
        env.setdefault("HF_HUB_OFFLINE", "1")  # never download
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, bufsize=0
        )
        self._stderr_thread = threading.Thread(target=self._pump_stderr, name="coqui-stderr", daemon=True)
        self._stderr_thread.start()
        try:
            kind, payload = self._recv(load_timeout_s)
        except TTSError:
            self.close()
            raise
        if kind != b"H":
            self.close()
            raise TTSError(f"coqui worker failed to start: {payload.decode('utf-8', 'replace')}{self._tail()}")
        hello = json.loads(payload)
        self.sample_rate: int = int(hello["sample_rate"])
        self.kind: str = str(hello["kind"])
        self.name = f"coqui-{self.kind}:{model_path.name}"
        self.threads = threads

    # --- Synthesizer ---

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        """Yield float32 mono audio at `sample_rate` as the worker produces it: one array per sentence
        for VITS, one per `stream_chunk_size` GPT tokens for XTTS. Empty text yields nothing. Closing
        the generator early cancels the utterance in the worker.

        Raises:
            TTSError: coqui failed on this text (the worker stays up), or the worker died.
        """
        if not has_speech_content(text):
            return
        self._send(b"S", text.encode("utf-8"))
        finished = False
        try:
            while True:
                kind, payload = self._recv(self._timeout_s)
                if kind == b"A":
                    yield np.frombuffer(payload, dtype="<f4").astype(np.float32)
                elif kind == b"E":
                    finished = True
                    return
                elif kind == b"X":
                    finished = True
                    raise TTSError(f"coqui failed on {text[:60]!r}: {payload.decode('utf-8', 'replace')}")
                else:
                    finished = True
                    raise TTSError(f"coqui worker sent an unexpected frame {kind!r}")
        finally:
            if not finished:
                self._cancel_and_drain()

    def warm_up(self) -> None:
        """One short synthesis (first-call costs in torch and the phonemiser)."""
        for _ in self.synthesize("Hello there."):
            pass

    # --- process handling ---

    def close(self) -> None:
        """Ask the worker to quit; kill it if it does not within 5 s. Idempotent."""
        proc = getattr(self, "_proc", None)
        if proc is None or proc.poll() is not None:
            return
        try:
            self._send(b"Q")
            proc.stdin.close()
        except (OSError, TTSError):
            pass
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> CoquiSynthesizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _pump_stderr(self) -> None:
        for line in iter(self._proc.stderr.readline, b""):
            self._stderr_tail.append(line.decode("utf-8", "replace").rstrip())

    def _tail(self) -> str:
        if self._proc.poll() is not None:  # let the reader catch the dying worker's last lines
            self._stderr_thread.join(timeout=0.5)
        lines = [line for line in self._stderr_tail if line.strip()][-8:]
        return ("\nworker stderr:\n" + "\n".join(lines)) if lines else ""

    def _send(self, kind: bytes, payload: bytes = b"") -> None:
        try:
            self._proc.stdin.write(_HEADER.pack(kind, len(payload)) + payload)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise TTSError(f"the coqui worker is gone (exit {self._proc.poll()}){self._tail()}") from exc

    def _read(self, n: int, deadline: float) -> bytes:
        fd = self._proc.stdout.fileno()
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TTSError(f"the coqui worker sent nothing for {self._timeout_s:.0f} s{self._tail()}")
            chunk = os.read(fd, max(65536, n - len(self._buf)))
            if not chunk:
                raise TTSError(f"the coqui worker exited (code {self._proc.wait()}){self._tail()}")
            self._buf += chunk
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _recv(self, timeout_s: float) -> tuple[bytes, bytes]:
        deadline = time.monotonic() + timeout_s
        kind, length = _HEADER.unpack(self._read(_HEADER.size, deadline))
        if length > _MAX_PAYLOAD:
            raise TTSError(f"coqui worker frame of {length} bytes: the stream is corrupt")
        return kind, self._read(length, deadline) if length else b""

    def _cancel_and_drain(self) -> None:
        try:
            self._send(b"C")
            while True:
                kind, _ = self._recv(self._timeout_s)
                if kind in (b"E", b"X"):
                    return
        except TTSError:
            self.close()
