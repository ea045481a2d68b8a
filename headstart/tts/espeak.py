"""espeak-ng from the system (Debian package `espeak-ng`): robotic but needs no model; a fallback."""

from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Iterator

import numpy as np

from headstart.tts.base import EngineNotAvailableError, TTSError, fade_edges, has_speech_content

ESPEAK_SAMPLE_RATE_HZ = 22_050


class EspeakSynthesizer:
    """Runs `espeak-ng --stdout` once per text and parses its WAV output with soundfile.

    Text goes in on stdin (never as an argument, so text starting with "-" is not an option).

    Args:
        voice: an espeak-ng voice name ("en-us").
        words_per_minute: speaking rate.
        executable: path of espeak-ng; default: found on PATH.
        timeout_s: the most one call may take before it is an error.

    Raises:
        EngineNotAvailableError: espeak-ng is not installed.
    """

    sample_rate: int = ESPEAK_SAMPLE_RATE_HZ

    def __init__(
        self,
        voice: str = "en-us",
        words_per_minute: int = 175,
        executable: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        exe = executable or shutil.which("espeak-ng")
        if exe is None or shutil.which(exe) is None:
            raise EngineNotAvailableError(
                "espeak-ng is not installed (looked for "
                f"{executable or 'espeak-ng on PATH'}): install it with `sudo apt-get install espeak-ng`"
            )
        self._exe = exe
        self._voice = voice
        self._wpm = int(words_per_minute)
        self._timeout_s = timeout_s
        self.name = f"espeak-ng:{voice}"

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        """Yield the speech for `text` as one float32 array at 22050 Hz (nothing for empty text).

        Raises:
            TTSError: espeak-ng failed or timed out, or its output was not a WAV file.
        """
        if not has_speech_content(text):
            return
        import soundfile as sf

        try:
            proc = subprocess.run(
                [self._exe, "--stdin", "--stdout", "-v", self._voice, "-s", str(self._wpm)],
                input=text.encode("utf-8"),
                capture_output=True,
                timeout=self._timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise TTSError(f"espeak-ng took over {self._timeout_s} s for {len(text)} characters") from exc
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise TTSError(f"espeak-ng failed (exit {proc.returncode}): {err}")
        try:
            samples, rate = sf.read(io.BytesIO(proc.stdout), dtype="float32", always_2d=True)
        except (sf.LibsndfileError, RuntimeError) as exc:
            raise TTSError(f"espeak-ng did not write a WAV file: {exc}") from exc
        mono = samples.mean(axis=1).astype(np.float32)
        if rate != self.sample_rate:
            from headstart.audio import resample

            mono = resample(mono, int(rate), self.sample_rate)
        if mono.size:
            yield fade_edges(mono, self.sample_rate)

    def warm_up(self) -> None:
        """One short call (loads espeak-ng's data into the page cache)."""
        for _ in self.synthesize("Hello."):
            pass
