"""hibari-tts (PyPI `hibari-tts`, Apache-2.0): a 7.9 MB ONNX voice distilled from Kokoro-82M, 24 kHz.

A low-latency option once warmed up (its time to first audio next to the other engines: docs/speaking.md,
`headstart bench tts`). Only the voice inside
the wheel ("heart") or one already in hibari's cache is used: hibari would otherwise download other
voices on first use, and headstart never downloads behind the user's back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from headstart.tts.base import EngineNotAvailableError, TTSError, fade_edges, has_speech_content

HIBARI_SAMPLE_RATE_HZ = 24_000
DEFAULT_VOICE = "heart"
_DIGIT_RUN_RE = re.compile(r"\d{4,}")


def _spell_long_digit_runs(text: str) -> str:
    """ "12345" -> "1 2 3 4 5" (each digit a word hibari can say)."""
    return _DIGIT_RUN_RE.sub(lambda m: " ".join(m.group(0)), text)


class HibariSynthesizer:
    """A hibari voice run by onnxruntime with an explicit thread count.

    Args:
        voice: a hibari voice name; "heart" is in the wheel, others must already be in hibari's cache
            (`HIBARI_HOME`, else the user cache dir).
        threads: onnxruntime intra-op threads (ThreadPlan.tts_threads); inter-op threads are set to the
            same count by hibari itself.
        speed: speaking rate (1.0 = the voice's pace; 0.5 slow .. 2.0 fast).
        seed: fixes hibari's noise component so repeated calls give identical audio; None: random.

    Raises:
        EngineNotAvailableError: hibari-tts is not installed.
        TTSError: an unknown voice, or a voice that would have to be downloaded (the message says so).
        ValueError: threads < 1 or speed <= 0.
    """

    sample_rate: int = HIBARI_SAMPLE_RATE_HZ

    def __init__(
        self, voice: str = DEFAULT_VOICE, threads: int = 1, speed: float = 1.0, seed: int | None = 0
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        try:
            from hibari import Hibari
            from hibari.voices import VOICES, cache_dir, voice_path
        except ImportError as exc:
            raise EngineNotAvailableError(f"hibari-tts is not installed: pip install hibari-tts==0.2.1 ({exc})") from exc
        if voice not in VOICES:
            raise TTSError(f"unknown hibari voice {voice!r}; known: {', '.join(VOICES)}")
        try:
            path = voice_path(voice, download_missing=False)  # never download
        except FileNotFoundError as exc:
            raise TTSError(
                f"hibari voice {voice!r} is not on this machine (only {DEFAULT_VOICE!r} is in the package; "
                f"others live in {cache_dir()}): headstart does not download voices; use voice "
                f"{DEFAULT_VOICE!r} or copy the file there yourself"
            ) from exc
        try:
            self._tts = Hibari(voice=voice, model=path, threads=threads)
        except Exception as exc:  # onnxruntime raises its own types for a damaged file
            raise TTSError(f"hibari voice {voice!r} at {path} did not load: {exc}") from exc
        if int(self._tts.sample_rate) != self.sample_rate:
            raise TTSError(f"hibari reports {self._tts.sample_rate} Hz, expected {self.sample_rate} Hz")
        self._speed = float(speed)
        self._seed = seed
        self.name = f"hibari:{voice}"
        self.threads = threads

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        """Yield float32 mono audio at 24 kHz, one array per sentence hibari finds in `text`.
        Empty or punctuation-only text yields nothing; characters the voice has no phoneme for are
        skipped by hibari's G2P.

        Each sentence is synthesised whole (hibari's unit). A sentence hibari's G2P rejects (e.g. a
        40-digit number) is retried with long digit runs read digit by digit.

        Raises:
            TTSError: hibari failed on a sentence even after that retry.
        """
        if not has_speech_content(text):
            return
        for sentence in self._tts.split_sentences(text):
            audio = self._sentence(sentence)
            if audio is not None and audio.size:
                yield fade_edges(np.clip(audio, -1.0, 1.0), self.sample_rate)

    def _sentence(self, sentence: str) -> np.ndarray | None:
        # hibari's G2P raises on some input (digit runs past its number-word table); read such runs
        # digit by digit rather than fail the whole reply.
        for attempt in (sentence, _spell_long_digit_runs(sentence)):
            try:
                parts = list(self._tts.stream(attempt, speed=self._speed, seed=self._seed))
            except Exception as exc:  # G2P/ONNX errors on odd text
                error = exc
                continue
            return np.concatenate(parts).astype(np.float32) if parts else None
        raise TTSError(f"hibari could not speak {sentence[:60]!r}: {error}") from error

    def warm_up(self) -> None:
        """One short sentence (hibari's first call pays ~0.5 s of G2P and ONNX set-up)."""
        for _ in self.synthesize("Hello there."):
            pass
