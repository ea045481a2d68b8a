"""The interface every speech synthesiser implements, and the small helpers they share."""

from __future__ import annotations

import unicodedata

import numpy as np

from headstart.seams import Synthesizer  # the interface, in the shared seams module

__all__ = ["UNSPEAKABLE_FALLBACK", "EngineNotAvailableError", "Synthesizer", "TTSError", "fade_edges",
           "has_speech_content", "is_speakable"]


class TTSError(RuntimeError):
    """A synthesiser failed (bad model file, engine process error)."""


class EngineNotAvailableError(TTSError):
    """The engine's program or package is not installed; the message says how to install it."""


# What the user hears instead of silence when a reply holds only words the voice cannot speak.
UNSPEAKABLE_FALLBACK = "Sorry, I can only speak English."


def has_speech_content(text: str) -> bool:
    """True if `text` holds a letter or digit of any script (something an engine may pronounce)."""
    return any(ch.isalnum() for ch in text)


def is_speakable(text: str) -> bool:
    """True if `text` holds a Latin-script letter or a digit: what the English voices say. Other
    scripts ("こんにちは", "你好", "Привет") pass the normaliser unchanged and the voices make nothing of
    them (hibari: no audio; Piper: letter names)."""
    return any(ch.isdigit() or (ch.isalpha() and unicodedata.name(ch, "").startswith("LATIN")) for ch in text)


def fade_edges(samples: np.ndarray, sample_rate: int, fade_s: float = 0.004) -> np.ndarray:
    """Apply a short linear fade-in and fade-out so back-to-back chunks start and end at zero (no
    clicks at chunk joins). Returns a new float32 array of the same shape (num_samples,)."""
    out = np.asarray(samples, dtype=np.float32).copy()
    n = min(int(round(fade_s * sample_rate)), out.shape[0] // 2)
    if n > 0:
        ramp = np.linspace(0.0, 1.0, n, endpoint=False, dtype=np.float32)
        out[:n] *= ramp
        out[-n:] *= ramp[::-1]
    return out
